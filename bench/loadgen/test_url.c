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

/* URLs the list refuses, with the error and a word the message must hold (or NULL). */
static const struct {
    const char *url;
    int err;
    const char *says;
} refused[] = {
    /* Other schemes. */
    {"https://127.0.0.1/", -EINVAL, "https"},
    {"ftp://127.0.0.1/", -EINVAL, NULL},
    {"127.0.0.1/x", -EINVAL, NULL},
    {"", -EINVAL, NULL},
    /* IPv4 addresses other than loopback. */
    {"http://128.0.0.1/", -EPERM, "loopback"},
    {"http://10.0.0.1/", -EPERM, "loopback"},
    {"http://192.168.1.1:8080/x", -EPERM, "loopback"},
    {"http://0.0.0.0/", -EPERM, "loopback"},
    {"http://255.255.255.255/", -EPERM, "loopback"},
    {"http://126.255.255.255/", -EPERM, "loopback"},
    /* Other names, refused without resolving them. */
    {"http://example.com/", -EPERM, NULL},
    {"http://localhost.example.com/", -EPERM, NULL},
    {"http://notlocalhost/", -EPERM, NULL},
    {"http://localhostx/", -EPERM, NULL},
    {"http://127.1/", -EPERM, NULL},
    {"http://2130706433/", -EPERM, NULL},
    {"http://xlocalhost/", -EPERM, NULL},
    {"http://exa mple/", -EINVAL, NULL},
    {"http://bad%host/", -EINVAL, NULL},
    /* IPv6 addresses other than loopback, and bad IP literals. */
    {"http://[::2]/", -EPERM, NULL},
    {"http://[fe80::1]/", -EPERM, NULL},
    {"http://[::ffff:10.0.0.1]/", -EPERM, NULL},
    {"http://[::1/", -EINVAL, NULL},
    {"http://[::1]x/", -EINVAL, NULL},
    {"http://[]/", -EINVAL, NULL},
    {"http://[zz]/", -EINVAL, NULL},
    /* Bad ports. */
    {"http://127.0.0.1:/", -EINVAL, NULL},
    {"http://127.0.0.1:0/", -EINVAL, NULL},
    {"http://127.0.0.1:65536/", -EINVAL, NULL},
    {"http://127.0.0.1:8o/", -EINVAL, NULL},
    {"http://127.0.0.1:123456/", -EINVAL, NULL},
    {"http://127.0.0.1:-1/", -EINVAL, NULL},
    /* Bad authorities. */
    {"http://user@127.0.0.1/", -EINVAL, NULL},
    {"http:///x", -EINVAL, NULL},
    {"http://:80/", -EINVAL, NULL},
    /* Paths that would not make a clean request line. */
    {"http://127.0.0.1/a b", -EINVAL, NULL},
    {"http://127.0.0.1/a\tb", -EINVAL, NULL},
    {"http://127.0.0.1/a\r\nX-Injected: 1", -EINVAL, NULL},
    {"http://127.0.0.1/\x7f", -EINVAL, NULL},
    {"http://127.0.0.1/caf\xc3\xa9", -EINVAL, NULL},
};

static void test_refused(void **state)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = parse(refused[i].url);
        if (rc != refused[i].err || (refused[i].says && !strstr(err, refused[i].says)))
            fail_msg("\"%s\": %d (%s), want %d%s%s", refused[i].url, rc, err, refused[i].err,
                     refused[i].says ? " saying " : "", refused[i].says ? refused[i].says : "");
    }
}

static void test_loopback_ipv4(void **state)
{
    assert_int_equal(parse("http://127.0.0.1/"), 0);
    assert_int_equal(parse("http://127.255.255.254/"), 0);
    assert_int_equal(v4_addr(), 0x7ffffffe);
    assert_int_equal(parse("http://127.1.2.3:9/"), 0);
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

static void test_ipv6(void **state)
{
    assert_int_equal(parse("http://[::1]:8080/x"), 0);
    assert_string_equal(parts.host, "[::1]");
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&parts.addr;
    assert_int_equal(a6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(a6->sin6_port), 8080);
    assert_true(IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr));
    assert_int_equal(parse("http://[::ffff:127.0.0.2]/"), 0);
}

static void test_highest_port(void **state)
{
    assert_int_equal(parse("http://127.0.0.1:65535/"), 0);
    assert_int_equal(parts.port, 65535);
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
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_loopback_ipv4),
        cmocka_unit_test(test_localhost_names),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_highest_port),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_request_bytes),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_reports_bad_line),
        cmocka_unit_test(test_load_empty_and_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
