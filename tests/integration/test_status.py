#!/usr/bin/env python3
"""The status page: counters add up after a known set of requests (failures included), the
three formats agree, and status.allow-networks keeps others out."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import stop_at_end  # noqa: E402
from test_core import Server, free_port, read_response, request, wait_closed  # noqa: E402
from test_proxy import FakeBackend  # noqa: E402


def get(srv, path, extra=b""):
    # Connection: close makes the server close each connection itself once answered, so the
    # count of open connections the status page shows is known; a client-side close would be
    # seen by the server only after it had answered the next request.
    # The server counts a request when it ends it, just before it closes: wait for that close,
    # or the next status page may be served (on another loop) before this one was counted.
    s = srv.connect()
    try:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra + b"\r\n")
        resp = read_response(s)[:3]
        wait_closed(s)
        return resp
    finally:
        s.close()


def with_access_log(srv):
    """Give srv (not started yet) an access log in its directory; return its path."""
    log = os.path.join(srv.dir, "access.log")
    with open(srv.conf, "a") as f:
        f.write(f'accesslog.filename = "{log}"\n')
    return log


class Status(unittest.TestCase):
    def test_counters_add_up(self):
        dead = free_port()
        srv = Server('status.status-url = "/server-status"\n'
                     f'$HTTP["url"] =~ "^/dead/" {{ proxy-core.backends = ( "127.0.0.1:{dead}" ) }}\n'
                     '$HTTP["url"] == "/locked-status" { status.status-url = "/locked-status"\n'
                     '  status.allow-networks = ( "10.0.0.0/8", "::1/128" ) }\n'
                     '$HTTP["url"] == "/open-status" { status.status-url = "/open-status"\n'
                     '  status.allow-networks = ( "127.0.0.0/8" ) }\n',
                     {"a.txt": b"x" * 1000, "b.txt": b"y" * 10}).start()
        stop_at_end(self, srv)
        want = {"2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0}
        body_bytes = 0
        for _ in range(5):
            st, h, b = get(srv, b"/a.txt")
            self.assertEqual(st, 200)
            want["2xx"] += 1
        st, h, b = get(srv, b"/a.txt", b"If-None-Match: " + h["etag"].encode() + b"\r\n")
        self.assertEqual(st, 304)
        want["3xx"] += 1
        for _ in range(3):
            self.assertEqual(get(srv, b"/missing")[0], 404)
            want["4xx"] += 1
        for _ in range(2):
            self.assertEqual(get(srv, b"/dead/x")[0], 503)
            want["5xx"] += 1
        self.assertEqual(get(srv, b"/locked-status")[0], 403)
        want["4xx"] += 1
        self.assertEqual(get(srv, b"/open-status")[0], 200)
        want["2xx"] += 1
        n = sum(want.values())
        st, h, b = get(srv, b"/server-status?json")
        self.assertEqual((st, h["content-type"]), (200, "application/json"))
        j = json.loads(b)
        self.assertEqual(j["requests"], n)  # this request is still being answered
        self.assertEqual(j["responses"], dict(want, **{"1xx": 0}))
        self.assertGreater(j["bytes"], 5 * 1000)
        self.assertEqual(j["connections"]["total"], 1)
        self.assertEqual(j["connections"]["writing"], 1)
        self.assertEqual(j["network_backend"], "hybrid")
        self.assertEqual({p["name"] for p in j["pools"]}, {"stat", "read"})
        self.assertEqual(sum(l["requests"] for l in j["loops"]), n)
        be = [x for x in j["backends"] if x["name"] == f"127.0.0.1:{dead}"]
        self.assertEqual(len(be), 1)
        self.assertGreaterEqual(be[0]["failures"], 1)
        self.assertTrue(be[0]["disabled"])
        st, h, b = get(srv, b"/server-status?format=prometheus")
        self.assertEqual(st, 200)
        metrics = {}
        for line in b.decode().splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                metrics[k] = float(v)
        self.assertEqual(metrics["seekless_requests_total"], n + 1)
        self.assertEqual(metrics['seekless_responses_total{class="5xx"}'], 2)
        self.assertEqual(metrics[f'seekless_backend_disabled{{backend="127.0.0.1:{dead}"}}'], 1)
        st, h, b = get(srv, b"/server-status")
        self.assertEqual(st, 200)
        self.assertIn(b"requests %d," % (n + 2), b)
        self.assertIn(b"backend 127.0.0.1:%d" % dead, b)


    def test_asked_for_as_the_server_starts(self):
        # The listeners are bound before the loops start, so requests can wait in the queue
        # for the first loop that serves; that loop sums every loop's counters and must never
        # see one not yet made (the page once crashed under valgrind reading loop 1 while the
        # main thread was still creating it). Many loops widen that window; three starts, each
        # with requests sent as soon as the port accepts.
        for _ in range(3):
            srv = Server('status.status-url = "/server-status"\nserver.max-worker = 16\n',
                         {"a.txt": b"A"}).start()
            try:
                socks = [srv.connect() for _ in range(8)]
                for s in socks:
                    s.sendall(b"GET /server-status?json HTTP/1.1\r\nHost: t\r\n\r\n")
                for s in socks:
                    st, h, b = read_response(s)[:3]
                    self.assertEqual(st, 200)
                    self.assertEqual(len(json.loads(b)["loops"]), 16)
                    s.close()
            finally:
                self.assertEqual(srv.stop(), 0)

    def test_an_answer_cut_short_counts_as_the_logs_have_it(self):
        # A backend stops short of its Content-Length: the client has the 200 head, then the
        # connection closes. The access log and the timing trace have that request; the
        # counters must agree with them.
        be = FakeBackend("truncated")
        srv = Server('status.status-url = "/server-status"\ndebug.log-timing = "enable"\n'
                     f'$HTTP["url"] =~ "^/trunc/" {{ proxy-core.backends = ( "127.0.0.1:{be.port}" ) }}\n')
        log = with_access_log(srv)
        srv.start()
        try:
            s = srv.connect()
            s.sendall(b"GET /trunc/x HTTP/1.1\r\nHost: t\r\n\r\n")
            self.assertTrue(test_core.wait_closed(s).startswith(b"HTTP/1.1 200 "))
            s.close()
            # A request cut short is counted and logged when its connection is freed, which
            # may come just after the client saw the close: wait for the line (the counters
            # move first, in the same step).
            deadline = time.time() + 5
            while True:
                with open(log) as f:
                    logged = [line for line in f.read().splitlines() if "/trunc/" in line]
                if logged or time.time() > deadline:
                    break
                time.sleep(0.02)
            st, h, b = get(srv, b"/server-status?json")
            j = json.loads(b)
            self.assertEqual(len(logged), 1)
            self.assertIn('"GET /trunc/x HTTP/1.1" 200 ', logged[0])
            self.assertEqual((j["requests"], j["responses"]["2xx"]), (1, 1))
            self.assertGreater(j["bytes"], 0)
        finally:
            self.assertEqual(srv.stop(), 0)
            be.close()
        self.assertEqual(len(srv.timing_text.splitlines()), 2)


class TimingTrace(unittest.TestCase):
    def check_order(self, line):
        us = line["us"]
        order = ["accept", "parsed", "stat_queued", "stat_started", "stat_done", "open",
                 "backend_connect", "backend_first_byte", "backend_done", "first_byte",
                 "last_byte", "close"]
        seen = [us[k] for k in order if us.get(k) is not None]
        self.assertEqual(seen, sorted(seen), line)
        for q, st, d in us["reads"]:
            self.assertTrue(q <= st <= d, line)

    def test_a_line_per_request_with_stages_in_order(self):
        files = {f"f{i}.bin": os.urandom(300000) for i in range(6)}
        dead = free_port()
        srv = Server('debug.log-timing = "enable"\nserver.network-backend = "gthread-aio"\n'
                     'server.network-backend-block-size = 65536\nserver.max-stat-threads = 1\n'
                     f'$HTTP["url"] =~ "^/dead/" {{ proxy-core.backends = ( "127.0.0.1:{dead}" ) }}\n',
                     files).start()
        try:
            for name in files:  # cold: evicted, so the reads go to the thread pool
                test_core.evict(os.path.join(srv.root, name))
            s = srv.connect()
            s.sendall(b"".join(b"GET /%s HTTP/1.1\r\nHost: t\r\n\r\n" % n.encode() for n in files))
            rest = b""
            for _ in files:
                st, h, b, rest = test_core.read_response(s, rest)
                self.assertEqual(st, 200)
            s.close()
            self.assertEqual(get(srv, b"/missing")[0], 404)
            self.assertEqual(get(srv, b"/dead/x")[0], 503)
        finally:
            self.assertEqual(srv.stop(), 0)
        lines = [json.loads(x) for x in srv.timing_text.splitlines()]
        self.assertEqual(len(lines), len(files) + 2)
        by_path = {l["path"]: l for l in lines}
        for name in files:
            l = by_path["/" + name]
            self.assertEqual((l["status"], l["method"], l["backend"]), (200, "GET", "gthread-aio"))
            self.assertGreater(l["bytes"], 300000)
            # 300000 bytes in 64 KiB blocks: 5 reads (4 when a stat thread read the first)
            self.assertIn(l["us"]["reads_total"], (4, 5))
            self.assertIsNotNone(l["us"]["open"])
            self.assertIsNotNone(l["us"]["first_byte"])
            self.check_order(l)
        self.assertEqual(len({l["conn"] for l in lines if l["path"].startswith("/f")}), 1)
        self.assertEqual(sorted(l["req"] for l in lines if l["path"].startswith("/f")),
                         list(range(1, len(files) + 1)))
        self.assertEqual(by_path["/missing"]["status"], 404)
        self.assertEqual(by_path["/dead/x"]["status"], 503)
        for l in lines:
            self.check_order(l)


def children(pid):
    """Pids whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if p.isdigit() and f.read().rsplit(") ", 1)[-1].split()[1] == str(pid):
                    out.append(p)
        except OSError:
            pass  # gone meanwhile, or not a process
    return out


class AccessLog(unittest.TestCase):
    def wait_lines(self, path, n):
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                with open(path) as f:
                    lines = f.read().splitlines()
                if len(lines) >= n:
                    return lines
            except OSError:
                pass
            time.sleep(0.05)
        self.fail(f"{path}: fewer than {n} lines")

    def test_lines_fields_and_sighup_reopen(self):
        srv = Server('accesslog.format = "%h \\"%r\\" %>s %b %O %{User-Agent}i %k %D"\n',
                     {"a.txt": b"x" * 100})
        log = with_access_log(srv)
        srv.start()
        stop_at_end(self, srv)
        s = srv.connect()
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nUser-Agent: ua\"1\r\n\r\n"
                  b"GET /nope?q=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        rest = b""
        st, h, b, rest = test_core.read_response(s, rest)
        st2, h2, b2, rest = test_core.read_response(s, rest)
        s.close()
        lines = self.wait_lines(log, 2)
        f = lines[0].split(" ")
        self.assertEqual(f[0], "127.0.0.1")
        self.assertEqual(" ".join(f[1:4]), '"GET /a.txt HTTP/1.1"')
        self.assertEqual((f[4], f[5]), ("200", "100"))
        self.assertGreater(int(f[6]), 100)                  # %O: head + body
        self.assertEqual(f[7], 'ua\\"1')                   # escaped quote
        self.assertEqual(f[8], "0")                         # first request on the connection
        self.assertGreaterEqual(int(f[9]), 0)
        g = lines[1].split(" ")
        self.assertEqual((" ".join(g[1:4]), g[4], g[7], g[8]),
                         ('"GET /nope?q=1 HTTP/1.1"', "404", "-", "1"))
        os.rename(log, log + ".1")  # logrotate, then SIGHUP
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while not os.path.exists(log) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(get(srv, b"/a.txt")[0], 200)
        self.assertEqual(len(self.wait_lines(log, 1)), 1)
        with open(log + ".1") as fh:
            self.assertEqual(len(fh.read().splitlines()), 2)

    def test_with_the_timing_trace(self):
        # debug.log-timing opened its file by closing the access log and freeing its format:
        # the first request's log line then read freed memory and the process died (139).
        srv = Server('debug.log-timing = "enable"\n', {"a.txt": b"x" * 100})
        log = with_access_log(srv)
        srv.start()
        try:
            for _ in range(3):
                self.assertEqual(get(srv, b"/a.txt")[0], 200)
            srv.proc.send_signal(signal.SIGHUP)  # reopens both files
            time.sleep(0.2)
            self.assertEqual(get(srv, b"/a.txt")[0], 200)
            lines = self.wait_lines(log, 4)
            self.assertTrue(all('"GET /a.txt HTTP/1.1" 200 100' in l for l in lines), lines)
            self.assertIsNone(srv.proc.poll())
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual(len(srv.timing_text.splitlines()), 4)

    def test_per_condition_logs_a_piped_logger_and_response_fields(self):
        # lighttpd's per-host logs: each block's accesslog.filename (and format) wins for its
        # requests; "|command" pipes lines to a program; %{Name}o logs the fields sent,
        # the core's (Content-Length) and a back end's (ETag of a proxied 304, whose fields
        # live in proxy-core's state: logged before that is freed).
        be = FakeBackend("bodiless")
        srv = Server('', {"a.txt": b"x" * 100})
        d = srv.dir
        with open(srv.conf, "a") as f:
            f.write(f'accesslog.filename = "{d}/main.log"\n'
                    'accesslog.format = "%V %>s %{Content-Type}o %{Content-Length}o %{ETag}o '
                    '%{X-None}o"\n'
                    f'$HTTP["host"] == "a.example" {{ accesslog.filename = "{d}/a.log" }}\n'
                    f'$HTTP["host"] == "b.example" {{ accesslog.filename = "|cat >> {d}/b.log"\n'
                    '  accesslog.format = "B %>s %U" }\n'
                    f'$HTTP["url"] =~ "^/px/" {{ proxy-core.backends = ( "127.0.0.1:{be.port}" ) }}\n')
        srv.start()
        try:
            for host, target in ((b"t", b"/a.txt"), (b"a.example", b"/a.txt"),
                                 (b"b.example", b"/a.txt"), (b"b.example", b"/nope"),
                                 (b"t", b"/px/304")):
                s = srv.connect()
                s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host +
                          b"\r\nConnection: close\r\n\r\n")
                test_core.wait_closed(s)
                s.close()
            main = self.wait_lines(os.path.join(d, "main.log"), 2)
            etag = test_core.request(srv, b"HEAD /a.txt HTTP/1.1\r\nHost: z\r\n"
                                     b"Connection: close\r\n\r\n", head=True)[1]["etag"]
            etag = etag.replace('"', '\\"')  # client-controlled and quoted fields are escaped
            ct = "text/plain; charset=utf-8"
            self.assertEqual(main[:2], [f't 200 {ct} 100 {etag} -', 't 304 - - \\"e\\" -'])
            self.assertEqual(self.wait_lines(os.path.join(d, "a.log"), 1),
                             [f"a.example 200 {ct} 100 {etag} -"])
            # cat writes each line as it reads it.
            self.assertEqual(self.wait_lines(os.path.join(d, "b.log"), 2),
                             ["B 200 /a.txt", "B 404 /nope"])
            logger = children(srv.proc.pid)
            self.assertTrue(logger, "no piped logger among the server's children")
        finally:
            self.assertEqual(srv.stop(), 0)
            be.close()
        # The server closed the pipe at exit and reaped the logger, which saw the end of its input.
        self.assertFalse(os.path.exists(f"/proc/{logger[0]}"))

    def test_bad_format_is_refused_at_start(self):
        srv = Server('accesslog.filename = "access.log"\naccesslog.format = "%h %Q"\n')
        r = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f", srv.conf],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("seekless.conf:6: access log format: %Q is not supported", r.stderr)
        shutil.rmtree(srv.dir, ignore_errors=True)


if __name__ == "__main__":
    test_core.main()
