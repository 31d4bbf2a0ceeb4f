#!/usr/bin/env python3
"""HTTPS (ssl.*) over real sockets on 127.0.0.1, with clients not written here.

Certificates are made by the openssl CLI at test time (ECDSA P-256). For every network backend
`seekless -V` lists, a TLS server sends byte-identical files cold and hot (python's ssl module),
ranges (single and multipart), HEAD, many keep-alive and pipelined requests on one connection;
curl and `openssl s_client` fetch files too. Then: SNI picks the certificate of the $HTTP["host"]
block, TLS 1.1 is refused and 1.2/1.3 served, $HTTP["scheme"] is "https" on the TLS listener and
url.redirect on $HTTP["scheme"] == "http" sends plain clients to https, a client that stops
mid-handshake, one that sends garbage and one that asks for renegotiation each cost only their
own connection while others are served (and the stalled one is closed after the read-idle
timeout), the status page and `seekless -V` name the TLS file path, sessions resume across
loops, proxy-core (FastCGI) works over TLS (X-Sendfile, request bodies after 100 Continue,
HTTPS=on), a graceful restart (SIGUSR1) goes on serving TLS while an old download ends, and
clients that reset mid-file leave no descriptor behind. sslyze (PyPI, in .venv-tools/) finds the
defaults compliant with Mozilla's "intermediate" TLS configuration.

The file path over TLS this kernel runs is printed once (kTLS when tcp_available_ulp lists tls,
the buffered SSL_write path otherwise) and the status page must name the same; where the kernel
has kTLS every backend also runs with OpenSSL's KTLS option off, so both paths are tested.
"""
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, evict, free_port, read_response, wait_closed  # noqa: E402
from sltest import (BackendFiles, fd_targets, read_to_end, reset_mid_answer, sha,  # noqa: E402
                    wait_loops_up)

SIZES = {"f0": 0, "f1": 1, "f4k": 4096, "f100k": 100 * 1024, "f3m": 3 * 1024 * 1024 + 7,
         "odd3": 1234567}
CONTENT = {name: os.urandom(n) for name, n in SIZES.items()}
CERTS = tempfile.mkdtemp(prefix="sl_tls_certs_")


def make_cert(name, cn):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key", "-out",
                    f"{name}.crt", "-days", "2", "-subj", f"/CN={cn}",
                    "-addext", f"subjectAltName=DNS:{cn}"],
                   cwd=CERTS, check=True, capture_output=True)
    with open(os.path.join(CERTS, f"{name}.crt")) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


DER = {"a": make_cert("a", "localhost"), "b": make_cert("b", "b.test")}
# The default certificate: pemfile with the key in it (lighttpd's classic layout).
with open(os.path.join(CERTS, "a.pem"), "w") as out:
    for part in ("a.crt", "a.key"):
        with open(os.path.join(CERTS, part)) as f:
            out.write(f.read())

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sslyze_path():
    p = os.environ.get("SSLYZE") or os.path.join(REPO, ".venv-tools", "bin", "sslyze")
    return p if os.access(p, os.X_OK) else None


TLS_CONF = (f'ssl.engine = "enable"\nssl.pemfile = "{CERTS}/a.pem"\n'
            f'$HTTP["host"] == "b.test" {{ ssl.pemfile = "{CERTS}/b.crt"\n'
            f'  ssl.privkey = "{CERTS}/b.key" }}\n')


def backends():
    out = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                         capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"^network-backend: (\S+)", out, re.M)]


def file_path():
    out = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                         capture_output=True, text=True, check=True).stdout
    return re.search(r"^tls-file-path: (\S+)", out, re.M).group(1)


def client_ctx(minv=None, maxv=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if minv:
        ctx.minimum_version = minv
    if maxv:
        ctx.maximum_version = maxv
    return ctx


def tls_connect(port, sni="localhost", ctx=None, timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return (ctx or client_ctx()).wrap_socket(raw, server_hostname=sni)


def tls_request(port, raw, head=False, sni="localhost"):
    s = tls_connect(port, sni)
    try:
        s.sendall(raw)
        return read_response(s, head=head)[:3]
    finally:
        s.close()


class BackendCase(BackendFiles):
    """Mixed into one TestCase class per backend and TLS file path (made below)."""

    content = CONTENT
    extra = ""  # "-KTLS": the buffered path also where the kernel has kTLS

    @classmethod
    def setUpClass(cls):
        cls.conf_extra = TLS_CONF + cls.extra
        super().setUpClass()

    def get(self, name, extra=b"", method=b"GET"):
        return tls_request(self.srv.port, method + b" /" + name.encode() +
                           b" HTTP/1.1\r\nHost: localhost\r\n" + extra + b"\r\n",
                           head=method == b"HEAD")

    def test_ranges_and_head(self):
        self.check_ranges_cold_and_hot("odd3")
        evict(self.path("f3m"))
        st, h, body = self.get("f3m", method=b"HEAD")
        self.assertEqual((st, int(h["content-length"]), body), (200, SIZES["f3m"], b""))

    def test_keepalive_many_and_pipelined(self):
        s = tls_connect(self.srv.port)
        try:
            rest = b""
            for i in range(60):
                name = ("f1", "f100k", "f4k", "f0")[i % 4]
                if i % 7 == 0:
                    evict(self.path(name))
                s.sendall(b"GET /" + name.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
                st, h, body, rest = read_response(s, rest)
                self.assertEqual((st, sha(body)), (200, sha(CONTENT[name])), (i, name))
            self.check_pipelined(s, ["f100k", "f1", "odd3", "f0", "f100k"], b"localhost", rest)
        finally:
            s.close()

    def test_curl_and_s_client(self):
        evict(self.path("odd3"))
        out = os.path.join(self.srv.dir, "curl.out")
        r = subprocess.run(["curl", "-sSk", "--http1.1", "-o", out, "-w", "%{http_code}",
                            f"https://localhost:{self.srv.port}/odd3",
                            "--resolve", f"localhost:{self.srv.port}:127.0.0.1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.stdout, "200", r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(sha(f.read()), sha(CONTENT["odd3"]))
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.srv.port}",
                            "-servername", "localhost", "-quiet", "-ign_eof"],
                           input=b"GET /f100k HTTP/1.1\r\nHost: localhost\r\nConnection: close"
                                 b"\r\n\r\n", capture_output=True, timeout=60)
        head, _, body = r.stdout.partition(b"\r\n\r\n")
        self.assertIn(b"HTTP/1.1 200 OK", head)
        self.assertEqual(sha(body), sha(CONTENT["f100k"]))

    def fd_count(self):
        """The server's descriptors, not counting files the open-file cache keeps."""
        return sum(not t.startswith(self.srv.root + "/") for t in fd_targets(self.srv.proc.pid))

    def test_client_reset_mid_file(self):
        self.assertEqual(self.get("f1")[0], 200)
        wait_loops_up(self.srv.proc.pid)  # count from when every loop is up
        before = self.fd_count()
        for _ in range(3):
            evict(self.path("f3m"))
            # RST, not close_notify.
            reset_mid_answer(tls_connect(self.srv.port),
                             b"GET /f3m HTTP/1.1\r\nHost: localhost\r\n\r\n")
        st, h, body = self.get("f100k")
        self.assertEqual((st, body), (200, CONTENT["f100k"]))
        # Every TLS connection's socket is closed again (a read in flight is waited for).
        deadline = time.time() + 15
        while self.fd_count() > before and time.time() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(self.fd_count(), before)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    # Both file paths where the kernel allows: kTLS as chosen at run time, and the buffered
    # path with OpenSSL's KTLS option off; on a kernel without kTLS only the buffered one.
    paths = [("", "")]
    if file_path() == "ktls-sendfile":
        paths.append(("_buffered", 'ssl.openssl.ssl-conf-cmd = ( "Options" => "-KTLS" )\n'))
    for b in backends():
        for suffix, extra in paths:
            cls = type("TLS_" + b.replace("-", "_") + suffix, (BackendCase, unittest.TestCase),
                       {"backend": b, "extra": extra})
            suite.addTests(loader.loadTestsFromTestCase(cls))
    for cls in (Protocol, Robustness, ProxyOverTLS, GracefulRestart, MozillaIntermediate):
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


class MozillaIntermediate(unittest.TestCase):
    """The defaults checked by sslyze against Mozilla's "intermediate" configuration: protocols,
    ciphers, key exchange groups, certificate (signed by a CA of the test's, given to sslyze)."""

    @classmethod
    def setUpClass(cls):
        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=CERTS, check=True, capture_output=True)
        # A CA and a leaf with the extensions a strict path validation asks for.
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "moz-ca.key", "-out", "moz-ca.crt", "-days", "2", "-subj",
                "/CN=seekless test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "moz.key", "-out", "moz.csr", "-subj", "/CN=localhost")
        with open(os.path.join(CERTS, "moz.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n"
                    "keyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n")
        openssl("x509", "-req", "-in", "moz.csr", "-CA", "moz-ca.crt", "-CAkey", "moz-ca.key",
                "-CAcreateserial", "-out", "moz.crt", "-days", "2", "-extfile", "moz.ext")
        cls.srv = Server(f'ssl.engine = "enable"\nssl.pemfile = "{CERTS}/moz.crt"\n'
                         f'ssl.privkey = "{CERTS}/moz.key"\n', {"a.txt": b"hello\n"})
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, cls.srv.log_text

    def test_sslyze_finds_the_defaults_compliant(self):
        exe = sslyze_path()
        self.assertIsNotNone(exe, "sslyze not found: set SSLYZE or run scripts/install-deps "
                                  "(.venv-tools/bin/sslyze)")
        r = subprocess.run([exe, "--mozilla_config=intermediate", "--certinfo_ca_file",
                            os.path.join(CERTS, "moz-ca.crt"),
                            f"localhost:{self.srv.port}{{127.0.0.1}}"],
                           capture_output=True, text=True, timeout=600)
        self.assertIn(f"localhost:{self.srv.port}: OK - Compliant.", r.stdout, r.stdout[-3000:])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        self.assertIn("Supplied CA file CA Store (N/A):   OK - Certificate is trusted", r.stdout)
        # Served files still: the scan's ~170 handshakes cost nothing lasting.
        self.assertEqual(tls_request(self.srv.port, b"GET /a.txt HTTP/1.1\r\nHost: localhost"
                                                    b"\r\n\r\n")[2], b"hello\n")


class Protocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plain = free_port()
        cls.srv = Server(TLS_CONF + 'status.status-url = "/server-status"\n'
                         '$HTTP["scheme"] == "https" { setenv.add-response-header = '
                         '( "X-Scheme" => "https" ) }\n'
                         f'$SERVER["socket"] == "127.0.0.1:{cls.plain}" {{ ssl.engine = "disable" }}\n'
                         '$HTTP["scheme"] == "http" { url.redirect = ( "^/(.*)$" => '
                         f'"https://localhost:PORT/$1" ) }}\n'.replace("PORT", "%PORT%"),
                         {"a.txt": b"hello\n"})
        with open(cls.srv.conf) as f:
            text = f.read()
        with open(cls.srv.conf, "w") as f:
            f.write(text.replace("%PORT%", str(cls.srv.port)))
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, cls.srv.log_text

    def peer_cert(self, sni):
        s = tls_connect(self.srv.port, sni)
        try:
            return s.getpeercert(binary_form=True)
        finally:
            s.close()

    def test_sni_picks_the_host_blocks_certificate(self):
        self.assertEqual(self.peer_cert("b.test"), DER["b"])
        self.assertEqual(self.peer_cert("B.Test"), DER["b"])
        self.assertEqual(self.peer_cert("localhost"), DER["a"])
        self.assertEqual(self.peer_cert(None), DER["a"])
        self.assertEqual(self.peer_cert("other.example"), DER["a"])

    def test_protocol_versions(self):
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            s = tls_connect(self.srv.port, ctx=client_ctx(v, v))
            try:
                self.assertEqual(s.version(), v.name.replace("v1_", "v1."))
                s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
                self.assertEqual(read_response(s)[2], b"hello\n")
            finally:
                s.close()
        # TLS 1.1 (and below) is refused: s_client offers it at security level 0.
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.srv.port}",
                            "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
                           input=b"", capture_output=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"Cipher is (NONE)", r.stdout)  # no session was made
        self.assertIn(b"alert protocol version", r.stderr)
        self.assertEqual(tls_request(self.srv.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")[0],
                         200)

    def test_tls13_tickets_come_with_the_first_response(self):
        # OpenSSL's two TLS 1.3 tickets (one after a resumption), issued with the first response
        # (one send for tickets and response) rather than flushed one by one after the
        # handshake: a connection that asks nothing gets none.
        def tickets(request, *extra):
            r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.srv.port}",
                                "-servername", "localhost", "-tls1_3", "-msg", *extra],
                               input=request, capture_output=True, timeout=30)
            return r.stdout.count(b"NewSessionTicket"), r.stdout
        path = os.path.join(self.srv.dir, "s_client.sess")
        get = b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        n, out = tickets(get, "-ign_eof", "-sess_out", path)
        self.assertIn(b"hello\n", out)
        self.assertEqual(n, 2, out[-2000:])
        n, out = tickets(get, "-ign_eof", "-sess_in", path)
        self.assertIn(b"Reused, TLSv1.3", out)
        self.assertEqual(n, 1, out[-2000:])
        # A connection that asks nothing gets none (a read processes any that came).
        s = tls_connect(self.srv.port, ctx=client_ctx(ssl.TLSVersion.TLSv1_3,
                                                      ssl.TLSVersion.TLSv1_3))
        try:
            s.settimeout(0.5)
            with self.assertRaises(socket.timeout):
                s.recv(1)
            self.assertFalse(s.session is not None and s.session.has_ticket)
            s.settimeout(10)
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
            read_response(s)
            self.assertTrue(s.session.has_ticket)
        finally:
            s.close()

    def test_session_resumption(self):
        # TLS 1.2 and 1.3, both by ticket (there is no server-side session cache): one SSL_CTX
        # shared by every loop, so a session resumes on whichever loop accepts the next
        # connection.
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_ctx(v, v)
            s = tls_connect(self.srv.port, ctx=ctx)
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
            read_response(s)  # TLS 1.3 tickets arrive after the handshake
            session = s.session
            s.close()
            for _ in range(4):
                raw = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
                s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
                try:
                    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    self.assertEqual(read_response(s)[2], b"hello\n")
                    self.assertTrue(s.session_reused, v)
                finally:
                    s.close()

    def test_scheme_and_redirect_to_https(self):
        st, h, body = tls_request(self.srv.port, b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual((st, h.get("x-scheme")), (200, "https"))
        s = socket.create_connection(("127.0.0.1", self.plain), timeout=5)
        try:
            s.sendall(b"GET /a.txt?q=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            st, h, body, _ = read_response(s)
        finally:
            s.close()
        self.assertEqual(st, 301)
        self.assertEqual(h["location"], f"https://localhost:{self.srv.port}/a.txt?q=1")
        self.assertNotIn("x-scheme", h)
        # curl follows it from http to https.
        r = subprocess.run(["curl", "-sSkL", f"http://127.0.0.1:{self.plain}/a.txt", "--resolve",
                            f"localhost:{self.srv.port}:127.0.0.1"],
                           capture_output=True, timeout=30)
        self.assertEqual(r.stdout, b"hello\n", r.stderr)

    def test_status_page_and_version_name_the_file_path(self):
        path = file_path()
        print(f"\ntest_tls: files over TLS on this kernel: {path}", file=sys.stderr)
        st, h, body = tls_request(self.srv.port, b"GET /server-status HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(st, 200)
        self.assertIn(f"tls_path {path} handshakes", body.decode())
        m = re.search(r"ktls_connections (\d+) buffered_connections (\d+)", body.decode())
        ktls, buffered = int(m.group(1)), int(m.group(2))
        # Which path the connections took, not only what the kernel offers.
        if path == "ktls-sendfile":
            self.assertGreater(ktls, 0)
        else:
            self.assertEqual((ktls > 0, buffered > 0), (False, True))


class Robustness(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(TLS_CONF + 'server.max-read-idle = 2\nserver.max-worker = 1\n',
                         {"a.txt": b"hello\n", "big": os.urandom(1 << 20)}).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        assert rc == 0, cls.srv.log_text

    def served(self):
        st, h, body = tls_request(self.srv.port, b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
        return st == 200 and len(body) == 1 << 20

    def test_stalled_garbage_and_renegotiating_clients(self):
        # One loop only: whatever these clients do must not stop it serving the others.
        stalled = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        # The first bytes of a ClientHello record, then nothing.
        stalled.sendall(bytes.fromhex("160301020001"))
        silent = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        self.assertTrue(self.served())
        garbage = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
        self.assertEqual(wait_closed(garbage, timeout=5)[:1] in (b"", b"\x15"), True)
        garbage.close()
        garbage = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        garbage.sendall(bytes.fromhex("16030100ff") + os.urandom(255))
        wait_closed(garbage, timeout=5)
        garbage.close()
        self.assertTrue(self.served())
        # Renegotiation (TLS 1.2): s_client's "R" asks for it; the server refuses (no_renegotiation
        # alert or a closed connection) and serves on.
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.srv.port}",
                            "-tls1_2"], input=b"R\n", capture_output=True, timeout=30)
        self.assertIn(b"RENEGOTIATING", r.stdout + r.stderr)
        self.assertTrue(self.served())
        # The stalled handshakes are closed after the read-idle timeout (2 s, at most 3).
        t0 = time.time()
        self.assertEqual(wait_closed(stalled, timeout=6), b"")
        self.assertEqual(wait_closed(silent, timeout=6), b"")
        self.assertLess(time.time() - t0, 5)
        stalled.close()
        silent.close()
        self.assertTrue(self.served())


class GracefulRestart(unittest.TestCase):
    """SIGUSR1 over TLS: the new server serves TLS at once, a download the old one began ends
    intact, and a session of the old process does not resume on the new one (its ticket keys are
    new: a full handshake, as the README says)."""

    def test_restart_keeps_serving_tls(self):
        big = os.urandom(8 << 20)
        srv = Server(TLS_CONF + "server.pid-file = \"PIDFILE\"\n"
                     'setenv.add-response-header = ( "X-Gen" => "1" )\n',
                     {"a.txt": b"hello\n", "big": big})
        pidfile = os.path.join(srv.dir, "pid")
        with open(srv.conf) as f:
            text = f.read()
        with open(srv.conf, "w") as f:
            f.write(text.replace("PIDFILE", pidfile))
        srv.start()
        slow = None
        new = 0

        def pid():
            try:
                with open(pidfile) as f:
                    return int(f.read().strip() or 0)
            except (OSError, ValueError):
                return 0
        try:
            deadline = time.time() + 10
            while pid() < 2 and time.time() < deadline:
                time.sleep(0.02)
            first = pid()
            self.assertGreater(first, 1)
            ctx = client_ctx(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
            slow = tls_connect(srv.port, ctx=ctx)
            slow.sendall(b"GET /big HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            got = slow.recv(65536)
            session = slow.session
            with open(srv.conf, "w") as f:  # the new server's answers say so
                f.write(text.replace("PIDFILE", pidfile).replace('"X-Gen" => "1"', '"X-Gen" => "2"'))
            os.kill(first, signal.SIGUSR1)
            deadline = time.time() + 30
            while pid() in (0, first) and time.time() < deadline:
                time.sleep(0.02)
            new = pid()
            self.assertNotIn(new, (0, first))
            # Both servers accept from the one listening socket until the old one has stopped
            # accepting, a moment after the new one wrote the pid file (the old one resumes its
            # own sessions): ask until the new one answers, then its answer must be a full
            # handshake.
            deadline = time.time() + 30
            while time.time() < deadline:
                raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
                try:
                    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    st, h, body = read_response(s)[:3]
                    self.assertEqual(body, b"hello\n")
                    if h.get("x-gen") == "2":
                        self.assertFalse(s.session_reused)
                        break
                finally:
                    s.close()
                time.sleep(0.02)
            else:
                self.fail("the new server never answered")
            got = read_to_end(slow, got)
            slow = None
            self.assertEqual(sha(got.partition(b"\r\n\r\n")[2]), sha(big))
            # The first server exited; the new one (not our child) is stopped by its pid.
            srv.proc.wait(timeout=30)
        finally:
            if slow is not None:
                slow.close()  # else the old server would wait for this client forever
            # The new server is not our child: stopped by its pid, whatever happened above (it
            # holds our output pipes, so a test run would wait for it to the end of time).
            if new > 1 and os.path.exists(f"/proc/{new}"):
                os.kill(new, signal.SIGTERM)
                deadline = time.time() + 30
                while os.path.exists(f"/proc/{new}") and time.time() < deadline:
                    time.sleep(0.05)
                if os.path.exists(f"/proc/{new}"):
                    os.kill(new, signal.SIGKILL)
            srv.stop()
        self.assertFalse(os.path.exists(f"/proc/{new}"), "the new server did not stop")


XS_PHP = b"""<?php
header("X-Sendfile: " . $_GET["f"]);
echo "this body must not reach the client";
"""
ECHO_PHP = b"""<?php
header("X-Https: " . ($_SERVER["HTTPS"] ?? "") . " " . $_SERVER["REQUEST_SCHEME"]);
echo "body=" . file_get_contents("php://input");
"""


class ProxyOverTLS(unittest.TestCase):
    """proxy-core (FastCGI, php-cgi) behind a TLS listener: X-Sendfile sends the file through
    the TLS path, request bodies are read through it (also after an interim 100 Continue), and
    the script learns HTTPS=on."""

    @classmethod
    def setUpClass(cls):
        from test_proxy import kill_tree, spawn_php, wait_port
        cls.kill_tree = staticmethod(kill_tree)
        cls.tmp = tempfile.mkdtemp(prefix="sl_tls_px_")
        cls.media = os.path.join(cls.tmp, "media")
        os.makedirs(cls.media)
        cls.movie = os.urandom(700000)
        with open(os.path.join(cls.media, "movie.bin"), "wb") as f:
            f.write(cls.movie)
        cls.php_port = free_port()
        cls.pids = [spawn_php(["-a", "127.0.0.1", "-p", str(cls.php_port)])]
        wait_port(cls.php_port)
        cls.srv = Server(TLS_CONF + f'$HTTP["url"] =~ "^/php/" {{\n proxy-core.protocol = "fastcgi"\n'
                         f' proxy-core.backends = ( "127.0.0.1:{cls.php_port}" )\n'
                         f' proxy-core.allow-x-sendfile = "enable"\n'
                         f' proxy-core.x-sendfile-docroot = ( "{cls.media}" )\n}}\n',
                         {"php/xs.php": XS_PHP, "php/echo.php": ECHO_PHP}).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        for p in cls.pids:
            cls.kill_tree(p)
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, cls.srv.log_text

    def test_xsendfile_over_tls(self):
        f = b"/php/xs.php?f=" + self.media.encode() + b"/movie.bin"
        evict(os.path.join(self.media, "movie.bin"))
        for extra, want in ((b"", (200, self.movie)),
                            (b"Range: bytes=1000-99999\r\n", (206, self.movie[1000:100000]))):
            st, h, body = tls_request(self.srv.port, b"GET " + f + b" HTTP/1.1\r\nHost: localhost\r\n"
                                      + extra + b"\r\n")
            self.assertEqual((st, body), want)
            self.assertNotIn("x-sendfile", h)

    def test_body_and_https_variable(self):
        body = os.urandom(300000).hex().encode()
        s = tls_connect(self.srv.port)
        try:
            s.sendall(b"POST /php/echo.php HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n"
                      b"Expect: 100-continue\r\n\r\n" % len(body))
            st, h, _, rest = read_response(s)
            self.assertEqual(st, 100)
            s.sendall(body)
            st, h, got, _ = read_response(s, rest)
        finally:
            s.close()
        self.assertEqual((st, got), (200, b"body=" + body))
        self.assertEqual(h["x-https"], "on https")


if __name__ == "__main__":
    test_core.parse_build()  # load_tests asks the build under test for its backends
    test_core.main(suite=load_tests(unittest.TestLoader(), None, None), remove=[CERTS])
