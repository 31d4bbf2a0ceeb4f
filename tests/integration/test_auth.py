#!/usr/bin/env python3
"""mod_auth on real sockets with real user files: Basic against each htpasswd hash form (made
with `openssl passwd` and Python's crypt), plain and htdigest files; right user, wrong password,
unknown user, a user the rule does not name, malformed and oversized credentials; Digest (RFC
7616) computed here, MD5, SHA-256 and -sess, with a replayed nonce-count, a stale nonce (made
with the configured nonce_secret), a forged nonce, a wrong uri; a changed htpasswd file counting
without a restart; the user in the access log; and the loop serving other clients while bcrypt
hashes of a high cost are checked. The suites run with several workers (server.max-worker), so
nonces and nonce-counts are checked across processes too."""
import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server  # noqa: E402

SECRET = "s3cret-for-tests"


def openssl_passwd(kind, pw, salt="abcdefgh"):
    return subprocess.run(["openssl", "passwd", kind, "-salt", salt, pw], capture_output=True,
                          text=True, check=True).stdout.strip()


def bcrypt(pw, cost):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    # $2y$ is what htpasswd -B writes; libcrypt reads it as $2b$.
    return crypt.crypt(pw, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << cost)).replace("$2b$", "$2y$", 1)


def with_user_file(srv, name, text):
    """Write the user file `name` into the (not yet started) server's directory, which its
    config names as @DIR@."""
    with open(srv.conf) as f:
        conf = f.read().replace("@DIR@", srv.dir)
    with open(srv.conf, "w") as f:
        f.write(conf)
    with open(os.path.join(srv.dir, name), "w") as f:
        f.write(text)


def raw(srv, head_lines, target="/", method="GET", conn=None):
    """Send one request; return (status, list of (name, value), body, socket)."""
    s = conn or srv.connect()
    extra = "".join(f"{k}: {v}\r\n" for k, v in head_lines)
    s.sendall(f"{method} {target} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode("latin-1"))
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError(buf)
        buf += d
    h, _, rest = buf.partition(b"\r\n\r\n")
    lines = h.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = [(k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:])]
    n = 0 if method == "HEAD" else int(dict(fields).get("content-length", "0"))
    while len(rest) < n:
        rest += s.recv(65536)
    return status, fields, rest[:n], s


def get(srv, target, auth=None, **kw):
    st, fields, body, s = raw(srv, [("Authorization", auth)] if auth else [], target, **kw)
    if "conn" not in kw:
        s.close()
    return st, fields, body


def basic(user, pw):
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def challenges(fields):
    return [v for k, v in fields if k == "www-authenticate"]


def params(challenge):
    """The auth-params of a challenge (values unquoted; none of ours holds a comma)."""
    out = {}
    for part in challenge.split(" ", 1)[1].split(","):
        k, _, v = part.strip().partition("=")
        out[k] = v.strip('"')
    return out


def H(algo, s):
    return (hashlib.sha256 if algo.startswith("SHA-256") else hashlib.md5)(s.encode()).hexdigest()


def digest_auth(user, pw, realm, nonce, uri, algo="MD5", nc=1, cnonce="0a4f113b", method="GET",
                qop="auth", response=None):
    ha1 = H(algo, f"{user}:{realm}:{pw}")
    if algo.endswith("-sess"):
        ha1 = H(algo, f"{ha1}:{nonce}:{cnonce}")
    ha2 = H(algo, f"{method}:{uri}")
    ncs = f"{nc:08x}"
    resp = response or H(algo, f"{ha1}:{nonce}:{ncs}:{cnonce}:{qop}:{ha2}")
    return (f'Digest username="{user}", realm="{realm}", nonce="{nonce}", uri="{uri}", '
            f'algorithm={algo}, response="{resp}", qop={qop}, nc={ncs}, cnonce="{cnonce}"')


def make_nonce(realm, ts, rnd=0x1234abcd, secret=SECRET):
    """A nonce as seekless makes it: time:random:HMAC-SHA-256(secret, ts rnd realm)[:16]."""
    mac = hmac.new(secret.encode(), struct.pack("<qI", ts, rnd) + realm.encode(), hashlib.sha256)
    return f"{ts:x}:{rnd:08x}:{mac.hexdigest()[:32]}"


class Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.users = {
            "apr": ("pw-apr1", openssl_passwd("-apr1", "pw-apr1")),
            "md5crypt": ("pw-md5", openssl_passwd("-1", "pw-md5")),
            "sha256crypt": ("pw-sha256", openssl_passwd("-5", "pw-sha256")),
            "sha512crypt": ("pw-sha512", openssl_passwd("-6", "pw-sha512")),
            "bcrypt": ("pw-bcrypt", bcrypt("pw-bcrypt", 5)),
            "sha1": ("pw-sha1", "{SHA}" + base64.b64encode(hashlib.sha1(b"pw-sha1").digest()).decode()),
        }
        conf = f'''
server.modules = ( "mod_auth", "mod_accesslog", "mod_status", "mod_staticfile" )
status.status-url = "/server-status"
accesslog.filename = "@DIR@/access.log"
accesslog.format = "%u %s %U"
auth.backend = "htpasswd"
auth.backend.htpasswd.userfile = "@DIR@/htpasswd"
auth.backend.plain.userfile = "@DIR@/plain"
auth.backend.htdigest.userfile = "@DIR@/htdigest"
auth.require = ( "/b/" => ( "method" => "basic", "realm" => "B", "require" => "valid-user" ),
                 "/named/" => ( "method" => "basic", "realm" => "N", "require" => "user=apr|user=sha1" ) )
$HTTP["url"] =^ "/d" {{
  auth.backend = "plain"
  auth.require = ( "/d5/" => ( "method" => "digest", "realm" => "D", "require" => "valid-user",
                               "nonce_secret" => "{SECRET}" ),
                   "/d256/" => ( "method" => "digest", "realm" => "D", "require" => "user=alice",
                                 "algorithm" => "SHA-256|MD5" ),
                   "/dsess/" => ( "method" => "digest", "realm" => "D", "require" => "valid-user",
                                  "algorithm" => "MD5-sess" ) )
}}
$HTTP["url"] =^ "/hd/" {{
  auth.backend = "htdigest"
  auth.require = ( "/hd/" => ( "method" => "digest", "realm" => "HD", "require" => "valid-user",
                               "algorithm" => "SHA-256" ) )
}}
$HTTP["url"] =^ "/nd/" {{
  auth.require = ( "/nd/" => ( "method" => "digest", "realm" => "X", "require" => "valid-user" ) )
}}
'''
        files = {f"{d}/f.txt": d.encode() for d in ("b", "named", "d5", "d256", "dsess", "hd", "nd", "open")}
        cls.srv = Server(conf, files)
        d = cls.srv.dir
        with open(cls.srv.conf) as f:
            text = f.read().replace("@DIR@", d)
        with open(cls.srv.conf, "w") as f:
            f.write(text)
        with open(os.path.join(d, "htpasswd"), "w") as f:
            f.write("# users\n" + "".join(f"{u}:{h}\n" for u, (_, h) in cls.users.items()))
        with open(os.path.join(d, "plain"), "w", encoding="utf-8") as f:
            f.write("alice:wonder\nbob:builder\nJ\u00e4s\u00f8n:pw-utf8\n")
        with open(os.path.join(d, "htdigest"), "w") as f:
            f.write(f"carol:HD:{hashlib.sha256(b'carol:HD:pw-c').hexdigest()}\n")
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, f"seekless exited {rc}: {cls.srv.log_text}"
        assert "runtime error" not in cls.srv.log_text

    # ---- Basic ----

    def test_every_hash_form(self):
        for user, (pw, _) in self.users.items():
            with self.subTest(user=user):
                self.assertEqual(get(self.srv, "/b/f.txt", basic(user, pw))[::2], (200, b"b"))
                self.assertEqual(get(self.srv, "/b/f.txt", basic(user, pw + "x"))[0], 401)

    def test_challenge_and_refusals(self):
        st, fields, _ = get(self.srv, "/b/f.txt")
        self.assertEqual(st, 401)
        self.assertEqual(challenges(fields), ['Basic realm="B", charset="UTF-8"'])
        # wrong password: 401 with the challenge, and the connection closes after it
        st, fields, _, s = raw(self.srv, [("Authorization", basic("apr", "nope"))], "/b/f.txt")
        self.assertEqual((st, dict(fields).get("connection")), (401, "close"))
        self.assertEqual(s.recv(1), b"")
        s.close()
        self.assertEqual(get(self.srv, "/b/f.txt", basic("nobody", "x"))[0], 401)
        # a valid user the rule does not name
        self.assertEqual(get(self.srv, "/named/f.txt", basic("bcrypt", "pw-bcrypt"))[0], 401)
        self.assertEqual(get(self.srv, "/named/f.txt", basic("sha1", "pw-sha1"))[0], 200)
        # not Basic: a challenge; malformed Basic: 400
        self.assertEqual(get(self.srv, "/b/f.txt", "Bearer abc")[0], 401)
        for bad in ("Basic !!!!", "Basic " + base64.b64encode(b"no-colon").decode(),
                    "Basic " + base64.b64encode(b"a\x01b:c").decode(), "Basic a"):
            with self.subTest(bad=bad):
                self.assertEqual(get(self.srv, "/b/f.txt", bad)[0], 400)
        # oversized credentials: refused without a look (401), a head too large for the server 431
        self.assertEqual(get(self.srv, "/b/f.txt", "Basic " + "QUFB" * 2000)[0], 401)
        self.assertIn(get(self.srv, "/b/f.txt", "Basic " + "QUFB" * 40000)[0], (400, 431))
        # two Authorization fields: which one was meant? 400
        st, _, _, s = raw(self.srv, [("Authorization", basic("apr", "pw-apr1"))] * 2, "/b/f.txt")
        s.close()
        self.assertEqual(st, 400)
        # unprotected paths need nothing
        self.assertEqual(get(self.srv, "/open/f.txt")[0], 200)

    def test_keep_alive_after_success(self):
        st, _, _, s = raw(self.srv, [("Authorization", basic("apr", "pw-apr1"))], "/b/f.txt")
        self.assertEqual(st, 200)
        st, _, body, s = raw(self.srv, [("Authorization", basic("sha1", "pw-sha1"))], "/b/f.txt", conn=s)
        self.assertEqual((st, body), (200, b"b"))
        s.close()

    def test_changed_file_counts_without_restart(self):
        path = os.path.join(self.srv.dir, "htpasswd")
        with open(path) as f:
            old = f.read()
        try:
            self.assertEqual(get(self.srv, "/b/f.txt", basic("newbie", "pw-new"))[0], 401)
            with open(path + ".tmp", "w") as f:
                f.write(old + "newbie:" + openssl_passwd("-6", "pw-new") + "\n")
            os.rename(path + ".tmp", path)
            self.assertEqual(get(self.srv, "/b/f.txt", basic("newbie", "pw-new"))[0], 200)
            with open(path + ".tmp", "w") as f:
                f.write(old)
            os.rename(path + ".tmp", path)
            self.assertEqual(get(self.srv, "/b/f.txt", basic("newbie", "pw-new"))[0], 401)
        finally:
            with open(path, "w") as f:
                f.write(old)

    def test_access_log_user(self):
        get(self.srv, "/b/f.txt", basic("sha1", "pw-sha1"))
        get(self.srv, "/b/f.txt", basic("sha1", "wrong"))
        log = os.path.join(self.srv.dir, "access.log")
        deadline = time.time() + 5
        while time.time() < deadline:
            with open(log) as f:
                lines = f.read().splitlines()
            if "sha1 200 /b/f.txt" in lines and "- 401 /b/f.txt" in lines:
                break
            time.sleep(0.05)
        self.assertIn("sha1 200 /b/f.txt", lines)
        self.assertIn("- 401 /b/f.txt", lines)

    def test_status_counters(self):
        get(self.srv, "/b/f.txt", basic("sha1", "pw-sha1"))
        import json
        st, _, body = get(self.srv, "/server-status?json")
        self.assertEqual(st, 200)
        (item,) = json.loads(body)["auth"]
        # (each worker counts its own requests: which ones this one saw is not known here)
        self.assertEqual(sorted(item), sorted(["name", "passed", "challenged", "denied", "malformed",
                                               "stale_nonces", "replayed_nonces", "busy", "errors",
                                               "running", "waiting"]))
        self.assertTrue(all(isinstance(v, int) and v >= 0 for k, v in item.items() if k != "name"))

    # ---- Digest ----

    def challenge(self, target):
        st, fields, _ = get(self.srv, target)
        self.assertEqual(st, 401)
        return [params(c) for c in challenges(fields)]

    def test_digest_md5_and_nonce_counts(self):
        (c,) = self.challenge("/d5/f.txt")
        self.assertEqual((c["realm"], c["algorithm"], c["qop"], c["charset"]), ("D", "MD5", "auth", "UTF-8"))
        n = c["nonce"]
        a1 = digest_auth("bob", "builder", "D", n, "/d5/f.txt", nc=1)
        self.assertEqual(get(self.srv, "/d5/f.txt", a1)[::2], (200, b"d5"))
        # the same nonce-count again: a replay (on any worker), answered with a fresh nonce
        st, fields, _ = get(self.srv, "/d5/f.txt", a1)
        self.assertEqual(st, 401)
        self.assertEqual(params(challenges(fields)[0]).get("stale"), "true")
        # a higher count on the same nonce is fine, a lower one is not
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("bob", "builder", "D", n, "/d5/f.txt", nc=5))[0], 200)
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("bob", "builder", "D", n, "/d5/f.txt", nc=3))[0], 401)
        # wrong password, unknown user
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("bob", "x", "D", n, "/d5/f.txt", nc=9))[0], 401)
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("zed", "x", "D", n, "/d5/f.txt", nc=9))[0], 401)

    def test_digest_username_star(self):
        # RFC 7616 §3.4.4: a user name that is not ASCII travels as an RFC 8187 ext-value
        (c,) = self.challenge("/d5/f.txt")
        a = digest_auth("J\u00e4s\u00f8n", "pw-utf8", "D", c["nonce"], "/d5/f.txt")
        a = a.replace('username="J\u00e4s\u00f8n"', "username*=UTF-8''J%C3%A4s%C3%B8n")
        self.assertEqual(get(self.srv, "/d5/f.txt", a)[0], 200)
        # both forms at once, or a bad ext-value: 400
        both = a.replace("username*=", 'username="x", username*=')
        self.assertEqual(get(self.srv, "/d5/f.txt", both)[0], 400)
        bad = a.replace("%C3%A4", "%E4")
        self.assertEqual(get(self.srv, "/d5/f.txt", bad)[0], 400)

    def test_digest_stale_and_forged_nonces(self):
        now = int(time.time())
        old = make_nonce("D", now - 700)
        st, fields, _ = get(self.srv, "/d5/f.txt", digest_auth("bob", "builder", "D", old, "/d5/f.txt"))
        self.assertEqual(st, 401)
        self.assertEqual(params(challenges(fields)[0]).get("stale"), "true")
        # a nonce made with the secret and a recent time is ours
        fresh = make_nonce("D", now - 5, rnd=0x77)
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("alice", "wonder", "D", fresh, "/d5/f.txt"))[0], 200)
        # another secret: not ours, and not stale either
        forged = make_nonce("D", now, secret="guess")
        st, fields, _ = get(self.srv, "/d5/f.txt", digest_auth("bob", "builder", "D", forged, "/d5/f.txt"))
        self.assertEqual(st, 401)
        self.assertNotIn("stale", params(challenges(fields)[0]))

    def test_digest_sha256_sess_and_htdigest(self):
        cs = self.challenge("/d256/f.txt")
        self.assertEqual([c["algorithm"] for c in cs], ["SHA-256", "MD5"])
        for c in cs:
            a = digest_auth("alice", "wonder", "D", c["nonce"], "/d256/f.txt", algo=c["algorithm"])
            self.assertEqual(get(self.srv, "/d256/f.txt", a)[0], 200)
        # bob is a user of the file but not of the rule
        n = cs[0]["nonce"]
        self.assertEqual(get(self.srv, "/d256/f.txt", digest_auth("bob", "builder", "D", n, "/d256/f.txt", algo="SHA-256", nc=2))[0], 401)
        # an algorithm the rule does not offer
        (c,) = self.challenge("/d5/f.txt")
        self.assertEqual(get(self.srv, "/d5/f.txt", digest_auth("bob", "builder", "D", c["nonce"], "/d5/f.txt", algo="SHA-256"))[0], 401)
        (c,) = self.challenge("/dsess/f.txt")
        self.assertEqual(c["algorithm"], "MD5-sess")
        a = digest_auth("alice", "wonder", "D", c["nonce"], "/dsess/f.txt", algo="MD5-sess")
        self.assertEqual(get(self.srv, "/dsess/f.txt", a)[0], 200)
        (c,) = self.challenge("/hd/f.txt")
        a = digest_auth("carol", "pw-c", "HD", c["nonce"], "/hd/f.txt", algo="SHA-256")
        self.assertEqual(get(self.srv, "/hd/f.txt", a)[0], 200)
        a = digest_auth("carol", "pw-x", "HD", c["nonce"], "/hd/f.txt", algo="SHA-256", nc=2)
        self.assertEqual(get(self.srv, "/hd/f.txt", a)[0], 401)

    def test_digest_malformed(self):
        (c,) = self.challenge("/d5/f.txt")
        n = c["nonce"]
        good = digest_auth("bob", "builder", "D", n, "/d5/f.txt")
        cases = [
            good.replace('uri="/d5/f.txt"', 'uri="/d5/other"'),   # another request's uri
            good.replace("qop=auth", "qop=auth-int"),
            good.replace('response="', 'response="zz'),
            'Digest username="bob", realm="D"',                    # fields missing
            'Digest username="bob", username="eve"',               # twice
            'Digest username="bob',                                # unterminated
        ]
        for a in cases:
            with self.subTest(a=a):
                self.assertEqual(get(self.srv, "/d5/f.txt", a)[0], 400)
        # the realm of another rule: 401
        self.assertEqual(get(self.srv, "/d5/f.txt", good.replace('realm="D"', 'realm="E"'))[0], 401)
        # Basic to a Digest rule: a Digest challenge
        st, fields, _ = get(self.srv, "/d5/f.txt", basic("bob", "builder"))
        self.assertEqual(st, 401)
        self.assertTrue(challenges(fields)[0].startswith('Digest realm="D"'))

    def test_digest_against_htpasswd_is_500(self):
        # htpasswd keeps no digest: lighttpd answers 500 too
        (c,) = self.challenge("/nd/f.txt")
        a = digest_auth("apr", "pw-apr1", "X", c["nonce"], "/nd/f.txt")
        self.assertEqual(get(self.srv, "/nd/f.txt", a)[0], 500)

    # ---- the loop ----

    def test_loop_serves_others_during_slow_hashes(self):
        path = os.path.join(self.srv.dir, "htpasswd")
        with open(path) as f:
            old = f.read()
        wrapped = bool(os.environ.get("SEEKLESS_WRAPPER"))  # valgrind runs libcrypt 50x slower
        slow = bcrypt("pw-slow", 10 if wrapped else 14)  # 14: about a second per check
        with open(path + ".tmp", "w") as f:
            f.write(old + "slow:" + slow + "\n")
        os.rename(path + ".tmp", path)
        try:
            results = []
            def check():
                results.append(get(self.srv, "/b/f.txt", basic("slow", "pw-slow"))[0])
            ts = [threading.Thread(target=check) for _ in range(2)]
            t0 = time.time()
            for t in ts:
                t.start()
            time.sleep(0.2)
            worst = 0
            for _ in range(10):
                t1 = time.time()
                self.assertEqual(get(self.srv, "/open/f.txt")[0], 200)
                worst = max(worst, time.time() - t1)
            for t in ts:
                t.join()
            slow_took = time.time() - t0
            self.assertEqual(results, [200, 200])
            # the others were answered while the hashes ran (valgrind slows everything)
            limit = 2.0 if wrapped else 0.5
            self.assertLess(worst, limit, f"a file took {worst:.3f}s while bcrypt ran {slow_took:.2f}s")
        finally:
            with open(path, "w") as f:
                f.write(old)



class Inline(unittest.TestCase):
    """server.max-stat-threads = 0 keeps everything on the loop by choice: the check runs inline."""

    def test_basic_and_digest_without_stat_threads(self):
        srv = Server('server.modules = ( "mod_auth", "mod_staticfile" )\n'
                     'server.max-stat-threads = 0\n'
                     'auth.backend = "plain"\nauth.backend.plain.userfile = "@DIR@/plain"\n'
                     'auth.require = ( "/b/" => ( "method" => "basic", "realm" => "B", "require" => "valid-user" ),\n'
                     '                 "/d/" => ( "method" => "digest", "realm" => "D", "require" => "valid-user" ) )\n',
                     {"b/f.txt": b"b", "d/f.txt": b"d"})
        with_user_file(srv, "plain", "alice:wonder\n")
        srv.start()
        try:
            self.assertEqual(get(srv, "/b/f.txt", basic("alice", "wonder"))[::2], (200, b"b"))
            self.assertEqual(get(srv, "/b/f.txt", basic("alice", "x"))[0], 401)
            st, fields, _ = get(srv, "/d/f.txt")
            n = params(challenges(fields)[0])["nonce"]
            self.assertEqual(get(srv, "/d/f.txt", digest_auth("alice", "wonder", "D", n, "/d/f.txt"))[::2], (200, b"d"))
            self.assertEqual(get(srv, "/d/f.txt", digest_auth("alice", "x", "D", n, "/d/f.txt", nc=2))[0], 401)
        finally:
            self.assertEqual(srv.stop(), 0, srv.log_text)



class HalfThePool(unittest.TestCase):
    """At most half the stat threads hash at once; the other checks wait their turn and pass."""

    def test_checks_wait_for_a_thread(self):
        srv = Server('server.modules = ( "mod_auth", "mod_status", "mod_staticfile" )\n'
                     'server.max-worker = 1\nserver.max-stat-threads = 2\n'
                     'status.status-url = "/server-status"\n'
                     'auth.backend = "htpasswd"\nauth.backend.htpasswd.userfile = "@DIR@/htpasswd"\n'
                     'auth.require = ( "/b/" => ( "method" => "basic", "realm" => "B", "require" => "valid-user" ) )\n',
                     {"b/f.txt": b"b", "open.txt": b"o"})
        wrapped = bool(os.environ.get("SEEKLESS_WRAPPER"))
        with_user_file(srv, "htpasswd", "slow:" + bcrypt("pw", 8 if wrapped else 12) + "\n")
        srv.start()
        try:
            import json
            results, seen_waiting = [], []

            def check():
                results.append(get(srv, "/b/f.txt", basic("slow", "pw"))[0])
            ts = [threading.Thread(target=check) for _ in range(3)]
            for t in ts:
                t.start()
            deadline = time.time() + 30
            while any(t.is_alive() for t in ts) and time.time() < deadline:
                item = json.loads(get(srv, "/server-status?json")[2])["auth"][0]
                self.assertLessEqual(item["running"], 1)  # half of 2 threads
                seen_waiting.append(item["waiting"])
                self.assertEqual(get(srv, "/open.txt")[0], 200)  # the other thread serves files
                time.sleep(0.01)
            for t in ts:
                t.join()
            self.assertEqual(results, [200, 200, 200])
            self.assertTrue(any(w > 0 for w in seen_waiting), seen_waiting)
        finally:
            self.assertEqual(srv.stop(), 0, srv.log_text)


if __name__ == "__main__":
    test_core.main()
