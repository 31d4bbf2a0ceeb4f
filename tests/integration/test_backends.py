#!/usr/bin/env python3
"""Every compiled-in network backend serves byte-identical content, cold and hot.

For each backend listed by `seekless -V`, a server is started with that backend (a 64 KiB block
size, so that 100 KiB and larger files take several asynchronous reads, and one stat thread) and
checked with SHA-256 over real sockets: files of 0, 1, 4 KiB, 100 KiB, 10 MiB and unaligned
sizes, each once with its pages evicted (posix_fadvise DONTNEED after fsync) and once hot;
single and multipart ranges at unaligned offsets; HEAD; pipelined keep-alive requests; a client
that resets mid-file; a file truncated while it is sent (the connection closes short, never with
garbage); and afterwards the server's descriptor count is back where it started.
"""
import os
import re
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, evict, read_response, request, wait_closed  # noqa: E402
from sltest import BackendFiles, fd_targets, reset_mid_answer, sha, wait_loops_up  # noqa: E402

SIZES = {
    "f0": 0,
    "f1": 1,
    "f4k": 4096,
    "f100k": 100 * 1024,
    "f10m": 10 * 1024 * 1024,
    "odd1": 65536 + 1,
    "odd2": 3 * 65536 - 1,
    "odd3": 1234567,
}
CONTENT = {name: os.urandom(n) for name, n in SIZES.items()}


def backends():
    out = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                         capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"^network-backend: (\S+)", out, re.M)]


class BackendCase(BackendFiles):
    """Mixed into one TestCase class per backend (made below)."""

    content = CONTENT

    def get(self, name, extra=b"", method=b"GET"):
        return request(self.srv, method + b" /" + name.encode() + b" HTTP/1.1\r\nHost: t\r\n" + extra
                       + b"\r\n", head=method == b"HEAD")

    def fd_names(self):
        """What the server's descriptors point at."""
        return fd_targets(self.srv.proc.pid)

    def fd_count(self):
        """Descriptors open, not counting the files the open-file cache keeps (one each, at
        most: that is checked here too)."""
        pid, n, kept = self.srv.proc.pid, 0, []
        for f in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{f}")
            except FileNotFoundError:
                continue  # closed while we looked
            if target.startswith(self.srv.root + "/"):
                kept.append(target)
            else:
                n += 1
        self.assertLessEqual(len(kept), len(set(kept)) + 8)  # a few answers may still hold one
        return n

    def test_ranges_cold_and_hot(self):
        self.check_ranges_cold_and_hot("odd3")

    def test_cold_dentries_and_inodes(self):
        # Forget dentries and inodes (root only): lookups then miss the caches, so the stat
        # threads (or io_uring's openat) do them; the answers must not change.
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2\n")
        except OSError:
            self.skipTest("cannot drop the dentry cache (not root)")
        for name in ("f1", "odd1", "nope", "f100k"):
            st, h, body = self.get(name)
            if name == "nope":
                self.assertEqual(st, 404)
            else:
                self.assertEqual((st, sha(body)), (200, sha(CONTENT[name])), name)

    def test_head(self):
        evict(self.path("f10m"))
        st, h, body = self.get("f10m", method=b"HEAD")
        self.assertEqual((st, int(h["content-length"]), body), (200, SIZES["f10m"], b""))

    def test_pipelined_keepalive(self):
        s = self.srv.connect()
        try:
            self.check_pipelined(s, ["f100k", "f1", "odd2", "f0", "f100k"], b"t")
        finally:
            s.close()

    def test_client_reset_mid_file_and_nothing_leaks(self):
        # A first answer proves the loop is up (the port accepts before the pools exist).
        self.assertEqual(self.get("f1")[0], 200)
        # The others open their epoll, eventfd and wake-up pipe as they start: count from when
        # every loop is up.
        wait_loops_up(self.srv.proc.pid)
        before = self.fd_count()
        before_list = self.fd_names()
        for i in range(5):
            evict(self.path("f10m"))
            reset_mid_answer(self.srv.connect(), b"GET /f10m HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, body = self.get("odd2")
        self.assertEqual((st, body), (200, CONTENT["odd2"]))
        deadline = time.time() + 15
        while self.fd_count() > before and time.time() < deadline:
            time.sleep(0.05)
        n = self.fd_count()
        if n > before:
            # Name what is left open that was not before.
            left = self.fd_names()
            for x in before_list:
                if x in left:
                    left.remove(x)
            self.fail(f"{n} fds open, {before} before; new: {left}; before: {before_list}")

    def test_truncated_while_sent(self):
        name = "trunc.bin"
        data = os.urandom(8 * 1024 * 1024)
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        evict(p)
        s = self.srv.connect()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"GET /" + name.encode() + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, _, body = buf.partition(b"\r\n\r\n")
        self.assertIn(b"Content-Length: %d" % len(data), head)
        while len(body) < 300000:
            body += s.recv(65536)
        os.truncate(p, 1024 * 1024)
        body += wait_closed(s, timeout=10)
        s.close()
        self.assertLess(len(body), len(data))
        self.assertEqual(body, data[:len(body)], "bytes after truncation must not be garbage")
        st, h, b = self.get("f100k")
        self.assertEqual((st, b), (200, CONTENT["f100k"]))
        os.unlink(p)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for b in backends():
        cls = type("Backend_" + b.replace("-", "_"), (BackendCase, unittest.TestCase), {"backend": b})
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


class HybridRing(unittest.TestCase):
    """hybrid's choice for a lookup that misses the kernel's caches: a stat thread until small
    files are seen, then the loop's io_uring while at least half of the last 64 files were small
    (status lookups.ring counts them), then the threads again when large files follow; the bytes
    are the same either way. hybrid-threads never uses a ring."""

    SMALL, LARGE = 72, 40

    def cold(self):
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")  # directories too: lookups that read the disk stay off the loop
        except OSError:
            self.skipTest("cannot drop the caches (not root)")

    def counts(self, srv):
        import json
        st, h, body = request(srv, b"GET /st?json HTTP/1.1\r\nHost: t\r\n\r\n")
        j = json.loads(body)
        ring = sum(item["ring"] for item in j["lookups"])
        stat = {p["name"]: p for p in j["pools"]}["stat"]["completed"]
        return ring, stat

    def fetch_all(self, srv, names, files):
        s = srv.connect()
        for n in names:
            s.sendall(b"GET /" + n.encode() + b" HTTP/1.1\r\nHost: t\r\n\r\n")
            st, h, body, _ = read_response(s)
            self.assertEqual((st, sha(body)), (200, sha(files[n])), n)
        s.close()

    def check(self, backend):
        small = {f"s/{i // 10}/f{i}.txt": os.urandom(4096) for i in range(self.SMALL)}
        large = {f"b/{i // 10}/g{i}.bin": os.urandom(200 * 1024) for i in range(self.LARGE)}
        srv = Server(f'server.network-backend = "{backend}"\nstatus.status-url = "/st"\n'
                     'server.max-stat-threads = 2\n', {**small, **large}).start()
        try:
            wait_loops_up(srv.proc.pid)
            self.cold()
            r0, s0 = self.counts(srv)
            self.fetch_all(srv, sorted(small), small)
            r1, s1 = self.counts(srv)
            # No ring where the kernel refuses io_uring (hybrid says so at start) or openat2
            # (said at the first open; as under valgrind): the threads do every lookup then.
            with open(srv.log) as f:
                log = f.read()
            ring_on = backend == "hybrid" and "io-uring" in backends() and \
                "go to the stat and read threads" not in log and "openat2() is not available" not in log
            if ring_on:
                # The first 32 through the stat threads, nearly all the rest through the ring (a
                # few lookups may find their dentries kept: the open-file cache's watches).
                self.assertGreaterEqual(s1 - s0, 24)
                self.assertGreaterEqual(r1 - r0, self.SMALL - 32 - 8)
            else:
                self.assertEqual(r1, r0)
            self.cold()
            self.fetch_all(srv, sorted(large), large)
            r2, s2 = self.counts(srv)
            if ring_on:
                # Large files tip it back once more than half of the last 64 were large: at most
                # 33 of them through the ring (the 33rd is chosen with 32 large files among the
                # last 64), the others on the stat threads.
                self.assertLessEqual(r2 - r1, 33)
                self.assertGreaterEqual(s2 - s1, 1)
            else:
                self.assertEqual(r2, r0)
        finally:
            self.assertEqual(srv.stop(), 0, srv.log_text)

    def test_hybrid(self):
        self.check("hybrid")

    def test_hybrid_threads(self):
        self.check("hybrid-threads")


class TruncationLogged(unittest.TestCase):
    def test_log_line_for_truncation(self):
        srv = Server('server.network-backend = "gthread-aio"\nserver.network-backend-block-size = 65536\n',
                     {"t.bin": os.urandom(4 << 20)}).start()
        try:
            s = srv.connect()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /t.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            got = 0
            while got < 200000:
                got += len(s.recv(65536))
            os.truncate(os.path.join(srv.root, "t.bin"), 100000)
            wait_closed(s)
            s.close()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertIn("shrank while being sent", srv.log_text)


if __name__ == "__main__":
    # The backends come from `seekless -V` of the build under test: parse --build first.
    test_core.parse_build()
    loader = unittest.TestLoader()
    suite = load_tests(loader, None, None)
    suite.addTests(loader.loadTestsFromTestCase(TruncationLogged))
    suite.addTests(loader.loadTestsFromTestCase(HybridRing))
    test_core.main(suite=suite)
