/* Unit tests for the static handler's synchronous core, on a real temporary document root. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "http_date.h"
#include "mod_static.h"
#include "openat.h"

static char root[] = "/tmp/sl_static_XXXXXX";
static char outside[] = "/tmp/sl_static_out_XXXXXX";

static int setup(void **state)
{
    assert_non_null(mkdtemp(root));
    assert_non_null(mkdtemp(outside));
    char p[512], q[512];
    tu_put(root, "hello.txt", "hello, world\n");
    tu_put(root, "page.html", "<p>hi</p>");
    tu_put(root, "secret.inc", "no");
    tu_mkdir(root, "dir", 0755);
    tu_put(root, "dir/index.html", "index");
    tu_mkdir(root, "empty", 0755);
    tu_put(outside, "passwd", "root:x:0:0");
    snprintf(p, sizeof p, "%s/passwd", outside);
    snprintf(q, sizeof q, "%s/out", root);
    assert_int_equal(symlink(p, q), 0);
    snprintf(q, sizeof q, "%s/in", root);
    assert_int_equal(symlink("hello.txt", q), 0);
    snprintf(q, sizeof q, "%s/lnkdir", root);
    assert_int_equal(symlink("dir", q), 0);
    snprintf(p, sizeof p, "%s/fifo", root);
    assert_int_equal(mkfifo(p, 0644), 0);
    return 0;
}

static int teardown(void **state)
{
    return tu_rmtree(root) | tu_rmtree(outside);
}

/* A conf block for the static module, loaded from a config like the server's, in memory the
 * tests may change (core and static settings). */
typedef struct tconf {
    sl_conf_set *cs;
    sl_conf *b;
    int docroot_fd;
} tconf;

static sl_module *const mods[] = {&sl_mod_core, &sl_mod_static, NULL};

static void conf(tconf *s)
{
    char text[600];
    snprintf(text, sizeof text, "server.document-root = \"%s\"\nindex-file.names = ( \"index.html\" )\n",
             root);
    sl_config_errors errs = {0};
    s->cs = sl_conf_load_string(text, strlen(text), "t.conf", NULL, mods, false, &errs);
    char msg[2048];
    sl_config_errors_join(&errs, msg, sizeof msg);
    sl_config_errors_free(&errs);
    if (!s->cs) fail_msg("%s", msg);
    s->b = malloc(s->cs->block_size);
    memcpy(s->b, s->cs->global, s->cs->block_size);
    s->docroot_fd = sl_core(s->b)->docroot->fd;
}

static void conf_done(tconf *s)
{
    free(s->b);
    sl_conf_free(s->cs);
}

/* cmocka set-up and tear-down: a tconf for the test's state. */
static int conf_open(void **state)
{
    tconf *s = malloc(sizeof *s);
    if (!s) return -1;
    conf(s);
    *state = s;
    return 0;
}

static int conf_close(void **state)
{
    conf_done(*state);
    free(*state);
    return 0;
}

#define CORE(s) ((sl_core_conf *)sl_core((s)->b))
#define ST(s) ((sl_static_conf *)SL_MODCONF((s)->b, sl_mod_static, sl_static_conf))

/* Parse a raw request, resolve its path, and return the decision. */
static sl_static_result run(const tconf *s, const char *raw)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s", raw);
    sl_http_request req;
    sl_http_limits lim = {8192, 8192, SL_HTTP_MAX_HEADERS};
    assert_true(sl_http_parse_request(buf, strlen(buf), &lim, &req) > 0);
    char path[1024];
    size_t n = 0;
    while (n < req.target_len && req.target[n] != '?') n++;
    memcpy(path, req.target, n);
    path[n] = 0;
    sl_static_result r;
    assert_int_equal(sl_static_resolve(s->b, s->docroot_fd, &req, path, n, 0, -1, &r), 0);
    if (r.fd >= 0) close(r.fd);
    return r;
}

#define GET(p, extra) "GET " p " HTTP/1.1\r\nHost: x\r\n" extra "\r\n"

static void test_regular_file(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/hello.txt", ""));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.st.st_size, 13);
    assert_string_equal(r.content_type, "text/plain; charset=utf-8");
    assert_true(r.etag[0] == '"');
    assert_int_equal(run(s, "HEAD /page.html HTTP/1.0\r\n\r\n").status, 200);
}

static void test_missing_and_not_a_dir(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/nope", ""));
    assert_int_equal(r.status, 404);
    assert_int_equal(r.err, -ENOENT);
    assert_int_equal(run(s, GET("/hello.txt/x", "")).status, 404);
}

static void test_directories(void **state)
{
    tconf *s = *state;
    assert_int_equal(run(s, GET("/dir", "")).status, 301);
    sl_static_result r = run(s, GET("/dir/", ""));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.st.st_size, 5);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    assert_int_equal(run(s, GET("/empty/", "")).status, 403);
    assert_int_equal(run(s, GET("/", "")).status, 403);
}

/* A name longer than the file system allows is no file: 404, never 414 (the URI was not too
 * long; the parser answers that). */
static void test_name_too_long_is_404(void **state)
{
    tconf *s = *state;
    char raw[1024], name[300];
    memset(name, 'n', 256);
    name[256] = 0;
    snprintf(raw, sizeof raw, GET("/%s", ""), name);
    sl_static_result r = run(s, raw);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.err, -ENAMETOOLONG);
    snprintf(raw, sizeof raw, GET("/dir/%s/x", ""), name);
    assert_int_equal(run(s, raw).status, 404);
    assert_int_equal(sl_errno_to_status(-ENAMETOOLONG), 404);
    /* From a backend's X-Sendfile path too: the file is not there. */
    assert_int_equal(sl_static_backend_status(sl_errno_to_status(-ENAMETOOLONG)), 404);
    assert_int_equal(sl_static_backend_status(sl_errno_to_status(-EINVAL)), 502);
}

static void test_symlinks_and_special_files(void **state)
{
    tconf *s = *state;
    assert_int_equal(run(s, GET("/out", "")).status, 403); /* leads out of the root */
    assert_int_equal(run(s, GET("/in", "")).status, 200);
    assert_int_equal(run(s, GET("/fifo", "")).status, 403); /* and did not block */
    CORE(s)->follow_symlink = false;
    assert_int_equal(run(s, GET("/in", "")).status, 403);
}

static void test_deny_lists_and_methods(void **state)
{
    tconf *s = *state;
    static const char *const deny[] = {".inc"};
    ST(s)->access_deny.v = deny;
    ST(s)->access_deny.n = 1;
    assert_int_equal(run(s, GET("/secret.inc", "")).status, 403);
    ST(s)->access_deny.n = 0;
    ST(s)->exclude_extensions.v = deny;
    ST(s)->exclude_extensions.n = 1;
    assert_int_equal(run(s, GET("/secret.inc", "")).status, 403);
    assert_int_equal(run(s, "POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                         .status,
                     405);
    assert_int_equal(run(s, "DELETE /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n").status, 405);
    /* A method HTTP does not define is not "not allowed" here: it is not implemented at all. */
    assert_int_equal(run(s, "FOO /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n").status, 501);
    assert_int_equal(run(s, "get /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n").status, 501);
}

static void test_conditional_requests(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/hello.txt", ""));
    char raw[512], date[SL_HTTP_DATE_LEN + 1];
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-None-Match: %s\r\n"), r.etag);
    assert_int_equal(run(s, raw).status, 304);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Match: \"nope\"\r\n"));
    assert_int_equal(run(s, raw).status, 412);
    sl_http_date_format(r.st.st_mtim.tv_sec, date);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Modified-Since: %s\r\n"), date);
    assert_int_equal(run(s, raw).status, 304);
    sl_http_date_format(r.st.st_mtim.tv_sec - 10, date);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Unmodified-Since: %s\r\n"), date);
    assert_int_equal(run(s, raw).status, 412);
}

/* Fields on several lines: the entity-tag lists join (RFC 9110 §5.3), the dates are a list of
 * dates, which is ignored (§13.1.3, §13.1.4). */
static void test_conditionals_over_lines(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/hello.txt", ""));
    char raw[768], date[SL_HTTP_DATE_LEN + 1];
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-None-Match: \"x\"\r\nIf-None-Match: %s\r\n"),
             r.etag);
    assert_int_equal(run(s, raw).status, 304);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Match: \"x\"\r\nIf-Match: %s\r\n"), r.etag);
    assert_int_equal(run(s, raw).status, 200);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Match: \"x\"\r\nIf-Match: \"y\"\r\n"));
    assert_int_equal(run(s, raw).status, 412);
    sl_http_date_format(r.st.st_mtim.tv_sec, date);
    snprintf(raw, sizeof raw, GET("/hello.txt", "If-Modified-Since: %s\r\nIf-Modified-Since: %s\r\n"),
             date, date);
    assert_int_equal(run(s, raw).status, 200);
    sl_http_date_format(r.st.st_mtim.tv_sec - 10, date);
    snprintf(raw, sizeof raw,
             GET("/hello.txt", "If-Unmodified-Since: %s\r\nIf-Unmodified-Since: %s\r\n"), date, date);
    assert_int_equal(run(s, raw).status, 200);
}

/* Range and If-Range are singletons: on two lines, the whole file. */
static void test_ranges_over_lines(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/hello.txt", ""));
    assert_int_equal(run(s, GET("/hello.txt", "Range: bytes=0-1\r\nRange: bytes=0-1\r\n")).status,
                     200);
    char raw[768];
    snprintf(raw, sizeof raw, GET("/hello.txt", "Range: bytes=0-1\r\nIf-Range: %s\r\n"), r.etag);
    assert_int_equal(run(s, raw).status, 206);
    snprintf(raw, sizeof raw,
             GET("/hello.txt", "Range: bytes=0-1\r\nIf-Range: %s\r\nIf-Range: %s\r\n"), r.etag,
             r.etag);
    assert_int_equal(run(s, raw).status, 200);
}

static void test_ranges(void **state)
{
    tconf *s = *state;
    sl_static_result r = run(s, GET("/hello.txt", "Range: bytes=0-4\r\n"));
    assert_int_equal(r.status, 206);
    assert_int_equal(r.n_ranges, 1);
    assert_int_equal(r.ranges[0].first, 0);
    assert_int_equal(r.ranges[0].last, 4);
    r = run(s, GET("/hello.txt", "Range: bytes=0-1,5-6\r\n"));
    assert_int_equal(r.status, 206);
    assert_int_equal(r.n_ranges, 2);
    assert_int_equal(run(s, GET("/hello.txt", "Range: bytes=100-\r\n")).status, 416);
    assert_int_equal(run(s, GET("/hello.txt", "Range: lines=1-2\r\n")).status, 200);
    char raw[512];
    snprintf(raw, sizeof raw, GET("/hello.txt", "Range: bytes=0-1\r\nIf-Range: %s\r\n"), r.etag);
    assert_int_equal(run(s, raw).status, 206);
    snprintf(raw, sizeof raw, GET("/hello.txt", "Range: bytes=0-1\r\nIf-Range: \"stale\"\r\n"));
    assert_int_equal(run(s, raw).status, 200);
    assert_int_equal(run(s, "HEAD /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n")
                         .status,
                     200);
    assert_true(run(s, GET("/hello.txt", "")).accept_ranges);
    CORE(s)->range_requests = false;
    r = run(s, GET("/hello.txt", "Range: bytes=0-4\r\n"));
    assert_int_equal(r.status, 200);
    assert_false(r.accept_ranges);
}

static void test_open_beneath_refuses_escapes(void **state)
{
    int d = open(root, O_PATH | O_DIRECTORY);
    assert_int_equal(sl_open_beneath(d, "../etc/passwd", O_RDONLY, true), -EXDEV);
    assert_int_equal(sl_open_beneath(d, "/etc/passwd", O_RDONLY, true), -EXDEV);
    assert_int_equal(sl_open_beneath(d, "out", O_RDONLY, true), -EXDEV);
    assert_int_equal(sl_open_beneath(d, "in", O_RDONLY, false), -ELOOP);
    int f = sl_open_beneath(d, "in", O_RDONLY, true);
    assert_true(f >= 0);
    close(f);
    /* Noting links: a path without one is opened once, with RESOLVE_NO_SYMLINKS. */
    bool linked = true;
    f = sl_open_beneath_noting_links(d, "dir/index.html", O_RDONLY, true, false, &linked);
    assert_true(f >= 0);
    assert_false(linked);
    close(f);
    f = sl_open_beneath_noting_links(d, "in", O_RDONLY, true, false, &linked);
    assert_true(f >= 0);
    assert_true(linked);
    close(f);
    f = sl_open_beneath_noting_links(d, "lnkdir/index.html", O_RDONLY, true, false, &linked);
    assert_true(f >= 0);
    assert_true(linked);
    close(f);
    /* Not followed: refused, and not said to be reached through it. */
    assert_int_equal(sl_open_beneath_noting_links(d, "in", O_RDONLY, false, false, &linked), -ELOOP);
    assert_false(linked);
    /* A link that leads out is refused when followed too. */
    assert_int_equal(sl_open_beneath_noting_links(d, "out", O_RDONLY, true, false, &linked), -EXDEV);
    close(d);
}

static void resolve_flags(const tconf *s, const char *path, unsigned flags, int prefd,
                          sl_static_result *r)
{
    static char buf[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    sl_http_request req;
    sl_http_limits lim = {8192, 8192, SL_HTTP_MAX_HEADERS};
    assert_true(sl_http_parse_request(buf, strlen(buf), &lim, &req) > 0);
    assert_int_equal(sl_static_resolve(s->b, s->docroot_fd, &req, path, strlen(path), flags, prefd, r), 0);
}

/* Whether the file was reached through a symlink, for the open-file cache (which may skip its
 * own look at the path only for one that was not). */
static void test_a_file_reached_through_a_symlink_says_so(void **state)
{
    tconf *s = *state;
    static const struct {
        const char *raw;
        bool no_links;
    } cases[] = {
        {GET("/hello.txt", ""), true},
        {GET("/in", ""), false},
        {GET("/dir/", ""), true},
        {GET("/lnkdir/index.html", ""), false},
        {GET("/lnkdir/", ""), false}, /* the index file beneath a linked directory */
    };
    sl_static_result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = run(s, cases[i].raw);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.no_links, cases[i].no_links);
    }
    /* A file the ring opened: it follows symlinks exactly when the server does. */
    int d = open(root, O_PATH | O_DIRECTORY);
    resolve_flags(s, "/hello.txt", SL_RESOLVE_PREOPENED, openat(d, "hello.txt", O_RDONLY), &r);
    assert_int_equal(r.status, 200);
    assert_false(r.no_links);
    close(r.fd);
    CORE(s)->follow_symlink = false;
    resolve_flags(s, "/hello.txt", SL_RESOLVE_PREOPENED, openat(d, "hello.txt", O_RDONLY), &r);
    assert_true(r.no_links);
    close(r.fd);
    close(d);
    r = run(s, GET("/hello.txt", ""));
    assert_true(r.no_links);
    assert_int_equal(run(s, GET("/lnkdir/", "")).status, 403);
}

static void test_cached_lookup_and_preopened_fd(void **state)
{
    tconf *s = *state;
    sl_static_result r;
    /* Just created, so in the dentry cache: the cached-only lookup succeeds without waiting. */
    resolve_flags(s, "/hello.txt", SL_RESOLVE_CACHED, -1, &r);
    assert_int_equal(r.status, 200);
    close(r.fd);
    /* A file the ring opened: the decision continues from its fd. */
    int fd = open(root, O_PATH | O_DIRECTORY);
    int f = openat(fd, "hello.txt", O_RDONLY);
    close(fd);
    resolve_flags(s, "/hello.txt", SL_RESOLVE_PREOPENED, f, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.fd, f);
    assert_int_equal(r.st.st_size, 13);
    close(r.fd);
    /* The ring's errors map like the loop's own. */
    resolve_flags(s, "/nope", SL_RESOLVE_PREOPENED, -ENOENT, &r);
    assert_int_equal(r.status, 404);
    resolve_flags(s, "/out", SL_RESOLVE_PREOPENED, -EXDEV, &r);
    assert_int_equal(r.status, 403);
    /* O_NOATIME refused by the kernel (not the owner): status 0 asks for an open without it. */
    CORE(s)->use_noatime = true;
    resolve_flags(s, "/hello.txt", SL_RESOLVE_PREOPENED, -EPERM, &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.err, -EPERM);
    assert_true(sl_static_open_flags(s->b) & O_NOATIME);
    CORE(s)->use_noatime = false;
    resolve_flags(s, "/hello.txt", SL_RESOLVE_PREOPENED, -EPERM, &r);
    assert_int_equal(r.status, 403);
    /* A directory opened by the ring still gets its index file. */
    fd = open(root, O_PATH | O_DIRECTORY);
    f = openat(fd, "dir", O_RDONLY | O_DIRECTORY);
    close(fd);
    resolve_flags(s, "/dir/", SL_RESOLVE_PREOPENED, f, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.st.st_size, 5);
    close(r.fd);
}

/* A test given a fresh tconf as its state. */
#define CONF_TEST(test) cmocka_unit_test_setup_teardown(test, conf_open, conf_close)

TU_MAIN(setup, teardown,
        CONF_TEST(test_regular_file),
        CONF_TEST(test_missing_and_not_a_dir),
        CONF_TEST(test_directories),
        CONF_TEST(test_symlinks_and_special_files),
        CONF_TEST(test_a_file_reached_through_a_symlink_says_so),
        CONF_TEST(test_deny_lists_and_methods),
        CONF_TEST(test_conditional_requests),
        CONF_TEST(test_conditionals_over_lines),
        CONF_TEST(test_ranges_over_lines),
        CONF_TEST(test_ranges),
        CONF_TEST(test_name_too_long_is_404),
        cmocka_unit_test(test_open_beneath_refuses_escapes),
        CONF_TEST(test_cached_lookup_and_preopened_fd))
