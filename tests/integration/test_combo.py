#!/usr/bin/env python3
"""Every feature with every other: an all-pairs (pairwise) combination test of seekless.

Every other suite tests one feature at a time; a crash once hid where two met (the timing trace
with the access log). Here a factor table (FACTORS) lists each feature with its levels; a greedy
AETG-style generator, seeded so every run is the same, builds a small set of configs in which
every pair of levels of any two factors appears at least once (checked, and printed at the start
of the run). For each config the real seekless starts with the real helpers the config names
(fcgi-stat-accel under spawn-fcgi on TCP or on a unix socket, `python3 -m http.server` behind
proxy-core), a FIXED set of requests is sent (SEQUENCE: one keep-alive connection, a pipelined
write, four such pipelines at once; between them files the server has served are rewritten,
replaced and deleted, and the open-file cache's bound is waited out), and every answer is
compared with what
RFC 9110 and a lighttpd/nginx user expect from those levels: status, status line, the headers
that matter, body bytes, keep-alive. At the end the server must still be alive, exit 0 on
SIGTERM, leave nothing on stderr (sanitizer reports go there), nothing unexpected in its error
log, and one access-log line / timing line per answered request when those are on.

How the expectations are computed: `answer()` is a small model of a correct static-file server
(resolution, index files, symlink policy, access-deny, content types, ETag and If-None-Match,
Range and multipart, HEAD, keep-alive) over a `Model` of the settings that apply to one request.
Each factor's `expect` hook adjusts that Model for its level (and may add checks), so the
answer follows from the levels and nothing is written per config.

Adding a feature is ONE new Factor entry in FACTORS:
    Factor(name="my feature",
           levels=("off", "on"),
           config=lambda level, env: 'my.key = "enable"' if level == "on" else "",
           expect=my_expect,     # (level, req, model): set Model fields; req is None for the
                                 # run-wide model (log patterns, names the status page lists)
           start=None,           # (level, env): start helper processes, env.on_stop(callable)
           after=None)           # (level, run) -> [failure strings]: checks after the stop
The generator, the coverage check and the printed lists pick it up; if the feature changes an
answer in a way the Model cannot say yet, add a Model field and use it in answer().
"""
import collections
import dataclasses
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import typing
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, free_port, read_response, wait_closed  # noqa: E402
from test_proxy import SPAWN, accel_bin, spawn_fcgi, wait_port  # noqa: E402
from test_stat_accel import alive  # noqa: E402

# The factor table below asks the build which network backends it has: know the build first.
if "--build" in sys.argv[:-1]:
    test_core.BUILD = sys.argv[sys.argv.index("--build") + 1]
test_core.BUILD = os.path.abspath(test_core.BUILD)

SEED = 15
VALGRIND = "valgrind" in os.environ.get("SEEKLESS_WRAPPER", "")
TIMEOUT = 60 if os.environ.get("SEEKLESS_WRAPPER") else 10

# ---- the site every config serves ----

SMALL = b"hello, every feature with every other\n"
COMP_TEXT = b"compress me, compress me, every feature with every other\n" * 50
BIG = random.Random(SEED).randbytes(3 * 524288 + 4567)  # several network-backend blocks
MID = random.Random(SEED + 1).randbytes(524288 + 175713)
FILES = {
    "small.txt": SMALL,
    "big.bin": BIG,
    "atime.txt": b"read me without touching my atime\n",
    "dir/index.html": b"<p>index</p>\n",
    "noindex/x.txt": b"x\n",
    "cond/a.txt": b"inside the conditional block\n",
    "cond/x.secret": b"denied inside the conditional block\n",
    "seek-bound/data.bin": MID,
    "seek-bound/s.txt": b"looked up by the stat accelerator\n",
    "gz/c.txt": COMP_TEXT,
    "gz/c.txt.gz": gzip.compress(COMP_TEXT, mtime=0),  # written after c.txt: not older
    "auth/a.txt": b"behind mod_auth\n",
    "chg/gone.txt": b"served, then deleted\n",
}
SYMLINKS = {"link.txt": "small.txt", "seek-bound/link.bin": "data.bin"}
BACKEND_FILES = {"px/hello.txt": b"hello from http.server\n",  # served by python3 -m http.server
                 "px/big.bin": random.Random(SEED + 2).randbytes(1 << 20)}
MIME = {".txt": "text/plain", ".html": "text/html", ".bin": "application/octet-stream"}
BASE_CONF = ("mimetype.assign = ( " + ", ".join(f'"{k}" => "{v}"' for k, v in MIME.items()) + " )\n"
             "server.max-keep-alive-idle = 60\n")  # no idle close between our requests (ASan)
STATUS_URL = "/server-status"


# ---- requests ----

@dataclasses.dataclass
class Req:
    name: str
    method: str
    target: str
    headers: tuple = ()      # extra header lines, without CRLF
    version: str = "1.1"
    host: bool = True
    etag_of: str = None      # send If-None-Match with the ETag last seen for this path

    @property
    def path(self):
        return self.target.partition("?")[0]

    def header(self, name):
        for line in self.headers:
            k, _, v = line.partition(":")
            if k.strip().lower() == name:
                return v.strip()
        return None

    def raw(self, etags):
        lines = [f"{self.method} {self.target} HTTP/{self.version}"]
        if self.host:
            lines.append("Host: combo.test")
        # As a proxy in front would: the client's address, which counts when "client address"
        # trusts this peer (mod_extforward) and changes nothing otherwise.
        lines.append("X-Forwarded-For: " + FORWARDED_CLIENT)
        lines += self.headers
        if self.etag_of:
            lines.append("If-None-Match: " + etags.get(self.etag_of, '"none-seen"'))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclasses.dataclass
class Change:
    """A file of the site changes between two requests: "rewrite" in place (same inode,
    truncated and written), "replace" (a new file renamed over it) or "delete". Then the run
    waits out the open-file cache's bound (fdcache.h: more than 1 ms with inotify, a second with
    simple), after which every answer must come from the new file."""
    how: str
    name: str
    data: bytes = None


# How long after a change a request may still be answered from the old file, per
# server.stat-cache-engine (with a margin).
CHANGE_WAIT = {"inotify": 0.02, "simple": 1.1, "disable": 0.0}

FORWARDED_CLIENT = "198.51.100.1"
PARSER_STATUSES = (400, 411, 413, 414, 417, 431, 501, 505)


def pipeline(*reqs):
    return tuple(reqs)


@dataclasses.dataclass
class Parallel:
    """`clients` connections at once, each sending `reqs` pipelined."""
    clients: int
    reqs: tuple


PIPELINE = pipeline(
    Req("p-get", "GET", "/small.txt"),
    Req("p-head", "HEAD", "/small.txt"),
    Req("p-range", "GET", "/big.bin", ("Range: bytes=0-9",)),
    Req("p-missing", "GET", "/missing.txt"),
    Req("p-head-missing", "HEAD", "/missing.txt"),
    Req("p-proxy", "GET", "/px/hello.txt"),
    Req("p-accel", "GET", "/seek-bound/s.txt"),
    Req("p-big", "GET", "/big.bin"),
    Req("p-dir", "GET", "/dir/", ("Connection: close",)))


# The fixed set: every config sends exactly these, in this order (a tuple is one pipelined
# write on a fresh connection, Parallel several such connections at once; the rest share one
# connection while the server keeps it).
SEQUENCE = [
    Req("get-small", "GET", "/small.txt"),
    Req("query", "GET", "/small.txt?v=1&x"),
    Req("get-big", "GET", "/big.bin"),
    Req("head-big", "HEAD", "/big.bin"),
    Req("range-across-blocks", "GET", "/big.bin", ("Range: bytes=1000-524999",)),
    Req("range-suffix", "GET", "/small.txt", ("Range: bytes=-6",)),
    Req("range-unsatisfiable", "GET", "/small.txt", ("Range: bytes=1000-",)),
    Req("head-range", "HEAD", "/big.bin", ("Range: bytes=0-9",)),
    Req("multipart", "GET", "/big.bin", ("Range: bytes=0-99,1000000-1000099",)),
    Req("multipart-order", "GET", "/big.bin", ("Range: bytes=600000-600099,0-99,50-149",)),
    Req("if-none-match", "GET", "/small.txt", etag_of="/small.txt"),
    Req("missing", "GET", "/missing.txt"),
    Req("head-missing", "HEAD", "/missing.txt"),
    Req("dir-index", "GET", "/dir/"),
    Req("dir-redirect", "GET", "/dir?q=1"),
    Req("dir-without-index", "GET", "/noindex/"),
    Req("redirect-query", "GET", "/go/small.txt?x=1"),
    Req("redirect-head", "HEAD", "/go/dir/"),
    Req("alias-file", "GET", "/al/index.html"),
    Req("alias-redirect", "GET", "/al?q=1"),
    Req("alias-dir", "GET", "/al/"),
    Req("alias-range", "GET", "/al/index.html", ("Range: bytes=3-7",)),
    Req("userdir-file", "GET", "/~combo/index.html"),
    Req("userdir-redirect", "GET", "/~combo?q=1"),
    Req("userdir-dir", "GET", "/~combo/"),
    Req("rewrite-file", "GET", "/rw/small.txt?q=1"),
    Req("rewrite-dir", "GET", "/rw/dir/"),
    Req("rewrite-range", "GET", "/rw/big.bin", ("Range: bytes=1000-1999",)),
    Req("rewrite-not-file", "GET", "/nf/none.txt"),
    Req("rewrite-not-file-head", "HEAD", "/nf/dir/"),
    Req("rewrite-is-file", "GET", "/dir/index.html"),
    Req("symlink", "GET", "/link.txt"),
    Req("cond-denied", "GET", "/cond/x.secret"),
    Req("cond-file", "GET", "/cond/a.txt"),
    Req("gzip", "GET", "/gz/c.txt", ("Accept-Encoding: br;q=0.5, gzip",)),
    Req("gzip-range", "GET", "/gz/c.txt", ("Accept-Encoding: gzip", "Range: bytes=0-9")),
    Req("gzip-refused", "GET", "/gz/c.txt", ("Accept-Encoding: gzip;q=0, identity",)),
    Req("http10", "GET", "/small.txt", version="1.0", host=False),
    Req("http10-keep-alive", "GET", "/small.txt", ("Connection: keep-alive",), version="1.0", host=False),
    Req("unknown-method", "BREW", "/small.txt"),
    Req("known-method", "DELETE", "/small.txt"),
    Req("head-no-host", "HEAD", "/small.txt", host=False),
    Req("accel-get", "GET", "/seek-bound/data.bin"),
    Req("accel-range", "GET", "/seek-bound/data.bin", ("Range: bytes=524000-525999",)),
    Req("accel-multipart", "GET", "/seek-bound/data.bin", ("Range: bytes=0-9,600000-600009",)),
    Req("accel-head", "HEAD", "/seek-bound/data.bin"),
    Req("accel-if-none-match", "GET", "/seek-bound/data.bin", etag_of="/seek-bound/data.bin"),
    Req("accel-txt", "GET", "/seek-bound/s.txt"),
    Req("accel-symlink", "GET", "/seek-bound/link.bin"),
    Req("accel-missing", "GET", "/seek-bound/missing.bin"),
    Req("proxy-get", "GET", "/px/hello.txt"),
    Req("proxy-head", "HEAD", "/px/hello.txt"),
    Req("proxy-missing", "GET", "/px/missing.txt"),
    Req("proxy-big", "GET", "/px/big.bin"),
    Req("proxy-http10", "GET", "/px/hello.txt", version="1.0", host=False),
    # The files served so far change under the server (the open-file cache keeps them open).
    Req("gone-before", "GET", "/chg/gone.txt"),
    Req("gone-before-2", "GET", "/chg/gone.txt"),  # the cache admits a file on its second request
    Req("small-before", "GET", "/small.txt"),  # checked by "simple" just before it changes
    Change("rewrite", "small.txt", b"rewritten in place, longer than before: every feature\n"),
    Change("replace", "seek-bound/s.txt", b"renamed over the file the accelerator looked up\n"),
    Change("delete", "chg/gone.txt"),
    Req("changed-if-none-match", "GET", "/small.txt", etag_of="/small.txt"),  # the old ETag
    Req("changed-get", "GET", "/small.txt"),
    Req("changed-304", "GET", "/small.txt", etag_of="/small.txt"),
    Req("changed-range", "GET", "/small.txt", ("Range: bytes=0-8",)),
    Req("gone-after", "GET", "/chg/gone.txt"),
    Req("accel-changed", "GET", "/seek-bound/s.txt"),
    PIPELINE,
    Parallel(4, PIPELINE),
    Req("noatime", "GET", "/atime.txt"),
    Req("auth-none", "GET", "/auth/a.txt"),
    Req("auth-ok", "GET", "/auth/a.txt", ("Authorization: Basic YWxpY2U6cHcx",)),  # alice:pw1
    Req("auth-head", "HEAD", "/auth/a.txt", ("Authorization: Basic YWxpY2U6cHcx",)),
    Req("auth-range", "GET", "/auth/a.txt", ("Authorization: Basic YWxpY2U6cHcx", "Range: bytes=0-5")),
    Req("auth-wrong", "GET", "/auth/a.txt", ("Authorization: Basic YWxpY2U6cHcy",)),  # alice:pw2
    Req("auth-malformed", "GET", "/auth/a.txt", ("Authorization: Basic !",)),
    Req("status", "GET", STATUS_URL + "?json"),
]


# ---- the model of a correct answer ----

@dataclasses.dataclass
class Model:
    """The settings that apply to one request (or, with req None, to the whole run)."""
    env: typing.Any
    route: str = "static"          # static | accel (X-Sendfile) | proxy (HTTP) | status
    index: tuple = ()
    follow_symlinks: bool = True
    ranges: bool = True
    keep_alive: bool = True
    deny: tuple = ()
    alias: dict = dataclasses.field(default_factory=dict)  # URL prefix -> site directory
    redirect: bool = False         # url.redirect "^/go/(.*)$" => "/$1" (mod_redirect)
    rewrite: bool = False          # REWRITE_CONF (mod_rewrite)
    served: typing.Any = None      # the Req the server serves after rewrites (None: as sent)
    listing: bool = False          # dir-listing.activate (mod_dirlisting)
    header_rules: bool = False     # HEADER_CONF (mod_setenv, mod_expire)
    compress: str = "off"          # off | precompressed | on the fly (mod_deflate)
    etags: bool = True
    auth: bool = False             # AUTH_CONF (mod_auth): /auth/ wants alice:pw1
    mime: dict = dataclasses.field(default_factory=lambda: dict(MIME))
    netback: str = None
    bandwidth: bool = False        # a bandwidth limit is set (the status page lists "bandwidth")
    backends: set = dataclasses.field(default_factory=set)  # names the status page lists
    caches: set = dataclasses.field(default_factory=set)    # the same, of its caches
    errpages: dict = dataclasses.field(default_factory=dict)  # status -> server.errorfile-prefix page
    evasive: bool = False          # evasive.max-conns-per-ip is set (EVASIVE_LIMIT)
    log_ok: list = dataclasses.field(default_factory=list)  # error-log lines allowed (regexes)
    checks: list = dataclasses.field(default_factory=list)  # extra (resp, run) -> [failures]


@dataclasses.dataclass
class Expected:
    status: int
    headers: dict = dataclasses.field(default_factory=dict)  # name -> value | PRESENT | ABSENT
    body: bytes = None           # None: any body (its length is still checked)
    conn: str = "keep"           # keep | close | any
    parts: list = None           # multipart: [(first, last)] in the expected order
    data: bytes = None           # multipart: the file's bytes when the request was made
    checks: list = dataclasses.field(default_factory=list)


PRESENT, ABSENT = object(), object()
KNOWN_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "CONNECT", "TRACE", "PATCH"}


def parse_ranges(value, size):
    """The request's byte ranges resolved against size, in request order (enough syntax for the
    ranges SEQUENCE sends)."""
    out = []
    for spec in value.split("=", 1)[1].split(","):
        a, _, b = spec.strip().partition("-")
        if a == "":
            out.append((max(0, size - int(b)), size - 1))
        else:
            if int(a) < size:  # an unsatisfiable range-spec selects nothing
                out.append((int(a), min(int(b), size - 1) if b else size - 1))
    return out


def coalesce_in_order(ranges):
    """RFC 9110 §14.6: parts in the order requested; a range overlapping an earlier one is merged
    into it (the merged part keeps the earlier one's place)."""
    out = []
    for first, last in ranges:
        for i, (f, la) in enumerate(out):
            if first <= la and f <= last:
                out[i] = (min(f, first), max(la, last))
                break
        else:
            out.append((first, last))
    return out


def lookup(m, path):
    """Resolve a URL path in the site: ("file", name, bytes), ("dir", name), ("redirect",),
    ("denied",), ("missing",)."""
    for prefix, target in m.alias.items():  # mod_alias: at a segment boundary
        if path == prefix or path.startswith(prefix + "/"):
            path = "/" + target + path[len(prefix):]
            break
    name = path.lstrip("/")
    if any(path.endswith(s) for s in m.deny):
        return ("denied",)
    if name in SYMLINKS:
        if not m.follow_symlinks or VALGRIND:  # valgrind has no openat2: every symlink refused
            return ("denied",)
        name = os.path.normpath(os.path.join(os.path.dirname(name), SYMLINKS[name]))
    files = m.env.files
    if name in files:
        return ("file", name, files[name])
    if path.endswith("/") and any(f.startswith(name) for f in files):
        return ("dir", name)
    if any(f.startswith(name + "/") for f in files):
        return ("redirect",)
    return ("missing",)


def mime_of(m, name):
    best = max((s for s in m.mime if name.endswith(s)), key=len, default=None)
    return m.mime[best] if best else "application/octet-stream"


def answer(m, req, etags):
    """What a correct server answers to req under the settings m."""
    if req.version == "1.0":
        keep = m.keep_alive and (req.header("connection") or "").lower() == "keep-alive"
    else:
        keep = m.keep_alive and (req.header("connection") or "").lower() != "close"
    exp = answer_as(m, req, etags, "keep" if keep else "close")
    page = m.errpages.get(exp.status) if m.route == "static" else None
    if page is not None:
        # An error the server answers itself (a back end's keeps its own body) carries the
        # page, typed as .html is where the request is (a block's mimetype.assign counts).
        exp.headers.update({"content-type": mime_of(m, "status.html"),
                            "content-length": str(len(page))})
        exp.body = b"" if req.method == "HEAD" else page
    if req.version == "1.0" and exp.conn == "keep":
        exp.headers["connection"] = "keep-alive"  # HTTP/1.0 closes unless told otherwise
    if m.header_rules:
        # setenv: on every answer; expire: 200/204/206 text/* to GET and HEAD, unless the answer
        # has its own Cache-Control; Expires instead for HTTP/1.0.
        exp.headers["x-combo"] = "1"
        ct = exp.headers.get("content-type")
        if (exp.status in (200, 204, 206) and req.method in ("GET", "HEAD") and
                isinstance(ct, str) and ct.startswith("text/") and "cache-control" not in exp.headers):
            if req.version == "1.0":
                exp.headers["expires"] = PRESENT
            else:
                exp.headers["cache-control"] = "max-age=3600"
    return exp


def answer_as(m, req, etags, conn):
    if not req.host and req.version == "1.1":
        return Expected(400, {"content-type": PRESENT}, conn="any")
    if req.method not in ("GET", "HEAD"):
        if req.method in KNOWN_METHODS:
            return Expected(405, {"allow": "GET, HEAD"}, conn=conn)
        return Expected(501, conn="any")
    head = req.method == "HEAD"
    req = m.served or req  # after url.rewrite-*
    if m.auth and req.path.startswith("/auth/"):
        cred = req.header("authorization")
        if cred == "Basic !":
            return Expected(400, {"content-type": PRESENT}, conn="close", body=b"" if head else None)
        if cred != "Basic YWxpY2U6cHcx":
            # A refused password closes the connection (lighttpd's rule); no credentials do not.
            return Expected(401, {"www-authenticate": 'Basic realm="combo", charset="UTF-8"',
                                  "content-type": PRESENT},
                            conn="close" if cred else conn, body=b"" if head else None)
    if m.route == "status":
        return Expected(200, {"content-type": "application/json"}, conn=conn,
                        checks=[status_json_check(m)])
    if m.route == "proxy":
        data = BACKEND_FILES.get(req.path.lstrip("/"))
        if data is None:
            return Expected(404, {"content-type": PRESENT}, conn=conn, body=b"" if head else None)
        ctype = "text/plain" if req.path.endswith(".txt") else "application/octet-stream"
        return Expected(200, {"content-type": ctype, "content-length": str(len(data))},  # http.server's
                        b"" if head else data, conn)
    if m.redirect and req.target.startswith("/go/") and m.route == "static":
        return Expected(301, {"location": req.target[3:], "content-length": "0"}, b"", conn=conn)
    found = lookup(m, req.path)
    if found[0] == "redirect":
        return Expected(301, {"location": req.path + "/" + req.target[len(req.path):]}, conn=conn,
                        body=b"" if head else None)
    if found[0] == "dir" and m.index and m.route == "static":
        name = found[1] + m.index[0]
        if name in m.env.files:
            found = ("file", name, m.env.files[name])
    if found[0] == "dir" and m.listing and m.route == "static":
        return Expected(200, {"content-type": "text/html"}, conn=conn, body=b"" if head else None,
                        checks=[] if head else [listing_check(m, found[1])])
    if found[0] == "dir":
        found = ("denied",)
    if found[0] != "file":
        st = 404 if found[0] == "missing" else 403
        return Expected(st, {"content-type": PRESENT}, conn=conn, body=b"" if head else None)
    name, data = found[1], found[2]
    h = {"content-type": mime_of(m, name), "etag": PRESENT if m.etags else ABSENT,
         "last-modified": PRESENT}
    h["accept-ranges"] = "bytes" if m.ranges else ABSENT
    enc = compression(m, req, name, h)
    if enc == "on the fly":  # bytes of our encoder: what they decode to is checked
        if rng_of(req, m, head):
            h.update({"content-range": PRESENT})
            return Expected(206, h, None, conn, checks=[gzip_magic_check])
        return Expected(200, h, b"" if head else None, conn,
                        checks=[] if head else [gunzip_check(data)])
    if enc:
        data = m.env.files[name + ".gz"]
    if req.etag_of and m.etags and req.etag_of not in m.env.stale_etags:
        return Expected(304, {"etag": etags.get(req.path, PRESENT)}, b"", conn)
    rng = req.header("range")
    if rng and m.ranges and not head:  # Range applies to GET only (RFC 9110 §14.2)
        parts = coalesce_in_order(parse_ranges(rng, len(data)))
        if not parts:
            return Expected(416, {"content-range": f"bytes */{len(data)}"}, None, conn)
        if len(parts) == 1:
            (a, b), = parts
            h.update({"content-range": f"bytes {a}-{b}/{len(data)}", "content-length": str(b - a + 1)})
            return Expected(206, h, data[a:b + 1], conn)
        h["content-type"] = PRESENT  # multipart/byteranges; boundary=..., checked with the parts
        return Expected(206, h, None, conn, parts=parts, data=data)
    h["content-length"] = str(len(data))
    h["content-range"] = ABSENT
    return Expected(200, h, b"" if head else data, conn)


def rng_of(req, m, head):
    return req.header("range") if m.ranges and not head else None


def compression(m, req, name, h):
    """mod_deflate's part of a static file's answer: Vary where a variant could exist, and
    which variant the request gets (None: the file; "precompressed": name.gz; "on the fly")."""
    if m.compress == "off" or m.route != "static":
        return None
    text = mime_of(m, name).startswith("text/")
    if m.compress == "on the fly" and not text:
        h["vary"] = ABSENT
        return None
    h["vary"] = "Accept-Encoding"
    ae = req.header("accept-encoding") or ""
    if "gzip" not in ae or "gzip;q=0" in ae:
        h["content-encoding"] = ABSENT
        return None
    if m.compress == "precompressed" and name + ".gz" not in m.env.files:
        h["content-encoding"] = ABSENT
        return None
    h["content-encoding"] = "gzip"
    return m.compress


def gzip_magic_check(resp, run):
    return [] if resp.body[:2] == b"\x1f\x8b" else [f"not gzip: {resp.body[:10]!r}"]


def gunzip_check(data):
    def check(resp, run):
        try:
            return [] if gzip.decompress(resp.body) == data else ["gzip body decodes to other bytes"]
        except (OSError, EOFError) as e:
            return [f"gzip body does not decode: {e}"]
    return check


def listing_check(m, dirname):
    """A directory listing names every file directly in the directory."""
    names = {f[len(dirname):].split("/")[0] for f in m.env.files if f.startswith(dirname)}

    def check(resp, run):
        return [f"listing of /{dirname} lacks {n!r}" for n in sorted(names)
                if (">" + n + "<").encode() not in resp.body]
    return check


def status_json_check(m):
    """The status page agrees with everything answered before it on this server."""
    def check(resp, run):
        try:
            j = json.loads(resp.body)
        except ValueError as e:
            return [f"status page is not JSON: {e}"]
        before = [r.status for r in run.responses[:resp.index]]
        classes = collections.Counter(f"{s // 100}xx" for s in before)
        want = {k: classes.get(k, 0) for k in ("1xx", "2xx", "3xx", "4xx", "5xx")}
        out = []
        if j.get("requests") != len(before):
            out.append(f"status page requests {j.get('requests')}, answered before it {len(before)}")
        if j.get("responses") != want:
            out.append(f"status page responses {j.get('responses')}, client saw {want}")
        if j.get("network_backend") != m.netback:
            out.append(f"status page network_backend {j.get('network_backend')!r}, config {m.netback!r}")
        if ("bandwidth" in j) != m.bandwidth:
            out.append(f"status page bandwidth {j.get('bandwidth')!r}, a limit set: {m.bandwidth}")
        names = {b.get("name") for b in j.get("backends", [])}
        if names != m.backends:
            out.append(f"status page backends {sorted(names)}, config {sorted(m.backends)}")
        names = {c.get("name") for c in j.get("caches", [])}
        if names != m.caches:
            out.append(f"status page caches {sorted(names)}, config {sorted(m.caches)}")
        ev = (j.get("evasive") or [{}])[0]
        # No client ever had EVASIVE_LIMIT requests in progress; with the limit set, the one
        # address still counted is this request's.
        if ev.get("turned_away") != 0 or ev.get("busy_addresses") != (1 if m.evasive else 0):
            out.append(f"status page evasive {ev}, expected none turned away and "
                       f"{1 if m.evasive else 0} busy address")
        return out
    return check


# Bandwidth limits high enough that the run does not slow down (its largest answers take a few
# ms at these rates), yet every send goes through the limiter; the server level also lifts its
# limit for a block (0), which must change nothing a client sees.
BANDWIDTH_CONF = {
    "off": "",
    "connection": "connection.kbytes-per-second = 32768",
    "server": 'server.kbytes-per-second = 65535\n$HTTP["url"] =~ "^/cond/" { server.kbytes-per-second = 0 }',
}


def bandwidth_expect(level, req, m):
    m.bandwidth = level != "off"


ERRPAGES = {403: b"<p>combo: forbidden</p>\n", 404: b"<p>combo: not here</p>\n",
            405: b"<p>combo: not that method</p>\n"}


def errpages_start(level, env):
    for status, page in ERRPAGES.items():
        write(os.path.join(env.tmp, "err", f"status-{status}.html"), page)


def errpages_expect(level, req, m):
    m.errpages = ERRPAGES if level == "files" else {}


# Above the most requests one client has in progress at once here (Parallel(4, ...) and the
# idle main connection), so nobody is turned away, unless some path forgets to count a request
# as ended: then every answer after a few such requests would be a 403.
EVASIVE_LIMIT = 5


def evasive_expect(level, req, m):
    m.evasive = level == "on"


def fdcache_expect(level, req, m):
    m.caches = {"inotify": {"open-files-inotify"}, "simple": {"open-files-simple"}}.get(level, set())


# ---- the factor table: the one place to add a feature ----

@dataclasses.dataclass
class Factor:
    name: str
    levels: tuple
    config: typing.Callable        # (level, env) -> config fragment
    expect: typing.Callable = None  # (level, req or None, model) -> None
    start: typing.Callable = None   # (level, env) -> None; register stops with env.on_stop
    after: typing.Callable = None   # (level, run) -> [failures], after the server stopped


def backends_compiled():
    out = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-V"],
                         capture_output=True, text=True, check=True).stdout
    return tuple(line.split()[1] for line in out.splitlines() if line.startswith("network-backend: "))


def set_netback(level, req, m):
    m.netback = level


def log_lines_check(kind, lines, want_lines, parse):
    """[failures] comparing a log (one line per answered request) with what the client saw."""
    out = []
    if len(lines) != len(want_lines):
        out.append(f"{kind}: {len(lines)} lines for {len(want_lines)} answered requests")
    got = collections.Counter()
    for line in lines:
        try:
            got[parse(line)] += 1
        except (ValueError, KeyError, AttributeError) as e:
            out.append(f"{kind}: bad line {line[:200]!r}: {e!r}")
    want = collections.Counter(want_lines)
    if got != want:
        out.append(f"{kind}: lines not matching the answers: missing {list((want - got).elements())[:6]}"
                   f", unexpected {list((got - want).elements())[:6]}")
    return out


ACCESS_RE = re.compile(r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "(.*)" (\d{3}) (\S+) "(.*)" "(.*)"$')


def access_after(level, run):
    path = os.path.join(run.env.tmp, "access.log")
    if level == "off":
        return [f"access log written while off: {path}"] if os.path.exists(path) else []

    client = FORWARDED_CLIENT if run.cfg["client address"] == "on" else "127.0.0.1"

    def parse(line):
        g = ACCESS_RE.match(line).groups()
        # Answers the request parser gives never reach mod_extforward: the peer's address.
        if g[0] != client and not (g[0] == "127.0.0.1" and int(g[5]) in PARSER_STATUSES):
            raise ValueError(f"client {g[0]}, expected {client}")
        return (g[4], int(g[5]), g[6] if g[6] != "0" else "-")
    # %b counts the body bytes sent, also those a wrong answer sent after a HEAD's head.
    sent = [len(r.body) + len(r.trailing) for r in run.responses]
    want = [(r.request_line, r.status, str(n) if n else "-") for r, n in zip(run.responses, sent)]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [f"access log: {e}"]
    return log_lines_check("access log", lines, want, parse)


def rrdtool_after(level, run):
    # Written when the server stopped: one request counted per answer, as the access log has.
    if level == "off":
        return []
    path = os.path.join(run.env.tmp, "combo.rrd")
    try:
        out = subprocess.run(["rrdtool", "lastupdate", path], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        counted = int(float(out[-2].split(":", 1)[1].split()[2]))
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError) as e:
        return [f"rrdtool: no last update in {path}: {e!r}"]
    want = len(run.responses)
    # The module writes once a minute as well as at the stop: a run across a minute's start
    # left part of its requests (or all: they may all have come before it) in the minute's
    # update, and the last update holds the rest. Runs within one minute check the count exactly.
    if int(run.env.rrd_started // 60) != int(time.time() // 60):
        return [] if 0 <= counted <= want else [f"rrdtool: {counted} requests in the last update "
                                                f"of a run across a minute, {want} answered"]
    return [] if counted == want else [f"rrdtool: {counted} requests counted, {want} answered"]


def rrdtool_start(level, env):
    env.rrd_started = time.time()  # (the server starts right after the start hooks)


def timing_after(level, run):
    if level == "off":
        return ["timing trace written while off"] if run.timing_text else []

    def parse(line):
        j = json.loads(line)
        if j["backend"] != run.model.netback:
            raise ValueError(f"backend {j['backend']!r}")
        return (j["status"], j["path"] if j["status"] != 400 else "")
    # The trace names the path served (after rewrites).
    want = [(r.status, (run.model_for(r.req).served or r.req).path if r.status != 400 else "")
            for r in run.responses]
    return log_lines_check("timing trace", run.timing_text.splitlines(), want, parse)


def status_expect(level, req, m):
    if req is not None and level == "on" and req.path == STATUS_URL:
        m.route = "status"


ACCEL_PREFIX = "/seek-bound/"


def accel_config(level, env):
    if level == "off":
        return ""
    # As examples/seekless.conf, the article's block.
    addr = f"127.0.0.1:{env.accel_port}" if level == "tcp" else f"unix:{env.accel_sock}"
    return (f'$HTTP["url"] =~ "^{ACCEL_PREFIX}" {{\n  proxy-core.protocol = "fastcgi"\n'
            f'  proxy-core.backends = ( "{addr}" )\n  proxy-core.allow-x-sendfile = "enable"\n'
            f'  proxy-core.max-pool-size = 20\n}}\n')


def accel_start(level, env):
    if level == "off":
        return
    if not (SPAWN and os.access(accel_bin(), os.X_OK)):
        raise unittest.SkipTest("spawn-fcgi or fcgi-stat-accel missing")
    args = ["-a", "127.0.0.1", "-p", str(env.accel_port)] if level == "tcp" else \
        ["-s", env.accel_sock, "-M", "0660"]
    # As many workers as the article's pool (README: max-pool-size at or below the workers);
    # fewer would let the gateway's advice about the pool size into the error log.
    pid = spawn_fcgi(args, 20, ["--", os.path.abspath(accel_bin())])
    env.on_stop(lambda: stop_pid(pid))
    if level == "tcp":
        wait_port(env.accel_port)
    else:
        wait_unix(env.accel_sock)


def accel_expect(level, req, m):
    if level == "off":
        return
    m.backends.add(f"127.0.0.1:{m.env.accel_port}" if level == "tcp" else f"unix:{m.env.accel_sock}")
    # The accelerator's refusals reach the error log through FastCGI stderr; so do X-Sendfile
    # paths the server refuses (a symlink with server.follow-symlink disabled).
    m.log_ok += [r"proxy-core: /seek-bound/missing\.bin: backend stderr: fcgi-stat-accel: 404 ",
                 r"X-Sendfile /seek-bound/link\.bin: Too many levels of symbolic links -> 403",
                 # The article's max-pool-size = 20 is above the accelerator's workers: when the
                 # parallel pipelines find every worker held by a kept connection, proxy-core
                 # closes kept ones and says so, once (gateway.c); which runs meet it is timing.
                 r"proxy-core: backend \S+: a new connection waited for a worker while kept "
                 r"connections held them all"]
    if req is not None and req.path.startswith(ACCEL_PREFIX):
        m.route = "accel"


def proxy_start(level, env):
    if level == "off":
        return
    p = subprocess.Popen([sys.executable, "-m", "http.server", str(env.http_port), "--bind",
                          "127.0.0.1", "--directory", env.backend_dir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env.on_stop(lambda: (p.terminate(), p.wait()))
    wait_port(env.http_port)


def proxy_config(level, env):
    if level == "off":
        return ""
    if level == "proxy.server":  # lighttpd 1.4's syntax for the same route
        return ('$HTTP["url"] =~ "^/px/" {\n  proxy.server = ( "" => (( "host" => "127.0.0.1", '
                f'"port" => {env.http_port} )) )\n}}\n')
    rewrites = ""
    if level == "rewritten":  # lighttpd 1.5's rules, written to leave what the client sees alone
        rewrites = ('  proxy-core.rewrite-request = ( "_uri" => ( "^/px/(.*)$" => "/px/$1" ),\n'
                    '    "X-Combo" => ( ".*" => "rewritten" ) )\n'
                    '  proxy-core.rewrite-response = ( "Content-Type" => ( "^(.*)$" => "$1" ) )\n')
    return ('$HTTP["url"] =~ "^/px/" {\n  proxy-core.protocol = "http"\n'
            f'  proxy-core.backends = ( "127.0.0.1:{env.http_port}" )\n{rewrites}}}\n')


def proxy_expect(level, req, m):
    if level == "off":
        return
    m.backends.add(f"127.0.0.1:{m.env.http_port}")
    if req is not None and req.path.startswith("/px/"):
        m.route = "proxy"


def keepalive_expect(level, req, m):
    m.keep_alive = level == "on"


ATIME_FILE = "atime.txt"


def noatime_expect(level, req, m):
    if level == "on" and req is not None and req.path == "/" + ATIME_FILE and ATIME_WORKS:
        def check(resp, run):
            st = os.stat(os.path.join(run.env.root, ATIME_FILE))
            return [] if st.st_atime_ns == run.env.atime_ns else \
                ["server.use-noatime: serving the file changed its atime"]
        m.checks.append(check)


def symlink_expect(level, req, m):
    m.follow_symlinks = level == "on"


COND_CONF = ('$HTTP["url"] =~ "^/cond/" {\n  url.access-deny = ( ".secret" )\n'
             '  static-file.etags = "disable"\n}\n'
             'else $HTTP["url"] =~ "[.]txt$" {\n  mimetype.assign = ( ".txt" => "text/x-else" )\n}\n')


def cond_expect(level, req, m):
    if level == "off" or req is None:
        return
    if req.path.startswith("/cond/"):
        m.deny = m.deny + (".secret",)
        m.etags = False
    elif req.path.endswith(".txt"):
        m.mime = {".txt": "text/x-else"}  # a block's mimetype.assign replaces the table


def index_expect(level, req, m):
    if level == "on":
        m.index = ("index.html",)


def alias_expect(level, req, m):
    if level == "on":
        m.alias = {"/al": "dir"}


def userdir_config(level, env):
    # /~combo/ is basepath/combo/dir: a symlink to the files, so /~combo/X serves dir/X.
    if level == "off":
        return ""
    return f'userdir.path = "dir"\nuserdir.basepath = "{env.tmp}/users"'


def userdir_start(level, env):
    if level == "on":
        os.makedirs(os.path.join(env.tmp, "users"))
        os.symlink(env.root, os.path.join(env.tmp, "users", "combo"))


def userdir_expect(level, req, m):
    if level == "on":
        m.alias = dict(m.alias, **{"/~combo": "dir"})  # served as mod_alias would


def redirect_expect(level, req, m):
    m.redirect = level == "on"


# What the rewrite factor turns on: /rw/X is served as /X, and /nf/X or /dir/X as /small.txt
# unless it is a file (a directory is not: /dir/ too).
REWRITE_CONF = ('url.rewrite-once = ( "^/rw/(.*)$" => "/$1" )\n'
                'url.rewrite-if-not-file = ( "^/(nf|dir)/" => "/small.txt" )')


def rewrite_expect(level, req, m):
    m.rewrite = level == "on"


def rewritten(req, m):
    """The request the server serves after REWRITE_CONF (req itself when no rule applies)."""
    if not m.rewrite or req.target == "*":
        return req
    if req.path.startswith("/rw/"):
        # url.rewrite-once; it ends rewriting for the request (-if-not-file too), as lighttpd
        return dataclasses.replace(req, target=req.target[3:])
    if m.route == "static" and re.match(r"/(nf|dir)/", req.path) and lookup(m, req.path)[0] != "file":
        return dataclasses.replace(req, target="/small.txt")  # url.rewrite-if-not-file
    return req


HEADER_CONF = ('setenv.add-response-header = ( "X-Combo" => "1" )\n'
               'expire.mimetypes = ( "text/" => "access plus 1 hours" )')


def header_expect(level, req, m):
    m.header_rules = level == "on"


def listing_expect(level, req, m):
    m.listing = level == "on"


def compress_expect(level, req, m):
    m.compress = level


COMPRESS_CONF = {"off": "", "precompressed": 'deflate.precompressed = "enable"',
                 "on the fly": 'deflate.mimetypes = ( "text/" )\ndeflate.allowed-encodings = '
                               '( "gzip" )\ndeflate.min-compress-size = 0'}


# Basic against an htpasswd file (apr1), the password checked on a stat thread.
AUTH_CONF = ('auth.backend = "htpasswd"\nauth.backend.htpasswd.userfile = "{tmp}/htpasswd"\n'
             'auth.require = ( "/auth/" => ( "method" => "basic", "realm" => "combo", '
             '"require" => "user=alice" ) )')


def auth_start(level, env):
    with open(os.path.join(env.tmp, "htpasswd"), "w") as f:
        f.write("alice:$apr1$abcdefgh$VDRNIfeXktYVAN7OPI/sv.\n")  # openssl passwd -apr1 pw1


def auth_expect(level, req, m):
    m.auth = level == "on"


def range_expect(level, req, m):
    m.ranges = level == "on"


def vhost_config(level, env):
    # The host (combo.test) maps to a directory that is a symlink to the files: every answer
    # stays what it was, now through a document root opened per request (vhost.c).
    if level == "simple":
        return (f'simple-vhost.server-root = "{env.tmp}/vh/"\n'
                'simple-vhost.default-host = "default.test"')
    if level == "evhost":
        return f'evhost.path-pattern = "{env.tmp}/ev/%2/%1/"'
    return ""


def vhost_start(level, env):
    if level == "simple":
        os.makedirs(os.path.join(env.tmp, "vh"))
        os.symlink(env.root, os.path.join(env.tmp, "vh", "combo.test"))
    elif level == "evhost":  # combo.test: %2 "combo", %1 "test"
        os.makedirs(os.path.join(env.tmp, "ev", "combo"))
        os.symlink(env.root, os.path.join(env.tmp, "ev", "combo", "test"))


def tls_config(level, env):
    """The listener speaks TLS with a certificate made for this config (openssl CLI); "client
    cert": clients must show one (self-signed, the CA of ssl.ca-file), exported to FastCGI."""
    if level == "off":
        return ""
    for name in ("tls", "client")[:2 if level == "client cert" else 1]:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key", "-out",
                        f"{name}.crt", "-days", "2", "-subj", "/CN=localhost"],
                       cwd=env.tmp, check=True, capture_output=True)
    env.tls = (f"{env.tmp}/client.crt", f"{env.tmp}/client.key") if level == "client cert" else True
    return (f'ssl.engine = "enable"\nssl.pemfile = "{env.tmp}/tls.crt"\n'
            f'ssl.privkey = "{env.tmp}/tls.key"' +
            (f'\nssl.ca-file = "{env.tmp}/client.crt"\nssl.verifyclient.activate = "enable"\n'
             'ssl.verifyclient.exportcert = "enable"' if level == "client cert" else ""))


def onoff(on, off=""):
    return lambda level, env: on if level == "on" else off


FACTORS = [
    Factor("network backend", backends_compiled(),
           lambda level, env: f'server.network-backend = "{level}"', set_netback),
    Factor("timing trace", ("off", "on"), onoff('debug.log-timing = "enable"'), after=timing_after),
    Factor("access log", ("off", "on", "piped"),
           lambda level, env: {"on": f'accesslog.filename = "{env.tmp}/access.log"',
                               "piped": f'accesslog.filename = "|cat >> {env.tmp}/access.log"'
                               }.get(level, ""),
           after=access_after),
    Factor("status page", ("off", "on"), onoff(f'status.status-url = "{STATUS_URL}"'), status_expect),
    Factor("stat accelerator", ("off", "tcp", "unix"), accel_config, accel_expect, accel_start),
    Factor("HTTP proxy", ("off", "on", "proxy.server", "rewritten"), proxy_config, proxy_expect,
           proxy_start),
    Factor("keep-alive", ("on", "off"),
           onoff("", "server.max-keep-alive-requests = 0"), keepalive_expect),
    Factor("O_NOATIME", ("off", "on"),
           onoff('server.use-noatime = "enable"', 'server.use-noatime = "disable"'), noatime_expect),
    Factor("symlinks", ("on", "off"),
           onoff('server.follow-symlink = "enable"', 'server.follow-symlink = "disable"'), symlink_expect),
    Factor("conditional blocks", ("off", "on"), onoff(COND_CONF), cond_expect),
    Factor("client address", ("off", "on"), onoff('extforward.forwarder = ( "127.0.0.1" => "trust" )')),
    Factor("virtual hosting", ("off", "simple", "evhost"), vhost_config, start=vhost_start),
    Factor("index files", ("off", "on"), onoff('index-file.names = ( "index.html" )'), index_expect),
    # Relative to the config file, which sits beside the document root.
    Factor("alias", ("off", "on"), onoff('alias.url = ( "/al/" => "root/dir" )'), alias_expect),
    Factor("user directories", ("off", "on"), userdir_config, userdir_expect, userdir_start),
    Factor("traffic database", ("off", "on"),
           lambda level, env: f'rrdtool.db-name = "{env.tmp}/combo.rrd"' if level == "on" else "",
           start=rrdtool_start, after=rrdtool_after),
    Factor("redirect", ("off", "on"), onoff('url.redirect = ( "^/go/(.*)$" => "/$1" )'), redirect_expect),
    Factor("rewrite", ("off", "on"), onoff(REWRITE_CONF), rewrite_expect),
    Factor("directory listings", ("off", "on"), onoff('dir-listing.activate = "enable"'),
           listing_expect),
    Factor("response fields", ("off", "on"), onoff(HEADER_CONF), header_expect),
    Factor("compression", ("off", "precompressed", "on the fly"),
           lambda level, env: COMPRESS_CONF[level], compress_expect),
    Factor("authentication", ("off", "on"),
           lambda level, env: AUTH_CONF.format(tmp=env.tmp) if level == "on" else "",
           auth_expect, auth_start),
    Factor("Range requests", ("on", "off"),
           onoff('server.range-requests = "enable"', 'server.range-requests = "disable"'), range_expect),
    # With several event loops (SEEKLESS_TEST_LOOPS, else one a core): a listening socket each,
    # or one they share.
    Factor("listening sockets", ("one a loop", "shared"),
           lambda level, env: 'server.reuse-port = "disable"' if level == "shared" else ""),
    # Each loop left to the scheduler (the default) or bound to a CPU of its own (with two loops
    # or more): nothing a client sees may differ.
    Factor("loop CPU binding", ("disable", "auto"),
           lambda level, env: 'server.worker-cpu-affinity = "auto"' if level == "auto" else ""),
    Factor("requests per address", ("off", "on"),
           onoff(f"evasive.max-conns-per-ip = {EVASIVE_LIMIT}"), evasive_expect),
    Factor("error pages", ("built-in", "files"),
           lambda level, env: f'server.errorfile-prefix = "{env.tmp}/err/status-"'
           if level == "files" else "", errpages_expect, errpages_start),
    # The Change steps of SEQUENCE wait out each engine's bound, then expect the new files.
    Factor("open-file cache", ("inotify", "simple", "disable"),
           lambda level, env: f'server.stat-cache-engine = "{level}"', fdcache_expect),
    # Every single request that HTTP/2 can carry goes as an HTTP/2 stream instead (curl: ALPN h2,
    # or prior knowledge on cleartext), with the same expectations; pipelines, HTTP/1.0 and
    # requests without Host stay HTTP/1.1 on the same server. Before the bandwidth limit: with
    # HTTP/2 a limit may only be set at the top level (its block lifting the limit is left out).
    Factor("HTTP/2", ("off", "on"), lambda level, env: setattr(env, "h2", level == "on") or (
        'server.feature-flags = ( "server.h2proto" => "enable", "server.h2c" => "enable" )'
        if level == "on" else "")),
    Factor("bandwidth limit", ("off", "connection", "server"),
           lambda level, env: BANDWIDTH_CONF[level].split("\n")[0] if env.h2 else BANDWIDTH_CONF[level],
           bandwidth_expect),
    # Every answer the same, through OpenSSL (the clients below wrap their sockets).
    Factor("TLS", ("off", "on", "client cert"), tls_config),
]


def h2_fetch(run, r):
    """r over HTTP/2 by curl, as a Resp (HEAD: no body; no connection semantics)."""
    raw = r.raw(run.etags).decode("latin-1").split("\r\n")[1:-2]
    url = f"{'https' if run.env.tls else 'http'}://127.0.0.1:{run.srv.port}{r.target}"
    args = ["curl", "-sk", "--path-as-is", "--max-time", str(TIMEOUT), "-D", "/dev/stdout",
            "-o", "/dev/null" if r.method == "HEAD" else os.path.join(run.env.tmp, "h2.body"),
            "--http2" if run.env.tls else "--http2-prior-knowledge",
            # The TLS factor's client certificate, when its level asks for one.
            *(["--cert", run.env.tls[0], "--key", run.env.tls[1]]
              if isinstance(run.env.tls, tuple) else []),
            *(["-I"] if r.method == "HEAD" else ["-X", r.method]), *[a for h in raw for a in ("-H", h)], url]
    open(os.path.join(run.env.tmp, "h2.body"), "wb").close()  # curl writes none for no body
    p = subprocess.run(args, capture_output=True, timeout=TIMEOUT + 10)
    lines = p.stdout.decode("latin-1").split("\r\n")
    if p.returncode or not lines[0].startswith("HTTP/2 "):
        raise OSError(f"curl --http2: exit {p.returncode}, {lines[0]!r}")
    h = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    body = b"" if r.method == "HEAD" else open(os.path.join(run.env.tmp, "h2.body"), "rb").read()
    return Resp(r, 0, lines[0], int(lines[0].split()[1]), h, body, h2=True)

# Error-log lines any config may write (start, stop) and those its helpers explain.
# proxy-core's advice about a pool larger than the accelerator's workers is not among them: the
# accelerator has as many workers as the pool, and the gateway logs a stall only once an answer
# confirmed it (a busy machine delays answers, it does not make them come right after a worker
# was freed).
LOG_OK = [r"seekless started \(", r"received SIGTERM, shutting down gracefully", r"seekless stopped"]
if VALGRIND:
    LOG_OK.append(r"openat2\(\) is not available")


# ---- all pairs ----

def pairs_of(row):
    return {(i, row[i], j, row[j]) for i in range(len(row)) for j in range(i + 1, len(row))}


def all_pairs_needed(sizes):
    return {(i, a, j, b) for i in range(len(sizes)) for j in range(i + 1, len(sizes))
            for a in range(sizes[i]) for b in range(sizes[j])}


def generate(sizes, seed=SEED, candidates=40):
    """Greedy all-pairs (AETG): each new row starts from the factor level left in the most
    uncovered pairs, fills the other factors in a random order with the level covering most
    uncovered pairs, and the best of `candidates` such rows is kept. Deterministic for a seed."""
    rng = random.Random(seed)
    uncovered = all_pairs_needed(sizes)
    rows = []
    while uncovered:
        count = collections.Counter()
        for i, a, j, b in uncovered:
            count[(i, a)] += 1
            count[(j, b)] += 1
        top = max(count.values())
        firsts = sorted(k for k, v in count.items() if v == top)
        best = None
        for _ in range(candidates):
            i0, a0 = rng.choice(firsts)
            row = [None] * len(sizes)
            row[i0] = a0
            order = [k for k in range(len(sizes)) if k != i0]
            rng.shuffle(order)
            for k in order:
                def gain(v):
                    return sum(((min(k, j), v if k < j else row[j], max(k, j), row[j] if k < j else v)
                                in uncovered) for j in range(len(sizes)) if row[j] is not None)
                scores = [gain(v) for v in range(sizes[k])]
                row[k] = rng.choice([v for v in range(sizes[k]) if scores[v] == max(scores)])
            g = len(pairs_of(row) & uncovered)
            if best is None or g > best[0]:
                best = (g, row)
        rows.append(best[1])
        uncovered -= pairs_of(best[1])
    return rows


def configs():
    rows = generate([len(f.levels) for f in FACTORS])
    return [{f.name: f.levels[v] for f, v in zip(FACTORS, row)} for row in rows]


def coverage_report(cfgs):
    """Lines naming, for each pair of factors, the first config covering each pair of levels;
    and the pairs no config covers."""
    lines, missing = [], []
    for i, fi in enumerate(FACTORS):
        for fj in FACTORS[i + 1:]:
            cells = []
            for a in fi.levels:
                for b in fj.levels:
                    hit = [n for n, c in enumerate(cfgs, 1) if c[fi.name] == a and c[fj.name] == b]
                    cells.append(f"{a}/{b}:#{hit[0]}" if hit else f"{a}/{b}:NONE")
                    if not hit:
                        missing.append((fi.name, a, fj.name, b))
            lines.append(f"  {fi.name} x {fj.name}: " + " ".join(cells))
    return lines, missing


# ---- running one config ----

def wait_unix(path, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    raise RuntimeError(f"nothing listens on {path}")


def stop_pid(pid):
    """SIGTERM a helper we spawned (not our child: spawn-fcgi forked it), SIGKILL after 5 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + 5
    while time.time() < deadline and alive(pid):
        time.sleep(0.02)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


class Env:
    """One config's temporary directory, ports and helpers to stop."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sl_combo_")
        self.accel_port, self.http_port = free_port(), free_port()
        self.accel_sock = os.path.join(self.tmp, "accel.sock")
        self.backend_dir = os.path.join(self.tmp, "be")
        for name, data in BACKEND_FILES.items():
            write(os.path.join(self.backend_dir, name), data)
        self.stops = []
        self.tls = False  # the TLS factor: True, or the client cert and key to show
        self.root = None
        self.atime_ns = None
        self.files = dict(FILES)  # the site as it is now (Change steps edit it)
        self.stale_etags = set()  # paths whose last ETag seen names a file since changed

    def on_stop(self, fn):
        self.stops.append(fn)

    def close(self):
        for fn in reversed(self.stops):
            try:
                fn()
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def probe_atime():
    """Whether reading a file whose atime is older than its mtime updates the atime here
    (relatime): if not, the O_NOATIME check could not fail and is left out."""
    d = tempfile.mkdtemp(prefix="sl_combo_atime_")
    try:
        p = os.path.join(d, "f")
        write(p, b"x")
        st = os.stat(p)
        os.utime(p, ns=(st.st_mtime_ns - 2 * 86400 * 10**9, st.st_mtime_ns))
        before = os.stat(p).st_atime_ns
        with open(p, "rb") as f:
            f.read()
        return os.stat(p).st_atime_ns != before
    finally:
        shutil.rmtree(d, ignore_errors=True)


ATIME_WORKS = probe_atime()


@dataclasses.dataclass
class Resp:
    req: Req
    index: int           # place among the run's answered requests
    status_line: str
    status: int
    headers: dict
    body: bytes
    trailing: bytes = b""  # bytes after this answer and before the next one (or the close)
    closed: bool = False   # the server closed the connection after this answer
    h2: bool = False       # it came as an HTTP/2 stream (the HTTP/2 factor)

    @property
    def request_line(self):
        return f"{self.req.method} {self.req.target} HTTP/{'2.0' if self.h2 else self.req.version}"


class Client:
    """One connection at a time to the server; answers are read with test_core.read_response,
    bytes before an answer's status line are kept as the previous answer's trailing bytes."""

    def __init__(self, port, tls=False):
        self.port = port
        self.tls = tls
        self.sock = None
        self.buf = b""
        self.last = None

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            if isinstance(self.tls, tuple):
                ctx.load_cert_chain(*self.tls)
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
        self.buf = b""
        self.last = None

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def read(self, req):
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError(f"connection closed before the answer to {req.name}")
            self.buf += d
        at = self.buf.find(b"HTTP/1.")
        if at > 0 and self.last:
            self.last.trailing += self.buf[:at]
        self.buf = self.buf[max(at, 0):]
        line = self.buf.split(b"\r\n", 1)[0].decode("latin-1")
        st, h, body, self.buf = read_response(self.sock, self.buf, head=req.method == "HEAD")
        self.last = Resp(req, 0, line, st, h, body)
        if "close" in h.get("connection", "").lower():
            self.last.trailing += self.buf + wait_closed(self.sock, TIMEOUT)
            self.last.closed = True
            self.close()
        return self.last


class Run:
    """One config: the server, its helpers, the answers and what was wrong."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.srv = None
        self.env = Env()
        self.model = self.model_for(None)
        self.responses = []
        self.checked = []   # (expected, resp)
        self.failures = []
        self.etags = {}
        self.timing_text = ""
        self.lock = threading.Lock()

    def model_for(self, req):
        m = self.factors_model(req)
        served = rewritten(req, m) if req is not None else req
        if served is not req:
            # The server starts the request over with the new target: conditions and routes
            # follow it.
            m = self.factors_model(served)
            m.served = served
        return m

    def factors_model(self, req):
        m = Model(self.env)
        for f in FACTORS:
            if f.expect:
                f.expect(self.cfg[f.name], req, m)
        return m

    def fail(self, msg):
        self.failures.append(msg)

    def start(self):
        conf = BASE_CONF + "\n".join(f.config(self.cfg[f.name], self.env) for f in FACTORS)
        self.srv = Server(conf, FILES)
        self.env.root = self.srv.root
        for name, target in SYMLINKS.items():
            os.symlink(target, os.path.join(self.srv.root, name))
        p = os.path.join(self.srv.root, ATIME_FILE)
        st = os.stat(p)
        os.utime(p, ns=(st.st_mtime_ns - 2 * 86400 * 10**9, st.st_mtime_ns))
        self.env.atime_ns = os.stat(p).st_atime_ns
        for f in FACTORS:
            if f.start:
                f.start(self.cfg[f.name], self.env)
        self.srv.start()

    def send_new(self, reqs):
        client = Client(self.srv.port, self.env.tls)
        try:
            self.send(client, reqs)
        except OSError as e:
            self.fail(f"pipeline {reqs[0].name}...: {e}")
        finally:
            client.close()

    def send(self, client, reqs):
        """Send reqs in one write on the client's connection; read the answers there are."""
        h2 = self.cfg["HTTP/2"] == "on" and len(reqs) == 1 and reqs[0].host and reqs[0].version == "1.1"
        if client.sock is None and not h2:
            client.connect()
        if not h2:
            client.sock.sendall(b"".join(r.raw(self.etags) for r in reqs))
        exps = []
        for r in reqs:
            m = self.model_for(r)
            exp = answer(m, r, self.etags)
            exp.checks += m.checks
            exps.append(exp)
        answered = 0
        for r, exp in zip(reqs, exps):
            if client.sock is None and not h2:
                break  # closed after an earlier answer: the rest were never requests
            try:
                resp = h2_fetch(self, r) if h2 else client.read(r)
            except (EOFError, OSError) as e:
                self.fail(f"{r.name}: no answer ({e})")
                client.close()
                break
            answered += 1
            with self.lock:
                resp.index = len(self.responses)  # the answers before it (the status page's)
                self.responses.append(resp)
                self.checked.append((exp, resp))
                if "etag" in resp.headers and resp.status == 200:
                    self.etags[r.path] = resp.headers["etag"]
                    self.env.stale_etags.discard(r.path)
        if len(reqs) > 1:
            want = len(reqs) if self.model.keep_alive else 1
            if answered != want:
                self.fail(f"pipeline of {len(reqs)}: {answered} answered, expected {want}")

    def exercise(self):
        client = Client(self.srv.port, self.env.tls)
        try:
            for item in SEQUENCE:
                if isinstance(item, Parallel):
                    ts = [threading.Thread(target=self.send_new, args=(item.reqs,))
                          for _ in range(item.clients)]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                elif isinstance(item, tuple):
                    self.send_new(item)
                elif isinstance(item, Change):
                    self.change(item)
                else:
                    self.send(client, [item])
        finally:
            client.close()
        for exp, resp in self.checked:
            self.check(exp, resp)

    def change(self, c):
        path = os.path.join(self.env.root, c.name)
        if c.how == "rewrite":
            with open(path, "r+b") as f:
                f.truncate(0)
                f.write(c.data)
        elif c.how == "replace":
            write(path + ".new", c.data)
            os.rename(path + ".new", path)
        else:
            os.unlink(path)
        if c.data is None:
            del self.env.files[c.name]
        else:
            self.env.files[c.name] = c.data
        self.env.stale_etags.add("/" + c.name)
        time.sleep(CHANGE_WAIT[self.cfg["open-file cache"]])

    def check(self, exp, resp):
        name = resp.req.name
        if resp.status != exp.status:
            self.fail(f"{name}: status {resp.status}, expected {exp.status}")
            return  # the rest describes the expected status
        want_line = "HTTP/2 " if resp.h2 else "HTTP/1.1 "
        if not resp.status_line.startswith(want_line):
            self.fail(f"{name}: status line {resp.status_line!r}, expected HTTP/1.1")
        for k, v in exp.headers.items():
            got = resp.headers.get(k)
            if v is PRESENT and got is None:
                self.fail(f"{name}: no {k}")
            elif v is ABSENT and got is not None and not (k == "accept-ranges" and got == "none"):
                self.fail(f"{name}: {k}: {got} sent, expected none")
            elif isinstance(v, str) and got != v:
                self.fail(f"{name}: {k}: {got!r}, expected {v!r}")
        if "date" not in resp.headers:
            self.fail(f"{name}: no Date")
        chunked = resp.headers.get("transfer-encoding") == "chunked" or (
            resp.h2 and "content-length" not in resp.headers)  # HTTP/2 ends with END_STREAM
        if resp.h2:
            for k in ("connection", "keep-alive", "transfer-encoding", "upgrade"):
                if k in resp.headers:
                    self.fail(f"{name}: {k} in an HTTP/2 answer")
            exp.conn = "any"
        if resp.req.method != "HEAD" and resp.status not in (204, 304) and not chunked and \
                resp.headers.get("content-length") != str(len(resp.body)):
            self.fail(f"{name}: Content-Length {resp.headers.get('content-length')} for "
                      f"{len(resp.body)} body bytes")
        if exp.body is not None and resp.body != exp.body:
            self.fail(f"{name}: body of {len(resp.body)} bytes differs from the expected {len(exp.body)}")
        if exp.parts is not None:
            self.check_parts(exp, resp)
        if exp.conn == "close" and not resp.closed:
            self.fail(f"{name}: connection kept open, expected close")
        if exp.conn == "keep" and resp.closed:
            self.fail(f"{name}: connection closed (Connection: {resp.headers.get('connection')})")
        if resp.trailing:
            self.fail(f"{name}: {len(resp.trailing)} bytes after the answer: {resp.trailing[:60]!r}")
        for c in exp.checks:
            for msg in c(resp, self):
                self.fail(f"{name}: {msg}")

    def check_parts(self, exp, resp):
        name = resp.req.name
        ctype = resp.headers.get("content-type", "")
        if not ctype.startswith("multipart/byteranges; boundary="):
            self.fail(f"{name}: Content-Type {ctype!r} for several ranges")
            return
        boundary = ctype.split("boundary=", 1)[1].encode()
        data = exp.data
        got = []
        for part in resp.body.split(b"--" + boundary)[1:]:
            if part.startswith(b"--"):
                break
            head, _, body = part.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Range: bytes (\d+)-(\d+)/(\d+)", head)
            if not m or not body.endswith(b"\r\n"):
                self.fail(f"{name}: malformed part {part[:80]!r}")
                return
            a, b = int(m.group(1)), int(m.group(2))
            if body[:-2] != data[a:b + 1] or int(m.group(3)) != len(data):
                self.fail(f"{name}: part {a}-{b} has the wrong bytes")
            got.append((a, b))
        if sorted(got) != sorted(exp.parts):
            self.fail(f"{name}: parts {got}, expected {exp.parts}")
        elif got != exp.parts:
            self.fail(f"{name}: parts in the order {got}, requested {exp.parts}")

    def finish(self):
        """Stop the server and check what it left behind."""
        if self.srv.proc.poll() is not None:
            self.fail(f"seekless died during the run (exit {self.srv.proc.returncode})")
        rc = self.srv.stop()
        if rc != 0:
            self.fail(f"SIGTERM: exit {rc}, expected 0")
        self.timing_text = self.srv.timing_text
        err = self.srv.proc.stderr.read().decode("utf-8", "replace")
        if err.strip():
            report = "sanitizer report" if re.search(
                r"Sanitizer|runtime error:|LeakSanitizer", err) else "output"
            self.fail(f"seekless stderr holds {report}:\n{err[:3000]}")
        allowed = [re.compile(p) for p in LOG_OK + self.model.log_ok]
        for line in self.srv.log_text.splitlines():
            if not any(p.search(line) for p in allowed):
                self.fail(f"unexpected error-log line: {line}")
        for f in FACTORS:
            if f.after:
                for msg in f.after(self.cfg[f.name], self):
                    self.fail(msg)


def describe(n, cfg):
    return f"#{n:2d} " + ", ".join(f"{k}={v}" for k, v in cfg.items())


CONFIGS = []


class Combo(unittest.TestCase):
    """One test per generated config (test_c01 ...), plus the coverage check."""

    def test_all_pairs_covered(self):
        _, missing = coverage_report(CONFIGS)
        self.assertEqual(missing, [])
        self.assertLessEqual(len(CONFIGS), 40)  # greedy all-pairs stays near the 7x3 minimum

    def run_config(self, n):
        run = Run(CONFIGS[n - 1])
        try:
            run.start()
            try:
                run.exercise()
            except Exception as e:  # noqa: BLE001 - still stop the server and read what it left
                run.fail(f"the run stopped: {e!r}")
            run.finish()
        finally:
            if run.srv and run.srv.proc and run.srv.proc.poll() is None:
                run.srv.stop()
            run.env.close()
        if run.failures:
            self.fail(describe(n, run.cfg) + "\n  " + "\n  ".join(run.failures))


def add_config_tests():
    CONFIGS[:] = configs()
    for n in range(1, len(CONFIGS) + 1):
        setattr(Combo, f"test_c{n:02d}", lambda self, n=n: self.run_config(n))


def print_plan():
    print(f"{len(CONFIGS)} configs over {len(FACTORS)} factors (seed {SEED}):")
    for n, cfg in enumerate(CONFIGS, 1):
        print("  " + describe(n, cfg))
    lines, missing = coverage_report(CONFIGS)
    total = len(all_pairs_needed([len(f.levels) for f in FACTORS]))
    print(f"pairs of levels covered: {total - len(missing)} of {total} (first config covering each):")
    print("\n".join(lines))
    if not ATIME_WORKS:
        print("reads do not update atime on this file system: the O_NOATIME check is left out")
    sys.stdout.flush()


def main():
    add_config_tests()
    print_plan()
    test_core.main()


if __name__ == "__main__":
    main()
