/* cmocka tests for the loadgen URL list (url.c), above all the loopback-only rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "url.h"

#include "sl_version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* malloc that cannot return NULL, so the compiler (and the reader) need not consider it. */
static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) abort();
    return p;
}

static struct sl_lg_url_parts parts;
static char err[1024];

static int parse(const char *url)
{
    err[0] = '\0';
    return sl_lg_url_parse(url, &parts, err, sizeof err);
}

static uint32_t v4_addr(void)
{
    const struct sockaddr_in *a = (const struct sockaddr_in *)&parts.addr;
    assert_int_equal(a->sin_family, AF_INET);
    assert_int_equal(parts.addr_len, sizeof *a);
    return ntohl(a->sin_addr.s_addr);
}

static uint16_t addr_port(void)
{
    const struct sockaddr_in *a = (const struct sockaddr_in *)&parts.addr;
    return ntohs(a->sin_port);
}

static void test_parse_basic(void **state)
{
    assert_int_equal(parse("http://127.0.0.1:8080/seek-bound/100k/files-1/1"), 0);
    assert_string_equal(parts.host, "127.0.0.1");
    assert_true(parts.explicit_port);
    assert_int_equal(parts.port, 8080);
    assert_string_equal(parts.path, "/seek-bound/100k/files-1/1");
    assert_int_equal(v4_addr(), 0x7f000001);
    assert_int_equal(addr_port(), 8080);
}

static void test_parse_defaults_and_target_forms(void **state)
{
    assert_int_equal(parse("http://127.0.0.1"), 0);
    assert_false(parts.explicit_port);
    assert_int_equal(parts.port, 80);
    assert_string_equal(parts.path, "/");
    assert_int_equal(parse("HTTP://127.0.0.1:81?x=1&y"), 0);
    assert_string_equal(parts.path, "/?x=1&y");
    assert_int_equal(parse("http://127.0.0.1/a/b?q#frag"), 0);
    assert_string_equal(parts.path, "/a/b?q");
    assert_int_equal(parse("http://127.0.0.1/%20x"), 0);
    assert_string_equal(parts.path, "/%20x");
}

static void test_refuses_other_schemes(void **state)
{
    assert_int_equal(parse("https://127.0.0.1/"), -EINVAL);
    assert_non_null(strstr(err, "https"));
    assert_int_equal(parse("ftp://127.0.0.1/"), -EINVAL);
    assert_int_equal(parse("127.0.0.1/x"), -EINVAL);
    assert_int_equal(parse(""), -EINVAL);
}

static void test_loopback_ipv4(void **state)
{
    assert_int_equal(parse("http://127.0.0.1/"), 0);
    assert_int_equal(parse("http://127.255.255.254/"), 0);
    assert_int_equal(v4_addr(), 0x7ffffffe);
    assert_int_equal(parse("http://127.1.2.3:9/"), 0);
}

static void test_refuses_non_loopback_ipv4(void **state)
{
    const char *bad[] = {"http://128.0.0.1/",         "http://10.0.0.1/",
                         "http://192.168.1.1:8080/x", "http://0.0.0.0/",
                         "http://255.255.255.255/",   "http://126.255.255.255/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(bad[i]), -EPERM);
        assert_non_null(strstr(err, "loopback"));
    }
}

static void test_localhost_names(void **state)
{
    const char *ok[] = {"http://localhost/", "http://LOCALHOST:8080/", "http://localhost./",
                        "http://bench.localhost/", "http://a.b.localhost:1/"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse(ok[i]), 0);
        assert_int_equal(v4_addr(), 0x7f000001);
    }
    assert_int_equal(parse("http://localhost:8080/x"), 0);
    assert_string_equal(parts.host, "localhost");
    assert_int_equal(addr_port(), 8080);
}

static void test_refuses_other_names_without_resolving(void **state)
{
    const char *bad[] = {"http://example.com/",  "http://localhost.example.com/",
                         "http://notlocalhost/", "http://localhostx/",
                         "http://127.1/",        "http://2130706433/",
                         "http://xlocalhost/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse(bad[i]), -EPERM);
    assert_int_equal(parse("http://exa mple/"), -EINVAL);
    assert_int_equal(parse("http://bad%host/"), -EINVAL);
}

static void test_ipv6(void **state)
{
    assert_int_equal(parse("http://[::1]:8080/x"), 0);
    assert_string_equal(parts.host, "[::1]");
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&parts.addr;
    assert_int_equal(a6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(a6->sin6_port), 8080);
    assert_true(IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr));
    assert_int_equal(parse("http://[::ffff:127.0.0.2]/"), 0);
    assert_int_equal(parse("http://[::2]/"), -EPERM);
    assert_int_equal(parse("http://[fe80::1]/"), -EPERM);
    assert_int_equal(parse("http://[::ffff:10.0.0.1]/"), -EPERM);
    assert_int_equal(parse("http://[::1/"), -EINVAL);
    assert_int_equal(parse("http://[::1]x/"), -EINVAL);
    assert_int_equal(parse("http://[]/"), -EINVAL);
    assert_int_equal(parse("http://[zz]/"), -EINVAL);
}

static void test_bad_ports(void **state)
{
    const char *bad[] = {"http://127.0.0.1:/",       "http://127.0.0.1:0/",
                         "http://127.0.0.1:65536/",  "http://127.0.0.1:8o/",
                         "http://127.0.0.1:123456/", "http://127.0.0.1:-1/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse(bad[i]), -EINVAL);
    assert_int_equal(parse("http://127.0.0.1:65535/"), 0);
    assert_int_equal(parts.port, 65535);
}

static void test_bad_authority(void **state)
{
    assert_int_equal(parse("http://user@127.0.0.1/"), -EINVAL);
    assert_int_equal(parse("http:///x"), -EINVAL);
    assert_int_equal(parse("http://:80/"), -EINVAL);
}

static void test_path_must_be_clean(void **state)
{
    assert_int_equal(parse("http://127.0.0.1/a b"), -EINVAL);
    assert_int_equal(parse("http://127.0.0.1/a\tb"), -EINVAL);
    assert_int_equal(parse("http://127.0.0.1/a\r\nX-Injected: 1"), -EINVAL);
    assert_int_equal(parse("http://127.0.0.1/\x7f"), -EINVAL);
    assert_int_equal(parse("http://127.0.0.1/caf\xc3\xa9"), -EINVAL);
}

static void test_too_long(void **state)
{
    char *u = xmalloc(SL_LG_URL_MAX + 32);
    strcpy(u, "http://127.0.0.1/");
    size_t o = strlen(u);
    memset(u + o, 'a', SL_LG_URL_MAX);
    u[o + SL_LG_URL_MAX] = '\0';
    assert_int_equal(parse(u), -EINVAL);
    free(u);
}

static void test_request_bytes(void **state)
{
    char buf[512];
    assert_int_equal(parse("http://127.0.0.1:8080/x?y"), 0);
    int n = sl_lg_url_request(&parts, false, buf, sizeof buf);
    const char *want =
        "GET /x?y HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: seekless-loadgen/" SL_VERSION
        "\r\nConnection: close\r\n\r\n";
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(buf, want);
    assert_int_equal(parse("http://localhost/"), 0);
    n = sl_lg_url_request(&parts, true, buf, sizeof buf);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "\r\nHost: localhost\r\n"));
    assert_non_null(strstr(buf, "\r\nConnection: keep-alive\r\n\r\n"));
    assert_int_equal(sl_lg_url_request(&parts, true, buf, 20), -ENOSPC);
}

static char *write_tmp(const char *content)
{
    static char path[64];
    strcpy(path, "/tmp/test_lg_urls.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_load_file(void **state)
{
    char *path = write_tmp("# comment\n\n  http://127.0.0.1:8080/a  \r\nhttp://localhost:8080/b\n"
                           "http://127.0.0.1:9090/c\nhttp://[::1]:8080/d");
    struct sl_lg_urls u;
    char msg[256];
    assert_int_equal(sl_lg_urls_load(&u, path, false, msg, sizeof msg), 0);
    unlink(path);
    assert_int_equal(u.n, 4);
    assert_string_equal(u.v[0].text, "http://127.0.0.1:8080/a");
    assert_int_equal(u.v[0].request_len, strlen(u.v[0].request));
    assert_non_null(strstr(u.v[1].request, "GET /b HTTP/1.1\r\n"));
    /* localhost maps to 127.0.0.1, so the first two share a target */
    assert_int_equal(u.ntargets, 3);
    assert_int_equal(u.v[0].target, u.v[1].target);
    assert_true(u.v[2].target != u.v[0].target);
    assert_true(u.v[3].target != u.v[0].target && u.v[3].target != u.v[2].target);
    sl_lg_urls_free(&u);
    assert_int_equal(u.n, 0);
    assert_null(u.v);
}

static void test_load_reports_bad_line(void **state)
{
    char *path = write_tmp("http://127.0.0.1/ok\nhttp://10.1.2.3/nope\n");
    struct sl_lg_urls u;
    char msg[512];
    assert_int_equal(sl_lg_urls_load(&u, path, false, msg, sizeof msg), -EPERM);
    assert_non_null(strstr(msg, ":2: "));
    assert_null(u.v);
    unlink(path);
    path = write_tmp("http://127.0.0.1/ok\nhttps://127.0.0.1/\n");
    assert_int_equal(sl_lg_urls_load(&u, path, false, msg, sizeof msg), -EINVAL);
    unlink(path);
}

static void test_load_empty_and_missing(void **state)
{
    char *path = write_tmp("# nothing\n\n   \n");
    struct sl_lg_urls u;
    char msg[512];
    assert_int_equal(sl_lg_urls_load(&u, path, false, msg, sizeof msg), -ENODATA);
    unlink(path);
    assert_int_equal(sl_lg_urls_load(&u, "/nonexistent/urls", false, msg, sizeof msg), -ENOENT);
    assert_non_null(strstr(msg, "/nonexistent/urls"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_parse_defaults_and_target_forms),
        cmocka_unit_test(test_refuses_other_schemes),
        cmocka_unit_test(test_loopback_ipv4),
        cmocka_unit_test(test_refuses_non_loopback_ipv4),
        cmocka_unit_test(test_localhost_names),
        cmocka_unit_test(test_refuses_other_names_without_resolving),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_bad_ports),
        cmocka_unit_test(test_bad_authority),
        cmocka_unit_test(test_path_must_be_clean),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_request_bytes),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_reports_bad_line),
        cmocka_unit_test(test_load_empty_and_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
