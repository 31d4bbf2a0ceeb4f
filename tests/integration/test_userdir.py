#!/usr/bin/env python3
"""mod_userdir with the user database: /~user/ from the home directory of the user running the
tests (a uniquely named userdir.path made in it for the test), looked up on a stat thread and,
with server.max-stat-threads = 0, on the loop; excluded, not included and unknown users and
/~user without its slash. userdir.basepath is compared with lighttpd 1.4 in test_lighttpd_gw
(examples/lighttpd/userdir)."""
import os
import pwd
import shutil
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server  # noqa: E402


def get(srv, target):
    return test_core.request(srv, b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close"
                             b"\r\n\r\n")


class UserDatabase(unittest.TestCase):
    def setUp(self):
        me = pwd.getpwuid(os.getuid())
        self.user = me.pw_name.encode()
        self.sub = "sl-userdir-" + uuid.uuid4().hex[:12]
        self.dir = os.path.join(me.pw_dir, self.sub)
        os.makedirs(os.path.join(self.dir, "d"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        with open(os.path.join(self.dir, "index.html"), "w") as f:
            f.write("mine\n")
        with open(os.path.join(self.dir, "d", "x.txt"), "w") as f:
            f.write("x\n")

    def run_with(self, extra):
        srv = Server(f'server.modules = ( "mod_userdir", "mod_staticfile" )\n'
                     f'index-file.names = ( "index.html" )\nuserdir.path = "{self.sub}"\n' + extra,
                     {"index.html": b"site\n"})
        srv.start()
        self.addCleanup(srv.stop)
        u = self.user
        self.assertEqual(get(srv, b"/~" + u + b"/")[::2], (200, b"mine\n"))
        self.assertEqual(get(srv, b"/~" + u + b"/d/x.txt")[::2], (200, b"x\n"))
        st, h, _ = get(srv, b"/~" + u + b"?q=1")
        self.assertEqual((st, h.get("location")), (301, "/~" + u.decode() + "/?q=1"))
        self.assertEqual(get(srv, b"/~no-such-user-here/")[0], 404)
        self.assertEqual(get(srv, b"/")[::2], (200, b"site\n"))
        return srv

    def test_on_a_stat_thread(self):
        self.run_with("")

    def test_on_the_loop_without_stat_threads(self):
        self.run_with("server.max-stat-threads = 0\n")

    def test_excluded_and_not_included(self):
        me = self.user.decode()
        for lists, want in ((f'userdir.exclude-user = ( "{me}" )', 404),
                            ('userdir.include-user = ( "someone-else" )', 404),
                            (f'userdir.include-user = ( "someone-else", "{me}" )', 200)):
            srv = Server(f'server.modules = ( "mod_userdir", "mod_staticfile" )\n'
                         f'index-file.names = ( "index.html" )\n'
                         f'userdir.path = "{self.sub}"\n{lists}\n')
            srv.start()
            try:
                self.assertEqual(get(srv, b"/~" + self.user + b"/")[0], want, lists)
            finally:
                self.assertEqual(srv.stop(), 0)

if __name__ == "__main__":
    test_core.main()
