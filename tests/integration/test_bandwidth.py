#!/usr/bin/env python3
"""Bandwidth limits (connection.kbytes-per-second, server.kbytes-per-second) over real sockets.

A download limited to N KiB/s takes about size/N (loose bounds: at least 0.7x, at most 3x the
expected time; these machines are noisy), with every network backend, cold files, HEAD, ranges,
X-Sendfile and streamed proxy bodies; two connections under one server limit share it evenly, a
block of its own has a bucket of its own, an unlimited $HTTP["url"] block beside a limited one
runs at full speed, and another client is served at full speed while limited ones crawl. A
connection that only waits for its budget is not idle (server.max-write-idle does not close it),
and a graceful stop (SIGTERM) or restart (SIGUSR1) lifts the old server's limits so limited
transfers finish, while the new server limits new requests.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
import test_reload  # noqa: E402
from test_core import Server, evict, read_response  # noqa: E402
from sltest import accepting, read_to_end, run_threads  # noqa: E402

KIB = 1024
LO, HI = 0.7, 3.0  # bounds on measured / expected time


def backends():
    out = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                         capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"^network-backend: (\S+)", out, re.M)]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def timed(srv, path, extra=b"", method=b"GET"):
    """One request on a new connection: (status, headers, body, seconds to the last byte)."""
    t0 = time.monotonic()
    s = srv.connect()
    s.settimeout(30)
    try:
        s.sendall(method + b" " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n")
        st, h, body, _ = read_response(s, head=method == b"HEAD")
    finally:
        s.close()
    return st, h, body, time.monotonic() - t0


def parallel(*calls):
    """Run the calls (functions) at once; their results in order."""
    out = [None] * len(calls)

    def run(i, f):
        try:
            out[i] = f()
        except Exception as e:  # reported by the caller's assertions
            out[i] = e

    ts = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(calls)]
    run_threads(ts)
    return out


class Limited(unittest.TestCase):
    def assertTakes(self, secs, expected, what=""):
        self.assertGreaterEqual(secs, LO * expected, f"{what}: {secs:.2f}s, expected ~{expected:.2f}s")
        self.assertLessEqual(secs, HI * expected, f"{what}: {secs:.2f}s, expected ~{expected:.2f}s")


FILES = {
    "f300k": os.urandom(300 * KIB),
    "free/big": os.urandom(10 << 20),
    "free/f300k": os.urandom(300 * KIB),
    "small.txt": b"small\n",
}


class ConnectionLimit(Limited):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server('connection.kbytes-per-second = 200\n'
                         'status.status-url = "/server-status"\n'
                         '$HTTP["url"] =~ "^/free/" { connection.kbytes-per-second = 0 }\n',
                         FILES).start()

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0, cls.srv.log_text

    def test_a_download_takes_size_over_rate(self):
        st, h, body, secs = timed(self.srv, "/f300k")
        self.assertEqual((st, sha(body)), (200, sha(FILES["f300k"])))
        self.assertTakes(secs, 1.5, "300 KiB at 200 KiB/s")

    def test_unlimited_block_and_other_clients_at_full_speed_meanwhile(self):
        def others():
            time.sleep(0.2)  # the limited download is under way
            small = timed(self.srv, "/small.txt")
            big = timed(self.srv, "/free/big")
            return small, big

        lim, (small, big) = parallel(lambda: timed(self.srv, "/f300k"), others)
        self.assertEqual((lim[0], sha(lim[2])), (200, sha(FILES["f300k"])))
        self.assertTakes(lim[3], 1.5, "the limited download")
        self.assertEqual((small[0], small[2]), (200, b"small\n"))
        self.assertLess(small[3], 0.5, "a small file waited for the limited one")
        self.assertEqual((big[0], sha(big[2])), (200, sha(FILES["free/big"])))
        self.assertLess(big[3], 2.0, "10 MiB of the unlimited block went slowly")  # 50x the limit

    def test_head_is_not_held_back_and_ranges_are_limited(self):
        st, h, body, secs = timed(self.srv, "/f300k", method=b"HEAD")
        self.assertEqual((st, body, h["content-length"]), (200, b"", str(300 * KIB)))
        self.assertLess(secs, 0.5)
        st, h, body, secs = timed(self.srv, "/f300k", b"Range: bytes=1000-154599\r\n")
        self.assertEqual((st, body), (206, FILES["f300k"][1000:154600]))
        self.assertTakes(secs, 0.75, "150 KiB range")
        st, h, body, secs = timed(self.srv, "/f300k", b"Range: bytes=0-99999,200000-299999\r\n")
        self.assertEqual(st, 206)
        self.assertIn(FILES["f300k"][:99999], body)
        self.assertTakes(secs, 200000 / (200 * KIB), "multipart range")

    def test_keep_alive_requests_share_the_connection_budget(self):
        t0 = time.monotonic()
        s = self.srv.connect()
        s.settimeout(30)
        try:
            for _ in range(2):
                s.sendall(b"GET /f300k HTTP/1.1\r\nHost: t\r\nRange: bytes=0-153599\r\n\r\n")
                st, h, body, rest = read_response(s)
                self.assertEqual((st, body), (206, FILES["f300k"][:153600]))
        finally:
            s.close()
        self.assertTakes(time.monotonic() - t0, 1.5, "two 150 KiB answers on one connection")

    def test_status_page_counts_waits(self):
        timed(self.srv, "/f300k", b"Range: bytes=0-99999\r\n")
        st, h, body, _ = timed(self.srv, "/server-status?json")
        self.assertEqual(st, 200)
        bw = json.loads(body)["bandwidth"][0]
        self.assertEqual(bw["name"], "kbytes-per-second")
        self.assertGreater(bw["waits"], 0)
        self.assertGreaterEqual(bw["bytes_limited"], 100000)


class ServerLimit(Limited):
    @classmethod
    def setUpClass(cls):
        cls.files = {"a": os.urandom(225 * KIB), "own/b": os.urandom(450 * KIB),
                     "c": os.urandom(450 * KIB), "free/d": os.urandom(4 << 20)}
        cls.srv = Server('server.kbytes-per-second = 300\n'
                         '$HTTP["url"] =~ "^/own/" { server.kbytes-per-second = 300 }\n'
                         '$HTTP["url"] =~ "^/free/" { server.kbytes-per-second = 0 }\n',
                         cls.files).start()

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0, cls.srv.log_text

    def test_two_connections_share_it_evenly(self):
        r = parallel(lambda: timed(self.srv, "/a"), lambda: timed(self.srv, "/a"))
        for st, h, body, secs in r:
            self.assertEqual((st, sha(body)), (200, sha(self.files["a"])))
            # 450 KiB at 300 KiB/s: both end near 1.5 s; one served first would end at 0.75 s.
            self.assertTakes(secs, 1.5, "one of two sharing 300 KiB/s")

    def test_a_block_of_its_own_has_its_own_bucket_and_0_lifts_it(self):
        r = parallel(lambda: timed(self.srv, "/own/b"), lambda: timed(self.srv, "/c"),
                     lambda: timed(self.srv, "/free/d"))
        for (st, h, body, secs), name in zip(r[:2], ("own/b", "c")):
            self.assertEqual((st, sha(body)), (200, sha(self.files[name])))
            # 450 KiB at 300 KiB/s each; one shared bucket would take 3 s.
            self.assertTakes(secs, 1.5, name)
            self.assertLess(secs, 2.6, name)
        self.assertEqual(sha(r[2][2]), sha(self.files["free/d"]))
        self.assertLess(r[2][3], 1.5)


class WaitingIsNotIdle(Limited):
    def test_max_write_idle_spares_connections_waiting_for_budget(self):
        # 1 KiB/s shared by 5 connections, 512-byte quanta: each waits about 2.5 s between its
        # sends, longer than server.max-write-idle = 1 allows an idle client.
        files = {f"f{i}": os.urandom(512) for i in range(5)}
        srv = Server('server.kbytes-per-second = 1\nserver.max-write-idle = 1\n', files).start()
        try:
            r = parallel(*[lambda i=i: timed(srv, f"/f{i}") for i in range(5)])
            for i, res in enumerate(r):
                self.assertNotIsInstance(res, Exception, f"connection {i}: {res!r}")
                self.assertEqual((res[0], res[2]), (200, files[f"f{i}"]))
            self.assertGreater(max(res[3] for res in r), 2.0)
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertNotIn("did not read", srv.log_text)


class GracefulStop(unittest.TestCase):
    def test_sigterm_lifts_the_limit_and_the_transfer_finishes(self):
        data = os.urandom(400 * KIB)  # 20 s at 20 KiB/s
        srv = Server('connection.kbytes-per-second = 20\n', {"slow": data}).start()
        try:
            def stop_soon():
                time.sleep(0.5)
                srv.proc.send_signal(signal.SIGTERM)

            t0 = time.monotonic()
            (st, h, body, secs), _ = parallel(lambda: timed(srv, "/slow"), stop_soon)
            self.assertEqual((st, sha(body)), (200, sha(data)))
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            self.assertEqual(srv.stop(), 0)


class GracefulRestart(test_reload.Restart):
    """SIGUSR1: the old server lifts its limits and finishes the limited download, the new one
    limits new requests. (Only this test of the class runs here, not test_reload's.)"""

    def test_sigusr1_old_server_finishes_new_one_limits(self):
        data = os.urandom(400 * KIB)  # 20 s at 20 KiB/s
        self.start('connection.kbytes-per-second = 20\n', {"slow": data})
        first = self.pid()
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        got = s.recv(65536)
        t0 = time.monotonic()
        self.assertNotEqual(self.restart(), first)
        got = read_to_end(s, got)
        self.assertEqual(sha(got.split(b"\r\n\r\n", 1)[1]), sha(data))
        self.assertLess(time.monotonic() - t0, 10, "the old server kept its limit")
        deadline = time.time() + 30
        while test_reload.alive(first) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(test_reload.alive(first), "the old server did not exit")
        t1 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: t\r\nRange: bytes=0-30719\r\n\r\n")
        st, h, body, _ = read_response(s)
        s.close()
        self.assertEqual((st, body), (206, data[:30720]))
        secs = time.monotonic() - t1
        self.assertTrue(LO * 1.5 <= secs <= HI * 1.5, f"30 KiB at 20 KiB/s took {secs:.2f}s")


class Proxied(Limited):
    """Streamed proxy bodies and X-Sendfile answers are limited like static files."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sl_bw_")
        cls.data = os.urandom(300 * KIB)
        be = os.path.join(cls.tmp, "be")
        os.makedirs(be)
        with open(os.path.join(be, "body"), "wb") as f:
            f.write(cls.data)
        cls.media = os.path.join(cls.tmp, "media")
        os.makedirs(cls.media)
        with open(os.path.join(cls.media, "m.bin"), "wb") as f:
            f.write(cls.data)
        # X-Sendfile answers come from a one-line CGI-less backend: http.server with a handler.
        cls.port = test_core.free_port()
        script = (
            "import http.server, sys\n"
            "class H(http.server.SimpleHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        if self.path.startswith('/xs/'):\n"
            "            self.send_response(200)\n"
            f"            self.send_header('X-Sendfile', {os.path.join(cls.media, 'm.bin')!r})\n"
            "            self.send_header('Content-Length', '0')\n"
            "            self.end_headers()\n"
            "            return\n"
            "        self.path = self.path[len('/px'):]\n"
            "        super().do_GET()\n"
            "    def log_message(self, *a):\n"
            "        pass\n"
            f"http.server.ThreadingHTTPServer(('127.0.0.1', {cls.port}),"
            f" lambda *a: H(*a, directory={be!r})).serve_forever()\n")
        cls.be = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        accepting(cls.port)
        cls.srv = Server(
            'connection.kbytes-per-second = 200\n'
            f'$HTTP["url"] =~ "^/(px|xs)/" {{\n'
            f' proxy-core.backends = ( "127.0.0.1:{cls.port}" )\n'
            f' proxy-core.allow-x-sendfile = "enable"\n'
            f' proxy-core.x-sendfile-docroot = ( "{cls.media}" )\n}}\n').start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        cls.be.kill()
        cls.be.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, cls.srv.log_text

    def test_streamed_body(self):
        st, h, body, secs = timed(self.srv, "/px/body")
        self.assertEqual((st, sha(body)), (200, sha(self.data)))
        self.assertTakes(secs, 1.5, "300 KiB from a backend at 200 KiB/s")

    def test_x_sendfile(self):
        st, h, body, secs = timed(self.srv, "/xs/any")
        self.assertEqual((st, sha(body)), (200, sha(self.data)))
        self.assertNotIn("x-sendfile", h)
        self.assertTakes(secs, 1.5, "300 KiB X-Sendfile at 200 KiB/s")


BACKEND_DATA = os.urandom(600 * KIB)


class BackendCase(Limited):
    """Mixed into one TestCase class per network backend (made below)."""

    backend = None

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(f'server.network-backend = "{cls.backend}"\n'
                         'server.network-backend-block-size = 65536\n'
                         'connection.kbytes-per-second = 400\n',
                         {"f": BACKEND_DATA}).start()

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0, cls.srv.log_text

    def test_cold_file_and_range(self):
        evict(os.path.join(self.srv.root, "f"))
        st, h, body, secs = timed(self.srv, "/f")
        self.assertEqual((st, sha(body)), (200, sha(BACKEND_DATA)))
        self.assertTakes(secs, 1.5, f"600 KiB at 400 KiB/s ({self.backend})")
        evict(os.path.join(self.srv.root, "f"))
        st, h, body, secs = timed(self.srv, "/f", b"Range: bytes=100001-400000\r\n")
        self.assertEqual((st, body), (206, BACKEND_DATA[100001:400001]))
        self.assertTakes(secs, 300000 / (400 * KIB), f"range ({self.backend})")


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for cls in (ConnectionLimit, ServerLimit, WaitingIsNotIdle, GracefulStop, Proxied):
        suite.addTests(loader.loadTestsFromTestCase(cls))
    suite.addTest(GracefulRestart("test_sigusr1_old_server_finishes_new_one_limits"))
    for b in backends():
        if b == "io-uring" and "valgrind" in os.environ.get("SEEKLESS_WRAPPER", ""):
            continue  # the kernel fills io_uring buffers behind valgrind's back (test_backends)
        cls = type("Backend_" + b.replace("-", "_"), (BackendCase,), {"backend": b})
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


if __name__ == "__main__":
    test_core.parse_build()  # load_tests asks the build under test for its backends
    test_core.main(suite=load_tests(unittest.TestLoader(), None, None)
                   if not [a for a in sys.argv[1:] if not a.startswith("-") and "/" not in a]
                   else None)
