#!/usr/bin/env python3
"""TLS client certificates (lighttpd's ssl.verifyclient.*, ssl.ca-dn-file, ssl.ca-crl-file) over
real sockets on 127.0.0.1.

The openssl CLI makes, in a temporary directory: a root CA, an intermediate CA below it, another
CA nobody trusts, client certificates (one of the root's, one of the intermediate's, one that is
revoked, one of the other CA) and a CRL of the root's revoking one of them. One server has a
listener per setting ($SERVER["socket"] blocks) and sends /php/ to php-cgi over FastCGI; clients
are python's ssl module with load_cert_chain and `openssl s_client`. Covered: with enforce a good
certificate is served and a missing one, one of another CA, a revoked one (ssl.ca-crl-file) and a
chain longer than ssl.verifyclient.depth fail their handshake while other clients go on being
served; without enforce the back end sees SSL_CLIENT_VERIFY NONE or FAILED:...; the variables of
a verified certificate (subject and its fields, serial, PEM with exportcert) reach the back end;
ssl.verifyclient.username makes REMOTE_USER (FastCGI, with AUTH_TYPE SSL_CLIENT_VERIFY, the
access log's %u, proxy.forwarded's remote_user); ssl.ca-dn-file names the CAs of the CertificateRequest and refuses a certificate
of a CA not named; `seekless -t` reports bad files and keys set where seekless cannot honour them.
"""
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sltest  # noqa: E402
import test_core  # noqa: E402
from test_core import Server, free_port, read_response  # noqa: E402

D = tempfile.mkdtemp(prefix="sl_tls_cc_")

CA_EXT = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
CA_CNF = """[ca]
default_ca = root
[root]
dir = {d}
database = {d}/index.txt
new_certs_dir = {d}
certificate = {d}/ca.crt
private_key = {d}/ca.key
serial = {d}/serial
default_md = sha256
default_crl_days = 2
policy = any
[any]
commonName = supplied
"""


def ossl(*args, stdin=None):
    return subprocess.run(["openssl", *args], cwd=D, check=True, capture_output=True,
                          input=stdin).stdout


def key(name):
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
         f"{name}.key")


def ext_file(name, text):
    with open(os.path.join(D, name + ".ext"), "w") as f:
        f.write(text)
    return name + ".ext"


def ca(name, subj, issuer=None):
    key(name)
    if issuer is None:
        ossl("req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
             "-subj", subj, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    else:
        sign(name, subj, issuer, CA_EXT)


def sign(name, subj, issuer, ext="basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"):
    if not os.path.exists(os.path.join(D, f"{name}.key")):
        key(name)
    ossl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subj)
    ossl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.crt", "-CAkey", f"{issuer}.key",
         "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", ext_file(name, ext))


def cat(out, *parts):
    with open(os.path.join(D, out), "w") as f:
        for p in parts:
            with open(os.path.join(D, p)) as g:
                f.write(g.read())


# Server certificate (self-signed) and the client PKI.
key("srv")
ossl("req", "-x509", "-new", "-key", "srv.key", "-out", "srv.crt", "-days", "2", "-subj",
     "/CN=localhost", "-addext", "subjectAltName=DNS:localhost")
cat("srv.pem", "srv.crt", "srv.key")
ca("ca", "/CN=Test Root CA/O=Seekless Tests")
ca("inter", "/CN=Test Intermediate CA", issuer="ca")
ca("other", "/CN=Other CA")
sign("alice", "/C=DE/O=Example/OU=Dev/CN=alice/emailAddress=alice@example.com", "ca")
sign("mallory", "/CN=mallory", "ca")
sign("carol", "/CN=carol", "inter")
sign("eve", "/CN=eve", "other")
cat("carol.chain", "carol.crt", "inter.crt")
# The root's CRL, revoking mallory.
with open(os.path.join(D, "ca.cnf"), "w") as f:
    f.write(CA_CNF.format(d=D))
open(os.path.join(D, "index.txt"), "w").close()
with open(os.path.join(D, "serial"), "w") as f:
    f.write("1000\n")
ossl("ca", "-config", "ca.cnf", "-revoke", "mallory.crt")
ossl("ca", "-config", "ca.cnf", "-gencrl", "-out", "ca.crl")
ALICE_PEM = open(os.path.join(D, "alice.crt")).read()
ALICE_SERIAL = ossl("x509", "-in", "alice.crt", "-noout", "-serial").decode().split("=")[1].strip()

ENV_PHP = b"""<?php
$v = [];
foreach ($_SERVER as $k => $x)
    if (strncmp($k, "SSL_CLIENT_", 11) == 0 || $k == "REMOTE_USER" || $k == "AUTH_TYPE")
        $v[$k] = $x;
header("Content-Type: application/json");
echo json_encode($v);
"""


def client_ctx(cert=None, keyname=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(os.path.join(D, cert), os.path.join(D, keyname or cert + ".key"))
    return ctx


def fetch(port, path="/a.txt", cert=None, keyname=None, maxv=None):
    """GET path over TLS with a client certificate (a file in D, its key <name>.key): (status,
    headers, body), or an exception when the handshake or the connection fails."""
    ctx = client_ctx(cert and (cert if "." in cert else cert + ".crt"), keyname or
                     (cert and cert.split(".")[0] + ".key"))
    if maxv:
        ctx.maximum_version = maxv
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    try:
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
                  b"Connection: close\r\n\r\n")
        return read_response(s)[:3]
    finally:
        s.close()


class ClientCerts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from test_proxy import FakeBackend, kill_tree, spawn_php, wait_port
        cls.kill_tree = staticmethod(kill_tree)
        cls.echo = FakeBackend("echo")  # an HTTP back end answering with the request it got
        cls.php_port = free_port()
        cls.pids = [spawn_php(["-a", "127.0.0.1", "-p", str(cls.php_port)])]
        wait_port(cls.php_port)
        cls.enf, cls.opt, cls.dn, cls.deep, cls.other = (free_port() for _ in range(5))
        tls = (f'ssl.engine = "enable"\nssl.pemfile = "{D}/srv.pem"\n'
               f'ssl.ca-file = "{D}/ca.crt"\nssl.verifyclient.activate = "enable"\n')
        conf = (
            'accesslog.filename = "@DIR@/access.log"\naccesslog.format = "%u %s %U"\n'
            f'$HTTP["url"] =~ "^/php/" {{\n proxy-core.protocol = "fastcgi"\n'
            f' proxy-core.backends = ( "127.0.0.1:{cls.php_port}" )\n}}\n'
            f'$HTTP["url"] =~ "^/fwd/" {{\n proxy-core.backends = ( "127.0.0.1:{cls.echo.port}" )\n'
            ' proxy.forwarded = ( "remote_user" => 1 )\n}\n'
            f'$SERVER["socket"] == "127.0.0.1:{cls.enf}" {{\n{tls}'
            f' ssl.ca-crl-file = "{D}/ca.crl"\n'
            ' ssl.verifyclient.username = "SSL_CLIENT_S_DN_CN"\n}\n'
            f'$SERVER["socket"] == "127.0.0.1:{cls.opt}" {{\n{tls}'
            ' ssl.verifyclient.enforce = "disable"\n ssl.verifyclient.exportcert = "enable"\n}\n'
            f'$SERVER["socket"] == "127.0.0.1:{cls.dn}" {{\n{tls}'
            f' ssl.ca-dn-file = "{D}/other.crt"\n}}\n'
            f'$SERVER["socket"] == "127.0.0.1:{cls.deep}" {{\n{tls}'
            ' ssl.verifyclient.depth = 1\n}\n'
            # A TLS listener that asks for nothing: no SSL_CLIENT_* at all.
            f'$SERVER["socket"] == "127.0.0.1:{cls.other}" {{\n ssl.engine = "enable"\n'
            f' ssl.pemfile = "{D}/srv.pem"\n}}\n')
        cls.srv = Server(conf.replace("@DIR@", D), {"a.txt": b"hello\n", "who.txt": b"", "nobody.txt": b"",
                                                 "php/env.php": ENV_PHP})
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        cls.echo.close()
        for p in cls.pids:
            cls.kill_tree(p)
        assert rc == 0, cls.srv.log_text

    def refused(self, port, cert, **kw):
        """The handshake (or, in TLS 1.3, the first read after it) fails: no HTTP answer."""
        try:
            st, _, _ = fetch(port, cert=cert, **kw)
        except (ssl.SSLError, OSError, ValueError):
            return
        self.fail(f"answered {st} on port {port} with {cert}")

    def env(self, port, cert=None, **kw):
        st, h, body = fetch(port, "/php/env.php", cert=cert, **kw)
        self.assertEqual(st, 200, body)
        return json.loads(body) or {}  # PHP's empty array is []

    def test_enforce_good_certificate(self):
        for maxv in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            st, _, body = fetch(self.enf, cert="alice", maxv=maxv)
            self.assertEqual((st, body), (200, b"hello\n"))
        # The intermediate's client, sending its chain: within the default depth (9), but
        # CRLs are checked for the whole chain and the intermediate has none here.
        self.refused(self.enf, "carol.chain", keyname="carol.key")
        self.assertIn("unable to get certificate CRL", self.srv_log())
        v = self.env(self.opt, "carol.chain", keyname="carol.key")
        self.assertEqual((v["SSL_CLIENT_VERIFY"], v["SSL_CLIENT_S_DN_CN"]), ("SUCCESS", "carol"))

    def test_enforce_refuses(self):
        for maxv in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            self.refused(self.enf, None, maxv=maxv)      # no certificate
            self.refused(self.enf, "eve", maxv=maxv)     # another CA's
            self.refused(self.enf, "mallory", maxv=maxv)  # revoked (ssl.ca-crl-file)
            # Other clients, and the same listener, go on being served.
            self.assertEqual(fetch(self.enf, cert="alice", maxv=maxv)[0], 200)
            self.assertEqual(fetch(self.other, maxv=maxv)[0], 200)
        self.assertIn("certificate revoked", self.srv_log())

    def test_depth(self):
        # Root, intermediate, client: two CAs above the client, one allowed.
        self.refused(self.deep, "carol.chain", keyname="carol.key")
        self.assertEqual(fetch(self.deep, cert="alice")[0], 200)
        self.assertIn("certificate chain too long", self.srv_log())

    def test_variables_verified(self):
        v = self.env(self.enf, "alice")
        self.assertEqual(v["SSL_CLIENT_VERIFY"], "SUCCESS")
        self.assertEqual(v["SSL_CLIENT_S_DN_CN"], "alice")
        self.assertEqual(v["SSL_CLIENT_S_DN_O"], "Example")
        self.assertEqual(v["SSL_CLIENT_S_DN_OU"], "Dev")
        self.assertEqual(v["SSL_CLIENT_S_DN_C"], "DE")
        self.assertEqual(v["SSL_CLIENT_S_DN_EMAILADDRESS"], "alice@example.com")
        self.assertEqual(v["SSL_CLIENT_S_DN"], "C = DE, O = Example, OU = Dev, CN = alice, "
                         "emailAddress = alice@example.com")
        self.assertEqual(v["SSL_CLIENT_M_SERIAL"], ALICE_SERIAL)
        self.assertEqual((v["REMOTE_USER"], v["AUTH_TYPE"]), ("alice", "SSL_CLIENT_VERIFY"))
        self.assertNotIn("SSL_CLIENT_CERT", v)  # no exportcert on this listener
        self.assertEqual(self.env(self.other), {})  # nothing asked for, nothing told

    def test_username_in_access_log(self):
        fetch(self.enf, "/who.txt", cert="alice")
        fetch(self.opt, "/nobody.txt", cert="alice")  # verified, but no username set here
        sltest.wait_for(lambda: "/nobody.txt" in self.access_log())
        lines = self.access_log().splitlines()
        self.assertIn("alice 200 /who.txt", lines)
        self.assertIn("- 200 /nobody.txt", lines)

    def test_username_forwarded(self):
        # proxy.forwarded's remote_user: the certificate's user goes to HTTP back ends too.
        st, _, body = fetch(self.enf, "/fwd/x", cert="alice")
        self.assertEqual(st, 200)
        self.assertIn(b'Forwarded: remote_user="alice"', body)
        st, _, body = fetch(self.opt, "/fwd/x", cert="alice")  # no username on this listener
        self.assertNotIn(b"remote_user", body)

    def test_optional(self):
        self.assertEqual(self.env(self.opt), {"SSL_CLIENT_VERIFY": "NONE"})
        v = self.env(self.opt, "eve")  # let through, and told why not verified
        self.assertTrue(v["SSL_CLIENT_VERIFY"].startswith("FAILED:"), v)
        self.assertEqual(set(v), {"SSL_CLIENT_VERIFY"})
        v = self.env(self.opt, "alice")
        self.assertEqual(v["SSL_CLIENT_VERIFY"], "SUCCESS")
        self.assertEqual(v["SSL_CLIENT_CERT"], ALICE_PEM)
        self.assertNotIn("REMOTE_USER", v)  # no ssl.verifyclient.username here

    def test_ca_dn_file(self):
        out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.dn}",
                              "-servername", "localhost"], input=b"", capture_output=True,
                             timeout=30).stdout.decode(errors="replace")
        names = out.split("Acceptable client certificate CA names", 1)[1].split("\n")[1]
        self.assertIn("CN = Other CA", names)
        self.assertNotIn("Test Root CA", out.split("Acceptable client certificate CA names")[1]
                         .split("Requested")[0])
        # A certificate of ssl.ca-file's CA but not of a CA named there is refused.
        self.refused(self.dn, "alice")
        self.assertIn("certificate rejected", self.srv_log())
        # Without ssl.ca-dn-file the names are ssl.ca-file's.
        out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.opt}",
                              "-servername", "localhost"], input=b"", capture_output=True,
                             timeout=30).stdout.decode(errors="replace")
        self.assertIn("CN = Test Root CA", out.split("Acceptable client certificate CA names")[1])

    def test_resumption_keeps_the_client(self):
        ctx = client_ctx("alice.crt", "alice.key")
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        sess = None
        for i in range(2):
            raw = socket.create_connection(("127.0.0.1", self.enf), timeout=10)
            s = ctx.wrap_socket(raw, server_hostname="localhost", session=sess)
            s.sendall(b"GET /php/env.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            st, _, body = read_response(s)[:3]
            self.assertEqual(st, 200)
            self.assertEqual(json.loads(body)["REMOTE_USER"], "alice")
            if i:
                self.assertTrue(s.session_reused)
            sess = s.session
            s.close()

    def srv_log(self):
        with open(self.srv.log) as f:
            return f.read()

    def access_log(self):
        try:
            with open(os.path.join(D, "access.log")) as f:
                return f.read()
        except OSError:
            return ""


LIGHTTPD = shutil.which("lighttpd") or "/usr/sbin/lighttpd"
LIGHTTPD_SSL = "/usr/lib/lighttpd/mod_openssl.so"  # Debian's lighttpd-mod-openssl


@unittest.skipUnless(os.path.exists(LIGHTTPD) and os.path.exists(LIGHTTPD_SSL),
                     "lighttpd with mod_openssl (lighttpd-mod-openssl) is not installed")
class SameAsLighttpd(unittest.TestCase):
    """lighttpd 1.4 and seekless, the same keys, the same php-cgi: the same variables."""

    def test_variables(self):
        from test_proxy import kill_tree, spawn_php, wait_port
        # A php-cgi each: seekless keeps its FastCGI connections, which hold php's workers.
        php = {}
        for k in ("lighttpd", "seekless"):
            php[k] = free_port()
            self.addCleanup(kill_tree, spawn_php(["-a", "127.0.0.1", "-p", str(php[k])]))
            wait_port(php[k])
        ports = {k: (free_port(), free_port()) for k in ("lighttpd", "seekless")}
        sockets = {k: "".join(
            f'$SERVER["socket"] == "127.0.0.1:{port}" {{\n ssl.engine = "enable"\n'
            f' ssl.pemfile = "{D}/srv.pem"\n ssl.ca-file = "{D}/ca.crt"\n'
            f' ssl.verifyclient.activate = "enable"\n{extra}}}\n'
            for port, extra in zip(ports[k], (
                f' ssl.ca-crl-file = "{D}/ca.crl"\n'
                ' ssl.verifyclient.username = "SSL_CLIENT_S_DN_emailAddress"\n',
                ' ssl.verifyclient.enforce = "disable"\n ssl.verifyclient.exportcert = "enable"\n'
            ))) for k in ports}
        lt = tempfile.mkdtemp(prefix="sl_tls_cc_lt_")
        self.addCleanup(shutil.rmtree, lt, True)
        os.makedirs(os.path.join(lt, "php"))
        with open(os.path.join(lt, "php", "env.php"), "wb") as f:
            f.write(ENV_PHP)
        plain = free_port()
        with open(os.path.join(lt, "lighttpd.conf"), "w") as f:
            f.write(f'server.modules = ( "mod_openssl", "mod_fastcgi" )\n'
                    f'server.document-root = "{lt}"\nserver.bind = "127.0.0.1"\n'
                    f'server.port = {plain}\nserver.errorlog = "{lt}/error.log"\n'
                    f'fastcgi.server = ( ".php" => (( "host" => "127.0.0.1", "port" => {php["lighttpd"]} )))\n'
                    + sockets["lighttpd"])
        lp = subprocess.Popen([LIGHTTPD, "-D", "-f", os.path.join(lt, "lighttpd.conf")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (lp.terminate(), lp.wait(10)))
        srv = Server(f'$HTTP["url"] =~ "^/php/" {{\n proxy-core.protocol = "fastcgi"\n'
                     f' proxy-core.backends = ( "127.0.0.1:{php["seekless"]}" )\n}}\n'
                     + sockets["seekless"],
                     {"php/env.php": ENV_PHP}).start()
        self.addCleanup(srv.stop)
        wait_port(ports["lighttpd"][1])
        cases = [(0, "alice", None), (1, None, None), (1, "eve", None), (1, "alice", None),
                 (1, "carol.chain", "carol.key")]
        for which, cert, keyname in cases:
            got = {}
            for k in ports:
                st, _, body = fetch(ports[k][which], "/php/env.php", cert=cert, keyname=keyname)
                self.assertEqual(st, 200, (k, body))
                got[k] = json.loads(body) or {}
            self.assertEqual(got["seekless"], got["lighttpd"], (which, cert))
        self.assertEqual(got["lighttpd"]["SSL_CLIENT_S_DN_CN"], "carol")  # the cases ran


class Check(unittest.TestCase):
    """`seekless -t`: bad files, and keys where seekless cannot honour them, are errors."""

    def check(self, body):
        d = tempfile.mkdtemp(prefix="sl_tls_cc_t_")
        try:
            conf = os.path.join(d, "seekless.conf")
            with open(conf, "w") as f:
                f.write(f'server.document-root = "{d}"\nserver.port = {free_port()}\n'
                        f'ssl.engine = "enable"\nssl.pemfile = "{D}/srv.pem"\n{body}\n')
            return subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f",
                                   conf], capture_output=True, text=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def bad(self, body, *want):
        r = self.check(body)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for w in want:
            self.assertIn(w, r.stderr)

    def test_good(self):
        r = self.check(f'ssl.ca-file = "{D}/ca.crt"\nssl.verifyclient.activate = "enable"\n'
                       f'ssl.ca-crl-file = "{D}/ca.crl"\nssl.ca-dn-file = "{D}/other.crt"\n'
                       'ssl.verifyclient.depth = 3\nssl.verifyclient.enforce = "disable"\n'
                       'ssl.verifyclient.username = "SSL_CLIENT_S_DN_emailAddress"\n'
                       'ssl.verifyclient.exportcert = "enable"\n')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_bad(self):
        self.bad('ssl.verifyclient.activate = "enable"', "no ssl.ca-file")
        self.bad(f'ssl.ca-crl-file = "{D}/ca.crt"', "ssl.ca-crl-file", "no PEM CRL")
        self.bad(f'ssl.ca-crl-file = "{D}/missing.crl"', "missing.crl", "No such file")
        self.bad(f'ssl.ca-dn-file = "{D}/ca.crl"', "ssl.ca-dn-file", "no PEM certificate")
        self.bad(f'ssl.ca-dn-file = "{D}/missing.pem"', "missing.pem", "No such file")
        self.bad('ssl.verifyclient.depth = 1000', "ssl.verifyclient.depth")
        for k in ('ssl.verifyclient.activate = "enable"', 'ssl.verifyclient.username = "X"',
                  f'ssl.ca-crl-file = "{D}/ca.crl"'):
            self.bad(f'$HTTP["host"] == "b.test" {{ {k} }}', k.split(" ")[0],
                     "per listener")


if __name__ == "__main__":
    test_core.main(remove=[D])
