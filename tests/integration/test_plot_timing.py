#!/usr/bin/env python3
"""bench/plot-timing: PNGs and a correct summary.txt from a timing log.

Two sources of logs: a generator of realistic fake traces (several hundred requests over the
thread-pool, plain-file and proxy paths, with the stages each path really has, nulls and
missing keys included) whose derived values the test computes itself, and the real server
writing a trace (cold files through gthread-aio). Run as
    python3 test_plot_timing.py --build BUILDDIR
and it ends with "N passed, M failed, K skipped"."""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, read_response  # noqa: E402

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "plot-timing")
PNGS = ("queue-wait", "read-time", "write-time", "latency-histogram")
PNG_SIG = b"\x89PNG\r\n\x1a\n"


def fake_trace(n, seed=6):
    """n realistic trace records (dicts), start times spread over a few seconds."""
    rnd = random.Random(seed)
    t = 1763863200.0 + rnd.random()
    recs = []
    conn, req = 10, 0
    for i in range(n):
        t += rnd.expovariate(200)  # ~200 requests/s
        if rnd.random() < 0.2:
            conn, req = conn + 1, 0
        req += 1
        kind = rnd.choices(["pool", "sendfile", "proxy", "missing", "head"], [50, 20, 10, 10, 10])[0]
        us = {"accept": 0, "parsed": rnd.randint(5, 80)}
        status, nbytes, backend = 200, rnd.choice([0, 1024, 65536, 102400, 1048576]), "hybrid"
        now = us["parsed"]

        def step(lo, hi):
            nonlocal now
            now += rnd.randint(lo, hi)
            return now

        if kind in ("pool", "missing", "head"):
            us["stat_queued"] = step(1, 10)
            # A starved pool: some requests wait many milliseconds for a thread.
            us["stat_started"] = step(1, 30000 if rnd.random() < 0.1 else 800)
            us["stat_done"] = step(50, 5000)
        if kind == "missing":
            status, nbytes = 404, 0
            us["first_byte"] = step(5, 50)
            us["last_byte"] = step(0, 20)
            us["close"] = step(1, 30)
        elif kind == "head":
            us["open"] = step(1, 20)
            us["first_byte"] = us["last_byte"] = step(5, 50)
            us["reads"] = []
            if rnd.random() < 0.5:  # else "close" is missing altogether
                us["close"] = step(1, 30)
        elif kind == "pool":
            us["open"] = step(1, 20)
            us["first_byte"] = step(5, 60)
            reads = []
            for _ in range(rnd.randint(1, 6)):
                q = step(1, 50)
                s = step(0, 20000 if rnd.random() < 0.05 else 500)
                d = step(20, 4000)
                reads.append([q, s, d])
            us["reads"] = reads
            us["last_byte"] = step(10, 300)
            # Sometimes the trace ends before close was recorded: total falls back to last_byte.
            us["close"] = step(1, 50) if rnd.random() < 0.8 else None
        elif kind == "sendfile":
            backend = "sendfile"
            us.update({"stat_queued": None, "stat_started": None, "stat_done": None, "reads": None})
            us["open"] = step(5, 100)
            us["first_byte"] = step(5, 60)
            us["last_byte"] = step(100, 20000)
            us["close"] = step(1, 50)
        else:
            backend = "proxy"
            us["backend_connect"] = step(20, 400)
            us["backend_first_byte"] = step(100, 9000)
            us["first_byte"] = step(5, 50)
            us["backend_done"] = step(10, 3000)
            us["last_byte"] = step(5, 500)
            us["close"] = step(1, 50)
        recs.append({"start": round(t, 6), "conn": conn, "req": req,
                     "method": "HEAD" if kind == "head" else "GET",
                     "path": f"/files-1/{i % 7}/x{i}", "status": status, "bytes": nbytes,
                     "backend": backend, "us": us})
    return recs


def derived(rec):
    """The brief's formulas, written independently of plot-timing: values in ms."""
    us = rec["us"]

    def v(k):
        return us.get(k)

    qw = rd = 0
    if v("stat_queued") is not None and v("stat_started") is not None:
        qw += v("stat_started") - v("stat_queued")
    if v("stat_started") is not None and v("stat_done") is not None:
        rd += v("stat_done") - v("stat_started")
    for q, s, d in us.get("reads") or []:
        qw += s - q
        rd += d - s
    wr = v("last_byte") - v("first_byte") if None not in (v("first_byte"), v("last_byte")) else 0
    total = v("close") if v("close") is not None else (v("last_byte") or 0)
    return {"queue_wait_ms": qw / 1000, "read_ms": rd / 1000, "write_ms": wr / 1000,
            "total_ms": total / 1000}


def nearest_rank(vals, p):
    s = sorted(vals)
    return s[max(1, math.ceil(p * len(s) / 100)) - 1]


def parse_summary(text):
    """{"requests": n, "malformed": m, name: {"p50": x, ...}} from summary.txt."""
    lines = [l for l in text.splitlines() if l and not l.startswith("#")]
    head = lines[0].split()
    out = {"requests": int(head[1].rstrip(",")), "malformed": int(head[-1])}
    for l in lines[1:]:
        name, rest = l.split(":", 1)
        w = rest.split()
        out[name] = {w[i]: float(w[i + 1]) for i in range(0, len(w), 2)}
    return out


MALFORMED = [
    "not json at all",
    '{"start": 1763863200.5, "us": {"accept": 0,',   # cut short
    "[1, 2, 3]",
    '"a string"',
    '{"conn": 1, "us": {}}',                          # no start
    '{"start": 1763863200.5, "us": null}',
    '{"start": 1763863200.5, "us": {"reads": [[1, 2]]}}',
    '{"start": 1763863200.5, "us": {"reads": [[1, null, 3]]}}',
    '{"start": "yesterday", "us": {}}',
    '{"start": 1763863200.5, "us": {"last_byte": "12"}}',
    '{"start": NaN, "us": {}}',
]


@unittest.skipUnless(shutil.which("gnuplot"), "gnuplot-nox is needed")
class PlotFakeTrace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sl_plot_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, lines):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines))
        return path

    def plot(self, *args):
        return subprocess.run([PLOT, *args], capture_output=True, text=True, timeout=120)

    def check_pngs(self, out):
        for png in PNGS:
            path = os.path.join(out, png + ".png")
            self.assertTrue(os.path.isfile(path), path)
            with open(path, "rb") as f:
                data = f.read()
            self.assertGreater(len(data), 1000, png)
            self.assertEqual(data[:8], PNG_SIG, png)

    def test_summary_matches_the_trace(self):
        recs = fake_trace(400)
        log = self.write("timing.log", [json.dumps(r) for r in recs])
        out = os.path.join(self.tmp, "plots")
        r = self.plot("--out", out, "--title", "fake trace", log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("malformed", r.stderr)
        self.check_pngs(out)
        with open(os.path.join(out, "summary.txt")) as f:
            got = parse_summary(f.read())
        self.assertEqual(got["requests"], 400)
        self.assertEqual(got["malformed"], 0)
        values = [derived(x) for x in recs]
        for name in ("queue_wait_ms", "read_ms", "write_ms", "total_ms"):
            col = [v[name] for v in values]
            want = {"p50": nearest_rank(col, 50), "p90": nearest_rank(col, 90),
                    "p99": nearest_rank(col, 99), "max": max(col)}
            for k, w in want.items():
                self.assertAlmostEqual(got[name][k], w, delta=0.0011, msg=f"{name} {k}")
        # The generator makes the interesting cases real: starved queues, no reads at all.
        self.assertGreater(max(v["queue_wait_ms"] for v in values), 10)
        self.assertEqual(min(v["read_ms"] for v in values), 0)

    def test_malformed_lines_are_skipped_and_reported(self):
        recs = fake_trace(300, seed=7)
        lines = [json.dumps(r) for r in recs]
        rnd = random.Random(3)
        for bad in MALFORMED:
            lines.insert(rnd.randrange(len(lines) + 1), bad)
        lines.insert(5, "")  # blank lines are not records and not malformed
        log = self.write("mixed.log", lines)
        out = os.path.join(self.tmp, "plots")
        r = self.plot("--out", out, log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"skipped {len(MALFORMED)} malformed line(s)", r.stderr)
        self.assertIn("mixed.log:", r.stderr)  # the first few are named by line number
        self.check_pngs(out)
        with open(os.path.join(out, "summary.txt")) as f:
            got = parse_summary(f.read())
        self.assertEqual(got["requests"], len(recs))
        self.assertEqual(got["malformed"], len(MALFORMED))
        # The good lines alone decide the numbers.
        col = [derived(x)["total_ms"] for x in recs]
        self.assertAlmostEqual(got["total_ms"]["max"], max(col), delta=0.0011)
        self.assertAlmostEqual(got["total_ms"]["p50"], nearest_rank(col, 50), delta=0.0011)

    def test_default_out_is_next_to_the_log(self):
        sub = os.path.join(self.tmp, "run 1")
        os.mkdir(sub)
        log = os.path.join(sub, "timing.log")
        with open(log, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in fake_trace(50, seed=8)))
        r = self.plot("--title", "it's \"quoted\"\nand two lines", log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_pngs(sub)
        self.assertTrue(os.path.isfile(os.path.join(sub, "summary.txt")))

    def test_a_single_request_is_enough(self):
        log = self.write("one.log", [json.dumps(fake_trace(1)[0])])
        out = os.path.join(self.tmp, "plots")
        r = self.plot("--out", out, log)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_pngs(out)

    def test_unusable_logs_exit_2(self):
        cases = {
            "empty": self.write("empty.log", []),
            "blank lines": self.write("blank.log", ["", "   ", ""]),
            "only malformed": self.write("bad.log", MALFORMED),
            "missing": os.path.join(self.tmp, "nope.log"),
            "a directory": self.tmp,
        }
        for what, path in cases.items():
            with self.subTest(what):
                r = self.plot("--out", os.path.join(self.tmp, "never"), path)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("plot-timing:", r.stderr)
                self.assertIn(os.path.basename(path), r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "never", "summary.txt")))


@unittest.skipUnless(shutil.which("gnuplot"), "gnuplot-nox is needed")
class PlotRealTrace(unittest.TestCase):
    def test_plots_from_a_real_log(self):
        if not os.path.exists(os.path.join(test_core.BUILD, "app", "seekless")):
            self.skipTest(f"no server binary under {test_core.BUILD}")
        files = {f"d/f{i}.bin": os.urandom(150000) for i in range(60)}
        srv = Server('debug.log-timing = "enable"\nserver.network-backend = "gthread-aio"\n'
                     'server.network-backend-block-size = 65536\n', files).start()
        try:
            for name in files:
                test_core.evict(os.path.join(srv.root, name))
            s = srv.connect()
            s.sendall(b"".join(b"GET /%s HTTP/1.1\r\nHost: t\r\n\r\n" % n.encode() for n in files))
            rest = b""
            for _ in files:
                st, h, b, rest = read_response(s, rest)
                self.assertEqual(st, 200)
            s.close()
        finally:
            self.assertEqual(srv.stop(), 0)
        tmp = tempfile.mkdtemp(prefix="sl_plot_")
        try:
            log = os.path.join(tmp, "timing.log")
            with open(log, "w") as f:
                f.write(srv.timing_text + "not json at all\n{\"start\": 1}\n")
            out = os.path.join(tmp, "plots")
            r = subprocess.run([PLOT, "--out", out, log], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("skipped 2 malformed line(s)", r.stderr)
            for png in PNGS:
                with open(os.path.join(out, png + ".png"), "rb") as f:
                    data = f.read()
                self.assertGreater(len(data), 1000, png)
                self.assertEqual(data[:8], PNG_SIG, png)
            with open(os.path.join(out, "summary.txt")) as f:
                got = parse_summary(f.read())
            self.assertEqual(got["requests"], len(files))
            self.assertEqual(got["malformed"], 2)
            # The real server's lines follow the schema: the test's own formulas agree.
            recs = [json.loads(x) for x in srv.timing_text.splitlines()]
            col = [derived(x)["read_ms"] for x in recs]
            self.assertAlmostEqual(got["read_ms"]["max"], max(col), delta=0.0011)
            # The reads went through the pool: the read time p50 is positive.
            self.assertGreater(got["read_ms"]["p50"], 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    test_core.main()
