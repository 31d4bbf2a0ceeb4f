#!/usr/bin/env python3
"""mod_evasive: evasive.max-conns-per-ip counts the requests in progress of one client address
across every event loop (the suites run with several); one more is answered 403 (or 302 to
evasive.location) on a closed connection and logged unless evasive.silent; a block may lift the
limit (0); a finished request no longer counts. Requests are kept in progress by clients that do
not read a large file."""
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, read_response  # noqa: E402
from sltest import wait_for  # noqa: E402

BIG = 64 * 1024 * 1024


def make_big(srv):
    with open(os.path.join(srv.root, "big.bin"), "wb") as f:
        f.truncate(BIG)  # sparse: costs no disk


def hold(srv):
    """A connection whose request stays in progress: it asks for the big file and reads nothing."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    return s


def ask(srv, target):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, b, _ = read_response(s)
        if h.get("connection") != "close":
            return st, h, b, False
        # A request turned away closes its connection: nothing more comes.
        s.settimeout(2)
        try:
            rest = s.recv(1)
        except socket.timeout:
            rest = None
        return st, h, b, rest == b""


class Evasive(unittest.TestCase):
    def run_server(self, conf):
        srv = Server('server.modules = ( "mod_evasive", "mod_staticfile" )\n' + conf,
                     {"a.txt": b"a", "free/f.txt": b"f"})
        make_big(srv)
        srv.start()
        self.addCleanup(srv.stop)
        return srv

    def test_limit_403_close_and_log(self):
        srv = self.run_server('evasive.max-conns-per-ip = 2\n'
                              '$HTTP["url"] =^ "/free/" { evasive.max-conns-per-ip = 0 }\n')
        held = [hold(srv), hold(srv)]
        try:
            time.sleep(0.3)  # both requests reach the server and stay in progress
            st, h, _, closed = ask(srv, b"/a.txt")
            self.assertEqual((st, h.get("connection"), closed), (403, "close", True))
            # A block without a limit lets it through; the held ones still count.
            self.assertEqual(ask(srv, b"/free/f.txt")[:1], (200,))
        finally:
            for s in held:
                s.close()
        # Finished (closed) requests no longer count.
        self.assertTrue(wait_for(lambda: ask(srv, b"/a.txt")[0] == 200, 5))
        srv._stop()
        with open(srv.log) as f:
            log = f.read()
        self.assertIn("127.0.0.1 turned away: too many connections (3, evasive.max-conns-per-ip 2)",
                      log)

    def test_one_at_a_time_is_fine(self):
        srv = self.run_server('evasive.max-conns-per-ip = 1\n')
        for _ in range(20):  # sequential requests (keep-alive or not) never count twice
            # Each one over: the server closes after it ended the request (and counted it out).
            # Only reading the answer is not enough with several loops: the next connection can
            # reach another loop in the microseconds between the last byte and that count.
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                self.assertTrue(test_core.wait_closed(s).startswith(b"HTTP/1.1 200 "))
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            for _ in range(20):  # and on one kept connection
                s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertEqual(read_response(s)[0], 200)

    def test_location_and_silent(self):
        srv = self.run_server('evasive.max-conns-per-ip = 1\nevasive.silent = "enable"\n'
                              'evasive.location = "http://example.org/busy.html"\n')
        held = hold(srv)
        try:
            time.sleep(0.3)
            st, h, b, closed = ask(srv, b"/a.txt")
            self.assertEqual((st, h["location"], b, closed),
                             (302, "http://example.org/busy.html", b"", True))
        finally:
            held.close()
        srv._stop()
        with open(srv.log) as f:
            self.assertNotIn("turned away", f.read())


if __name__ == "__main__":
    test_core.main()
