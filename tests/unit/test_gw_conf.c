/* gw_conf.c: lighttpd's fastcgi.server / proxy.server tables as proxy-core routes, through the
 * real config layer (so the keys, their module and their refusals are what a user meets). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "conf.h"
#include "core_conf.h"
#include "gw_conf.h"
#include "mod_proxy.h"

static sl_module *const mods[] = {&sl_mod_core, &sl_mod_proxy, NULL};

/* The config text after a document root, loaded; the errors (if any) in err. */
static sl_conf_set *load(const char *body, char *err, size_t errlen)
{
    char text[2048];
    snprintf(text, sizeof text, "server.document-root = \"/tmp\"\n%s\n", body);
    sl_config_errors errs = {0};
    sl_conf_set *cs = sl_conf_load_string(text, strlen(text), "t.conf", "/tmp", mods, false, &errs);
    err[0] = 0;
    for (size_t i = 0; i < errs.n; i++)
        snprintf(err + strlen(err), errlen - strlen(err), "%s\n", errs.msg[i]);
    sl_config_errors_free(&errs);
    return cs;
}

/* The same, failing the test with the errors unless the config is taken. */
static sl_conf_set *load_ok(const char *body)
{
    char err[2048];
    sl_conf_set *cs = load(body, err, sizeof err);
    if (!cs) fail_msg("%s", err);
    return cs;
}

#define PROXY(b) SL_MODCONF(b, sl_mod_proxy, sl_proxy_conf)

static void test_fastcgi_server_routes(void **state)
{
    sl_conf_set *cs = load_ok(
        "server.modules = ( \"mod_fastcgi\" )\n"
        "fastcgi.server = ( \".php\" => (( \"socket\" => \"/run/php.sock\" )),\n"
        "  \"/app/\" => ( \"a\" => ( \"host\" => \"127.0.0.1\", \"port\" => 9000,\n"
        "      \"check-local\" => \"disable\", \"strip-request-uri\" => \"/app/\" ),\n"
        "    \"b\" => ( \"host\" => \"127.0.0.1\", \"port\" => \"9001\",\n"
        "      \"check-local\" => \"disable\", \"strip-request-uri\" => \"/app/\" ) ),\n"
        "  \"/\" => (( \"host\" => \"::1\", \"port\" => 9, \"check-local\" => \"disable\",\n"
        "      \"fix-root-scriptname\" => \"enable\" )) )\n"
        "fastcgi.map-extensions = ( \".php5\" => \".php\" )\n"
        "fastcgi.balance = \"hash\"\n");
    const sl_proxy_conf *p = PROXY(cs->global);
    const sl_proxy_routes *rs = p->fastcgi_server;
    assert_non_null(rs);
    assert_int_equal(rs->n, 3);
    assert_string_equal(rs->r[0].backends.v[0], "unix:/run/php.sock");
    assert_true(rs->r[0].check_local); /* lighttpd's default */
    assert_ptr_equal(rs->r[0].proto, &sl_proxy_fastcgi);
    assert_int_equal(rs->r[1].backends.n, 2); /* both hosts, one group */
    assert_string_equal(rs->r[1].backends.v[1], "127.0.0.1:9001");
    assert_string_equal(rs->r[2].backends.v[0], "[::1]:9");
    assert_string_equal(p->fastcgi_balance, "carp");

    size_t sl;
    const char *path = "/x/index.php/a/b";
    const sl_proxy_route *r = sl_gw_conf_match(rs, &p->fastcgi_map_extensions, path, strlen(path), &sl);
    assert_ptr_equal(r, &rs->r[0]);
    assert_string_equal(sl_gw_conf_split(r, path, strlen(path), &sl), "/a/b");
    assert_int_equal(sl, strlen("/x/index.php"));
    /* fastcgi.map-extensions, when no route before takes the path ("/" here takes all). */
    path = "/old.php5";
    const sl_proxy_routes first = {rs->r, 1};
    assert_ptr_equal(sl_gw_conf_match(&first, &p->fastcgi_map_extensions, path, strlen(path), &sl),
                     &rs->r[0]);
    assert_null(sl_gw_conf_match(&first, NULL, path, strlen(path), &sl));
    assert_ptr_equal(sl_gw_conf_match(rs, &p->fastcgi_map_extensions, path, strlen(path), &sl),
                     &rs->r[2]);
    /* A prefix: SCRIPT_NAME runs to the first '/' after it (lighttpd 1.4). */
    path = "/app/x/y";
    r = sl_gw_conf_match(rs, NULL, path, strlen(path), &sl);
    assert_ptr_equal(r, &rs->r[1]);
    assert_string_equal(sl_gw_conf_split(r, path, strlen(path), &sl), "/y");
    assert_int_equal(sl, strlen("/app/x"));
    /* "/" with fix-root-scriptname: all of it is PATH_INFO. */
    path = "/other/z";
    r = sl_gw_conf_match(rs, NULL, path, strlen(path), &sl);
    assert_ptr_equal(r, &rs->r[2]);
    assert_string_equal(sl_gw_conf_split(r, path, strlen(path), &sl), "/other/z");
    assert_int_equal(sl, 0);
    sl_conf_free(cs);
}

static void test_proxy_server_and_header(void **state)
{
    sl_conf_set *cs = load_ok(
        "server.modules = ( \"mod_proxy\" )\n"
        "proxy.server = ( \"\" => (( \"host\" => \"127.0.0.1\" )) )\n"
        "proxy.balance = \"round-robin\"\n"
        "proxy.header = ( \"map-urlpath\" => ( \"/p/\" => \"/s/\" ),\n"
        "  \"map-host-request\" => ( \"-\" => \"backend\" ), \"upgrade\" => \"disable\" )\n");
    const sl_proxy_conf *p = PROXY(cs->global);
    assert_string_equal(p->proxy_server->r[0].backends.v[0], "127.0.0.1:80"); /* port 80 */
    assert_false(p->proxy_server->r[0].check_local);
    assert_ptr_equal(p->proxy_server->r[0].proto, &sl_proxy_http);
    size_t sl;
    assert_non_null(sl_gw_conf_match(p->proxy_server, NULL, "/any", 4, &sl)); /* "" takes all */
    size_t k;
    assert_string_equal(sl_gw_conf_map(&p->proxy_header->map_urlpath, "/p/a?x", 6, &k), "/s/");
    assert_int_equal(k, 3);
    assert_null(sl_gw_conf_map(&p->proxy_header->map_urlpath, "/q/a", 4, &k));
    assert_string_equal(p->proxy_header->map_host_request.v[0], "backend");
    sl_conf_free(cs);
}

/* Every option works or is refused naming it. */
static void test_refusals(void **state)
{
    static const struct { const char *conf, *want; } cases[] = {
        {"fastcgi.server = ( \".php\" => (( \"socket\" => \"/s\", \"mode\" => \"authorizer\" )) )",
         "\"mode\" => \"authorizer\" is not supported"},
        {"fastcgi.server = ( \".php\" => (( \"socket\" => \"/s\", \"bogus\" => 1 )) )",
         "host option \"bogus\" is not supported"},
        {"fastcgi.server = ( \".php\" => (( \"host\" => \"127.0.0.1\" )) )", "needs \"port\""},
        {"fastcgi.server = ( \".php\" => (( \"socket\" => \"rel.sock\" )) )", "absolute path"},
        {"fastcgi.server = ( \".php\" => (( \"bin-path\" => \"/nonexistent/php\", \"socket\" => \"/s\" )) )",
         "\"bin-path\" \"/nonexistent/php\""},
        {"fastcgi.server = ( \".php\" => ( \"a\" => ( \"socket\" => \"/s\" ), \"b\" => ( \"socket\" => \"/t\", \"check-local\" => \"disable\" ) ) )",
         "different options"},
        {"proxy.server = ( \"\" => (( \"host\" => \"127.0.0.1\", \"bin-path\" => \"/bin/true\" )) )",
         "host option \"bin-path\" is not supported"},
        {"proxy.balance = \"sticky\"", "\"sticky\" is not implemented"},
        {"proxy.header = ( \"map-host-response\" => ( \"-\" => \"x\" ) )",
         "\"map-host-response\" is not supported"},
        {"proxy.header = ( \"upgrade\" => \"enable\" )", "\"upgrade\" is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[2048];
        sl_conf_set *cs = load(cases[i].conf, err, sizeof err);
        if (cs) sl_conf_free(cs);
        if (!strstr(err, cases[i].want)) fail_msg("%s\nwanted \"%s\" in: %s", cases[i].conf, cases[i].want, err);
        assert_null(cs);
    }
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_fastcgi_server_routes),
        cmocka_unit_test(test_proxy_server_and_header),
        cmocka_unit_test(test_refusals))
