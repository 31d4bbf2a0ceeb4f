/* Unit tests for proxy_core/http_resp.c: HTTP/1.x and CGI response heads (syntax, framing
 * fields, limits, the incremental contract that every prefix gives 0 or the whole input's result),
 * body framing and keep-alive decisions, hop-by-hop classification, and the chunked decoder fed
 * whole, byte by byte and in many fragment sizes. Inputs are copied into exactly-sized heap
 * buffers so that AddressSanitizer catches any read past the end. */
#include <errno.h>
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

#include "http_resp.h"

static const sl_upstream_limits deflim = {8192, SL_UPSTREAM_MAX_HEADERS};

typedef int (*parse_fn)(const char *, size_t, const sl_upstream_limits *, sl_upstream_head *);

/* Parses a heap copy of s[0..len) with no slack after it. h may only be inspected for pointer
 * values afterwards, not dereferenced: use parse_keep for that. */
static int parse_n(parse_fn fn, const char *s, size_t len, const sl_upstream_limits *lim,
                   sl_upstream_head *h)
{
    char *copy = tu_copy(s, len);
    int rc = fn(copy, len, lim, h);
    free(copy);
    return rc;
}

/* Every proper prefix gives 0 or want, and the whole input gives want. */
static void expect_n(parse_fn fn, const char *s, size_t len, const sl_upstream_limits *lim,
                     int want)
{
    sl_upstream_head *h = malloc(sizeof *h);
    assert_non_null(h);
    for (size_t k = 0; k < len; k++) {
        int rc = parse_n(fn, s, k, lim, h);
        if (rc != 0 && !(want < 0 && rc == want))
            fail_msg("prefix %zu of \"%.*s\": %d, want 0%s", k, (int)len, s, rc,
                     want < 0 ? " or the error" : "");
    }
    int rc = parse_n(fn, s, len, lim, h);
    if (rc != want) fail_msg("\"%.*s\": %d, want %d", (int)len, s, rc, want);
    free(h);
}

static void http_ok(const char *s)
{
    expect_n(sl_upstream_parse_http, s, strlen(s), &deflim, (int)strlen(s));
}

/* A parse whose result stays inspectable: the buffer is an exact heap copy the caller frees. */
typedef struct parsed {
    char *buf;
    size_t len;
    sl_upstream_head h;
    int rc;
} parsed;

static parsed *parse_keep(parse_fn fn, const char *s, size_t len, const sl_upstream_limits *lim)
{
    parsed *p = malloc(sizeof *p);
    assert_non_null(p);
    p->buf = tu_copy(s, len);
    p->len = len;
    p->rc = fn(p->buf, len, lim, &p->h);
    if (p->rc > 0) {
        for (size_t i = 0; i < p->h.n_fields; i++) {
            const sl_upstream_field *f = &p->h.fields[i];
            assert_true(f->name >= p->buf && f->name + f->name_len <= p->buf + p->rc);
            assert_true(f->value >= p->buf && f->value + f->value_len <= p->buf + p->rc);
        }
    }
    return p;
}

static parsed *http(const char *s)
{
    return parse_keep(sl_upstream_parse_http, s, strlen(s), &deflim);
}

static parsed *cgi(const char *s)
{
    return parse_keep(sl_upstream_parse_cgi, s, strlen(s), &deflim);
}

static void parsed_free(parsed *p)
{
    free(p->buf);
    free(p);
}

static bool eq(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

static bool field_is(const sl_upstream_field *f, const char *name, const char *value)
{
    return f && eq(f->name, f->name_len, name) && eq(f->value, f->value_len, value);
}

/* ---- HTTP status line and fields ---- */

/* Response heads the HTTP parser refuses, with the error: every proper prefix gives 0 or it. */
static const struct tu_case refused_http[] = {
    /* Versions. */
    TU_CASE("HTTP/2.0 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/0.9 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.x 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/11.1 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("http/1.1 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTPS/1.1 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("ICY 200 OK\r\n\r\n", -EPROTO),
    /* Reason text. */
    TU_CASE("HTTP/1.1 200 O\0K\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 O\x01K\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 O\x7fK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\rX\r\n\r\n", -EPROTO),
    /* Status code syntax. */
    TU_CASE("HTTP/1.1 20 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 2000 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 099 Low\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 000 Zero\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 600 High\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 999 High\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 2x0 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1  200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1\t200 OK\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200\tOK\r\n\r\n", -EPROTO),
    TU_CASE(" HTTP/1.1 200 OK\r\n\r\n", -EPROTO),
    TU_CASE("\r\nHTTP/1.1 200 OK\r\n\r\n", -EPROTO),
    /* Field errors. */
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX\0: b\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX : y\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX\t: y\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nA: 1\r\n  continued\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nA: 1\r\n\tcontinued\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\n X: y\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\n: y\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX@Y: 1\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX(Y): 1\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\r\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\x1f\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: 1\r\n\r\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nX: 1\r\n\rX", -EPROTO),
    /* Content-Length. */
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 0x5\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 5,\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: ,5\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 5.0\r\n\r\n", -EPROTO),
    /* Content-Length twice. */
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 42\r\nContent-Length: 43\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 42, 43\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n", -EPROTO),
    /* Transfer-Encoding. */
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n\r\n", -EPROTO),
    /* Transfer-Encoding with Content-Length. */
    TU_CASE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -EPROTO),
    TU_CASE("HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
            -EPROTO),
    /* Transfer-Encoding on HTTP/1.0. */
    TU_CASE("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", -EPROTO),
};

/* Every byte value in a field name: accepted exactly when it is a tchar (RFC 9110 §5.6.2), by
 * both parsers, whatever fields[] held before (the parser does not clear it). */
static void test_field_name_every_byte(void **state)
{
    (void)state;
    sl_upstream_head *h = malloc(sizeof *h);
    assert_non_null(h);
    memset(h, 0xa5, sizeof *h);
    for (int b = 0; b < 256; b++) {
        bool tchar = (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') ||
                     (b && strchr("!#$%&'*+-.^_`|~", b));
        char http[64], cgi[64];
        int hn = snprintf(http, sizeof http, "HTTP/1.1 200 OK\r\nX%cY: v\r\n\r\n", b);
        int cn = snprintf(cgi, sizeof cgi, "Status: 200\r\nX%cY: v\r\n\r\n", b);
        /* (%c of 0 writes a NUL: the lengths come from snprintf, not strlen) */
        /* "X:Y: v" is a field "X" with the value "Y: v". */
        bool ok = tchar || b == ':';
        int want_h = ok ? hn : -EPROTO, want_c = ok ? cn : -EPROTO;
        int rh = parse_n(sl_upstream_parse_http, http, (size_t)hn, &deflim, h);
        int rc = parse_n(sl_upstream_parse_cgi, cgi, (size_t)cn, &deflim, h);
        if (rh != want_h || rc != want_c)
            fail_msg("byte 0x%02x in a field name: http %d (want %d), cgi %d (want %d)", b, rh,
                     want_h, rc, want_c);
        if (tchar) {
            assert_int_equal(h->n_fields, 2);
            assert_int_equal(h->fields[1].name_len, 3);
        }
    }
    free(h);
}

static void test_refused_http(void **state)
{
    TU_EACH(c, refused_http) expect_n(sl_upstream_parse_http, c->in, c->len, &deflim, c->want);
}

static void test_http_simple(void **state)
{
    const char *s = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12\r\n\r\n";
    parsed *p = http(s);
    assert_int_equal(p->rc, (int)strlen(s));
    assert_int_equal(p->h.head_len, strlen(s));
    assert_int_equal(p->h.version, 11);
    assert_int_equal(p->h.status, 200);
    assert_true(eq(p->h.reason, p->h.reason_len, "OK"));
    assert_int_equal(p->h.n_fields, 2);
    assert_true(field_is(&p->h.fields[0], "Content-Type", "text/html"));
    assert_true(field_is(&p->h.fields[1], "Content-Length", "12"));
    assert_int_equal(p->h.content_length, 12);
    assert_false(p->h.chunked);
    assert_false(p->h.conn_close || p->h.conn_keep_alive || p->h.conn_upgrade);
    assert_null(p->h.location);
    assert_null(p->h.status_field);
    assert_ptr_equal(sl_upstream_find(&p->h, "content-TYPE"), &p->h.fields[0]);
    assert_null(sl_upstream_find(&p->h, "Content"));
    parsed_free(p);
    http_ok(s);
}

static void test_http_versions(void **state)
{
    parsed *p = http("HTTP/1.0 200 OK\r\n\r\n");
    assert_int_equal(p->h.version, 10);
    parsed_free(p);
    p = http("HTTP/1.9 200 OK\r\n\r\n");
    assert_int_equal(p->h.version, 11);
    parsed_free(p);
}

static void test_http_status_without_reason(void **state)
{
    parsed *p = http("HTTP/1.1 204\r\n\r\n");
    assert_int_equal(p->rc, 16);
    assert_int_equal(p->h.status, 204);
    assert_int_equal(p->h.reason_len, 0);
    parsed_free(p);
    p = http("HTTP/1.1 404 \r\nX: y\r\n\r\n");
    assert_int_equal(p->h.status, 404);
    assert_int_equal(p->h.reason_len, 0);
    parsed_free(p);
    http_ok("HTTP/1.1 204\r\n\r\n");
    http_ok("HTTP/1.1 204\n\n");
}

static void test_http_reason_text(void **state)
{
    parsed *p = http("HTTP/1.1 500 Internal\tServer  \xc3\xa9rror \r\n\r\n");
    assert_int_equal(p->h.status, 500);
    assert_true(eq(p->h.reason, p->h.reason_len, "Internal\tServer  \xc3\xa9rror"));
    parsed_free(p);
}

static void test_http_status_code_syntax(void **state)
{
    http_ok("HTTP/1.1 100 Continue\r\n\r\n");
    http_ok("HTTP/1.1 599 Custom\r\n\r\n");
}

static void test_http_lf_only(void **state)
{
    const char *s = "HTTP/1.1 200 OK\nA: 1\r\nB: 2\n\n";
    parsed *p = http(s);
    assert_int_equal(p->rc, (int)strlen(s));
    assert_int_equal(p->h.n_fields, 2);
    assert_true(field_is(&p->h.fields[0], "A", "1"));
    assert_true(field_is(&p->h.fields[1], "B", "2"));
    parsed_free(p);
    http_ok(s);
}

static void test_http_value_trimming(void **state)
{
    parsed *p = http("HTTP/1.1 200 OK\r\nA:   spaced  out \t\r\nB:\r\nC: \t \r\nD:x\r\n\r\n");
    assert_true(p->rc > 0);
    assert_int_equal(p->h.n_fields, 4);
    assert_true(field_is(&p->h.fields[0], "A", "spaced  out"));
    assert_true(field_is(&p->h.fields[1], "B", ""));
    assert_true(field_is(&p->h.fields[2], "C", ""));
    assert_true(field_is(&p->h.fields[3], "D", "x"));
    parsed_free(p);
}

static void test_http_obs_text_value(void **state)
{
    parsed *p = http("HTTP/1.1 200 OK\r\nX: caf\xc3\xa9 \xff\r\n\r\n");
    assert_true(p->rc > 0);
    assert_true(field_is(&p->h.fields[0], "X", "caf\xc3\xa9 \xff"));
    parsed_free(p);
}

static void test_http_bytes_after_head_ignored(void **state)
{
    const char s[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n\0\x01\xff garbage\r\n";
    parsed *p = parse_keep(sl_upstream_parse_http, s, sizeof s - 1, &deflim);
    assert_int_equal(p->rc, 38);
    assert_int_equal(p->h.content_length, 3);
    parsed_free(p);
}

/* ---- framing fields ---- */

static long long http_cl(const char *s)
{
    parsed *p = http(s);
    long long cl = p->rc > 0 ? p->h.content_length : -100 + p->rc;
    parsed_free(p);
    return cl;
}

static void test_http_content_length(void **state)
{
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\n\r\n"), -1);
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), 0);
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\ncontent-length: 0005\r\n\r\n"), 5);
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n"),
                     9223372036854775807LL);
}

static void test_http_duplicate_content_length(void **state)
{
    assert_int_equal(
        http_cl("HTTP/1.1 200 OK\r\nContent-Length: 42\r\nX: 1\r\nContent-Length: 42\r\n\r\n"),
        42);
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\nContent-Length: 42, 42 ,42\r\n\r\n"), 42);
    assert_int_equal(http_cl("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 007\r\n\r\n"),
                     7);
}

static void test_http_transfer_encoding(void **state)
{
    parsed *p = http("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_true(p->rc > 0);
    assert_true(p->h.chunked);
    assert_int_equal(p->h.content_length, -1);
    parsed_free(p);
    p = http("HTTP/1.1 200 OK\r\ntransfer-encoding:  CHUNKED ,\r\n\r\n");
    assert_true(p->rc > 0);
    assert_true(p->h.chunked);
    parsed_free(p);
}

static void test_http_connection_tokens(void **state)
{
    parsed *p = http("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    assert_true(p->h.conn_close);
    assert_false(p->h.conn_keep_alive);
    parsed_free(p);
    p = http("HTTP/1.1 101 Switching\r\nConnection: Keep-Alive ,, UPGRADE\r\n\r\n");
    assert_false(p->h.conn_close);
    assert_true(p->h.conn_keep_alive);
    assert_true(p->h.conn_upgrade);
    parsed_free(p);
    p = http("HTTP/1.1 200 OK\r\nConnection: x-close, closed\r\nConnection: foo\r\n\r\n");
    assert_false(p->h.conn_close);
    parsed_free(p);
    p = http("HTTP/1.1 200 OK\r\nConnection: foo\r\nconnection: CLOSE\r\n\r\n");
    assert_true(p->h.conn_close);
    parsed_free(p);
}

static void test_http_location_first(void **state)
{
    parsed *p = http("HTTP/1.1 301 Moved\r\nLocation: /a\r\nLocation: /b\r\n\r\n");
    assert_true(p->rc > 0);
    assert_true(field_is(p->h.location, "Location", "/a"));
    assert_false(p->h.local_redirect);
    parsed_free(p);
}

/* ---- limits ---- */

static void test_http_head_size_limit(void **state)
{
    const char *s = "HTTP/1.1 200 OK\r\nServer: seekless-test\r\n\r\n";
    size_t n = strlen(s);
    sl_upstream_limits lim = {n, 10};
    expect_n(sl_upstream_parse_http, s, n, &lim, (int)n);
    lim.max_head = n - 1;
    expect_n(sl_upstream_parse_http, s, n, &lim, -E2BIG);
    lim.max_head = 5;
    expect_n(sl_upstream_parse_http, s, n, &lim, -E2BIG);
    lim.max_head = 0;
    expect_n(sl_upstream_parse_http, s, n, &lim, -E2BIG);
    /* The last byte of the final CRLF is what runs over. */
    const char *lf = "HTTP/1.1 200 OK\n\n";
    lim.max_head = strlen(lf) - 1;
    expect_n(sl_upstream_parse_http, lf, strlen(lf), &lim, -E2BIG);
}

static void test_http_error_before_limit_wins(void **state)
{
    /* A syntax error inside the limit is reported even when the input runs past the limit, and
     * the limit is reported even when a syntax error follows it. */
    const char *s = "HTTP/1.1 200 OK\r\nBad Name: x\r\nA: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    sl_upstream_limits lim = {25, 10};
    expect_n(sl_upstream_parse_http, s, strlen(s), &lim, -EPROTO);
    lim.max_head = 19;
    expect_n(sl_upstream_parse_http, s, strlen(s), &lim, -E2BIG);
}

static void test_http_header_count_limit(void **state)
{
    char buf[8192];
    size_t off = (size_t)snprintf(buf, sizeof buf, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 5; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "X-%d: v\r\n", i);
    off += (size_t)snprintf(buf + off, sizeof buf - off, "\r\n");
    sl_upstream_limits lim = {8192, 5};
    expect_n(sl_upstream_parse_http, buf, off, &lim, (int)off);
    lim.max_headers = 4;
    expect_n(sl_upstream_parse_http, buf, off, &lim, -E2BIG);
    lim.max_headers = 0;
    expect_n(sl_upstream_parse_http, buf, off, &lim, -E2BIG);
    expect_n(sl_upstream_parse_http, "HTTP/1.1 200 OK\r\n\r\n", 19, &lim, 19);
}

static void test_http_header_count_clamped(void **state)
{
    size_t cap = 64 + (SL_UPSTREAM_MAX_HEADERS + 1) * 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t off = (size_t)snprintf(buf, cap, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < SL_UPSTREAM_MAX_HEADERS; i++)
        off += (size_t)snprintf(buf + off, cap - off, "X-%d: v\r\n", i);
    size_t end100 = off;
    off += (size_t)snprintf(buf + off, cap - off, "\r\n");
    sl_upstream_limits lim = {1 << 20, 100000};
    parsed *p = parse_keep(sl_upstream_parse_http, buf, off, &lim);
    assert_int_equal(p->rc, (int)off);
    assert_int_equal(p->h.n_fields, SL_UPSTREAM_MAX_HEADERS);
    parsed_free(p);
    off = end100 + (size_t)snprintf(buf + end100, cap - end100, "Y: 1\r\n\r\n");
    p = parse_keep(sl_upstream_parse_http, buf, off, &lim);
    assert_int_equal(p->rc, -E2BIG);
    parsed_free(p);
    free(buf);
}

/* ---- 1xx, framing, keep-alive ---- */

static void test_http_interim_then_final(void **state)
{
    const char *s = "HTTP/1.1 100 Continue\r\n\r\n"
                    "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    size_t len = strlen(s), off = 0;
    int finals = 0, interims = 0;
    while (off < len) {
        parsed *p = parse_keep(sl_upstream_parse_http, s + off, len - off, &deflim);
        assert_true(p->rc > 0);
        bool interim = sl_upstream_interim(&p->h);
        assert_int_equal(sl_upstream_framing(&p->h, false),
                         interim ? SL_BODY_NONE : SL_BODY_LENGTH);
        off += (size_t)p->rc;
        if (interim) {
            interims++;
        } else {
            finals++;
            assert_int_equal(p->h.status, 200);
            assert_int_equal(len - off, (size_t)p->h.content_length);
            parsed_free(p);
            break;
        }
        parsed_free(p);
    }
    assert_int_equal(interims, 2);
    assert_int_equal(finals, 1);
}

static int framing_of(const char *s, bool head)
{
    parsed *p = http(s);
    assert_true(p->rc > 0);
    int f = sl_upstream_framing(&p->h, head);
    parsed_free(p);
    return f;
}

static bool keep_alive_of(const char *s, bool head)
{
    parsed *p = http(s);
    assert_true(p->rc > 0);
    bool k = sl_upstream_keep_alive(&p->h, head);
    parsed_free(p);
    return k;
}

static void test_http_framing(void **state)
{
    const char *cl = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    const char *ch = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    const char *none = "HTTP/1.1 200 OK\r\n\r\n";
    assert_int_equal(framing_of(cl, false), SL_BODY_LENGTH);
    assert_int_equal(framing_of(cl, true), SL_BODY_NONE);
    assert_int_equal(framing_of(ch, false), SL_BODY_CHUNKED);
    assert_int_equal(framing_of(ch, true), SL_BODY_NONE);
    assert_int_equal(framing_of(none, false), SL_BODY_UNTIL_CLOSE);
    assert_int_equal(framing_of(none, true), SL_BODY_NONE);
    assert_int_equal(framing_of("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false),
                     SL_BODY_NONE);
    assert_int_equal(framing_of("HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", false),
                     SL_BODY_NONE);
    assert_int_equal(framing_of("HTTP/1.1 100 Continue\r\n\r\n", false), SL_BODY_NONE);
    assert_int_equal(framing_of("HTTP/1.1 101 Switching Protocols\r\n\r\n", false),
                     SL_BODY_NONE);
    assert_int_equal(framing_of("HTTP/1.1 205 Reset\r\nContent-Length: 0\r\n\r\n", false),
                     SL_BODY_LENGTH);
}

static void test_http_keep_alive(void **state)
{
    assert_true(keep_alive_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", false));
    assert_true(keep_alive_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false));
    assert_true(keep_alive_of("HTTP/1.1 200 OK\r\n\r\n", true));
    assert_true(keep_alive_of("HTTP/1.1 304 Not Modified\r\n\r\n", false));
    assert_false(keep_alive_of("HTTP/1.1 200 OK\r\n\r\n", false));
    assert_false(
        keep_alive_of("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n", false));
    assert_false(keep_alive_of("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false));
    assert_true(keep_alive_of(
        "HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n", false));
    assert_false(keep_alive_of("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", false));
    assert_false(keep_alive_of("HTTP/1.1 101 Switching\r\nConnection: upgrade\r\n\r\n", false));
}

static void test_interim_classification(void **state)
{
    int codes[] = {100, 101, 102, 103, 199, 200, 204, 404};
    bool want[] = {true, false, true, true, true, false, false, false};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char s[64];
        snprintf(s, sizeof s, "HTTP/1.1 %d X\r\n\r\n", codes[i]);
        parsed *p = http(s);
        assert_true(p->rc > 0);
        assert_int_equal(sl_upstream_interim(&p->h), want[i]);
        parsed_free(p);
    }
}

/* ---- CGI heads ---- */

/* CGI heads the parser refuses, with the error: every proper prefix gives 0 or it. */
static const struct tu_case refused_cgi[] = {
    /* Bare LF line ends. */
    TU_CASE("A: 1\n\rB: 2\n\n", -EPROTO),
    /* Status forms. */
    TU_CASE("Status: 4044 Nope\r\n\r\n", -EPROTO),
    TU_CASE("Status: 404x\r\n\r\n", -EPROTO),
    TU_CASE("Status: abc\r\n\r\n", -EPROTO),
    TU_CASE("Status: 99\r\n\r\n", -EPROTO),
    TU_CASE("Status:\r\n\r\n", -EPROTO),
    TU_CASE("Status: 600 Too High\r\n\r\n", -EPROTO),
    TU_CASE("Status: 199 Low\r\n\r\n", -EPROTO),
    TU_CASE("Status: 100 Continue\r\n\r\n", -EPROTO),
    TU_CASE("Status: 200 OK\r\nStatus: 200 OK\r\n\r\n", -EPROTO),
    /* Location with status. */
    TU_CASE("Location: /a\r\nLocation: /b\r\n\r\n", -EPROTO),
    /* Needs a field. */
    TU_CASE("\r\n", -EPROTO),
    TU_CASE("\n", -EPROTO),
    TU_CASE("\r\nContent-Type: text/html\r\n\r\n", -EPROTO),
    /* Framing fields. */
    TU_CASE("Content-Length: 5\nContent-Length: 6\n\n", -EPROTO),
    TU_CASE("Content-Length: five\n\n", -EPROTO),
    /* Syntax errors. */
    TU_CASE("HTTP/1.1 200 OK\r\n\r\n", -EPROTO), /* NPH output is not a CGI head */
    TU_CASE("Content-Type : text/html\r\n\r\n", -EPROTO),
    TU_CASE("Content-Type: text/html\r\n continued\r\n\r\n", -EPROTO),
    TU_CASE(" Content-Type: text/html\r\n\r\n", -EPROTO),
    TU_CASE("Content-Type: text/html\rX\r\n\r\n", -EPROTO),
    TU_CASE("Content-Type: te\x01xt\r\n\r\n", -EPROTO),
    TU_CASE("<html>\r\n\r\n", -EPROTO),
};

static void test_refused_cgi(void **state)
{
    TU_EACH(c, refused_cgi) expect_n(sl_upstream_parse_cgi, c->in, c->len, &deflim, c->want);
}

static void test_cgi_default_200(void **state)
{
    const char *s = "Content-Type: text/html; charset=UTF-8\r\nX-Powered-By: PHP\r\n\r\n<html>";
    parsed *p = cgi(s);
    assert_int_equal(p->rc, (int)strlen(s) - 6);
    assert_int_equal(p->h.version, 0);
    assert_int_equal(p->h.status, 200);
    assert_int_equal(p->h.reason_len, 0);
    assert_int_equal(p->h.n_fields, 2);
    assert_true(field_is(&p->h.fields[0], "Content-Type", "text/html; charset=UTF-8"));
    assert_null(p->h.status_field);
    assert_false(p->h.local_redirect);
    parsed_free(p);
    expect_n(sl_upstream_parse_cgi, s, strlen(s) - 6, &deflim, (int)strlen(s) - 6);
}

static void test_cgi_lf_only(void **state)
{
    const char *s = "Content-type: text/plain\nStatus: 404 Not Found\n\nbody";
    parsed *p = cgi(s);
    assert_int_equal(p->rc, (int)strlen(s) - 4);
    assert_int_equal(p->h.status, 404);
    assert_true(eq(p->h.reason, p->h.reason_len, "Not Found"));
    assert_true(field_is(p->h.status_field, "Status", "404 Not Found"));
    parsed_free(p);
    const char *mixed = "A: 1\r\nB: 2\nC: 3\r\n\n";
    expect_n(sl_upstream_parse_cgi, mixed, strlen(mixed), &deflim, (int)strlen(mixed));
}

static void test_cgi_status_forms(void **state)
{
    parsed *p = cgi("Status: 404\r\n\r\n");
    assert_int_equal(p->h.status, 404);
    assert_int_equal(p->h.reason_len, 0);
    parsed_free(p);
    p = cgi("status:500 \t Oops  here \r\n\r\n");
    assert_int_equal(p->h.status, 500);
    assert_true(eq(p->h.reason, p->h.reason_len, "Oops  here"));
    parsed_free(p);
    p = cgi("Status: 599\tx\r\n\r\n");
    assert_int_equal(p->h.status, 599);
    parsed_free(p);
}

static void test_cgi_location_absolute(void **state)
{
    parsed *p = cgi("Location: https://example.com/x?y=1\r\n\r\n");
    assert_int_equal(p->h.status, 302);
    assert_true(field_is(p->h.location, "Location", "https://example.com/x?y=1"));
    assert_false(p->h.local_redirect);
    parsed_free(p);
}

static void test_cgi_location_local(void **state)
{
    parsed *p = cgi("Location: /index.php?page=2\n\n");
    assert_int_equal(p->h.status, 302);
    assert_true(p->h.local_redirect);
    parsed_free(p);
    p = cgi("Location: //evil.example/\n\n");
    assert_int_equal(p->h.status, 302);
    assert_false(p->h.local_redirect);
    parsed_free(p);
    p = cgi("Location: relative.html\n\n");
    assert_int_equal(p->h.status, 302);
    assert_false(p->h.local_redirect);
    parsed_free(p);
}

static void test_cgi_location_with_status(void **state)
{
    parsed *p = cgi("Location: https://example.com/\r\nStatus: 301 Moved Permanently\r\n\r\n");
    assert_int_equal(p->h.status, 301);
    assert_false(p->h.local_redirect);
    parsed_free(p);
    p = cgi("Status: 200 OK\r\nLocation: /here\r\n\r\n");
    assert_int_equal(p->h.status, 200);
    assert_false(p->h.local_redirect);
    parsed_free(p);
}

static void test_cgi_framing_fields(void **state)
{
    parsed *p = cgi("Transfer-Encoding: chunked\nContent-Length: 5\n\n");
    assert_true(p->rc > 0);
    assert_false(p->h.chunked);
    assert_int_equal(p->h.content_length, 5);
    parsed_free(p);
}

static void test_cgi_limits(void **state)
{
    const char *s = "Content-Type: text/html\nX-A: 1\nX-B: 2\n\n";
    size_t n = strlen(s);
    sl_upstream_limits lim = {n, 3};
    expect_n(sl_upstream_parse_cgi, s, n, &lim, (int)n);
    lim.max_head = n - 1;
    expect_n(sl_upstream_parse_cgi, s, n, &lim, -E2BIG);
    lim.max_head = n;
    lim.max_headers = 2;
    expect_n(sl_upstream_parse_cgi, s, n, &lim, -E2BIG);
}

/* ---- hop-by-hop ---- */

static bool hop(const char *name, const char *conn)
{
    return sl_hop_by_hop(name, strlen(name), conn, conn ? strlen(conn) : 0);
}

static void test_hop_by_hop_fixed(void **state)
{
    const char *yes[] = {"Connection", "connection", "Keep-Alive", "KEEP-ALIVE",
                         "Proxy-Connection", "TE", "te", "Trailer", "Transfer-Encoding",
                         "transfer-encoding", "Upgrade", "upgrade"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(hop(yes[i], NULL));
    const char *no[] = {"Content-Type", "Content-Length", "Trailers", "T", "Connectio",
                        "Connections", "Upgrade-Insecure-Requests", "Keep", "Set-Cookie", ""};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(hop(no[i], NULL));
}

static void test_hop_by_hop_connection_listed(void **state)
{
    assert_true(hop("X-Foo", "close, X-Foo"));
    assert_true(hop("x-foo", "X-FOO"));
    assert_true(hop("X-Foo", " ,, x-foo , close"));
    assert_false(hop("X-Foo-Bar", "close, X-Foo"));
    assert_false(hop("X-Foo", "close, X-Foo-Bar"));
    assert_false(hop("X-Foo", ""));
    assert_false(hop("X-Foo", "X-Foo;x"));
    assert_false(hop("", ", ,"));
    assert_true(hop("Keep-Alive", "close"));
}

static void test_hop_by_hop_head(void **state)
{
    parsed *p = http("HTTP/1.1 200 OK\r\nConnection: X-A\r\nX-A: 1\r\nX-B: 2\r\n"
                     "connection: close, x-b\r\nX-C: 3\r\nKeep-Alive: timeout=5\r\n\r\n");
    assert_true(p->rc > 0);
    assert_true(sl_upstream_hop_by_hop(&p->h, &p->h.fields[0]));
    assert_true(sl_upstream_hop_by_hop(&p->h, &p->h.fields[1]));
    assert_true(sl_upstream_hop_by_hop(&p->h, &p->h.fields[2]));
    assert_true(sl_upstream_hop_by_hop(&p->h, &p->h.fields[3]));
    assert_false(sl_upstream_hop_by_hop(&p->h, &p->h.fields[4]));
    assert_true(sl_upstream_hop_by_hop(&p->h, &p->h.fields[5]));
    parsed_free(p);
}

/* ---- chunked ---- */

typedef struct dechunked {
    char *data;
    size_t len, cap;
    int rc;          /* SL_CHUNKED_END, SL_CHUNKED_NEED or an error */
    size_t consumed; /* total bytes consumed */
} dechunked;

static void dc_append(dechunked *d, const char *p, size_t n)
{
    if (d->len + n > d->cap) {
        d->cap = (d->len + n) * 2;
        d->data = realloc(d->data, d->cap);
        assert_non_null(d->data);
    }
    memcpy(d->data + d->len, p, n);
    d->len += n;
}

/* Decodes s[0..len) in fragments of frag bytes (0: whole), each an exact heap copy. */
static void dechunk(const char *s, size_t len, size_t frag, size_t max_trailer, dechunked *d)
{
    memset(d, 0, sizeof *d);
    sl_chunked_decoder c;
    sl_chunked_init(&c, max_trailer);
    size_t off = 0;
    d->rc = SL_CHUNKED_NEED;
    while (off < len) {
        size_t n = frag && frag < len - off ? frag : len - off;
        char *copy = tu_copy(s + off, n);
        size_t used = 0;
        for (;;) {
            const char *data = NULL;
            size_t dl = 0, cons;
            int rc = sl_chunked_decode(&c, copy + used, n - used, &cons, &data, &dl);
            if (rc < 0) {
                assert_int_equal(cons, 0);
                d->rc = rc;
                assert_false(sl_chunked_done(&c));
                free(copy);
                return;
            }
            assert_true(cons <= n - used);
            used += cons;
            d->consumed += cons;
            if (rc == SL_CHUNKED_DATA) {
                assert_true(dl > 0);
                assert_true(data >= copy && data + dl == copy + used);
                dc_append(d, data, dl);
                continue;
            }
            d->rc = rc;
            if (rc == SL_CHUNKED_END) {
                assert_true(sl_chunked_done(&c));
                free(copy);
                return;
            }
            assert_int_equal(used, n);
            break;
        }
        free(copy);
        off += n;
    }
}

/* Decodes every which way and checks that the results agree; returns the whole-input one. */
static void dechunk_all_ways(const char *s, size_t len, size_t max_trailer, dechunked *d)
{
    dechunk(s, len, 0, max_trailer, d);
    size_t frags[] = {1, 2, 3, 4, 5, 7, 11, 64};
    for (size_t i = 0; i < sizeof frags / sizeof frags[0]; i++) {
        dechunked o;
        dechunk(s, len, frags[i], max_trailer, &o);
        assert_int_equal(o.rc, d->rc);
        assert_int_equal(o.len, d->len);
        if (o.len) assert_memory_equal(o.data, d->data, o.len);
        if (d->rc == SL_CHUNKED_END) assert_int_equal(o.consumed, d->consumed);
        free(o.data);
    }
}

static void chunk_ok(const char *s, size_t max_trailer, const char *want)
{
    dechunked d;
    dechunk_all_ways(s, strlen(s), max_trailer, &d);
    if (d.rc != SL_CHUNKED_END) fail_msg("\"%s\": %d, want END", s, d.rc);
    assert_int_equal(d.consumed, strlen(s));
    assert_int_equal(d.len, strlen(want));
    if (d.len) assert_memory_equal(d.data, want, d.len);
    free(d.data);
}

static void chunk_err_n(const char *s, size_t len, size_t max_trailer, int want)
{
    dechunked d;
    dechunk_all_ways(s, len, max_trailer, &d);
    if (d.rc != want) fail_msg("\"%.*s\": %d, want %d", (int)len, s, d.rc, want);
    free(d.data);
}

/* Chunked bodies the decoder refuses, whole or in any fragments, with the error. */
static const struct tu_case refused_chunked[] = {
    /* Chunked extensions. */
    TU_CASE("5;\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;=x\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a=\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a=b c\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a b\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a=\"open\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a=\"x\"y\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a@b\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5;a\rhello\r\n0\r\n\r\n", -EPROTO),
    /* Chunked size errors. */
    TU_CASE("\r\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("g\r\n", -EPROTO),
    TU_CASE("-5\r\nhello\r\n", -EPROTO),
    TU_CASE("+5\r\nhello\r\n", -EPROTO),
    TU_CASE(" 5\r\nhello\r\n", -EPROTO),
    TU_CASE("0x5\r\nhello\r\n", -EPROTO),
    TU_CASE(";a\r\nhello\r\n", -EPROTO),
    TU_CASE("5 5\r\nhello\r\n", -EPROTO),
    /* Chunked size overflow. */
    TU_CASE("ffffffffffffffffff\r\n", -EPROTO),
    TU_CASE("10000000000000000\r\n", -EPROTO),
    TU_CASE("ffffffffffffffff\r\n", -EPROTO),
    TU_CASE("8000000000000000\r\n", -EPROTO),
    TU_CASE("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF\r\n", -EPROTO),
    /* Chunked line endings. */
    TU_CASE("5\nhello\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5\r\nhelloX\r\n0\r\n\r\n", -EPROTO),
    TU_CASE("5\r\nhello\n0\r\n\r\n", -EPROTO),
    TU_CASE("5\r\nhello\r0\r\n\r\n", -EPROTO),
    TU_CASE("5\r\nhello\r\n0\r\n\n", -EPROTO),
    TU_CASE("5\r\nhello\r\n0\n\r\n", -EPROTO),
    TU_CASE("5\r\nhello\r\n0\r\n\rX", -EPROTO),
    TU_CASE("5\rhello\r\n", -EPROTO),
    /* Chunked trailer errors. */
    TU_CASE("0\r\n X: y\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nX: y\r\n continued\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nNoColon\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nX : y\r\n\r\n", -EPROTO),
    TU_CASE("0\r\n: y\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nX: y\n\r\n", -EPROTO),
    TU_CASE("0\r\nX: y\rz\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nX: \x01\r\n\r\n", -EPROTO),
    TU_CASE("0\r\nX: \x7f\r\n\r\n", -EPROTO),
};

static void test_refused_chunked(void **state)
{
    TU_EACH(c, refused_chunked) chunk_err_n(c->in, c->len, 1024, c->want);
}

static void test_chunked_simple(void **state)
{
    chunk_ok("5\r\nhello\r\n0\r\n\r\n", 0, "hello");
    chunk_ok("0\r\n\r\n", 0, "");
    chunk_ok("5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n", 0, "hello world!");
    chunk_ok("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", 0, "0123456789abcdefghij");
    chunk_ok("0005\r\nhello\r\n000\r\n\r\n", 0, "hello");
    chunk_ok("00000000000000000000000000000000001\r\nx\r\n0\r\n\r\n", 0, "x");
    /* Chunk data is opaque: CRLFs and NULs inside it are data. */
    dechunked d;
    const char s[] = "4\r\n\r\n\0\n\r\n0\r\n\r\n";
    dechunk_all_ways(s, sizeof s - 1, 0, &d);
    assert_int_equal(d.rc, SL_CHUNKED_END);
    assert_int_equal(d.len, 4);
    assert_memory_equal(d.data, "\r\n\0\n", 4);
    free(d.data);
}

static void test_chunked_large_chunk(void **state)
{
    size_t n = 100000;
    size_t cap = n + 64;
    char *s = malloc(cap), *want = malloc(n + 1);
    assert_non_null(s);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        want[i] = (char)('a' + i % 26);
    want[n] = 0;
    size_t off = (size_t)snprintf(s, cap, "%zx\r\n", n);
    memcpy(s + off, want, n);
    off += n;
    off += (size_t)snprintf(s + off, cap - off, "\r\n0\r\n\r\n");
    dechunked d;
    dechunk(s, off, 0, 0, &d);
    assert_int_equal(d.rc, SL_CHUNKED_END);
    assert_int_equal(d.len, n);
    assert_memory_equal(d.data, want, n);
    free(d.data);
    dechunk(s, off, 4093, 0, &d);
    assert_int_equal(d.rc, SL_CHUNKED_END);
    assert_int_equal(d.len, n);
    free(d.data);
    free(s);
    free(want);
}

static void test_chunked_extensions(void **state)
{
    chunk_ok("5;name=value\r\nhello\r\n0\r\n\r\n", 0, "hello");
    chunk_ok("5 ; a = b ; c\r\nhello\r\n0;last\r\n\r\n", 0, "hello");
    chunk_ok("5;a=\"x;y\\\"z\"\r\nhello\r\n0\r\n\r\n", 0, "hello");
    chunk_ok("5;a=\"\"\r\nhello\r\n0\r\n\r\n", 0, "hello");
    chunk_ok("5;a;b;c=d\r\nhello\r\n0\r\n\r\n", 0, "hello");
    chunk_ok("5  \r\nhello\r\n0\t\r\n\r\n", 0, "hello");
    chunk_ok("5;a=\"\xc3\xa9\t\"\r\nhello\r\n0\r\n\r\n", 0, "hello");
    static const char nul[] = "5;a\0\r\nhello\r\n0\r\n\r\n";
    chunk_err_n(nul, sizeof nul - 1, 0, -EPROTO);
}

static void test_chunked_size_overflow(void **state)
{
    /* INT64_MAX itself is fine: the decoder just waits for that much data. */
    dechunked d;
    const char *s = "7fffffffffffffff\r\nabc";
    dechunk_all_ways(s, strlen(s), 0, &d);
    assert_int_equal(d.rc, SL_CHUNKED_NEED);
    assert_int_equal(d.len, 3);
    free(d.data);
}

static void test_chunked_trailers(void **state)
{
    const char *s = "3\r\nabc\r\n0\r\nX-Checksum: deadbeef\r\nExpires: never\r\n\r\n";
    chunk_ok(s, 1024, "abc");
    /* Exactly the trailer bytes allowed, then one fewer. */
    size_t tb = strlen("X-Checksum: deadbeef\r\nExpires: never\r\n");
    chunk_ok(s, tb, "abc");
    chunk_err_n(s, strlen(s), tb - 1, -E2BIG);
    chunk_err_n(s, strlen(s), 0, -E2BIG);
    chunk_ok("0\r\nX:\r\n\r\n", 4, "");
    chunk_ok("0\r\nX: caf\xc3\xa9\t!\r\n\r\n", 100, "");
}

static void test_chunked_line_limit(void **state)
{
    size_t cap = SL_CHUNKED_MAX_LINE + 64;
    char *s = malloc(cap);
    assert_non_null(s);
    /* "5;" + name + "\r\n" exactly SL_CHUNKED_MAX_LINE bytes, then one more. */
    size_t name = SL_CHUNKED_MAX_LINE - 4;
    for (int extra = 0; extra <= 1; extra++) {
        size_t off = 0;
        s[off++] = '5';
        s[off++] = ';';
        memset(s + off, 'e', name + (size_t)extra);
        off += name + (size_t)extra;
        memcpy(s + off, "\r\nhello\r\n0\r\n\r\n", 14);
        off += 14;
        dechunked d;
        dechunk(s, off, 0, 0, &d);
        assert_int_equal(d.rc, extra ? -E2BIG : SL_CHUNKED_END);
        free(d.data);
        dechunk(s, off, 1, 0, &d);
        assert_int_equal(d.rc, extra ? -E2BIG : SL_CHUNKED_END);
        free(d.data);
    }
    free(s);
}

static void test_chunked_stops_at_end(void **state)
{
    const char *s = "2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n";
    sl_chunked_decoder c;
    sl_chunked_init(&c, 0);
    const char *data;
    size_t dl, cons, off = 0;
    assert_int_equal(sl_chunked_decode(&c, s, strlen(s), &cons, &data, &dl), SL_CHUNKED_DATA);
    assert_int_equal(cons, 5);
    assert_ptr_equal(data, s + 3);
    assert_int_equal(dl, 2);
    off += cons;
    assert_false(sl_chunked_done(&c));
    assert_int_equal(sl_chunked_decode(&c, s + off, strlen(s) - off, &cons, &data, &dl),
                     SL_CHUNKED_END);
    off += cons;
    assert_int_equal(off, 12);
    assert_true(sl_chunked_done(&c));
    assert_int_equal(sl_chunked_decode(&c, s + off, strlen(s) - off, &cons, &data, &dl),
                     SL_CHUNKED_END);
    assert_int_equal(cons, 0);
}

static void test_chunked_error_sticky(void **state)
{
    sl_chunked_decoder c;
    sl_chunked_init(&c, 0);
    const char *data;
    size_t dl, cons;
    assert_int_equal(sl_chunked_decode(&c, "z", 1, &cons, &data, &dl), -EPROTO);
    assert_int_equal(cons, 0);
    assert_int_equal(sl_chunked_decode(&c, "0\r\n\r\n", 5, &cons, &data, &dl), -EPROTO);
    assert_int_equal(cons, 0);
    assert_false(sl_chunked_done(&c));
    sl_chunked_init(&c, 0);
    assert_int_equal(sl_chunked_decode(&c, "1\r\n", 3, &cons, &data, &dl), SL_CHUNKED_NEED);
    assert_int_equal(cons, 3);
    assert_int_equal(sl_chunked_decode(&c, NULL, 0, &cons, &data, &dl), SL_CHUNKED_NEED);
    assert_int_equal(cons, 0);
    assert_int_equal(sl_chunked_decode(&c, "x\r\n0\r\n\r\n", 8, &cons, &data, &dl),
                     SL_CHUNKED_DATA);
    assert_int_equal(sl_chunked_decode(&c, "\r\n0\r\n\r\n", 7, &cons, &data, &dl),
                     SL_CHUNKED_END);
    assert_int_equal(cons, 7);
}

static void test_chunked_truncated_needs_more(void **state)
{
    const char *s = "5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n";
    size_t len = strlen(s);
    for (size_t k = 0; k < len; k++) {
        dechunked d;
        dechunk(s, k, 1, 100, &d);
        assert_int_equal(d.rc, SL_CHUNKED_NEED);
        assert_int_equal(d.consumed, k);
        free(d.data);
    }
}

/* Every max_head from 0 past the head's length, at every prefix, against the rule the header
 * states: the first byte at or past max_head is refused with -E2BIG once it has arrived, and
 * before that the answer is "need more". The parser scans runs of bytes up to the limit in one
 * go; this pins where those scans stop, in the status line, names, values and line ends. */
static void test_limit_at_every_offset(void **state)
{
    (void)state;
    static const struct {
        parse_fn fn;
        const char *s;
    } heads[] = {
        {sl_upstream_parse_http, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\n"},
        {sl_upstream_parse_http, "HTTP/1.0 404\nX-Empty:\nX-Ows: \t v w \t\nX-Obs: \x80\xff\n\n"},
        {sl_upstream_parse_http, "HTTP/1.1 204 No Content, really\r\n\r\n"},
        {sl_upstream_parse_cgi, "Status: 200 OK\r\nX-Sendfile: /srv/a/b\r\nContent-Length: 0\r\n\r\n"},
        {sl_upstream_parse_cgi, "Location: /elsewhere\n\n"},
    };
    sl_upstream_head *h = malloc(sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        const char *s = heads[i].s;
        size_t n = strlen(s);
        for (size_t max = 0; max <= n + 1; max++) {
            sl_upstream_limits lim = {max, SL_UPSTREAM_MAX_HEADERS};
            for (size_t k = 0; k <= n; k++) {
                int want = max < n && k > max ? -E2BIG : k == n ? (int)n : 0;
                int rc = parse_n(heads[i].fn, s, k, &lim, h);
                if (rc != want)
                    fail_msg("head %zu, max_head %zu, prefix %zu: %d, want %d", i, max, k, rc, want);
            }
        }
    }
    free(h);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_field_name_every_byte),
        cmocka_unit_test(test_refused_http),
        cmocka_unit_test(test_http_simple),
        cmocka_unit_test(test_http_versions),
        cmocka_unit_test(test_http_status_without_reason),
        cmocka_unit_test(test_http_reason_text),
        cmocka_unit_test(test_http_status_code_syntax),
        cmocka_unit_test(test_http_lf_only),
        cmocka_unit_test(test_http_value_trimming),
        cmocka_unit_test(test_http_obs_text_value),
        cmocka_unit_test(test_http_bytes_after_head_ignored),
        cmocka_unit_test(test_http_content_length),
        cmocka_unit_test(test_http_duplicate_content_length),
        cmocka_unit_test(test_http_transfer_encoding),
        cmocka_unit_test(test_http_connection_tokens),
        cmocka_unit_test(test_http_location_first),
        cmocka_unit_test(test_http_head_size_limit),
        cmocka_unit_test(test_http_error_before_limit_wins),
        cmocka_unit_test(test_http_header_count_limit),
        cmocka_unit_test(test_http_header_count_clamped),
        cmocka_unit_test(test_http_interim_then_final),
        cmocka_unit_test(test_http_framing),
        cmocka_unit_test(test_http_keep_alive),
        cmocka_unit_test(test_interim_classification),
        cmocka_unit_test(test_refused_cgi),
        cmocka_unit_test(test_cgi_default_200),
        cmocka_unit_test(test_cgi_lf_only),
        cmocka_unit_test(test_cgi_status_forms),
        cmocka_unit_test(test_cgi_location_absolute),
        cmocka_unit_test(test_cgi_location_local),
        cmocka_unit_test(test_cgi_location_with_status),
        cmocka_unit_test(test_cgi_framing_fields),
        cmocka_unit_test(test_cgi_limits),
        cmocka_unit_test(test_hop_by_hop_fixed),
        cmocka_unit_test(test_hop_by_hop_connection_listed),
        cmocka_unit_test(test_hop_by_hop_head),
        cmocka_unit_test(test_refused_chunked),
        cmocka_unit_test(test_chunked_simple),
        cmocka_unit_test(test_chunked_large_chunk),
        cmocka_unit_test(test_chunked_extensions),
        cmocka_unit_test(test_chunked_size_overflow),
        cmocka_unit_test(test_chunked_trailers),
        cmocka_unit_test(test_chunked_line_limit),
        cmocka_unit_test(test_chunked_stops_at_end),
        cmocka_unit_test(test_chunked_error_sticky),
        cmocka_unit_test(test_chunked_truncated_needs_more),
        cmocka_unit_test(test_limit_at_every_offset))
