#!/usr/bin/env python3
"""fastcgi.server and proxy.server against lighttpd 1.4 itself: the corpus cases of proxy-core.

The cases are directories of examples/lighttpd/ in the corpus format (lighttpd.conf with @PORT@
and @DOCROOT@, files/, requests, optional check-only): fastcgi-php (Debian's php-cgi table,
spawned from bin-path by each server, and a prefix route), proxy-map-urlpath (mod_proxy with
proxy.header), debian-fastcgi-proxy (Debian's conf-available files unchanged, -t only) and
debian-lighttpd-conf (Debian's /etc/lighttpd/lighttpd.conf itself, named by the case's
conf-from file: unchanged but for its port and paths, HTTP/2, h2c and include_shell included). For
each, both `lighttpd -tt` and `seekless -t` accept the config, both servers run it at once on
their own ports over copies of the same files, and every request gets the same status, the
same values of the headers that matter and, for 2xx answers, the same body; requests a case
lists in `timed` (bandwidth: limited downloads) must take about as long on both. Afterwards no
php-cgi that seekless started is left running and seekless exited cleanly.
(The issue-18 corpus harness, test_lighttpd_compat.py, runs these directories too once merged.)
"""
import html.parser
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import free_port, read_response  # noqa: E402
from test_proxy import wait_port  # noqa: E402

if "--build" in sys.argv[:-1]:
    test_core.BUILD = sys.argv[sys.argv.index("--build") + 1]
test_core.BUILD = os.path.abspath(test_core.BUILD)

LIGHTTPD = shutil.which("lighttpd") or "/usr/sbin/lighttpd"
PHP_CGI = shutil.which("php-cgi") or "/usr/bin/php-cgi"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "examples", "lighttpd")
CASES = ("fastcgi-php", "proxy-map-urlpath", "debian-fastcgi-proxy", "alias", "redirect", "rewrite",
         "dirlisting", "setenv-expire", "conditions", "deflate", "errorpages", "extforward", "vhosts",
         "bandwidth", "userdir", "auth")
WRAPPER = os.environ.get("SEEKLESS_WRAPPER", "").split()
# Not Accept-Ranges: lighttpd 1.4 announces ranges on FastCGI answers too, seekless only where it
# serves them (RFC 9110 §14.3); the proxied static files below compare Content-Range.
HEADERS = ("location", "content-type", "cache-control", "content-range")



def system_conf(conf_from, tmp):
    """A case whose config is a system file (conf-from names it, e.g. Debian's
    /etc/lighttpd/lighttpd.conf): the file unchanged but for the lines of the keys below, which
    move its port, document root, error log and pid file to the test's (error logs made for
    www-data beforehand: lighttpd opens its log after dropping to the config's user)."""
    with open(conf_from) as f:
        path = f.read().strip()
    with open(path) as f:
        text = f.read()
    moved = {"server.port": "@PORT@", "server.document-root": '"@DOCROOT@"',
             "server.errorlog": f'"{tmp}/@PORT@-error.log"',
             "server.pid-file": f'"{tmp}/@PORT@.pid"'}
    out = []
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        out.append(f"{key} = {moved.pop(key)}" if key in moved else line)
    if moved:
        raise AssertionError(f"{path} no longer sets {sorted(moved)}")
    return "\n".join(out) + "\n"

class Listing(html.parser.HTMLParser):
    """What a directory listing lists, whatever page is around it: the title, each table row's
    cells (with the name's link), the stylesheet, the charset and the README/HEADER blocks."""

    def __init__(self):
        super().__init__()
        self.out = {"title": "", "rows": [], "pre": [], "css": None, "charset": None}
        self.where, self.row, self.cell = None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "title":
            self.where = "title"
        elif tag == "tr" and self.where == "tbody":
            self.row = []
        elif tag == "tbody":
            self.where = "tbody"
        elif tag == "td" and self.row is not None:
            self.cell = [a.get("class"), "", None]
        elif tag == "a" and self.cell is not None:
            self.cell[2] = a.get("href")
        elif tag == "pre":
            self.where = "pre"
            self.out["pre"].append([a.get("class"), ""])
        elif tag == "link" and a.get("rel") == "stylesheet":
            self.out["css"] = a.get("href")
        elif tag == "meta" and "charset" in a:
            self.out["charset"] = a["charset"]

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row.append(tuple(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.out["rows"].append(self.row)
            self.row = None
        elif tag in ("title", "tbody", "pre"):
            self.where = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data
        elif self.where == "title":
            self.out["title"] += data
        elif self.where == "pre":
            self.out["pre"][-1][1] += data


def listing_of(body):
    p = Listing()
    p.feed(body.decode("utf-8", "replace"))
    return p.out


def decoded(enc, body):
    """A body with its Content-Encoding undone (compare-decoded): deflate may be the zlib
    format (seekless, RFC 9110) or raw deflate (lighttpd)."""
    import gzip
    import zlib
    if enc in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if enc == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -15)
    if enc == "br":
        import brotli
        return brotli.decompress(body)
    if enc == "zstd":
        return subprocess.run(["zstd", "-dc"], input=body, capture_output=True, check=True).stdout
    return body


def requests_of(case, name="requests"):
    out = []
    with open(os.path.join(CORPUS, case, name)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                parts = [p.strip() for p in line.split("|")]
                method, target = parts[0].split(None, 1)
                out.append((method, target, [tuple(x.strip() for x in h.split(":", 1))
                                             for h in parts[1:]]))
    return out


def ask(port, method, target, hdrs):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        extra = "".join(f"{k}: {v}\r\n" for k, v in hdrs)
        body = "Content-Length: 0\r\n" if method == "POST" else ""
        # Host: localhost unless the request names its own (virtual hosting cases).
        host = "" if any(k.lower() == "host" for k, _ in hdrs) else "Host: localhost\r\n"
        s.sendall(f"{method} {target} HTTP/1.1\r\n{host}{extra}{body}"
                  "Connection: close\r\n\r\n".encode())
        status, h, b, _ = read_response(s, head=method == "HEAD")
        return status, {k.lower(): v for k, v in h.items()}, b


def wait_up(port, proc):
    try:
        wait_port(port, timeout=60 if WRAPPER else 10)
    except RuntimeError:
        proc.kill()
        raise AssertionError(f"exited {proc.wait()}: {proc.stderr.read().decode()}")


def php_children(pid):
    """Processes whose parent is pid (the php-cgi seekless spawned)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


class Corpus(unittest.TestCase):
    def run_case(self, case):  # noqa: C901 (one flow: files, configs, both servers, compare)
        tmp = tempfile.mkdtemp(prefix="sl_gw_")
        self.addCleanup(shutil.rmtree, tmp, True)
        os.chmod(tmp, 0o755)
        docroot = os.path.join(tmp, "root")
        files = os.path.join(CORPUS, case, "files")
        # Symlinks stay symlinks (several host names for one site in the vhosts case).
        shutil.copytree(files, docroot, symlinks=True) if os.path.isdir(files) else os.mkdir(docroot)
        from_system = os.path.join(CORPUS, case, "conf-from")
        if os.path.exists(from_system):
            text = system_conf(from_system, tmp)
        else:
            with open(os.path.join(CORPUS, case, "lighttpd.conf")) as f:
                text = f.read()
        runs = []
        for kind in ("lighttpd", "seekless"):
            port = free_port()
            conf = os.path.join(tmp, kind + ".conf")
            with open(conf, "w") as f:
                f.write(text.replace("@PORT@", str(port)).replace("@DOCROOT@", docroot))
            elog = os.path.join(tmp, f"{port}-error.log")
            if "@PORT@-error.log" in text:
                open(elog, "w").close()
                if os.geteuid() == 0:
                    shutil.chown(elog, "www-data", "www-data")
            binary = LIGHTTPD if kind == "lighttpd" else os.path.join(test_core.BUILD, "app", "seekless")
            r = subprocess.run([binary, "-tt" if kind == "lighttpd" else "-t", "-f", conf],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"{kind} refuses {case}: {r.stdout}{r.stderr}")
            runs.append((kind, port, conf, binary))
        if os.path.exists(os.path.join(CORPUS, case, "check-only")):
            return
        procs = []
        try:
            for kind, port, conf, binary in runs:
                argv = [binary, "-D", "-f", conf]
                if kind == "seekless":
                    argv = WRAPPER + argv
                p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                procs.append(p)
                wait_up(port, p)
            spawned = php_children(procs[1].pid)
            listings = os.path.exists(os.path.join(CORPUS, case, "compare-listings"))
            decode = os.path.exists(os.path.join(CORPUS, case, "compare-decoded"))
            # Error bodies too, where lighttpd sends a page of the config's (not its built-in one)
            errbodies = os.path.exists(os.path.join(CORPUS, case, "compare-error-bodies"))
            headers = HEADERS
            extra = os.path.join(CORPUS, case, "compare-headers")
            if os.path.exists(extra):  # fields this case is about, compared too
                with open(extra) as f:
                    headers += tuple(line.strip() for line in f if line.strip())
            # Requests that must take about so many seconds on both servers (bandwidth limits).
            timed = {}
            if os.path.exists(os.path.join(CORPUS, case, "timed")):
                for m, t, h in requests_of(case, "timed"):
                    t, secs = t.rsplit(None, 1)
                    timed[(m, t, tuple(h))] = float(secs)
            diffs = []
            for req in requests_of(case):
                t0 = time.monotonic()
                a = ask(runs[0][1], *req)
                t1 = time.monotonic()
                b = ask(runs[1][1], *req)
                t2 = time.monotonic()
                want = timed.get((req[0], req[1], tuple(req[2])))
                for kind, took in (("lighttpd", t1 - t0), ("seekless", t2 - t1)):
                    # lighttpd grants a second's worth at a time on its one-second clock: a
                    # request that starts just before a tick may finish at once (0.00 s seen
                    # for 96 KiB at 64 KiB/s), so only its upper bound is a fact to hold it to.
                    lo = 0 if kind == "lighttpd" else want * 0.5 if want is not None else 0
                    if want is not None and not (lo <= took <= max(want * 3, 1)):
                        diffs.append(f"{req[0]} {req[1]}: {kind} took {took:.2f}s, about {want}s expected")
                if decode:  # two encoders' bytes differ: compare what they encode
                    a = (a[0], a[1], decoded(a[1].get("content-encoding"), a[2]))
                    b = (b[0], b[1], decoded(b[1].get("content-encoding"), b[2]))
                what = f"{req[0]} {req[1]}"
                if a[0] != b[0]:
                    diffs.append(f"{what}: status lighttpd {a[0]}, seekless {b[0]}")
                for h in headers:
                    # Content-Type describes a body: a server that sends none (lighttpd's 301 to a
                    # directory) has none to describe.
                    if h == "content-type" and "0" in (a[1].get("content-length"),
                                                       b[1].get("content-length")):
                        continue
                    if a[1].get(h) != b[1].get(h):
                        diffs.append(f"{what}: {h}: lighttpd {a[1].get(h)!r}, seekless {b[1].get(h)!r}")
                if listings and b'<div class="list">' in a[2]:
                    # A listing: what it lists must agree, not the page around it.
                    la, lb = listing_of(a[2]), listing_of(b[2])
                    if la != lb:
                        diffs.append(f"{what}: listing lighttpd {la!r}, seekless {lb!r}")
                elif (200 <= a[0] < 300 or (errbodies and not a[2].startswith(b"<?xml"))) \
                        and a[2] != b[2]:
                    diffs.append(f"{what}: body lighttpd {a[2][:300]!r}, seekless {b[2][:300]!r}")
            self.assertEqual(diffs, [], "\n".join(diffs))
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                rc = p.wait(timeout=30)
                err = p.stderr.read().decode(errors="replace")
                p.stderr.close()
                if p is procs[-1]:
                    self.assertEqual(rc, 0, err)
                    self.assertNotIn("runtime error", err)
                    self.assertNotIn("ERROR", err)
        if case == "fastcgi-php":
            self.assertTrue(spawned, "seekless started no php-cgi")
            time.sleep(0.2)
            left = [pid for pid in spawned if os.path.exists(f"/proc/{pid}")
                    and "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]]
            self.assertEqual(left, [], "php-cgi left running after seekless stopped")

    def test_fastcgi_php(self):
        if not os.path.exists(PHP_CGI):
            self.fail("php-cgi is not installed (scripts/install-deps installs it)")
        self.run_case("fastcgi-php")

    def test_proxy_map_urlpath(self):
        self.run_case("proxy-map-urlpath")

    def test_debian_conf_available(self):
        self.run_case("debian-fastcgi-proxy")

    def test_debian_lighttpd_conf(self):
        # Debian's own /etc/lighttpd/lighttpd.conf (HTTP/2 and h2c on, include_shell, its
        # conf-enabled/) run by both servers, only its port and paths moved.
        self.run_case("debian-lighttpd-conf")

    def test_errorpages(self):
        self.run_case("errorpages")

    def test_extforward(self):
        self.run_case("extforward")

    def test_vhosts(self):
        self.run_case("vhosts")

    def test_userdir(self):
        self.run_case("userdir")

    def test_alias(self):
        self.run_case("alias")

    def test_redirect(self):
        self.run_case("redirect")

    def test_dirlisting(self):
        self.run_case("dirlisting")

    def test_conditions(self):
        self.run_case("conditions")

    def test_setenv_expire(self):
        if not os.path.exists(PHP_CGI):
            self.fail("php-cgi is not installed (scripts/install-deps installs it)")
        self.run_case("setenv-expire")

    def test_deflate(self):
        self.run_case("deflate")

    def test_bandwidth(self):
        self.run_case("bandwidth")

    def test_auth(self):
        if not os.path.exists(PHP_CGI):
            self.fail("php-cgi is not installed (scripts/install-deps installs it)")
        self.run_case("auth")

    def test_rewrite(self):
        if not os.path.exists(PHP_CGI):
            self.fail("php-cgi is not installed (scripts/install-deps installs it)")
        self.run_case("rewrite")


if __name__ == "__main__":
    test_core.main()
