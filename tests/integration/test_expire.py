#!/usr/bin/env python3
"""mod_expire and mod_setenv in seekless's own terms (lighttpd 1.4 with the same config is
compared in test_lighttpd_gw's setenv-expire case): a lifetime from the file's modification
time, Expires for HTTP/1.0, nothing on errors or when the answer has its own Cache-Control,
the response fields on error pages and listings too."""
import email.utils
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import stop_at_end  # noqa: E402
from test_core import Server, request  # noqa: E402


def get(srv, target, version=b"1.1"):
    host = b"Host: t\r\n" if version == b"1.1" else b""
    return request(srv, b"GET " + target + b" HTTP/" + version + b"\r\n" + host +
                   b"Connection: close\r\n\r\n")


class Expire(unittest.TestCase):
    def test_lifetimes(self):
        srv = Server('expire.url = ( "/old/" => "modification plus 1 hours", '
                     '"/new/" => "modification plus 3650 days" )\n'
                     'expire.mimetypes = ( "text/" => "access plus 10 minutes" )\n'
                     '$HTTP["url"] =~ "^/own/" { setenv.set-response-header = '
                     '( "Cache-Control" => "no-store" ) }\n'
                     'dir-listing.activate = "enable"\n',
                     {"old/a.bin": b"a", "new/b.bin": b"b", "t.txt": b"t", "own/o.txt": b"o",
                      "list/x.txt": b"x"})
        past = time.time() - 86400
        os.utime(os.path.join(srv.root, "old/a.bin"), (past, past))
        srv.start()
        stop_at_end(self, srv)
        # Modified a day ago plus an hour: already past, so no later than now.
        st, h, _ = get(srv, b"/old/a.bin")
        self.assertEqual((st, h["cache-control"]), (200, "max-age=0"))
        st, h, _ = get(srv, b"/new/b.bin")
        self.assertAlmostEqual(int(h["cache-control"].split("=")[1]), 3650 * 86400, delta=5)
        st, h, _ = get(srv, b"/t.txt")
        self.assertEqual(h["cache-control"], "max-age=600")
        # HTTP/1.0: Expires instead, ten minutes ahead.
        st, h, _ = get(srv, b"/t.txt", version=b"1.0")
        self.assertNotIn("cache-control", h)
        when = email.utils.parsedate_to_datetime(h["expires"]).timestamp()
        self.assertAlmostEqual(when, time.time() + 600, delta=5)
        # Errors get none; an answer with its own Cache-Control keeps it.
        st, h, _ = get(srv, b"/missing.txt")
        self.assertEqual(st, 404)
        self.assertNotIn("cache-control", h)
        st, h, _ = get(srv, b"/own/o.txt")
        self.assertEqual(h["cache-control"], "no-store")
        # A listing is text/html: the text/ lifetime.
        st, h, _ = get(srv, b"/list/")
        self.assertEqual((st, h["cache-control"]), (200, "max-age=600"))

    def test_response_fields_on_every_answer_and_server_tag(self):
        srv = Server('setenv.add-response-header = ( "X-Test" => "1" )\n'
                     'server.tag = ""\n'
                     '$HTTP["url"] =~ "^/named" { setenv.set-response-header = ( "Server" => "mine" ) }\n'
                     '$HTTP["url"] =~ "^/tagged" { server.tag = "edge/2" }\n',
                     {"a.txt": b"a", "named.txt": b"n", "tagged.txt": b"t"}).start()
        stop_at_end(self, srv)
        for target, status in ((b"/a.txt", 200), (b"/missing", 404), (b"/", 403)):
            st, h, _ = get(srv, target)
            self.assertEqual((st, h.get("x-test")), (status, "1"), target)
            self.assertNotIn("server", h)  # server.tag = "": none
        # A module's Server field stands instead of the tag; a block's tag replaces it.
        st, h, raw = get(srv, b"/named.txt")
        self.assertEqual(h.get("server"), "mine")
        self.assertEqual(get(srv, b"/tagged.txt")[1].get("server"), "edge/2")


if __name__ == "__main__":
    test_core.main()
