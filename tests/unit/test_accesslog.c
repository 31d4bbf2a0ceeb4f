/* Access log formats: every directive, escaping of what clients send, truncation, errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "accesslog.h"

static const char *hdr(void *ud, const char *name, size_t *len)
{
    const char *const *h = ud;
    for (; h[0]; h += 2)
        if (!strcasecmp(h[0], name)) {
            *len = strlen(h[1]);
            return h[1];
        }
    return NULL;
}

static const char *headers[] = {"User-Agent", "curl/8 \"quoted\"\n", "Referer", "http://r/", NULL};

static sl_accesslog_rec rec(void)
{
    sl_accesslog_rec r = {
        .remote_addr = "127.0.0.1", .method = "GET", .method_len = 3, .target = "/a%20b?x=1",
        .target_len = 10, .path = "/a b", .query = "x=1", .protocol = "HTTP/1.1", .host = "example.test",
        .server_name = "example.test", .port = 8080, .filename = "/srv/a b", .status = 200,
        .body_bytes = 1234, .total_bytes = 1400, .duration_us = 2500000, .keepalive_requests = 3,
        .when = {.tv_sec = 0}, .header = hdr, .ud = headers};
    return r;
}

static char *render(const char *fmt, const sl_accesslog_rec *r)
{
    static char buf[1024];
    sl_accesslog_fmt *f;
    char err[256];
    assert_int_equal(sl_accesslog_compile(fmt, &f, err, sizeof err), 0);
    size_t n = sl_accesslog_render(f, r, buf, sizeof buf);
    sl_accesslog_fmt_free(f);
    assert_true(n > 0 && buf[n - 1] == '\n');
    buf[n - 1] = 0;
    return buf;
}

static void test_directives(void **state)
{
    setenv("TZ", "UTC", 1);
    sl_accesslog_rec r = rec();
    assert_string_equal(render("%h %a %l %u", &r), "127.0.0.1 127.0.0.1 - -");
    assert_string_equal(render("%t", &r), "[01/Jan/1970:00:00:00 +0000]");
    assert_string_equal(render("%{%Y}t", &r), "1970");
    assert_string_equal(render("\"%r\" %m %U %q %H", &r), "\"GET /a%20b?x=1 HTTP/1.1\" GET /a b ?x=1 HTTP/1.1");
    assert_string_equal(render("%s %>s %b %B %O %D %T", &r), "200 200 1234 1234 1400 2500000 2");
    assert_string_equal(render("%v %V %p %f %k %%", &r), "example.test example.test 8080 /srv/a b 3 %");
    assert_string_equal(render("%{Referer}i|%{X-None}i", &r), "http://r/|-");
    r.body_bytes = 0;
    r.query = "";
    assert_string_equal(render("%b %B [%q]", &r), "- 0 []");
}

static void test_client_bytes_are_escaped(void **state)
{
    sl_accesslog_rec r = rec();
    /* A header with a quote and a newline cannot close the field or start a line. */
    assert_string_equal(render("\"%{User-Agent}i\"", &r), "\"curl/8 \\\"quoted\\\"\\x0a\"");
    r.target = "/x\r\n127.0.0.1 - - [fake] \"GET / HTTP/1.1\" 200";
    r.target_len = strlen(r.target);
    char *line = render("%r", &r);
    assert_null(strchr(line, '\n'));
    assert_null(strchr(line, '\r'));
    assert_non_null(strstr(line, "\\x0d\\x0a"));
    r.path = "/\xff\\";
    assert_string_equal(render("%U", &r), "/\\xff\\\\");
}

static void test_default_format(void **state)
{
    setenv("TZ", "UTC", 1);
    sl_accesslog_rec r = rec();
    assert_string_equal(render(SL_ACCESSLOG_DEFAULT, &r),
                        "127.0.0.1 example.test - [01/Jan/1970:00:00:00 +0000] \"GET /a%20b?x=1 "
                        "HTTP/1.1\" 200 1234 \"http://r/\" \"curl/8 \\\"quoted\\\"\\x0a\"");
}

static void test_truncation_keeps_the_newline(void **state)
{
    sl_accesslog_fmt *f;
    char err[64];
    assert_int_equal(sl_accesslog_compile("%h %r %U", &f, err, sizeof err), 0);
    sl_accesslog_rec r = rec();
    char buf[16];
    memset(buf, 'Z', sizeof buf);
    for (size_t cap = 1; cap <= sizeof buf; cap++) {
        size_t n = sl_accesslog_render(f, &r, buf, cap);
        assert_int_equal(n, cap);
        assert_int_equal(buf[n - 1], '\n');
    }
    assert_int_equal(sl_accesslog_render(f, &r, buf, 0), 0);
    sl_accesslog_fmt_free(f);
}

static void test_unknown_directives_are_refused(void **state)
{
    sl_accesslog_fmt *f = NULL;
    char err[256];
    assert_int_equal(sl_accesslog_compile("%h %Z", &f, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "%Z is not supported"));
    assert_int_equal(sl_accesslog_compile("%{Foo}o", &f, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "%{Foo}o is not supported"));
    assert_int_equal(sl_accesslog_compile("%{Foo", &f, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "unterminated"));
    assert_int_equal(sl_accesslog_compile("trailing %", &f, err, sizeof err), -EINVAL);
    assert_null(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_directives),
        cmocka_unit_test(test_client_bytes_are_escaped),
        cmocka_unit_test(test_default_format),
        cmocka_unit_test(test_truncation_keeps_the_newline),
        cmocka_unit_test(test_unknown_directives_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
