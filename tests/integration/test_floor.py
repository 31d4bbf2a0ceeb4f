#!/usr/bin/env python3
"""Integration tests for bench/floor, bench/run's calibration server.

floor is not a server for users: it is the least an HTTP/1.1 server can do per request, and its
rows in bench/run say how much of a hot workload is the kernel's share. These tests check that
what it measures is real work: whole and correct bodies over kept-alive and pipelined
connections, 404 for what it cannot serve, a closed connection for what it does not speak, and
--keep-open keeping descriptors (a kept file is served after it was removed; without the option
it is not).

usage: test_floor.py [--build DIR] [unittest options]
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SRC_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLOOR = None  # set in main() from --build


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_answer(sock, buf=b""):
    """One HTTP/1.1 answer from sock: (status, headers, body, rest of buf); None at EOF."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = int(headers["content-length"])
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"answer cut short: {len(buf)} of {n} body bytes")
        buf += chunk
    return status, headers, buf[:n], buf[n:]


class FloorCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="floor-test-")
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(os.path.join(self.root, "d"))
        self.big = os.urandom(300 * 1024)  # more than a socket buffer: sendfile resumes
        with open(os.path.join(self.root, "d", "big.bin"), "wb") as f:
            f.write(self.big)
        with open(os.path.join(self.root, "small.txt"), "wb") as f:
            f.write(b"hello\n")
        with open(os.path.join(self.tmp, "secret"), "wb") as f:
            f.write(b"outside the root\n")
        self.proc = None

    def tearDown(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *extra):
        self.port = free_port()
        self.proc = subprocess.Popen([FLOOR, str(self.port), self.root, *extra],
                                     stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.fail("floor did not listen")

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.addCleanup(s.close)
        return s

    def get(self, sock, path, buf=b""):
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return read_answer(sock, buf)

    def test_bodies_whole_over_one_kept_connection(self):
        self.start()
        s = self.connect()
        for _ in range(3):
            status, headers, body, rest = self.get(s, "/d/big.bin")
            self.assertEqual(status, 200)
            self.assertEqual(int(headers["content-length"]), len(self.big))
            self.assertEqual(body, self.big)
            self.assertEqual(rest, b"")
        status, _, body, _ = self.get(s, "/small.txt?q=1")
        self.assertEqual((status, body), (200, b"hello\n"))

    def test_pipelined_requests_answered_in_order(self):
        self.start()
        s = self.connect()
        s.sendall(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /d/big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        buf = b""
        bodies = []
        for _ in range(3):
            status, _, body, buf = read_answer(s, buf)
            self.assertEqual(status, 200)
            bodies.append(body)
        self.assertEqual(bodies, [b"hello\n", self.big, b"hello\n"])

    def test_missing_and_climbing_paths_are_404(self):
        self.start()
        s = self.connect()
        for path in ("/nope", "/../secret", "/d/../../secret", "/d"):
            status, _, body, _ = self.get(s, path)
            self.assertEqual((path, status, body), (path, 404, b""))
        status, _, _, _ = self.get(s, "/small.txt")  # the connection still serves
        self.assertEqual(status, 200)

    def test_what_it_does_not_speak_closes_the_connection(self):
        self.start()
        for req in (b"POST /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                    b"GET\r\n\r\n", b"x" * 9000):
            s = self.connect()
            s.sendall(req)
            try:
                self.assertEqual(s.recv(100), b"", req[:20])
            except ConnectionResetError:
                pass  # closed with our bytes unread: a reset is a close too
        s = self.connect()  # and it goes on serving others
        self.assertEqual(self.get(s, "/small.txt")[0], 200)

    def test_keep_open_serves_kept_descriptors(self):
        self.start("--keep-open", "1")
        s = self.connect()
        self.assertEqual(self.get(s, "/d/big.bin")[2], self.big)   # opened and kept
        self.assertEqual(self.get(s, "/small.txt")[0], 200)         # the table is full: not kept
        os.unlink(os.path.join(self.root, "d", "big.bin"))
        os.unlink(os.path.join(self.root, "small.txt"))
        status, _, body, _ = self.get(s, "/d/big.bin")
        self.assertEqual((status, body == self.big), (200, True))
        self.assertEqual(self.get(s, "/small.txt")[0], 404)

    def test_without_keep_open_every_request_opens(self):
        self.start()
        s = self.connect()
        self.assertEqual(self.get(s, "/d/big.bin")[0], 200)
        os.unlink(os.path.join(self.root, "d", "big.bin"))
        self.assertEqual(self.get(s, "/d/big.bin")[0], 404)

    def test_bad_arguments(self):
        for argv in ([], ["80"], ["0", self.root], ["8080", "/nonexistent-dir"],
                     ["8080", self.root, "--keep"], ["8080", self.root, "--keep-open", "x"],
                     ["8080", self.root, "--keep-open", "-1"]):
            r = subprocess.run([FLOOR, *argv], capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 2, argv)
            self.assertIn("floor", r.stderr)


def main():
    global FLOOR
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(SRC_ROOT, "build"))
    args, rest = ap.parse_known_args()
    FLOOR = os.path.join(os.path.abspath(args.build), "bench", "floor")
    if not os.access(FLOOR, os.X_OK):
        print(f"test_floor: {FLOOR} not found (build first, or pass --build)", file=sys.stderr)
        return 2
    loader = unittest.TestLoader()
    suite = (loader.loadTestsFromNames(rest, sys.modules[__name__]) if rest
             else loader.loadTestsFromModule(sys.modules[__name__]))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and result.testsRun > 0 and not result.skipped else 1


if __name__ == "__main__":
    sys.exit(main())
