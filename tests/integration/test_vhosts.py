#!/usr/bin/env python3
"""Virtual hosting: mod_simple_vhost (a directory per host below a server root, a default host)
and mod_evhost (a pattern over the host's labels). The host's directory is the document root
for everything (static files, index files, directory listings, mod_alias on top); a site made or
removed while the server runs is seen by the next request; hosts alternating over the same paths
never get each other's files (the open-file cache must not key on a directory opened for one
request); names that could lead elsewhere get the default. Compared with lighttpd 1.4 in
test_lighttpd_gw (examples/lighttpd/vhosts)."""
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server  # noqa: E402


def get(srv, host, target=b"/"):
    return test_core.request(srv, b"GET " + target + b" HTTP/1.1\r\nHost: " + host +
                             b"\r\nConnection: close\r\n\r\n")[:3]


class SimpleVhost(unittest.TestCase):
    def setUp(self):
        files = {"plain/index.html": b"configured\n"}
        for h in ("www.example.org", "mail.example.org"):
            files[f"servers/{h}/pages/index.html"] = f"{h} index\n".encode()
            files[f"servers/{h}/pages/same.txt"] = f"{h} same\n".encode()
        files["servers/mail.example.org/pages/sub/x.txt"] = b"x"
        files["shared/s.txt"] = b"alias target\n"
        self.srv = Server('server.modules = ( "mod_simple_vhost", "mod_alias", "mod_dirlisting", '
                          '"mod_staticfile" )\nindex-file.names = ( "index.html" )\n', files)
        root = self.srv.root
        with open(self.srv.conf, "a") as f:
            f.write(f'server.document-root := "{root}/plain"\n'
                    f'simple-vhost.server-root = "{root}/servers/"\n'
                    'simple-vhost.default-host = "www.example.org"\n'
                    'simple-vhost.document-root = "pages"\n'
                    f'alias.url = ( "/shared/" => "{root}/shared/" )\n'
                    '$HTTP["url"] =^ "/sub/" { dir-listing.activate = "enable" }\n')
        self.srv.start()
        self.addCleanup(self.srv.stop)

    def test_host_directories_and_the_default(self):
        for host, body in ((b"www.example.org", b"www.example.org index\n"),
                           (b"mail.example.org", b"mail.example.org index\n"),
                           (b"mail.example.org:8080", b"mail.example.org index\n"),
                           (b"other.example.org", b"www.example.org index\n")):
            self.assertEqual(get(self.srv, host)[::2], (200, body), host)
        self.assertEqual(get(self.srv, b"..")[0], 400)  # not a host name at all

    def test_alternating_hosts_never_mix_files(self):
        for i in range(40):
            h = b"www.example.org" if i % 2 else b"mail.example.org"
            for target in (b"/same.txt", b"/"):
                st, _, body = get(self.srv, h, target)
                self.assertEqual(st, 200)
                self.assertTrue(body.startswith(h + b" "), (h, target, body))

    def test_hosts_change_on_one_kept_alive_connection(self):
        # The server keeps the last Host's spelling per connection: every request's own Host
        # must still count, an invalid one too, and the one after it again.
        s = self.srv.connect()
        try:
            for host, want in ((b"mail.example.org", (200, b"mail.example.org index\n")),
                               (b"mail.example.org", (200, b"mail.example.org index\n")),
                               (b"www.example.org", (200, b"www.example.org index\n")),
                               (b"MAIL.Example.org.", (200, b"mail.example.org index\n")),
                               (b"mail.example.org:8080", (200, b"mail.example.org index\n")),
                               (b"other.example.org", (200, b"www.example.org index\n")),
                               (b"mail.example.org", (200, b"mail.example.org index\n")),
                               (b"abcd.example.org", (200, b"www.example.org index\n"))):
                s.sendall(b"GET / HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
                st, _, body, rest = test_core.read_response(s)
                self.assertEqual(((st, body), rest), (want, b""), host)
            s.sendall(b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n")  # refused, then closed
            self.assertEqual(test_core.read_response(s)[0], 400)
        finally:
            s.close()

    def test_sites_made_and_removed_while_serving(self):
        site = os.path.join(self.srv.root, "servers", "new.example.org", "pages")
        self.assertEqual(get(self.srv, b"new.example.org")[2], b"www.example.org index\n")
        os.makedirs(site)
        with open(os.path.join(site, "index.html"), "w") as f:
            f.write("new\n")
        self.assertEqual(get(self.srv, b"new.example.org")[2], b"new\n")
        shutil.rmtree(os.path.dirname(site))
        self.assertEqual(get(self.srv, b"new.example.org")[2], b"www.example.org index\n")
        # No site and no default: the configured document root.
        os.rename(os.path.join(self.srv.root, "servers", "www.example.org"),
                  os.path.join(self.srv.root, "servers", "gone"))
        self.assertEqual(get(self.srv, b"nothing.example.org")[2], b"configured\n")

    def test_listing_and_alias_under_the_host(self):
        st, _, body = get(self.srv, b"mail.example.org", b"/sub/")
        self.assertEqual(st, 200)
        self.assertIn(b"x.txt", body)
        self.assertEqual(get(self.srv, b"www.example.org", b"/sub/")[0], 404)
        self.assertEqual(get(self.srv, b"mail.example.org", b"/shared/s.txt")[::2],
                         (200, b"alias target\n"))


class Evhost(unittest.TestCase):
    def test_pattern_parts(self):
        files = {"plain/index.html": b"configured\n",
                 "ev/example.org/shop/index.html": b"shop\n",
                 "ev/example.org/full.example.org/index.html": b"full\n",
                 "ev/l/org/index.html": b"first letter of sub1, tld\n"}
        srv = Server('server.modules = ( "mod_evhost", "mod_staticfile" )\n'
                     'index-file.names = ( "index.html" )\n', files)
        root = srv.root
        with open(srv.conf, "a") as f:
            f.write(f'server.document-root := "{root}/plain"\n'
                    f'evhost.path-pattern = "{root}/ev/%0/%3/"\n'
                    f'$HTTP["host"] =~ "^full\\." {{ evhost.path-pattern = "{root}/ev/%0/%_/" }}\n'
                    f'$HTTP["host"] =~ "^letter\\." {{ evhost.path-pattern = "{root}/ev/%{{3.1}}/%1/" }}\n')
        srv.start()
        self.addCleanup(srv.stop)
        self.assertEqual(get(srv, b"shop.example.org")[2], b"shop\n")
        self.assertEqual(get(srv, b"www.shop.example.org:81")[2], b"shop\n")  # %3 is still shop
        self.assertEqual(get(srv, b"none.example.org")[2], b"configured\n")
        self.assertEqual(get(srv, b"localhost")[2], b"configured\n")
        self.assertEqual(get(srv, b"letter.sx.org")[2], b"first letter of sub1, tld\n")
        self.assertEqual(get(srv, b"full.example.org")[2], b"full\n")  # %_: the whole host

    def test_refused_patterns(self):
        for pattern, words in (("%9x/", ["absolute"]), ("/srv/%x/", ['"%x/"', "placeholder"]),
                               ("/srv/%{3.}/", ["placeholder"])):
            test_core.assert_refused(self, f'server.modules = ( "mod_evhost" )\n'
                                           f'evhost.path-pattern = "{pattern}"\n', words)

if __name__ == "__main__":
    test_core.main()
