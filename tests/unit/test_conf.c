/* Unit tests for the config layer (server/conf.c) and the core's keys (server/core_conf.c): key
 * checks at start-up with every error reported, server.modules, module key tables, and
 * per-request condition overrides. Socket addresses and networks: server/addr.c. */
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

#include "testutil.h"

#include "addr.h"
#include "conf.h"
#include "core_conf.h"
#include "mod_proxy.h"
#include "mod_static.h"
#include "mod_status.h"

/* The list of fields that follows an unsupported $HTTP[...] condition. */
#define KNOWN_FIELDS " (known: url, host, querystring, remoteip, scheme, request-method, useragent, referer, cookie, language; any header with $REQUEST_HEADER[\"Name\"])"

static char dir[] = "/tmp/sl_conf_XXXXXX";

/* A module of the test's own, to see the interface from a module's side. */
typedef struct demo_conf {
    const char *greeting;
    long count;
    bool loud;
    sl_strlist names;
    sl_kvlist map;
    const char *checked; /* SL_KEY_VALUE: what prepare made */
    const char *slot;    /* demo.capture: "slot N" (sl_key_keep_captures) */
} demo_conf;

static int demo_released;

static int prep_checked(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING || strncmp(v->str, "ok-", 3)) {
        snprintf(ctx->err, ctx->errlen, "demo.checked must start with ok-");
        return -1;
    }
    *out = strdup(v->str + 3);
    return 0;
}

/* A key whose value uses its block's condition groups (as %N in url.redirect does). */
static int prep_capture(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    int slot = sl_key_keep_captures(ctx);
    if (slot < 0) {
        snprintf(ctx->err, ctx->errlen, "demo.capture needs a =~ block");
        return -1;
    }
    char *s = malloc(16);
    if (s) snprintf(s, 16, "slot %d", slot);
    *out = s;
    return 0;
}

static void release_checked(void *p)
{
    demo_released++;
    free(p);
}

static void demo_defaults(void *p)
{
    demo_conf *d = p;
    d->greeting = "hello";
    d->count = 3;
}

static const sl_key demo_keys[] = {
    {"demo.greeting", SL_KEY_STRING, 0, offsetof(demo_conf, greeting), NULL, NULL},
    {"demo.count", SL_KEY_INT, SL_KEY_GLOBAL, offsetof(demo_conf, count), NULL, NULL},
    {"demo.loud", SL_KEY_BOOL, 0, offsetof(demo_conf, loud), NULL, NULL},
    {"demo.names", SL_KEY_STRLIST, 0, offsetof(demo_conf, names), NULL, NULL},
    {"demo.map", SL_KEY_KVLIST, 0, offsetof(demo_conf, map), NULL, NULL},
    {"demo.checked", SL_KEY_VALUE, 0, offsetof(demo_conf, checked), prep_checked,
     release_checked},
    {"demo.capture", SL_KEY_VALUE, 0, offsetof(demo_conf, slot), prep_capture, free},
    {NULL},
};

static const char *const demo_aliases[] = {"mod_demo", NULL};
static sl_module mod_demo = {
    .name = "demo",
    .aliases = demo_aliases,
    .keys = demo_keys,
    .conf_size = sizeof(demo_conf),
    .defaults = demo_defaults,
};

extern sl_module sl_mod_accesslog; /* modules/mod_accesslog.c: no header, a table only */

static sl_module *const mods[] = {&sl_mod_core, &sl_mod_status, &mod_demo, &sl_mod_proxy,
                                  &sl_mod_accesslog, &sl_mod_static, NULL};

#define DEMO(b) SL_MODCONF(b, mod_demo, demo_conf)
#define STATIC(b) SL_MODCONF(b, sl_mod_static, sl_static_conf)
#define PROXY(b) SL_MODCONF(b, sl_mod_proxy, sl_proxy_conf)

static int setup(void **state)
{
    assert_non_null(mkdtemp(dir));
    tu_mkdir(dir, "a", 0755);
    tu_mkdir(dir, "b", 0755);
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
    sl_conf_set *cs;
    sl_conf *buf; /* for_request's block, made on first use */
    size_t n_errs;
    char errs[8192]; /* every error, one per line */
} fixture;

/* Load text; check_system also judges users, groups and access rights as start-up does. */
static sl_conf_set *load_as(fixture *f, const char *text, bool check_system)
{
    memset(f, 0, sizeof *f);
    sl_config_errors errs = {0};
    f->cs = sl_conf_load_string(text, strlen(text), "t.conf", dir, mods, check_system, &errs);
    sl_config_errors_join(&errs, f->errs, sizeof f->errs);
    f->n_errs = errs.n;
    if (f->cs && sl_config_errors_any(&errs)) fail_msg("loaded with errors: %s", f->errs);
    sl_config_errors_free(&errs);
    return f->cs;
}

static sl_conf_set *load(fixture *f, const char *text)
{
    return load_as(f, text, false);
}

static void done(fixture *f)
{
    free(f->buf);
    sl_conf_free(f->cs);
}

/* The settings for a request on the listener given (captures into caps, if given). */
static const sl_conf *for_request(fixture *f, unsigned listener, const sl_cond_input *in,
                                  sl_cond_capture *caps)
{
    if (!f->buf) f->buf = malloc(f->cs->block_size);
    assert_non_null(f->buf);
    return sl_conf_for_request(f->cs, listener, in, f->buf, caps);
}

static const sl_core_conf *G(fixture *f)
{
    return sl_core(f->cs->global);
}

static void expect_error(const char *text, const char *needle)
{
    fixture f;
    assert_null(load(&f, text));
    if (!strstr(f.errs, needle)) fail_msg("errors '%s' lack '%s'", f.errs, needle);
    done(&f);
}

static void test_defaults_and_relative_docroot(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\nserver.port = 8080\n"));
    char want[256];
    snprintf(want, sizeof want, "%s/a", dir);
    assert_string_equal(G(&f)->docroot->path, want);
    assert_true(G(&f)->docroot->fd >= 0);
    assert_int_equal(G(&f)->port, 8080);
    assert_int_equal(G(&f)->max_keep_alive_requests, 1000);
    assert_int_equal(G(&f)->max_request_field_size, 8192);
    assert_true(G(&f)->range_requests && G(&f)->follow_symlink);
    assert_true(STATIC(f.cs->global)->etags);
    assert_int_equal(f.cs->n_listen, 1); /* [0] is filled in by the core from bind/port */
    done(&f);
}

/* Configs that are refused, and what their errors must say. */
static const struct {
    const char *text, *says;
} refusals[] = {
    /* Errors name the file and the line. */
    {"server.document-root = \"a\"\nserver.bogus = 1\n",
     "t.conf:2: unknown config key 'server.bogus'"},
    {"server.document-root = \"a\"\nserver.port = \"80\"\n",
     "t.conf:2: 'server.port' must be an integer, not string"},
    {"server.document-root = \"a\"\nserver.range-requests = \"yes\"\n",
     "t.conf:2: 'server.range-requests' must be \"enable\" or \"disable\""},
    {"server.document-root = \"a\"\n$HTTP[\"host\"] == \"x\" {\n server.port = 81\n}\n",
     "t.conf:3: 'server.port' can only be set at the top level"},
    {"server.document-root = \"missing\"\n", "t.conf:1: server.document-root"},
    {"server.document-root = \"a\"\nserver.port = 70000\n", "out of range"},
    {"server.document-root = \"a\"\nserver.event-handler = \"kqueue\"\n",
     "not supported"},
    {"server.document-root = \"a\"\nserver.max-keep-alive-idle = -1\n",
     "t.conf:2: 'server.max-keep-alive-idle' must not be negative"},
    /* server.feature-flags and server.upload-dirs: what seekless lacks, refused with the reason. */
    {"server.document-root = \"a\"\nserver.feature-flags = (\"server.graceful-restart-bg\" => \"enable\")\n",
     "t.conf:2: server.feature-flags \"server.graceful-restart-bg\" => \"enable\" is not supported"},
    {"server.document-root = \"a\"\nserver.feature-flags = (\"server.h2c\" => \"maybe\")\n",
     "t.conf:2: server.feature-flags \"server.h2c\" must be \"enable\" or \"disable\""},
    {"server.document-root = \"a\"\nserver.feature-flags = (\"server.metrics\" => 1)\n",
     "t.conf:2: server.feature-flags: \"server.metrics\" is not a flag seekless has"},
    {"server.document-root = \"a\"\nserver.feature-flags = "
     "(\"server.graceful-shutdown-timeout\" => \"5\")\n", "must be seconds"},
    {"server.document-root = \"a\"\nserver.graceful-shutdown-timeout = 10\n"
     "server.feature-flags = (\"server.graceful-shutdown-timeout\" => 5)\n",
     "t.conf:2: server.graceful-shutdown-timeout 10 and server.feature-flags"},
    {"server.document-root = \"a\"\nserver.upload-dirs = \"/tmp\"\n",
     "server.upload-dirs must be an array of directories"},
    /* A module's keys given values of the wrong type. */
    {"server.document-root = \"a\"\ndemo.map = ( \"a\", \"b\" )\n",
     "t.conf:2: 'demo.map' must be an array of \"key\" => \"value\" pairs"},
    {"server.document-root = \"a\"\ndemo.names = \"x\"\n",
     "t.conf:2: 'demo.names' must be an array of strings, not string"},
    /* server.modules: a key of a module it does not load, and a module seekless lacks. */
    {"server.modules = ( \"mod_demo\" )\nserver.document-root = \"a\"\n"
     "status.status-url = \"/s\"\n",
     "t.conf:3: 'status.status-url' belongs to mod_status, which server.modules does "
     "not load (add \"mod_status\" to it)"},
    {"server.modules = ( \"mod_rainbow\" )\nserver.document-root = \"a\"\n",
     "t.conf:1: server.modules: \"mod_rainbow\" is not a module of seekless (it has: "},
    /* A lighttpd module seekless leaves out by design says why, by name and by its keys. */
    {"server.modules = ( \"mod_cgi\" )\nserver.document-root = \"a\"\n",
     "t.conf:1: server.modules: \"mod_cgi\" is not a module of seekless: it runs no programs"},
    {"server.document-root = \"a\"\nsockproxy.backend = \"x\"\n",
     "t.conf:2: config key 'sockproxy.backend' belongs to mod_sockproxy, which seekless leaves "
     "out: it speaks HTTP"},
    /* Networks and the status URL. */
    {"server.document-root = \"a\"\nstatus.allow-networks = ( \"1.2.3.4/99\" )\n",
     "t.conf:2: status.allow-networks: \"1.2.3.4/99\" is not a network"},
    {"server.document-root = \"a\"\nstatus.status-url = \"status\"\n",
     "t.conf:2: status.status-url must start with '/'"},
    /* proxy-core keys. */
    {"server.document-root = \"a\"\nproxy-core.protocol = \"scgi\"\n",
     "t.conf:2: proxy-core.protocol \"scgi\" is not supported"},
    {"server.document-root = \"a\"\nproxy-core.balancer = \"fair\"\n",
     "t.conf:2: proxy-core.balancer \"fair\" is not supported"},
    {"server.document-root = \"a\"\nproxy-core.backends = ( \"nocolon\" )\n",
     "t.conf:2: proxy-core.backends: \"nocolon\": not"},
    {"server.document-root = \"a\"\nproxy-core.backends = ( \"unix:/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" )\n",
     "unix socket path too long"},
    {"server.document-root = \"a\"\nproxy-core.backends = ( \"1.2.3.4:99999\" )\n",
     "t.conf:2: proxy-core.backends:"},
    {"server.document-root = \"a\"\nproxy-core.x-sendfile-docroot = ( \"nope\" )\n",
     "t.conf:2: proxy-core.x-sendfile-docroot"},
    /* Backend keys. */
    {"server.document-root = \"a\"\nserver.network-backend = \"carrier-pigeon\"\n",
     "t.conf:2: server.network-backend \"carrier-pigeon\" is not compiled into this "
     "seekless (available: \"hybrid\", \"hybrid-threads\", \"linux-sendfile\""},
    {"server.document-root = \"a\"\nserver.network-backend-block-size = 1000\n",
     "t.conf:2: server.network-backend-block-size must be a multiple of 4096"},
    {"server.document-root = \"a\"\nserver.max-read-threads = 0\n",
     "t.conf:2: 'server.max-read-threads' 0 is out of range (1..1024)"},
    {"server.document-root = \"a\"\nserver.max-stat-threads = 5000\n",
     "out of range (0..1024)"},
    {"server.document-root = \"a\"\n$HTTP[\"url\"] =~ \"^/x/\" {\n"
     " server.network-backend = \"writev\"\n}\n",
     "t.conf:3: 'server.network-backend' can only be set at the top level"},
    /* Condition captures. */
    {"server.document-root = \"a\"\n$HTTP[\"url\"] !~ \"(x)\" { demo.capture = \"x\" }\n",
     "t.conf:2: demo.capture needs a =~ block"},
    {"server.document-root = \"a\"\n$HTTP[\"url\"] =~ \"(x)\" { } else { demo.capture = \"x\" }\n",
     "t.conf:2: demo.capture needs a =~ block"},
    {"server.document-root = \"a\"\ndemo.capture = \"x\"\n",
     "t.conf:2: demo.capture needs a =~ block"},
    /* $SERVER["socket"] conditions. */
    {"server.document-root = \"a\"\n$SERVER[\"socket\"] == \":1026\" {}\n"
     "$SERVER[\"socket\"] == \"0.0.0.0:1026\" {}\n",
     "t.conf:3: $SERVER[\"socket\"] \"0.0.0.0:1026\" names the same socket"},
    {"server.document-root = \"a\"\n$SERVER[\"socket\"] == \"nonsense\" {}\n",
     "t.conf:2: $SERVER[\"socket\"] \"nonsense\""},
    /* mimetype.assign. */
    {"server.document-root = \"a\"\nmimetype.assign = ( \"text/html\" )\n",
     "t.conf:2: 'mimetype.assign' must be an array of \".ext\" => \"type\" pairs"},
};

static void test_refusals(void **state)
{
    TU_EACH(c, refusals) expect_error(c->text, c->says);
}

/* lighttpd's server.feature-flags and server.upload-dirs (Debian's lighttpd.conf sets both):
 * what seekless has is applied, what it lacks is refused with the reason. */
static void test_feature_flags_and_upload_dirs(void **state)
{
    fixture f;
    assert_non_null(load_as(&f, "server.document-root = \"a\"\n"
                                "server.feature-flags += (\"server.h2proto\" => \"disable\")\n"
                                "server.feature-flags += (\"server.graceful-shutdown-timeout\" => 5)\n"
                                "server.feature-flags += (\"server.graceful-restart-bg\" => 0)\n"
                                "server.upload-dirs = ( \"a\", \"/tmp\" )\n", true));
    assert_int_equal(sl_core_graceful_timeout(G(&f)), 5);
    assert_false(sl_core_h2proto(G(&f)));
    done(&f);
    assert_non_null(load(&f, "server.document-root = \"a\"\nserver.feature-flags += "
                             "(\"server.h2proto\" => \"enable\", \"server.h2c\" => \"enable\")\n"));
    assert_true(sl_core_h2proto(G(&f)) && sl_core_h2c(G(&f)));
    done(&f);
    assert_non_null(load(&f, "server.document-root = \"a\"\n"));
    assert_int_equal(sl_core_graceful_timeout(G(&f)), 30);
    done(&f);
    fixture g;
    assert_null(load_as(&g, "server.document-root = \"a\"\nserver.upload-dirs = ( \"/no/such/dir\" )\n",
                        true));
    if (!strstr(g.errs, "t.conf:2: server.upload-dirs \"/no/such/dir\": No such file or directory"))
        fail_msg("%s", g.errs);
    done(&g);
}

static void test_every_error_in_one_run(void **state)
{
    fixture f;
    assert_null(load(&f, "server.document-root = \"a\"\n"
                         "server.bogus = 1\n"
                         "server.port = \"x\"\n"
                         "demo.checked = \"nope\"\n"
                         "$HTTP[\"url\"] =~ \"^/\" {\n"
                         "  demo.count = 2\n"
                         "  another.bogus = 3\n"
                         "}\n"));
    assert_int_equal(f.n_errs, 5);
    const char *want[] = {"t.conf:2: unknown config key 'server.bogus'",
                          "t.conf:3: 'server.port' must be an integer",
                          "t.conf:4: demo.checked must start with ok-",
                          "t.conf:6: 'demo.count' can only be set at the top level",
                          "t.conf:7: unknown config key 'another.bogus'"};
    for (size_t i = 0; i < 5; i++)
        if (!strstr(f.errs, want[i])) fail_msg("'%s' lacks '%s'", f.errs, want[i]);
    done(&f);
}

/* Exactly these errors, in this order (each a full "file:line: message" prefix). */
static void expect_errors_as(const char *text, bool check_system, const char *const *want,
                             size_t n)
{
    fixture f;
    assert_null(load_as(&f, text, check_system));
    const char *p = f.errs;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(p, want[i], strlen(want[i])) != 0)
            fail_msg("error %zu: wanted '%s' in:\n%s", i, want[i], f.errs);
        p = strchr(p, '\n');
        if (i + 1 < n && !p) fail_msg("only %zu errors in:\n%s", i + 1, f.errs);
        if (p) p++;
    }
    if (p && *p) fail_msg("more errors than the %zu expected:\n%s", n, f.errs);
    done(&f);
}

static void expect_errors(const char *text, const char *const *want, size_t n)
{
    expect_errors_as(text, false, want, n);
}

static void test_errors_in_file_order(void **state)
{
    /* One of each kind of error, in the top level and in conditions: all reported, in file
     * order (the walk visits blocks, not lines), in one call. */
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
        "t.conf:3: unsupported condition $HTTP[\"frob\"]" KNOWN_FIELDS,
        "t.conf:4: unknown config key 'nope.inside'",
        "t.conf:6: unknown config key 'nope.after'",
    };
    expect_errors("server.document-root = \"a\"\n"
                  "server.port = 12x\n"
                  "$HTTP[\"frob\"] =~ \"bot\" {\n"
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
 * are made as server.username "nobody" (the way start-up would open them: the document root;
 * the logs as root, who opens them before the drop); otherwise as the
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
    /* As root the access log is judged as root (it is opened before the drop): no error. */
    const char *const want_user[] = {w[0], w[1], w[2], w[3]};
    const char *const want_root[] = {w[0], w[2], w[3]};
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (root)
        expect_errors_as(conf, true, want_root, 3);
    else
        expect_errors_as(conf, true, want_user, 4);
    /* Judging as "nobody" left this process's own credentials alone. */
    assert_int_equal(geteuid(), uid);
    assert_int_equal(getegid(), gid);

    static const char *const nouser[] = {
        "t.conf:2: server.username \"sl-no-such-user\": no such user",
        "t.conf:3: server.groupname \"sl-no-such-group\": no such group",
    };
    expect_errors_as("server.document-root = \"a\"\nserver.username = \"sl-no-such-user\"\n"
                     "server.groupname = \"sl-no-such-group\"\n",
                     true, nouser, 2);
    /* Without the system checks (unit tests of values alone) the same file loads. */
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "server.username = \"sl-no-such-user\"\n"));
    done(&f);

    /* What the server's user can use passes. */
    snprintf(conf, sizeof conf, "server.document-root = \"a\"\n%s"
             "server.errorlog = \"error.log\"\naccesslog.filename = \"%s/access.log\"\n",
             root ? "server.username = \"nobody\"\n" : "", root ? "/tmp" : dir);
    assert_non_null(load_as(&f, conf, true));
    done(&f);
    assert_int_equal(chmod(dir, 0700), 0);
    rmdir(closed);
    rmdir(ro);
}

static void test_module_keys_types_and_prepare(void **state)
{
    fixture f;
    demo_released = 0;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "demo.count = 7\ndemo.loud = \"on\"\n"
                             "demo.names = ( \"x\", \"y\" )\n"
                             "demo.map = ( \"k1\" => \"v1\", \"k2\" => \"v2\" )\n"
                             "demo.checked = \"ok-fine\"\n"));
    const demo_conf *d = DEMO(f.cs->global);
    assert_string_equal(d->greeting, "hello"); /* default */
    assert_int_equal(d->count, 7);
    assert_true(d->loud);
    assert_int_equal(d->names.n, 2);
    assert_string_equal(d->names.v[1], "y");
    assert_int_equal(d->map.n, 2);
    assert_string_equal(d->map.k[1], "k2");
    assert_string_equal(d->map.v[1], "v2");
    assert_string_equal(d->checked, "fine");
    done(&f);
    assert_int_equal(demo_released, 1); /* what prepare made is released with the config */
}

/* Each request hook's list holds exactly the loaded modules that have that hook, in load order. */
static void check_hook_lists(const sl_conf_set *cs)
{
    for (int h = 0; h < SL_HOOK_N; h++) {
        size_t k = 0;
        for (size_t i = 0; i < cs->n_mods; i++) {
            const sl_module *m = cs->mods[i];
            const void *fn = h == SL_HOOK_URI_RAW          ? (const void *)m->uri_raw
                             : h == SL_HOOK_URI_CLEAN      ? (const void *)m->uri_clean
                             : h == SL_HOOK_PHYSICAL       ? (const void *)m->physical
                             : h == SL_HOOK_HANDLE         ? (const void *)m->handle
                             : h == SL_HOOK_RESPONSE_START ? (const void *)m->response_start
                             : h == SL_HOOK_LOG_REQUEST    ? (const void *)m->log_request
                                                           : (const void *)m->request_done;
            if (!fn) continue;
            assert_true(k < cs->n_hook_mods[h]);
            assert_ptr_equal(cs->hook_mods[h][k], m);
            k++;
        }
        assert_int_equal(cs->n_hook_mods[h], k);
    }
}

static void test_server_modules(void **state)
{
    fixture f;
    /* Listed modules load (by lighttpd name or own name) in the listed order; the core and
     * the modules lighttpd always loads (static files) load anyway, fallback handlers last. */
    assert_non_null(load(&f, "server.modules = ( \"mod_staticfile\", \"demo\", \"mod_status\" )\n"
                             "server.document-root = \"a\"\n"));
    assert_int_equal(f.cs->n_mods, 4);
    assert_ptr_equal(f.cs->mods[0], &sl_mod_core);
    assert_ptr_equal(f.cs->mods[1], &mod_demo);
    assert_ptr_equal(f.cs->mods[2], &sl_mod_status);
    assert_ptr_equal(f.cs->mods[3], &sl_mod_static);
    assert_false(sl_conf_has_module(f.cs, &sl_mod_proxy));
    check_hook_lists(f.cs);
    /* The demo module has no request hook: a request never visits it. The status page and
     * static files are the handlers, in load order. */
    assert_int_equal(f.cs->n_hook_mods[SL_HOOK_HANDLE], 2);
    assert_ptr_equal(f.cs->hook_mods[SL_HOOK_HANDLE][0], &sl_mod_status);
    assert_ptr_equal(f.cs->hook_mods[SL_HOOK_HANDLE][1], &sl_mod_static);
    done(&f);
    /* A key of a module that is not loaded is refused, naming the module to add. */
    /* Without server.modules every module is there. */
    assert_non_null(load(&f, "server.document-root = \"a\"\n"));
    assert_int_equal(f.cs->n_mods, 6);
    assert_ptr_equal(f.cs->mods[5], &sl_mod_static);
    check_hook_lists(f.cs);
    done(&f);
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
    /* Parsed once, matched many times (mod_extforward); numeric addresses without a port. */
    sl_net n;
    assert_int_equal(sl_cidr_parse("192.0.2.0/24", n.addr, &n.family, &n.bits), 0);
    struct sockaddr_storage ss;
    assert_int_equal(sl_addr_parse("192.0.2.77", 10, &ss), 0);
    assert_true(sl_net_match(&n, (struct sockaddr *)&ss));
    assert_int_equal(sl_addr_parse("192.0.3.1", 9, &ss), 0);
    assert_false(sl_net_match(&n, (struct sockaddr *)&ss));
    assert_int_equal(sl_addr_parse("::ffff:192.0.2.9", 16, &ss), 0);
    assert_true(sl_net_match(&n, (struct sockaddr *)&ss)); /* IPv4-mapped */
    assert_int_equal(sl_addr_parse("2001:db8::1", 11, &ss), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(sl_addr_parse("192.0.2.1:80", 12, &ss), -EINVAL);
    assert_int_equal(sl_addr_parse("", 0, &ss), -EINVAL);
    assert_int_equal(sl_addr_parse("host.example", 12, &ss), -EINVAL);
}

static void test_proxy_core_keys(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "$HTTP[\"url\"] =~ \"^/x/\" {\n"
                             " proxy-core.backends = ( \"127.0.0.1:1029\", \"[::1]:80\","
                             " \"unix:/tmp/s.sock\" )\n"
                             " proxy-core.protocol = \"fastcgi\"\n"
                             " proxy-core.balancer = \"carp\"\n"
                             " proxy-core.allow-x-sendfile = \"enable\"\n"
                             " proxy-core.x-sendfile-docroot = ( \"a/\" )\n}\n"));
    /* Outside the condition nothing is proxied; the defaults are lighttpd-like. */
    assert_null(PROXY(f.cs->global)->backends);
    assert_string_equal(PROXY(f.cs->global)->protocol->name, "http");
    assert_string_equal(PROXY(f.cs->global)->balancer, "sqf");
    sl_cond_input in = {.socket = "0.0.0.0:80", .url = "/x/y", .host = "", .query = ""};
    const sl_conf *r = for_request(&f, 0, &in, NULL);
    const sl_proxy_conf *p = PROXY(r);
    assert_int_equal(p->backends->n, 3);
    assert_string_equal(p->backends->v[0], "127.0.0.1:1029");
    assert_string_equal(p->backends->v[1], "[::1]:80");
    assert_string_equal(p->backends->v[2], "unix:/tmp/s.sock");
    assert_string_equal(p->protocol->name, "fastcgi");
    assert_true(p->allow_x_sendfile);
    assert_int_equal(p->xsendfile_roots->n, 1);
    char want[600];
    snprintf(want, sizeof want, "%s/a", dir);
    assert_string_equal(p->xsendfile_roots->path[0], want); /* absolute, no trailing slash */
    assert_true(p->xsendfile_roots->fd[0] >= 0);
    done(&f);
}

static void test_backend_keys(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"));
    assert_string_equal(G(&f)->network_backend, "hybrid");
    assert_int_equal(G(&f)->max_read_threads, 32);
    assert_int_equal(G(&f)->max_stat_threads, 32);
    assert_int_equal(G(&f)->block_size, 512 * 1024);
    assert_false(G(&f)->use_noatime);
    done(&f);
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "server.network-backend = \"gthread-aio\"\n"
                             "server.max-stat-threads = 0\nserver.max-read-threads = 64\n"
                             "server.network-backend-block-size = 262144\n"
                             "server.use-noatime = \"enable\"\nserver.max-worker = 3\n"));
    assert_string_equal(G(&f)->network_backend, "gthread-aio");
    assert_int_equal(G(&f)->max_stat_threads, 0);
    assert_int_equal(G(&f)->max_read_threads, 64);
    assert_int_equal(G(&f)->block_size, 262144);
    assert_true(G(&f)->use_noatime);
    assert_int_equal(G(&f)->workers, 3);
    done(&f);
}

static void test_conditions_override_per_request(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\nserver.port = 8080\n"
                             "$HTTP[\"host\"] == \"b.example\" { server.document-root = \"b\" }\n"
                             "else $HTTP[\"url\"] =~ \"^/nokeep/\" {\n"
                             "  server.max-keep-alive-requests = 0\n"
                             "  url.access-deny = ( \".secret\" )\n}\n"
                             "$SERVER[\"socket\"] == \"127.0.0.1:9090\" { static-file.etags = "
                             "\"disable\" }\n"));
    assert_int_equal(f.cs->n_listen, 2);
    assert_string_equal(f.cs->listen[1].literal, "127.0.0.1:9090");
    assert_null(f.cs->per_listener); /* url and host conditions: computed per request */
    sl_cond_input in = {.socket = "0.0.0.0:8080", .url = "/x", .host = "b.example"};
    const sl_conf *r = for_request(&f, 0, &in, NULL);
    assert_non_null(strstr(sl_core(r)->docroot->path, "/b"));
    assert_int_not_equal(sl_core(r)->docroot->fd, G(&f)->docroot->fd);
    assert_true(STATIC(r)->etags);
    in.host = "other";
    in.url = "/nokeep/y";
    r = for_request(&f, 0, &in, NULL);
    assert_non_null(strstr(sl_core(r)->docroot->path, "/a"));
    assert_int_equal(sl_core(r)->max_keep_alive_requests, 0);
    assert_int_equal(STATIC(r)->access_deny.n, 1);
    assert_string_equal(STATIC(r)->access_deny.v[0], ".secret");
    in.socket = f.cs->listen[1].literal;
    in.url = "/";
    r = for_request(&f, 1, &in, NULL);
    assert_false(STATIC(r)->etags);
    assert_int_equal(STATIC(r)->access_deny.n, 0);
    done(&f);
}

/* Only blocks whose keys use their groups keep them, each in its own slot, set per request. */
static void test_condition_captures(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "$HTTP[\"url\"] =~ \"^/(a)(b)?\" { demo.capture = \"x\" demo.greeting = \"a\" }\n"
                             "$HTTP[\"useragent\"] =~ \"^(\\\\w+)/\" { demo.greeting = \"ua\" }\n"
                             "$HTTP[\"host\"] =~ \"^(.*)\\\\.example$\" {\n"
                             "  demo.capture = \"y\"\n"
                             "  $HTTP[\"request-method\"] =^ \"P\" { demo.greeting = \"post\" }\n"
                             "}\n"));
    assert_int_equal(f.cs->n_captures, 2);
    sl_cond_capture caps[2];
    memset(caps, 0xff, sizeof caps);
    sl_cond_input in = {.url = "/ax", .host = "www.example", .method = "PUT"};
    const sl_conf *r = for_request(&f, 0, &in, caps);
    assert_string_equal(DEMO(r)->greeting, "post");
    assert_string_equal(DEMO(r)->slot, "slot 1");
    assert_true(caps[0].set);
    assert_int_equal(caps[0].n, 2); /* (b)? did not take part */
    assert_int_equal(caps[0].ov[2], 1);
    assert_int_equal(caps[0].ov[3], 2);
    assert_true(caps[1].set);
    assert_string_equal(caps[1].subject, "www.example");
    assert_int_equal(caps[1].ov[3], 3);
    in.url = "/x";
    r = for_request(&f, 0, &in, caps);
    assert_false(caps[0].set); /* this time the block did not match */
    assert_true(caps[1].set);
    done(&f);
}

static void test_socket_only_conditions_are_precomputed(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\nserver.port = 1025\n"
                             "$SERVER[\"socket\"] == \"127.0.0.1:9091\" { server.max-read-idle = 7 "
                             "}\n"));
    snprintf(f.cs->listen[0].canon, sizeof f.cs->listen[0].canon, "0.0.0.0:1025");
    snprintf(f.cs->listen[0].literal, sizeof f.cs->listen[0].literal, "0.0.0.0:1025");
    assert_int_equal(sl_conf_listeners_done(f.cs), 0);
    assert_non_null(f.cs->per_listener);
    sl_cond_input in = {.socket = f.cs->listen[1].literal, .url = "/"};
    const sl_conf *r = sl_conf_for_request(f.cs, 1, &in, NULL, NULL); /* no buffer needed */
    assert_int_equal(sl_core(r)->max_read_idle, 7);
    r = sl_conf_for_request(f.cs, 0, &in, NULL, NULL);
    assert_int_equal(sl_core(r)->max_read_idle, 60);
    done(&f);
}

static void test_mimetype_assign_replaces_the_default(void **state)
{
    fixture f;
    assert_non_null(load(&f, "server.document-root = \"a\"\n"
                             "mimetype.assign = ( \".foo\" => \"application/x-foo\" )\n"));
    assert_string_equal(sl_mime_lookup(G(&f)->mime, "/x.foo", 6), "application/x-foo");
    assert_string_equal(sl_mime_lookup(G(&f)->mime, "/x.html", 7), "application/octet-stream");
    done(&f);
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

TU_MAIN(setup, teardown,
        cmocka_unit_test(test_defaults_and_relative_docroot),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_feature_flags_and_upload_dirs),
        cmocka_unit_test(test_every_error_in_one_run),
        cmocka_unit_test(test_errors_in_file_order),
        cmocka_unit_test(test_startup_refusals),
        cmocka_unit_test(test_module_keys_types_and_prepare),
        cmocka_unit_test(test_server_modules),
        cmocka_unit_test(test_proxy_core_keys),
        cmocka_unit_test(test_cidr),
        cmocka_unit_test(test_backend_keys),
        cmocka_unit_test(test_conditions_override_per_request),
        cmocka_unit_test(test_socket_only_conditions_are_precomputed),
        cmocka_unit_test(test_condition_captures),
        cmocka_unit_test(test_mimetype_assign_replaces_the_default),
        cmocka_unit_test(test_socket_canonical))
