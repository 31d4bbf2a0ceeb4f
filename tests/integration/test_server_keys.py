#!/usr/bin/env python3
"""server.name and server.max-fds on the running server: server.name is the access log's %v and
stands for a missing Host in %V (SERVER_NAME for FastCGI is test_proxy's), server.max-fds is the
soft RLIMIT_NOFILE the server runs with (the -t mistakes are test_config_cli's)."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import accepting, stop_at_end  # noqa: E402
from test_core import Server, request  # noqa: E402


def wait_port(port, proc):
    if not accepting(port, 10, proc):
        raise RuntimeError("seekless did not start listening")


def limits(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return tuple(int(x) for x in line.split()[3:5])
    return None


class ServerKeys(unittest.TestCase):
    def test_server_name_in_the_access_log(self):
        srv = Server('server.name = "www.example.org"\naccesslog.filename = "access.log"\n'
                     'accesslog.format = "%v %V %>s"\n'
                     '$HTTP["url"] =^ "/other/" { server.name = "other.example.org" }\n',
                     {"a.txt": b"a"})
        srv.start()
        try:
            request(srv, b"GET /a.txt HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n")
            request(srv, b"GET /a.txt HTTP/1.0\r\n\r\n")
            request(srv, b"GET /other/x HTTP/1.0\r\n\r\n")
            self.assertEqual(srv._stop(), 0)  # the log is complete once the server is gone
            with open(os.path.join(srv.dir, "access.log")) as f:
                lines = f.read().splitlines()
        finally:
            srv.stop()
        # (each loop writes its own lines: their order between loops is not the requests')
        self.assertEqual(sorted(lines), ["other.example.org other.example.org 404",
                                         "www.example.org h.test 200", "www.example.org www.example.org 200"])

    def test_max_fds_is_the_soft_limit(self):
        srv = Server("server.max-fds = 300\n", {"a.txt": b"a"})
        srv.start()
        stop_at_end(self, srv)
        soft, hard = limits(srv.proc.pid)
        self.assertEqual(soft, 300)
        self.assertGreaterEqual(hard, 300)
        self.assertEqual(request(srv, b"GET /a.txt HTTP/1.0\r\n\r\n")[0], 200)

    def test_descriptor_table_is_sized_at_start(self):
        # The table holds the open-file cache's descriptors and the connections' from the start
        # (server.c fd_table_presize): grown later, each doubling would stall the loop that opens
        # a descriptor for an RCU grace period. 3000 descriptors, 100 connections: the cache
        # keeps 3000 - 4 * 100 - 256 = 2344 files, the table is sized for descriptor 2999.
        for engine, top in (("inotify", 2999), ("disable", 4 * 100 + 256)):
            srv = Server(f"server.max-fds = 3000\nserver.max-connections = 100\n"
                         f'server.stat-cache-engine = "{engine}"\n', {"a.txt": b"a"})
            srv.start()
            try:
                with open(f"/proc/{srv.proc.pid}/status") as f:
                    size = int(next(ln for ln in f if ln.startswith("FDSize:")).split()[1])
                self.assertGreater(size, top, engine)
                self.assertEqual(request(srv, b"GET /a.txt HTTP/1.0\r\n\r\n")[0], 200)
            finally:
                srv.stop()

    def test_max_fds_above_the_hard_limit(self):
        # Not root: above the hard limit is a start-up error. Root raises it (lighttpd too).
        srv = Server("server.max-fds = 4000\n")
        self.addCleanup(srv.stop)
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            os.chmod(srv.dir, 0o755)
            os.chmod(srv.conf, 0o644)
        else:
            cmd = []
        r = subprocess.run(["prlimit", "--nofile=1024:2048", *cmd,
                            os.path.join(test_core.BUILD, "app", "seekless"), "-D", "-f", srv.conf],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("server.max-fds 4000 is above the hard limit of open files (2048)", r.stderr)
        if os.geteuid() == 0:
            # Root raises the hard limit, where it holds CAP_SYS_RESOURCE (not in every
            # container): else the same start-up error, saying why.
            p = subprocess.Popen(["prlimit", "--nofile=1024:2048",
                                  os.path.join(test_core.BUILD, "app", "seekless"), "-D", "-f",
                                  srv.conf], stderr=subprocess.PIPE, text=True)
            try:
                wait_port(srv.port, p)
                self.assertEqual(limits(p.pid), (4000, 4000))
            except RuntimeError:
                self.assertIn("server.max-fds 4000: setrlimit(RLIMIT_NOFILE): Operation not "
                              "permitted (raising the hard limit needs CAP_SYS_RESOURCE",
                              p.stderr.read())
            finally:
                if p.poll() is None:
                    p.terminate()
                p.wait(timeout=30)
                p.stderr.close()

if __name__ == "__main__":
    test_core.main()
