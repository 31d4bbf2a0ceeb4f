#!/usr/bin/env python3
"""mod_deflate: precompressed siblings (deflate.precompressed) and on-the-fly compression
(deflate.mimetypes, deflate.allowed-encodings, deflate.cache-dir ...). Bodies are decoded with
python's zlib/gzip (brotli with python3-brotli, zstd with the zstd program) and compared with
the file; headers, per-encoding ETags, ranges on the encoded bytes, 304 per encoding, the cache
directory's reuse, a file changed after caching and a client that leaves mid-compression."""
import gzip
import os
import socket
import subprocess
import sys
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_core  # noqa: E402
from test_core import Server, request, read_response  # noqa: E402

try:
    import brotli  # python3-brotli
except ImportError:  # pragma: no cover
    brotli = None


def get(srv, target, ae=None, extra=b"", method=b"GET"):
    h = b"Accept-Encoding: " + ae + b"\r\n" if ae is not None else b""
    return request(srv, method + b" " + target + b" HTTP/1.1\r\nHost: t\r\n" + h + extra +
                   b"Connection: close\r\n\r\n", head=method == b"HEAD")


def decode(enc, body):
    if enc == "gzip":
        return gzip.decompress(body)
    if enc == "deflate":
        return zlib.decompress(body)
    if enc == "br":
        return brotli.decompress(body)
    if enc == "zstd":
        return subprocess.run(["zstd", "-dc"], input=body, capture_output=True, check=True).stdout
    return body


TEXT = b"".join(b"line %d of a compressible stylesheet { color: red; }\n" % i for i in range(4000))


class Precompressed(unittest.TestCase):
    def setUp(self):
        self.srv = Server('deflate.precompressed = "enable"\n',
                          {"a.css": TEXT, "a.css.gz": gzip.compress(TEXT),
                           "a.css.zst": b"not really zstd but a sibling", "b.js": b"plain"})
        os.mkdir(os.path.join(self.srv.root, "dir.css.br"))  # not a regular file
        with open(os.path.join(self.srv.root, "dir.css"), "wb") as f:
            f.write(b"d")
        self.srv.start()

    def tearDown(self):
        self.assertEqual(self.srv.stop(), 0)

    def test_choice_headers_and_etags(self):
        st, h, b = get(self.srv, b"/a.css", b"gzip")
        self.assertEqual((st, h["content-encoding"], h["vary"]), (200, "gzip", "Accept-Encoding"))
        self.assertTrue(h["content-type"].startswith("text/css"), h["content-type"])
        self.assertEqual(gzip.decompress(b), TEXT)
        gz_etag = h["etag"]
        self.assertTrue(gz_etag.endswith('-gzip"'), gz_etag)
        # The client's order decides (q-values), zstd sibling preferred here.
        st, h, b = get(self.srv, b"/a.css", b"gzip;q=0.5, zstd")
        self.assertEqual((h["content-encoding"], b), ("zstd", b"not really zstd but a sibling"))
        zst_etag = h["etag"]
        # Identity: no header, q=0, or only unknown codings; Vary all the same.
        for ae in (None, b"gzip;q=0", b"compress", b"br"):
            st, h, b = get(self.srv, b"/a.css", ae)
            self.assertEqual((st, b), (200, TEXT), ae)
            self.assertNotIn("content-encoding", h)
            self.assertEqual(h["vary"], "Accept-Encoding")
            ident = h["etag"]
        self.assertEqual(len({gz_etag, zst_etag, ident}), 3)
        # A directory named like a sibling is not one.
        st, h, b = get(self.srv, b"/dir.css", b"br")
        self.assertEqual((st, b), (200, b"d"))
        # Malformed Accept-Encoding: the good elements count, a log line, no crash.
        st, h, b = get(self.srv, b"/a.css", b"gzip;q=2, ;;, gzip;q=0.8")
        self.assertEqual(h.get("content-encoding"), "gzip")

    def test_range_and_304_per_encoding(self):
        gzbody = gzip.compress(TEXT)
        with open(os.path.join(self.srv.root, "a.css.gz"), "rb") as f:
            gzbody = f.read()
        st, h, b = get(self.srv, b"/a.css", b"gzip", b"Range: bytes=10-19\r\n")
        self.assertEqual((st, b), (206, gzbody[10:20]))
        self.assertEqual(h["content-range"], "bytes 10-19/%d" % len(gzbody))
        etag = h["etag"]
        st, h, b = get(self.srv, b"/a.css", b"gzip", b"If-None-Match: " + etag.encode() + b"\r\n")
        self.assertEqual((st, h["etag"], h["vary"]), (304, etag, "Accept-Encoding"))
        # The gzip ETag does not validate the identity answer.
        st, h, b = get(self.srv, b"/a.css", None, b"If-None-Match: " + etag.encode() + b"\r\n")
        self.assertEqual((st, b), (200, TEXT))

    def test_older_sibling_is_ignored(self):
        past = time.time() - 100
        os.utime(os.path.join(self.srv.root, "a.css.gz"), (past, past))
        st, h, b = get(self.srv, b"/a.css", b"gzip")
        self.assertEqual((st, b), (200, TEXT))
        self.assertNotIn("content-encoding", h)


class OnTheFly(unittest.TestCase):
    def start(self, extra="", files=None):
        self.cache = None
        conf = ('deflate.mimetypes = ( "text/" )\n'
                'deflate.allowed-encodings = ( "br", "zstd", "gzip", "deflate" )\n' + extra)
        self.srv = Server(conf, files or {"a.txt": TEXT, "small.txt": b"x" * 100,
                                          "img.png": b"\x89PNG" + TEXT})
        return self.srv

    def tearDown(self):
        self.assertEqual(self.srv.stop(), 0)

    def test_each_coding_decodes(self):
        self.start().start()
        for enc in ("gzip", "deflate", "zstd") + (("br",) if brotli else ()):
            st, h, b = get(self.srv, b"/a.txt", enc.encode())
            self.assertEqual((st, h["content-encoding"], h["vary"]), (200, enc, "Accept-Encoding"))
            self.assertEqual(decode(enc, b), TEXT)
            self.assertEqual(int(h["content-length"]), len(b))
            self.assertLess(len(b), len(TEXT) // 4)
            self.assertTrue(h["etag"].endswith('-%s"' % enc))
        # Server order among equal q-values; the client's q-values first.
        st, h, _ = get(self.srv, b"/a.txt", b"gzip, deflate, zstd")
        self.assertEqual(h["content-encoding"], "zstd")
        st, h, _ = get(self.srv, b"/a.txt", b"gzip, deflate;q=0.5, zstd;q=0.1")
        self.assertEqual(h["content-encoding"], "gzip")
        st, h, _ = get(self.srv, b"/a.txt", b"*;q=0.5, br;q=0, zstd;q=0")
        self.assertEqual(h["content-encoding"], "gzip")
        # Below min-compress-size, or a type not listed: the file, without Vary.
        for t in (b"/small.txt", b"/img.png"):
            st, h, b = get(self.srv, t, b"gzip")
            self.assertNotIn("content-encoding", h)
            self.assertNotIn("vary", h)
        # HEAD says what GET sends.
        st, h, _ = get(self.srv, b"/a.txt", b"gzip", method=b"HEAD")
        st2, h2, b2 = get(self.srv, b"/a.txt", b"gzip")
        self.assertEqual((h["content-encoding"], h["content-length"], h["etag"]),
                         (h2["content-encoding"], h2["content-length"], h2["etag"]))

    def test_small_blocks_decode(self):
        # 1 KiB read and 1 KiB of coder output at a time: every coder loops many times per file
        # and still makes the same bytes a whole-file coder would decode to.
        self.start('deflate.work-block-size = 1\ndeflate.output-buffer-size = 1024\n').start()
        for enc in ("gzip", "deflate", "zstd") + (("br",) if brotli else ()):
            st, h, b = get(self.srv, b"/a.txt", enc.encode())
            self.assertEqual((st, h["content-encoding"]), (200, enc))
            self.assertEqual(decode(enc, b), TEXT)
            self.assertEqual(int(h["content-length"]), len(b))

    def test_range_and_304(self):
        self.start().start()
        st, h, full = get(self.srv, b"/a.txt", b"gzip")
        etag = h["etag"]
        st, h, b = get(self.srv, b"/a.txt", b"gzip", b"Range: bytes=5-\r\n")
        self.assertEqual((st, b, h["content-encoding"]), (206, full[5:], "gzip"))
        st, h, b = get(self.srv, b"/a.txt", b"gzip", b"If-None-Match: " + etag.encode() + b"\r\n")
        self.assertEqual((st, h["etag"], h["content-encoding"]), (304, etag, "gzip"))
        st, h, b = get(self.srv, b"/a.txt", b"zstd", b"If-None-Match: " + etag.encode() + b"\r\n")
        self.assertEqual((st, h["content-encoding"]), (200, "zstd"))

    def test_cache_dir_reuse_and_change(self):
        srv = self.start('deflate.cache-dir = "cache"\n')
        cache = os.path.join(srv.dir, "cache")
        srv.start()
        st, h, b = get(srv, b"/a.txt", b"gzip")
        self.assertEqual(gzip.decompress(b), TEXT)
        copies = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs]
        self.assertEqual(len(copies), 1, copies)
        self.assertTrue(copies[0].endswith('-gzip'), copies)
        ino = os.stat(copies[0]).st_ino
        st, h2, b2 = get(srv, b"/a.txt", b"gzip")
        self.assertEqual((b2, h2["etag"]), (b, h["etag"]))
        self.assertEqual(os.stat(copies[0]).st_ino, ino)  # reused, not made again
        # The file changes (same size): a new copy, never the stale one.
        new = TEXT.replace(b"red", b"tan")
        with open(os.path.join(srv.root, "a.txt"), "r+b") as f:
            f.write(new)
        st, h3, b3 = get(srv, b"/a.txt", b"gzip")
        self.assertEqual(gzip.decompress(b3), new)
        self.assertNotEqual(h3["etag"], h["etag"])
        st, _, b4 = get(srv, b"/a.txt", None)
        self.assertEqual(b4, new)

    def test_cache_dir_unwritable_sends_identity(self):
        # As root (who writes anywhere) the server runs as nobody instead, below a cache
        # directory only root may write to (made beforehand: one seekless makes is nobody's).
        root = os.geteuid() == 0
        srv = self.start('deflate.cache-dir = "cache"\n' +
                         ('server.username = "nobody"\n' if root else ''))
        if root:
            os.mkdir(os.path.join(srv.dir, "cache"), 0o755)
            os.chmod(srv.dir, 0o755)
            os.chmod(srv.root, 0o755)
            for name in os.listdir(srv.root):
                os.chmod(os.path.join(srv.root, name), 0o644)
        srv.start()
        cache = os.path.join(srv.dir, "cache")
        os.chmod(cache, 0o500 if not root else 0o755)
        try:
            st, h, b = get(srv, b"/a.txt", b"gzip")
            self.assertEqual((st, b), (200, TEXT))
            self.assertNotIn("content-encoding", h)
        finally:
            os.chmod(cache, 0o700)

    def test_full_disk_for_cache_sends_identity(self):
        # A cache directory on a file system that is full: /dev/full is not a directory, so
        # make the copy's directory impossible instead (a file where a directory must be).
        srv = self.start('deflate.cache-dir = "cache"\n')
        srv.start()
        cache = os.path.join(srv.dir, "cache")
        # Every copy lives below <cache>/<root id>: block that name with a file.
        st = os.stat(srv.root)
        with open(os.path.join(cache, "%x-%x" % (st.st_dev, st.st_ino)), "w") as f:
            f.write("in the way")
        st_, h, b = get(srv, b"/a.txt", b"gzip")
        self.assertEqual((st_, b), (200, TEXT))
        self.assertNotIn("content-encoding", h)
        with open(srv.log) as f:
            self.assertIn("sent uncompressed", f.read())

    def test_client_leaves_mid_compression(self):
        big = os.urandom(1 << 20).hex().encode() * 8  # 16 MB of text-ish bytes
        srv = self.start('deflate.cache-dir = "cache"\n', {"big.txt": big})
        srv.start()
        for _ in range(3):
            s = srv.connect()
            s.sendall(b"GET /big.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n")
            s.close()
        # While the abandoned compressions hold their threads the answer may be the file
        # itself (right, if not small); then the copy they left in the cache.
        deadline = time.time() + 30
        while True:
            st, h, b = get(srv, b"/big.txt", b"gzip")
            self.assertEqual(st, 200)
            if "content-encoding" in h or time.time() > deadline:
                break
            self.assertEqual(b, big)
            time.sleep(0.2)
        self.assertEqual(h["content-encoding"], "gzip")
        self.assertEqual(gzip.decompress(b), big)

    def test_no_stat_threads_no_compression_on_the_loop(self):
        # Everything on the loop by choice: nothing is compressed there; the answer is the file.
        srv = self.start('server.max-stat-threads = 0\n')
        srv.start()
        st, h, b = get(srv, b"/a.txt", b"gzip")
        self.assertEqual((st, b, h.get("vary")), (200, TEXT, "Accept-Encoding"))
        self.assertNotIn("content-encoding", h)

    def test_block_turns_it_off(self):
        srv = self.start('$HTTP["url"] =~ "^/off/" { deflate.mimetypes = ( ) }\n',
                         {"a.txt": TEXT, "off/b.txt": TEXT})
        srv.start()
        st, h, b = get(srv, b"/off/b.txt", b"gzip")
        self.assertEqual((st, b), (200, TEXT))
        self.assertNotIn("vary", h)
        st, h, b = get(srv, b"/a.txt", b"gzip")
        self.assertEqual(h["content-encoding"], "gzip")

    def test_max_size_and_keys(self):
        srv = self.start('compress.max-filesize = 1\ncompress.filetype = ( "text/plain" )\n')
        srv.start()
        st, h, b = get(srv, b"/a.txt", b"gzip")  # 200 KB > 1 KB
        self.assertEqual((st, b), (200, TEXT))
        self.assertNotIn("content-encoding", h)


class Refused(unittest.TestCase):
    def check(self, conf, words):
        srv = Server(conf)
        p = subprocess.run([os.path.join(test_core.BUILD, "app", "seekless"), "-t", "-f",
                            srv.conf], capture_output=True, text=True)
        srv.stop()
        self.assertNotEqual(p.returncode, 0, conf)
        for w in words:
            self.assertIn(w, p.stderr + p.stdout)

    def test_refusals(self):
        self.check('deflate.params = ( "BROTLI_PARAM_QUALITY" => 5 )\n', ["deflate.params"])
        self.check('deflate.allowed-encodings = ( "bzip2" )\n', ["bzip2"])
        self.check('deflate.compression-level = 12\n', ["between 1 and 9"])
        self.check('deflate.max-loadavg = "high"\n', ["load average"])
        self.check('deflate.output-buffer-size = 100\n', ["deflate.output-buffer-size", "1024"])
        self.check('deflate.work-block-size = 70000\n', ["deflate.work-block-size", "KiB"])
        self.check('server.modules = ( "mod_staticfile" )\ndeflate.mimetypes = ( "text/" )\n',
                   ["mod_deflate"])


if __name__ == "__main__":
    test_core.main()
