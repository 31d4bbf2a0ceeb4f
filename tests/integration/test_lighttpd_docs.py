#!/usr/bin/env python3
"""Every config snippet of lighttpd's own documentation is a case.

The snippets are the literal blocks (reStructuredText `::`) of the module pages Debian ships in
lighttpd-doc (/usr/share/doc/lighttpd/*.txt, lighttpd 1.4.69). Each one is put after a small base
config (document root, port, and in server.modules the modules seekless has plus the lighttpd
module the snippet's keys belong to) and given to `lighttpd -tt`. A snippet lighttpd accepts
without a warning is a case (shell lines, Python, grammar sketches and fragments are not: lighttpd
refuses them too); for every case `seekless -t` must say "Syntax OK", or refuse it with the
reason listed in REFUSED below, naming the key or module in its message. A refusal that is listed
but no longer happens fails too: the list is kept exact, as is README's table "lighttpd keys
seekless refuses" that it mirrors.

For the cases both accept, both servers are then started on the same config and files and asked
for the same URLs (the snippet's own URL paths and host names, and a few every config answers):
the same status, and the same Location for redirects, for each (lighttpd is the reference).

Absolute file-system paths in keys that name files or directories (document roots, logs, cache
directories, user files, alias targets, FastCGI bin-paths) are moved beneath a temporary
directory for both servers alike and made there (seekless checks at start-up that they exist;
lighttpd -tt does not look): the snippets were written for the doc writer's machine.
"""
import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import free_port, read_response  # noqa: E402
from sltest import accepting  # noqa: E402

DOCS = "/usr/share/doc/lighttpd"
LIGHTTPD = shutil.which("lighttpd") or "/usr/sbin/lighttpd"
WRAPPER = os.environ.get("SEEKLESS_WRAPPER", "").split()

# The modules both servers have, loaded by every case that does not set server.modules itself.
MODULES = ["mod_access", "mod_accesslog", "mod_alias", "mod_redirect", "mod_rewrite",
           "mod_setenv", "mod_expire", "mod_dirlisting", "mod_status", "mod_deflate",
           "mod_fastcgi", "mod_proxy", "mod_staticfile"]
# A snippet using these keys gets the lighttpd module they belong to (else lighttpd warns of an
# unknown key and it would not be a case at all, hiding what seekless lacks).
MODULE_OF_KEYS = {"cgi.": ["mod_cgi"], "ssi.": ["mod_ssi"], "userdir.": ["mod_userdir"],
                  "simple-vhost.": ["mod_simple_vhost"], "evhost.": ["mod_evhost"],
                  "rrdtool.": ["mod_rrdtool"], "extforward.": ["mod_extforward"],
                  "magnet.": ["mod_magnet"], "webdav.": ["mod_webdav"],
                  "auth.": ["mod_auth", "mod_authn_file"], "scgi.": ["mod_scgi"],
                  "ssl.": ["mod_openssl"]}
# Keys whose string values are file-system paths: d = directory, f = a file seekless creates
# (its directory must exist), e = a file that must exist.
PATH_KEYS = {"server.document-root": "d", "server.errorlog": "f", "accesslog.filename": "f",
             "server.pid-file": "f", "compress.cache-dir": "d", "deflate.cache-dir": "d",
             "server.upload-dirs": "d", "server.chroot": "d", "server.errorfile-prefix": "f",
             "auth.backend.htpasswd.userfile": "e", "auth.backend.htdigest.userfile": "e",
             "auth.backend.plain.userfile": "e", "ssl.pemfile": "e", "ssl.ca-file": "e",
             "ssl.privkey": "e"}

BY_DESIGN = "refused by design"
NO_CGI = ('"mod_cgi" is not a module of seekless: it runs no programs itself',
          BY_DESIGN + ": CGI scripts run behind fastcgi.server through fcgiwrap")
# (doc file, line of the snippet's `::`) -> (what seekless's message must contain, why).
# Each reason is also a row of README's "lighttpd keys seekless refuses".
REFUSED = {
    ("cgi.txt", 34): NO_CGI,
    ("cgi.txt", 43): NO_CGI,
    ("cgi.txt", 48): NO_CGI,
    ("compress.txt.gz", 71): ("bzip2", BY_DESIGN + ": no browser accepts bzip2"),
    ("configuration.txt.gz", 360): NO_CGI,
    ("fastcgi.txt.gz", 203): ('"mode" => "authorizer" is not supported',
                              BY_DESIGN + ": FastCGI applications run as responders"),
}
# Fewer cases than this means the extraction broke (or the package changed): a failure.
MIN_CASES = 45


def doc_text(name):
    path = os.path.join(DOCS, name)
    with (gzip.open(path, "rt") if name.endswith(".gz") else open(path)) as f:
        return f.read()


def snippets(text):
    """(line of the `::`, block) for every literal block: the indented lines after a line ending
    in `::` (not a `..` directive), up to the first line indented less."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::") or line.strip().startswith(".."):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        indent = lambda s: len(s) - len(s.lstrip())  # noqa: E731
        if j >= len(lines) or indent(lines[j]) <= indent(line):
            i += 1
            continue
        ind = indent(lines[j])
        block = []
        while j < len(lines) and (not lines[j].strip() or indent(lines[j]) >= ind):
            block.append(lines[j][ind:] if lines[j].strip() else "")
            j += 1
        out.append((i + 1, "\n".join(block).strip("\n")))
        i = j
    return out


def relocate(tmp, snip):
    """Move absolute paths of PATH_KEYS, alias.url targets and bin-paths beneath tmp/fs and make
    them there."""
    fs = os.path.join(tmp, "fs")

    def make(path, kind):
        q = fs + path
        if kind == "d":
            os.makedirs(q, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(q), exist_ok=True)
            if kind == "e" and not os.path.exists(q):
                open(q, "w").close()
            if kind == "x":
                with open(q, "w") as f:
                    f.write("#!/bin/sh\nexit 0\n")
                os.chmod(q, 0o755)
        return q

    def key_value(m):
        kind = PATH_KEYS[m.group(1)]
        return m.group(1) + re.sub(r'"(/[^"]*)"', lambda v: '"%s"' % make(v.group(1), kind),
                                   m.group(2))

    keys = "|".join(re.escape(k) for k in PATH_KEYS)
    snip = re.sub(r"(" + keys + r")(\s*[+:]?=\s*[^\n]*)", key_value, snip)
    if "alias.url" in snip:
        def target(m):
            p = m.group(2)
            is_dir = p.endswith("/") or "." not in os.path.basename(p)
            return m.group(1) + '"%s"' % make(p, "d" if is_dir else "e")
        snip = re.sub(r'(=>\s*)"(/[^"]*)"', target, snip)
    return re.sub(r'("bin-path"\s*=>\s*)"(/[^" ]*)',
                  lambda m: m.group(1) + '"' + make(m.group(2), "x"), snip)


def case_config(tmp, snip, port):
    body = relocate(tmp, snip)
    base = ""
    root = os.path.join(tmp, "root")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<p>index</p>\n")
    for key, value in (("server.document-root", f'"{root}"'), ("server.port", str(port)),
                       ("server.bind", '"127.0.0.1"')):
        if not re.search(r"^" + re.escape(key) + r"\s*=", snip, re.M):
            base += f"{key} = {value}\n"
    if "server.modules" not in snip:
        extra = [m for prefix, mods in MODULE_OF_KEYS.items()
                 if re.search(r"(^|[\s(])" + re.escape(prefix), snip) for m in mods]
        base += "server.modules = (%s)\n" % ", ".join(f'"{m}"' for m in MODULES + extra)
    return base + body + "\n"


def lighttpd_accepts(conf):
    p = subprocess.run([LIGHTTPD, "-tt", "-f", conf], capture_output=True, text=True, cwd=os.path.dirname(conf))
    out = p.stdout + p.stderr
    return p.returncode == 0 and "WARNING" not in out and "ERROR" not in out.upper()


def seekless_check(conf):
    p = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f", conf],
                       capture_output=True, text=True, cwd=os.path.dirname(conf))
    return p.returncode == 0 and "Syntax OK" in p.stdout, p.stdout + p.stderr


def listening(port, proc, secs):
    """Does proc answer on port within secs (False at once when it exits)?"""
    return accepting(port, secs, proc)


def answer(port, target, host):
    """Status and, for redirects, Location of GET target with this Host."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        st, h = read_response(s)[:2]
        loc = h.get("location", "").replace(f":{port}", ":PORT")
        return st, loc
    finally:
        s.close()


def requests_for(snip):
    """The URLs and hosts a snippet is about: its literal URL paths (in conditions and keys,
    never file-system paths) and the hosts its $HTTP["host"] == conditions name, with a few
    that every config answers."""
    targets = ["/", "/index.html", "/missing"]
    for m in re.finditer(r'"(/[A-Za-z0-9_.~/-]*)"', snip):
        start = snip.rfind("\n", 0, m.start()) + 1
        stmt = snip[start:m.start()]
        if any(k in stmt for k in PATH_KEYS) or "bin-path" in stmt or \
                ("alias.url" in snip and "=>" in stmt):
            continue  # a file-system path
        if m.group(1) not in targets:
            targets.append(m.group(1))
    hosts = ["www.example.org", "localhost"]
    for m in re.finditer(r'\$HTTP\["host"\]\s*==\s*"([^"]+)"', snip):
        if m.group(1) not in hosts:
            hosts.append(m.group(1))
    return [(t, h) for t in targets[:10] for h in hosts[:4]]


def all_cases():
    for name in sorted(os.listdir(DOCS)):
        if name.endswith(".txt") or name.endswith(".txt.gz"):
            for line, snip in snippets(doc_text(name)):
                yield name, line, snip


class DocSnippets(unittest.TestCase):
    def test_every_snippet_lighttpd_accepts(self):
        self.assertTrue(os.path.isdir(DOCS), "lighttpd-doc is not installed (scripts/install-deps)")
        cases = accepted = 0
        problems = []
        seen_refused = set()
        for name, line, snip in all_cases():
            tmp = tempfile.mkdtemp(prefix="sl_doc_")
            try:
                conf = os.path.join(tmp, "t.conf")
                with open(conf, "w") as f:
                    f.write(case_config(tmp, snip, free_port()))
                if not lighttpd_accepts(conf):
                    continue
                cases += 1
                ok, out = seekless_check(conf)
                want = REFUSED.get((name, line))
                if want:
                    seen_refused.add((name, line))
                    if ok:
                        problems.append(f"{name}:{line}: listed as refused, but seekless -t "
                                        f"accepts it now: take it off REFUSED (and README)")
                    elif want[0] not in out:
                        problems.append(f"{name}:{line}: refused without naming "
                                        f"{want[0]!r}:\n{out}")
                elif not ok:
                    problems.append(f"{name}:{line}: lighttpd accepts, seekless -t refuses:\n"
                                    f"{snip}\n--> {out}")
                else:
                    accepted += 1
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        for k in sorted(set(REFUSED) - seen_refused):
            problems.append(f"{k[0]}:{k[1]}: listed in REFUSED but not a case any more")
        print(f"lighttpd-doc: {cases} snippets lighttpd accepts; seekless accepts {accepted}, "
              f"refuses {len(seen_refused)} as listed", file=sys.stderr)
        self.assertGreaterEqual(cases, MIN_CASES, "the snippet extraction found too few cases")
        self.assertEqual(problems, [], "\n\n".join(problems))

    def test_both_serve_what_both_accept(self):
        """Start both servers on each snippet both accept (not those that spawn a FastCGI
        bin-path or need a back end) and compare the status of a few requests."""
        compared = 0
        problems = []
        for name, line, snip in all_cases():
            if (name, line) in REFUSED or "bin-path" in snip or "fastcgi.server" in snip or \
                    "proxy.server" in snip or "|" in snip.split("accesslog.filename")[-1][:5]:
                continue
            tmp = tempfile.mkdtemp(prefix="sl_doc_")
            procs = []
            try:
                lport, sport = free_port(), free_port()
                lconf, sconf = os.path.join(tmp, "l.conf"), os.path.join(tmp, "s.conf")
                with open(lconf, "w") as f:
                    f.write(case_config(tmp, snip, lport))
                if not lighttpd_accepts(lconf) or not seekless_check(lconf)[0]:
                    continue
                with open(sconf, "w") as f:
                    f.write(case_config(tmp, snip, sport))
                if re.search(r"^server\.port\s*=", snip, re.M):
                    continue  # the snippet fixes its own port: cannot run two servers on it
                lp = subprocess.Popen([LIGHTTPD, "-D", "-f", lconf], cwd=tmp,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                procs.append(lp)
                if not listening(lport, lp, 5):
                    continue  # lighttpd itself cannot run it here (e.g. a log pipe): no reference
                sp = subprocess.Popen([*WRAPPER, os.path.join(test_core.BUILD, "app", "seekless"),
                                       "-D", "-f", sconf], cwd=tmp,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                procs.append(sp)
                if not listening(sport, sp, 60 if WRAPPER else 5):
                    problems.append(f"{name}:{line}: lighttpd runs it, seekless did not start: "
                                    f"{sp.communicate(timeout=10)[1].decode()[-800:]}")
                    continue
                compared += 1
                for target, host in requests_for(snip):
                    a, b = answer(lport, target, host), answer(sport, target, host)
                    if os.environ.get("DOC_DEBUG"):
                        print(name, line, target, host, a, b, file=sys.stderr)
                    if a != b:
                        problems.append(f"{name}:{line}: GET {target} (Host {host}): lighttpd "
                                        f"{a}, seekless {b}\n{snip}")
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
                    if p.stderr:
                        p.stderr.close()
                shutil.rmtree(tmp, ignore_errors=True)
        print(f"lighttpd-doc: {compared} snippets served by both and compared", file=sys.stderr)
        self.assertGreaterEqual(compared, 15, "too few snippets could be compared")
        self.assertEqual(problems, [], "\n\n".join(problems))


if __name__ == "__main__":
    test_core.main()
