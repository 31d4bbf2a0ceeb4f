/* Unit tests for typed settings: key checks at start-up and per-request condition overrides. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

#include "settings.h"

static char dir[] = "/tmp/sl_settings_XXXXXX";

static int setup(void **state)
{
    assert_non_null(mkdtemp(dir));
    char p[256];
    snprintf(p, sizeof p, "%s/a", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/b", dir);
    mkdir(p, 0755);
    return 0;
}

static int teardown(void **state)
{
    char p[256];
    snprintf(p, sizeof p, "%s/a", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/b", dir);
    rmdir(p);
    rmdir(dir);
    return 0;
}

typedef struct fixture {
    sl_config_tree *t;
    sl_settings g;
    sl_listen_spec listen[SL_MAX_LISTENERS];
    size_t n_listen;
    char err[4096];
} fixture;

/* Parse (keeping a partial tree) and prepare; every error, one per line, lands in f->err. */
static int prepare(fixture *f, const char *text)
{
    memset(f, 0, sizeof *f);
    sl_config_errors errs = {0};
    f->t = sl_config_parse_string_all(text, strlen(text), "t.conf", dir, &errs);
    assert_non_null(f->t);
    int r = sl_settings_prepare(f->t, dir, &f->g, f->listen, &f->n_listen, &errs);
    sl_config_errors_join(&errs, f->err, sizeof f->err);
    if (r == 0 && sl_config_errors_any(&errs)) fail_msg("prepare passed with errors: %s", f->err);
    sl_config_errors_free(&errs);
    return r;
}

static void done(fixture *f)
{
    sl_settings_release();
    sl_config_tree_free(f->t);
}

static void test_defaults_and_relative_docroot(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\nserver.port = 8080\n"), 0);
    char want[256];
    snprintf(want, sizeof want, "%s/a", dir);
    assert_string_equal(f.g.document_root, want);
    assert_true(f.g.docroot_fd >= 0);
    assert_int_equal(f.g.port, 8080);
    assert_int_equal(f.g.max_keep_alive_requests, 1000);
    assert_int_equal(f.g.max_request_field_size, 8192);
    assert_true(f.g.etags && f.g.range_requests && f.g.follow_symlink);
    assert_int_equal(f.n_listen, 1);
    assert_string_equal(f.listen[0].canon, "0.0.0.0:8080");
    done(&f);
}

static void expect_error(const char *text, const char *needle)
{
    fixture f;
    assert_int_equal(prepare(&f, text), -1);
    if (!strstr(f.err, needle)) fail_msg("error '%s' lacks '%s'", f.err, needle);
    done(&f);
}

static void test_errors_name_file_and_line(void **state)
{
    expect_error("server.document-root = \"a\"\nserver.bogus = 1\n",
                 "t.conf:2: unknown config key 'server.bogus'");
    expect_error("server.document-root = \"a\"\nserver.port = \"80\"\n",
                 "t.conf:2: 'server.port' must be an integer, not string");
    expect_error("server.document-root = \"a\"\nserver.range-requests = \"yes\"\n",
                 "t.conf:2: 'server.range-requests' must be \"enable\" or \"disable\"");
    expect_error("server.document-root = \"a\"\n$HTTP[\"host\"] == \"x\" {\n server.port = 81\n}\n",
                 "t.conf:3: 'server.port' can only be set at the top level");
    expect_error("server.document-root = \"missing\"\n", "t.conf:1: server.document-root");
    expect_error("server.port = 80\n", "server.document-root is not set");
    expect_error("server.document-root = \"a\"\nserver.port = 70000\n", "out of range");
    expect_error("server.document-root = \"a\"\nserver.event-handler = \"kqueue\"\n",
                 "not supported");
}

/* Exactly these errors, in this order (each a full "file:line: message" prefix). */
static void expect_errors(const char *text, const char *const *want, size_t n)
{
    fixture f;
    assert_int_equal(prepare(&f, text), -1);
    const char *p = f.err;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(p, want[i], strlen(want[i])) != 0)
            fail_msg("error %zu: wanted '%s' in:\n%s", i, want[i], f.err);
        p = strchr(p, '\n');
        if (i + 1 < n && !p) fail_msg("only %zu errors in:\n%s", i + 1, f.err);
        if (p) p++;
    }
    if (p && *p) fail_msg("more errors than the %zu expected:\n%s", n, f.err);
    done(&f);
}

static void test_every_error_is_reported(void **state)
{
    /* One of each kind of semantic error, in the top level and in conditions: all reported,
     * in file order, in one call. */
    static const char *const want[] = {
        "t.conf:2: unknown config key 'server.bogus'",
        "t.conf:3: 'server.port' must be an integer, not string",
        "t.conf:4: server.event-handler \"kqueue\" is not supported",
        "t.conf:6: 'server.max-read-threads' can only be set at the top level",
        "t.conf:7: server.document-root \"",
        "t.conf:9: proxy-core.protocol \"scgi\" is not supported",
        "t.conf:10: $SERVER[\"socket\"] \"nonsense\": not a socket address",
    };
    expect_errors("server.document-root = \"a\"\n"
                  "server.bogus = 1\n"
                  "server.port = \"80\"\n"
                  "server.event-handler = \"kqueue\"\n"
                  "$HTTP[\"host\"] == \"x\" {\n"
                  "  server.max-read-threads = 4\n"
                  "  server.document-root = \"missing\"\n"
                  "}\n"
                  "proxy-core.protocol = \"scgi\"\n"
                  "$SERVER[\"socket\"] == \"nonsense\" { }\n",
                  want, sizeof want / sizeof want[0]);
    /* Syntax and meaning together: the parser's errors, then the checks of what did parse. */
    static const char *const both[] = {
        "t.conf:2: invalid integer '12x'",
        "t.conf:3: unsupported condition $HTTP[\"useragent\"]",
        "t.conf:4: unknown config key 'nope.inside'",
        "t.conf:6: unknown config key 'nope.after'",
    };
    expect_errors("server.document-root = \"a\"\n"
                  "server.port = 12x\n"
                  "$HTTP[\"useragent\"] =~ \"bot\" {\n"
                  "  nope.inside = 1\n"
                  "}\n"
                  "nope.after = 1\n",
                  both, sizeof both / sizeof both[0]);
    /* A document root lost to a syntax error is not also reported as "not set". */
    static const char *const lost[] = {"t.conf:1: unterminated string"};
    expect_errors("server.document-root = \"a\n", lost, 1);
    /* Not set at all: named by the file, without a line. */
    static const char *const unset[] = {"t.conf: server.document-root is not set"};
    expect_errors("server.port = 8080\n", unset, 1);
}

static void path_in_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* What start-up would refuse: a user or group that does not exist, a document root the server's
 * user cannot enter, log and pid files that cannot be created or written. As root the checks
 * are made as server.username "nobody" (the way start-up would open them); otherwise as the
 * user running the test, with permissions that shut it out. */
static void test_startup_refusals(void **state)
{
    bool root = geteuid() == 0;
    char closed[300], ro[300], conf[3000];
    path_in_dir(closed, sizeof closed, "closed");
    path_in_dir(ro, sizeof ro, "ro");
    assert_int_equal(mkdir(closed, root ? 0700 : 0600), 0);
    assert_int_equal(mkdir(ro, root ? 0755 : 0555), 0);
    assert_int_equal(chmod(dir, 0755), 0); /* mkdtemp's 0700 would shut "nobody" out of all */
    snprintf(conf, sizeof conf,
             "server.document-root = \"a\"\n"
             "%s"
             "server.errorlog = \"nodir/error.log\"\n"
             "accesslog.filename = \"ro/access.log\"\n"
             "server.pid-file = \"b\"\n"
             "$HTTP[\"host\"] == \"c\" { server.document-root = \"closed\" }\n",
             root ? "server.username = \"nobody\"\n" : "");
    char w[4][1400];
    const char *by = root ? " by user \"nobody\"" : "";
    int l = root ? 1 : 0; /* the username line shifts the rest */
    snprintf(w[0], sizeof w[0], "t.conf:%d: server.errorlog \"%s/nodir/error.log\": cannot be "
             "created in %s/nodir: No such file or directory", 2 + l, dir, dir);
    snprintf(w[1], sizeof w[1], "t.conf:%d: accesslog.filename \"%s/access.log\": cannot be "
             "created in %s%s: Permission denied", 3 + l, ro, ro, by);
    snprintf(w[2], sizeof w[2], "t.conf:%d: server.pid-file \"%s/b\": cannot be written: Is a "
             "directory", 4 + l, dir);
    snprintf(w[3], sizeof w[3], "t.conf:%d: server.document-root \"%s\": cannot be entered%s: "
             "Permission denied", 5 + l, closed, by);
    const char *const want[] = {w[0], w[1], w[2], w[3]};
    uid_t uid = geteuid();
    gid_t gid = getegid();
    expect_errors(conf, want, 4);
    /* Judging as "nobody" left this process's own credentials alone. */
    assert_int_equal(geteuid(), uid);
    assert_int_equal(getegid(), gid);

    static const char *const nouser[] = {
        "t.conf:2: server.username \"sl-no-such-user\": no such user",
        "t.conf:3: server.groupname \"sl-no-such-group\": no such group",
    };
    expect_errors("server.document-root = \"a\"\nserver.username = \"sl-no-such-user\"\n"
                  "server.groupname = \"sl-no-such-group\"\n", nouser, 2);

    /* What the server's user can use passes. */
    fixture f;
    snprintf(conf, sizeof conf, "server.document-root = \"a\"\n%s"
             "server.errorlog = \"error.log\"\naccesslog.filename = \"%s/access.log\"\n",
             root ? "server.username = \"nobody\"\n" : "", root ? "/tmp" : dir);
    assert_int_equal(prepare(&f, conf), 0);
    done(&f);
    assert_int_equal(chmod(dir, 0700), 0);
    rmdir(closed);
    rmdir(ro);
}

static void test_cidr(void **state)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.5", &a4.sin_addr);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6.sin6_addr);
    struct sockaddr_in6 l6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::1", &l6.sin6_addr);
    assert_true(sl_cidr_match("127.0.0.0/8", (struct sockaddr *)&a4));
    assert_false(sl_cidr_match("127.0.0.0/30", (struct sockaddr *)&a4));
    assert_true(sl_cidr_match("127.0.0.5", (struct sockaddr *)&a4));
    assert_true(sl_cidr_match("0.0.0.0/0", (struct sockaddr *)&a4));
    assert_true(sl_cidr_match("10.0.0.0/8", (struct sockaddr *)&a6)); /* IPv4-mapped */
    assert_false(sl_cidr_match("::1/128", (struct sockaddr *)&a4));
    assert_true(sl_cidr_match("::1/128", (struct sockaddr *)&l6));
    assert_false(sl_cidr_match("::2/128", (struct sockaddr *)&l6));
    unsigned char net[16];
    int fam, bits;
    assert_int_equal(sl_cidr_parse("10.0.0.0/33", net, &fam, &bits), -EINVAL);
    assert_int_equal(sl_cidr_parse("10.0.0.0/", net, &fam, &bits), -EINVAL);
    assert_int_equal(sl_cidr_parse("nope", net, &fam, &bits), -EINVAL);
    assert_int_equal(sl_cidr_parse("fe80::/10", net, &fam, &bits), 0);
    assert_int_equal(bits, 10);
    expect_error("server.document-root = \"a\"\nstatus.allow-networks = ( \"1.2.3.4/99\" )\n",
                 "t.conf:2: status.allow-networks: \"1.2.3.4/99\" is not a network");
    expect_error("server.document-root = \"a\"\nstatus.status-url = \"status\"\n",
                 "t.conf:2: status.status-url must start with '/'");
}

static void test_proxy_core_keys(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\n"
                                 "$HTTP[\"url\"] =~ \"^/x/\" {\n"
                                 " proxy-core.backends = ( \"127.0.0.1:1029\", \"[::1]:80\","
                                 " \"unix:/tmp/s.sock\" )\n"
                                 " proxy-core.protocol = \"fastcgi\"\n"
                                 " proxy-core.balancer = \"carp\"\n"
                                 " proxy-core.allow-x-sendfile = \"enable\"\n"
                                 " proxy-core.x-sendfile-docroot = ( \"a/\" )\n}\n"),
                     0);
    /* Outside the condition nothing is proxied; the defaults are lighttpd-like. */
    assert_int_equal(f.g.proxy_backends.n, 0);
    assert_string_equal(f.g.proxy_protocol, "http");
    assert_string_equal(f.g.proxy_balancer, "sqf");
    sl_settings r;
    sl_cond_input in = {.socket = "0.0.0.0:80", .url = "/x/y", .host = "", .query = ""};
    sl_settings_for_request(f.t, &f.g, &in, &r);
    assert_int_equal(r.proxy_backends.n, 3);
    assert_string_equal(r.proxy_backends.v[0], "127.0.0.1:1029");
    assert_string_equal(r.proxy_backends.v[1], "[::1]:80");
    assert_string_equal(r.proxy_backends.v[2], "unix:/tmp/s.sock");
    assert_string_equal(r.proxy_protocol, "fastcgi");
    assert_true(r.proxy_allow_x_sendfile);
    assert_int_equal(r.proxy_xsendfile_roots.n, 1);
    char want[600];
    snprintf(want, sizeof want, "%s/a", dir);
    assert_string_equal(r.proxy_xsendfile_roots.path[0], want); /* absolute, no trailing slash */
    assert_true(r.proxy_xsendfile_roots.fd[0] >= 0);
    done(&f);
    expect_error("server.document-root = \"a\"\nproxy-core.protocol = \"scgi\"\n",
                 "t.conf:2: proxy-core.protocol \"scgi\" is not supported");
    expect_error("server.document-root = \"a\"\nproxy-core.balancer = \"fair\"\n",
                 "t.conf:2: proxy-core.balancer \"fair\" is not supported");
    expect_error("server.document-root = \"a\"\nproxy-core.backends = ( \"nocolon\" )\n",
                 "t.conf:2: proxy-core.backends: \"nocolon\": not");
    expect_error("server.document-root = \"a\"\nproxy-core.backends = ( \"unix:/"
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" )\n",
                 "unix socket path too long");
    expect_error("server.document-root = \"a\"\nproxy-core.backends = ( \"1.2.3.4:99999\" )\n",
                 "t.conf:2: proxy-core.backends:");
    expect_error("server.document-root = \"a\"\nproxy-core.x-sendfile-docroot = ( \"nope\" )\n",
                 "t.conf:2: proxy-core.x-sendfile-docroot");
}

static void test_backend_keys(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\n"), 0);
    assert_string_equal(f.g.network_backend, "hybrid");
    assert_int_equal(f.g.max_read_threads, 16);
    assert_int_equal(f.g.max_stat_threads, 4);
    assert_int_equal(f.g.block_size, 512 * 1024);
    assert_false(f.g.use_noatime);
    done(&f);
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\n"
                                 "server.network-backend = \"gthread-aio\"\n"
                                 "server.max-stat-threads = 0\nserver.max-read-threads = 64\n"
                                 "server.network-backend-block-size = 262144\n"
                                 "server.use-noatime = \"enable\"\n"),
                     0);
    assert_string_equal(f.g.network_backend, "gthread-aio");
    assert_int_equal(f.g.max_stat_threads, 0);
    assert_int_equal(f.g.max_read_threads, 64);
    assert_int_equal(f.g.block_size, 262144);
    assert_true(f.g.use_noatime);
    done(&f);
    expect_error("server.document-root = \"a\"\nserver.network-backend = \"carrier-pigeon\"\n",
                 "t.conf:2: server.network-backend \"carrier-pigeon\" is not compiled into this "
                 "seekless (available: \"hybrid\", \"linux-sendfile\"");
    expect_error("server.document-root = \"a\"\nserver.network-backend-block-size = 1000\n",
                 "t.conf:2: server.network-backend-block-size must be a multiple of 4096");
    expect_error("server.document-root = \"a\"\nserver.max-read-threads = 0\n",
                 "t.conf:2: 'server.max-read-threads' 0 is out of range (1..1024)");
    expect_error("server.document-root = \"a\"\nserver.max-stat-threads = 5000\n",
                 "out of range (0..1024)");
    expect_error("server.document-root = \"a\"\n$HTTP[\"url\"] =~ \"^/x/\" {\n"
                 " server.network-backend = \"writev\"\n}\n",
                 "t.conf:3: 'server.network-backend' can only be set at the top level");
}

static void test_conditions_override_per_request(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\nserver.port = 8080\n"
                                 "$HTTP[\"host\"] == \"b.example\" { server.document-root = \"b\" }\n"
                                 "else $HTTP[\"url\"] =~ \"^/nokeep/\" {\n"
                                 "  server.max-keep-alive-requests = 0\n"
                                 "  url.access-deny = ( \".secret\" )\n}\n"
                                 "$SERVER[\"socket\"] == \"127.0.0.1:9090\" { static-file.etags = "
                                 "\"disable\" }\n"),
                     0);
    assert_int_equal(f.n_listen, 2);
    assert_string_equal(f.listen[1].literal, "127.0.0.1:9090");
    sl_settings r;
    sl_cond_input in = {.socket = f.listen[0].literal, .url = "/x", .host = "b.example"};
    sl_settings_for_request(f.t, &f.g, &in, &r);
    assert_non_null(strstr(r.document_root, "/b"));
    assert_int_not_equal(r.docroot_fd, f.g.docroot_fd);
    assert_true(r.etags);
    in.host = "other";
    in.url = "/nokeep/y";
    sl_settings_for_request(f.t, &f.g, &in, &r);
    assert_non_null(strstr(r.document_root, "/a"));
    assert_int_equal(r.max_keep_alive_requests, 0);
    assert_int_equal(r.access_deny.n, 1);
    assert_string_equal(r.access_deny.v[0], ".secret");
    in.socket = f.listen[1].literal;
    in.url = "/";
    sl_settings_for_request(f.t, &f.g, &in, &r);
    assert_false(r.etags);
    assert_int_equal(r.access_deny.n, 0);
    done(&f);
}

static void test_default_socket_takes_the_conditions_spelling(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\nserver.port = 1025\n"
                                 "$SERVER[\"socket\"] == \":1025\" { server.max-read-idle = 7 }\n"),
                     0);
    assert_int_equal(f.n_listen, 1);
    assert_string_equal(f.listen[0].literal, ":1025");
    sl_settings r;
    sl_cond_input in = {.socket = f.listen[0].literal, .url = "/"};
    sl_settings_for_request(f.t, &f.g, &in, &r);
    assert_int_equal(r.max_read_idle, 7);
    done(&f);
    expect_error("server.document-root = \"a\"\n$SERVER[\"socket\"] == \":1026\" {}\n"
                 "$SERVER[\"socket\"] == \"0.0.0.0:1026\" {}\n",
                 "t.conf:3: $SERVER[\"socket\"] \"0.0.0.0:1026\" names the same socket");
    expect_error("server.document-root = \"a\"\n$SERVER[\"socket\"] == \"nonsense\" {}\n",
                 "t.conf:2: $SERVER[\"socket\"] \"nonsense\"");
}

static void test_mimetype_assign_replaces_the_default(void **state)
{
    fixture f;
    assert_int_equal(prepare(&f, "server.document-root = \"a\"\n"
                                 "mimetype.assign = ( \".foo\" => \"application/x-foo\" )\n"),
                     0);
    assert_string_equal(sl_mime_lookup(f.g.mime, "/x.foo", 6), "application/x-foo");
    assert_string_equal(sl_mime_lookup(f.g.mime, "/x.html", 7), "application/octet-stream");
    done(&f);
    expect_error("server.document-root = \"a\"\nmimetype.assign = ( \"text/html\" )\n",
                 "t.conf:2: 'mimetype.assign' must be an array of \".ext\" => \"type\" pairs");
}

static void test_socket_canonical(void **state)
{
    char out[128];
    assert_int_equal(sl_socket_canonical(":80", out, sizeof out), 0);
    assert_string_equal(out, "0.0.0.0:80");
    assert_int_equal(sl_socket_canonical("127.0.0.1:8080", out, sizeof out), 0);
    assert_string_equal(out, "127.0.0.1:8080");
    assert_int_equal(sl_socket_canonical("[::1]:8080", out, sizeof out), 0);
    assert_string_equal(out, "[::1]:8080");
    assert_int_equal(sl_socket_canonical("::1:80", out, sizeof out), -EINVAL);
    assert_int_equal(sl_socket_canonical("127.0.0.1", out, sizeof out), -EINVAL);
    assert_int_equal(sl_socket_canonical(":0", out, sizeof out), -EINVAL);
    assert_int_equal(sl_socket_canonical(":99999", out, sizeof out), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_relative_docroot),
        cmocka_unit_test(test_errors_name_file_and_line),
        cmocka_unit_test(test_every_error_is_reported),
        cmocka_unit_test(test_startup_refusals),
        cmocka_unit_test(test_proxy_core_keys),
        cmocka_unit_test(test_cidr),
        cmocka_unit_test(test_backend_keys),
        cmocka_unit_test(test_conditions_override_per_request),
        cmocka_unit_test(test_default_socket_takes_the_conditions_spelling),
        cmocka_unit_test(test_mimetype_assign_replaces_the_default),
        cmocka_unit_test(test_socket_canonical),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
