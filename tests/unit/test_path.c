/* Unit tests for server/path.c: request-target splitting, path normalization (traversal attempts,
 * escapes, control bytes, capacity limits, an exhaustive cross-check on a small alphabet) and
 * Location encoding. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "path.h"

/* ---- sl_uri_split ---- */

struct split {
    int rc;
    const char *path, *query, *auth;
    size_t path_len, query_len, auth_len;
};

static struct split split_n(const char *t, size_t len)
{
    struct split s;
    s.rc = sl_uri_split(t, len, &s.path, &s.path_len, &s.query, &s.query_len, &s.auth, &s.auth_len);
    return s;
}

static struct split split(const char *t)
{
    return split_n(t, strlen(t));
}

/* A request-target (len bytes of it) and how it splits: the result, and with 0 the path, the
 * query and the authority (NULL: none). */
struct split_case {
    const char *target;
    size_t len;
    int rc;
    const char *path, *query, *auth;
};

#define SPLIT(t, path, query, auth) {t, sizeof(t) - 1, 0, path, query, auth}
#define REJECTED(t) {t, sizeof(t) - 1, -EINVAL, NULL, NULL, NULL}

static const struct split_case split_cases[] = {
    /* origin-form; no query is NULL, an empty one is not. */
    SPLIT("/a/b?q=1&r", "/a/b", "q=1&r", NULL),
    SPLIT("/a/b", "/a/b", NULL, NULL),
    SPLIT("/", "/", NULL, NULL),
    SPLIT("/a?", "/a", "", NULL),
    SPLIT("/a??b/c?d", "/a", "?b/c?d", NULL), /* the query may hold question marks */
    /* absolute-form. */
    SPLIT("http://host:80/a?q", "/a", "q", "host:80"),
    SPLIT("HTTPS://Example.COM/x/y", "/x/y", NULL, "Example.COM"),
    SPLIT("http://host", "", NULL, "host"),
    SPLIT("http://host:8080?x=1", "", "x=1", "host:8080"),
    SPLIT("http://[::1]:8080/x", "/x", NULL, "[::1]:8080"),
    REJECTED("http://[fe80::1%25eth0]/"), /* '%' is not in the IP-literal alphabet we accept */
    SPLIT("http://127.0.0.1/", "/", NULL, "127.0.0.1"),
    SPLIT("http://host:/", "/", NULL, "host:"), /* port = *DIGIT may be empty */
    SPLIT("http://ex%41mple.com/", "/", NULL, "ex%41mple.com"),
    /* asterisk-form, and only "*" alone. */
    SPLIT("*", "*", NULL, NULL),
    REJECTED("**"),
    REJECTED("*?x"),
    REJECTED("*/"),
    /* Other forms. */
    REJECTED("a/b"),
    REJECTED("?q"),
    REJECTED("ftp://h/x"),
    REJECTED("http:/h/x"),
    REJECTED("http:h/x"),
    REJECTED("http//h/x"),
    REJECTED("mailto:x@y"),
    REJECTED("host:80"),
    REJECTED("javascript:alert(1)"),
    REJECTED("\\a"),
    REJECTED(""),
    /* Bad authorities. */
    REJECTED("http://"),
    REJECTED("http:///x"),
    REJECTED("http://?q"),
    REJECTED("http://u@h/x"),
    REJECTED("http://u:p@h/x"),
    REJECTED("http://h:8a/x"),
    REJECTED("http://h:80:1/"),
    REJECTED("http://[::1/x"),
    REJECTED("http://[]/x"),
    REJECTED("http://h%zz/"),
    REJECTED("http://h%4/"),
    REJECTED("http://:80/"),
    REJECTED("http://h\"/"),
    REJECTED("http://h<x>/"),
    REJECTED("http://\xc3\xa9/"),
    REJECTED("http://[::1]x/"),
    /* Forbidden bytes. */
    REJECTED("/a b"),
    REJECTED("/a#frag"),
    REJECTED("/a?q#frag"),
    REJECTED("/a\tb"),
    REJECTED("/a\rb"),
    REJECTED("/a\x7f"),
    REJECTED("/a?\x01"),
    REJECTED("/a\0b"),
    /* Raw UTF-8 is allowed. */
    SPLIT("/caf\xc3\xa9?q=\xe2\x82\xac", "/caf\xc3\xa9", "q=\xe2\x82\xac", NULL),
    /* Only len bytes are read. */
    {"/abc?de#nope", 6, 0, "/abc", "d", NULL},
};

/* A part of the split c: the bytes want, or none (NULL, and no length) when want is NULL. */
static void expect_part(const struct split_case *c, const char *what, const char *p, size_t n,
                        const char *want)
{
    if (want ? !p || n != strlen(want) || memcmp(p, want, n) : p != NULL || n != 0)
        fail_msg("split(\"%.*s\"): %s \"%.*s\", want %s%s%s", (int)c->len, c->target, what,
                 p ? (int)n : 4, p ? p : "none", want ? "\"" : "none", want ? want : "",
                 want ? "\"" : "");
}

static void test_split(void **state)
{
    TU_EACH(c, split_cases) {
        struct split s = split_n(c->target, c->len);
        if (s.rc != c->rc)
            fail_msg("split(\"%.*s\") = %d, want %d", (int)c->len, c->target, s.rc, c->rc);
        if (s.rc) continue;
        expect_part(c, "path", s.path, s.path_len, c->path);
        expect_part(c, "query", s.query, s.query_len, c->query);
        expect_part(c, "authority", s.auth, s.auth_len, c->auth);
    }
}

/* The parts point into the target itself. */
static void test_split_points_into_the_target(void **state)
{
    const char *t = "/a/b?q=1&r";
    struct split s = split(t);
    assert_ptr_equal(s.path, t);
    assert_ptr_equal(s.query, t + 5);
    t = "http://host:80/a?q";
    assert_ptr_equal(split(t).auth, t + 7);
    t = "http://host";
    assert_ptr_equal(split(t).path, t + strlen(t));
    t = "*";
    assert_ptr_equal(split(t).path, t);
}

/* The authority pieces sl_uri_split and the Host check in http_parse.c share. */
static void test_reg_name_and_port(void **state)
{
    assert_int_equal(sl_uri_reg_name("", 0), 0);
    assert_int_equal(sl_uri_reg_name(":80", 3), 0);
    assert_int_equal(sl_uri_reg_name("example.com", 11), 11);
    assert_int_equal(sl_uri_reg_name("a-b_c~d!$&'()*+,;=:8080", 23), 18);
    assert_int_equal(sl_uri_reg_name("%41%2f:1", 8), 6);
    assert_int_equal(sl_uri_reg_name("a%4", 3), -1);  /* escape cut short by the end */
    assert_int_equal(sl_uri_reg_name("a%4:", 4), -1); /* ... or by the port */
    assert_int_equal(sl_uri_reg_name("a%g0", 4), -1);
    assert_int_equal(sl_uri_reg_name("a b", 3), -1);
    assert_int_equal(sl_uri_reg_name("a@b", 3), -1);
    assert_int_equal(sl_uri_reg_name("a/b", 3), -1);
    assert_int_equal(sl_uri_reg_name("host:x", 4), 4); /* stops at len */

    assert_true(sl_uri_port("", 0));
    assert_true(sl_uri_port(":", 1));
    assert_true(sl_uri_port(":8080", 5));
    assert_true(sl_uri_port(":0099999", 8)); /* syntax only */
    assert_false(sl_uri_port("8080", 4));
    assert_false(sl_uri_port(":80a", 4));
    assert_false(sl_uri_port("::80", 4));
}

/* ---- sl_path_normalize ---- */

/* An input path (len bytes) and what it normalizes to; REFUSED (REFUSED_N: of its first len
 * bytes): -EINVAL. */
struct norm_case {
    const char *in;
    size_t len;
    const char *want;
};

#define NORM(in, want) {in, sizeof(in) - 1, want}
#define REFUSED(in) {in, sizeof(in) - 1, NULL}
#define REFUSED_N(in, len) {in, len, NULL}

static const struct norm_case norm_cases[] = {
    /* Plain. */
    NORM("/", "/"),
    NORM("/a", "/a"),
    NORM("/a/b/c.txt", "/a/b/c.txt"),
    NORM("/a/b/", "/a/b/"),
    /* Traversal literal. */
    NORM("/../../etc/passwd", "/etc/passwd"),
    NORM("/a/../../../../etc/passwd", "/etc/passwd"),
    NORM("/..", "/"),
    NORM("/../", "/"),
    NORM("/a/b/../../..", "/"),
    /* Traversal encoded. */
    NORM("/%2e%2e/", "/"),
    NORM("/%2E%2E/etc/passwd", "/etc/passwd"),
    NORM("/a/%2E%2E/%2e%2e/b", "/b"),
    NORM("/.%2e/x", "/x"),
    NORM("/%2e./x", "/x"),
    NORM("/a/%2e", "/a/"),
    /* Encoded slash is separator. */
    NORM("/..%2f..%2f", "/"),
    NORM("/..%2F..%2Fetc%2Fpasswd", "/etc/passwd"),
    NORM("/a%2fb", "/a/b"),
    NORM("/a%2f%2f%2fb", "/a/b"),
    NORM("/a/b%2f..%2f..%2f..%2fc", "/c"),
    /* Dot segments. */
    NORM("/a/./b/../c/", "/a/c/"),
    NORM("/a/./b", "/a/b"),
    NORM("/./", "/"),
    NORM("/.", "/"),
    NORM("/a/b/..", "/a/"),
    /* Trailing slash kept. */
    NORM("/dir/", "/dir/"),
    NORM("/dir/.", "/dir/"),
    NORM("/dir/./", "/dir/"),
    NORM("/dir/sub/..", "/dir/"),
    NORM("/dir//", "/dir/"),
    NORM("/dir%2f", "/dir/"),
    /* Merge slashes. */
    NORM("//x", "/x"),
    NORM("///", "/"),
    NORM("/a//b///c", "/a/b/c"),
    NORM("//..//..//x", "/x"),
    /* Dotlike names kept. */
    NORM("/...", "/..."),
    NORM("/.../x", "/.../x"),
    NORM("/.a", "/.a"),
    NORM("/a..", "/a.."),
    NORM("/..a/b", "/..a/b"),
    NORM("/.%2e.", "/..."),
    NORM("/.htaccess", "/.htaccess"),
    /* A backslash is an ordinary byte on POSIX, not a separator. */
    NORM("/a\\..\\b", "/a\\..\\b"),
    NORM("/%5c..%5c", "/\\..\\"),
    /* Decodes. */
    NORM("/a%20b", "/a b"),
    NORM("/%41%62%7e", "/Ab~"),
    NORM("/caf%C3%A9", "/caf\xc3\xa9"),
    NORM("/%ff%80", "/\xff\x80"),
    NORM("/100%25", "/100%"),
    NORM("/%2525", "/%25"), /* decoded exactly once */
    NORM("/a?b", "/a?b"),   /* the caller already split off the query */
    /* Bad escapes. */
    REFUSED("/a%"),
    REFUSED("/a%4"),
    REFUSED("/%zz"),
    REFUSED("/%g0"),
    REFUSED("/%0g"),
    REFUSED("/% 1"),
    REFUSED("/%%41"),
    REFUSED("/%"),
    /* The escape is cut by len even though more bytes follow in memory. */
    REFUSED_N("/a%41", 4),
    /* Nul rejected. */
    REFUSED("/%00"),
    REFUSED("/a%00b"),
    REFUSED("/a/../%00"),
    REFUSED("/a\0b"),
    /* Controls rejected. */
    REFUSED("/%01"),
    REFUSED("/%09"),
    REFUSED("/%0a"),
    REFUSED("/%0D"),
    REFUSED("/%1f"),
    REFUSED("/%1F"),
    REFUSED("/%7f"),
    REFUSED("/%7F"),
    REFUSED("/a\x01"),
    REFUSED("/a\n"),
    REFUSED("/a\t"),
    REFUSED("/\x7f"),
    REFUSED("/ok/%0d%0aSet-Cookie:x"),
    NORM("/%20", "/ "),
    NORM("/%7e", "/~"),
    /* Must start with slash. */
    REFUSED(""),
    REFUSED("a/b"),
    REFUSED("%2fa"),
    REFUSED("*"),
    REFUSED("../a"),
    REFUSED(" /a"),
};

static void test_norm_cases(void **state)
{
    TU_EACH(c, norm_cases) {
        char out[256];
        memset(out, 'X', sizeof out);
        ssize_t n = sl_path_normalize(c->in, c->len, out, sizeof out);
        if (!c->want && n != -EINVAL)
            fail_msg("normalize(\"%.*s\") = %zd, want %d", (int)c->len, c->in, n, -EINVAL);
        if (c->want && (n < 0 || (size_t)n != strlen(c->want) || strcmp(out, c->want) != 0))
            fail_msg("normalize(\"%.*s\") = %zd \"%s\", want \"%s\"", (int)c->len, c->in, n,
                     n >= 0 ? out : "", c->want);
    }
}

static void test_norm_capacity_exact(void **state)
{
    char out[16];
    assert_int_equal(sl_path_normalize("/abc", 4, out, 5), 4);
    assert_string_equal(out, "/abc");
    assert_int_equal(sl_path_normalize("/abc", 4, out, 4), -ENAMETOOLONG);
    assert_int_equal(sl_path_normalize("/abc/", 5, out, 6), 5);
    assert_string_equal(out, "/abc/");
    assert_int_equal(sl_path_normalize("/abc/", 5, out, 5), -ENAMETOOLONG);
    assert_int_equal(sl_path_normalize("/", 1, out, 2), 1);
    assert_string_equal(out, "/");
    assert_int_equal(sl_path_normalize("/", 1, out, 1), -ENAMETOOLONG);
    assert_int_equal(sl_path_normalize("/", 1, out, 0), -ENAMETOOLONG);
    assert_int_equal(sl_path_normalize("/a/b", 4, out, 4), -ENAMETOOLONG);
    assert_int_equal(sl_path_normalize("/a/b", 4, out, 5), 4);
    /* Decoding shrinks: 12 input bytes, 4 output bytes. */
    assert_int_equal(sl_path_normalize("/%61%62%63", 10, out, 5), 4);
    assert_string_equal(out, "/abc");
}

static void test_norm_capacity_never_overrun(void **state)
{
    /* Every outcap from 0 to the needed size: either the exact result or -ENAMETOOLONG, and never a
     * write at or beyond outcap (checked with a canary). */
    const char *in = "/aa/./bbb//c/../dddd/";
    const char *want = "/aa/bbb/dddd/";
    for (size_t cap = 0; cap <= 20; cap++) {
        char out[32];
        memset(out, '#', sizeof out);
        ssize_t n = sl_path_normalize(in, strlen(in), out, cap);
        if (cap > strlen(want)) {
            assert_int_equal(n, (ssize_t)strlen(want));
            assert_string_equal(out, want);
        } else {
            assert_int_equal(n, -ENAMETOOLONG);
        }
        for (size_t k = cap; k < sizeof out; k++) assert_int_equal(out[k], '#');
    }
}

/* buf[0..n): '/', then 'a's, and tail at the end. */
static void long_path(char *buf, size_t n, const char *tail)
{
    memset(buf, 'a', n);
    buf[0] = '/';
    memcpy(buf + n - strlen(tail), tail, strlen(tail));
}

static void test_norm_long_intermediate_shrinks(void **state)
{
    static char in[6000];
    char out[16];
    long_path(in, sizeof in, "/..");
    assert_int_equal(sl_path_normalize(in, sizeof in, out, sizeof out), 1);
    assert_string_equal(out, "/");

    /* A fitting prefix, then a too-long segment and another one, both cancelled by "..". */
    char in2[6100];
    size_t off = (size_t)snprintf(in2, sizeof in2, "/x/");
    memset(in2 + off, 'b', 3000);
    off += 3000;
    off += (size_t)snprintf(in2 + off, sizeof in2 - off, "/c/../../y");
    assert_int_equal(sl_path_normalize(in2, off, out, sizeof out), 4);
    assert_string_equal(out, "/x/y");

    /* Not cancelled: too long. */
    assert_int_equal(sl_path_normalize(in2, off - 8, out, sizeof out), -ENAMETOOLONG);
}

static void test_norm_einval_beats_enametoolong(void **state)
{
    static char in[5000];
    char out[8];
    long_path(in, sizeof in, "/%zz");
    assert_int_equal(sl_path_normalize(in, sizeof in, out, sizeof out), -EINVAL);
}

static void test_norm_long_input(void **state)
{
    enum { N = 50000 };
    static char in[2 * N + 1], out[2 * N + 2];
    for (size_t k = 0; k < N; k++) {
        in[2 * k] = '/';
        in[2 * k + 1] = (char)('a' + k % 26);
    }
    ssize_t n = sl_path_normalize(in, 2 * N, out, sizeof out);
    assert_int_equal(n, 2 * N);
    assert_memory_equal(out, in, 2 * N);
    assert_int_equal(sl_path_normalize(in, 2 * N, out, 2 * N), -ENAMETOOLONG);

    /* 50000 ".." after a deep path: ends at the root. */
    static char in2[4 * N + 2];
    size_t off = 0;
    for (size_t k = 0; k < N; k++) off += (size_t)snprintf(in2 + off, sizeof in2 - off, "/..");
    assert_int_equal(sl_path_normalize(in2, off, out, sizeof out), 1);
    assert_string_equal(out, "/");
}

/* Reference for the exhaustive check: decode everything first, then walk '/'-separated segments
 * with an explicit stack of segment strings. */
static int ref_normalize(const char *in, size_t len, char *out)
{
    char dec[128];
    size_t dn = 0;
    if (len == 0 || in[0] != '/') return -EINVAL;
    for (size_t k = 0; k < len; k++) {
        unsigned c = (unsigned char)in[k];
        if (c == '%') {
            unsigned v;
            char hx[3] = {0};
            if (k + 2 >= len) return -EINVAL;
            hx[0] = in[k + 1];
            hx[1] = in[k + 2];
            if (!isxdigit((unsigned char)hx[0]) || !isxdigit((unsigned char)hx[1])) return -EINVAL;
            sscanf(hx, "%2x", &v);
            c = v;
            k += 2;
        }
        if (c < 0x20 || c == 0x7f) return -EINVAL;
        dec[dn++] = (char)c;
    }
    dec[dn] = '\0';
    const char *stack[64];
    size_t lens[64], depth = 0;
    bool dir = false;
    const char *p = dec + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        if (l == 0 || (l == 1 && p[0] == '.')) {
            dir = true;
        } else if (l == 2 && p[0] == '.' && p[1] == '.') {
            if (depth) depth--;
            dir = true;
        } else {
            stack[depth] = p;
            lens[depth++] = l;
            dir = false;
        }
        if (!slash) break;
        p = slash + 1;
    }
    size_t o = 0;
    for (size_t d = 0; d < depth; d++) {
        out[o++] = '/';
        memcpy(out + o, stack[d], lens[d]);
        o += lens[d];
    }
    if (o == 0 || dir) out[o++] = '/';
    out[o] = '\0';
    return (int)o;
}

static void test_norm_exhaustive_small(void **state)
{
    /* "a" and "\xc3" make paths that are already normal (the one-pass fast path), the rest the
     * paths it must leave to the decoder. */
    static const char *const tokens[] = {"/", ".", "a", "%2e", "%2F", "%", "%0", "%00", "\x01",
                                         "\x7f", "\xc3"};
    enum { T = sizeof tokens / sizeof *tokens, MAXTOK = 6 };
    unsigned long checked = 0;
    for (int ntok = 0; ntok <= MAXTOK; ntok++) {
        unsigned long total = 1;
        for (int k = 0; k < ntok; k++) total *= T;
        for (unsigned long idx = 0; idx < total; idx++) {
            char in[64] = "/";
            size_t len = 1;
            unsigned long x = idx;
            for (int k = 0; k < ntok; k++) {
                const char *t = tokens[x % T];
                x /= T;
                memcpy(in + len, t, strlen(t));
                len += strlen(t);
            }
            char want[128], got[128];
            int rw = ref_normalize(in, len, want);
            ssize_t rg = sl_path_normalize(in, len, got, sizeof got);
            if (rg != rw || (rw >= 0 && strcmp(got, want) != 0)) {
                print_error("\"%.*s\": got %zd \"%s\", want %d \"%s\"\n", (int)len, in, rg, rg >= 0 ? got : "",
                            rw, rw >= 0 ? want : "");
                fail();
            }
            if (rw >= 0) {
                /* The exact size fits, one byte less does not. */
                assert_int_equal(sl_path_normalize(in, len, got, (size_t)rw + 1), rw);
                assert_int_equal(sl_path_normalize(in, len, got, (size_t)rw), -ENAMETOOLONG);
                assert_null(strstr(got, "//"));
                assert_null(strstr(got, "/./"));
                assert_null(strstr(got, "/../"));
                size_t gl = strlen(got);
                assert_false(gl >= 2 && strcmp(got + gl - 2, "/.") == 0);
                assert_false(gl >= 3 && strcmp(got + gl - 3, "/..") == 0);
            }
            checked++;
        }
    }
    assert_true(checked > 500000);
}

/* ---- sl_path_encode ---- */

/* Inputs (len bytes) and their encoding for a Location field. */
static const struct {
    const char *in;
    size_t len;
    const char *want;
} enc_cases[] = {
    /* pchar and '/' are kept. */
    {"/AZaz09-._~!$&'()*+,;=:@/x", 26, "/AZaz09-._~!$&'()*+,;=:@/x"},
    /* The rest is escaped. */
    {"/a b", 4, "/a%20b"},
    {"/100%", 5, "/100%25"},
    {"/a?b#c", 6, "/a%3Fb%23c"},
    {"/\"<>\\^`{|}[]", 12, "/%22%3C%3E%5C%5E%60%7B%7C%7D%5B%5D"},
    {"/caf\xc3\xa9", 6, "/caf%C3%A9"},
    {"/\x01\x7f\xff", 4, "/%01%7F%FF"},
    {"/a\0b", 4, "/a%00b"},
    {"", 0, ""},
};

static void test_enc(void **state)
{
    TU_EACH(c, enc_cases) {
        char out[256];
        ssize_t n = sl_path_encode(c->in, c->len, out, sizeof out);
        if (n != (ssize_t)strlen(c->want) || strcmp(out, c->want))
            fail_msg("encode(\"%.*s\") = %zd \"%s\", want \"%s\"", (int)c->len, c->in, n,
                     n >= 0 ? out : "", c->want);
    }
}

static void test_enc_every_byte(void **state)
{
    for (int c = 0; c < 256; c++) {
        char in[1] = {(char)c}, out[4];
        ssize_t n = sl_path_encode(in, 1, out, sizeof out);
        bool literal = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       (c && strchr("-._~!$&'()*+,;=:@/", c));
        if (literal) {
            assert_int_equal(n, 1);
            assert_int_equal(out[0], c);
        } else {
            char want[4];
            snprintf(want, sizeof want, "%%%02X", c);
            assert_int_equal(n, 3);
            assert_string_equal(out, want);
        }
    }
}

static void test_enc_capacity(void **state)
{
    char out[8];
    memset(out, '#', sizeof out);
    assert_int_equal(sl_path_encode("/ab", 3, out, 4), 3);
    assert_string_equal(out, "/ab");
    assert_int_equal(sl_path_encode("/ab", 3, out, 3), -ENAMETOOLONG);
    assert_int_equal(sl_path_encode("/ ", 2, out, 5), 4);
    assert_string_equal(out, "/%20");
    memset(out, '#', sizeof out);
    assert_int_equal(sl_path_encode("/ ", 2, out, 4), -ENAMETOOLONG);
    assert_int_equal(out[4], '#');
    assert_int_equal(sl_path_encode("", 0, out, 1), 0);
    assert_int_equal(sl_path_encode("", 0, out, 0), -ENAMETOOLONG);
}

static void test_enc_normalize_round_trip(void **state)
{
    /* Encoding any normalizable byte and normalizing again gives the same path back. */
    for (int c = 0x20; c < 256; c++) {
        if (c == 0x7f || c == '/' || c == '.') continue;
        char path[8] = {'/', 'x', (char)c, 'y', '/', '\0'}, enc[32], back[32];
        ssize_t e = sl_path_encode(path, 5, enc, sizeof enc);
        assert_true(e >= 5);
        ssize_t b = sl_path_normalize(enc, (size_t)e, back, sizeof back);
        assert_int_equal(b, 5);
        assert_memory_equal(back, path, 5);
    }
}

/* ---- sl_host_normalize ---- */

/* want NULL: refused with -EINVAL. */
static void host(const char *in, const char *want)
{
    char out[256];
    memset(out, '#', sizeof out);
    ssize_t n = sl_host_normalize(in, strlen(in), 80, out, sizeof out);
    if (!want) {
        if (n != -EINVAL) fail_msg("\"%s\": %zd, want -EINVAL", in, n);
        return;
    }
    if (n < 0) fail_msg("\"%s\": %zd, want \"%s\"", in, n, want);
    assert_int_equal(n, strlen(want));
    assert_string_equal(out, want);
}

static void test_host_one_spelling(void **state)
{
    host("example.com", "example.com");
    host("Example.COM", "example.com");
    host("example.com:80", "example.com");
    host("EXAMPLE.com.:80", "example.com");
    host("example.com.", "example.com");
    host("example.com:", "example.com");
    host("example.com:8080", "example.com:8080");
    host("example.com.:65535", "example.com:65535");
    host("a-.b-c.x1", "a-.b-c.x1");
    host("xn--bcher-kva.example", "xn--bcher-kva.example");
    host("1.a", "1.a");
    host("localhost", "localhost");
    host("127.0.0.1", "127.0.0.1");
    host("127.0.0.1:80", "127.0.0.1");
    host("1.2.3.4.", "1.2.3.4");
    host("255.255.255.255:1", "255.255.255.255:1");
    host("[::1]", "[::1]");
    host("[::1]:80", "[::1]");
    host("[0:0::1]:8080", "[::1]:8080");
    host("[::FFFF:1.2.3.4]", "[::ffff:1.2.3.4]");
    host("[2001:DB8:0:0:0:0:0:1]", "[2001:db8::1]");
}

/* The values lighttpd refuses as a Host, and a few more that have no one meaning. */
static void test_host_invalid(void **state)
{
    const char *bad[] = {
        "", ".", "..", ":80", "example.com..", ".example.com", "a..b", "-a.com", "a_b.com",
        "exa mple", "a/b", "ex%41mple.com", "a,b", "a@b", "*", "\xc3\xa9.com", "a:b:c",
        "example.com:80:80", "example.com:0", "example.com:080", "example.com:65536",
        "example.com:99999", "example.com:123456", "example.com:8x", "1.2.3", "127.1",
        "1.2.3.4.5", "a.1", "0x7f.1", "127.0.0.01", "999.1.1.1", "[::1", "[]", "[::1]x",
        "[::1]:", "[v1.x]", "[fe80::1%25eth0]", "[1.2.3.4]", "[::1]:0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!strcmp(bad[i], "[::1]:")) {
            host(bad[i], "[::1]"); /* an empty port is no port, as for names */
            continue;
        }
        host(bad[i], NULL);
    }
}

static void test_host_capacity_and_port_choice(void **state)
{
    char out[64], name[300];
    assert_int_equal(sl_host_normalize("example.com:8080", 16, 80, out, 17), 16);
    assert_int_equal(sl_host_normalize("example.com:8080", 16, 80, out, 16), -ENAMETOOLONG);
    assert_int_equal(sl_host_normalize("example.com:80", 14, 80, out, 12), 11);
    /* The default port is the listener's scheme's: 443 for https. */
    assert_int_equal(sl_host_normalize("example.com:443", 15, 443, out, sizeof out), 11);
    assert_int_equal(sl_host_normalize("example.com:80", 14, 443, out, sizeof out), 14);
    memset(name, 'a', sizeof name);
    assert_int_equal(sl_host_normalize(name, 255, 80, out, sizeof out), -ENAMETOOLONG);
    assert_int_equal(sl_host_normalize(name, 256, 80, out, sizeof out), -ENAMETOOLONG);
    char big[300];
    assert_int_equal(sl_host_normalize(name, 255, 80, big, sizeof big), 255);
}

/* lighttpd's url-normalize-unreserved and -required, the target rewrite/redirect rules see. */
static void test_target_normalize(void **state)
{
    char out[64];
    const char *t = "/a%41%2a%7e%2F%c3%a9?q=%6a&x";
    ssize_t n = sl_target_normalize(t, strlen(t), out, sizeof out);
    assert_string_equal(out, "/aA%2A~/%C3%A9?q=j&x"); /* %2F is a '/' in the path */
    assert_int_equal(n, strlen(out));
    /* Dot segments and empty ones resolved in the path only; %2F stays in the query. */
    static const char *const cases[][2] = {
        {"/a//./b/../c", "/a/c"},   {"/a/b/", "/a/b/"},     {"/a/.", "/a/"},
        {"/a/..", "/"},             {"/..", "/"},           {"/", "/"},
        {"/../../x?y=/../%2f", "/x?y=/../%2F"}, {"/%2e%2E/a", "/a"}, {"/a%2F..%2Fb", "/b"},
        {"//x//", "/x/"},           {"/a/..?", "/?"},       {"/.hidden/..x", "/.hidden/..x"},
        {"http://h/a/../b", "http://h/a/../b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = sl_target_normalize(cases[i][0], strlen(cases[i][0]), out, sizeof out);
        assert_string_equal(out, cases[i][1]);
        assert_int_equal(n, strlen(cases[i][1]));
    }
    const char raw[] = "/\xc3\xa9%zz%4";
    assert_true(sl_target_normalize(raw, strlen(raw), out, sizeof out) > 0);
    assert_string_equal(out, "/%C3%A9%zz%4"); /* broken escapes stay as they are */
    assert_int_equal(sl_target_normalize("/abcdef", 7, out, 7), -1); /* no room for the NUL */
    assert_int_equal(sl_target_normalize("/abcdef", 7, out, 8), 7);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_points_into_the_target),
        cmocka_unit_test(test_target_normalize),
        cmocka_unit_test(test_reg_name_and_port),
        cmocka_unit_test(test_norm_cases),
        cmocka_unit_test(test_norm_capacity_exact),
        cmocka_unit_test(test_norm_capacity_never_overrun),
        cmocka_unit_test(test_norm_long_intermediate_shrinks),
        cmocka_unit_test(test_norm_einval_beats_enametoolong),
        cmocka_unit_test(test_norm_long_input),
        cmocka_unit_test(test_norm_exhaustive_small),
        cmocka_unit_test(test_enc),
        cmocka_unit_test(test_enc_every_byte),
        cmocka_unit_test(test_enc_capacity),
        cmocka_unit_test(test_enc_normalize_round_trip),
        cmocka_unit_test(test_host_one_spelling),
        cmocka_unit_test(test_host_invalid),
        cmocka_unit_test(test_host_capacity_and_port_choice))
