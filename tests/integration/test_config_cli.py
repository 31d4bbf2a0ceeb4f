#!/usr/bin/env python3
"""The command line of the real seekless binary: the config checker (-t) and -h/--help/--version.

`seekless -t` reports EVERY error of a config in one run, syntax and meaning, each as
"file:line: message" on stderr, exits 1, and prints "Syntax OK" only for a clean config. It also
checks what start-up would refuse (a user or group that does not exist, a document root the
server's user cannot enter, a log or pid file that cannot be created or written), but not what
only start-up can know (a port in use). Each test writes its config into a temp dir.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import free_port  # noqa: E402


def seekless(*args, cwd=None):
    return subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), *args],
                          capture_output=True, text=True, timeout=30, cwd=cwd)


class ConfigDir:
    """A temp dir with root/ (a document root) and the config files a test writes."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sl_cli_")
        os.mkdir(os.path.join(self.dir, "root"))

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def path(self, name):
        return os.path.join(self.dir, name)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class CheckConfig(unittest.TestCase):
    def setUp(self):
        self.d = ConfigDir()
        self.addCleanup(self.d.close)

    def check(self, text, name="c.conf"):
        return seekless("-t", "-f", self.d.write(name, text))

    def errors(self, r):
        """stderr's lines without the "seekless: " prefix."""
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Syntax OK", r.stdout)
        lines = r.stderr.splitlines()
        for line in lines:
            self.assertTrue(line.startswith("seekless: "), line)
        return [line[len("seekless: "):] for line in lines]

    def test_clean_config_says_syntax_ok(self):
        r = self.check('server.document-root = "root"\nserver.port = 8080\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_http_parseopts_as_debian_sets_them(self):
        # Debian's lighttpd.conf, verbatim: every switch set the way seekless reads requests.
        debian = ('server.http-parseopts = (\n'
                  '  "header-strict"           => "enable",# default\n'
                  '  "host-strict"             => "enable",# default\n'
                  '  "host-normalize"          => "enable",# default\n'
                  '  "url-normalize-unreserved"=> "enable",# recommended highly\n'
                  '  "url-normalize-required"  => "enable",# recommended\n'
                  '  "url-ctrls-reject"        => "enable",# recommended\n'
                  '  "url-path-2f-decode"      => "enable",# recommended highly (unless breaks app)\n'
                  ' #"url-path-2f-reject"      => "enable",\n'
                  '  "url-path-dotseg-remove"  => "enable",# recommended highly (unless breaks app)\n'
                  ' #"url-path-dotseg-reject"  => "enable",\n'
                  ' #"url-query-20-plus"       => "enable",# consistency in query string\n'
                  ')\n')
        r = self.check('server.document-root = "root"\nserver.port = 8080\n' + debian)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))
        # The other way round: refused, saying what seekless does instead; unknown switches and
        # values by name.
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.http-parseopts = ( "url-path-2f-reject" => "enable" )\n'
                       '$HTTP["url"] =~ "^/x" { }\n', "a.conf")
        self.assertEqual(self.errors(r), [
            f"{self.d.path('a.conf')}:3: server.http-parseopts \"url-path-2f-reject\" => \"enable\" "
            "is not supported: seekless always decodes %2F in the path (url-path-2f-decode) instead "
            "of refusing it"])
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.http-parseopts = ( "header-strict" => "disable" )\n', "b.conf")
        self.assertIn("seekless always refuses control characters", self.errors(r)[0])
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.http-parseopts = ( "url-sparkle" => "enable" )\n', "c.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('c.conf')}:3: server.http-parseopts: "
                                          "unknown option \"url-sparkle\""])
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.http-parseopts = ( "host-strict" => "maybe" )\n', "d.conf")
        self.assertIn('("host-strict" is not)', self.errors(r)[0])

    def test_alias_url_mistakes(self):
        os.mkdir(self.d.path("js"))
        head = 'server.document-root = "root"\nserver.port = 8080\nserver.modules = ( "mod_alias" )\n'
        r = self.check(head + 'alias.url = ( "/js" => "js", "/js/lib" => "js" )\n', "a.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('a.conf')}:4: alias.url \"/js/lib\" can "
                                          "never match: \"/js\" before it takes its URLs (list the "
                                          "longer prefix first)"])
        r = self.check(head + 'alias.url = ( "/x" => "nope" )\n', "b.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('b.conf')}:4: alias.url \"/x\" => "
                                          f"\"{self.d.path('nope')}\": No such file or directory"])
        r = self.check(head + 'alias.url = ( "x" => "js" )\n', "c.conf")
        self.assertIn("a URL prefix starts with '/'", self.errors(r)[0])
        # Without mod_alias in server.modules the key is refused, as lighttpd does.
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.modules = ( "mod_staticfile" )\nalias.url = ( "/js" => "js" )\n', "d.conf")
        self.assertIn("belongs to mod_alias, which server.modules does not load", self.errors(r)[0])
        r = self.check(head + 'alias.url = ( "/js/lib" => "js", "/js" => "js" )\n'
                       'static-file.disable-pathinfo = "enable"\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))
        r = self.check(head + 'static-file.disable-pathinfo = "disable"\n', "e.conf")
        self.assertIn("seekless never serves a file for a path below it", self.errors(r)[0])

    def test_url_redirect_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\nserver.modules = ( "mod_redirect" )\n'
        r = self.check(head + 'url.redirect = ( "^/(a" => "/b" )\n', "a.conf")
        self.assertIn(f"{self.d.path('a.conf')}:4: url.redirect \"^/(a\": missing closing parenthesis",
                      self.errors(r)[0])
        r = self.check(head + 'url.redirect = ( "^/(a)(b)" => "/$3" )\n', "b.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('b.conf')}:4: url.redirect \"^/(a)(b)\" => "
                                          "\"/$3\": $3 but the pattern has 2 group(s)"])
        # %N names a group of the =~ condition of the key's own block: accepted there...
        r = self.check(head + '$HTTP["host"] =~ "(.*)" { url.redirect = ( "^/(.*)" => "http://%1/$1" ) }\n',
                       "p.conf")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))
        # ...refused where that block has none (the top level, ==, an inner block, else)
        r = self.check(head + 'url.redirect = ( "^/(.*)" => "http://%1/$1" )\n', "q.conf")
        self.assertEqual(self.errors(r), [
            f"{self.d.path('q.conf')}:4: url.redirect \"^/(.*)\" => \"http://%1/$1\": %1 names a group "
            "of the =~ condition of the block this key is set in, and that block has no =~ condition"])
        r = self.check(head + '$HTTP["host"] =~ "(.*)" {\n  $HTTP["url"] =^ "/x" {\n'
                       '    url.redirect = ( "^/(.*)" => "/%1" )\n  }\n}\n', "r.conf")
        self.assertIn(f"{self.d.path('r.conf')}:6: url.redirect", self.errors(r)[0])
        self.assertIn("has no =~ condition", self.errors(r)[0])
        r = self.check(head + '$HTTP["host"] =~ "^(a)\\.(b)$" { url.redirect = ( "^/" => "/%3" ) }\n',
                       "s.conf")
        self.assertIn("%3 but the block's condition has 2 group(s)", self.errors(r)[0])
        r = self.check(head + 'url.redirect-code = 404\n', "c.conf")
        self.assertIn("url.redirect-code must be 301, 302, 303, 307 or 308, not 404", self.errors(r)[0])
        r = self.check(head + 'url.redirect = ( "^/x$" => "/y" )\nurl.redirect-code = 308\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_condition_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        c = self.d.path("k.conf")
        r = self.check(head +
                       '$HTTP["remoteip"] == "10.0.0.0/33" { }\n'         # 3: bits out of range
                       '$HTTP["remote-ip"] != "10.0.0.300" { }\n'         # 4: not an address
                       '$HTTP["remoteip"] == "::1/129" { }\n'             # 5: IPv6 bits
                       '$HTTP["remotip"] == "10.0.0.1" { }\n'             # 6: unknown field
                       '$REQUEST_HEADER["X Y"] == "1" { }\n'              # 7: not a field name
                       '$SERVER["socket"] =^ ":80" { }\n'                 # 8: socket: == and != only
                       '$HTTP["url"] =* "/x" { }\n'                       # 9: no such operator
                       '$HTTP["useragent"] =~ "(" { }\n', "k.conf")      # 10: bad regex
        errs = self.errors(r)
        bad_net = ': not an IP address or network (want "ip" or "ip/bits", bits at most 32 for IPv4 and 128 for IPv6)'
        want = [
            f'{c}:3: $HTTP["remoteip"] == "10.0.0.0/33"' + bad_net,
            f'{c}:4: $HTTP["remoteip"] != "10.0.0.300"' + bad_net,
            f'{c}:5: $HTTP["remoteip"] == "::1/129"' + bad_net,
            f'{c}:6: unsupported condition $HTTP["remotip"] (known: url, host, querystring, remoteip,',
            f'{c}:7: $REQUEST_HEADER["X Y"]: not a header field name',
            f'{c}:8: $SERVER["socket"] only supports == and !=',
            f"{c}:9: expected '==', '!=', '=~', '!~', '=^' or '=$' in condition, got '='",
            f'{c}:10: bad regex "(": missing closing parenthesis',
        ]
        self.assertEqual(len(errs), len(want), "\n".join(errs))
        for got, w in zip(errs, want):
            self.assertTrue(got.startswith(w), f"{got!r} does not start with {w!r}")
        r = self.check(head +
                       '$HTTP["remoteip"] == "127.0.0.0/8" { }\n'
                       '$HTTP["remote-ip"] != "[::1]/128" { }\n'
                       '$HTTP["remoteip"] =~ "^10\\." { }\n'
                       '$HTTP["scheme"] == "http" { }\n'
                       '$HTTP["request-method"] =^ "P" { }\n'
                       '$HTTP["useragent"] =$ "bot" { }\n'
                       '$HTTP["referer"] != "" { }\n'
                       '$HTTP["cookie"] =~ "id=" { }\n'
                       '$HTTP["language"] =^ "de" { }\n'
                       '$REQUEST_HEADER["X-Token"] == "1" { }\n', "ok.conf")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_url_rewrite_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\nserver.modules = ( "mod_rewrite" )\n'
        r = self.check(head + 'url.rewrite-once = ( "^/(a)" => "/b/${2}" )\n', "a.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('a.conf')}:4: url.rewrite-once \"^/(a)\" => "
                                          "\"/b/${2}\": ${2} but the pattern has 1 group(s)"])
        r = self.check(head + 'url.rewrite-if-not-file = ( "^/(.*)" => "/i.php?h=${url.hostname}" )\n',
                       "b.conf")
        self.assertIn("url.rewrite-if-not-file \"^/(.*)\" => \"/i.php?h=${url.hostname}\": unknown "
                      "substitution \"${url.hostname}\"", self.errors(r)[0])
        r = self.check(head + 'url.rewrite-repeat = "/x"\n', "c.conf")
        self.assertIn("url.rewrite-repeat must be an array of \"regex\" => \"url\" pairs", self.errors(r)[0])
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.modules = ( "mod_staticfile" )\nurl.rewrite = ( "^/a" => "/b" )\n', "d.conf")
        self.assertIn("'url.rewrite' belongs to mod_rewrite, which server.modules does not load",
                      self.errors(r)[0])
        r = self.check(head + 'url.rewrite-once = ( "^/a" => "/b" )\nurl.rewrite-final = ( "^/c" => "" )\n'
                       'url.rewrite = ( "^/d" => "/e${qsa}" )\nurl.rewrite-repeat = ( "^/f" => "/g" )\n'
                       '$HTTP["url"] =~ "^/x" { url.rewrite-if-not-file = ( "^/x/(.*)" => "/i.php/${esc:1}" ) }\n'
                       'url.rewrite-repeat-if-not-file = ( "^/y" => "/z" )\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_dir_listing_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        r = self.check(head + 'dir-listing.activate = "enable"\ndir-listing.exclude = ( "^(" )\n', "a.conf")
        self.assertIn(f"{self.d.path('a.conf')}:4: dir-listing.exclude \"^(\": missing closing parenthesis",
                      self.errors(r)[0])
        r = self.check(head + 'dir-listing.cache = ( "path" => "/var/cache/x" )\n', "b.conf")
        self.assertIn("dir-listing.cache is not implemented", self.errors(r)[0])
        r = self.check(head + 'dir-listing.show-readme = ( "x" )\n', "c.conf")
        self.assertIn("dir-listing.show-readme must be \"enable\", \"disable\" or a file name",
                      self.errors(r)[0])
        # lighttpd always loads mod_dirlisting: its keys need no server.modules entry.
        r = self.check(head + 'server.modules = ( "mod_staticfile" )\nserver.dir-listing = "enable"\n'
                       'dir-listing.hide-dotfiles = "disable"\ndir-listing.show-readme = "enable"\n'
                       'dir-listing.show-header = "HEAD.txt"\ndir-listing.encoding = "utf-8"\n'
                       'dir-listing.external-css = "/s.css"\ndir-listing.external-js = "/s.js"\n'
                       'dir-listing.set-footer = "x"\ndir-listing.auto-layout = "disable"\n'
                       'dir-listing.encode-readme = "disable"\ndir-listing.encode-header = "enable"\n'
                       'dir-listing.hide-readme-file = "enable"\ndir-listing.hide-header-file = "enable"\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_setenv_expire_tag_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        r = self.check(head + 'setenv.add-response-header = ( "Bad Name" => "x" )\n', "a.conf")
        self.assertIn(f"{self.d.path('a.conf')}:3: setenv.add-response-header: \"Bad Name\" is not a "
                      "header field name", self.errors(r)[0])
        r = self.check(head + 'setenv.set-request-header = ( "X-A" => "a\nb" )\n', "b.conf")
        self.assertIn("setenv.set-request-header: the value of \"X-A\" has a line break", self.errors(r)[0])
        r = self.check(head + 'setenv.add-environment = ( "A=B" => "x" )\n', "c.conf")
        self.assertIn("setenv.add-environment: \"A=B\" is not a variable name", self.errors(r)[0])
        r = self.check(head + 'expire.url = ( "/a/" => "later plus 1 days" )\n', "d.conf")
        self.assertIn("expire.url \"/a/\" => \"later plus 1 days\": must start with access, now or "
                      "modification", self.errors(r)[0])
        r = self.check(head + 'expire.mimetypes = ( "" => "access plus 1 fortnights" )\n', "e.conf")
        self.assertIn("unknown unit \"fortnights\"", self.errors(r)[0])
        r = self.check(head + 'expire.url = ( "/a/" => "access plus days" )\n', "f.conf")
        self.assertIn("wants <number> <unit> at \"days\"", self.errors(r)[0])
        r = self.check(head + 'server.tag = "a\r\nX-Evil: 1"\n', "g.conf")
        self.assertIn("server.tag must not contain a line break", self.errors(r)[0])
        r = self.check(head + 'server.modules = ( "mod_setenv", "mod_expire" )\nserver.tag = "x"\n'
                       'setenv.add-response-header = ( "X-A" => "1" )\nsetenv.set-response-header = ( "X-B" => "" )\n'
                       'setenv.add-request-header = ( "X-C" => "1" )\nsetenv.set-environment = ( "E" => "1" )\n'
                       'expire.url = ( "/a/" => "access plus 1 years 2 months 3 weeks 4 days 5 hours 6 minutes 7 seconds" )\n'
                       'expire.mimetypes = ( "image/" => "modification 1 day" )\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_error_page_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        r = self.check(head + 'server.errorfile-prefix = "nodir/e-"\n', "a.conf")
        self.assertIn(f"{self.d.path('a.conf')}:3: server.errorfile-prefix: "
                      f"{self.d.path('nodir')} is not a directory", self.errors(r)[0])
        r = self.check(head + 'server.errorfile-prefix = "root/e-"\n', "b.conf")
        self.assertIn(f"b.conf:3: server.errorfile-prefix: no file {self.d.path('root/e-')}NNN.html "
                      "exists", self.errors(r)[0])
        r = self.check(head + '$HTTP["url"] =^ "/a/" {\n  server.error-handler-404 = "err.php"\n}\n',
                       "c.conf")
        self.assertIn('c.conf:4: server.error-handler-404 must be a URL path starting with "/" '
                      '(got "err.php")', self.errors(r)[0])
        r = self.check(head + 'server.error-handler = "/a b"\n', "d.conf")
        self.assertIn("d.conf:3: server.error-handler must be a URL path", self.errors(r)[0])
        self.d.write("root/e-404.html", "x")
        r = self.check(head + 'server.errorfile-prefix = "root/e-"\nserver.error-handler = "/e.php"\n'
                       'server.error-handler-404 = "/404.php"\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_server_name_max_fds_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        r = self.check(head + 'server.name = "a b"\n', "a.conf")
        self.assertIn('a.conf:3: server.name "a b" is not a host name', self.errors(r)[0])
        r = self.check(head + 'server.max-fds = 10\n', "b.conf")
        self.assertIn("b.conf:3: server.max-fds 10: must be from 64 to 1073741824", self.errors(r)[0])
        r = self.check(head + '$HTTP["url"] =^ "/a/" {\n  server.max-fds = 1000\n}\n', "c.conf")
        self.assertIn("c.conf:4: 'server.max-fds' can only be set at the top level", self.errors(r)[0])
        r = self.check(head + 'server.name = "www.example.org"\nserver.max-fds = 256\n'
                       '$HTTP["host"] == "x" { server.name = "x.example.org" }\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_evasive_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        r = self.check(head + 'evasive.max-conns-per-ip = -1\n', "a.conf")
        self.assertIn("a.conf:3: 'evasive.max-conns-per-ip' must not be negative", self.errors(r)[0])
        r = self.check(head + 'evasive.location = "/a\nb"\n', "b.conf")
        self.assertIn("b.conf:3: evasive.location must not contain a line break", self.errors(r)[0])
        r = self.check(head + 'evasive.silent = "maybe"\n', "c.conf")
        self.assertIn("c.conf:3: 'evasive.silent'", self.errors(r)[0])
        # A key of a module not loaded names the module to add, as for every module.
        r = self.check(head + 'server.modules = ( "mod_staticfile" )\nevasive.max-conns-per-ip = 5\n',
                       "d.conf")
        self.assertIn("mod_evasive", self.errors(r)[0])
        r = self.check(head + 'server.modules = ( "mod_evasive" )\nevasive.max-conns-per-ip = 5\n'
                       'evasive.silent = "enable"\nevasive.location = "https://example.org/busy"\n'
                       '$HTTP["remoteip"] == "10.0.0.0/8" { evasive.max-conns-per-ip = 0 }\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_bandwidth_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        for key in ("server.kbytes-per-second", "connection.kbytes-per-second"):
            r = self.check(head + f'{key} = -1\n', "a.conf")
            self.assertIn(f"a.conf:3: '{key}' must not be negative", self.errors(r)[0])
            r = self.check(head + f'{key} = 70000\n', "b.conf")
            self.assertIn(f"b.conf:3: '{key}' 70000 is out of range (0..65535", self.errors(r)[0])
            r = self.check(head + f'$HTTP["url"] =~ "^/dl/" {{\n  {key} = "fast"\n}}\n', "c.conf")
            self.assertIn(f"c.conf:4: '{key}' must be an integer, not string", self.errors(r)[0])
        # lighttpd's core keys: no server.modules entry loads them, every block may set them.
        r = self.check(head + 'server.modules = ( "mod_staticfile" )\n'
                       'server.kbytes-per-second = 1024\nconnection.kbytes-per-second = 64\n'
                       '$SERVER["socket"] == ":8081" { server.kbytes-per-second = 0 }\n'
                       '$HTTP["host"] == "x" { server.kbytes-per-second = 128 }\n'
                       '$HTTP["url"] =~ "^/free/" { connection.kbytes-per-second = 0 }\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_tls_mistakes(self):
        head = 'server.document-root = "root"\nserver.port = 8080\n'
        d = self.d.dir
        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "a.key", "-out", "a.crt", "-days", "2", "-subj", "/CN=a")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "b.key", "-out", "b.crt", "-days", "2", "-subj", "/CN=b")
        sock = '$SERVER["socket"] == ":8443" {\n  ssl.engine = "enable"\n'
        # A pemfile that is not there: its path and why, at its line.
        r = self.check(head + sock + '  ssl.pemfile = "nope.pem"\n}\n', "a.conf")
        self.assertIn(f"a.conf:5: ssl.pemfile {d}/nope.pem: No such file or directory",
                      self.errors(r)[0])
        # A key that belongs to another certificate.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "b.key"\n}\n',
                       "b.conf")
        self.assertIn(f"ssl.privkey {d}/b.key does not match the certificate in ssl.pemfile "
                      f"{d}/a.crt", self.errors(r)[0])
        # A certificate without its key anywhere.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n}\n', "c.conf")
        self.assertIn("holds no private key", self.errors(r)[0])
        # ssl.engine without a certificate.
        r = self.check(head + sock + '}\n', "d.conf")
        self.assertIn('ssl.engine is enabled for :8443 but no ssl.pemfile is set',
                      self.errors(r)[0])
        # An OpenSSL command that does not exist, and a value it does not take.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n'
                       '  ssl.openssl.ssl-conf-cmd = ( "MinProtocl" => "TLSv1.3" )\n}\n', "e.conf")
        self.assertIn('e.conf:7: ssl.openssl.ssl-conf-cmd: unknown command "MinProtocl"',
                      self.errors(r)[0])
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n'
                       '  ssl.openssl.ssl-conf-cmd = ( "MinProtocol" => "TLSv9" )\n}\n', "f.conf")
        self.assertIn('"MinProtocol" => "TLSv9"', self.errors(r)[0])
        # lighttpd keys seekless does not implement are refused by name, never ignored.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n'
                       '  ssl.cipher-list = "HIGH"\n  ssl.stek-file = "stek"\n}\n',
                       "g.conf")
        errs = self.errors(r)
        self.assertIn("g.conf:7: ssl.cipher-list is not supported by seekless: use "
                      "ssl.openssl.ssl-conf-cmd", errs[0])
        self.assertIn("g.conf:8: ssl.stek-file is not supported by seekless", errs[1])
        # Protocol settings belong to a listener, not to a host.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n}\n'
                       '$HTTP["host"] == "b" { ssl.engine = "enable" }\n', "h.conf")
        self.assertIn("h.conf:8: ssl.engine belongs to a listener", self.errors(r)[0])
        # A stapling file that is no OCSP response.
        r = self.check(head + sock + '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n'
                       '  ssl.stapling-file = "a.crt"\n}\n', "i.conf")
        self.assertIn("not a DER OCSP response", self.errors(r)[0])
        # And all of it right, with SNI, mod_openssl listed as lighttpd wants it.
        r = self.check(head + 'server.modules = ( "mod_openssl", "mod_staticfile" )\n' + sock +
                       '  ssl.pemfile = "a.crt"\n  ssl.privkey = "a.key"\n  ssl.ca-file = "b.crt"\n'
                       '  ssl.openssl.ssl-conf-cmd = ( "MinProtocol" => "TLSv1.3", '
                       '"Options" => "-SessionTicket" )\n}\n'
                       '$HTTP["host"] == "b" { ssl.pemfile = "b.crt"\n ssl.privkey = "b.key" }\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_auth_mistakes(self):
        head = ('server.document-root = "root"\nserver.port = 8080\n'
                'server.modules = ( "mod_auth" )\n')
        req = ('auth.require = ( "/a/" => ( "method" => "basic", "realm" => "R", '
               '"require" => "valid-user" ) )\n')
        cases = [
            ('auth.backend = "ldap"\n', 'auth.backend "ldap" is not implemented in seekless'),
            ('auth.backend = "pam"\n', 'auth.backend "pam" is not implemented in seekless'),
            ('auth.backend = "htpassword"\n', 'auth.backend "htpassword" is not a backend'),
            ('auth.backend.htpasswd.userfile = "missing"\n',
             'auth.backend.htpasswd.userfile "' + self.d.path("missing") + '": No such file'),
            ('auth.cache = ( "max-age" => "600" )\n', "auth.cache is not implemented in seekless"),
            ('auth.extern-authn = "enable"\n', "auth.extern-authn is not implemented in seekless"),
            (req.replace('"method" => "basic", ', ''), 'auth.require "/a/": "method" is missing'),
            (req.replace('"basic"', '"extern"'), '"method" => "extern" is not implemented'),
            (req.replace('"basic"', '"ntlm"'), 'unknown method "ntlm"'),
            (req.replace('"realm" => "R", ', ''), '"realm" is missing'),
            (req.replace('"valid-user"', '""'), '"require" is missing'),
            (req.replace('"valid-user"', '"group=admins"'), "group= and host= are not implemented"),
            (req.replace('"valid-user"', '"user=a|valid-user"'), "valid-user can not be combined"),
            (req.replace('"valid-user"', '"users=a"'), '"users=a" is not "valid-user" or "user=name"'),
            (req.replace(' ) )', ', "algorithm" => "SHA-512-256" ) )'), 'algorithm "SHA-512-256"'),
            (req.replace(' ) )', ', "userhash" => "enable" ) )'), '"userhash" is not implemented'),
            (req.replace(' ) )', ', "colour" => "red" ) )'), 'unknown option "colour"'),
            ('auth.require = ( "/a/" => "basic" )\n', 'auth.require "/a/": each entry must be'),
            ('auth.debug = "loud"\n', "'auth.debug' must be"),
        ]
        for i, (text, want) in enumerate(cases):
            with self.subTest(text=text):
                r = self.check(head + text, f"m{i}.conf")
                err = self.errors(r)[0]
                self.assertIn(f"m{i}.conf:4: ", err)
                self.assertIn(want, err)
        # A key of mod_auth without it loaded names the module to add.
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.modules = ( "mod_staticfile" )\n' + req, "n.conf")
        self.assertIn("mod_auth", self.errors(r)[0])
        # Every key, in a block too, and mod_authn_file loading the same module.
        self.d.write("htpasswd", "alice:{SHA}qxNml/j2V32C481Qd+/9XSOxmfo=\n")
        self.d.write("htdigest", "")
        r = self.check('server.document-root = "root"\nserver.port = 8080\n'
                       'server.modules = ( "mod_authn_file", "mod_auth" )\n'
                       'auth.backend = "htpasswd"\nauth.backend.htpasswd.userfile = "htpasswd"\n'
                       'auth.backend.htdigest.userfile = "htdigest"\nauth.debug = 1\n' + req +
                       '$HTTP["url"] =^ "/d/" {\n  auth.backend = "htdigest"\n'
                       '  auth.require = ( "/d/" => ( "method" => "digest", "realm" => "D", '
                       '"require" => "user=alice|user=bob", "algorithm" => "SHA-256|MD5", '
                       '"nonce_secret" => "x" ) )\n}\n')
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "Syntax OK\n", ""))

    def test_every_error_in_one_run(self):
        c = self.d.path("c.conf")
        r = self.check('server.document-root = "root"\n'
                       'server.port = 80x\n'                      # 2: syntax (lexer)
                       'server.bogus = 1\n'                       # 3: unknown key
                       'server.max-connections = "many"\n'        # 4: wrong type
                       '$HTTP["url"] =~ "^/(" {\n'                # 5: bad regex
                       '  url.access-deny = ( ".inc" ".x" )\n'    # 6: syntax inside the block
                       '  server.port = 81\n'                     # 7: only at the top level
                       '}\n'
                       'server.event-handler = "kqueue"\n'        # 9: bad value
                       'index-file.names = ( "index.html",\n'     # 10: array left open
                       'static-file.etags = "perhaps"\n'          # 11: bad boolean
                       '$HTTP["user-agnet"] == "x" { a = 1 }\n')  # 12: unsupported condition
        errs = self.errors(r)
        want = [
            f"{c}:2: invalid integer '80x'",
            f"{c}:5: bad regex \"^/(\"",
            f"{c}:6: expected ',' or ')' in array",
            f"{c}:11: unterminated array (opened on line 10)",
            f"{c}:12: unsupported condition $HTTP[\"user-agnet\"] (known: url, host, querystring, "
            "remoteip, scheme, request-method, useragent, referer, cookie, language; any header "
            "with $REQUEST_HEADER[\"Name\"])",
            # then what the parsed statements mean, in file order
            f"{c}:3: unknown config key 'server.bogus'",
            f"{c}:4: 'server.max-connections' must be an integer, not string",
            f"{c}:7: 'server.port' can only be set at the top level",
            f"{c}:9: server.event-handler \"kqueue\" is not supported",
            f"{c}:11: 'static-file.etags' must be \"enable\" or \"disable\"",
            f"{c}:12: unknown config key 'a'",
        ]
        self.assertEqual(len(errs), len(want), "\n".join(errs))
        for got, w in zip(errs, want):
            self.assertTrue(got.startswith(w), f"{got!r} does not start with {w!r}")

    def test_errors_in_included_files_name_them(self):
        inc = self.d.write("inc.conf", 'a.b = 1\nserver.port = "x"\n')
        r = self.check('server.document-root = "root"\ninclude "inc.conf"\n'
                       'include "missing.conf"\nserver.nope = 2\n')
        c = self.d.path("c.conf")
        errs = self.errors(r)
        self.assertEqual(errs[0], f'{c}:3: cannot include "{self.d.path("missing.conf")}": '
                                  'No such file or directory')
        self.assertIn(f"{inc}:1: unknown config key 'a.b'", errs)
        self.assertIn(f"{inc}:2: 'server.port' must be an integer, not string", errs)
        self.assertIn(f"{c}:4: unknown config key 'server.nope'", errs)
        self.assertEqual(len(errs), 4, errs)

    def test_missing_config_file_is_named_by_its_path(self):
        missing = self.d.path("nope.conf")
        r = seekless("-t", "-f", missing)
        self.assertEqual(self.errors(r),
                         [f"{missing}: cannot read config file: No such file or directory"])
        r = seekless("-t", "-f", self.d.dir)
        self.assertEqual(self.errors(r), [f"{self.d.dir}: cannot read config file: Is a directory"])

    def test_missing_document_root_is_one_error_with_its_line(self):
        # Set, but to a directory that does not exist: that line's error, and no second one
        # claiming the key is not set at all (no line to point at, and not true).
        path = self.d.write("c.conf", 'server.port = 8080\nserver.document-root = "no-such-dir"\n')
        r = seekless("-t", "-f", path)
        errs = self.errors(r)
        self.assertEqual(len(errs), 1, errs)
        self.assertTrue(errs[0].startswith(f"{path}:2: server.document-root "), errs)
        self.assertIn("No such file or directory", errs[0])
        # Not set at all: said so, naming the file.
        r = self.check("server.port = 8080\n", name="unset.conf")
        self.assertEqual(self.errors(r), [f"{self.d.path('unset.conf')}: server.document-root is not set"])

    def test_what_start_up_would_refuse(self):
        # As root, what the server opens after dropping privileges (the document root) is judged
        # as server.username ("nobody"), the logs (opened before the drop) as root; otherwise
        # everything as the user running -t, shut out by permissions.
        root = os.geteuid() == 0
        os.chmod(self.d.dir, 0o755)
        closed = self.d.path("closed")
        os.mkdir(closed, 0o700 if root else 0o600)
        ro = self.d.path("ro")
        os.mkdir(ro, 0o755 if root else 0o555)
        user = 'server.username = "nobody"\n' if root else ""
        by = ' by user "nobody"' if root else ""
        r = self.check('server.document-root = "closed"\n'
                       'server.errorlog = "nodir/error.log"\n'
                       'accesslog.filename = "ro/access.log"\n'
                       'server.groupname = "sl-no-such-group"\n'
                       + user)
        c = self.d.path("c.conf")
        errs = self.errors(r)
        self.assertIn(f'{c}:2: server.errorlog "{self.d.path("nodir/error.log")}": cannot be '
                      f'created in {self.d.path("nodir")}: No such file or directory', errs)
        self.assertIn(f'{c}:4: server.groupname "sl-no-such-group": no such group', errs)
        self.assertEqual(len(errs), 2, errs)  # the server's user is not known: no more to judge
        r = self.check('server.document-root = "closed"\n'
                       'server.errorlog = "nodir/error.log"\n'
                       'accesslog.filename = "ro/access.log"\n'
                       'server.pid-file = "root"\n' + user)
        errs = self.errors(r)
        self.assertEqual(errs, [
            f'{c}:1: server.document-root "{closed}": cannot be entered{by}: Permission denied',
            f'{c}:2: server.errorlog "{self.d.path("nodir/error.log")}": cannot be created in '
            f'{self.d.path("nodir")}: No such file or directory',
        ] + ([] if root else [
            f'{c}:3: accesslog.filename "{ro}/access.log": cannot be created in {ro}: '
            'Permission denied']) + [
            f'{c}:4: server.pid-file "{self.d.path("root")}": cannot be written: Is a directory',
        ])
        r = self.check('server.document-root = "root"\nserver.username = "sl-no-such-user"\n')
        self.assertEqual(self.errors(r), [f'{c}:2: server.username "sl-no-such-user": no such user'])

    def test_checking_creates_nothing(self):
        conf = self.d.write("c.conf", 'server.document-root = "root"\nserver.errorlog = "e.log"\n'
                                      'accesslog.filename = "a.log"\nserver.pid-file = "p.pid"\n'
                                      'debug.log-timing = "enable"\ndebug.timing-file = "t.log"\n')
        before = sorted(os.listdir(self.d.dir))
        r = seekless("-t", "-f", conf)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(os.listdir(self.d.dir)), before)

    def test_port_in_use_is_start_ups_business(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        try:
            conf = self.d.write("c.conf", f'server.document-root = "root"\nserver.bind = "127.0.0.1"\n'
                                          f'server.port = {port}\n')
            r = seekless("-t", "-f", conf)
            self.assertEqual((r.returncode, r.stdout), (0, "Syntax OK\n"))
            r = seekless("-D", "-f", conf)
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"cannot listen on 127.0.0.1:{port}", r.stderr)
        finally:
            s.close()

    def test_start_up_reports_every_error_too(self):
        conf = self.d.write("c.conf", f'server.document-root = "root"\nserver.port = {free_port()}\n'
                                      'server.bogus = 1\nserver.bogus2 = 2\n')
        r = seekless("-D", "-f", conf)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.splitlines(), [
            f"seekless: {conf}:3: unknown config key 'server.bogus'",
            f"seekless: {conf}:4: unknown config key 'server.bogus2'",
        ])


class Options(unittest.TestCase):
    def test_help_goes_to_stdout_and_exits_0(self):
        for opt in ("-h", "--help"):
            r = seekless(opt)
            self.assertEqual((r.returncode, r.stderr), (0, ""), opt)
            self.assertTrue(r.stdout.startswith("usage: seekless -f FILE"), r.stdout)
            self.assertIn("--help", r.stdout)

    def test_version_long_and_short(self):
        v = seekless("-v")
        self.assertEqual(v.returncode, 0)
        self.assertRegex(v.stdout, r"^seekless/\d+\.\d+\.\d+\n$")
        r = seekless("--version")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, v.stdout, ""))

    def test_bad_option_is_an_error_with_usage_on_stderr(self):
        for args in (["--bogus"], ["-x"], []):
            r = seekless(*args)
            self.assertEqual(r.returncode, 1, args)
            self.assertEqual(r.stdout, "")
            self.assertIn("usage: seekless -f FILE", r.stderr)


if __name__ == "__main__":
    test_core.main()
