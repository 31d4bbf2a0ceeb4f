#!/usr/bin/env python3
"""proxy-core.rewrite-request and proxy-core.rewrite-response (lighttpd 1.5's mod_proxy_core),
and proxy.forwarded (lighttpd 1.4's RFC 7239 Forwarded field for HTTP back ends):
what an HTTP back end receives (its request line from "_uri", a Host and another field from
their rules, a field the client did not send set from ""), a response field rewritten on its way
to the client, and for FastCGI (php-cgi spawned by spawn-fcgi) REQUEST_URI, DOCUMENT_ROOT,
PATH_INFO and SCRIPT_NAME; names that are neither fields nor lighttpd 1.5's variables are
refused at start-up."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, free_port  # noqa: E402
from test_proxy import FakeBackend, PHP, SPAWN, kill_tree, spawn_php, wait_port  # noqa: E402

ENV_PHP = b"""<?php
foreach (["REQUEST_URI", "DOCUMENT_ROOT", "PATH_INFO", "SCRIPT_NAME", "HTTP_X_WHO"] as $k)
    echo $k, "=", $_SERVER[$k] ?? "-", "\\n";
"""


def get(srv, target, extra=b""):
    return test_core.request(srv, b"GET " + target + b" HTTP/1.1\r\nHost: www.example.org\r\n" +
                             extra + b"Connection: close\r\n\r\n")


class HttpBackend(unittest.TestCase):
    def test_request_and_response(self):
        echo, bodiless = FakeBackend("echo"), FakeBackend("bodiless")
        self.addCleanup(echo.close)
        self.addCleanup(bodiless.close)
        srv = Server(
            f'$HTTP["url"] =^ "/app/" {{ proxy-core.backends = ( "127.0.0.1:{echo.port}" )\n'
            ' proxy-core.rewrite-request = ( "_uri" => ( "^/app(/.*)$" => "$1" ),\n'
            '   "Host" => ( ".*" => "backend.internal" ),\n'
            '   "X-Who" => ( "^$" => "nobody", "^(.+)$" => "was-$1" ) ) }\n'
            f'$HTTP["url"] =^ "/b/" {{ proxy-core.backends = ( "127.0.0.1:{bodiless.port}" )\n'
            ' proxy-core.rewrite-response = ( "ETag" => ( "^\\"e\\"$" => "\\"rewritten\\"" ) ) }\n')
        srv.start()
        self.addCleanup(srv.stop)
        st, _, body = get(srv, b"/app/x/y?q=1")
        self.assertEqual(st, 200)
        head = body.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        self.assertEqual(head[0], b"GET /x/y?q=1 HTTP/1.1")
        self.assertIn(b"Host: backend.internal", head)
        self.assertIn(b"X-Who: nobody", head)
        st, _, body = get(srv, b"/app/", b"X-Who: jan\r\n")
        self.assertIn(b"X-Who: was-jan", body.split(b"\r\n"))
        self.assertNotIn(b"X-Who: jan", body.split(b"\r\n"))
        st, h, _ = get(srv, b"/b/304")
        self.assertEqual((st, h.get("etag")), (304, '"rewritten"'))

    def test_forwarded(self):
        # lighttpd 1.4's proxy.forwarded: an RFC 7239 element of our own after the client's
        # Forwarded elements, or after its X-Forwarded-For turned into for= elements.
        echo = FakeBackend("echo")
        self.addCleanup(echo.close)
        srv = Server(f'proxy-core.backends = ( "127.0.0.1:{echo.port}" )\n'
                     'proxy.forwarded = ( "for" => 1, "by" => "enable", "proto" => 1, '
                     '"host" => 1, "remote_user" => 0 )\n')
        srv.start()
        self.addCleanup(srv.stop)
        me = f'by="127.0.0.1:{srv.port}";proto=http;host="www.example.org"'.encode()

        def sent(extra):
            lines = get(srv, b"/x", extra)[2].split(b"\r\n\r\n", 1)[0].split(b"\r\n")
            return [l for l in lines if l.lower().startswith(b"forwarded:")]
        self.assertEqual(sent(b""), [b"Forwarded: for=127.0.0.1;" + me])
        self.assertEqual(sent(b"X-Forwarded-For: 198.51.100.2, 2001:db8::7\r\n"),
                         [b'Forwarded: for=198.51.100.2, for="[2001:db8::7]", for=127.0.0.1;' + me])
        self.assertEqual(sent(b'Forwarded: for="_hidden";proto=https\r\n'
                              b"X-Forwarded-For: 198.51.100.2\r\n"),
                         [b'Forwarded: for="_hidden";proto=https, for=127.0.0.1;' + me])

    def test_refused_names(self):
        for conf, words in (('proxy-core.rewrite-request = ( "_path" => ( "a" => "b" ) )\n',
                             ['"_path"', '"_uri"']),
                            ('proxy-core.rewrite-response = ( "_uri" => ( "a" => "b" ) )\n',
                             ['"_uri" is not a header name']),
                            ('proxy-core.rewrite-request = ( "Host" => "x" )\n', ["each entry"]),
                            ('proxy-core.rewrite-request = ( "Host" => ( "(" => "x" ) )\n',
                             ["proxy-core.rewrite-request"]),
                            ('proxy.forwarded = ( "port" => 1 )\n', ['"port"', "for, by"]),
                            ('proxy.forwarded = ( "for" => 2 )\n', ['"for" must be'])):
            test_core.assert_refused(self, conf, words)


@unittest.skipUnless(PHP and SPAWN, "php-cgi and spawn-fcgi are needed")
class FastCGI(unittest.TestCase):
    def test_cgi_variables(self):
        tmp = tempfile.mkdtemp(prefix="sl_pxrw_")
        self.addCleanup(shutil.rmtree, tmp, True)
        other = os.path.join(tmp, "other")
        os.makedirs(os.path.join(other, "php"))
        with open(os.path.join(other, "php", "env.php"), "wb") as f:
            f.write(ENV_PHP)
        port = free_port()
        pid = spawn_php(["-a", "127.0.0.1", "-p", str(port)])
        self.addCleanup(kill_tree, pid)
        wait_port(port)
        srv = Server(
            f'$HTTP["url"] =^ "/php/" {{ proxy-core.protocol = "fastcgi"\n'
            f' proxy-core.backends = ( "127.0.0.1:{port}" )\n'
            ' proxy-core.rewrite-request = ( "_uri" => ( "^/php/env\\.php(.*)$" => "/app$1" ),\n'
            f'   "_docroot" => ( ".*" => "{other}" ),\n'
            '   "_pathinfo" => ( "^/php/env\\.php(/.*)$" => "$1" ),\n'
            '   "_scriptname" => ( "^(/php/env\\.php)" => "$1" ),\n'
            '   "X-Who" => ( ".*" => "fcgi" ) ) }\n',
            {"php/env.php": b"<?php echo 'the document root was not rewritten';"})
        srv.start()
        self.addCleanup(srv.stop)
        st, _, body = get(srv, b"/php/env.php/extra?k=v")
        self.assertEqual(st, 200, body)
        env = dict(line.split("=", 1) for line in body.decode().splitlines())
        self.assertEqual(env["REQUEST_URI"], "/app/extra?k=v")
        self.assertEqual(env["DOCUMENT_ROOT"], other)
        self.assertEqual(env["PATH_INFO"], "/extra")
        self.assertEqual(env["SCRIPT_NAME"], "/php/env.php")
        self.assertEqual(env["HTTP_X_WHO"], "fcgi")


if __name__ == "__main__":
    test_core.main()
