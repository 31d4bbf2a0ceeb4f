#!/usr/bin/env python3
"""The man pages in man/ render without a warning, and cannot fall behind the code.

- Each page renders with groff -ww (every warning on) and nothing on stderr.
- seekless.conf(5) has an entry under KEYS (".TP"/".TQ" then ".B key") for every key in the key
  tables (the `.keys = SL_KEYS({"key", ...}, SL_KEY_AT("key", ...), ...)` of the module tables,
  or a `static const sl_key NAME[] = {...}` array, in server/, modules/ and proxy_core/, plus
  server.modules, which server/conf.c reads before the tables), and no entry for a key the
  tables do not have.
- Every option the binaries' --help prints is described under OPTIONS of their page.

usage: test_man.py --build BUILDDIR   (prints "N passed, M failed, K skipped")
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import unittest

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAN = os.path.join(SRC, "man")
BUILD = None
PAGES = ("seekless.8", "fcgi-stat-accel.8", "seekless.conf.5")


def roff_text(path):
    """The page's source with roff's escaped hyphen and quote as the characters they print."""
    with open(path, encoding="utf-8") as f:
        return f.read().replace("\\-", "-").replace("\\(dq", '"').replace("\\e", "\\")


def section(text, name):
    """The lines of section .SH NAME up to the next .SH."""
    m = re.search(r"^\.SH " + re.escape(name) + r"\n(.*?)(?=^\.SH |\Z)", text, re.M | re.S)
    if not m:
        raise AssertionError(f"no section .SH {name}")
    return m.group(1)


def table_keys():
    """Every key of every sl_key table in the sources, with the file it is in."""
    keys = {}
    files = []
    for d in ("server", "modules", "proxy_core"):
        files += sorted(glob.glob(os.path.join(SRC, d, "*.c")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        # A module's `.keys = SL_KEYS(...)` up to its next field or its end, or a table of its own.
        tables = (r"\.keys = SL_KEYS\((.*?)\n(?:    \.\w+ =|\};)"
                  r"|static const sl_key \w+\[\] = \{(.*?)\n\};")
        for m in re.finditer(tables, src, re.S):
            # {"name", ...} or SL_KEY_AT("name", ...) and its kin (module.h)
            for k in re.findall(r'^\s*(?:\{|SL_KEY_\w+\()"([^"]+)",', m.group(1) or m.group(2), re.M):
                keys[k] = os.path.relpath(path, SRC)
    with open(os.path.join(SRC, "server", "conf.c"), encoding="utf-8") as f:
        if '"server.modules"' in f.read():
            keys["server.modules"] = "server/conf.c"
    return keys


def entries(text):
    """Names of the entries under KEYS: a .TP or .TQ line followed by `.B name`."""
    return set(re.findall(r"^\.T[PQ]\n\.B (\S+)$", section(text, "KEYS"), re.M))


class ManPages(unittest.TestCase):
    def test_render_without_warnings(self):
        groff = shutil.which("groff")
        self.assertIsNotNone(groff, "groff is missing (Debian package groff-base)")
        for page in PAGES:
            with self.subTest(page=page):
                r = subprocess.run([groff, "-ww", "-z", "-man", "-Tutf8", os.path.join(MAN, page)],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stderr, "", f"groff warns about man/{page}")

    def test_every_key_in_seekless_conf_5(self):
        keys = table_keys()
        # A table the pattern stopped seeing would leave the comparison vacuous.
        self.assertGreater(len(keys), 50, f"only {len(keys)} keys found in the key tables")
        documented = entries(roff_text(os.path.join(MAN, "seekless.conf.5")))
        missing = sorted(f"{k} ({keys[k]})" for k in set(keys) - documented)
        extra = sorted(documented - set(keys))
        self.assertEqual(missing, [], "keys with no entry under KEYS in man/seekless.conf.5")
        self.assertEqual(extra, [], "entries in man/seekless.conf.5 that no key table has")

    def check_options(self, exe, page):
        r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        opts = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))
        self.assertGreater(len(opts), 3, r.stdout)
        described = section(roff_text(os.path.join(MAN, page)), "OPTIONS")
        for o in sorted(opts):
            with self.subTest(option=o):
                self.assertRegex(described, r"(?m)^\.B[IR]? .*(?<![\w-])" + re.escape(o) + r"(?![\w-])",
                                 f"{o} of {os.path.basename(exe)} --help is not under OPTIONS in man/{page}")

    def test_seekless_options(self):
        self.check_options(os.path.join(BUILD, "app", "seekless"), "seekless.8")

    def test_fcgi_stat_accel_options(self):
        self.check_options(os.path.join(BUILD, "fcgi_stat_accel", "fcgi-stat-accel"), "fcgi-stat-accel.8")


def main():
    global BUILD
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args, rest = ap.parse_known_args()
    BUILD = os.path.abspath(args.build)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ManPages)
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - failed - len(res.skipped)} passed, {failed} failed, {len(res.skipped)} skipped")
    sys.exit(1 if failed or res.skipped else 0)


if __name__ == "__main__":
    main()
