/* Unit tests for server/http_parse.c: RFC 9112 request heads, the smuggling-relevant refusals, the
 * limits, and the incremental contract (every prefix of a valid head gives 0, every prefix of a bad
 * one gives 0 or the same error). Inputs are copied into exactly-sized heap buffers so that
 * AddressSanitizer catches any read past len. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "http_parse.h"

static const sl_http_limits deflim = {8192, 8192, SL_HTTP_MAX_HEADERS};

/* Parses a heap copy of s[0..len) that has no slack after it. */
static int parse_n(const char *s, size_t len, const sl_http_limits *lim, sl_http_request *r)
{
    char *copy = tu_copy(s, len);
    int rc = sl_http_parse_request(copy, len, lim, r);
    free(copy);
    return rc;
}

static int parse_lim(const char *s, const sl_http_limits *lim)
{
    sl_http_request r;
    return parse_n(s, strlen(s), lim, &r);
}

static int parse(const char *s)
{
    return parse_lim(s, &deflim);
}

/* s parses, in place, as one whole head into r. */
static void parse_whole(const char *s, sl_http_request *r)
{
    int rc = sl_http_parse_request(s, strlen(s), &deflim, r);
    if (rc != (int)strlen(s)) fail_msg("\"%s\": %d, want %zu", s, rc, strlen(s));
}

/* Every proper prefix gives 0 or want, and the whole input gives want (a negative status). */
static void expect_err_n(const char *s, size_t len, const sl_http_limits *lim, int want)
{
    sl_http_request r;
    for (size_t k = 0; k < len; k++) {
        int rc = parse_n(s, k, lim, &r);
        if (rc != 0 && rc != want)
            fail_msg("prefix %zu of \"%.*s\": %d, want 0 or %d", k, (int)len, s, rc, want);
    }
    int rc = parse_n(s, len, lim, &r);
    if (rc != want) fail_msg("\"%.*s\": %d, want %d", (int)len, s, rc, want);
}

static void expect_err_lim(const char *s, const sl_http_limits *lim, int want)
{
    expect_err_n(s, strlen(s), lim, want);
}

static void expect_err(const char *s, int want)
{
    expect_err_lim(s, &deflim, want);
}

/* s is one valid head followed by nothing: every shorter prefix gives 0, the whole gives its
 * length. */
static void expect_ok_lim(const char *s, const sl_http_limits *lim)
{
    sl_http_request r;
    size_t len = strlen(s);
    for (size_t k = 0; k < len; k++) {
        int rc = parse_n(s, k, lim, &r);
        if (rc != 0) fail_msg("prefix %zu of \"%s\": %d, want 0", k, s, rc);
    }
    int rc = parse_n(s, len, lim, &r);
    if (rc != (int)len) fail_msg("\"%s\": %d, want %zu", s, rc, len);
    assert_int_equal(r.head_len, len);
}

static void expect_ok(const char *s)
{
    expect_ok_lim(s, &deflim);
}

static bool hv_eq(const sl_http_header *h, const char *v)
{
    return h && h->value_len == strlen(v) && memcmp(h->value, v, h->value_len) == 0;
}

/* Asserts that every pointer of a parsed request lies inside buf[0..len). */
static void assert_inside(const sl_http_request *r, const char *buf, size_t len)
{
    assert_true(r->method_str >= buf && r->method_str + r->method_len <= buf + len);
    assert_true(r->target >= buf && r->target + r->target_len <= buf + len);
    for (size_t i = 0; i < r->n_headers; i++) {
        const sl_http_header *h = &r->headers[i];
        assert_true(h->name >= buf && h->name + h->name_len <= buf + len);
        assert_true(h->value >= buf && h->value + h->value_len <= buf + len);
    }
}

/* ---- basics ---- */

static void test_simple_get(void **state)
{
    const char *s = "GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n";
    sl_http_request r;
    int rc = sl_http_parse_request(s, strlen(s), &deflim, &r);
    assert_int_equal(rc, (int)strlen(s));
    assert_int_equal(r.head_len, strlen(s));
    assert_int_equal(r.method, SL_METHOD_GET);
    assert_int_equal(r.method_len, 3);
    assert_memory_equal(r.method_str, "GET", 3);
    assert_int_equal(r.target_len, strlen("/index.html?x=1"));
    assert_memory_equal(r.target, "/index.html?x=1", r.target_len);
    assert_int_equal(r.version, 11);
    assert_int_equal(r.n_headers, 1);
    assert_ptr_equal(r.host, &r.headers[0]);
    assert_int_equal(r.host->name_len, 4);
    assert_memory_equal(r.host->name, "Host", 4);
    assert_true(hv_eq(r.host, "example.com"));
    assert_int_equal(r.content_length, -1);
    assert_false(r.chunked);
    assert_false(r.conn_close || r.conn_keep_alive || r.conn_upgrade);
    assert_null(r.range);
    assert_null(r.user_agent);
    assert_inside(&r, s, strlen(s));
    expect_ok(s);
}

static void test_well_known_headers(void **state)
{
    const char *s = "GET / HTTP/1.1\r\n"
                    "host: h\r\n"
                    "RANGE: bytes=0-1\r\n"
                    "If-Range: \"e\"\r\n"
                    "If-Match: \"a\"\r\n"
                    "If-None-Match: W/\"b\"\r\n"
                    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                    "If-Unmodified-Since: Mon, 07 Nov 1994 08:49:37 GMT\r\n"
                    "Expect: 100-continue\r\n"
                    "Content-Type: text/plain\r\n"
                    "User-Agent: test/1.0\r\n"
                    "Referer: http://r/\r\n"
                    "X-Custom: yes\r\n"
                    "Range: bytes=5-6\r\n"
                    "\r\n";
    sl_http_request r;
    parse_whole(s, &r);
    assert_int_equal(r.n_headers, 13);
    assert_true(hv_eq(r.host, "h"));
    assert_true(hv_eq(r.range, "bytes=0-1")); /* the first of two */
    assert_ptr_equal(r.range->next, &r.headers[12]);
    assert_null(r.range->next->next);
    assert_null(sl_http_single(r.range)); /* a singleton on two lines is invalid */
    assert_ptr_equal(sl_http_single(r.if_range), r.if_range);
    assert_null(sl_http_single(NULL));
    assert_true(hv_eq(r.if_range, "\"e\""));
    assert_true(hv_eq(r.if_match, "\"a\""));
    assert_true(hv_eq(r.if_none_match, "W/\"b\""));
    assert_true(hv_eq(r.if_modified_since, "Sun, 06 Nov 1994 08:49:37 GMT"));
    assert_true(hv_eq(r.if_unmodified_since, "Mon, 07 Nov 1994 08:49:37 GMT"));
    assert_true(hv_eq(r.expect, "100-continue"));
    assert_true(hv_eq(r.content_type, "text/plain"));
    assert_true(hv_eq(r.user_agent, "test/1.0"));
    assert_true(hv_eq(r.referer, "http://r/"));
    assert_ptr_equal(r.range, &r.headers[1]);

    assert_ptr_equal(sl_http_find_header(&r, "x-custom"), &r.headers[11]);
    assert_ptr_equal(sl_http_find_header(&r, "X-CUSTOM"), &r.headers[11]);
    assert_ptr_equal(sl_http_find_header(&r, "range"), &r.headers[1]);
    assert_ptr_equal(sl_http_find_header(&r, "Host"), r.host);
    assert_null(sl_http_find_header(&r, "X-Custo"));
    assert_null(sl_http_find_header(&r, "X-Customs"));
    assert_null(sl_http_find_header(&r, "Cookie"));
    assert_null(sl_http_find_header(&r, ""));
    assert_inside(&r, s, strlen(s));
}

static void test_methods(void **state)
{
    static const struct {
        const char *m;
        sl_method e;
    } cases[] = {
        {"GET", SL_METHOD_GET},
        {"HEAD", SL_METHOD_HEAD},
        {"POST", SL_METHOD_POST},
        {"PUT", SL_METHOD_PUT},
        {"DELETE", SL_METHOD_DELETE},
        {"OPTIONS", SL_METHOD_OPTIONS},
        {"CONNECT", SL_METHOD_CONNECT},
        {"TRACE", SL_METHOD_TRACE},
        {"PATCH", SL_METHOD_PATCH},
        {"get", SL_METHOD_OTHER},
        {"Get", SL_METHOD_OTHER},
        {"GETS", SL_METHOD_OTHER},
        {"GE", SL_METHOD_OTHER},
        {"M-SEARCH", SL_METHOD_OTHER},
        {"!#$%&'*+-.^_`|~09", SL_METHOD_OTHER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s / HTTP/1.1\r\nHost: h\r\n\r\n", cases[i].m);
        sl_http_request r;
        parse_whole(buf, &r);
        assert_int_equal(r.method, cases[i].e);
        assert_int_equal(r.method_len, strlen(cases[i].m));
        assert_memory_equal(r.method_str, cases[i].m, r.method_len);
    }
    assert_string_equal(sl_method_name(SL_METHOD_GET), "GET");
    assert_string_equal(sl_method_name(SL_METHOD_HEAD), "HEAD");
    assert_string_equal(sl_method_name(SL_METHOD_POST), "POST");
    assert_string_equal(sl_method_name(SL_METHOD_PUT), "PUT");
    assert_string_equal(sl_method_name(SL_METHOD_DELETE), "DELETE");
    assert_string_equal(sl_method_name(SL_METHOD_OPTIONS), "OPTIONS");
    assert_string_equal(sl_method_name(SL_METHOD_CONNECT), "CONNECT");
    assert_string_equal(sl_method_name(SL_METHOD_TRACE), "TRACE");
    assert_string_equal(sl_method_name(SL_METHOD_PATCH), "PATCH");
    assert_string_equal(sl_method_name(SL_METHOD_OTHER), "OTHER");
    assert_string_equal(sl_method_name((sl_method)99), "OTHER");
}

static void test_method_refused_status(void **state)
{
    for (sl_method m = SL_METHOD_GET; m < SL_METHOD_OTHER; m++)
        assert_int_equal(sl_method_refused_status(m), 405);
    assert_int_equal(sl_method_refused_status(SL_METHOD_OTHER), 501);
}

/* ---- framing: pipelining, incremental input, line endings ---- */

/* Request heads the parser refuses, with the status: every proper prefix gives 0 or it. */
static const struct tu_case refused_heads[] = {
    /* Bad methods. */
    TU_CASE(" / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("G(ET / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GÉT / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET:/ HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    /* A bare CR. */
    TU_CASE("GET / HTTP/1.1\rHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nA: b\rc\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\n\r\r", -400),
    TU_CASE("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost\r: h\r\n\r\n", -400),
    /* Leading empty lines. */
    TU_CASE("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n", -400),
    TU_CASE("\n\n\n\n\n\n\n\n\nGET / HTTP/1.0\r\n\r\n", -400),
    /* Whitespace is not an empty line. */
    TU_CASE(" \r\nGET / HTTP/1.0\r\n\r\n", -400),
    TU_CASE("\r\n GET / HTTP/1.0\r\n\r\n", -400),
    /* Bad targets. */
    TU_CASE("GET /\0 HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /  HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /\x80 HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    /* HTTP/0.9: no version at all. */
    TU_CASE("GET /\r\n\r\n", -400),
    TU_CASE("GET /\n\n", -400),
    TU_CASE("GET\r\n\r\n", -400),
    /* Versions. */
    /* 1.x with x > 1 is 1.1, so Host is required. */
    TU_CASE("GET / HTTP/1.2\r\n\r\n", -400),
    /* Versions other than 1.x: 505. */
    TU_CASE("GET / HTTP/2.0\r\nHost: h\r\n\r\n", -505),
    TU_CASE("GET / HTTP/0.9\r\n\r\n", -505),
    TU_CASE("GET / HTTP/3.0\n\n", -505),
    TU_CASE("GET / HTTP/9.9\r\n", -505),
    /* Malformed versions. */
    TU_CASE("GET / HTTP/1.10\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/11\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / http/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTPS/1.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\t\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1,1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/a.1\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/10.0\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n", -400),
    TU_CASE("GET / \r\nHost: h\r\n\r\n", -400),
    /* Field syntax errors. */
    TU_CASE("GET / HTTP/1.1\r\nHost : h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A : b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\n: b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nBad(Name): b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nBad Name: b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nN\xc3\xa4me: b\r\n\r\n", -400),
    /* obs-fold. */
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n c\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n\tc\r\n\r\n", -400),
    /* Whitespace right after the request line is the same thing (RFC 9112 §2.2). */
    TU_CASE("GET / HTTP/1.1\r\n Host: h\r\n\r\n", -400),
    /* Control bytes in a value. */
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x01\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x1f\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: h\r\nX-A: \x0b\r\n\r\n", -400),
    /* Host required. */
    TU_CASE("GET / HTTP/1.1\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nX-Host: h\r\n\r\n", -400),
    /* Host twice. */
    TU_CASE("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n", -400),
    TU_CASE("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", -400),
    /* Transfer codings other than chunked alone: 501. */
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -501),
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip;q=1, chunked\r\n\r\n", -501),
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
            "Transfer-Encoding: chunked\r\n\r\n", -501),
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity,chunked\r\n\r\n", -501),
    /* Transfer-Encoding with Content-Length. */
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            -400),
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            -400),
    TU_CASE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nTransfer-Encoding: gzip\r\n\r\n",
            -400),
    /* Transfer-Encoding on HTTP/1.0. */
    TU_CASE("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
};

static void test_refused_heads(void **state)
{
    TU_EACH(c, refused_heads) expect_err_n(c->in, c->len, &deflim, c->want);
}

static void test_pipelined(void **state)
{
    const char *a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    const char *b = "HEAD /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof buf, "%s%sGET /c HTT", a, b);
    size_t len = strlen(buf);
    sl_http_request r;

    int n1 = sl_http_parse_request(buf, len, &deflim, &r);
    assert_int_equal(n1, (int)strlen(a));
    assert_int_equal(r.method, SL_METHOD_GET);
    assert_memory_equal(r.target, "/a", 2);
    assert_false(r.conn_close);
    assert_inside(&r, buf, (size_t)n1);

    int n2 = sl_http_parse_request(buf + n1, len - (size_t)n1, &deflim, &r);
    assert_int_equal(n2, (int)strlen(b));
    assert_int_equal(r.method, SL_METHOD_HEAD);
    assert_memory_equal(r.target, "/b", 2);
    assert_true(r.conn_close);
    assert_inside(&r, buf + n1, (size_t)n2);

    int n3 = sl_http_parse_request(buf + n1 + n2, len - (size_t)(n1 + n2), &deflim, &r);
    assert_int_equal(n3, 0);
}

static void test_pipelined_bare_lf(void **state)
{
    const char *buf = "GET /a HTTP/1.0\n\nGET /b HTTP/1.0\n\n";
    sl_http_request r;
    int n1 = sl_http_parse_request(buf, strlen(buf), &deflim, &r);
    assert_int_equal(n1, 17);
    int n2 = sl_http_parse_request(buf + n1, strlen(buf) - 17, &deflim, &r);
    assert_int_equal(n2, 17);
    assert_memory_equal(r.target, "/b", 2);
}

static void test_bytes_after_head_ignored(void **state)
{
    /* A body (here with a NUL and a bare CR) follows the head; the parser must stop at head_len. */
    const char buf[] = "POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n\0\r\x01\xff";
    sl_http_request r;
    int n = parse_n(buf, sizeof buf - 1, &deflim, &r);
    assert_int_equal(n, (int)(sizeof buf - 1 - 4));
    assert_int_equal(r.content_length, 4);
    assert_int_equal(r.method, SL_METHOD_POST);
}

static void test_incremental(void **state)
{
    expect_ok("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_ok("GET /x HTTP/1.0\r\n\r\n");
    expect_ok("GET /x HTTP/1.0\n\n");
    expect_ok("\r\n\nGET /x HTTP/1.1\nHost: h\r\nA: \t b \t\r\n\n");
    expect_ok("POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    expect_ok(
        "PUT /p HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 5, 5\r\nConnection: close\r\n\r\n");
    expect_ok("GET / HTTP/1.1\r\nHost: h\r\nX-Bin: \x80\xff\xfe text\r\n\r\n");
}

static void test_bare_lf(void **state)
{
    sl_http_request r;
    const char *s = "GET /p HTTP/1.1\nHost: h\nUser-Agent: ua\r\nAccept: */*\n\n";
    parse_whole(s, &r);
    assert_int_equal(r.n_headers, 3);
    assert_true(hv_eq(r.user_agent, "ua"));
    assert_true(hv_eq(&r.headers[2], "*/*"));
    /* The empty line itself may be a bare LF after CRLF lines, and vice versa. */
    expect_ok("GET / HTTP/1.1\r\nHost: h\r\n\n");
    expect_ok("GET / HTTP/1.1\nHost: h\n\r\n");
}

static void test_bare_cr(void **state)
{
    /* A CR at the very end is not an error yet: its LF may be on the way. */
    assert_int_equal(parse("GET / HTTP/1.1\r"), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r"), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n\r"), 0);
    assert_int_equal(parse("\r"), 0);
}

static void test_leading_empty_lines(void **state)
{
    sl_http_request r;
    const char *s = "\r\n\r\nGET / HTTP/1.0\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.head_len, strlen(s));
    assert_memory_equal(r.method_str, "GET", 3);
    expect_ok("\n\n\n\n\n\n\n\nGET / HTTP/1.0\r\n\r\n");
    expect_ok("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n");
    /* Leading empty lines do not count against max_head / max_line. */
    sl_http_limits lim = {19, 16, 4};
    expect_ok_lim("\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n", &lim);
}

/* ---- the request line ---- */

static void test_target_forms(void **state)
{
    sl_http_request r;
    const char *s = "GET http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.target_len, strlen("http://example.com:8080/p?q"));
    assert_memory_equal(r.target, "http://example.com:8080/p?q", r.target_len);

    s = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.method, SL_METHOD_OPTIONS);
    assert_int_equal(r.target_len, 1);
    assert_int_equal(r.target[0], '*');

    s = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.method, SL_METHOD_CONNECT);
    assert_memory_equal(r.target, "example.com:443", r.target_len);

    /* Every visible ASCII byte is accepted raw; decoding is not the parser's job. */
    s = "GET /%7E!\"#$&'()*+,-.:;<=>?@[\\]^_`{|}~ HTTP/1.1\r\nHost: h\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.target_len, strlen("/%7E!\"#$&'()*+,-.:;<=>?@[\\]^_`{|}~"));
}

static void test_versions(void **state)
{
    sl_http_request r;
    const char *s = "GET / HTTP/1.0\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.version, 10);
    assert_null(r.host); /* not required in 1.0 */
    s = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.version, 11);
    s = "GET / HTTP/1.2\r\nHost: h\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.version, 11);
    s = "GET / HTTP/1.9\r\nHost: h\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.version, 11);
}

static void test_version_505(void **state)
{
    sl_http_request r;
    assert_int_equal(parse_n("GET / HTTP/2.0\r\n", 16, &deflim, &r), -505);
    assert_int_equal(r.version, 0);
}

/* ---- field lines ---- */

static void test_obs_fold(void **state)
{
    /* A continuation line is malformed, not one field too many. */
    sl_http_limits one = {4096, 4096, 1};
    expect_err_lim("GET / HTTP/1.1\r\nHost: h\r\n x\r\n\r\n", &one, -400);
}

static void test_values_trimmed(void **state)
{
    sl_http_request r;
    const char *s = "GET / HTTP/1.1\r\nHost:h\r\nA: \t x \t y\t \r\nB:\r\nC:   \r\nD:z\r\n\r\n";
    parse_whole(s, &r);
    assert_int_equal(r.n_headers, 5);
    assert_true(hv_eq(r.host, "h"));
    assert_true(hv_eq(&r.headers[1], "x \t y"));
    assert_true(hv_eq(&r.headers[2], ""));
    assert_true(hv_eq(&r.headers[3], ""));
    assert_true(hv_eq(&r.headers[4], "z"));
    assert_inside(&r, s, strlen(s));
}

static void test_obs_text(void **state)
{
    sl_http_request r;
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9 \x80\xff\r\n\r\n";
    parse_whole(s, &r);
    assert_true(hv_eq(&r.headers[1], "caf\xc3\xa9 \x80\xff"));
}

/* ---- Host ---- */

static void test_host_required(void **state)
{
    expect_ok("GET / HTTP/1.1\r\nHost:\r\n\r\n"); /* empty Host is legal (RFC 9112 §3.2) */
}

static void test_host_values(void **state)
{
    static const char *const good[] = {
        "example.com",
        "EXAMPLE.com:80",
        "a",
        "localhost:",
        "127.0.0.1",
        "127.0.0.1:8080",
        "[::1]",
        "[::1]:443",
        "[2001:db8::a:b]",
        "[1:2:3:4:5:6:7:8]",
        "[::ffff:192.0.2.1]",
        "[1::]",
        "[v1.fe80::a+b]",
        "xn--bcher-kva.example",
        "a_b~c!$&'()*+,;=",
        "%41b.example",
    };
    static const char *const bad[] = {
        "a b",
        "a\tb",
        "a/b",
        "a@b",
        "a?b",
        "a#b",
        "[::1",
        "::1",
        "[::1]x",
        "[::1]:8a",
        "[1:2:3:4:5:6:7:8:9]",
        "[1:2:3]",
        "[1::2::3]",
        "[:1]",
        "[1:]",
        "[::1.2.3]",
        "[::256.0.0.1]",
        "[::01.2.3.4]",
        "[12345::]",
        "[]",
        "[v.x]",
        "[v1.]",
        "[vg.x]",
        "h:80:80",
        ":80",
        "h:-1",
        "h:8 0",
        "%4",
        "%zz",
        "\"h\"",
        "h\x80",
    };
    char buf[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
        if (parse(buf) != (int)strlen(buf)) fail_msg("Host \"%s\" refused", good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
        if (parse(buf) != -400) fail_msg("Host \"%s\" accepted", bad[i]);
    }
}

/* ---- Content-Length ---- */

static long long cl_of(const char *fields)
{
    char buf[512];
    snprintf(buf, sizeof buf, "POST / HTTP/1.1\r\nHost: h\r\n%s\r\n", fields);
    sl_http_request r;
    int rc = parse_n(buf, strlen(buf), &deflim, &r);
    if (rc < 0) return rc;
    assert_int_equal(rc, (int)strlen(buf));
    return r.content_length;
}

static void test_content_length(void **state)
{
    assert_true(cl_of("") == -1);
    assert_true(cl_of("Content-Length: 0\r\n") == 0);
    assert_true(cl_of("Content-Length: 42\r\n") == 42);
    assert_true(cl_of("content-length:  007 \r\n") == 7);
    assert_true(cl_of("Content-Length: 9223372036854775807\r\n") == LLONG_MAX);
    assert_true(cl_of("Content-Length: 5, 5\r\n") == 5);
    assert_true(cl_of("Content-Length: 5,5 ,\t5\r\n") == 5);
    assert_true(cl_of("Content-Length: 5\r\nContent-Length: 5\r\n") == 5);
    assert_true(cl_of("Content-Length: 5\r\nContent-Length: 05\r\n") == 5);
}

static void test_content_length_invalid(void **state)
{
    static const char *const bad[] = {
        "Content-Length: \r\n",
        "Content-Length: -1\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: 5a\r\n",
        "Content-Length: 0x10\r\n",
        "Content-Length: 5 5\r\n",
        "Content-Length: 5.0\r\n",
        "Content-Length: 5, 6\r\n",
        "Content-Length: 5,\r\n",
        "Content-Length: ,5\r\n",
        "Content-Length: 5,,5\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 6\r\nX: y\r\nContent-Length: 5, 5\r\n",
        "Content-Length: 9223372036854775808\r\n",
        "Content-Length: 99999999999999999999999999\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (cl_of(bad[i]) != -400) fail_msg("accepted: %s", bad[i]);
    }
}

/* sl_http_content_length on its own, as the request and the upstream response parsers call it:
 * one field line's value against the value of the lines before it. */
static int cl_line(const char *v, long long *cl)
{
    char *copy = malloc(strlen(v) + 1); /* exactly sized: ASan sees a read past n */
    assert_non_null(copy);
    memcpy(copy, v, strlen(v) + 1);
    int rc = sl_http_content_length(copy, strlen(v), cl);
    free(copy);
    return rc;
}

static void test_content_length_shared(void **state)
{
    long long cl = -1;
    assert_int_equal(cl_line("0", &cl), 0);
    assert_true(cl == 0);
    cl = -1;
    assert_int_equal(cl_line(" 9223372036854775807 ", &cl), 0);
    assert_true(cl == LLONG_MAX);
    cl = -1;
    assert_int_equal(cl_line("12,12 ,\t012", &cl), 0);
    assert_true(cl == 12);
    /* Agreement with the earlier lines. */
    assert_int_equal(cl_line("12", &cl), 0);
    assert_true(cl == 12);
    assert_int_equal(cl_line("13", &cl), -EINVAL);
    cl = 7;
    assert_int_equal(cl_line("7, 8", &cl), -EINVAL);

    static const char *const bad[] = {"", " ", "-1", "+5", "5a", "0x10", "5 5", "5.0", "5, 6",
                                      "5,", ",5", "5,,5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cl = -1;
        if (cl_line(bad[i], &cl) != -EINVAL) fail_msg("not -EINVAL: \"%s\"", bad[i]);
    }
    cl = -1;
    assert_int_equal(cl_line("9223372036854775808", &cl), -EOVERFLOW);
    cl = -1;
    assert_int_equal(cl_line("1, 99999999999999999999999999", &cl), -EOVERFLOW);
}

/* ---- Transfer-Encoding ---- */

static void test_transfer_encoding_chunked(void **state)
{
    sl_http_request r;
    const char *s = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    parse_whole(s, &r);
    assert_true(r.chunked);
    assert_int_equal(r.content_length, -1);
    s = "POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding:  CHUNKED \r\n\r\n";
    parse_whole(s, &r);
    assert_true(r.chunked);
    /* Empty list elements are ignored (RFC 9110 §5.6.1). */
    s = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: , chunked ,\r\n\r\n";
    parse_whole(s, &r);
    assert_true(r.chunked);
}

static void test_transfer_encoding_400(void **state)
{
    static const char *const bad[] = {
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked, gzip\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: \r\n",
        "Transfer-Encoding: chunked;x=1\r\n",
        "Transfer-Encoding: chunke\r\n",
        "Transfer-Encoding: chunked x\r\n",
        "Transfer-Encoding: \"chunked\"\r\n",
        "Transfer-Encoding: xchunked\r\n",
    };
    char buf[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(buf, sizeof buf, "POST / HTTP/1.1\r\nHost: h\r\n%s\r\n", bad[i]);
        expect_err(buf, -400);
    }
}

static void test_transfer_encoding_with_content_length(void **state)
{
    /* Refused as soon as the second field line is complete, before the head ends. */
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
        -400);
}

static void test_transfer_encoding_http10(void **state)
{
    sl_http_request r;
    const char *s = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n";
    assert_int_equal(parse_n(s, strlen(s), &deflim, &r), -400);
    assert_int_equal(r.version, 10);
}

/* ---- Connection ---- */

static void test_connection_tokens(void **state)
{
    sl_http_request r;
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, Upgrade\r\n"
                    "Connection: ,CLOSE ,\r\n\r\n";
    parse_whole(s, &r);
    assert_true(r.conn_close);
    assert_true(r.conn_keep_alive);
    assert_true(r.conn_upgrade);
    s = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    parse_whole(s, &r);
    assert_false(r.conn_close);
    assert_true(r.conn_keep_alive);
    assert_false(r.conn_upgrade);
    s = "GET / HTTP/1.1\r\nHost: h\r\nConnection: closed, keep-alives, x-close\r\n\r\n";
    parse_whole(s, &r);
    assert_false(r.conn_close || r.conn_keep_alive || r.conn_upgrade);
}

static void test_list_has_token(void **state)
{
    const char *v = " a , Keep-Alive,,\tclose\t";
    assert_true(sl_http_list_has_token(v, strlen(v), "a"));
    assert_true(sl_http_list_has_token(v, strlen(v), "keep-alive"));
    assert_true(sl_http_list_has_token(v, strlen(v), "CLOSE"));
    assert_false(sl_http_list_has_token(v, strlen(v), "keep"));
    assert_false(sl_http_list_has_token(v, strlen(v), "alive"));
    assert_false(sl_http_list_has_token(v, strlen(v), "b"));
    assert_false(sl_http_list_has_token("", 0, "close"));
    assert_false(sl_http_list_has_token(",,, ,", 5, "close"));
    assert_false(sl_http_list_has_token("close;x=1", 9, "close"));
    assert_false(sl_http_list_has_token("clo se", 6, "close"));
    /* Only len bytes count. */
    assert_false(sl_http_list_has_token("close", 4, "close"));
    assert_true(sl_http_list_has_token("close,x", 5, "close"));
}

/* ---- limits ---- */

static void test_max_line(void **state)
{
    /* "GET /aaaa HTTP/1.1" is 18 bytes; the CRLF does not count. */
    const char *s = "GET /aaaa HTTP/1.1\r\nHost: h\r\n\r\n";
    sl_http_limits at = {4096, 18, 64}, under = {4096, 17, 64};
    expect_ok_lim(s, &at);
    expect_err_lim(s, &under, -414);
    /* A bare LF line has the same budget. */
    expect_ok_lim("GET /aaaa HTTP/1.1\nHost: h\n\n", &at);
    /* Without a line end, the byte past max_line is refused at once. */
    assert_int_equal(parse_lim("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaa", &under), -414);
    assert_int_equal(parse_lim("GET /aaaa HTTP/1.", &under), 0);
    assert_int_equal(parse_lim("GET /aaaa HTTP/1.1", &under), -414);
    /* A long method is a long request line too. */
    assert_int_equal(parse_lim("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", &under), -414);
    /* max_line does not limit field lines. */
    sl_http_limits tiny = {4096, 14, 64};
    expect_ok_lim("GET / HTTP/1.1\r\nHost: a-very-long-host-name-longer-than-fourteen\r\n\r\n",
                  &tiny);
}

static void test_max_head(void **state)
{
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\n\r\n"; /* 27 bytes */
    assert_int_equal(strlen(s), 27);
    sl_http_limits at = {27, 4096, 64}, under = {26, 4096, 64};
    expect_ok_lim(s, &at);
    expect_err_lim(s, &under, -431);
    const char *lf = "GET / HTTP/1.1\nHost: h\n\n"; /* 24 bytes */
    sl_http_limits at_lf = {24, 4096, 64}, under_lf = {23, 4096, 64};
    expect_ok_lim(lf, &at_lf);
    expect_err_lim(lf, &under_lf, -431);
    /* No end of head within max_head bytes: refused before the head ends. */
    sl_http_limits small = {40, 4096, 64};
    assert_int_equal(
        parse_lim("GET / HTTP/1.1\r\nHost: h\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaa", &small), -431);
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\nHost: h\r\nX-Long: aaaaaaa", &small), 0);
    /* The request line overrunning max_head is the request line's fault. */
    sl_http_limits headlim = {10, 4096, 64};
    assert_int_equal(parse_lim("GET /abcdefghijklmnop HTTP/1.1\r\n", &headlim), -414);
    /* ... unless only its CRLF is past the limit. */
    sl_http_limits crlf = {14, 4096, 64};
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\n\r\n", &crlf), -431);
}

/* Every max_line and max_head from 0 past the head's length, at every prefix, against the rule the
 * header states: the bytes are examined left to right, and the first one at or past a limit is
 * refused once it has arrived (before that, "need more"). A request-line byte past either limit
 * is the line's fault (-414); its line end and every later byte past max_head is the head's (-431).
 * The parser scans runs of bytes in one go up to the nearest limit; this pins where it stops. */
static void test_limits_at_every_offset(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "GET /a/b.txt HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /x?q=1 HTTP/1.1\nHost: example.org:8080\nAccept: */*\n\n",
        "HEAD / HTTP/1.0\r\nX-Empty:\r\nX-Ows: \t a b \t\r\nX-Obs: \x80\xff\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost:\r\nConnection: keep-alive, Upgrade\r\nUser-Agent: t/1\r\n\r\n",
    };
    sl_http_request *r = malloc(sizeof *r);
    assert_non_null(r);
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        const char *s = heads[i];
        size_t n = strlen(s), rl = strcspn(s, "\r\n");
        for (size_t line = 0; line <= rl + 2; line++) {
            for (size_t head = 0; head <= n + 1; head++) {
                sl_http_limits lim = {head, line, SL_HTTP_MAX_HEADERS};
                size_t line_stop = line < head ? line : head;
                size_t first_bad = SIZE_MAX;
                int err = 0;
                if (line_stop < rl) {
                    first_bad = line_stop;
                    err = -414;
                } else if (head < n) {
                    first_bad = head;
                    err = -431;
                }
                for (size_t k = 0; k <= n; k++) {
                    int want = first_bad != SIZE_MAX && k > first_bad ? err : k == n ? (int)n : 0;
                    int rc = parse_n(s, k, &lim, r);
                    if (rc != want)
                        fail_msg("head %zu, max_line %zu, max_head %zu, prefix %zu: %d, want %d", i,
                                 line, head, k, rc, want);
                }
            }
        }
    }
    free(r);
}

static void test_max_headers(void **state)
{
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    sl_http_limits at = {4096, 4096, 3}, under = {4096, 4096, 2};
    expect_ok_lim(s, &at);
    expect_err_lim(s, &under, -431);
    /* Refused as soon as the extra field line starts. */
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB", &under), -431);
    assert_int_equal(parse_lim("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n", &under), 0);
    /* max_headers 0 still allows a head without fields. */
    sl_http_limits none = {4096, 4096, 0};
    expect_ok_lim("GET / HTTP/1.0\r\n\r\n", &none);
    expect_err_lim("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &none, -431);
}

static void test_max_headers_clamped(void **state)
{
    /* max_headers above SL_HTTP_MAX_HEADERS must not overrun the array. */
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < SL_HTTP_MAX_HEADERS; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "X%d: %d\r\n", i, i);
    size_t before_end = n;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\n");
    sl_http_limits big = {1 << 20, 4096, 1000};
    sl_http_request r;
    assert_int_equal(sl_http_parse_request(buf, n, &big, &r), (int)n);
    assert_int_equal(r.n_headers, SL_HTTP_MAX_HEADERS);
    assert_inside(&r, buf, n);
    /* One more field line. */
    n = before_end +
        (size_t)snprintf(buf + before_end, sizeof buf - before_end, "Extra: 1\r\n\r\n");
    expect_err_n(buf, n, &big, -431);
}

/* The connection answers an error to HEAD without a body, so the method must survive every error
 * found after its token: 400 (no Host), 414, 431, 505. */
static void test_method_kept_on_error(void **state)
{
    sl_http_request r;
    sl_http_limits small = {64, 32, SL_HTTP_MAX_HEADERS};
    const char *cases[][2] = {
        {"HEAD / HTTP/1.1\r\n\r\n", "400"},
        {"HEAD /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n", "414"},
        {"HEAD / HTTP/1.1\r\nHost: h\r\nX: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", "431"},
        {"HEAD / HTTP/2.0\r\n", "505"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse_n(cases[i][0], strlen(cases[i][0]), &small, &r);
        assert_int_equal(rc, -atoi(cases[i][1]));
        assert_int_equal(r.method, SL_METHOD_HEAD);
        assert_int_equal(r.method_len, 4);
    }
    /* Before the method token is complete nothing is known. */
    assert_int_equal(parse_n("HEA\x01", 4, &deflim, &r), -400);
    assert_int_equal(r.method, SL_METHOD_OTHER);
}

/* ---- fields on several lines (RFC 9110 §5.3) ---- */

static void test_field_lines_linked(void **state)
{
    const char *s = "GET / HTTP/1.1\r\n"
                    "If-None-Match: \"a\"\r\n"
                    "Host: h\r\n"
                    "if-none-match: \"b\", \"c\"\r\n"
                    "X-A: 1\r\n"
                    "IF-NONE-MATCH:\r\n"
                    "X-AB: 2\r\n"
                    "x-a: 3\r\n"
                    "\r\n";
    sl_http_request r;
    parse_whole(s, &r);
    const sl_http_header *h = r.if_none_match;
    assert_ptr_equal(h, &r.headers[0]);
    assert_ptr_equal(h->next, &r.headers[2]);
    assert_ptr_equal(h->next->next, &r.headers[4]);
    assert_null(h->next->next->next);
    assert_null(r.host->next);
    const sl_http_header *xa = sl_http_find_header(&r, "X-A");
    assert_ptr_equal(xa, &r.headers[3]);
    assert_ptr_equal(xa->next, &r.headers[6]); /* not X-AB: names match whole */
    assert_null(r.headers[5].next);

    char buf[64];
    size_t n = sl_http_field_join(h, ", ", buf, sizeof buf);
    assert_int_equal(n, strlen("\"a\", \"b\", \"c\", "));
    assert_memory_equal(buf, "\"a\", \"b\", \"c\", ", n);
    /* Sizing call and a short buffer: the length is always the whole, the bytes a prefix. */
    assert_int_equal(sl_http_field_join(h, ", ", NULL, 0), n);
    memset(buf, '#', sizeof buf);
    assert_int_equal(sl_http_field_join(h, ", ", buf, 5), n);
    assert_memory_equal(buf, "\"a\", #", 6);
    assert_int_equal(sl_http_field_join(xa, "; ", buf, sizeof buf), 4);
    assert_memory_equal(buf, "1; 3", 4);
    assert_int_equal(sl_http_field_join(NULL, ", ", buf, sizeof buf), 0);
}

/* The interpreted list fields count every line: a Connection token on a second line works. */
static void test_connection_over_lines(void **state)
{
    sl_http_request r;
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo\r\nConnection: close\r\n\r\n";
    parse_whole(s, &r);
    assert_true(r.conn_close);
}

static void test_list_next(void **state)
{
    const char *v = " a ,, b\t,c d ,";
    size_t pos = 0, n;
    const char *e;
    assert_true(sl_http_list_next(v, strlen(v), &pos, &e, &n));
    assert_int_equal(n, 1);
    assert_memory_equal(e, "a", 1);
    assert_true(sl_http_list_next(v, strlen(v), &pos, &e, &n));
    assert_memory_equal(e, "b", n);
    assert_true(sl_http_list_next(v, strlen(v), &pos, &e, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(e, "c d", 3);
    assert_false(sl_http_list_next(v, strlen(v), &pos, &e, &n));
    pos = 0;
    assert_false(sl_http_list_next("", 0, &pos, &e, &n));
}

/* ---- early errors on incomplete input ---- */

static void test_early_errors(void **state)
{
    sl_http_request r;
    assert_int_equal(parse_n("\0", 1, &deflim, &r), -400);
    assert_int_equal(parse_n("G\0", 2, &deflim, &r), -400);
    assert_int_equal(parse_n("\x16\x03\x01\x02\x00", 5, &deflim, &r), -400); /* a TLS ClientHello */
    assert_int_equal(parse_n("PRI * HTTP/2.0\r\n", 16, &deflim, &r), -505);  /* the h2 preface */
    assert_int_equal(parse("GET /\x7f"), -400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHo st"), -400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost"), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r"), 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n"), -400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: x\r\n"), -400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nX: \x01"), -400);
    assert_int_equal(parse("GET / HTTP/1.1\r\n\t"), -400);
    /* Empty input is just "need more". */
    assert_int_equal(parse_n("", 0, &deflim, &r), 0);
}

static void test_request_reset_between_calls(void **state)
{
    sl_http_request r;
    const char *a = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n"
                    "Range: bytes=1-2\r\n\r\n";
    const char *b = "GET / HTTP/1.0\r\n\r\n";
    parse_whole(a, &r);
    parse_whole(b, &r);
    assert_int_equal(r.content_length, -1);
    assert_false(r.conn_close);
    assert_null(r.host);
    assert_null(r.range);
    assert_int_equal(r.n_headers, 0);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_refused_heads),
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_well_known_headers),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_method_refused_status),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_pipelined_bare_lf),
        cmocka_unit_test(test_bytes_after_head_ignored),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_bare_lf),
        cmocka_unit_test(test_bare_cr),
        cmocka_unit_test(test_leading_empty_lines),
        cmocka_unit_test(test_target_forms),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_version_505),
        cmocka_unit_test(test_obs_fold),
        cmocka_unit_test(test_values_trimmed),
        cmocka_unit_test(test_obs_text),
        cmocka_unit_test(test_host_required),
        cmocka_unit_test(test_host_values),
        cmocka_unit_test(test_content_length),
        cmocka_unit_test(test_content_length_invalid),
        cmocka_unit_test(test_content_length_shared),
        cmocka_unit_test(test_transfer_encoding_chunked),
        cmocka_unit_test(test_transfer_encoding_400),
        cmocka_unit_test(test_transfer_encoding_with_content_length),
        cmocka_unit_test(test_transfer_encoding_http10),
        cmocka_unit_test(test_connection_tokens),
        cmocka_unit_test(test_list_has_token),
        cmocka_unit_test(test_max_line),
        cmocka_unit_test(test_max_head),
        cmocka_unit_test(test_limits_at_every_offset),
        cmocka_unit_test(test_max_headers),
        cmocka_unit_test(test_max_headers_clamped),
        cmocka_unit_test(test_method_kept_on_error),
        cmocka_unit_test(test_field_lines_linked),
        cmocka_unit_test(test_connection_over_lines),
        cmocka_unit_test(test_list_next),
        cmocka_unit_test(test_early_errors),
        cmocka_unit_test(test_request_reset_between_calls))
