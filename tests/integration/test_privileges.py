#!/usr/bin/env python3
"""Privileges, tested as root (skipped otherwise): seekless started by root with server.username
"nobody" / server.groupname "nogroup" binds and opens its logs and pid file as root, then every
thread runs as nobody:nogroup with no supplementary group and no capability; a file only root may
read is refused (403) while the others are served; the logs stay root's and are still written;
SIGHUP reopens them (a rotated log, and a log that was not rotated); SIGUSR1's new server, started
by the unprivileged old one, takes the logs and the pid file over; the pid file goes at the end.
server.chroot: the document root is inside it (as in lighttpd), the logs and the pid file are
opened outside it before, SIGUSR1 is refused with a message and the server serves on."""
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, request  # noqa: E402
from sltest import alive, read_text, wait_for  # noqa: E402

ROOT = os.geteuid() == 0
USER, GROUP = "nobody", "nogroup"


def ids():
    return pwd.getpwnam(USER).pw_uid, grp.getgrnam(GROUP).gr_gid


def open_to_all(srv):
    """The test's temporary tree is root's and 0700: let nobody into it (not write to it)."""
    for d, dirs, files in os.walk(srv.dir):
        os.chmod(d, 0o755)
        for name in files:
            os.chmod(os.path.join(d, name), 0o644)


@unittest.skipUnless(ROOT, "needs root (switching user)")
class Dropped(unittest.TestCase):
    def setUp(self):
        self.srv = Server(f'server.username = "{USER}"\nserver.groupname = "{GROUP}"\n'
                          'server.max-stat-threads = 2\nserver.max-read-threads = 2\n'
                          'server.network-backend = "gthread-aio"\n',
                          {"a.txt": b"A" * 100, "secret.txt": b"S",
                           "t.txt": b"seekless compresses text\n" * 1000})
        self.pidfile = os.path.join(self.srv.dir, "seekless.pid")
        self.alog = os.path.join(self.srv.dir, "access.log")
        with open(self.srv.conf, "a") as f:
            f.write(f'server.pid-file = "{self.pidfile}"\n'
                    f'server.modules += ( "mod_accesslog" )\naccesslog.filename = "{self.alog}"\n')
        open_to_all(self.srv)
        os.chmod(os.path.join(self.srv.root, "secret.txt"), 0o600)
        self.pids = set()
        # The graceful restart's new server is exec'd by the unprivileged old one: the program
        # must be where nobody may run it (a checkout under /root is not), as /usr/sbin is.
        self.bin = os.path.join(self.srv.dir, "bin")
        os.makedirs(os.path.join(self.bin, "app"))
        shutil.copy2(os.path.join(test_core.BUILD, "app", "seekless"),
                     os.path.join(self.bin, "app", "seekless"))
        open_to_all(self.srv)
        os.chmod(os.path.join(self.bin, "app", "seekless"), 0o755)
        os.chmod(os.path.join(self.srv.root, "secret.txt"), 0o600)
        self.build, test_core.BUILD = test_core.BUILD, self.bin

    def tearDown(self):
        test_core.BUILD = self.build
        pid = self.pid()
        for p in {pid} | self.pids:
            if p and alive(p):
                os.kill(p, signal.SIGTERM)
        wait_for(lambda: not any(alive(p) for p in {pid} | self.pids if p))
        for p in {pid} | self.pids:
            if p and alive(p):
                os.kill(p, signal.SIGKILL)
        if self.srv.proc and self.srv.proc.poll() is None:
            self.srv.proc.kill()
        if self.srv.proc:
            self.srv.proc.wait(timeout=10)
            self.srv.proc.stderr.close()
            self.srv.proc = None
        self.srv.stop()

    def pid(self):
        try:
            return int(read_text(self.pidfile).strip() or 0)
        except ValueError:
            return 0

    def get(self, path):
        st, _, body = request(self.srv, b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        return st, body

    def assert_unprivileged(self, pid):
        uid, gid = ids()
        tasks = os.listdir(f"/proc/{pid}/task")
        self.assertGreater(len(tasks), 2)  # the loops and the pools: each thread is checked
        for t in tasks:
            status = {}
            for line in read_text(f"/proc/{pid}/task/{t}/status").splitlines():
                k, _, v = line.partition(":")
                status[k] = v.split()
            self.assertEqual(status["Uid"], [str(uid)] * 4, f"thread {t}")
            self.assertEqual(status["Gid"], [str(gid)] * 4, f"thread {t}")
            # No group of root's is left; initgroups() (as lighttpd) lists the user's own group
            # (and those /etc/group names the user in: none for nobody).
            self.assertLessEqual(set(status["Groups"]), {str(gid)}, f"thread {t}")
            for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
                self.assertEqual(int(status[cap][0], 16), 0, f"thread {t} {cap}")

    def test_runs_as_the_user_logs_stay_roots(self):
        self.srv.start()
        pid = self.srv.proc.pid
        self.assertTrue(wait_for(lambda: self.pid() == pid))
        self.assert_unprivileged(pid)
        self.assertEqual(self.get(b"/a.txt"), (200, b"A" * 100))
        self.assertEqual(self.get(b"/secret.txt")[0], 403)
        # Opened by root before the drop, written by nobody after it.
        for path in (self.srv.log, self.alog, self.pidfile):
            self.assertEqual(os.stat(path).st_uid, 0, path)
        self.assertTrue(wait_for(lambda: "GET /a.txt" in read_text(self.alog)))
        self.assertTrue(wait_for(lambda: "GET /secret.txt" in read_text(self.alog)))
        # A HUP with nothing rotated keeps writing the same files, without complaint.
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.3)
        self.assertEqual(self.get(b"/a.txt?again")[0], 200)
        self.assertTrue(wait_for(lambda: "GET /a.txt?again" in read_text(self.alog)))
        self.assertNotIn("cannot reopen", read_text(self.srv.log))
        # Rotated as logrotate's "create 0640 nobody nogroup" does: the new files are nobody's.
        uid, gid = ids()
        for path in (self.srv.log, self.alog):
            os.rename(path, path + ".1")
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o640)
            os.fchown(fd, uid, gid)
            os.close(fd)
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.3)
        self.assertEqual(self.get(b"/a.txt?rotated")[0], 200)
        self.assertTrue(wait_for(lambda: "GET /a.txt?rotated" in read_text(self.alog)))
        self.assertNotIn("rotated", read_text(self.alog + ".1"))
        # Stopped: the pid file is removed although nobody may not write to its directory.
        self.assertEqual(self.srv._stop(), 0)
        self.assertEqual(read_text(self.pidfile), "")  # removed, or emptied as lighttpd does

    def cache_dir(self):
        """deflate.cache-dir's value, and where it is seen from outside."""
        d = os.path.join(self.srv.dir, "cache", "sub")
        return d, d

    def test_deflate_cache_dir_made_for_the_user(self):
        value, real = self.cache_dir()
        with open(self.srv.conf, "a") as f:
            f.write('server.modules += ( "mod_deflate" )\ndeflate.mimetypes = ( "text/" )\n'
                    f'deflate.allowed-encodings = ( "gzip" )\ndeflate.cache-dir = "{value}"\n')
        self.srv.start()
        uid, gid = ids()
        # Made by root at start-up, given to the server's user (mode 0700 as lighttpd's).
        for d in (os.path.dirname(real), real):
            st = os.stat(d)
            self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o777), (uid, gid, 0o700), d)
        st, h, _ = request(self.srv, b"GET /t.txt HTTP/1.1\r\nHost: t\r\n"
                                     b"Accept-Encoding: gzip\r\n\r\n")
        self.assertEqual((st, h.get("content-encoding")), (200, "gzip"))
        copies = [os.path.join(d, n) for d, _, ns in os.walk(real) for n in ns]
        self.assertTrue(copies, "no compressed copy in the cache")
        self.assertTrue(all(os.stat(c).st_uid == uid for c in copies))
        self.assertNotIn("Permission denied", read_text(self.srv.log))

    def test_graceful_restart_by_the_unprivileged_server(self):
        self.srv.start()
        old = self.srv.proc.pid
        self.assertTrue(wait_for(lambda: self.pid() == old))
        self.pids.add(old)
        os.kill(old, signal.SIGUSR1)
        self.assertTrue(wait_for(lambda: self.pid() not in (0, old)),
                        "no new server:\n" + read_text(self.srv.log))
        new = self.pid()
        self.pids.add(new)
        self.assertTrue(wait_for(lambda: not alive(old)), "the old server did not exit")
        self.assert_unprivileged(new)
        self.assertEqual(self.get(b"/a.txt?new")[0], 200)
        self.assertEqual(self.get(b"/secret.txt")[0], 403)
        self.assertTrue(wait_for(lambda: "GET /a.txt?new" in read_text(self.alog)))
        self.assertIn("new server started", read_text(self.srv.log))
        # The new server reopens on HUP too, and removes the pid file when it stops.
        os.kill(new, signal.SIGHUP)
        time.sleep(0.3)
        self.assertEqual(self.get(b"/a.txt?hup")[0], 200)
        self.assertTrue(wait_for(lambda: "GET /a.txt?hup" in read_text(self.alog)))
        os.kill(new, signal.SIGTERM)
        self.assertTrue(wait_for(lambda: not alive(new)))
        self.assertEqual(read_text(self.pidfile), "")  # removed, or emptied as lighttpd does
        self.assertNotIn("cannot", read_text(self.srv.log))


@unittest.skipUnless(ROOT, "needs root (chroot)")
class Chroot(Dropped):
    """The test's directory is the chroot: the document root is "/root" inside it."""

    def setUp(self):
        super().setUp()
        # LeakSanitizer reads /proc at exit, which a chroot does not have: in the ASan build it
        # would fail the exit (23) without checking anything. The other tests check for leaks.
        self.asan_options = os.environ.get("ASAN_OPTIONS")
        os.environ["ASAN_OPTIONS"] = (self.asan_options + ":" if self.asan_options else "") + \
            "detect_leaks=0"
        with open(self.srv.conf) as f:
            text = f.read()
        text = text.replace(f'server.document-root = "{self.srv.root}"',
                            'server.document-root = "/root"')
        with open(self.srv.conf, "w") as f:
            f.write(text + f'server.chroot = "{self.srv.dir}"\n')

    def tearDown(self):
        try:
            super().tearDown()
        finally:
            if self.asan_options is None:
                os.environ.pop("ASAN_OPTIONS", None)
            else:
                os.environ["ASAN_OPTIONS"] = self.asan_options

    def cache_dir(self):
        return "/cache/sub", os.path.join(self.srv.dir, "cache", "sub")

    def test_runs_as_the_user_logs_stay_roots(self):
        self.srv.start()
        pid = self.srv.proc.pid
        self.assertTrue(wait_for(lambda: self.pid() == pid))
        self.assertEqual(os.readlink(f"/proc/{pid}/root"), os.path.realpath(self.srv.dir))
        self.assert_unprivileged(pid)
        self.assertEqual(self.get(b"/a.txt"), (200, b"A" * 100))
        self.assertEqual(self.get(b"/secret.txt")[0], 403)
        self.assertNotEqual(self.get(b"/seekless.conf")[0], 200)  # the chroot, not the root
        self.assertTrue(wait_for(lambda: "GET /secret.txt" in read_text(self.alog)))
        # A rotated log cannot be reopened by its path inside the chroot: said, and written on.
        os.rename(self.alog, self.alog + ".1")
        os.kill(pid, signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "outside server.chroot" in read_text(self.srv.log)))
        self.assertEqual(self.get(b"/a.txt?hup")[0], 200)
        self.assertTrue(wait_for(lambda: "GET /a.txt?hup" in read_text(self.alog + ".1")))
        self.assertFalse(os.path.exists(self.alog))  # nothing made inside the chroot either
        self.assertEqual(self.srv._stop(), 0)
        self.assertEqual(read_text(self.pidfile), "")  # emptied: its path is outside

    def test_graceful_restart_by_the_unprivileged_server(self):
        self.srv.start()
        pid = self.srv.proc.pid
        self.assertTrue(wait_for(lambda: self.pid() == pid))
        os.kill(pid, signal.SIGUSR1)
        self.assertTrue(wait_for(lambda: "no graceful restart under server.chroot"
                                 in read_text(self.srv.log)))
        self.assertEqual(self.get(b"/a.txt"), (200, b"A" * 100))
        self.assertEqual(self.pid(), pid)
        self.assertIsNone(self.srv.proc.poll())

    def test_config_errors(self):
        with open(self.srv.conf, "a") as f:
            f.write('server.chroot = "relative"\n')
        r = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f",
                            self.srv.conf], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn('seekless.conf:', r.stderr)
        self.assertIn('server.chroot "relative" must be an absolute path', r.stderr)
        # The document root is looked for inside the chroot.
        with open(self.srv.conf, "a") as f:
            f.write(f'server.chroot = "{self.srv.root}"\n')
        r = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f",
                            self.srv.conf], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f'server.document-root "/root": No such file or directory', r.stderr)


if __name__ == "__main__":
    test_core.main()
