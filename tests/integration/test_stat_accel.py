#!/usr/bin/env python3
"""Integration tests of fcgi-stat-accel as deployed: started by the real spawn-fcgi (TCP, unix
socket, -F 2) or alone with --listen, queried by the real cgi-fcgi client with CGI variables.

Checks every answer (200 with X-Sendfile, 403, 404, 500), that refusals reach the FastCGI
stderr stream (cgi-fcgi copies it to its stderr), that bodies never contain the path, concurrency
(50 parallel clients against -C 4), clients that vanish mid-request, and that SIGTERM ends the
process promptly. Every process started is killed by PID in tearDown.
"""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import alive, run_threads, wait_for  # noqa: E402
from test_core import free_port  # noqa: E402


def accel_bin():
    return os.path.join(test_core.BUILD, "fcgi_stat_accel", "fcgi-stat-accel")


def wait_connectable(addr, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if isinstance(addr, tuple):
                socket.create_connection(addr, timeout=0.2).close()
            else:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(0.2)
                s.connect(addr)
                s.close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {addr}")


class Answer:
    def __init__(self, out, err):
        self.raw, self.err = out, err.decode("latin-1")
        head, _, self.body = out.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.headers = {}
        for line in lines:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.status = int(self.headers.get("status", "0").split()[0] or 0)


def query(connect, script=None, docroot=None, path_info=None, extra=None):
    """Run cgi-fcgi against connect (HOST:PORT or a unix path) with a CGI environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "REQUEST_METHOD": "GET",
           "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1",
           "SERVER_NAME": "localhost", "SERVER_PORT": "80", "REMOTE_ADDR": "127.0.0.1",
           "REQUEST_URI": "/x", "QUERY_STRING": ""}
    if script is not None:
        env["SCRIPT_FILENAME"] = script
    if docroot is not None:
        env["DOCUMENT_ROOT"] = docroot
    if path_info is not None:
        env["PATH_INFO"] = path_info
    env.update(extra or {})
    p = subprocess.run(["cgi-fcgi", "-bind", "-connect", connect], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    return Answer(p.stdout, p.stderr)


def fcgi_record(rtype, req_id, content):
    return struct.pack(">BBHHBB", 1, rtype, req_id, len(content), 0, 0) + content


def fcgi_params(pairs):
    out = b""
    for k, v in pairs.items():
        k, v = k.encode(), v.encode()
        out += bytes([len(k)]) + (bytes([len(v)]) if len(v) < 128 else struct.pack(">I", len(v) | 1 << 31))
        out += k + v
    return out


class Base(unittest.TestCase):
    def setUp(self):
        self.pids = []
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="sl_accel_it_")
        # A cleanup, not tearDown: it also runs when a subclass's setUp fails after spawning.
        self.addCleanup(self.cleanup)
        self.root = os.path.join(self.dir, "www")
        os.mkdir(self.root)
        os.mkdir(self.root + "2")
        os.mkdir(os.path.join(self.root, "sub"))
        for name, data in {"a.txt": b"hello", "sub/b.txt": b"bee", "index.php": b"<?php"}.items():
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(data)
        with open(os.path.join(self.root + "2", "secret.txt"), "wb") as f:
            f.write(b"secret")
        with open(os.path.join(self.dir, "outside.txt"), "wb") as f:
            f.write(b"outside")
        os.mkfifo(os.path.join(self.root, "fifo"))
        os.symlink("sub/b.txt", os.path.join(self.root, "link_in"))
        os.symlink("../outside.txt", os.path.join(self.root, "link_out"))
        os.symlink("/etc/passwd", os.path.join(self.root, "link_abs"))

    def cleanup(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def spawn(self, bind_args, extra_spawn=(), args=()):
        """Start the accelerator under spawn-fcgi; return the child PIDs it reports."""
        p = subprocess.run(["spawn-fcgi", *bind_args, *extra_spawn, "--", accel_bin(), *args],
                           capture_output=True, timeout=10)
        # spawn-fcgi reports on stdout or stderr depending on its version: read both.
        err = p.stdout.decode() + p.stderr.decode()
        pids = [int(x) for x in re.findall(r"child spawned successfully: PID: (\d+)", err)]
        self.pids += pids
        self.assertEqual(p.returncode, 0, err)
        self.assertTrue(pids, err)
        return pids

    def spawn_tcp(self, extra_spawn=("-C", "4"), args=()):
        port = free_port()
        pids = self.spawn(["-a", "127.0.0.1", "-p", str(port)], extra_spawn, args)
        wait_connectable(("127.0.0.1", port))
        return f"127.0.0.1:{port}", pids

    def listen(self, addr, args=()):
        p = subprocess.Popen([accel_bin(), "--listen", addr, *args], stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def check_parallel(self, addr, n=50):
        """n cgi-fcgi clients at once, mixing answers; every one must be right."""
        results = [None] * n
        names = ["a.txt", "nope", "sub", "link_in"]
        want = {"a.txt": 200, "nope": 404, "sub": 403, "link_in": 200}

        def run(i):
            try:
                results[i] = query(addr, self.path(names[i % 4]), self.root)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        run_threads(threads)
        for i, ans in enumerate(results):
            self.assertIsInstance(ans, Answer, repr(ans))
            self.assertEqual(ans.status, want[names[i % 4]], ans.raw)
            if ans.status == 200:
                self.assertEqual(ans.headers["x-sendfile"], self.path(names[i % 4]))

    def path(self, rel):
        return os.path.join(self.root, rel)

    def assert_refused(self, ans, status, leaked=()):
        self.assertEqual(ans.status, status, ans.raw)
        self.assertNotIn("x-sendfile", ans.headers)
        self.assertNotIn(b"/", ans.body)
        for s in leaked:
            self.assertNotIn(s.encode(), ans.raw)
        self.assertIn(f"fcgi-stat-accel: {status}", ans.err)

    def assert_ok(self, ans, path):
        self.assertEqual(ans.status, 200, ans.raw + ans.err.encode())
        self.assertEqual(ans.headers.get("x-sendfile"), path)
        self.assertEqual(ans.headers.get("content-length"), "0")
        self.assertEqual(ans.headers.get("content-type"), "application/octet-stream")
        self.assertEqual(ans.body, b"")
        self.assertEqual(ans.err, "")


class TestAnswers(Base):
    def setUp(self):
        super().setUp()
        self.addr, _ = self.spawn_tcp()

    def q(self, script, path_info=None, **kw):
        return query(self.addr, script, self.root, path_info, **kw)

    def test_regular_file(self):
        ans = self.q(self.path("a.txt"))
        self.assert_ok(ans, self.path("a.txt"))
        self.assertNotIn("x-lighttpd-send-file", ans.headers)

    def test_path_is_normalized(self):
        self.assert_ok(self.q(self.root + "//sub/./../a.txt"), self.path("a.txt"))

    def test_path_info_join(self):
        self.assert_ok(self.q(self.path("sub"), "/b.txt"), self.path("sub/b.txt"))
        self.assert_ok(self.q(self.path("a.txt"), ""), self.path("a.txt"))
        self.assert_refused(self.q(self.path("index.php"), "/extra"), 404)

    def test_missing_404(self):
        ans = self.q(self.path("nope.txt"))
        self.assert_refused(ans, 404)
        self.assertEqual(ans.body, b"Not Found\n")
        self.assertEqual(ans.headers.get("content-length"), str(len(ans.body)))

    def test_directory_403(self):
        ans = self.q(self.path("sub"))
        self.assert_refused(ans, 403)
        self.assertEqual(ans.body, b"Forbidden\n")
        self.assert_refused(self.q(self.root), 403)

    def test_fifo_403(self):
        self.assert_refused(self.q(self.path("fifo")), 403)

    def test_escapes_403(self):
        for script in [self.root + "/../outside.txt", self.root + "/sub/../../www2/secret.txt",
                       self.root + "2/secret.txt", "/etc/passwd", "/", self.root + "/../../../../../../etc/passwd",
                       "relative/a.txt", self.path("link_out"), self.path("link_abs")]:
            ans = self.q(script)
            self.assert_refused(ans, 403, leaked=["secret", "outside", "passwd", self.dir])

    def test_escape_through_path_info_403(self):
        self.assert_refused(self.q(self.path("sub"), "/../../outside.txt"), 403, leaked=[self.dir])

    def test_symlink_inside_ok(self):
        self.assert_ok(self.q(self.path("link_in")), self.path("link_in"))

    def test_long_name_404(self):
        # A name the file system cannot hold names no file (the URI was not too long).
        self.assert_refused(self.q(self.path("n" * 300)), 404)
        self.assert_refused(self.q(self.root + "/abcdefghi" * 500), 404)

    def test_missing_script_and_root_500(self):
        ans = query(self.addr, None, self.root)
        self.assert_refused(ans, 500)
        ans = query(self.addr, self.path("a.txt"), None)
        self.assert_refused(ans, 500)
        self.assert_refused(query(self.addr, self.path("a.txt"), self.dir + "/nonexistent"), 500)

    def test_stderr_record_is_one_escaped_line(self):
        ans = self.q(self.path("nope\x01.txt") + "\n")
        self.assertEqual(ans.status, 403)
        self.assertEqual(ans.err.count("\n"), 1, ans.err)
        self.assertIn("\\x01", ans.err)

    def test_parallel_clients(self):
        self.check_parallel(self.addr)

    def test_client_dropping_mid_request(self):
        host, port = self.addr.split(":")
        begin = fcgi_record(1, 1, struct.pack(">HB5x", 1, 0))
        params = fcgi_params({"SCRIPT_FILENAME": self.path("a.txt"), "DOCUMENT_ROOT": self.root,
                              "REQUEST_METHOD": "GET"})
        for cut in (3, len(begin) + 5, None):
            for _ in range(8):
                s = socket.create_connection((host, int(port)))
                data = begin + fcgi_record(4, 1, params) + fcgi_record(4, 1, b"") + fcgi_record(5, 1, b"")
                s.sendall(data if cut is None else data[:cut])
                # Close with a reset so the worker's writes fail hard.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
        time.sleep(0.2)
        for _ in range(6):
            self.assert_ok(self.q(self.path("a.txt")), self.path("a.txt"))


class TestDeployments(Base):
    def test_unix_socket_spawn(self):
        sock = os.path.join(self.dir, "accel.sock")
        self.spawn(["-s", sock, "-M", "0660"], ("-C", "2"))
        wait_connectable(sock)
        self.assertEqual(os.stat(sock).st_mode & 0o777, 0o660)
        self.assert_ok(query(sock, self.path("a.txt"), self.root), self.path("a.txt"))
        self.assert_refused(query(sock, self.path("nope"), self.root), 404)

    def test_fork_two_processes(self):
        addr, pids = self.spawn_tcp(("-F", "2", "-C", "2"))
        self.assertEqual(len(pids), 2)
        for _ in range(10):
            self.assert_ok(query(addr, self.path("a.txt"), self.root), self.path("a.txt"))
        for pid in pids:
            self.assertTrue(alive(pid))
            os.kill(pid, signal.SIGTERM)
        self.assertTrue(wait_for(lambda: not any(alive(p) for p in pids), 2))

    def test_sigterm_ends_within_2s(self):
        addr, pids = self.spawn_tcp()
        self.assert_ok(query(addr, self.path("a.txt"), self.root), self.path("a.txt"))
        os.kill(pids[0], signal.SIGTERM)
        self.assertTrue(wait_for(lambda: not alive(pids[0]), 2))

    def test_lighttpd_header_and_root_option(self):
        addr, _ = self.spawn_tcp(args=["--lighttpd-header", "--root", self.root, "--readahead", "0"])
        # --root wins over DOCUMENT_ROOT, which here would allow everything.
        ans = query(addr, self.path("a.txt"), "/")
        self.assert_ok(ans, self.path("a.txt"))
        self.assertEqual(ans.headers.get("x-lighttpd-send-file"), self.path("a.txt"))
        self.assert_refused(query(addr, self.root + "2/secret.txt", "/"), 403)
        self.assert_refused(query(addr, "/etc/passwd", None), 403)

    def test_listen_tcp(self):
        port = free_port()
        p = self.listen(f"127.0.0.1:{port}", ["--threads", "3"])
        wait_connectable(("127.0.0.1", port))
        addr = f"127.0.0.1:{port}"
        self.assert_ok(query(addr, self.path("a.txt"), self.root), self.path("a.txt"))
        self.assert_refused(query(addr, self.path("link_out"), self.root), 403)
        self.check_parallel(addr)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=2), 0)
        # Nothing on the process's own stderr: in sanitizer builds this is where reports go.
        self.assertEqual(p.stderr.read(), b"")

    def test_listen_unix(self):
        sock = os.path.join(self.dir, "l.sock")
        p = self.listen("unix:" + sock, ["--root", self.root])
        wait_connectable(sock)
        self.assert_ok(query(sock, self.path("sub/b.txt")), self.path("sub/b.txt"))
        self.assert_refused(query(sock, self.root + "2/secret.txt"), 403)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=2), 0)
        self.assertFalse(os.path.exists(sock))
        self.assertEqual(p.stderr.read(), b"")

    def thread_policies(self, pid):
        """The scheduling policy (field 41 of /proc/PID/task/TID/stat) of each of pid's threads."""
        out = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out.append(int(f.read().rsplit(")", 1)[1].split()[38]))
        return out

    def test_sched_policy(self):
        # Batch by default, so that a woken worker does not preempt the web server's loop on a
        # shared core; --sched normal keeps the ordinary policy. Every thread, workers included.
        for args, want in (([], os.SCHED_BATCH), (["--sched", "normal"], os.SCHED_OTHER),
                           (["--sched", "batch"], os.SCHED_BATCH)):
            sock = os.path.join(self.dir, "s.sock")
            p = self.listen("unix:" + sock, ["--threads", "3", *args])
            wait_connectable(sock)
            self.assert_ok(query(sock, self.path("a.txt"), self.root), self.path("a.txt"))
            pol = self.thread_policies(p.pid)
            self.assertGreaterEqual(len(pol), 4, pol)  # main + 3 workers (+ a tool's own)
            self.assertEqual(pol.count(want), len(pol), (args, pol))
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=2), 0)
            self.assertEqual(p.stderr.read(), b"")

    def test_cli(self):
        r = subprocess.run([accel_bin(), "--help"], capture_output=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--readahead", r.stdout)
        self.assertIn(b"--sched", r.stdout)
        r = subprocess.run([accel_bin(), "--version"], capture_output=True)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith(b"fcgi-stat-accel "))
        for bad in (["--threads", "0"], ["--threads", "x"], ["--readahead", "-1"], ["--bogus"],
                    ["--sched", "fifo"], ["--sched", ""],
                    ["--root", "/nonexistent-sl-dir"], ["extra"]):
            r = subprocess.run([accel_bin(), *bad], capture_output=True, stdin=subprocess.DEVNULL)
            self.assertNotEqual(r.returncode, 0, bad)
        # Not under spawn-fcgi and no --listen: fd 0 is not a listening socket.
        r = subprocess.run([accel_bin()], capture_output=True, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"--listen", r.stderr)


def main():
    missing = [t for t in ("spawn-fcgi", "cgi-fcgi") if not shutil.which(t)]
    if missing:
        suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
        print("missing tools: " + ", ".join(missing))
        print(f"0 passed, 0 failed, {suite.countTestCases()} skipped")
        sys.exit(0)
    test_core.main()


if __name__ == "__main__":
    main()
