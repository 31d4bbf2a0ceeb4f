#!/usr/bin/env python3
"""What the Debian package (packaging/) relies on, with the real seekless binary:

- The default configuration /etc/seekless/seekless.conf, with every snippet of conf-available/
  enabled, uses only keys seekless accepts (seekless -t), and serves; its /var paths are moved
  into a temp dir, nothing else is changed.
- Under a systemd unit of Type=notify (NOTIFY_SOCKET set) seekless sends READY=1 only once it
  accepts connections, and STOPPING=1 when SIGTERM arrives, before it exits.

packaging/test-deb does the rest on a clean bookworm (install, run, reload, purge).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import free_port  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETC = os.path.join(SRC, "packaging", "etc", "seekless")


def seekless_bin():
    return os.path.join(test_core.BUILD, "app", "seekless")


class DefaultConfig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sl_pkg_")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.etc = os.path.join(self.dir, "seekless")
        shutil.copytree(ETC, self.etc, symlinks=True)
        enabled = os.path.join(self.etc, "conf-enabled")
        os.makedirs(enabled, exist_ok=True)
        for name in sorted(os.listdir(os.path.join(self.etc, "conf-available"))):
            os.symlink("../conf-available/" + name, os.path.join(enabled, name))
        self.log = os.path.join(self.dir, "log")
        self.www = os.path.join(self.dir, "www")
        os.mkdir(self.log)
        os.mkdir(self.www)
        with open(os.path.join(self.www, "index.html"), "w") as f:
            f.write("hello\n")
        for d, _, files in os.walk(self.etc):
            for name in files:
                p = os.path.join(d, name)
                with open(p) as f:
                    text = f.read()
                with open(p, "w") as f:
                    f.write(text.replace("/var/log/seekless", self.log).replace("/var/www/html", self.www))
        self.conf = os.path.join(self.etc, "seekless.conf")

    def test_every_snippet_enabled_passes_the_check(self):
        r = subprocess.run([seekless_bin(), "-t", "-f", self.conf], capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "Syntax OK"), r.stderr)

    def test_serves_with_the_port_overridden_by_a_snippet(self):
        port = free_port()
        with open(os.path.join(self.etc, "conf-enabled", "99-port.conf"), "w") as f:
            f.write(f'server.bind = "127.0.0.1"\nserver.port := {port}\n')
        p = subprocess.Popen([seekless_bin(), "-D", "-f", self.conf], stderr=subprocess.PIPE, text=True)
        try:
            body = None
            for _ in range(100):
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.05)
            self.assertEqual(body, b"hello\n")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server-status?json", timeout=5) as r:
                self.assertEqual(r.status, 200)
        finally:
            p.terminate()
            self.assertEqual(p.wait(30), 0, p.stderr.read())
        with open(os.path.join(self.log, "access.log")) as f:
            self.assertIn('"GET / HTTP/1.1" 200', f.read())


class Notify(unittest.TestCase):
    def setUp(self):
        """A temp dir with an empty root/ and a config of its own serving it on a free port."""
        self.dir = d = tempfile.mkdtemp(prefix="sl_notify_")
        self.addCleanup(shutil.rmtree, d, True)
        os.mkdir(os.path.join(d, "root"))
        self.port = free_port()
        self.conf = os.path.join(d, "seekless.conf")
        with open(self.conf, "w") as f:
            f.write(f'server.document-root = "root"\nserver.bind = "127.0.0.1"\nserver.port = {self.port}\n')

    def test_ready_when_serving_and_stopping_on_sigterm(self):
        d, port, conf = self.dir, self.port, self.conf
        sock_path = os.path.join(d, "notify")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.bind(sock_path)
        s.settimeout(20)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        p = subprocess.Popen([seekless_bin(), "-D", "-f", conf], env=env, stderr=subprocess.DEVNULL)
        try:
            msg = s.recv(4096).decode()
            self.assertIn("READY=1", msg.split("\n"))
            # Ready means accepting: a connection succeeds at once.
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            p.terminate()
            msg = s.recv(4096).decode()
            self.assertIn("STOPPING=1", msg.split("\n"))
            self.assertEqual(p.wait(30), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def test_nothing_sent_without_notify_socket(self):
        # The usual case outside systemd: no NOTIFY_SOCKET, no error logged about it.
        port, conf = self.port, self.conf
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        p = subprocess.Popen([seekless_bin(), "-D", "-f", conf], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                time.sleep(0.05)
        p.terminate()
        self.assertEqual(p.wait(30), 0)
        self.assertNotIn("sd_notify", p.stderr.read())


if __name__ == "__main__":
    test_core.main()
