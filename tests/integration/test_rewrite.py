#!/usr/bin/env python3
"""mod_rewrite in seekless's own terms (what lighttpd 1.4 does with the same config is compared
in test_lighttpd_gw's rewrite case): a rule whose result is no path, a rule loop, a result too
long or not a valid target each answer that one request with an error and a log line while the
server goes on; conditions see the new target; rules of a later block replace the top level's;
the if-not-file lookup of a path the dentry cache does not hold runs on a stat thread."""
import json
import os
import re
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import stop_at_end  # noqa: E402
from test_core import Server, read_response, request  # noqa: E402

FILES = {"a.txt": b"A\n", "x/f.txt": b"xf\n", "y/f.txt": b"yf\n", "cold/d/here.txt": b"here\n",
         "fallback.txt": b"fallback\n"}


def get(srv, target, host=b"t", conn=None):
    s = conn or srv.connect()
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
    st, h, body, _ = read_response(s)
    if conn is None:
        s.close()
    return st, body


def log_of(srv):
    with open(srv.log, errors="replace") as f:
        return f.read()


class Rewrite(unittest.TestCase):
    def test_bad_results_cost_one_request(self):
        srv = Server('server.modules = ( "mod_rewrite", "mod_staticfile" )\n'
                     'url.rewrite-once = ( "^/bad" => "no-slash", "^/long/(.*)" => "/$1$1$1$1",'
                     ' "^/nul" => "/a%%00b", "^/ok" => "/a.txt" )\n'
                     'url.rewrite-repeat = ( "^/forever" => "/forever" )\n', FILES).start()
        stop_at_end(self, srv)
        s = srv.connect()
        self.assertEqual(get(srv, b"/ok", conn=s), (200, b"A\n"))
        self.assertEqual(get(srv, b"/bad")[0], 500)
        self.assertEqual(get(srv, b"/forever")[0], 500)
        self.assertEqual(get(srv, b"/long/" + b"z" * 2100)[0], 500)  # over 8 KiB
        self.assertEqual(get(srv, b"/nul")[0], 400)  # the new target is refused like a sent one
        # A kept connection opened before goes on being served.
        self.assertEqual(get(srv, b"/ok", conn=s), (200, b"A\n"))
        s.close()
        log = log_of(srv)
        self.assertIn("mod_rewrite: the result is not a path (does not begin with '/'): /bad", log)
        self.assertIn("GET /forever: came back more than 100 times (rewrite rules in a loop?)", log)
        self.assertIn("mod_rewrite: the result is too long: /long/zzz", log)

    def test_conditions_see_the_new_target_and_blocks_replace_rules(self):
        srv = Server('server.modules = ( "mod_rewrite", "mod_staticfile" )\n'
                     'url.rewrite-once = ( "^/a/(.*)" => "/x/$1", "^/q$" => "/x/f.txt?k=v" )\n'
                     '$HTTP["host"] == "other" {\n'
                     '  url.rewrite-repeat = ( "^/b/(.*)" => "/y/$1" )\n'
                     '}\n'
                     '$HTTP["url"] =~ "^/x/" { url.access-deny = ( "f.txt" ) }\n'
                     '$HTTP["querystring"] == "k=v" { url.access-deny = ( ) }\n', FILES).start()
        stop_at_end(self, srv)
        # /a/f.txt becomes /x/f.txt, which the /x/ block denies.
        self.assertEqual(get(srv, b"/a/f.txt")[0], 403)
        # The query the rule wrote is what the querystring condition sees.
        self.assertEqual(get(srv, b"/q"), (200, b"xf\n"))
        # Host "other": its block's url.rewrite-repeat replaces the top level's rules.
        self.assertEqual(get(srv, b"/b/f.txt", host=b"other"), (200, b"yf\n"))
        self.assertEqual(get(srv, b"/a/f.txt", host=b"other")[0], 404)
        self.assertEqual(get(srv, b"/b/f.txt")[0], 404)

    def test_not_file_lookup_of_cold_paths_on_a_stat_thread(self):
        srv = Server('server.modules = ( "mod_rewrite", "mod_status", "mod_staticfile" )\n'
                     'status.status-url = "/st"\nserver.max-stat-threads = 2\n'
                     'url.rewrite-if-not-file = ( "^/cold/" => "/fallback.txt" )\n', FILES).start()
        stop_at_end(self, srv)
        def completed():
            st, body = get(srv, b"/st?json")
            pools = {p["name"]: p for p in json.loads(body)["pools"]}
            return pools["stat"]["completed"]
        before = completed()
        for target, want in ((b"/cold/d/here.txt", b"here\n"), (b"/cold/d/gone.txt", b"fallback\n"),
                             (b"/cold/d/", b"fallback\n")):
            # Dentries and inodes dropped (2: not the page cache): the lookup cannot be
            # answered from memory, so it goes to a thread instead of blocking the loop.
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2")
            self.assertEqual(get(srv, target), (200, want), target)
        self.assertGreaterEqual(completed() - before, 3)
        # Warm: answered on the loop, the same way.
        self.assertEqual(get(srv, b"/cold/d/gone.txt"), (200, b"fallback\n"))
        self.assertEqual(get(srv, b"/cold/d/here.txt"), (200, b"here\n"))

    def test_client_gone_while_the_lookup_is_out(self):
        # The connection closes while its if-not-file lookup is on a thread: nothing is written
        # to it, nothing leaks (the sanitizer build and valgrind check), other clients are served.
        srv = Server('server.modules = ( "mod_rewrite", "mod_staticfile" )\n'
                     'server.max-stat-threads = 1\n'
                     'url.rewrite-if-not-file = ( "^/cold/" => "/fallback.txt" )\n', FILES).start()
        stop_at_end(self, srv)
        for i in range(20):
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2")
            s = srv.connect()
            s.sendall(b"GET /cold/d/gone%d.txt HTTP/1.1\r\nHost: t\r\n\r\n" % i)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        self.assertEqual(get(srv, b"/cold/d/x"), (200, b"fallback\n"))


if __name__ == "__main__":
    test_core.main()
