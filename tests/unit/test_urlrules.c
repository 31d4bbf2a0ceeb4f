/* urlrules: the rule lists of url.redirect and url.rewrite-*. Templates are checked at load
 * (groups the pattern lacks, %N, unknown ${...}), and a match writes what lighttpd's keyvalue.c
 * writes for the same template: groups raw or %-encoded by flags, the request's parts, ${qsa},
 * $$ and %%. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "urlrules.h"

/* One "pattern" => "template" pair as the config parser would hand it over. */
static sl_cval *pair(const char *pattern, const char *tmpl)
{
    static sl_cval val, arr;
    static sl_cval_item item;
    val = (sl_cval){.type = SL_CV_STRING, .str = (char *)tmpl};
    item = (sl_cval_item){.key = (char *)pattern, .val = &val};
    arr = (sl_cval){.type = SL_CV_ARRAY, .items = &item, .n_items = 1};
    return &arr;
}

static const sl_url_env env = {.scheme = "http", .authority = "example.com:8080", .port = 8080};

/* The result of one rule on subject ("" for an exemption, "-" for no match). */
static const char *run(const char *pattern, const char *tmpl, const char *subject)
{
    static char out[512];
    sl_urlrules *rs = NULL;
    char err[256];
    assert_int_equal(sl_urlrules_compile(&rs, pair(pattern, tmpl), "url.rewrite-once", -1, err,
                                         sizeof err), 0);
    pcre2_match_data *md = sl_urlrules_match_data();
    size_t len = 0, idx = 9;
    int r = sl_urlrules_apply(rs, md, subject, strlen(subject), &env, out, sizeof out, &len, &idx);
    pcre2_match_data_free(md);
    sl_urlrules_free(rs);
    if (r == SL_URL_NOMATCH) return "-";
    assert_int_equal(idx, 0);
    if (r == SL_URL_EXEMPT) return "";
    assert_int_equal(r, SL_URL_MATCHED);
    assert_int_equal(len, strlen(out));
    return out;
}

/* The message a template is refused with, or NULL when it is accepted. */
static const char *refused(const char *pattern, const char *tmpl)
{
    static char err[256];
    sl_urlrules *rs = NULL;
    err[0] = 0;
    int r = sl_urlrules_compile(&rs, pair(pattern, tmpl), "url.redirect", -1, err, sizeof err);
    sl_urlrules_free(rs);
    return r < 0 ? err : NULL;
}

/* rs applied to subject under e must match; returns the result. */
static const char *apply_ok(const sl_urlrules *rs, pcre2_match_data *md, const char *subject,
                            const sl_url_env *e)
{
    static char out[512];
    size_t len, idx;
    int r = sl_urlrules_apply(rs, md, subject, strlen(subject), e, out, sizeof out, &len, &idx);
    if (r != SL_URL_MATCHED) fail_msg("%s: %d, want a match", subject, r);
    return out;
}

static void test_groups_and_literals(void **state)
{
    (void)state;
    assert_string_equal(run("^/a/(.*)$", "/b/$1", "/a/x/y"), "/b/x/y");
    assert_string_equal(run("^/a/(.*)$", "/b/$0", "/a/q"), "/b//a/q");
    assert_string_equal(run("^/a/(x)?(.*)$", "/$1-$2", "/a/zz"), "/-zz"); /* unset group: "" */
    assert_string_equal(run("^/a", "/b", "/c"), "-");
    assert_string_equal(run("^/a", "", "/a"), "");                          /* exemption */
    assert_string_equal(run("^/(.*)", "/p$$1%%41$x%y$", "/z"), "/p$1%41$x%y$");
    /* Two-digit groups in ${NN}. */
    assert_string_equal(run("^/(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)", "/${11}${1}$1", "/abcdefghijk"),
                        "/kaa");
}

static void test_flags(void **state)
{
    (void)state;
    const char *s = "/e/A%20b/c~d%41";
    /* $N raw, ${N} escpsnde, esc: all (a '%' too), escnde: keeps escapes (decoding unreserved
     * ones), noesc: raw. */
    assert_string_equal(run("^/e/(.*)$", "/$1", s), "/A%20b/c~d%41");
    assert_string_equal(run("^/e/(.*)$", "/${1}", s), "/A%20b/c~dA");
    assert_string_equal(run("^/e/(.*)$", "/${esc:1}", s), "/A%2520b%2Fc~d%2541");
    assert_string_equal(run("^/e/(.*)$", "/${escape:1}", s), "/A%2520b%2Fc~d%2541");
    assert_string_equal(run("^/e/(.*)$", "/${escnde:1}", s), "/A%20b%2Fc~dA");
    assert_string_equal(run("^/e/(.*)$", "/${escpsnde:1}", s), "/A%20b/c~dA");
    assert_string_equal(run("^/e/(.*)$", "/${noesc:1}", s), "/A%20b/c~d%41");
    assert_string_equal(run("^/e/(.*)$", "/${noescape:1}", s), "/A%20b/c~d%41");
    assert_string_equal(run("^/e/(.*)$", "/${escpsnde:tolower:1}", "/e/AB%2Fc"), "/ab%2Fc");
    assert_string_equal(run("^/e/(.*)$", "/${toupper:1}", "/e/ab%2fc"), "/AB%2fC");
    assert_string_equal(run("^/e/(.*)$", "/${esc:1}", "/e/\xc3\xa9 "), "/%C3%A9%20");
}

static void test_request_parts(void **state)
{
    (void)state;
    assert_string_equal(run("^/p", "/x?p=${url.path}&q=${url.query}", "/p/a?k=v"),
                        "/x?p=/p/a&q=k=v");
    assert_string_equal(run("^/p", "/x?q=${url.query}", "/p/a"), "/x?q=");
    assert_string_equal(run("^/p", "${url.scheme}://${url.authority}:${url.port}/", "/p"),
                        "http://example.com:8080:8080/");
    assert_string_equal(run("^/p", "//${url.authority.noport}/", "/p"), "//example.com/");
    assert_string_equal(run("^/p", "/${esc:url.path}", "/p/a"), "/%2Fp%2Fa");
    /* ${qsa}: "?q", or "&q" when the result has a '?' already; nothing without a query. */
    assert_string_equal(run("^/p", "/x${qsa}", "/p?a=b"), "/x?a=b");
    assert_string_equal(run("^/p", "/x?y=1${qsa}", "/p?a=b"), "/x?y=1&a=b");
    assert_string_equal(run("^/p", "/x?y=1${qsa}", "/p?"), "/x?y=1");
    assert_string_equal(run("^/p", "/x${qsa}", "/p?"), "/x?");
    assert_string_equal(run("^/p", "/x${qsa}", "/p"), "/x");
}

static void test_authority_noport_of_ipv6(void **state)
{
    (void)state;
    sl_url_env v6 = {.scheme = "http", .authority = "[::1]", .port = 80};
    sl_urlrules *rs = NULL;
    char err[128];
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/", "/${url.authority.noport}"), "k", -1, err,
                                         sizeof err), 0);
    pcre2_match_data *md = sl_urlrules_match_data();
    assert_string_equal(apply_ok(rs, md, "/", &v6), "/[::1]");
    v6.authority = "[::1]:8080";
    assert_string_equal(apply_ok(rs, md, "/", &v6), "/[::1]");
    pcre2_match_data_free(md);
    sl_urlrules_free(rs);
}

/* %N and %{N}: groups of the enclosing block's condition, from the request's captures. */
static void test_condition_groups(void **state)
{
    (void)state;
    char err[256];
    sl_urlrules *rs = NULL;
    /* The block's condition has 2 groups: %3 is refused, %{10} too (at most %9). */
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/(x)", "/%3"), "k", 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "%3 but the block's condition has 2 group(s)"));
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/", "/%{10}"), "k", 12, err, sizeof err), -1);
    assert_non_null(strstr(err, "go up to %9"));
    assert_null(rs);
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/(x)", "/$1"), "k", 2, err, sizeof err), 0);
    assert_false(sl_urlrules_uses_cond(rs));
    sl_urlrules_free(rs);
    rs = NULL;
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/(\\w+)", "/%1/$1/%{escape:2}/%0/%%%20"),
                                         "k", 2, err, sizeof err),
                     0);
    assert_true(sl_urlrules_uses_cond(rs));
    sl_urlrules_set_slot(rs, 1);
    /* The condition matched "a b/c" (group 1 "a b", group 2 "/c"; %0 the whole). */
    sl_cond_capture caps[2] = {{.set = false}, {.set = true, .subject = "a b/c", .n = 3,
                                                 .ov = {0, 5, 0, 3, 3, 5}}};
    sl_url_env e = env;
    e.caps = caps;
    pcre2_match_data *md = sl_urlrules_match_data();
    assert_string_equal(apply_ok(rs, md, "/p", &e), "/a b/p/%2Fc/a b/c/%/c0");
    /* Not set (the block did not match this time), or no captures at all: %N writes nothing. */
    caps[1].set = false;
    assert_string_equal(apply_ok(rs, md, "/p", &e), "//p///%0");
    assert_string_equal(apply_ok(rs, md, "/p", &env), "//p///%0");
    pcre2_match_data_free(md);
    sl_urlrules_free(rs);
}

static void test_refused_at_load(void **state)
{
    (void)state;
    assert_null(refused("^/(a)", "/$1${1}${url.path}${qsa}%%$$"));
    const char *m = refused("^/(a)", "/$2");
    assert_non_null(m);
    assert_non_null(strstr(m, "url.redirect \"^/(a)\" => \"/$2\": $2 but the pattern has 1 group(s)"));
    assert_non_null(strstr(refused("^/(a)", "/${12}"), "${12} but the pattern has 1 group(s)"));
    assert_non_null(strstr(refused("^/a", "/%1"),
                           "%1 names a group of the =~ condition of the block this key is set "
                           "in, and that block has no =~ condition"));
    assert_non_null(strstr(refused("^/a", "/%{tolower:1}"), "has no =~ condition"));
    assert_non_null(strstr(refused("^/a", "/%{url.host}"), "unknown substitution \"%{url.host}\""));
    assert_non_null(strstr(refused("^/a", "/${url.host}"), "unknown substitution \"${url.host}\""));
    assert_non_null(strstr(refused("^/a", "/${shout:1}"), "unknown substitution"));
    assert_non_null(strstr(refused("^/a", "/${1"), "unknown substitution"));
    assert_non_null(strstr(refused("^/a", "/${encb64u:1}"), "base64"));
    assert_non_null(strstr(refused("^/(a", "/"), "url.redirect \"^/(a\": missing closing parenthesis"));
    /* Not an array of pairs. */
    sl_cval str = {.type = SL_CV_STRING, .str = "x"};
    sl_urlrules *rs = NULL;
    char err[128];
    assert_int_equal(sl_urlrules_compile(&rs, &str, "url.rewrite-once", -1, err, sizeof err), -1);
    assert_string_equal(err, "url.rewrite-once must be an array of \"regex\" => \"url\" pairs");
    assert_null(rs);
}

static void test_order_append_and_limits(void **state)
{
    (void)state;
    sl_urlrules *rs = NULL;
    char err[128], out[16];
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/a", "/first"), "k", -1, err, sizeof err), 0);
    sl_urlrules *kept = rs;
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/", "/second-is-longer"), "k", -1, err, sizeof err), 0);
    assert_ptr_equal(rs, kept); /* appended to the same list */
    assert_int_equal(sl_urlrules_count(rs), 2);
    /* A failed append leaves the list as it was. */
    assert_int_equal(sl_urlrules_compile(&rs, pair("^/", "/$3"), "k", -1, err, sizeof err), -1);
    assert_int_equal(sl_urlrules_count(rs), 2);
    pcre2_match_data *md = sl_urlrules_match_data();
    size_t len, idx;
    assert_int_equal(sl_urlrules_apply(rs, md, "/a", 2, &env, out, sizeof out, &len, &idx),
                     SL_URL_MATCHED);
    assert_string_equal(out, "/first");
    assert_int_equal(idx, 0);
    /* The second rule's result needs 18 bytes with its NUL, two more than there are. */
    assert_int_equal(sl_urlrules_apply(rs, md, "/b", 2, &env, out, sizeof out, &len, &idx),
                     -ENAMETOOLONG);
    assert_int_equal(sl_urlrules_count(NULL), 0);
    assert_int_equal(sl_urlrules_apply(NULL, md, "/b", 2, &env, out, sizeof out, &len, &idx),
                     SL_URL_NOMATCH);
    pcre2_match_data_free(md);
    sl_urlrules_free(rs);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_groups_and_literals),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_request_parts),
        cmocka_unit_test(test_authority_noport_of_ipv6),
        cmocka_unit_test(test_refused_at_load),
        cmocka_unit_test(test_condition_groups),
        cmocka_unit_test(test_order_append_and_limits))
