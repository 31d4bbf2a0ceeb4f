#!/usr/bin/env python3
"""mod_extforward: a trusted proxy's X-Forwarded-For (or RFC 7239 Forwarded) gives the request its
client address
(the access log's %h, mod_evasive's counts, an HTTP back end's X-Forwarded-For), the peer's own
address comes back for the next request on the connection, an untrusted peer's header changes
nothing, "all" trusts every peer, and what seekless does not implement is refused at start-up.
Compared with lighttpd 1.4 on conditions and redirects in test_lighttpd_gw (examples/lighttpd/
extforward)."""
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, read_response  # noqa: E402
from test_proxy import FakeBackend  # noqa: E402
from test_evasive import hold, make_big  # noqa: E402


def lines(path, n, timeout=5):
    deadline = time.time() + timeout
    got = []
    while time.time() < deadline:
        try:
            with open(path) as f:
                got = f.read().splitlines()
        except OSError:
            pass
        if len(got) >= n:
            break
        time.sleep(0.05)
    return got


class ExtForward(unittest.TestCase):
    def start(self, conf):
        srv = Server('server.modules = ( "mod_extforward", "mod_accesslog", "mod_evasive", '
                     '"mod_redirect", "mod_proxy_core", "mod_staticfile" )\n' + conf, {"a.txt": b"a"})
        self.log = os.path.join(srv.dir, "access.log")
        with open(srv.conf, "a") as f:
            f.write(f'accesslog.filename = "{self.log}"\naccesslog.format = "%h %>s %U"\n')
        make_big(srv)
        srv.start()
        self.addCleanup(srv.stop)
        return srv

    def test_client_address_then_the_peer_again(self):
        srv = self.start('extforward.forwarder = ( "127.0.0.1" => "trust" )\n')
        s = srv.connect()
        rest = b""
        for hdr in (b"X-Forwarded-For: 198.51.100.7\r\n", b"",
                    b"X-Forwarded-For: [2001:db8::5]:4711\r\n", b"X-Forwarded-For: 10.0.0.1:80\r\n",
                    b"X-Forwarded-For: garbage\r\n"):
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n" + hdr + b"\r\n")
            st, _, _, rest = read_response(s, rest)
            self.assertEqual(st, 200)
        s.close()
        self.assertEqual(lines(self.log, 5), ["198.51.100.7 200 /a.txt", "127.0.0.1 200 /a.txt",
                                              "2001:db8::5 200 /a.txt", "10.0.0.1 200 /a.txt",
                                              "127.0.0.1 200 /a.txt"])

    def test_untrusted_peer_and_all(self):
        srv = self.start('extforward.forwarder = ( "10.0.0.0/8" => "trust" )\n'
                         '$HTTP["url"] =^ "/all/" { extforward.forwarder = ( "all" => "trust" ) }\n'
                         '$HTTP["url"] =^ "/hdr/" { extforward.headers = ( "X-Real-IP" ) }\n')
        os.makedirs(os.path.join(srv.root, "all"))
        os.makedirs(os.path.join(srv.root, "hdr"))
        for target, hdr in ((b"/a.txt", b"X-Forwarded-For: 198.51.100.7"),  # 127.0.0.1 untrusted
                            (b"/all/", b"X-Forwarded-For: 198.51.100.8, 192.0.2.1"),
                            (b"/hdr/", b"X-Real-IP: 198.51.100.9")):
            test_core.request(srv, b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n" + hdr +
                              b"\r\nConnection: close\r\n\r\n")
        got = lines(self.log, 3)
        # /hdr/: 127.0.0.1 is not trusted there (no "all"): the header is ignored.
        # (the lines in any order: with several loops one may be written after the next's)
        self.assertEqual(sorted((l.split()[2], l.split()[0]) for l in got),
                         [("/a.txt", "127.0.0.1"), ("/all/", "192.0.2.1"), ("/hdr/", "127.0.0.1")])

    def test_rfc7239_forwarded(self):
        srv = self.start('extforward.forwarder = ( "127.0.0.1" => "trust", "10.9.0.0/16" => "trust" )\n'
                         'extforward.headers = ( "Forwarded" )\n'
                         '$HTTP["scheme"] == "https" { url.redirect = ( "^/r$" => "/https-seen" ) }\n')
        for fwd in (b"for=198.51.100.7",                                  # one proxy
                    b"for=198.51.100.7, for=10.9.1.1;proto=http",         # trusted hop passed
                    b'for="[2001:db8::5]:4711"',
                    b'for="_hidden", for=198.51.100.8;by=10.9.0.1',
                    b"for=unknown",                                       # no address: no change
                    b'for="198.51.100.9:80";proto=https',
                    # A client's quoted string left open, then the line its proxy added: the
                    # open quote would swallow the proxy's element and name the client's own
                    # pick. Nothing of it is believed.
                    b'for=192.0.2.66;x="\r\nForwarded: for=198.51.100.10'):
            test_core.request(srv, b"GET /a.txt HTTP/1.1\r\nHost: t\r\nForwarded: " + fwd +
                              b"\r\nConnection: close\r\n\r\n")
        # (in any order: with several loops a line may be written after the next request's)
        self.assertEqual(sorted(l.split()[0] for l in lines(self.log, 7)),
                         sorted(["198.51.100.7", "198.51.100.7", "2001:db8::5", "198.51.100.8",
                                 "127.0.0.1", "198.51.100.9", "127.0.0.1"]))
        st, h, _ = test_core.request(srv, b"GET /r HTTP/1.1\r\nHost: t\r\nForwarded: "
                                     b"for=198.51.100.1;proto=https\r\nConnection: close\r\n\r\n")
        self.assertEqual((st, h.get("location")), (301, "/https-seen"))

    def test_evasive_counts_the_forwarded_client(self):
        srv = self.start('extforward.forwarder = ( "127.0.0.1" => "trust" )\n'
                         'evasive.max-conns-per-ip = 1\n')
        held = socket.create_connection(("127.0.0.1", srv.port))
        held.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        held.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n")
        try:
            time.sleep(0.3)
            def ask(xff):
                # Read to the server's close: it has counted the request out by then (with
                # several loops the next request could otherwise be counted before that).
                with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: " + xff +
                              b"\r\nConnection: close\r\n\r\n")
                    return int(test_core.wait_closed(s).split(b" ", 2)[1])
            self.assertEqual(ask(b"192.0.2.1"), 403)   # the held client's second request
            self.assertEqual(ask(b"192.0.2.2"), 200)   # another client behind the same proxy
        finally:
            held.close()
        # The held request's count went back to the client it was counted for.
        deadline = time.time() + 5
        while time.time() < deadline and ask(b"192.0.2.1") != 200:
            time.sleep(0.05)
        self.assertEqual(ask(b"192.0.2.1"), 200)

    def test_back_end_gets_the_client(self):
        be = FakeBackend("echo")
        self.addCleanup(be.close)
        srv = self.start('extforward.forwarder = ( "127.0.0.1" => "trust" )\n'
                         f'$HTTP["url"] =^ "/px/" {{ proxy-core.backends = ( "127.0.0.1:{be.port}" ) }}\n')
        st, _, body = test_core.request(srv, b"GET /px/x HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: "
                                        b"198.51.100.7\r\nX-Forwarded-Proto: https\r\n"
                                        b"Connection: close\r\n\r\n")[:3]
        self.assertEqual(st, 200)
        # The client's list as sent, then the address the request is from: the client's own.
        self.assertIn(b"X-Forwarded-For: 198.51.100.7, 198.51.100.7\r\n", body)
        self.assertIn(b"X-Forwarded-Proto: https\r\n", body)

    def test_refused_at_start(self):
        for conf, words in (('extforward.params = ( "host" => 1 )\n', ["extforward.params"]),
                            ('extforward.hap-PROXY = "enable"\n', ["extforward.hap-PROXY"]),
                            ('extforward.forwarder = ( "10.0.0.999" => "trust" )\n',
                             ["10.0.0.999", "not an IP address"]),
                            ('extforward.forwarder = ( "10.0.0.1" => "maybe" )\n', ["maybe"])):
            test_core.assert_refused(self, 'server.modules = ( "mod_extforward" )\n' + conf, words)

if __name__ == "__main__":
    test_core.main()
