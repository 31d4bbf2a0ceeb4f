#!/usr/bin/env python3
"""HTTP conformance (RFC 9110 / RFC 9112) of seekless's answers, checked three ways over real
sockets on 127.0.0.1:

- seekless alone, for every behaviour of issue 15 (each test fails without its fix);
- against real peers, nginx 1.22 and lighttpd 1.4 from Debian, each started on a free port with a
  generated minimal config in a temp dir (never on port 80) and stopped by PID: the same raw
  request goes to all three, and where the two peers agree on what matters (status, presence of a
  header or a body) seekless must answer the same. Where the peers disagree with each other, or
  where seekless follows the RFC against both, the test says so next to the case;
- with httplint (PyPI 'httplint', found through $HTTPLINT or <repo>/.venv-tools/bin/httplint):
  raw responses to a set of requests must draw no error-level ([BAD]) note.

A missing peer or httplint fails the suite with a message saying what to install: these checks
are part of the suite, not optional extras.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, free_port  # noqa: E402
from sltest import accepting  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NGINX = "/usr/sbin/nginx"
LIGHTTPD = "/usr/sbin/lighttpd"

# The same document root for seekless and both peers.
DIGITS = bytes(range(256)) * 400  # 102400 bytes, every byte's value says where it is
FILES = {
    "a.txt": b"hello, world\n",
    "digits.bin": DIGITS,
    "norange/a.txt": b"no ranges here\n",
    "dir/index.html": b"<p>index</p>",
}
SEEKLESS_CONF = (
    'index-file.names = ( "index.html" )\n'
    'mimetype.assign = ( ".txt" => "text/plain", ".html" => "text/html" )\n'
    '$HTTP["host"] == "example.com" { url.access-deny = ( "" ) }\n'
    '$HTTP["url"] =~ "^/norange/" { server.range-requests = "disable" }\n'
)


def exchange(port, raw, timeout=10):
    """Send raw bytes, read until the server closes; return every byte received."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(raw)
        data = b""
        while True:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            data += d
        return data
    finally:
        s.close()


class Resp:
    """One response read to the connection's end: status line, fields and whatever followed the
    head (the body, or bytes that should not be there)."""

    def __init__(self, raw):
        self.raw = raw
        head, sep, self.rest = raw.partition(b"\r\n\r\n")
        if not sep:
            raise AssertionError("no complete response head in %r" % raw[:300])
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        parts = lines[0].split(" ", 2)
        self.version = parts[0]
        self.status = int(parts[1])
        self.fields = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.fields.append((k.strip().lower(), v.strip()))

    def get(self, name):
        vals = [v for k, v in self.fields if k == name.lower()]
        return vals[0] if vals else None

    def has(self, name):
        return self.get(name) is not None

    def __repr__(self):
        return "<%s %r>" % (self.status_line, self.raw[:400])


def req(method, target, *fields, version=b"HTTP/1.1", host=b"t", close=True):
    """A raw request; fields are b"Name: value" lines."""
    lines = [method + b" " + target + b" " + version]
    if host is not None:
        lines.append(b"Host: " + host)
    lines += list(fields)
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


# ---- the peers ----

class Peer:
    """A real server (nginx or lighttpd) on a free 127.0.0.1 port, in a temp dir of its own."""

    name = binary = None

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sl_peer_%s_" % self.name)
        self.root = os.path.join(self.dir, "root")
        for rel, data in FILES.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        self.port = free_port()
        self.proc = None

    def start(self):
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError("%s is missing: install Debian's %s package (the suite compares "
                               "seekless with it)" % (self.binary, self.name))
        conf = os.path.join(self.dir, self.name + ".conf")
        with open(conf, "w") as f:
            f.write(self.config())
        self.proc = subprocess.Popen(self.argv(conf), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        if accepting(self.port, 10, self.proc):
            return self
        if self.proc.poll() is not None:
            raise RuntimeError("%s exited: %s" % (self.name, self.proc.stderr.read().decode()))
        self.stop()
        raise RuntimeError("%s did not start listening" % self.name)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Nginx(Peer):
    name, binary = "nginx", NGINX

    def config(self):
        d = self.dir
        # One process in the foreground (no worker user switch, so the temp dir's files are
        # readable); every path nginx writes is in the temp dir.
        return f"""master_process off;
worker_processes 1;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  types {{ text/plain txt; text/html html; }}
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{self.port} default_server;
    root {self.root};
    index index.html;
    location /norange/ {{ max_ranges 0; }}
  }}
  server {{ listen 127.0.0.1:{self.port}; server_name example.com; return 403; }}
}}
"""

    def argv(self, conf):
        d = self.dir
        return [NGINX, "-p", d, "-c", conf, "-g",
                f"daemon off; pid {d}/nginx.pid; error_log {d}/err.log;"]


class Lighttpd(Peer):
    name, binary = "lighttpd", LIGHTTPD

    def config(self):
        # The same conditions as seekless's config: lighttpd reads that syntax.
        return f"""server.document-root = "{self.root}"
server.bind = "127.0.0.1"
server.port = {self.port}
server.errorlog = "{self.dir}/err.log"
server.modules += ( "mod_access" )
{SEEKLESS_CONF}"""

    def argv(self, conf):
        return [LIGHTTPD, "-D", "-f", conf]


SEEKLESS = None
PEERS = []


def setUpModule():
    global SEEKLESS
    SEEKLESS = Server(SEEKLESS_CONF + 'accesslog.filename = "access.log"\n'
                      'accesslog.format = "%V %>s %U"\n', FILES).start()
    try:
        for cls in (Nginx, Lighttpd):
            PEERS.append(cls().start())
    except Exception:
        tearDownModule()
        raise


def tearDownModule():
    for p in PEERS:
        p.stop()
    PEERS.clear()
    if SEEKLESS:
        assert SEEKLESS.stop() == 0


def seekless(raw):
    return Resp(exchange(SEEKLESS.port, raw))


class HttpCase(unittest.TestCase):
    def same_as_peers(self, raw, key, why=""):
        """Both peers give the same key(response); seekless must give it too. A case where the
        peers disagree does not belong here: that fails too, so the comparisons stay honest."""
        got = {p.name: key(Resp(exchange(p.port, raw))) for p in PEERS}
        vals = list(got.values())
        self.assertTrue(all(v == vals[0] for v in vals),
                        "peers disagree on %r: %r" % (raw[:120], got))
        mine = key(seekless(raw))
        self.assertEqual(mine, vals[0], "seekless differs from %r on %r %s" % (got, raw[:120], why))
        return mine


def status_and_body(r):
    return r.status, r.rest != b""


class HeadErrors(HttpCase):
    """Item 1: an answer to HEAD has no body (RFC 9110 §9.3.2), also when the request fails to
    parse."""

    CASES = [
        (req(b"HEAD", b"/a.txt", host=None), 400),                         # no Host
        (req(b"HEAD", b"/a.txt", b"Bad Field: x"), 400),                    # malformed field
        (req(b"HEAD", b"/" + b"a" * 9000), 414),                             # request line
        (req(b"HEAD", b"/a.txt", b"X: " + b"a" * 9000), 431),                # head
        (req(b"HEAD", b"/a.txt", version=b"HTTP/2.0"), 505),
        (req(b"HEAD", b"/a.txt", b"Transfer-Encoding: gzip, chunked"), 501),
    ]

    def test_parse_errors_to_head_have_no_body(self):
        for raw, status in self.CASES:
            r = seekless(raw)
            self.assertEqual(r.status, status, raw[:60])
            self.assertTrue(r.has("content-length"), r)  # the length a GET would get
            self.assertEqual(r.rest, b"", "a body after the head of %r" % r)
            # The same request as GET does get the body (the test can tell them apart).
            self.assertNotEqual(seekless(b"GET" + raw[4:]).rest, b"")

    def test_same_as_peers(self):
        # nginx and lighttpd agree on this one; on 414/431/505 lighttpd sends a body to HEAD
        # (and answers 431 to the long request line), nginx does not.
        self.same_as_peers(req(b"HEAD", b"/a.txt", host=None), status_and_body)


class RepeatedFields(HttpCase):
    """Item 2: a field on several lines is one field (RFC 9110 §5.3). List fields join; a
    singleton on several lines is invalid and handled as its RFC says."""

    @classmethod
    def setUpClass(cls):
        r = seekless(req(b"GET", b"/a.txt"))
        cls.etag, cls.lm = r.get("etag").encode(), r.get("last-modified").encode()

    def status(self, *fields):
        return seekless(req(b"GET", b"/a.txt", *fields)).status

    def test_entity_tag_lists_join(self):
        e = self.etag
        self.assertEqual(self.status(b'If-None-Match: "x"', b"If-None-Match: " + e), 304)
        self.assertEqual(self.status(b"If-None-Match: " + e, b'If-None-Match: "x"'), 304)
        self.assertEqual(self.status(b'If-None-Match: "x"', b'If-None-Match: "y"'), 200)
        self.assertEqual(self.status(b'If-Match: "x"', b"If-Match: " + e), 200)
        self.assertEqual(self.status(b'If-Match: "x"', b'If-Match: "y"'), 412)

    def test_repeated_dates_are_ignored(self):
        # One line of each would answer 304 / 412; two lines are a list of dates, which
        # RFC 9110 §13.1.3 / §13.1.4 say to ignore. (nginx and lighttpd answer 400 to two
        # different dates; the RFC asks for the answer without the condition.)
        old = b"Sat, 01 Jan 2000 00:00:00 GMT"
        self.assertEqual(self.status(b"If-Modified-Since: " + self.lm), 304)
        self.assertEqual(self.status(b"If-Modified-Since: " + self.lm, b"If-Modified-Since: " + self.lm), 200)
        self.assertEqual(self.status(b"If-Unmodified-Since: " + old), 412)
        self.assertEqual(self.status(b"If-Unmodified-Since: " + old, b"If-Unmodified-Since: " + old), 200)

    def test_repeated_range_and_if_range_give_the_whole_file(self):
        # Decision (README): Range on two lines is an invalid Range, ignored (RFC 9110 §14.2);
        # If-Range on two lines cannot hold. Both: 200 with everything. (nginx and lighttpd serve
        # the first Range line.)
        r = seekless(req(b"GET", b"/a.txt", b"Range: bytes=0-1", b"Range: bytes=2-3"))
        self.assertEqual((r.status, r.rest), (200, b"hello, world\n"))
        r = seekless(req(b"GET", b"/a.txt", b"Range: bytes=0-1", b"If-Range: " + self.etag,
                         b"If-Range: " + self.etag))
        self.assertEqual((r.status, r.rest), (200, b"hello, world\n"))
        r = seekless(req(b"GET", b"/a.txt", b"Range: bytes=0-1", b"If-Range: " + self.etag))
        self.assertEqual((r.status, r.rest), (206, b"he"))

    def test_expect_and_connection_over_lines(self):
        self.assertEqual(self.status(b"Expect: 100-continue", b"Expect: teapot"), 417)
        self.assertEqual(self.status(b"Expect: 100-continue"), 200)
        r = seekless(req(b"GET", b"/a.txt", b"Connection: x-foo", b"Connection: close", close=False))
        self.assertEqual(r.get("connection"), "close")

    def test_singletons_that_frame_the_request(self):
        self.assertEqual(self.status(b"Host: u"), 400)
        self.assertEqual(self.status(b"Content-Length: 0", b"Content-Length: 1"), 400)
        # The same value twice may be folded (RFC 9112 §6.3); nginx and lighttpd refuse it.
        self.assertEqual(self.status(b"Content-Length: 0", b"Content-Length: 0"), 200)

    def test_same_as_peers(self):
        for fields in ([b"Host: u"], [b"Content-Length: 0", b"Content-Length: 1"]):
            self.same_as_peers(req(b"GET", b"/a.txt", *fields), lambda r: r.status)


class AcceptRanges(HttpCase):
    """Item 3: with server.range-requests = "disable" no Accept-Ranges is sent (nginx with
    max_ranges 0 and lighttpd with ranges disabled send none either); with ranges on, bytes."""

    def test_only_where_ranges_are_taken(self):
        r = seekless(req(b"GET", b"/a.txt"))
        self.assertEqual(r.get("accept-ranges"), "bytes")
        for raw in (req(b"GET", b"/norange/a.txt"), req(b"HEAD", b"/norange/a.txt"),
                    req(b"GET", b"/norange/a.txt", b"Range: bytes=0-1")):
            r = seekless(raw)
            self.assertEqual(r.status, 200, raw)
            self.assertFalse(r.has("accept-ranges"), r)

    def test_same_as_peers(self):
        for raw in (req(b"GET", b"/norange/a.txt"), req(b"GET", b"/norange/a.txt", b"Range: bytes=0-1")):
            self.same_as_peers(raw, lambda r: (r.status, r.has("accept-ranges"), r.has("content-range")))


def parts(r):
    """The parts of a 206 as (first, last, bytes): one for a single range, each part of a
    multipart/byteranges body in the order sent."""
    ctype = r.get("content-type") or ""
    if r.status != 206:
        return []
    if not ctype.startswith("multipart/byteranges"):
        a, b = r.get("content-range").split()[1].split("/")[0].split("-")
        return [(int(a), int(b), r.rest)]
    boundary = ctype.split("boundary=")[1].strip('"').encode()
    out = []
    for chunk in r.rest.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        cr = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-range:")][0]
        a, b = cr.split()[2].split(b"/")[0].split(b"-")
        out.append((int(a), int(b), data[:-2] if data.endswith(b"\r\n") else data))
    return out


def ranges_of(r):
    return r.status, [(a, b) for a, b, _ in parts(r)]


class MultipartRanges(HttpCase):
    """Item 4: parts in the order the request asked for them (RFC 9110 §14.6); overlapping or
    adjacent ranges coalesced where the earliest of them stood; more than 32 ranges: 200 with the
    whole file (§15.3.7 lets a server ignore such a request)."""

    def get(self, ranges):
        return seekless(req(b"GET", b"/digits.bin", b"Range: bytes=" + ranges))

    def check(self, ranges, want):
        r = self.get(ranges)
        got = parts(r)
        self.assertEqual([(a, b) for a, b, _ in got], want, ranges)
        for a, b, data in got:
            self.assertEqual(data, DIGITS[a:b + 1])

    def test_request_order(self):
        self.check(b"5000-5009,0-9,100-109", [(5000, 5009), (0, 9), (100, 109)])
        self.check(b"-10,0-5", [(102390, 102399), (0, 5)])

    def test_overlapping_coalesced_in_place(self):
        self.check(b"0-9,20000-20009,5-14", [(0, 14), (20000, 20009)])
        self.check(b"20000-20009,0-9,10-19", [(20000, 20009), (0, 19)])
        self.check(b"0-,0-,0-", [(0, len(DIGITS) - 1)])  # one range: a plain 206

    def test_too_many_ranges_get_the_whole_file(self):
        many = b",".join(b"%d-%d" % (i * 200, i * 200 + 1) for i in range(32))
        self.assertEqual(len(parts(self.get(many))), 32)
        r = self.get(many + b",9000-9001")
        self.assertEqual((r.status, len(r.rest), r.has("content-range")), (200, len(DIGITS), False))

    def test_same_as_peers(self):
        # nginx sends overlapping ranges as asked, lighttpd coalesces them (and neighbours a few
        # bytes apart): no comparison there. Apart ranges out of order: both keep the order.
        for ranges in (b"5000-5009,0-9,100-109", b"-10,0-5"):
            self.same_as_peers(req(b"GET", b"/digits.bin", b"Range: bytes=" + ranges), ranges_of)


class LongNames(HttpCase):
    """Item 5: a name too long for the file system names no file: 404, as nginx and lighttpd
    answer; only a request line over the limit is 414 (URI Too Long)."""

    def test_long_segment_is_404(self):
        for target in (b"/" + b"n" * 256, b"/dir/" + b"n" * 300 + b"/x", b"/" + (b"d" * 200 + b"/") * 30):
            self.assertEqual(seekless(req(b"GET", target)).status, 404, target[:40])
        self.assertEqual(seekless(req(b"GET", b"/" + b"n" * 255)).status, 404)  # merely missing
        self.assertEqual(seekless(req(b"GET", b"/" + b"a" * 9000)).status, 414)

    def test_same_as_peers(self):
        self.same_as_peers(req(b"GET", b"/" + b"n" * 256), lambda r: r.status)


class Methods(HttpCase):
    """Item 6: a method the server does not know is 501 (RFC 9110 §15.6.2), without Allow; a
    method HTTP defines that the resource does not serve is 405 with Allow. (nginx answers 405 to
    both, lighttpd 501 to both: no comparison.)"""

    def test_unknown_is_501_known_is_405(self):
        for m in (b"FOO", b"get", b"M-SEARCH"):
            r = seekless(req(m, b"/a.txt"))
            self.assertEqual((r.status, r.has("allow")), (501, False), m)
        for m in (b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"TRACE"):
            r = seekless(req(m, b"/a.txt"))
            self.assertEqual((r.status, r.get("allow")), (405, "GET, HEAD"), m)

    def test_501_keeps_the_connection(self):
        # The request was framed fine: the next one on the connection is answered.
        data = exchange(SEEKLESS.port, req(b"FOO", b"/a.txt", close=False) + req(b"GET", b"/a.txt"))
        self.assertTrue(data.startswith(b"HTTP/1.1 501 "), data[:40])
        self.assertIn(b"\r\n\r\nhello, world\n", data)


class Http10(HttpCase):
    """Item 7: the status line says HTTP/1.1 also to an HTTP/1.0 client (RFC 9110 §2.5), with
    HTTP/1.0 semantics kept: no chunked coding, keep-alive only when asked. (nginx sends 1.1,
    lighttpd 1.0: no comparison.)"""

    def test_status_line_is_1_1(self):
        for raw in (req(b"GET", b"/a.txt", version=b"HTTP/1.0", host=None, close=False),
                    req(b"GET", b"/missing", version=b"HTTP/1.0", host=None, close=False),
                    req(b"GET", b"/a.txt", b"Bad Field: x", version=b"HTTP/1.0", host=None, close=False),
                    req(b"FOO", b"/a.txt", version=b"HTTP/1.0", host=None, close=False)):
            r = seekless(raw)  # read to the close: a 1.0 connection is not kept unless asked
            self.assertEqual(r.version, "HTTP/1.1", raw[:40])
            self.assertEqual(r.get("connection"), "close")
            self.assertFalse(r.has("transfer-encoding"))

    def test_keep_alive_only_when_asked(self):
        s = socket.create_connection(("127.0.0.1", SEEKLESS.port), timeout=10)
        try:
            s.sendall(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            st, h, body, rest = test_core.read_response(s)
            self.assertEqual((st, h.get("connection"), body), (200, "keep-alive", b"hello, world\n"))
            s.sendall(b"GET /a.txt HTTP/1.0\r\n\r\n")
            data = rest + test_core.wait_closed(s, timeout=10)
        finally:
            s.close()
        r = Resp(data)
        self.assertEqual((r.status_line, r.get("connection"), r.rest),
                         ("HTTP/1.1 200 OK", "close", b"hello, world\n"))


class HostNormalisation(HttpCase):
    """Item 8: $HTTP["host"] sees the Host normalized as lighttpd does (lower case, no trailing
    dot, no default port :80, IPv6 literals in canonical form), an invalid Host is 400, and a
    pattern without a port names the host on any port (lighttpd's ==, nginx's server_name). The
    config denies everything for "example.com" (nginx: a server block answering 403)."""

    DENIED = [b"example.com", b"Example.COM", b"example.com:80", b"Example.COM:80", b"example.com.",
              b"EXAMPLE.com.:80", b"example.com:", b"example.com:8080"]
    ALLOWED = [b"a-.com", b"[::1]", b"[::1]:80", b"127.0.0.1", b"1.a", b"1.2.3.4.", b"a" * 64 + b".com"]
    INVALID = [b"example.com..", b"exa mple", b"a/b", b"a..b", b""]
    # Refused by seekless and lighttpd (nginx takes them): not a name, or a port with a leading
    # zero, out of range or next to another colon.
    INVALID_LIGHTTPD = [b".example.com", b"exa_mple.com", b"ex%41mple.com", b"a,b", b"-a.com",
                        b"1.2.3", b"127.1", b"a.1", b"*", b"\xc3\xa9.com", b"a@b", b"a:b:c", b"[::1",
                        b"example.com:080", b"example.com:0", b"example.com:65536", b"[v1.x]"]
    # Refused by seekless only: all-digit names that are no IPv4address as RFC 3986 writes it
    # (a leading zero reads as octal to some parsers; 999 is no octet). Both peers answer 200.
    INVALID_SEEKLESS_ONLY = [b"127.0.0.01", b"999.1.1.1"]

    def status(self, host, target=b"/a.txt"):
        return seekless(req(b"GET", target, host=host)).status

    def test_one_spelling_per_host(self):
        for h in self.DENIED:
            self.assertEqual(self.status(h), 403, h)
        for h in self.ALLOWED + [b"example.org", b"example.com.org", b"xexample.com"]:
            self.assertEqual(self.status(h), 200, h)
        # The absolute-form authority stands for Host (RFC 9112 §3.2.2) and is normalized alike.
        self.assertEqual(self.status(b"t", b"http://Example.COM.:80/a.txt"), 403)
        self.assertEqual(self.status(b"example.com", b"http://example.org/a.txt"), 200)

    def test_invalid_host_is_400(self):
        for h in self.INVALID + self.INVALID_LIGHTTPD + self.INVALID_SEEKLESS_ONLY:
            self.assertEqual(self.status(h), 400, h)
        self.assertEqual(self.status(b"t", b"http://a_b/a.txt"), 400)
        # HTTP/1.0 without Host stays fine; with an empty one it is refused like in 1.1.
        self.assertEqual(seekless(req(b"GET", b"/a.txt", version=b"HTTP/1.0", host=None)).status, 200)
        self.assertEqual(seekless(req(b"GET", b"/a.txt", version=b"HTTP/1.0", host=b"")).status, 400)

    def test_access_log_sees_the_normalized_host(self):
        marker = b"/log-%d" % os.getpid()
        for h in (b"Example.COM.:8080", b"[0:0::1]:80", b"WWW.Example.org."):
            seekless(req(b"GET", marker, host=h))
        with open(os.path.join(SEEKLESS.dir, "access.log")) as f:
            lines = [line.split() for line in f if marker.decode() in line]
        self.assertEqual([(l[0], l[1]) for l in lines],
                         [("example.com:8080", "403"), ("[::1]", "404"), ("www.example.org", "404")])

    def test_same_as_peers(self):
        for h in self.DENIED + self.ALLOWED + self.INVALID:
            self.same_as_peers(req(b"GET", b"/a.txt", host=h), lambda r: r.status)
        for h in self.INVALID_LIGHTTPD:
            r = Resp(exchange(PEERS[1].port, req(b"GET", b"/a.txt", host=h)))
            self.assertEqual(r.status, 400, (h, PEERS[1].name))


# ---- httplint ----

def httplint_path():
    p = os.environ.get("HTTPLINT") or os.path.join(REPO, ".venv-tools", "bin", "httplint")
    return p if os.access(p, os.X_OK) else None


# Requests whose raw answers httplint checks. HEAD is left out: httplint cannot know the method,
# so it would wait for the body a HEAD answer never has.
LINT_REQUESTS = [
    req(b"GET", b"/a.txt"),
    req(b"GET", b"/a.txt", version=b"HTTP/1.0", host=None, close=False),
    req(b"GET", b"/digits.bin", b"Range: bytes=0-9"),
    req(b"GET", b"/digits.bin", b"Range: bytes=100-109,0-9"),
    req(b"GET", b"/digits.bin", b"Range: bytes=200000-"),
    req(b"GET", b"/norange/a.txt", b"Range: bytes=0-1"),
    req(b"GET", b"/dir"),
    req(b"GET", b"/dir/"),
    req(b"GET", b"/missing"),
    req(b"GET", b"/a.txt", b"If-Match: \"nope\""),
    req(b"DELETE", b"/a.txt"),
    req(b"FOO", b"/a.txt"),
    req(b"GET", b"/a.txt", host=None),
    req(b"GET", b"/a.txt", host=b"exa_mple.com"),
    req(b"GET", b"/a.txt", host=b"Example.COM:80"),
    req(b"GET", b"/" + b"n" * 256),
    req(b"GET", b"/" + b"a" * 9000),
    req(b"GET", b"/a.txt", b"Range: bytes=0-1", b"Range: bytes=2-3"),
    req(b"GET", b"/digits.bin", b"Range: bytes=0-9,5-14,50000-50009"),
]


STATUS_NOTES = {414: "* [BAD] The server won't accept a URI this long",
                505: "* [BAD] The request HTTP version isn't supported"}


def lint(resp):
    """httplint's error-level notes on one raw response, less the two kinds it gets wrong here,
    and its whole output (for the failure message)."""
    path = httplint_path()
    p = subprocess.run([path, "-i", "response"], input=resp, capture_output=True, timeout=60)
    notes = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
    bad = [line.strip() for line in notes.splitlines() if line.strip().startswith("* [BAD]")]
    if p.returncode != 0:
        bad.append("httplint exited with %d" % p.returncode)
    r = Resp(resp)
    if (r.get("content-type") or "").startswith("multipart/byteranges"):
        # RFC 9110 §14.6: a multipart 206 carries Content-Range in each part, never in the
        # header; httplint asks for it in the header regardless.
        bad = [b for b in bad if "doesn't have a Content-Range header" not in b]
    # Notes that only restate what the status code means (the request was refused), saying
    # nothing about the response's form.
    bad = [b for b in bad if not b.startswith(STATUS_NOTES.get(r.status, "\0"))]
    return bad, notes


class Httplint(unittest.TestCase):
    def setUp(self):
        self.assertIsNotNone(httplint_path(), "httplint not found: set HTTPLINT or create the venv "
                             "with `python3 -m venv .venv-tools && .venv-tools/bin/pip install "
                             "httplint` in the repository root (scripts/install-deps does)")

    def test_the_check_can_fail(self):
        # A 206 that is not multipart needs its Content-Range: without it, an error note.
        bad, notes = lint(b"HTTP/1.1 206 Partial Content\r\nContent-Type: text/plain\r\n"
                          b"Content-Length: 2\r\n\r\nab")
        self.assertTrue(bad, notes)

    def test_no_error_notes(self):
        etag = seekless(req(b"GET", b"/a.txt")).get("etag").encode()
        requests = LINT_REQUESTS + [req(b"GET", b"/a.txt", b"If-None-Match: " + etag),
                                    req(b"GET", b"/a.txt", b'If-None-Match: "x"', b"If-None-Match: " + etag)]
        failures = []
        for raw in requests:
            resp = exchange(SEEKLESS.port, raw)
            bad, notes = lint(resp)
            if bad:
                failures.append("%r\n-> %r\n%s" % (raw[:100], resp[:300], notes))
        self.assertEqual(failures, [], "\n\n".join(failures))


if __name__ == "__main__":
    test_core.main()
