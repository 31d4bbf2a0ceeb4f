#!/usr/bin/env python3
"""The status page: counters add up after a known set of requests (failures included), the
three formats agree, and status.allow-networks keeps others out."""
import argparse
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, free_port, request  # noqa: E402


def get(srv, path, extra=b""):
    return request(srv, b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n")


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
        try:
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
            self.assertIn("stat", j["pools"])
            self.assertIn("read", j["pools"])
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
            self.assertEqual(metrics[f'seekless_backend_up{{backend="127.0.0.1:{dead}"}}'], 0)
            st, h, b = get(srv, b"/server-status")
            self.assertEqual(st, 200)
            self.assertIn(b"requests %d," % (n + 2), b)
            self.assertIn(b"backend 127.0.0.1:%d" % dead, b)
        finally:
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    args, rest = ap.parse_known_args()
    test_core.BUILD = args.build
    res = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2).result
    print(f"{res.testsRun - len(res.failures) - len(res.errors) - len(res.skipped)} passed, "
          f"{len(res.failures) + len(res.errors)} failed, {len(res.skipped)} skipped")
    sys.exit(0 if res.wasSuccessful() else 1)
