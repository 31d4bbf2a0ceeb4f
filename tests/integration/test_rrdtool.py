#!/usr/bin/env python3
"""mod_rrdtool: every request counted into its block's RRD database (made with lighttpd's layout
when missing), written by one rrdtool process once a minute and when the server stops; the
counts read back with `rrdtool lastupdate` (the rrdtool Debian package). A database path the
server may not create, or a binary that is not there, is refused at start-up."""
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server  # noqa: E402

RRDTOOL = shutil.which("rrdtool")


def lastupdate(path):
    """The values of the last update: {"InOctets": n, "OutOctets": n, "Requests": n}."""
    out = subprocess.run([RRDTOOL, "lastupdate", path], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    names = out[0].split()
    values = out[-2].split(":", 1)[1].split()
    return dict(zip(names, (int(float(v)) for v in values)))


@unittest.skipUnless(RRDTOOL, "rrdtool is needed (scripts/install-deps installs it)")
class Rrdtool(unittest.TestCase):
    def test_counts_per_database(self):
        # The module also writes at each minute's start: begin where none falls in this test
        # (it takes a second or two), so the update at the stop holds every request.
        if time.time() % 60 > 45:
            time.sleep(61 - time.time() % 60)
        srv = Server('server.modules = ( "mod_rrdtool", "mod_staticfile" )\n',
                     {"a.txt": b"x" * 1000})
        main, b = os.path.join(srv.dir, "all.rrd"), os.path.join(srv.dir, "b.rrd")
        with open(srv.conf, "a") as f:
            f.write(f'rrdtool.binary = "{RRDTOOL}"\nrrdtool.db-name = "{main}"\n'
                    f'$HTTP["host"] == "b.test" {{ rrdtool.db-name = "{b}" }}\n')
        srv.start()
        try:
            for host in (b"t", b"t", b"t", b"b.test"):
                st = test_core.request(srv, b"GET /a.txt HTTP/1.1\r\nHost: " + host +
                                       b"\r\nConnection: close\r\n\r\n")[0]
                self.assertEqual(st, 200)
            self.assertEqual(test_core.request(srv, b"GET /nope HTTP/1.1\r\nHost: t\r\n"
                                               b"Connection: close\r\n\r\n")[0], 404)
        finally:
            # The last update is written when the server stops; read before the directory goes.
            srv.proc.terminate()
            self.assertEqual(srv.proc.wait(timeout=60), 0)
            counts = {p: lastupdate(p) for p in (main, b)}
            srv.stop()
        self.assertEqual(counts[main]["Requests"], 4)
        self.assertEqual(counts[b]["Requests"], 1)
        self.assertGreater(counts[main]["OutOctets"], 3 * 1000)
        self.assertLess(counts[b]["OutOctets"], 2 * 1000)
        self.assertGreater(counts[b]["InOctets"], 20)

    def test_refused(self):
        test_core.assert_refused(self, 'server.modules = ( "mod_rrdtool" )\n'
                                       'rrdtool.binary = "/no/such/rrdtool"\n'
                                       'rrdtool.db-name = "/tmp/x.rrd"\n',
                                 ["rrdtool.binary", "/no/such/rrdtool"])
        test_core.assert_refused(self, 'server.modules = ( "mod_rrdtool" )\n'
                                       'rrdtool.db-name = "/no/such/dir/x.rrd"\n',
                                 ["rrdtool.db-name", "/no/such/dir"])


if __name__ == "__main__":
    test_core.main()
