#!/usr/bin/env python3
"""mod_dirlisting in seekless's own terms (what lighttpd 1.4 lists for the same config is
compared in test_lighttpd_gw's dirlisting case): a directory of 100,000 entries is listed whole
and sorted while other clients are served; ?C= and ?O= sort by another column; dot files show
when told; names that are markup or URL syntax are escaped; a client that leaves mid-listing
costs nothing; a listing through a refused symlink is refused."""
import json
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import stop_at_end  # noqa: E402
from test_core import Server, read_response  # noqa: E402

ROW = re.compile(rb'<tr(?: class="d")?><td class="n"><a href="([^"]*)">([^<]*)</a>/?</td>'
                 rb'<td class="m">([^<]*)</td><td class="s">([^<]*)</td><td class="t">([^<]*)</td>')


def get(srv, target, timeout=60):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=timeout) as s:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        st, h, body, _ = read_response(s)
        return st, h, body


def rows(body):
    return [m.groups() for m in ROW.finditer(body) if m.group(1) != b"../"]


class DirListing(unittest.TestCase):
    def test_a_huge_directory_while_files_are_served(self):
        srv = Server('dir-listing.activate = "enable"\nserver.max-stat-threads = 2\n',
                     {"small.txt": b"small\n"})
        big = os.path.join(srv.root, "big")
        os.mkdir(big)
        n = 100000
        for i in range(n):
            os.close(os.open(os.path.join(big, "entry-%06d-with-a-longer-name.dat" % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))
        srv.start()
        stop_at_end(self, srv)
        done = {}

        def listing():
            done["t0"] = time.monotonic()
            done["resp"] = get(srv, b"/big/", timeout=300)
            done["t1"] = time.monotonic()
        t = threading.Thread(target=listing)
        t.start()
        served = []
        while t.is_alive():
            st, h, body = get(srv, b"/small.txt")
            self.assertEqual((st, body), (200, b"small\n"))
            served.append(time.monotonic())
        t.join()
        st, h, body = done["resp"]
        self.assertEqual(st, 200)
        self.assertEqual(int(h["content-length"]), len(body))
        r = rows(body)
        self.assertEqual(len(r), n)
        names = [x[1] for x in r]
        self.assertEqual(names, sorted(names))
        self.assertEqual(r[0][0], b"entry-000000-with-a-longer-name.dat")
        self.assertEqual(r[0][3], b"0.0K")
        # Files were answered while the listing was being made: it never held the loop.
        during = [x for x in served if done["t0"] < x < done["t1"]]
        self.assertGreater(len(during), 0, "no file served while the listing was made")

    def test_sort_columns_dotfiles_and_escaping(self):
        files = {"b.txt": b"x" * 3000, "a.txt": b"x" * 50, "c.txt": b"x" * 200000,
                 ".dot": b"d", 'q"<&>\'.txt': b"q", "d/x": b"", "%41?#.txt": b"e"}
        srv = Server('dir-listing.activate = "enable"\n'
                     '$HTTP["url"] =~ "^/d/" { dir-listing.hide-dotfiles = "disable" }\n',
                     files)
        os.utime(os.path.join(srv.root, "a.txt"), (1000000, 1000000))
        os.utime(os.path.join(srv.root, "c.txt"), (2000000000, 2000000000))
        open(os.path.join(srv.root, "d", ".seen"), "w").close()
        srv.start()
        stop_at_end(self, srv)
        st, h, body = get(srv, b"/")
        self.assertEqual((st, h["content-type"]), (200, "text/html"))
        names = [x[1] for x in rows(body)]
        self.assertEqual(names, [b"d", b"%41?#.txt", b"a.txt", b"b.txt", b"c.txt",
                                 b"q&quot;&lt;&amp;&gt;&#39;.txt"])
        hrefs = {x[1]: x[0] for x in rows(body)}
        self.assertEqual(hrefs[b"%41?#.txt"], b"%2541%3F%23.txt")  # not a query, not a fragment
        self.assertEqual(hrefs[b"q&quot;&lt;&amp;&gt;&#39;.txt"], b"q%22%3C%26%3E%27.txt")
        self.assertNotIn(b".dot", body)
        sizes = {x[1]: x[3] for x in rows(body)}
        self.assertEqual((sizes[b"a.txt"], sizes[b"b.txt"], sizes[b"c.txt"]),
                         (b"0.1K", b"2.9K", b"195.3K"))
        by_size = [x[1] for x in rows(get(srv, b"/?C=S;O=D")[2])]
        self.assertEqual(by_size[:3], [b"d", b"c.txt", b"b.txt"])  # directories first still
        by_time = [x[1] for x in rows(get(srv, b"/?C=M&O=A")[2])]
        self.assertEqual(by_time[1], b"a.txt")
        self.assertEqual(by_time[-1], b"c.txt")
        self.assertIn(b".seen", get(srv, b"/d/")[2])

    def test_listings_wait_their_turn_then_are_refused(self):
        # Half the stat threads list at once (here one), 256 more listings wait, any further
        # one is answered 503 with Retry-After; every client gets an answer.
        srv = Server('dir-listing.activate = "enable"\nserver.max-stat-threads = 2\n'
                     'server.max-connections = 2000\nstatus.status-url = "/st"\n', {"a.txt": b"a"})
        many = os.path.join(srv.root, "many")
        os.mkdir(many)
        for i in range(5000):
            os.close(os.open(os.path.join(many, "f%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
        srv.start()
        stop_at_end(self, srv)
        socks = []
        for _ in range(330):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=300)
            s.sendall(b"GET /many/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            socks.append(s)
        self.assertEqual(get(srv, b"/a.txt")[2], b"a")  # files go on meanwhile
        answers = []
        for s in socks:
            st, h, body, _ = read_response(s)
            answers.append((st, h.get("retry-after")))
            s.close()
        self.assertEqual({a for a in answers if a[0] != 200}, {(503, "2")})
        self.assertGreaterEqual(sum(a[0] == 200 for a in answers), 257)
        st = json.loads(get(srv, b"/st?json")[2])["dirlisting"][0]
        self.assertEqual((st["name"], st["running"], st["waiting"]), ("listings", 0, 0))
        self.assertEqual(st["done"], sum(a[0] == 200 for a in answers))
        self.assertEqual(st["refused"], sum(a[0] == 503 for a in answers))

    def test_clients_that_leave_and_refused_paths(self):
        srv = Server('dir-listing.activate = "enable"\nserver.follow-symlink = "disable"\n',
                     {"d/a.txt": b"a"})
        big = os.path.join(srv.root, "many")
        os.mkdir(big)
        for i in range(20000):
            os.close(os.open(os.path.join(big, "f%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
        os.symlink("d", os.path.join(srv.root, "link"))
        srv.start()
        stop_at_end(self, srv)
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(b"GET /many/ HTTP/1.1\r\nHost: t\r\n\r\n")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        self.assertEqual(get(srv, b"/link/")[0], 403)  # a symlink, not followed
        self.assertEqual(get(srv, b"/nothere/")[0], 404)
        self.assertEqual(get(srv, b"/d/")[0], 200)
        self.assertEqual(get(srv, b"/d/a.txt")[2], b"a")


if __name__ == "__main__":
    test_core.main()
