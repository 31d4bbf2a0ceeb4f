#!/usr/bin/env python3
"""Graceful restart (SIGUSR1, lighttpd's; `systemctl reload`): a config with errors changes
nothing and is logged; a good one is served by a new server on the same sockets while requests
in flight finish on the old settings; twenty restarts under load lose no request; the pid file
follows the new server and every old one exits."""
import os
import shutil
import signal
import socket
import sys
import threading
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, read_response  # noqa: E402
from sltest import read_to_end, wait_for, watches_a_listener  # noqa: E402

WRAPPED = bool(os.environ.get("SEEKLESS_WRAPPER"))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Restart(unittest.TestCase):
    def setUp(self):
        self.srv = None
        self.pids = set()

    def start(self, extra, files):
        # The server writes a pid file; restarts replace the process the test started.
        self.srv = Server(extra, files)
        self.pidfile = os.path.join(self.srv.dir, "pid")
        with open(self.srv.conf, "a") as f:
            f.write(f'server.pid-file = "{self.pidfile}"\n')
        self.srv.start()
        self.pids.add(self.srv.proc.pid)
        # The port answers (the socket is bound) before the pid file is written: wait for it, so
        # that no signal goes to a pid read as 0 (which kill() takes as the whole process group).
        deadline = time.time() + (120 if WRAPPED else 30)
        while self.pid() != self.srv.proc.pid and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.pid(), self.srv.proc.pid, "no pid file")

    def tearDown(self):
        pid = self.pid()
        if pid > 1 and alive(pid):
            os.kill(pid, signal.SIGTERM)
        deadline = time.time() + (60 if WRAPPED else 15)
        while time.time() < deadline and any(alive(p) for p in self.pids | {pid}):
            time.sleep(0.05)
        left = [p for p in self.pids | {pid} if p and alive(p)]
        for p in left:
            if p > 1:
                os.kill(p, signal.SIGKILL)
        if self.srv.proc.poll() is None:  # the process this test started, whatever it did
            self.srv.proc.kill()
        self.srv.proc.wait(timeout=10)
        self.srv.proc.stderr.close()
        log = open(self.srv.log).read() if os.path.exists(self.srv.log) else ""
        self.srv.proc = None
        self.srv.stop()
        self.assertEqual(left, [], "servers left running")
        self.assertNotIn("runtime error", log)

    def pid(self):
        try:
            with open(self.pidfile) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def restart(self):
        """SIGUSR1 to the server now running; returns the new server's pid."""
        old = self.pid()
        self.assertGreater(old, 1)
        os.kill(old, signal.SIGUSR1)
        deadline = time.time() + (120 if WRAPPED else 30)
        while time.time() < deadline:
            p = self.pid()
            if p and p != old:
                self.pids.add(p)
                return p
            time.sleep(0.02)
        self.fail("no new server after SIGUSR1:\n" + open(self.srv.log).read())

    def get(self, path, conn=None):
        s = conn or socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, body, _ = read_response(s)
        if conn is None:
            s.close()
        return st, h, body

    def test_a_bad_config_changes_nothing(self):
        self.start('setenv.add-response-header = ( "X-Gen" => "1" )\n', {"a.txt": b"a"})
        pid = self.pid()
        self.assertGreater(pid, 1)
        with open(self.srv.conf, "a") as f:
            f.write('server.no-such-key = 1\n')
        os.kill(pid, signal.SIGUSR1)
        deadline = time.time() + 30
        while "nothing changed" not in open(self.srv.log).read() and time.time() < deadline:
            time.sleep(0.02)
        log = open(self.srv.log).read()
        self.assertIn("unknown config key 'server.no-such-key'", log)
        self.assertIn("has errors; nothing changed, serving on", log)
        self.assertEqual(self.pid(), pid)
        self.assertEqual(self.get(b"/a.txt")[1]["x-gen"], "1")

    def test_access_logs_carry_on_a_piped_logger_too(self):
        # The new server takes over the old one's access log descriptors: the file (opened as
        # the starting user) and the pipe of a piped logger, which keeps running and gets the
        # lines of both servers in one stream; the old server, checking the new config, must not
        # close them (it did once: its access log went silent after SIGUSR1).
        d = tempfile.mkdtemp(prefix="sl_reload_log_")
        self.addCleanup(shutil.rmtree, d, True)
        self.start(f'accesslog.filename = "{d}/main.log"\naccesslog.format = "%>s %U"\n'
                   f'$HTTP["url"] =~ "^/p/" {{ accesslog.filename = "|cat >> {d}/piped.log" }}\n',
                   {"a.txt": b"a", "p/b.txt": b"b"})
        self.assertEqual(self.get(b"/a.txt?1")[0], 200)
        self.assertEqual(self.get(b"/p/b.txt")[0], 200)
        first = self.pid()
        self.restart()
        deadline = time.time() + 30
        while alive(first) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(first), "the old server did not exit")
        self.assertEqual(self.get(b"/a.txt?2")[0], 200)
        self.assertEqual(self.get(b"/p/b.txt")[0], 200)

        def lines(name, n):
            deadline = time.time() + 10
            while time.time() < deadline:
                with open(os.path.join(d, name)) as f:
                    got = f.read().splitlines()
                if len(got) >= n:
                    return got
                time.sleep(0.05)
            return got
        self.assertEqual(lines("main.log", 2), ["200 /a.txt", "200 /a.txt"])
        self.assertEqual(lines("piped.log", 2), ["200 /p/b.txt", "200 /p/b.txt"])
        log = open(self.srv.log).read()
        self.assertNotIn("still running", log)

    def test_new_settings_for_new_requests_old_ones_finish(self):
        big = bytes(range(256)) * 160000  # 40 MB: more than the socket buffers hold
        self.start('setenv.add-response-header = ( "X-Gen" => "1" )\n',
                   {"a.txt": b"a", "big.bin": big})
        first = self.pid()
        # What is waited for below (the loops register their sockets as they start: valgrind
        # starts them after the port already accepts).
        self.assertTrue(wait_for(lambda: watches_a_listener(first, self.srv.port),
                                 60 if WRAPPED else 10))
        slow = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
        slow.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        head = slow.recv(4096)  # then nothing read until after the restart: the server waits
        self.assertIn(b"X-Gen: 1", head)
        with open(self.srv.conf) as f:
            text = f.read()
        with open(self.srv.conf, "w") as f:
            f.write(text.replace('"X-Gen" => "1"', '"X-Gen" => "2"'))
        new = self.restart()
        self.assertNotEqual(new, first)
        # Both servers accept from the same listening sockets until the old one's loops have
        # stopped accepting, a moment after the new one wrote the pid file: a request in that
        # moment is the old server's, answered whole on its settings. Once no epoll of the old
        # server watches a listening socket, only the new one answers (a first "2" alone did
        # not show that: fresh-check once saw a "1" after it).
        self.assertTrue(wait_for(lambda: not watches_a_listener(first, self.srv.port),
                                 60 if WRAPPED else 10), "the old server kept accepting")
        for _ in range(10):
            self.assertEqual(self.get(b"/a.txt")[1]["x-gen"], "2")
        # The download that began before goes on to its last byte from the old server.
        data = read_to_end(slow, head)
        self.assertEqual(data.split(b"\r\n\r\n", 1)[1], big)
        deadline = time.time() + 30
        while alive(first) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(first), "the old server did not exit after its last request")
        log = open(self.srv.log).read()
        self.assertIn(f"SIGUSR1: new server started (pid {new})", log)

    def test_twenty_restarts_under_load_lose_nothing(self):
        self.start("", {"a.txt": b"A" * 1000, "b.txt": b"B" * 100000})
        stop = threading.Event()
        errors, counts = [], [0]
        lock = threading.Lock()

        def client(keep):
            s = None
            while not stop.is_set():
                reused = s is not None
                try:
                    if s is None:
                        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
                    path = b"/a.txt" if counts[0] % 2 else b"/b.txt"
                    st, h, body = self.get(path, conn=s)
                    ok = st == 200 and len(body) == (1000 if path == b"/a.txt" else 100000)
                    with lock:
                        counts[0] += 1
                        if not ok:
                            errors.append((st, len(body)))
                    if not keep or h.get("connection") == "close":
                        s.close()
                        s = None
                except (OSError, EOFError) as e:
                    if s is not None:
                        s.close()
                    s = None
                    # A kept connection the old server closes as it stops may meet the next
                    # request: a client sends that again on a new connection (RFC 9112 §9.3.1).
                    # A fresh connection that fails is a lost request.
                    if not reused:
                        with lock:
                            errors.append(repr(e))
            if s is not None:
                s.close()

        threads = [threading.Thread(target=client, args=(k,)) for k in (True, True, False, False)]
        for t in threads:
            t.start()
        try:
            for _ in range(20):
                before = counts[0]
                self.restart()
                deadline = time.time() + 30
                while counts[0] < before + 20 and time.time() < deadline:
                    time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertGreater(counts[0], 400)
        # Every old server finishes and exits.
        current = self.pid()
        deadline = time.time() + 30
        while any(alive(p) for p in self.pids - {current}) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual([p for p in self.pids - {current} if alive(p)], [])


if __name__ == "__main__":
    test_core.main()
