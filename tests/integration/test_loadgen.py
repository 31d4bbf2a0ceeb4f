#!/usr/bin/env python3
"""Integration tests for bench/loadgen and bench/mkpool.

An in-process threaded HTTP server plays the server under test. Besides well-behaved paths it can
misbehave on purpose (close early, hang, trickle, vary its body, send garbage, drop kept-alive
connections), and it records every request, so each test can assert loadgen's counts *exactly*:
every started fetch must land in exactly one bucket, and each bucket must match what the server
actually did.

usage: test_loadgen.py [--build DIR] [unittest options]
  --build DIR   meson build directory holding bench/loadgen (default: build next to the sources)
Prints "N passed, M failed" at the end; exits non-zero when anything failed.
"""

import argparse
import collections
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SRC_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MKPOOL = os.path.join(SRC_ROOT, "bench", "mkpool")
LOADGEN = None  # set in main() from --build

NOT_FOUND_BODY = b"not found\n"


def body_for(path, size):
    """Deterministic body of a path, so checksums are stable across fetches."""
    return hashlib.shake_128(path.encode()).digest(size)


class TestServer:
    """Threaded HTTP/1.1 server on 127.0.0.1 with a per-instance request log."""

    def __init__(self):
        self.lock = threading.Lock()
        self.hits = collections.Counter()
        self.sequence = []
        self.connections = 0
        self.body_bytes = collections.Counter()  # body bytes promised per path (complete ones)
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with outer.lock:
                    outer.connections += 1

            def log_message(self, *args):
                pass

            def send_body(self, body, status=200, extra=()):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def send_short(self, promised, sent):
                self.send_response(200)
                self.send_header("Content-Length", str(promised))
                self.end_headers()
                self.wfile.write(b"s" * sent)
                self.close_connection = True

            def do_GET(self):
                path = self.path
                parts = path.strip("/").split("/")
                with outer.lock:
                    outer.hits[path] += 1
                    outer.sequence.append(path)
                    nth = outer.hits[path]
                kind = parts[0]
                if kind == "ok":  # /ok/SIZE/TAG
                    self.send_body(body_for(path, int(parts[1])))
                elif kind == "missing":
                    self.send_body(NOT_FOUND_BODY, status=404)
                elif kind == "short":  # promises 1000 bytes, sends 400, closes
                    self.send_short(1000, 400)
                elif kind == "shortbig":  # promises 500000 bytes, sends 200000, closes
                    self.send_short(500000, 200000)
                elif kind == "surplusbig":  # promises 300000 bytes, sends 10 more, closes
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n"
                                     b"Connection: close\r\n\r\n" + b"y" * 300010)
                    self.close_connection = True
                elif kind == "surplus":  # promises 10 bytes, sends 20 in the same segment
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
                                     b"Connection: close\r\n\r\n" + b"y" * 20)
                    self.close_connection = True
                elif kind == "hang":  # never answers
                    outer.release.wait(30)
                    self.close_connection = True
                elif kind == "trickle":  # answers one byte every 0.2 s, forever
                    self.send_response(200)
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    try:
                        while not outer.release.wait(0.2):
                            self.wfile.write(b"t")
                    except OSError:
                        pass
                    self.close_connection = True
                elif kind == "delay":  # /delay/SECS/SIZE: silent wait, then a normal answer
                    time.sleep(float(parts[1]))
                    self.send_body(body_for(path, int(parts[2])))
                elif kind == "vary":  # same length, different content every time
                    self.send_body(os.urandom(512))
                elif kind == "varylen":  # different length every time
                    self.send_body(b"v" * (100 + nth))
                elif kind == "chunked":  # /chunked/SIZE in three chunks plus a trailer
                    body = body_for(path, int(parts[1]))
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    third = len(body) // 3
                    for piece in (body[:third], body[third:2 * third], body[2 * third:]):
                        self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\nX-Trailer: 1\r\n\r\n")
                elif kind == "close":  # /close/SIZE: no length, body ends at close
                    self.send_response(200)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body_for(path, int(parts[1])))
                    self.close_connection = True
                elif kind == "drop":  # looks reusable, but the server closes it anyway
                    self.send_body(body_for(path, int(parts[1])))
                    self.close_connection = True
                elif kind == "garbage":
                    self.wfile.write(b"HTTP/1.1 abc\r\n\r\n")
                    self.close_connection = True
                elif kind == "reset":  # closes without a single byte
                    self.close_connection = True
                else:
                    self.send_body(b"?", status=500)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class Result:
    """One loadgen run: exit code, output, JSON, and the text summary parsed."""

    def __init__(self, proc, json_path):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self.json = None
        if os.path.exists(json_path):
            with open(json_path, encoding="utf-8") as f:
                self.json = json.load(f)
        self.text = parse_text(self.out) if self.rc in (0, 1) else None


def parse_text(out):
    t = {"codes": {}}
    m = re.search(r"^(\d+) fetches, (\d+) max parallel, (\S+) bytes, in (\S+) seconds$", out, re.M)
    if m:
        t["fetches"], t["max_parallel"] = int(m.group(1)), int(m.group(2))
        t["bytes"], t["elapsed"] = float(m.group(3)), float(m.group(4))
    for code, n in re.findall(r"^  code (\d{3}) -- (\d+)$", out, re.M):
        t["codes"][code] = int(n)
    m = re.search(r"^errors: timed-out (\d+), bad-byte-count (\d+), bad-checksum (\d+), "
                  r"connect-failed (\d+), cut-at-end (\d+), bad-response (\d+)$", out, re.M)
    if m:
        keys = ("timed_out", "bad_byte_count", "bad_checksum", "connect_failed", "cut_at_end",
                "bad_response")
        t["errors"] = dict(zip(keys, map(int, m.groups())))
    return t


class LoadgenCase(unittest.TestCase):
    def setUp(self):
        self.srv = TestServer()
        self.tmp = tempfile.mkdtemp(prefix="test_loadgen.")

    def tearDown(self):
        self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_loadgen(self, urls, *args, timeout=60):
        url_file = os.path.join(self.tmp, "urls")
        with open(url_file, "w", encoding="ascii") as f:
            f.write("".join(u + "\n" for u in urls))
        json_path = os.path.join(self.tmp, "out.json")
        if os.path.exists(json_path):
            os.unlink(json_path)
        proc = subprocess.run([LOADGEN, *args, "-json", json_path, url_file], capture_output=True,
                              text=True, timeout=timeout)
        res = Result(proc, json_path)
        if res.rc == 0:
            self.check_consistent(res)
        return res

    def run_one(self, path, parallel, *args):
        """loadgen on the test server's path with -parallel (and args); it must exit 0."""
        res = self.run_loadgen([self.srv.url(path)], *args, "-parallel", str(parallel))
        self.assertEqual(res.rc, 0, res.err)
        return res

    def fetch(self, path, parallel, fetches, *args):
        """The same for a number of fetches."""
        return self.run_one(path, parallel, "-fetches", str(fetches), *args)

    def check_consistent(self, res):
        """Invariants every completed run must satisfy, text and JSON agreeing."""
        j, t = res.json, res.text
        self.assertIsNotNone(j, res.err)
        self.assertEqual(j["fetches_started"], j["fetches"] + j["errors_total"], res.out)
        self.assertEqual(sum(j["errors"].values()), j["errors_total"])
        self.assertEqual(sum(j["status"].values()), j["fetches"])
        self.assertEqual(t["fetches"], j["fetches"])
        self.assertEqual(t["max_parallel"], j["max_parallel"])
        self.assertEqual(t["codes"], j["status"])
        self.assertEqual(t["errors"], j["errors"])
        self.assertEqual(j["fetch_ms"]["n"], j["fetches"])
        if j["fetches"]:
            self.assertLessEqual(j["fetch_ms"]["p50"], j["fetch_ms"]["p99"])
            self.assertLessEqual(j["fetch_ms"]["p99"], j["fetch_ms"]["max"])
            self.assertRegex(res.out, r"(?m)^msecs/fetch: p50 [\d.]+ p90 [\d.]+ p99 [\d.]+ "
                                      r"p99\.9 [\d.]+ max [\d.]+$")

    def assert_errors(self, res, **expected):
        want = {k: 0 for k in res.json["errors"]}
        want.update(expected)
        self.assertEqual(res.json["errors"], want, res.err)


class TestFetching(LoadgenCase):
    def test_basic_exact_counts(self):
        urls = [self.srv.url(p) for p in ("/ok/1000/a", "/ok/2000/b", "/missing")]
        res = self.run_loadgen(urls, "-checksum", "-parallel", "4", "-fetches", "60", "-seed", "7")
        self.assertEqual(res.rc, 0, res.err)
        j, hits = res.json, self.srv.hits
        self.assertEqual(j["fetches_started"], 60)
        self.assertEqual(j["fetches"], 60)
        self.assertEqual(sum(hits.values()), 60)
        self.assertEqual(j["status"].get("200", 0), hits["/ok/1000/a"] + hits["/ok/2000/b"])
        self.assertEqual(j["status"].get("404", 0), hits["/missing"])
        want_bytes = (1000 * hits["/ok/1000/a"] + 2000 * hits["/ok/2000/b"] +
                      len(NOT_FOUND_BODY) * hits["/missing"])
        self.assertEqual(j["bytes"], want_bytes)
        self.assertEqual(j["bytes_all"], want_bytes)
        self.assertEqual(j["connects"], 60)
        self.assertEqual(self.srv.connections, 60)
        self.assertEqual(j["max_parallel"], 4)
        self.assert_errors(res)
        self.assertIn("60 fetches, 4 max parallel, ", res.out)
        self.assertRegex(res.out, r"(?m)^[\d.e+]+ mean bytes/connection$")
        self.assertRegex(res.out, r"(?m)^[\d.e+]+ fetches/sec, [\d.e+]+ bytes/sec$")
        self.assertRegex(res.out, r"(?m)^msecs/connect: [\d.e+-]+ mean, [\d.e+-]+ max, [\d.e+-]+ min$")
        self.assertRegex(res.out, r"(?m)^msecs/first-response: [\d.e+-]+ mean, [\d.e+-]+ max, "
                                  r"[\d.e+-]+ min$")
        self.assertIn("HTTP response codes:\n", res.out)
        self.assertIn("errors: timed-out 0, bad-byte-count 0, bad-checksum 0, connect-failed 0, "
                      "cut-at-end 0, bad-response 0\n", res.out)
        self.assertEqual(j["settings"]["seed"], 7)
        self.assertEqual(j["settings"]["urls"], 3)

    def test_fetches_fewer_than_parallel(self):
        res = self.fetch("/ok/10/x", 10, 3)
        self.assertEqual(res.json["fetches"], 3)
        self.assertEqual(res.json["max_parallel"], 3)
        self.assertEqual(self.srv.hits["/ok/10/x"], 3)

    def test_short_body_is_bad_byte_count(self):
        res = self.fetch("/short", 3, 9)
        self.assertEqual(res.json["fetches"], 0)
        self.assertEqual(res.json["fetches_started"], 9)
        self.assert_errors(res, bad_byte_count=9)
        self.assertEqual(res.json["bytes_all"], 9 * 400)
        self.assertIn("\n9 bad byte counts\n", res.out)
        self.assertIn("after 400 of 1000 body bytes", res.err)

    def test_surplus_bytes_are_bad_byte_count(self):
        res = self.fetch("/surplus", 2, 6)
        self.assert_errors(res, bad_byte_count=6)
        self.assertIn("10 bytes after the end of the response", res.err)

    def test_varying_length_is_bad_byte_count(self):
        res = self.fetch("/varylen", 1, 5)
        self.assertEqual(res.json["fetches"], 1)
        self.assert_errors(res, bad_byte_count=4)
        self.assertIn("byte count wrong", res.err)

    def test_hang_is_timeout(self):
        t0 = time.monotonic()
        res = self.fetch("/hang", 3, 3, "-timeout", "1")
        took = time.monotonic() - t0
        self.assertEqual(res.json["fetches"], 0)
        self.assert_errors(res, timed_out=3)
        self.assertIn("\n3 timeouts\n", res.out)
        self.assertGreaterEqual(res.json["elapsed_s"], 1.0)
        self.assertLess(took, 10)

    def test_varying_content_is_bad_checksum(self):
        res = self.fetch("/vary", 2, 10, "-checksum")
        self.assertEqual(res.json["fetches"], 1)  # the first body is the reference
        self.assert_errors(res, bad_checksum=9)
        self.assertIn("\n9 bad checksums\n", res.out)
        # without -checksum the same responses are all fine
        res = self.fetch("/vary", 2, 10)
        self.assertEqual(res.json["fetches"], 10)
        self.assert_errors(res)

    def test_stable_content_passes_checksum(self):
        urls = [self.srv.url(f"/ok/{n}/c") for n in (1, 4095, 70000)]
        res = self.run_loadgen(urls, "-checksum", "-parallel", "3", "-fetches", "30")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches"], 30)
        self.assert_errors(res)

    def test_connect_failed(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        res = self.run_loadgen([f"http://127.0.0.1:{port}/x"], "-parallel", "3", "-fetches", "7")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches"], 0)
        self.assert_errors(res, connect_failed=7)
        self.assertIn("Connection refused", res.err)

    def test_malformed_and_empty_responses_are_bad_response(self):
        res = self.fetch("/garbage", 2, 4)
        self.assert_errors(res, bad_response=4)
        self.assertIn("malformed response", res.err)
        res = self.fetch("/reset", 2, 4)
        self.assert_errors(res, bad_response=4)
        self.assertIn("before the end of the headers", res.err)

    def test_chunked_and_close_delimited_bodies(self):
        urls = [self.srv.url("/chunked/3000"), self.srv.url("/close/1500")]
        res = self.run_loadgen(urls, "-checksum", "-parallel", "3", "-fetches", "40")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches"], 40)
        self.assert_errors(res)
        hits = self.srv.hits
        self.assertEqual(res.json["bytes"], 3000 * hits["/chunked/3000"] + 1500 * hits["/close/1500"])

    def test_large_bodies(self):
        res = self.fetch("/ok/3000000/big", 2, 6, "-checksum")
        self.assertEqual(res.json["bytes"], 6 * 3000000)
        self.assert_errors(res)

    def test_mixed_exact_accounting(self):
        paths = ["/ok/100/m", "/short", "/missing", "/vary", "/chunked/999", "/surplus", "/garbage"]
        res = self.run_loadgen([self.srv.url(p) for p in paths], "-parallel", "5", "-fetches",
                               "200", "-seed", "5")
        self.assertEqual(res.rc, 0, res.err)
        h, j = self.srv.hits, res.json
        self.assertEqual(sum(h.values()), 200)
        self.assertEqual(j["status"].get("200", 0), h["/ok/100/m"] + h["/vary"] + h["/chunked/999"])
        self.assertEqual(j["status"].get("404", 0), h["/missing"])
        self.assert_errors(res, bad_byte_count=h["/short"] + h["/surplus"],
                           bad_response=h["/garbage"])
        self.assertEqual(j["bytes"], 100 * h["/ok/100/m"] + 512 * h["/vary"] +
                         999 * h["/chunked/999"] + len(NOT_FOUND_BODY) * h["/missing"])


class TestBodyModes(LoadgenCase):
    """Bodies dropped in the kernel (the default, recv MSG_TRUNC) or copied (-copy, -checksum):
    the counts must not depend on the mode."""

    BIG = ("/ok/300000/a", "/chunked/240000", "/close/200000", "/missing")

    def big_bytes(self):
        h = self.srv.hits
        return (300000 * h["/ok/300000/a"] + 240000 * h["/chunked/240000"] +
                200000 * h["/close/200000"] + len(NOT_FOUND_BODY) * h["/missing"])

    def test_large_bodies_exact_in_both_modes(self):
        for mode, extra in (("discard", ()), ("copy", ("-copy",)), ("copy", ("-checksum",))):
            for ka in ((), ("-keepalive",)):
                with self.subTest(mode=mode, extra=extra, keepalive=ka):
                    self.srv.hits.clear()
                    res = self.run_loadgen([self.srv.url(p) for p in self.BIG], *extra, *ka,
                                           "-parallel", "3", "-fetches", "40", "-seed", "3")
                    self.assertEqual(res.rc, 0, res.err)
                    j = res.json
                    self.assertEqual(j["fetches"], 40)
                    self.assert_errors(res)
                    self.assertEqual(j["bytes"], self.big_bytes())
                    self.assertEqual(j["bytes_all"], j["bytes"])
                    self.assertEqual(j["settings"]["body"], mode)
                    self.assertIn(f"client: {'copied' if mode == 'copy' else 'discarded'} "
                                  "bodies, ", res.out)
                    if mode == "discard":
                        self.assertGreater(j["syscalls"]["discard"], 0)
                    else:
                        self.assertEqual(j["syscalls"]["discard"], 0)
                    self.assertGreaterEqual(j["syscalls"]["recv"], 40)
                    self.assertGreaterEqual(j["syscalls"]["send"], 40)
                    self.assertGreater(j["cpu_s"]["user"] + j["cpu_s"]["sys"], 0)

    def test_short_large_body_is_bad_byte_count(self):
        for extra in ((), ("-copy",)):
            with self.subTest(extra=extra):
                res = self.run_loadgen([self.srv.url("/shortbig")], *extra, "-parallel", "2",
                                       "-fetches", "4")
                self.assertEqual(res.rc, 0, res.err)
                self.assert_errors(res, bad_byte_count=4)
                self.assertEqual(res.json["bytes_all"], 4 * 200000)
                self.assertIn("after 200000 of 500000 body bytes", res.err)

    def test_surplus_after_large_body_is_bad_byte_count(self):
        res = self.fetch("/surplusbig", 2, 4)
        self.assert_errors(res, bad_byte_count=4)
        self.assertEqual(res.json["bytes_all"], 4 * 300000)
        self.assertIn("10 bytes after the end of the response", res.err)


class TestOrderAndLength(LoadgenCase):
    def test_sequential_takes_the_list_in_order(self):
        urls = [self.srv.url(f"/ok/10/s{i}") for i in range(7)]
        res = self.run_loadgen(urls, "-sequential", "-keepalive", "-parallel", "1", "-fetches",
                               "10")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(self.srv.sequence, [f"/ok/10/s{i % 7}" for i in range(10)])
        self.assertEqual(res.json["settings"]["order"], "sequential")
        # -parallel 3: still every URL once before any repeats
        self.srv.sequence.clear()
        res = self.run_loadgen(urls, "-sequential", "-parallel", "3", "-fetches", "7")
        self.assertEqual(sorted(self.srv.sequence), sorted(f"/ok/10/s{i}" for i in range(7)))

    def test_min_fetches_outlasts_seconds(self):
        res = self.run_one("/delay/0.3/10", 1, "-seconds", "0.2", "-min-fetches", "3",
                           "-timeout", "5")
        self.assertEqual(res.json["fetches_started"], 3)
        self.assertEqual(res.json["fetches"], 3)
        self.assertEqual(res.json["settings"]["min_fetches"], 3)
        self.assertGreaterEqual(res.json["elapsed_s"], 0.9)
        # without it, -seconds alone ends the run after the first fetch
        res = self.run_one("/delay/0.3/10", 1, "-seconds", "0.2", "-timeout", "5")
        self.assertEqual(res.json["fetches_started"], 1)

    def test_min_fetches_does_not_stop_a_long_run_early(self):
        res = self.run_one("/delay/0.2/10", 2, "-seconds", "1", "-min-fetches", "1",
                           "-timeout", "5")
        self.assertGreaterEqual(res.json["fetches_started"], 8)
        self.assertGreaterEqual(res.json["elapsed_s"], 1.0)


class TestKeepalive(LoadgenCase):
    def test_connections_are_reused(self):
        urls = [self.srv.url("/ok/500/k1"), self.srv.url("/ok/700/k2"), self.srv.url("/chunked/300")]
        res = self.run_loadgen(urls, "-keepalive", "-checksum", "-parallel", "2", "-fetches", "40")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches"], 40)
        self.assert_errors(res)
        self.assertEqual(self.srv.connections, 2)
        self.assertEqual(res.json["connects"], 2)
        self.assertEqual(res.json["keepalive_reused"], 38)
        self.assertEqual(res.json["keepalive_retries"], 0)

    def test_closed_keepalive_connection_is_retried(self):
        res = self.fetch("/drop/256", 2, 20, "-keepalive")
        self.assertEqual(res.json["fetches"], 20)
        self.assert_errors(res)
        self.assertEqual(res.json["keepalive_retries"], 18)
        self.assertEqual(self.srv.connections, 20)
        self.assertEqual(self.srv.hits["/drop/256"], 20)

    def test_close_delimited_response_is_not_reused(self):
        res = self.fetch("/close/100", 1, 5, "-keepalive")
        self.assertEqual(res.json["fetches"], 5)
        self.assertEqual(self.srv.connections, 5)
        self.assertEqual(res.json["keepalive_retries"], 0)


class TestSeconds(LoadgenCase):
    def test_in_flight_fetches_may_finish(self):
        res = self.run_loadgen([self.srv.url("/delay/1.5/100")], "-parallel", "3", "-seconds", "1",
                               "-timeout", "5")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches_started"], 3)
        self.assertEqual(res.json["fetches"], 3)
        self.assert_errors(res)
        self.assertGreaterEqual(res.json["elapsed_s"], 1.5)
        self.assertLess(res.json["elapsed_s"], 4)

    def test_fetches_still_running_are_cut(self):
        res = self.run_loadgen([self.srv.url("/trickle")], "-parallel", "2", "-seconds", "0.5",
                               "-timeout", "1")
        self.assertEqual(res.rc, 0, res.err)
        self.assertEqual(res.json["fetches"], 0)
        self.assert_errors(res, cut_at_end=2)
        self.assertIn("2 fetches still running at the end, cut", res.err)
        self.assertGreaterEqual(res.json["elapsed_s"], 1.5)
        self.assertLess(res.json["elapsed_s"], 3)

    def test_verbose_progress_line(self):
        res = self.run_loadgen([self.srv.url("/delay/0.2/10")], "-verbose", "-parallel", "2",
                               "-seconds", "5.3", "-timeout", "5")
        self.assertEqual(res.rc, 0, res.err)
        lines = re.findall(r"(?m)^--- ([\d.]+) secs, (\d+) fetches started, (\d+) completed, "
                           r"(\d+) current$", res.err)
        self.assertEqual(len(lines), 1, res.err)
        secs, started, completed, current = lines[0]
        self.assertGreaterEqual(float(secs), 5.0)
        self.assertEqual(int(started), int(completed) + int(current))
        self.assertEqual(int(current), 2)


class TestSeed(LoadgenCase):
    def sequence(self, seed):
        urls = [self.srv.url(f"/ok/10/{i}") for i in range(10)]
        self.srv.sequence.clear()
        res = self.run_loadgen(urls, "-parallel", "1", "-fetches", "30", "-seed", str(seed))
        self.assertEqual(res.rc, 0, res.err)
        return list(self.srv.sequence)

    def test_same_seed_same_urls(self):
        a, b, c = self.sequence(123), self.sequence(123), self.sequence(124)
        self.assertEqual(len(a), 30)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertGreater(len(set(a)), 3)  # actually random, not one URL


class TestUsage(LoadgenCase):
    def run_raw(self, *args, urls=None):
        cmd = [LOADGEN, *args]
        if urls is not None:
            path = os.path.join(self.tmp, "u")
            with open(path, "w", encoding="ascii") as f:
                f.write("".join(u + "\n" for u in urls))
            cmd.append(path)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20)

    def test_usage_errors_exit_2(self):
        ok = [self.srv.url("/ok/1/u")]
        cases = [
            ((), None),
            (("-parallel", "1"), ok),  # neither -fetches nor -seconds
            (("-fetches", "1"), ok),  # no -parallel
            (("-parallel", "0", "-fetches", "1"), ok),
            (("-parallel", "1", "-fetches", "x"), ok),
            (("-parallel", "1", "-seconds", "-3"), ok),
            (("-parallel", "1", "-fetches", "1", "-bogus"), ok),
            (("-parallel", "1", "-fetches", "1", "/nonexistent/urls"), None),
            (("-parallel", "1", "-fetches", "1"), []),  # empty URL file
            (("-parallel", "1", "-fetches", "1", "-throttle"), ok),
            (("-parallel", "1", "-fetches", "5", "-min-fetches", "2"), ok),  # needs -seconds
            (("-parallel", "1", "-seconds", "1", "-fetches", "5", "-min-fetches", "6"), ok),
            (("-parallel", "1", "-seconds", "1", "-min-fetches", "0"), ok),
        ]
        for args, urls in cases:
            p = self.run_raw(*args, urls=urls)
            self.assertEqual(p.returncode, 2, (args, urls, p.stderr))
            self.assertEqual(p.stdout, "", args)

    def test_rate_is_rejected(self):
        p = self.run_raw("-rate", "10", "-fetches", "1", urls=[self.srv.url("/ok/1/r")])
        self.assertEqual(p.returncode, 2)
        self.assertIn("-rate is not supported", p.stderr)

    def test_non_loopback_urls_are_refused(self):
        for url in ("http://10.1.2.3/x", "http://192.0.2.1:8080/", "http://example.com/",
                    "http://localhost.example.com/", "http://[2001:db8::1]/", "http://0.0.0.0/"):
            p = self.run_raw("-parallel", "1", "-fetches", "1", urls=[self.srv.url("/ok/1/a"), url])
            self.assertEqual(p.returncode, 2, url)
            self.assertIn("refusing", p.stderr, url)
            self.assertIn(":2:", p.stderr, url)
        self.assertEqual(self.srv.connections, 0)

    def test_https_is_refused(self):
        p = self.run_raw("-parallel", "1", "-fetches", "1", urls=["https://127.0.0.1/"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("https is not supported", p.stderr)

    def test_abbreviated_options(self):
        p = self.run_raw("-p", "2", "-f", "4", "-c", urls=[self.srv.url("/ok/5/abbr")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("4 fetches, 2 max parallel", p.stdout)
        self.assertIn("client: copied bodies", p.stdout)  # -c is still -checksum
        p = self.run_raw("-p", "1", "-f", "3", "-co", "-seq", urls=[self.srv.url("/ok/5/abbr")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("client: copied bodies", p.stdout)


def run_mkpool(*args, timeout=300):
    return subprocess.run([sys.executable, MKPOOL, *args], capture_output=True, text=True,
                          timeout=timeout)


class TestMkpool(unittest.TestCase):
    SCALE = "0.001"  # 100 x 100 KiB, 1 x 10 MiB, 200 x 4 KiB

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_mkpool.")
        self.root = os.path.join(self.tmp, "root")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, *extra):
        p = run_mkpool("--root", self.root, "--scale", self.SCALE, "--base-url",
                       "http://127.0.0.1:8123", "--writeback-timeout", "30", *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def files(self, pool):
        out = {}
        base = os.path.join(self.root, "seek-bound", pool)
        for d, _, names in os.walk(base):
            for n in names:
                full = os.path.join(d, n)
                out[os.path.relpath(full, self.root)] = os.path.getsize(full)
        return out

    def urls(self, pool):
        with open(os.path.join(self.root, f"urls.{pool}"), encoding="ascii") as f:
            return f.read().splitlines()

    def test_tiny_pools(self):
        p = self.make()
        self.assertIn("writeback done", p.stdout)
        f100k = self.files("100k")
        self.assertEqual(len(f100k), 100)
        self.assertEqual(set(f100k.values()), {100 * 1024})
        self.assertEqual(set(f100k), {f"seek-bound/100k/files-1/{j}" for j in range(1, 101)})
        f10m = self.files("10m")
        self.assertEqual(f10m, {"seek-bound/10m/files-1/1": 10 * 1024 * 1024})
        f4k = self.files("4k")
        self.assertEqual(len(f4k), 200)
        self.assertEqual(set(f4k.values()), {4096})
        # 500 x 10 directories of 40 files: the first 200 files fill 000/0 .. 000/4
        self.assertEqual(set(f4k), {f"seek-bound/4k/000/{b}/{f:02d}" for b in range(5)
                                    for f in range(40)})
        for pool, files in (("100k", f100k), ("10m", f10m), ("4k", f4k)):
            urls = self.urls(pool)
            self.assertEqual(len(urls), len(files))
            prefix = "http://127.0.0.1:8123/"
            self.assertTrue(all(u.startswith(prefix) for u in urls))
            self.assertEqual({u[len(prefix):] for u in urls}, set(files))
        # random order, random non-zero content, different per file
        self.assertNotEqual(self.urls("100k"), sorted(self.urls("100k")))
        with open(os.path.join(self.root, "seek-bound/100k/files-1/1"), "rb") as f:
            a = f.read()
        with open(os.path.join(self.root, "seek-bound/100k/files-1/2"), "rb") as f:
            b = f.read()
        self.assertNotEqual(a, b)
        self.assertGreater(len(set(a)), 200)
        self.assertNotEqual(a, bytes(len(a)))

    def test_scale_and_single_pool(self):
        p = run_mkpool("--root", self.root, "--scale", "0.0025", "--pool", "100k")
        self.assertEqual(p.returncode, 0, p.stderr)
        f = self.files("100k")
        self.assertEqual(len(f), 250)
        self.assertIn("seek-bound/100k/files-3/50", f)
        self.assertNotIn("seek-bound/100k/files-3/51", f)
        self.assertFalse(os.path.exists(os.path.join(self.root, "seek-bound", "10m")))
        self.assertFalse(os.path.exists(os.path.join(self.root, "urls.4k")))
        self.assertTrue(all(u.startswith("http://127.0.0.1:8080/") for u in self.urls("100k")))

    def test_idempotent_and_repairs(self):
        self.make("--pool", "100k")
        victim = os.path.join(self.root, "seek-bound/100k/files-1/7")
        other = os.path.join(self.root, "seek-bound/100k/files-1/8")
        with open(victim, "rb") as f:
            original = f.read()
        mtime_other = os.stat(other).st_mtime_ns
        p = self.make("--pool", "100k")
        self.assertIn("all 100 files present", p.stdout)
        os.truncate(victim, 1000)
        time.sleep(0.01)
        p = self.make("--pool", "100k")
        self.assertIn("writing 1 of 100 files", p.stdout)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), original)  # content depends only on seed and path
        self.assertEqual(os.stat(other).st_mtime_ns, mtime_other)

    def test_refuses_non_loopback_base_url(self):
        for url in ("http://192.0.2.1:8080", "http://example.com", "https://127.0.0.1",
                    "http://10.0.0.1/"):
            p = run_mkpool("--root", self.root, "--scale", self.SCALE, "--base-url", url)
            self.assertEqual(p.returncode, 2, url)
            self.assertTrue("refusing" in p.stderr or "http://" in p.stderr, p.stderr)
        self.assertFalse(os.path.exists(self.root))
        for url in ("http://localhost:9", "http://[::1]:9", "http://127.3.2.1"):
            p = run_mkpool("--root", self.root, "--scale", "0.0001", "--pool", "4k",
                           "--base-url", url)
            self.assertEqual(p.returncode, 0, (url, p.stderr))

    def test_refuses_when_it_will_not_fit(self):
        p = run_mkpool("--root", self.root, "--scale", "1000000")
        self.assertEqual(p.returncode, 1)
        self.assertIn("refusing", p.stderr)
        self.assertIn("free", p.stderr)
        self.assertFalse(os.path.exists(self.root))


class TestPoolEndToEnd(unittest.TestCase):
    """mkpool's pool served by a plain static server, fetched by loadgen with -checksum."""

    def test_fetch_pool(self):
        tmp = tempfile.mkdtemp(prefix="test_pool_e2e.")
        root = os.path.join(tmp, "root")
        try:
            handler = lambda *a, **kw: QuietFileHandler(*a, directory=root, **kw)  # noqa: E731
            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            httpd.daemon_threads = True
            port = httpd.server_address[1]
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
            p = run_mkpool("--root", root, "--scale", "0.001", "--pool", "100k", "--base-url",
                           f"http://localhost:{port}")
            self.assertEqual(p.returncode, 0, p.stderr)
            jpath = os.path.join(tmp, "out.json")
            r = subprocess.run([LOADGEN, "-checksum", "-parallel", "4", "-fetches", "150", "-json",
                                jpath, os.path.join(root, "urls.100k")], capture_output=True,
                               text=True, timeout=120)
            httpd.shutdown()
            httpd.server_close()
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(jpath, encoding="utf-8") as f:
                j = json.load(f)
            self.assertEqual(j["fetches"], 150)
            self.assertEqual(j["status"], {"200": 150})
            self.assertEqual(j["bytes"], 150 * 102400)
            self.assertEqual(j["errors_total"], 0)
            self.assertIn("102400 mean bytes/connection", r.stdout)
            self.assertIn("  code 200 -- 150\n", r.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class QuietFileHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    global LOADGEN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(SRC_ROOT, "build"),
                    help="meson build directory (holds bench/loadgen)")
    args, rest = ap.parse_known_args()
    LOADGEN = os.path.join(os.path.abspath(args.build), "bench", "loadgen")
    if not os.access(LOADGEN, os.X_OK):
        print(f"test_loadgen: {LOADGEN} not found or not executable (build first, or pass --build)",
              file=sys.stderr)
        return 2
    loader = unittest.TestLoader()
    if rest:
        suite = loader.loadTestsFromNames(rest, sys.modules[__name__])
    else:
        suite = loader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
