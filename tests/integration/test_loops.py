#!/usr/bin/env python3
"""Several event loops in one process (server.max-worker): connections spread over the loops,
the status page sums every loop and shows each, the access log keeps whole lines, a saturated
thread pool loses nothing, SIGTERM stops every loop gracefully, server.max-connections holds for
the process, the loops can share one listening socket instead of one each, and each loop is bound
to a CPU of its own when asked (server.worker-cpu-affinity "auto") and not alone."""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import fd_targets, listening_inodes, run_threads, stop_at_end, wait_for  # noqa: E402
from test_core import Server, read_response, request, evict  # noqa: E402


def get_json(srv):
    st, h, b = request(srv, b"GET /st?json HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert st == 200
    return json.loads(b)


def fetch_many(srv, paths, parallel):
    """Fetch every path once, `parallel` clients at a time, each on its own connection;
    returns the (path, status, body) of each."""
    out, lock, it = [], threading.Lock(), iter(list(paths))

    def client():
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                return
            try:
                # Read to the server's close: it counts a request when it ends it, just before
                # closing, so the status page asked afterwards (maybe on another loop) has it.
                s = srv.connect()
                try:
                    s.sendall(b"GET " + p + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    st, h, b, _ = read_response(s)
                    test_core.wait_closed(s)
                finally:
                    s.close()
            except Exception as e:  # noqa: BLE001 - reported below
                st, b = repr(e), b""
            with lock:
                out.append((p, st, b))
    threads = [threading.Thread(target=client) for _ in range(parallel)]
    run_threads(threads)
    return out


class Loops(unittest.TestCase):
    def test_requests_spread_over_loops_and_the_status_sums_them(self):
        srv = Server('server.max-worker = 3\nstatus.status-url = "/st"\n',
                     {"a.txt": b"A" * 100}).start()
        try:
            res = fetch_many(srv, [b"/a.txt"] * 300, 10)
            self.assertEqual([r for r in res if r[1] != 200], [])
            j = get_json(srv)
            loops = {l["name"]: l for l in j["loops"]}
            self.assertEqual(set(loops), {"0", "1", "2"})
            served = [l for l in loops.values() if l["requests"] > 0]
            self.assertGreaterEqual(len(served), 2, loops)  # SO_REUSEPORT spread them
            self.assertEqual(sum(l["requests"] for l in loops.values()), j["requests"])
            self.assertEqual(j["requests"], 300)
            self.assertEqual(j["responses"]["2xx"], 300)
            # the start-up probe, the 300, and this status request
            self.assertEqual(sum(l["accepted"] for l in loops.values()), 302)
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertIn("3 loop(s)", srv.log_text)

    def test_access_log_lines_stay_whole(self):
        srv = Server("server.max-worker = 3\n", {f"f{i}.txt": b"x" * i for i in range(50)})
        log = os.path.join(srv.dir, "access.log")
        with open(srv.conf, "a") as f:
            f.write(f'accesslog.filename = "{log}"\n')
        srv.start()
        try:
            paths = [b"/f%d.txt?%s" % (i % 50, b"q" * (i % 300)) for i in range(600)]
            res = fetch_many(srv, paths, 16)
            self.assertEqual([r for r in res if r[1] != 200], [])
            srv.proc.send_signal(signal.SIGTERM)
            self.assertEqual(srv.proc.wait(timeout=20), 0)
            with open(log) as f:
                lines = f.read().splitlines()
        finally:
            srv.stop()
        self.assertEqual(len(lines), 600)
        pat = re.compile(r'^127\.0\.0\.1 \S+ - \[[^]]+\] "GET /f\d+\.txt\?q* HTTP/1\.1" 200 (\d+|-) '
                         r'"-" "-"$')
        bad = [l for l in lines if not pat.match(l)]
        self.assertEqual(bad, [])

    def test_a_saturated_read_pool_loses_nothing(self):
        files = {f"big{i}.bin": os.urandom(700_000 + i) for i in range(12)}
        srv = Server('server.max-worker = 3\nserver.network-backend = "gthread-aio"\n'
                     'server.max-read-threads = 1\nserver.max-stat-threads = 1\n'
                     'server.network-backend-block-size = 65536\n', files).start()
        stop_at_end(self, srv)
        for name in files:
            evict(os.path.join(srv.root, name))
        paths = [b"/" + n.encode() for n in files] * 4
        res = fetch_many(srv, paths, 24)
        for p, st, body in res:
            self.assertEqual(st, 200, p)
            self.assertEqual(body, files[p[1:].decode()], p)

    def test_sigterm_lets_every_loop_finish(self):
        big = os.urandom(8 << 20)
        srv = Server("server.max-worker = 3\n", {"big.bin": big}).start()
        socks = []
        for _ in range(6):  # likely on more than one loop
            s = srv.connect()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            socks.append(s)
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        for s in socks:
            st, h, body, rest = read_response(s)
            self.assertEqual((st, len(body)), (200, len(big)))
            s.settimeout(10)
            t0 = time.time()
            # Then the connection closes, at once: not after the keep-alive idle limit (five
            # connections idling it out used to take the whole graceful timeout).
            self.assertEqual(rest + s.recv(100), b"")
            self.assertLess(time.time() - t0, 2)
            s.close()
        self.assertEqual(srv.proc.wait(timeout=20), 0)
        srv.stop()

    def test_max_connections_is_for_the_process(self):
        srv = Server("server.max-worker = 3\nserver.max-connections = 4\n"
                     "server.max-keep-alive-idle = 30\n", {"a.txt": b"A"}).start()
        stop_at_end(self, srv)
        held = []
        for _ in range(4):  # four kept-alive connections, on whichever loops
            s = srv.connect()
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertEqual(read_response(s)[0], 200)
            held.append(s)
        waiting = []
        for _ in range(3):  # every further one waits in a backlog, whatever its loop
            s = srv.connect()
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            s.settimeout(0.5)
            with self.assertRaises(socket.timeout):
                s.recv(10)
            waiting.append(s)
        for s in held:  # slots free: the waiting ones are answered, on any loop
            s.close()
        for s in waiting:
            s.settimeout(10)
            self.assertEqual(read_response(s)[0], 200)
            s.close()

    def test_a_second_server_on_the_same_port_is_refused(self):
        # SO_REUSEPORT would let a second process share the port and take half the traffic.
        srv = Server("server.max-worker = 2\n", {"a.txt": b"A"}).start()
        stop_at_end(self, srv)
        r = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-D", "-f",
                            srv.conf], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Address already in use", r.stderr)

    def test_one_shared_listening_socket(self):
        srv = Server('server.max-worker = 3\nserver.reuse-port = "disable"\n'
                     'status.status-url = "/st"\n', {"a.txt": b"A"}).start()
        stop_at_end(self, srv)
        res = fetch_many(srv, [b"/a.txt"] * 200, 8)
        self.assertEqual([r for r in res if r[1] != 200], [])
        self.assertEqual(get_json(srv)["requests"], 200)
        # Exactly one socket listens on the port, and it is this process's (with SO_REUSEPORT
        # each of the 3 loops would have its own).
        listening = listening_inodes(srv.port)
        self.assertEqual(len(listening), 1)
        self.assertIn(f"socket:[{listening[0]}]", fd_targets(srv.proc.pid))

    def test_reuse_port_gives_each_loop_a_listening_socket(self):
        srv = Server("server.max-worker = 3\n", {"a.txt": b"A"}).start()
        stop_at_end(self, srv)
        # The first loop's socket accepts before the others have opened theirs.
        wait_for(lambda: len(listening_inodes(srv.port)) >= 3)
        self.assertEqual(len(listening_inodes(srv.port)), 3)


def thread_cpus(pid):
    """{thread name: the CPUs it may run on} of every thread of pid (names repeat: the last)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            out.setdefault(name, []).append(os.sched_getaffinity(int(tid)))
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return out


class Affinity(unittest.TestCase):
    def test_each_loop_is_bound_to_a_cpu_of_its_own(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("one CPU: nothing to bind loops to")
        srv = Server('server.max-worker = 3\nserver.worker-cpu-affinity = "auto"\n'
                     'status.status-url = "/st"\n', {"a.txt": b"A"}).start()
        stop_at_end(self, srv)
        res = fetch_many(srv, [b"/a.txt"] * 60, 6)
        self.assertEqual([r for r in res if r[1] != 200], [])
        th = thread_cpus(srv.proc.pid)
        # Loop i on the i-th CPU the process may use, round robin past the last.
        for i in range(3):
            self.assertEqual(th[f"sl-loop-{i}"], [{cpus[i % len(cpus)]}])
        # The server's own threads (the stat and read pools, shared by the loops) stay unbound.
        for name in ("sl-stat", "sl-read"):
            self.assertTrue(th[name])
            for a in th[name]:
                self.assertEqual(a, set(cpus))
        loops = get_json(srv)["loops"]
        self.assertEqual([(lp["bound"], lp["cpu"]) for lp in loops],
                         [(True, cpus[i % len(cpus)]) for i in range(3)])

    def test_by_default_disabled_or_a_single_loop_binds_nothing(self):
        cpus = set(os.sched_getaffinity(0))
        for conf in ("server.max-worker = 2\n",
                     'server.max-worker = 2\nserver.worker-cpu-affinity = "disable"\n',
                     'server.max-worker = 1\nserver.worker-cpu-affinity = "auto"\n'):
            with self.subTest(conf=conf):
                srv = Server(conf + 'status.status-url = "/st"\n', {"a.txt": b"A"}).start()
                try:
                    res = fetch_many(srv, [b"/a.txt"] * 20, 4)
                    self.assertEqual([r for r in res if r[1] != 200], [])
                    for name, sets in thread_cpus(srv.proc.pid).items():
                        for a in sets:
                            self.assertEqual(a, cpus, name)
                    self.assertEqual({lp["bound"] for lp in get_json(srv)["loops"]}, {False})
                finally:
                    srv.stop()

    def test_an_unknown_value_is_refused(self):
        srv = Server('server.worker-cpu-affinity = "0-3"\n', {"a.txt": b"A"})
        r = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f", srv.conf],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn('server.worker-cpu-affinity "0-3" is not supported (use "auto" or "disable")',
                      r.stderr)


if __name__ == "__main__":
    test_core.main()
