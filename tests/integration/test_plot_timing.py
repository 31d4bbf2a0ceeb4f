#!/usr/bin/env python3
"""bench/plot-timing draws non-empty PNGs and a correct summary from a real timing log: the
real server writes the trace (cold files, gthread-aio, so there are queue waits and reads)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, read_response  # noqa: E402

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "plot-timing")


@unittest.skipUnless(shutil.which("gnuplot"), "gnuplot-nox is needed")
class PlotTiming(unittest.TestCase):
    def test_plots_from_a_real_log(self):
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
            for png in ("queue-wait", "read-time", "write-time", "latency-histogram"):
                with open(os.path.join(out, png + ".png"), "rb") as f:
                    data = f.read()
                self.assertGreater(len(data), 1000, png)
                self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", png)
            with open(os.path.join(out, "summary.txt")) as f:
                summary = f.read()
            self.assertIn(f"requests {len(files)}, malformed lines skipped 2", summary)
            # The reads went through the pool: the read time p50 is positive.
            lines = [json.loads(x) for x in srv.timing_text.splitlines()]
            reads = sorted(sum(d - s for q, s, d in l["us"]["reads"]) / 1000 for l in lines)
            self.assertGreater(reads[len(reads) // 2], 0)
            empty = os.path.join(tmp, "empty.log")
            open(empty, "w").close()
            self.assertEqual(subprocess.run([PLOT, empty], capture_output=True).returncode, 2)
            self.assertEqual(subprocess.run([PLOT, os.path.join(tmp, "nope")],
                                            capture_output=True).returncode, 2)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    test_core.main()
