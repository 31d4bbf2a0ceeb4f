#!/usr/bin/env python3
"""HTTP/2 (server.feature-flags "server.h2proto", "server.h2c") over real sockets on 127.0.0.1,
with clients not written here (curl, h2load) and frames written by hand for bad input.

One server has a cleartext listener and a TLS one ($SERVER["socket"]), both with h2proto and h2c
on, proxy-core (php-cgi, FastCGI) with X-Sendfile under /php/, the access log and the status page.
curl gets HTTP/2 by ALPN over TLS, by prior knowledge and by Upgrade: h2c on cleartext (and 1.1
where h2c or h2proto is off); h2load runs bounded loads with no error; ranges, 304, HEAD, the
404 page, a file of several MiB (over the flow-control window; hot and cold, sha256 compared),
many streams on one connection, X-Sendfile, request bodies (with and without content-length) to
a FastCGI script, access log lines saying HTTP/2.0, the status counters and `seekless -V`. Bad
input: garbage after the preface, a bad preface over ALPN h2, a client that opens streams and
never reads (others are served meanwhile), one that resets streams in a flood, one that leaves
mid-download; each costs its own connection only and leaks no descriptor. lighttpd 1.4 with
the same config answers the same statuses and bodies over HTTP/2.
"""
import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from sltest import WRAPPED, read_text, wait_for  # noqa: E402
from test_core import Server, assert_refused, evict, free_port  # noqa: E402

LIGHTTPD = "/usr/sbin/lighttpd"
BIG = os.urandom(6 * 1024 * 1024 + 123)  # over the 64 KiB stream and connection windows
FILES = {"index.html": b"<p>hello h2</p>\n", "a.txt": b"0123456789abcdef" * 64,
         "big.bin": BIG, "sub/x.txt": b"x" * 1000}
CERTS = tempfile.mkdtemp(prefix="sl_h2_certs_")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", "a.key", "-out", "a.crt", "-days", "2", "-subj",
                "/CN=localhost"], cwd=CERTS, check=True, capture_output=True)
with open(os.path.join(CERTS, "a.pem"), "w") as out:
    for part in ("a.crt", "a.key"):
        with open(os.path.join(CERTS, part)) as f:
            out.write(f.read())
H2_ON = ('server.feature-flags = ( "server.h2proto" => "enable", "server.h2c" => "enable" )\n'
         'index-file.names = ( "index.html" )\n')
TIMEOUT = 120 if WRAPPED else 30

XS_PHP = b"""<?php
header("X-Sendfile: " . $_GET["f"]);
echo "this body must not reach the client";
"""
COOKIE_PHP = b"""<?php
echo $_SERVER["HTTP_COOKIE"];
"""
ECHO_PHP = b"""<?php
echo "len=" . ($_SERVER["CONTENT_LENGTH"] ?? "-") . " proto=" . $_SERVER["SERVER_PROTOCOL"]
   . " body=" . file_get_contents("php://input");
"""


def sha(b):
    return hashlib.sha256(b).hexdigest()


def curl(*args, data=None):
    """curl's (exit code, http version, status, headers text, body)."""
    hdrs = tempfile.NamedTemporaryFile(delete=False)
    hdrs.close()
    try:
        p = subprocess.run(["curl", "-sk", "--max-time", str(TIMEOUT), "-D", hdrs.name, "-w",
                            "\n%{http_version} %{http_code}", *args], input=data,
                           capture_output=True, timeout=TIMEOUT + 10)
        body, _, tail = p.stdout.rpartition(b"\n")
        ver, code = tail.decode().split()
        return p.returncode, ver, int(code), read_text(hdrs.name), body
    finally:
        os.unlink(hdrs.name)


def h2load(url, n, c, m):
    p = subprocess.run(["h2load", "-n", str(n), "-c", str(c), "-m", str(m), "-T", str(TIMEOUT),
                        url], capture_output=True, text=True, timeout=TIMEOUT * 3)
    return p.stdout + p.stderr


# ---- frames by hand (RFC 9113 §4.1; HPACK literals without indexing or Huffman) ----

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hpack(fields):
    out = b""
    for n, v in fields:
        out += b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return out


def get_frame(sid, path, end=True):
    return frame(1, 0x4 | (0x1 if end else 0), sid,
                 hpack([(b":method", b"GET"), (b":scheme", b"http"), (b":path", path),
                        (b":authority", b"localhost")]))


def read_frames(s, until_sid, limit=1 << 26):
    """Frames from s until stream until_sid ends (END_STREAM) or the peer closes: a list of
    (type, flags, sid, payload)."""
    buf, out = b"", []
    while True:
        while len(buf) >= 9:
            ln = struct.unpack(">I", b"\0" + buf[:3])[0]
            if len(buf) < 9 + ln:
                break
            t, fl, sid = buf[3], buf[4], struct.unpack(">I", buf[5:9])[0] & 0x7fffffff
            out.append((t, fl, sid, buf[9:9 + ln]))
            buf = buf[9 + ln:]
            if sid == until_sid and fl & 1 and t in (0, 1):
                return out
            if t == 3 and sid == until_sid:
                return out
        try:
            d = s.recv(65536)
        except OSError:
            return out
        if not d or len(buf) > limit:
            return out
        buf += d


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class H2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from test_proxy import kill_tree, spawn_php, wait_port
        cls.tmp = tempfile.mkdtemp(prefix="sl_h2_px_")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.media = os.path.join(cls.tmp, "media")
        os.makedirs(cls.media)
        cls.movie = os.urandom(2 * 1024 * 1024 + 5)
        with open(os.path.join(cls.media, "movie.bin"), "wb") as f:
            f.write(cls.movie)
        cls.php_port = free_port()
        cls.addClassCleanup(kill_tree, spawn_php(["-a", "127.0.0.1", "-p", str(cls.php_port)]))
        wait_port(cls.php_port)
        cls.tls_port = free_port()
        files = dict(FILES)
        files.update({"php/xs.php": XS_PHP, "php/echo.php": ECHO_PHP, "php/cookie.php": COOKIE_PHP})
        cls.srv = Server(H2_ON + 'server.modules = ( "mod_accesslog", "mod_status", "mod_proxy_core" )\n'
                         'accesslog.filename = "access.log"\n'
                         'status.status-url = "/server-status"\n'
                         f'$SERVER["socket"] == "127.0.0.1:{cls.tls_port}" {{\n'
                         f' ssl.engine = "enable"\n ssl.pemfile = "{CERTS}/a.pem"\n}}\n'
                         f'$HTTP["url"] =~ "^/php/" {{\n proxy-core.protocol = "fastcgi"\n'
                         f' proxy-core.backends = ( "127.0.0.1:{cls.php_port}" )\n'
                         f' proxy-core.allow-x-sendfile = "enable"\n'
                         f' proxy-core.x-sendfile-docroot = ( "{cls.media}" )\n}}\n',
                         files).start()
        cls.addClassCleanup(cls.stop_server)
        cls.plain = f"http://127.0.0.1:{cls.srv.port}"
        cls.tls = f"https://127.0.0.1:{cls.tls_port}"

    @classmethod
    def stop_server(cls):
        rc = cls.srv.stop()
        assert rc == 0, cls.srv.log_text

    def check_alive(self):
        rc, ver, st, _, body = curl("--http2-prior-knowledge", self.plain + "/index.html")
        self.assertEqual((rc, ver, st, body), (0, "2", 200, FILES["index.html"]))

    # -- the three ways in --

    def test_alpn_prior_knowledge_and_upgrade(self):
        for args in (("--http2", self.tls), ("--http2-prior-knowledge", self.plain),
                     ("--http2", self.plain)):
            rc, ver, st, hdrs, body = curl(args[0], args[1] + "/a.txt")
            self.assertEqual((rc, ver, st, body), (0, "2", 200, FILES["a.txt"]), args)
            # No HTTP/1.1 connection fields in an HTTP/2 response (RFC 9113 §8.2.2).
            h2part = hdrs.split("HTTP/2 ")[-1].lower()
            for f in ("connection:", "keep-alive:", "transfer-encoding:", "upgrade:"):
                self.assertNotIn(f, h2part, args)
        rc, ver, st, hdrs, _ = curl("--http2", self.plain + "/a.txt")
        self.assertIn("101 Switching Protocols", hdrs)
        # HTTP/1.1 is still spoken where the client asks for it.
        self.assertEqual(curl("--http1.1", self.tls + "/a.txt")[1:3], ("1.1", 200))
        self.assertEqual(curl("--http1.1", self.plain + "/a.txt")[1:3], ("1.1", 200))

    def test_h2c_off_and_h2proto_off(self):
        srv = Server('server.feature-flags = ( "server.h2proto" => "enable", '
                     '"server.h2c" => "disable" )\n', FILES).start()
        try:
            url = f"http://127.0.0.1:{srv.port}/a.txt"
            rc, ver, st, hdrs, body = curl("--http2", url)
            self.assertEqual((ver, st, body), ("1.1", 200, FILES["a.txt"]))
            # No interim 101 before the 200 (matching the status line: an ETag's hex may hold "101").
            self.assertNotIn("HTTP/1.1 101", hdrs)
            self.assertEqual(hdrs.count("HTTP/"), 1, hdrs)
            self.assertEqual(curl("--http2-prior-knowledge", url)[1:3], ("2", 200))
        finally:
            self.assertEqual(srv.stop(), 0)
        tls_port = free_port()
        srv = Server('server.feature-flags = ( "server.h2proto" => "disable" )\n'
                     f'$SERVER["socket"] == "127.0.0.1:{tls_port}" {{ ssl.engine = "enable"\n'
                     f' ssl.pemfile = "{CERTS}/a.pem" }}\n', FILES).start()
        try:
            self.assertEqual(curl("--http2", f"https://127.0.0.1:{tls_port}/a.txt")[1:3],
                             ("1.1", 200))
            self.assertEqual(curl("--http2", f"http://127.0.0.1:{srv.port}/a.txt")[1:3],
                             ("1.1", 200))
            # Without h2proto the preface is no request seekless knows: HTTP/1.1 505.
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
            s.sendall(PREFACE)
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 505"))
            s.close()
        finally:
            self.assertEqual(srv.stop(), 0)

    # -- answers --

    def test_ranges_304_head_404(self):
        for base in (self.plain, self.tls):
            pk = "--http2-prior-knowledge" if base == self.plain else "--http2"
            rc, ver, st, hdrs, body = curl(pk, "-r", "10-19", base + "/a.txt")
            self.assertEqual((ver, st, body), ("2", 206, FILES["a.txt"][10:20]))
            self.assertIn("content-range: bytes 10-19/1024", hdrs.lower())
            etag = re.search(r"etag: (\S+)", hdrs, re.I).group(1)
            rc, ver, st, hdrs, body = curl(pk, "-H", f"If-None-Match: {etag}", base + "/a.txt")
            self.assertEqual((ver, st, body), ("2", 304, b""))
            rc, ver, st, hdrs, body = curl(pk, "-I", base + "/a.txt")  # body: the head again
            self.assertEqual((ver, st), ("2", 200))
            self.assertNotIn(FILES["a.txt"][:16], body)
            self.assertIn("content-length: 1024", hdrs.lower())
            rc, ver, st, hdrs, body = curl(pk, base + "/nope.txt")
            self.assertEqual((ver, st), ("2", 404))
            self.assertIn(b"404 Not Found", body)

    def test_large_file_hot_and_cold(self):
        path = os.path.join(self.srv.root, "big.bin")
        for base, pk in ((self.plain, "--http2-prior-knowledge"), (self.tls, "--http2")):
            for cold in (True, False):
                if cold:
                    evict(path)
                rc, ver, st, _, body = curl(pk, base + "/big.bin")
                self.assertEqual((rc, ver, st, len(body), sha(body)),
                                 (0, "2", 200, len(BIG), sha(BIG)), (base, cold))

    def test_h2load_hot_files(self):
        n = 400 if WRAPPED else 3000
        for url in (self.plain + "/index.html", self.tls + "/a.txt"):
            out = h2load(url, n, 4, 10)
            self.assertIn(f"requests: {n} total, {n} started, {n} done, {n} succeeded, 0 failed, "
                          "0 errored, 0 timeout", out, out)
            self.assertIn(f"status codes: {n} 2xx", out)

    def test_many_streams_on_one_connection(self):
        n = 300 if WRAPPED else 2000
        out = h2load(self.plain + "/sub/x.txt", n, 1, 100)
        self.assertIn(f"{n} succeeded, 0 failed, 0 errored", out, out)
        out = h2load(self.tls + "/big.bin", 20, 1, 20)
        self.assertIn("20 succeeded, 0 failed, 0 errored", out, out)
        self.assertEqual(int(re.search(r"\((\d+)\) data", out).group(1)), 20 * len(BIG))

    def test_proxy_xsendfile_and_bodies(self):
        f = "/php/xs.php?f=" + self.media + "/movie.bin"
        evict(os.path.join(self.media, "movie.bin"))
        for base, pk in ((self.plain, "--http2-prior-knowledge"), (self.tls, "--http2")):
            rc, ver, st, hdrs, body = curl(pk, base + f)
            self.assertEqual((ver, st, sha(body)), ("2", 200, sha(self.movie)))
            self.assertNotIn("x-sendfile", hdrs.lower())
            rc, ver, st, hdrs, body = curl(pk, "-r", "1000-99999", base + f)
            self.assertEqual((ver, st, body), ("2", 206, self.movie[1000:100000]))
            data = os.urandom(200000).hex().encode()  # over the stream window
            rc, ver, st, _, body = curl(pk, "--data-binary", "@-", base + "/php/echo.php",
                                        data=data)
            self.assertEqual((ver, st, body),
                             ("2", 200, b"len=%d proto=HTTP/2.0 body=" % len(data) + data))
            # Without content-length (curl streams stdin with -T): the body still arrives whole.
            rc, ver, st, _, body = curl(pk, "-T", "-", "-X", "POST", base + "/php/echo.php",
                                        data=data[:70000])
            self.assertEqual((ver, st), ("2", 200))
            self.assertTrue(body.endswith(b"body=" + data[:70000]), body[:80])

    def test_split_cookie_fields_joined(self):
        # HTTP/2 clients may send each cookie as a field of its own (RFC 9113 §8.2.3): the
        # request the modules and the backend see has one Cookie line, joined with "; ".
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=TIMEOUT)
        s.sendall(PREFACE + frame(4, 0, 0) + frame(1, 0x5, 1, hpack(
            [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/php/cookie.php"),
             (b":authority", b"localhost"), (b"cookie", b"a=1"), (b"cookie", b"b=2")])))
        frames = read_frames(s, 1)
        s.close()
        self.assertEqual(b"".join(p for t, fl, sid, p in frames if t == 0 and sid == 1), b"a=1; b=2")

    def test_access_log_and_status(self):
        curl("--http2-prior-knowledge", self.plain + "/a.txt?log=h2")
        log = os.path.join(self.srv.dir, "access.log")
        self.assertTrue(wait_for(lambda: "/a.txt?log=h2 HTTP/2.0\" 200 1024" in read_text(log)),
                        read_text(log)[-500:])
        rc, ver, st, _, body = curl("--http2-prior-knowledge", self.plain + "/server-status?json")
        self.assertEqual((ver, st), ("2", 200))
        txt = body.decode()
        self.assertRegex(txt, r'"http2"')
        self.assertRegex(txt, r'"sessions": *[1-9]')
        self.assertRegex(txt, r'"streams": *[1-9]')
        v = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                           capture_output=True, text=True, check=True).stdout
        self.assertRegex(v, r"(?m)^http2: nghttp2 1\.\d+")

    # -- bad input: one connection or stream, never the server --

    def test_garbage_after_preface(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=TIMEOUT)
        s.sendall(PREFACE + frame(4, 0, 0) + os.urandom(300))
        frames = read_frames(s, -1)
        s.close()
        self.assertIn(7, [t for t, *_ in frames])  # GOAWAY before the close
        self.check_alive()

    def test_bad_preface_over_alpn_h2(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.tls_port),
                                                     timeout=TIMEOUT), server_hostname="localhost")
        self.assertEqual(s.selected_alpn_protocol(), "h2")
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got = b""
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        except (OSError, ssl.SSLError):
            pass
        s.close()
        self.assertNotIn(b"HTTP/1.1", got)
        self.check_alive()

    def test_streams_never_read_and_peer_leaving(self):
        pid = self.srv.proc.pid
        before = fd_count(pid)
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=TIMEOUT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # A big window, twenty downloads, and nothing read.
        s.sendall(PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, 1 << 30)) +
                  frame(8, 0, 0, struct.pack(">I", (1 << 30))) +
                  b"".join(get_frame(2 * i + 1, b"/big.bin") for i in range(20)))
        time.sleep(0.5)
        for _ in range(3):
            self.check_alive()
        self.assertEqual(curl("--http2", self.tls + "/a.txt")[1:3], ("2", 200))
        s.close()
        # A client that leaves mid-download, over TLS too.
        for base, pk in ((self.plain, "--http2-prior-knowledge"), (self.tls, "--http2")):
            p = subprocess.Popen(["curl", "-sk", pk, "--limit-rate", "200K", "-o", "/dev/null",
                                  base + "/big.bin"])
            time.sleep(0.7)
            p.kill()
            p.wait()
        self.check_alive()
        self.assertTrue(wait_for(lambda: fd_count(pid) <= before), (fd_count(pid), before))

    def test_reset_flood(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=TIMEOUT)
        burst = b"".join(get_frame(2 * i + 1, b"/a.txt", end=False) +
                         frame(3, 0, 2 * i + 1, struct.pack(">I", 8)) for i in range(3000))
        s.sendall(PREFACE + frame(4, 0, 0))
        try:
            s.sendall(burst)
        except OSError:
            pass  # closed on us: fine
        frames = read_frames(s, -1)
        s.close()
        self.assertIn(7, [t for t, *_ in frames])  # GOAWAY (ENHANCE_YOUR_CALM)
        self.check_alive()

    def test_header_list_too_long(self):
        # Over server.max-request-field-size (8 KiB), as for HTTP/1.1: 431 for that stream only.
        many = [a for i in range(80) for a in ("-H", "x-h%d: %s" % (i, "v" * 120))]
        self.assertEqual(curl("--http2-prior-knowledge", *many, self.plain + "/a.txt")[1:3],
                         ("2", 431))
        self.check_alive()

    def test_graceful_stop_lets_streams_finish(self):
        srv = Server(H2_ON, FILES).start()
        p = subprocess.Popen(["curl", "-s", "--http2-prior-knowledge", "--limit-rate", "3M",
                              f"http://127.0.0.1:{srv.port}/big.bin"], stdout=subprocess.PIPE)
        time.sleep(0.5)
        os.kill(srv.proc.pid, signal.SIGINT)  # lighttpd's graceful stop
        out, _ = p.communicate(timeout=TIMEOUT)
        self.assertEqual(srv.proc.wait(timeout=TIMEOUT), 0)
        srv.stop()
        self.assertEqual(sha(out), sha(BIG))


class CachedFileEndedEarly(unittest.TestCase):
    """A stream whose cached file ended early (truncated within "simple"'s second): the session's
    connection closes, the log names the stream's path, and the cache entry is dropped, so the
    next stream opens the file again (the HTTP/1.1 case is test_core's)."""

    def test_next_stream_opens_the_file_again(self):
        data = bytes(range(256)) * 256
        srv = Server(H2_ON + 'server.stat-cache-engine = "simple"\n', {"t.bin": data}).start()
        p = os.path.join(srv.root, "t.bin")
        url = f"http://127.0.0.1:{srv.port}/t.bin"
        try:
            short = False
            for attempt in range(5):  # a try that crosses a second boundary finds the file checked
                with open(p, "wb") as fh:
                    fh.write(data)
                if attempt:
                    time.sleep(1.1)  # the last try's 1000-byte entry may stand for "simple"'s second
                for _ in range(3):  # admitted on its second request, then a hit
                    self.assertEqual(curl("--http2-prior-knowledge", url)[4], data)
                os.truncate(p, 1000)
                rc, ver, st, hdrs, body = curl("--http2-prior-knowledge", url)
                if "content-length: 65536" in hdrs.lower():
                    # Sent from the stale entry: the connection closed short of the length.
                    self.assertNotEqual(rc, 0)
                    self.assertLess(len(body), 65536)
                    short = True
                rc, ver, st, hdrs, body = curl("--http2-prior-knowledge", url)
                self.assertEqual((rc, ver, st, body), (0, "2", 200, data[:1000]))
                if short:
                    break
            self.assertTrue(short, "never answered from the stale entry: the test tests nothing")
            with open(srv.log) as fh:
                self.assertIn("/t.bin: file shrank while being sent", fh.read())
        finally:
            self.assertEqual(srv.stop(), 0)


class Bandwidth(unittest.TestCase):
    """A top-level limit holds for an HTTP/2 connection as for HTTP/1.1 (every byte written
    counts); one inside a condition cannot hold for streams sharing a connection: refused."""

    def test_top_level_limit_holds(self):
        data = BIG[:3 * 1024 * 1024]
        srv = Server(H2_ON + "connection.kbytes-per-second = 2048\n", {"m.bin": data}).start()
        try:
            t = time.monotonic()
            rc, ver, st, _, body = curl("--http2-prior-knowledge", f"http://127.0.0.1:{srv.port}/m.bin")
            took = time.monotonic() - t
            self.assertEqual((ver, st, sha(body)), ("2", 200, sha(data)))
            self.assertGreater(took, 1.2)  # 3 MiB at 2 MiB/s, less the bucket's 1/8 s
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_conditional_limit_refused(self):
        for key in ("connection.kbytes-per-second", "server.kbytes-per-second"):
            assert_refused(self, H2_ON + f'$HTTP["url"] =~ "^/dl/" {{ {key} = 100 }}\n',
                           [f"{key} inside a condition cannot limit HTTP/2 streams"])


class ErrorPages(unittest.TestCase):
    """server.errorfile-prefix and server.error-handler-404 answer HTTP/2 streams as they answer
    HTTP/1.1 requests."""

    def test_errorfile_and_handler(self):
        d = tempfile.mkdtemp(prefix="sl_h2_err_")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "status-404.html"), "wb") as f:
            f.write(b"<p>our 404</p>\n")
        srv = Server(H2_ON + f'server.errorfile-prefix = "{d}/status-"\n'
                     '$HTTP["url"] =~ "^/h/" { server.error-handler-404 = "/index.html" }\n',
                     FILES).start()
        try:
            for v in ("--http1.1", "--http2-prior-knowledge"):
                base = f"http://127.0.0.1:{srv.port}"
                self.assertEqual(curl(v, base + "/nope")[2:5:2], (404, b"<p>our 404</p>\n"), v)
                self.assertEqual(curl(v, base + "/h/nope")[2:5:2], (200, FILES["index.html"]), v)
        finally:
            self.assertEqual(srv.stop(), 0)


class DebianConf(unittest.TestCase):
    """Debian's own /etc/lighttpd/lighttpd.conf enables "server.h2proto" and "server.h2c" (issue
    18): seekless -t accepts it unchanged, and it starts with only its port, document root, error
    log and pid file lines changed (and, when the tests do not run as root, its user and group
    lines left out) and speaks HTTP/2 by prior knowledge and by Upgrade: h2c."""

    DEBIAN = "/etc/lighttpd/lighttpd.conf"

    def test_debian_lighttpd_conf(self):
        seekless = os.path.join(test_core.BUILD, "app", "seekless")
        r = subprocess.run([seekless, "-t", "-f", self.DEBIAN], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "Syntax OK"), r.stderr)
        with open(self.DEBIAN) as f:
            text = f.read()
        self.assertRegex(text, r'(?m)^server.feature-flags\s*\+= \("server.h2proto"\s*=> "enable"\)')
        d = tempfile.mkdtemp(prefix="sl_h2_deb_")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        with open(os.path.join(d, "index.html"), "wb") as f:
            f.write(FILES["index.html"])
        os.chmod(os.path.join(d, "index.html"), 0o644)
        port = free_port()
        moved = {"server.port": str(port), "server.document-root": f'"{d}"',
                 "server.errorlog": f'"{d}/error.log"', "server.pid-file": f'"{d}/pid"'}
        out = []
        for line in text.splitlines():
            key = line.split("=")[0].strip()
            if key in moved:
                line = f"{key} = {moved.pop(key)}"
            elif key in ("server.username", "server.groupname") and os.geteuid() != 0:
                continue
            out.append(line)
        self.assertEqual(moved, {}, "lines of Debian's file not found")
        conf = os.path.join(d, "lighttpd.conf")
        with open(conf, "w") as f:
            f.write("\n".join(out) + "\n")
        p = subprocess.Popen([*os.environ.get("SEEKLESS_WRAPPER", "").split(), seekless, "-D",
                              "-f", conf], stderr=subprocess.PIPE)
        try:
            from test_proxy import wait_port
            wait_port(port, TIMEOUT)
            for how in ("--http2-prior-knowledge", "--http2"):
                rc, ver, st, _, body = curl(how, f"http://127.0.0.1:{port}/")
                self.assertEqual((ver, st, body), ("2", 200, FILES["index.html"]), how)
        finally:
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=TIMEOUT), 0, p.stderr.read())
            p.stderr.close()


class SameAsLighttpd(unittest.TestCase):
    """lighttpd 1.4 and seekless, the same config with h2proto, the same files: the same statuses
    and bodies over HTTP/2 (error pages aside, whose text differs)."""

    def test_same_answers(self):
        if not os.access(LIGHTTPD, os.X_OK):
            self.fail("lighttpd is missing: install Debian's lighttpd package")
        srv = Server(H2_ON, FILES).start()
        d = tempfile.mkdtemp(prefix="sl_h2_lt_")
        port = free_port()
        with open(os.path.join(d, "l.conf"), "w") as f:
            f.write(f'server.document-root = "{srv.root}"\nserver.bind = "127.0.0.1"\n'
                    f'server.port = {port}\nserver.errorlog = "{d}/err.log"\n{H2_ON}')
        lt = subprocess.Popen([LIGHTTPD, "-D", "-f", os.path.join(d, "l.conf")],
                              stderr=subprocess.PIPE)
        try:
            from test_proxy import wait_port
            wait_port(port)
            cases = [("/a.txt",), ("/",), ("/big.bin",), ("/nope",), ("/sub",),
                     ("-r", "5-9", "/a.txt"), ("-r", "2000-", "/a.txt"), ("-I", "/a.txt"),
                     ("/a.txt?x=1",), ("/sub/",)]
            for c in cases:
                a = curl("--http2-prior-knowledge", *c[:-1], f"http://127.0.0.1:{srv.port}{c[-1]}")
                b = curl("--http2-prior-knowledge", *c[:-1], f"http://127.0.0.1:{port}{c[-1]}")
                self.assertEqual(a[1:3], b[1:3], c)
                if a[2] < 300 and "-I" not in c:
                    self.assertEqual(a[4], b[4], c)
        finally:
            lt.terminate()
            lt.wait(timeout=10)
            shutil.rmtree(d, ignore_errors=True)
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    test_core.main(remove=[CERTS])
