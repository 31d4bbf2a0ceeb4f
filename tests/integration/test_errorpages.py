#!/usr/bin/env python3
"""Custom error pages in seekless's own terms (lighttpd 1.4 with the same keys is compared in
test_lighttpd_gw's errorpages case): server.errorfile-prefix pages for every error the server
answers (request-head errors too), typed as .html files are, no body for HEAD, read at start-up;
server.error-handler (any error, status kept, the request becomes a GET) and
server.error-handler-404 (404 and 403, the handler's answer goes out) inside conditions, and a
handler that fails itself."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import stop_at_end  # noqa: E402
from test_core import Server, request  # noqa: E402


def ask(srv, method, target, extra=b""):
    return request(srv, method + b" " + target + b" HTTP/1.1\r\nHost: t\r\n" + extra +
                   b"Connection: close\r\n\r\n")


class ErrorPages(unittest.TestCase):
    def test_errorfile_prefix(self):
        # Relative to the config file's directory (the server's temp dir holds root/).
        srv = Server('server.errorfile-prefix = "root/errors/e-"\n'
                     'mimetype.assign = ( ".html" => "text/html; charset=utf-8" )\n'
                     'setenv.add-response-header = ( "X-Err" => "1" )\n'
                     'url.access-deny = ( ".secret" )\n',
                     {"errors/e-404.html": b"<p>gone</p>", "errors/e-400.html": b"<p>bad</p>",
                      "errors/e-405.html": b"<p>no</p>", "a.txt": b"a",
                      "x.secret": b"s"})
        srv.start()
        stop_at_end(self, srv)
        st, h, b = ask(srv, b"GET", b"/missing")
        self.assertEqual((st, b, h["content-type"], h["x-err"]),
                         (404, b"<p>gone</p>", "text/html; charset=utf-8", "1"))
        self.assertEqual(h["content-length"], "11")
        st, h, b = request(srv, b"HEAD /missing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                           head=True)
        self.assertEqual((st, b, h["content-length"]), (404, b"", "11"))
        # A request head the server cannot take gets the page too.
        st, h, b = request(srv, b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\n")
        self.assertEqual((st, b), (400, b"<p>bad</p>"))
        st, h, b = ask(srv, b"DELETE", b"/a.txt")
        self.assertEqual((st, b, h["allow"]), (405, b"<p>no</p>", "GET, HEAD"))
        # No page for 403: the built-in one.
        st, h, b = ask(srv, b"GET", b"/x.secret")
        self.assertEqual((st, h["content-type"]), (403, "text/html"))
        self.assertIn(b"403 Forbidden", b)
        # Pages are read at start-up: a page changed later shows after a reload.
        with open(os.path.join(srv.root, "errors/e-404.html"), "wb") as f:
            f.write(b"new")
        self.assertEqual(ask(srv, b"GET", b"/missing")[2], b"<p>gone</p>")

    def test_error_handlers(self):
        srv = Server('server.errorfile-prefix = "root/errors/e-"\n'
                     'url.access-deny = ( ".secret" )\n'
                     '$HTTP["url"] =^ "/app/" { server.error-handler-404 = "/err/nf.html" }\n'
                     '$HTTP["url"] =^ "/all/" { server.error-handler = "/err/any.html" }\n'
                     '$HTTP["url"] =^ "/bad/" { server.error-handler = "/err/missing.html" }\n'
                     '$HTTP["url"] =^ "/loop/" { server.error-handler-404 = "/loop/missing" }\n',
                     {"errors/e-404.html": b"E404", "errors/e-403.html": b"E403",
                      "err/nf.html": b"handler 404", "err/any.html": b"handler any",
                      "app/x.secret": b"s", "all/x.secret": b"s", "all/a.txt": b"a"})
        srv.start()
        stop_at_end(self, srv)
        # error-handler-404: what the handler answers, a static page's 200; 403 too.
        self.assertEqual(ask(srv, b"GET", b"/app/nope")[::2], (200, b"handler 404"))
        self.assertEqual(ask(srv, b"GET", b"/app/x.secret")[::2], (200, b"handler 404"))
        # error-handler: the original status with the handler's body, for any error; a
        # POST is served as a GET.
        self.assertEqual(ask(srv, b"GET", b"/all/nope")[::2], (404, b"handler any"))
        self.assertEqual(ask(srv, b"GET", b"/all/x.secret")[::2], (403, b"handler any"))
        self.assertEqual(ask(srv, b"GET", b"/all/a.txt")[::2], (200, b"a"))
        self.assertEqual(ask(srv, b"DELETE", b"/all/a.txt")[::2], (405, b"handler any"))
        # A handler that fails itself: the original error's page, not the handler's error.
        self.assertEqual(ask(srv, b"GET", b"/bad/x.secret")[::2], (403, b"E403"))
        # A handler whose URL is under its own condition runs once, not in a loop.
        self.assertEqual(ask(srv, b"GET", b"/loop/x")[::2], (404, b"E404"))
        # Elsewhere neither applies.
        self.assertEqual(ask(srv, b"GET", b"/nope")[::2], (404, b"E404"))


if __name__ == "__main__":
    test_core.main()
