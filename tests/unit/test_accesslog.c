/* Access log formats: every directive, escaping of what clients send (log injection),
 * truncation at every buffer size, refused formats, the default format end to end. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cmocka.h>

#include "testutil.h"

#include "accesslog.h"

/* A header table for the lookup callbacks; len 0 means strlen(value). */
typedef struct test_hdr {
    const char *name;
    const char *value;
    size_t len;
} test_hdr;

static const char *lookup(void *ud, const char *name, size_t *len)
{
    for (const test_hdr *h = ud; h->name; h++)
        if (!strcasecmp(h->name, name)) {
            *len = h->len ? h->len : strlen(h->value);
            return h->value;
        }
    return NULL;
}

static test_hdr req_headers[] = {
    {"User-Agent", "curl/8 \"quoted\"\n", 0},
    {"Referer", "http://r/", 0},
    {"X-Empty", "", 0},
    {"X-Binary", "a\0b\x7f\x80", 5},
    {"X-Cut", "visible-and-not", 7},
    {NULL, NULL, 0},
};

static test_hdr resp_headers[] = {
    {"Content-Type", "text/plain; charset=utf-8", 0},
    {"ETag", "\"abc\"", 0},
    {NULL, NULL, 0},
};

static void use_tz(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

/* 2000-10-10 13:55:36.123456789 UTC, Apache's documentation example. */
#define WHEN 971186136

static sl_accesslog_rec rec(void)
{
    sl_accesslog_rec r = {
        .remote_addr = "127.0.0.1",
        .method = "GETX", .method_len = 3,
        .target = "/a%20b?x=1#", .target_len = 10,
        .path = "/a b", .query = "x=1",
        .protocol = "HTTP/1.1",
        .host = "example.test", .server_name = "srv.test", .port = 8080,
        .filename = "/srv/a b", .status = 200,
        .body_bytes = 1234, .total_bytes = 1400, .duration_us = 2999999,
        .keepalive_requests = 3,
        .when = {.tv_sec = WHEN, .tv_nsec = 123456789},
        .header = lookup, .ud = req_headers,
        .resp_header = lookup, .resp_ud = resp_headers,
    };
    return r;
}

/* Render with a roomy buffer; the returned string has the '\n' checked and removed. */
static char *render(const char *fmt, const sl_accesslog_rec *r)
{
    static char buf[4096];
    sl_accesslog_fmt *f = NULL;
    char err[512];
    int rc = sl_accesslog_compile(fmt, &f, err, sizeof err);
    if (rc) fail_msg("compile \"%s\": %d %s", fmt, rc, err);
    size_t n = sl_accesslog_render(f, r, buf, sizeof buf);
    sl_accesslog_fmt_free(f);
    assert_true(n > 0 && n < sizeof buf);
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', n - 1));
    buf[n - 1] = 0;
    return buf;
}

/* Compile must fail with -EINVAL, leave *out alone and name `needle` in the message. */
static void refused(const char *fmt, const char *needle)
{
    sl_accesslog_fmt *sentinel = (sl_accesslog_fmt *)&sentinel;
    sl_accesslog_fmt *f = sentinel;
    char err[512];
    memset(err, 'Q', sizeof err);
    int rc = sl_accesslog_compile(fmt, &f, err, sizeof err);
    if (rc != -EINVAL) fail_msg("\"%s\" compiled (rc %d)", fmt, rc);
    assert_ptr_equal(f, sentinel);
    assert_non_null(memchr(err, 0, sizeof err));
    if (!strstr(err, needle)) fail_msg("\"%s\": error \"%s\" lacks \"%s\"", fmt, err, needle);
}

static void test_default_format_end_to_end(void **state)
{
    use_tz("UTC0");
    sl_accesslog_rec r = rec();
    assert_string_equal(render(SL_ACCESSLOG_DEFAULT, &r),
                        "127.0.0.1 example.test - [10/Oct/2000:13:55:36 +0000] \"GET /a%20b?x=1 "
                        "HTTP/1.1\" 200 1234 \"http://r/\" \"curl/8 \\\"quoted\\\"\\x0a\"");
    r.remote_user = "alice";
    r.body_bytes = 0;
    r.status = 304;
    r.header = NULL;
    assert_string_equal(render(SL_ACCESSLOG_DEFAULT, &r),
                        "127.0.0.1 example.test alice [10/Oct/2000:13:55:36 +0000] \"GET /a%20b?x=1 "
                        "HTTP/1.1\" 304 - \"-\" \"-\"");
}

static void test_remote_identity_and_user(void **state)
{
    sl_accesslog_rec r = rec();
    assert_string_equal(render("%h|%a|%l|%u", &r), "127.0.0.1|127.0.0.1|-|-");
    r.remote_user = "bob";
    assert_string_equal(render("%u", &r), "bob");
    r.remote_user = "";
    assert_string_equal(render("%u", &r), "-");
    r.remote_user = "ev\"il\n";
    assert_string_equal(render("%u", &r), "ev\\\"il\\x0a");
    r.remote_addr = NULL;
    assert_string_equal(render("%h %a", &r), "- -");
}

static void test_clf_time_uses_local_offset(void **state)
{
    sl_accesslog_rec r = rec();
    use_tz("UTC0");
    assert_string_equal(render("%t", &r), "[10/Oct/2000:13:55:36 +0000]");
    use_tz("PST8");  /* UTC-8, no DST rule */
    assert_string_equal(render("%t", &r), "[10/Oct/2000:05:55:36 -0800]");
    use_tz("IST-5:30");
    assert_string_equal(render("%t", &r), "[10/Oct/2000:19:25:36 +0530]");
    use_tz("NPT-5:45");
    assert_string_equal(render("%t", &r), "[10/Oct/2000:19:40:36 +0545]");
    r.when.tv_sec = 0;
    use_tz("UTC0");
    assert_string_equal(render("%t", &r), "[01/Jan/1970:00:00:00 +0000]");
}

static void test_custom_time_formats(void **state)
{
    use_tz("UTC0");
    sl_accesslog_rec r = rec();
    assert_string_equal(render("%{%Y-%m-%dT%H:%M:%S}t", &r), "2000-10-10T13:55:36");
    assert_string_equal(render("[%{%d/%b/%Y %z}t]", &r), "[10/Oct/2000 +0000]");
    assert_string_equal(render("%{sec}t %{msec}t %{usec}t", &r),
                        "971186136 971186136123 971186136123456");
    assert_string_equal(render("%{sec}t.%{msec_frac}t %{usec_frac}t", &r), "971186136.123 123456");
    r.when.tv_nsec = 1000;
    assert_string_equal(render("%{msec_frac}t %{usec_frac}t", &r), "000 000001");
}

static void test_request_line_pieces(void **state)
{
    sl_accesslog_rec r = rec();
    /* Lengths are honoured: the buffers need not be NUL-terminated. */
    assert_string_equal(render("%r", &r), "GET /a%20b?x=1 HTTP/1.1");
    assert_string_equal(render("%m|%U|%q|%H", &r), "GET|/a b|?x=1|HTTP/1.1");
    r.protocol = "HTTP/1.0xx";
    r.protocol_len = 8;
    assert_string_equal(render("%r|%H", &r), "GET /a%20b?x=1 HTTP/1.0|HTTP/1.0");
    r.query = "";
    assert_string_equal(render("[%q]", &r), "[]");
    r.query = NULL;
    assert_string_equal(render("[%q]", &r), "[]");
    r.protocol = NULL;
    assert_string_equal(render("%r|%H", &r), "GET /a%20b?x=1|-");
    r.method = NULL;
    r.target = NULL;
    r.path = NULL;
    assert_string_equal(render("%r|%m|%U", &r), "-|-|-");
}

static void test_status_sizes_and_durations(void **state)
{
    sl_accesslog_rec r = rec();
    assert_string_equal(render("%s %>s %<s %b %B %O %D %T", &r), "200 200 200 1234 1234 1400 2999999 2");
    r.body_bytes = 0;
    r.duration_us = 999999;
    assert_string_equal(render("%b %B %T", &r), "- 0 0");
    r.body_bytes = UINT64_MAX;
    r.total_bytes = UINT64_MAX;
    r.duration_us = UINT64_MAX;
    assert_string_equal(render("%b %O %D", &r),
                        "18446744073709551615 18446744073709551615 18446744073709551615");
    r.status = 0;
    assert_string_equal(render("%s", &r), "0");
}

static void test_server_fields(void **state)
{
    sl_accesslog_rec r = rec();
    assert_string_equal(render("%v %V %p %f %k", &r), "srv.test example.test 8080 /srv/a b 3");
    r.host = NULL;
    assert_string_equal(render("%V", &r), "srv.test");
    r.host = "";
    assert_string_equal(render("%V", &r), "srv.test");
    r.server_name = NULL;
    r.filename = NULL;
    r.keepalive_requests = 0;
    assert_string_equal(render("%v %V %f %k", &r), "- - - 0");
    r.host = "evil\"host\r\n";
    assert_string_equal(render("%V", &r), "evil\\\"host\\x0d\\x0a");
}

/* Formats rendered from the unchanged rec(), with what each must give: header lookups (request
 * and response headers come from their own tables) and literal text (it comes from the operator
 * and is written as is). */
static const struct tu_strs rec_renders[] = {
    {"%{Referer}i|%{referer}i|%{REFERER}i", "http://r/|http://r/|http://r/"},
    {"%{X-None}i|%{X-Empty}i", "-|-"},
    {"%{X-Cut}i", "visible"},
    {"%{X-Binary}i", "a\\x00b\\x7f\\x80"},
    {"%{Content-Type}o|%{etag}o|%{X-None}o", "text/plain; charset=utf-8|\\\"abc\\\"|-"},
    {"%{Referer}o %{ETag}i", "- -"},
    {"", ""},
    {"plain text", "plain text"},
    {"100%% %s%%", "100% 200%"},
    {"%%{Referer}i", "%{Referer}i"},
    {"a\"b\\c", "a\"b\\c"},
};

static void test_headers_and_literals(void **state)
{
    sl_accesslog_rec r = rec();
    TU_EACH(c, rec_renders)
        assert_string_equal(render(c->in, &r), c->want);
}

static void test_missing_header_tables(void **state)
{
    sl_accesslog_rec r = rec();
    r.header = NULL;
    assert_string_equal(render("%{Referer}i", &r), "-");
    r = rec();
    r.resp_header = NULL;
    assert_string_equal(render("%{Content-Type}o", &r), "-");
}

static void test_client_bytes_cannot_forge_lines(void **state)
{
    sl_accesslog_rec r = rec();
    static const char forged[] = "/x HTTP/1.1\" 200 5\r\n10.0.0.1 - admin [x] \"GET /secret\\";
    r.target = forged;
    r.target_len = sizeof forged - 1;
    char *line = render("\"%r\"", &r);
    assert_null(strchr(line, '\r'));
    assert_string_equal(line, "\"GET /x HTTP/1.1\\\" 200 5\\x0d\\x0a10.0.0.1 - admin [x] "
                              "\\\"GET /secret\\\\ HTTP/1.1\"");
    /* Every quote inside the field is escaped: only the two delimiters remain bare. */
    int bare = 0;
    for (size_t i = 0; line[i]; i++)
        if (line[i] == '"' && (i == 0 || line[i - 1] != '\\')) bare++;
    assert_int_equal(bare, 2);
    r.path = "/\xff\\\t\x1b[31m";
    assert_string_equal(render("%U", &r), "/\\xff\\\\\\x09\\x1b[31m");
    r.query = "a=\"1\"&b=\n";
    assert_string_equal(render("%q", &r), "?a=\\\"1\\\"&b=\\x0a");
    r.method = "G\nT";
    r.method_len = 3;
    assert_string_equal(render("%m", &r), "G\\x0aT");
    r.filename = "/srv/\n";
    r.remote_addr = "::1\n";
    assert_string_equal(render("%f %h", &r), "/srv/\\x0a ::1\\x0a");
}

/* Every cap from 0 to past the full length: never more than cap bytes, never a byte past cap,
 * always a '\n' last, and what precedes it is a prefix of the full line that does not end in
 * the middle of an escape sequence or a number. */
static void test_truncation_at_every_size(void **state)
{
    use_tz("UTC0");
    sl_accesslog_rec r = rec();
    r.path = "/\"\\\x01";
    const char *fmt = "%h [%U] %O \"%{User-Agent}i\" %t";
    char full[512];
    strcpy(full, render(fmt, &r));
    size_t flen = strlen(full);
    assert_string_equal(full, "127.0.0.1 [/\\\"\\\\\\x01] 1400 \"curl/8 \\\"quoted\\\"\\x0a\" "
                              "[10/Oct/2000:13:55:36 +0000]");
    sl_accesslog_fmt *f;
    char err[64];
    assert_int_equal(sl_accesslog_compile(fmt, &f, err, sizeof err), 0);
    char buf[600];
    /* Cuts allowed in the first 30 bytes: inside plain text, or just before an escape or a
     * number ("\"" at 12, "\\" at 14, "\x01" at 16, "1400" at 22). */
    static const size_t legal_ends[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16,
                                        20, 21, 22, 26, 27, 28, 29};
    for (size_t cap = 0; cap <= flen + 8; cap++) {
        memset(buf, 'Z', sizeof buf);
        size_t n = sl_accesslog_render(f, &r, buf, cap);
        assert_true(n <= cap);
        for (size_t i = cap; i < sizeof buf; i++) assert_int_equal(buf[i], 'Z');
        if (cap == 0) {
            assert_int_equal(n, 0);
            continue;
        }
        assert_true(n >= 1);
        assert_int_equal(buf[n - 1], '\n');
        assert_memory_equal(buf, full, n - 1);
        if (cap > flen) {
            assert_int_equal(n, flen + 1);
            continue;
        }
        size_t body = n - 1;
        if (body <= 29) {
            int ok = 0;
            for (size_t k = 0; k < sizeof legal_ends / sizeof legal_ends[0]; k++)
                ok |= legal_ends[k] == body;
            if (!ok) fail_msg("cap %zu cut the line at %zu", cap, body);
        }
        /* Never a half escape at the end: the trailing backslashes pair up. */
        size_t bs = 0;
        while (bs < body && buf[body - 1 - bs] == '\\') bs++;
        assert_int_equal(bs % 2, 0);
    }
    sl_accesslog_fmt_free(f);
}

static void test_render_defensive_arguments(void **state)
{
    sl_accesslog_fmt *f;
    char err[64];
    assert_int_equal(sl_accesslog_compile("%h", &f, err, sizeof err), 0);
    sl_accesslog_rec r = rec();
    char buf[8] = "ZZZZZZZ";
    assert_int_equal(sl_accesslog_render(f, &r, buf, 0), 0);
    assert_int_equal(buf[0], 'Z');
    assert_int_equal(sl_accesslog_render(f, &r, buf, 1), 1);
    assert_int_equal(buf[0], '\n');
    assert_int_equal(buf[1], 'Z');
    assert_int_equal(sl_accesslog_render(f, NULL, buf, sizeof buf), 1);
    assert_int_equal(sl_accesslog_render(NULL, &r, buf, sizeof buf), 1);
    sl_accesslog_fmt_free(f);
    sl_accesslog_fmt_free(NULL);
}

static void test_unknown_directives_are_refused(void **state)
{
    refused("%h %Z", "%Z is not supported");
    refused("%{Foo}Z", "%{Foo}Z is not supported");
    refused("%{Foo", "unterminated %{");
    refused("trailing %", "lacks a directive letter");
    refused("%{X}", "lacks a directive letter");
    refused("%>", "lacks a directive letter");
    refused("%i", "%i needs a {Name}");
    refused("%o", "%o needs a {Name}");
    refused("%{}i", "%{}i has an empty {argument}");
    refused("%{x}h", "%{x}h takes no {argument}");
    refused("%{x}%", "takes no {argument}");
    refused("%>b", "%>b is not supported");
    refused("%C", "%C is not supported");
    refused("ok %h then %\x01", "is not supported");
    refused("%h %X", "at offset 3");
    char big[SL_ACCESSLOG_ARG_MAX + 16];
    memset(big, 'a', sizeof big);
    memcpy(big, "%{", 2);
    memcpy(big + sizeof big - 3, "}i", 3);
    refused(big, "longer than 128 bytes");
    /* The argument at exactly the limit is fine. */
    big[2 + SL_ACCESSLOG_ARG_MAX] = '}';
    big[3 + SL_ACCESSLOG_ARG_MAX] = 'i';
    big[4 + SL_ACCESSLOG_ARG_MAX] = 0;
    sl_accesslog_fmt *f = NULL;
    assert_int_equal(sl_accesslog_compile(big, &f, NULL, 0), 0);
    sl_accesslog_fmt_free(f);
    /* No error buffer, or a tiny one: still -EINVAL, still terminated. */
    assert_int_equal(sl_accesslog_compile("%Z", &f, NULL, 0), -EINVAL);
    char tiny[4] = "QQQQ";
    assert_int_equal(sl_accesslog_compile("%Z", &f, tiny, sizeof tiny), -EINVAL);
    assert_int_equal(tiny[3], 0);
    assert_int_equal(sl_accesslog_compile(NULL, &f, tiny, sizeof tiny), -EINVAL);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_default_format_end_to_end),
        cmocka_unit_test(test_remote_identity_and_user),
        cmocka_unit_test(test_clf_time_uses_local_offset),
        cmocka_unit_test(test_custom_time_formats),
        cmocka_unit_test(test_request_line_pieces),
        cmocka_unit_test(test_status_sizes_and_durations),
        cmocka_unit_test(test_server_fields),
        cmocka_unit_test(test_headers_and_literals),
        cmocka_unit_test(test_missing_header_tables),
        cmocka_unit_test(test_client_bytes_cannot_forge_lines),
        cmocka_unit_test(test_truncation_at_every_size),
        cmocka_unit_test(test_render_defensive_arguments),
        cmocka_unit_test(test_unknown_directives_are_refused))
