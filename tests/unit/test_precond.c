/* Unit tests for server/precond.c: entity-tag lists, the RFC 9110 §13.2.2 evaluation order,
 * If-Range, and ETag construction. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "precond.h"

#define ETAG "\"abc\""

static bool lm(const char *list, const char *etag, bool weak)
{
    return sl_etag_list_match(list, strlen(list), etag, weak);
}

/* ---- sl_etag_list_match ---- */

static void test_list_single_strong(void **state)
{
    assert_true(lm("\"abc\"", ETAG, false));
    assert_false(lm("\"abd\"", ETAG, false));
    assert_false(lm("\"ABC\"", ETAG, false)); /* opaque tags are case-sensitive */
    assert_false(lm("\"abc \"", ETAG, false));
}

static void test_list_several(void **state)
{
    assert_true(lm("\"x\", \"y\", \"abc\"", ETAG, false));
    assert_true(lm("\"abc\",\"y\"", ETAG, false));
    assert_false(lm("\"x\", \"y\"", ETAG, false));
}

static void test_list_ows_and_empty_elements(void **state)
{
    assert_true(lm("  \"x\" ,\t\"abc\"  ", ETAG, false));
    assert_true(lm(",, \"abc\" ,,", ETAG, false));
    assert_true(lm("\"x\" , , \"abc\"", ETAG, false));
    assert_false(lm("", ETAG, false));
    assert_false(lm(" , ", ETAG, false));
}

static void test_list_strong_rejects_weak(void **state)
{
    assert_false(lm("W/\"abc\"", ETAG, false));
    assert_false(lm("\"abc\"", "W/\"abc\"", false));
    assert_false(lm("W/\"abc\"", "W/\"abc\"", false));
}

static void test_list_weak_ignores_prefix(void **state)
{
    assert_true(lm("W/\"abc\"", ETAG, true));
    assert_true(lm("\"abc\"", ETAG, true));
    assert_true(lm("\"abc\"", "W/\"abc\"", true));
    assert_true(lm("W/\"abc\"", "W/\"abc\"", true));
    assert_false(lm("W/\"abd\"", ETAG, true));
}

static void test_list_weak_prefix_is_case_sensitive(void **state)
{
    assert_false(lm("w/\"abc\"", ETAG, true));
    assert_false(lm("W/ \"abc\"", ETAG, true));
    assert_false(lm("W\"abc\"", ETAG, true));
}

static void test_list_comma_inside_opaque(void **state)
{
    assert_true(lm("\"a,b\"", "\"a,b\"", false));
    assert_false(lm("\"a,b\"", "\"a\"", false));
    assert_false(lm("\"x,\"abc\"", ETAG, false)); /* "x," then an unquoted abc: invalid */
    assert_true(lm("\"x,y\", \"abc\"", ETAG, false));
}

static void test_list_syntax_errors_match_nothing(void **state)
{
    static const char *bad[] = {
        "\"abc\" \"abc\"", "\"abc", "abc\"", "abc", "\"abc\"x", "*", "\"abc\", *", "\"abc\", garbage",
        "garbage, \"abc\"", "\"ab\tc\"", "\"ab c\"", "\"abc\";", "W/", "\"abc\"\x01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (lm(bad[i], ETAG, true) || lm(bad[i], ETAG, false)) {
            print_error("matched in \"%s\"\n", bad[i]);
            fail();
        }
    }
}

static void test_list_obs_text_and_empty_opaque(void **state)
{
    assert_true(lm("\"caf\xc3\xa9\"", "\"caf\xc3\xa9\"", false));
    assert_true(lm("\"\"", "\"\"", false));
    assert_false(lm("\"\"", ETAG, false));
    assert_true(lm("\"!#~\"", "\"!#~\"", false));
}

static void test_list_respects_len(void **state)
{
    assert_false(sl_etag_list_match("\"abc\"", 4, ETAG, false));
    assert_true(sl_etag_list_match("\"x\", \"abc\", junk", 12, ETAG, false));
}

static void test_list_bad_own_etag(void **state)
{
    assert_false(lm("\"abc\"", NULL, false));
    assert_false(lm("abc", "abc", false));
    assert_false(lm("\"abc\"", "abc", true));
}

/* ---- sl_precond_eval ---- */

static sl_precond_input get_input(void)
{
    sl_precond_input in;
    memset(&in, 0, sizeof in);
    in.get_or_head = true;
    return in;
}

/* Field lines for the inputs: up to 4 per test, each a one-line field unless chained. */
static sl_http_header lines[4];
static size_t n_lines;

static const sl_http_header *line(const char *v, size_t len)
{
    sl_http_header *h = &lines[n_lines++ % 4];
    *h = (sl_http_header){.name = "X", .name_len = 1, .value = v, .value_len = len};
    return h;
}

static void set_im(sl_precond_input *in, const char *v)
{
    in->if_match = line(v, strlen(v));
}

static void set_inm(sl_precond_input *in, const char *v)
{
    in->if_none_match = line(v, strlen(v));
}

/* The field sent as the lines a, b (and c when not NULL). */
static const sl_http_header *field(const char *a, const char *b, const char *c)
{
    sl_http_header *h = (sl_http_header *)line(a, strlen(a));
    sl_http_header *h2 = (sl_http_header *)line(b, strlen(b));
    h->next = h2;
    if (c) h2->next = line(c, strlen(c));
    return h;
}

static void test_eval_no_conditions(void **state)
{
    sl_precond_input in = get_input();
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    in.get_or_head = false;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    assert_int_equal(sl_precond_eval(&in, NULL, 1000), SL_PRECOND_PASS);
}

static void test_eval_if_match_star(void **state)
{
    sl_precond_input in = get_input();
    set_im(&in, "*");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    assert_int_equal(sl_precond_eval(&in, NULL, 1000), SL_PRECOND_PASS);
    set_im(&in, " * ");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
}

static void test_eval_if_match_strong(void **state)
{
    sl_precond_input in = get_input();
    set_im(&in, "\"x\", \"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    set_im(&in, "\"x\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    set_im(&in, "W/\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    set_im(&in, "");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    in.get_or_head = false;
    set_im(&in, "\"x\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
}

static void test_eval_if_match_without_etags(void **state)
{
    sl_precond_input in = get_input();
    set_im(&in, "\"abc\"");
    assert_int_equal(sl_precond_eval(&in, NULL, 1000), SL_PRECOND_FAILED);
}

static void test_eval_if_unmodified_since(void **state)
{
    sl_precond_input in = get_input();
    in.has_if_unmodified_since = true;
    in.if_unmodified_since = 1000;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    assert_int_equal(sl_precond_eval(&in, ETAG, 999), SL_PRECOND_PASS);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1001), SL_PRECOND_FAILED);
    in.get_or_head = false;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1001), SL_PRECOND_FAILED);
    in.has_if_unmodified_since = false;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1001), SL_PRECOND_PASS);
}

static void test_eval_if_match_overrides_unmodified_since(void **state)
{
    sl_precond_input in = get_input();
    in.has_if_unmodified_since = true;
    in.if_unmodified_since = 1000;
    set_im(&in, ETAG);
    assert_int_equal(sl_precond_eval(&in, ETAG, 5000), SL_PRECOND_PASS);
    set_im(&in, "*");
    assert_int_equal(sl_precond_eval(&in, ETAG, 5000), SL_PRECOND_PASS);
}

static void test_eval_if_none_match_get(void **state)
{
    sl_precond_input in = get_input();
    set_inm(&in, "\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    set_inm(&in, "W/\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    set_inm(&in, "\"x\", W/\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    set_inm(&in, "*");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    assert_int_equal(sl_precond_eval(&in, NULL, 1000), SL_PRECOND_NOT_MODIFIED);
    set_inm(&in, "\"x\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
}

static void test_eval_if_none_match_other_method(void **state)
{
    sl_precond_input in = get_input();
    in.get_or_head = false;
    set_inm(&in, "\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    set_inm(&in, "*");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    set_inm(&in, "\"x\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
}

static void test_eval_if_none_match_suppresses_modified_since(void **state)
{
    /* If-None-Match present and not matching: If-Modified-Since is not looked at, even though it
     * alone would give 304. Also true when ETags are disabled. */
    sl_precond_input in = get_input();
    in.has_if_modified_since = true;
    in.if_modified_since = 2000;
    set_inm(&in, "\"x\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    set_inm(&in, "\"abc\"");
    assert_int_equal(sl_precond_eval(&in, NULL, 1000), SL_PRECOND_PASS);
}

static void test_eval_if_modified_since(void **state)
{
    sl_precond_input in = get_input();
    in.has_if_modified_since = true;
    in.if_modified_since = 1000;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    assert_int_equal(sl_precond_eval(&in, ETAG, 999), SL_PRECOND_NOT_MODIFIED);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1001), SL_PRECOND_PASS);
    in.has_if_modified_since = false;
    assert_int_equal(sl_precond_eval(&in, ETAG, 999), SL_PRECOND_PASS);
}

static void test_eval_if_modified_since_only_get_head(void **state)
{
    sl_precond_input in = get_input();
    in.get_or_head = false;
    in.has_if_modified_since = true;
    in.if_modified_since = 1000;
    assert_int_equal(sl_precond_eval(&in, ETAG, 500), SL_PRECOND_PASS);
}

static void test_eval_order_if_match_first(void **state)
{
    /* A failing If-Match wins over a matching If-None-Match and over If-Modified-Since. */
    sl_precond_input in = get_input();
    set_im(&in, "\"x\"");
    set_inm(&in, "\"abc\"");
    in.has_if_modified_since = true;
    in.if_modified_since = 5000;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    /* Passing If-Match, then If-None-Match decides. */
    set_im(&in, ETAG);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
}

static void test_eval_order_unmodified_before_none_match(void **state)
{
    sl_precond_input in = get_input();
    in.has_if_unmodified_since = true;
    in.if_unmodified_since = 500;
    set_inm(&in, "\"abc\"");
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    in.if_unmodified_since = 1000;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
}

static void test_eval_both_dates(void **state)
{
    sl_precond_input in = get_input();
    in.has_if_unmodified_since = true;
    in.if_unmodified_since = 2000;
    in.has_if_modified_since = true;
    in.if_modified_since = 1500;
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1800), SL_PRECOND_PASS);
    assert_int_equal(sl_precond_eval(&in, ETAG, 2500), SL_PRECOND_FAILED);
}

static void test_eval_header_len_respected(void **state)
{
    sl_precond_input in = get_input();
    in.if_none_match = line("\"abc\"", 4);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    in.if_none_match = line("\"abc\"", 5);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
}

/* A field on several lines is one list (RFC 9110 §5.3): a match on any line counts, wherever it
 * stands, as it would in the joined value. */
static void test_eval_lists_over_lines(void **state)
{
    sl_precond_input in = get_input();
    in.if_none_match = field("\"x\"", ETAG, NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    in.if_none_match = field(ETAG, "\"x\"", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    in.if_none_match = field("\"x\"", "", "W/" ETAG);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_NOT_MODIFIED);
    in.if_none_match = field("\"x\"", "\"y\"", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);

    in = get_input();
    in.if_match = field("\"x\"", ETAG, NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    in.if_match = field("\"x\"", "\"y\"", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    /* Weak tags never pass If-Match, on whichever line. */
    in.if_match = field("\"x\"", "W/" ETAG, NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
}

/* Garbage on any line makes the whole list invalid, as within one line; "*" is only a whole
 * value, never one line of several. */
static void test_eval_lists_over_lines_invalid(void **state)
{
    sl_precond_input in = get_input();
    in.if_none_match = field(ETAG, "junk", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    in.if_none_match = field("junk", ETAG, NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);
    in.if_none_match = field("*", "\"x\"", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_PASS);

    in = get_input();
    in.if_match = field(ETAG, "junk", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    in.if_match = field("*", ETAG, NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
    in.if_match = field("*", "", NULL);
    assert_int_equal(sl_precond_eval(&in, ETAG, 1000), SL_PRECOND_FAILED);
}

/* ---- sl_if_range_ok ---- */

static bool ir(const char *v, bool has_date, time_t date, const char *etag, time_t mtime)
{
    return sl_if_range_ok(v, strlen(v), has_date, date, etag, mtime);
}

static void test_if_range_etag(void **state)
{
    assert_true(ir("\"abc\"", false, 0, ETAG, 1000));
    assert_true(ir("  \"abc\"\t", false, 0, ETAG, 1000));
    assert_false(ir("\"abd\"", false, 0, ETAG, 1000));
    assert_false(ir("W/\"abc\"", false, 0, ETAG, 1000));
    assert_false(ir("\"abc\"", false, 0, "W/\"abc\"", 1000));
    assert_false(ir("\"abc\"", false, 0, NULL, 1000));
}

static void test_if_range_etag_ignores_date(void **state)
{
    /* An entity-tag value is judged as a tag even if the caller also claims a date. */
    assert_false(ir("\"x\"", true, 1000, ETAG, 1000));
}

static void test_if_range_invalid_etag(void **state)
{
    assert_false(ir("\"abc", true, 1000, ETAG, 1000));
    assert_false(ir("\"abc\", \"abc\"", false, 0, ETAG, 1000));
    assert_false(ir("\"abc\"x", false, 0, ETAG, 1000));
    assert_false(ir("W/", true, 1000, ETAG, 1000));
}

static void test_if_range_date(void **state)
{
    const char *d = "Wed, 21 Oct 2015 07:28:00 GMT";
    assert_true(ir(d, true, 1445412480, ETAG, 1445412480));
    assert_false(ir(d, true, 1445412480, ETAG, 1445412481));
    assert_false(ir(d, true, 1445412481, ETAG, 1445412480));
    assert_true(ir(d, true, 1445412480, NULL, 1445412480));
}

static void test_if_range_neither(void **state)
{
    assert_false(ir("garbage", false, 0, ETAG, 0));
    assert_false(ir("", false, 0, ETAG, 0));
    assert_false(ir("   ", true, 0, ETAG, 0)); /* an empty value is no validator at all */
}

/* ---- sl_etag_make ---- */

static void test_etag_make_format(void **state)
{
    char buf[SL_ETAG_MAX];
    size_t n = sl_etag_make(buf, 0x1234, 0, 1, 5);
    assert_string_equal(buf, "\"1234-0-3b9aca05\"");
    assert_int_equal(n, strlen(buf));
    n = sl_etag_make(buf, 0, 0, 0, 0);
    assert_string_equal(buf, "\"0-0-0\"");
    assert_int_equal(n, 7);
    sl_etag_make(buf, 0xabcdef, 4096, 1700000000, 123456789);
    assert_string_equal(buf, "\"abcdef-1000-17979cfe3d85cd15\"");
}

static void test_etag_make_max_length(void **state)
{
    char buf[SL_ETAG_MAX + 8];
    memset(buf, '#', sizeof buf);
    size_t n = sl_etag_make(buf, ULLONG_MAX, ULLONG_MAX, -1, -1); /* -1000000001 ns, wrapped */
    assert_int_equal(n, 52);
    assert_true(n < SL_ETAG_MAX);
    assert_string_equal(buf, "\"ffffffffffffffff-ffffffffffffffff-ffffffffc46535ff\"");
    for (size_t k = n + 1; k < sizeof buf; k++) assert_int_equal(buf[k], '#');
}

static void test_etag_make_changes_with_each_input(void **state)
{
    char a[SL_ETAG_MAX], b[SL_ETAG_MAX];
    sl_etag_make(a, 1, 2, 3, 4);
    sl_etag_make(b, 1, 2, 3, 5);
    assert_string_not_equal(a, b); /* nanoseconds count */
    sl_etag_make(b, 1, 2, 4, 4);
    assert_string_not_equal(a, b);
    sl_etag_make(b, 1, 3, 3, 4);
    assert_string_not_equal(a, b);
    sl_etag_make(b, 2, 2, 3, 4);
    assert_string_not_equal(a, b);
    /* Field boundaries are unambiguous. */
    sl_etag_make(a, 0x12, 0x3, 0, 0);
    sl_etag_make(b, 0x1, 0x23, 0, 0);
    assert_string_not_equal(a, b);
    /* And the same inputs give the same tag. */
    sl_etag_make(a, 7, 8, -100, 999999999);
    sl_etag_make(b, 7, 8, -100, 999999999);
    assert_string_equal(a, b);
}

static void test_etag_make_is_valid_strong_tag(void **state)
{
    char tag[SL_ETAG_MAX];
    size_t n = sl_etag_make(tag, 42, 1 << 20, 1700000000, 1);
    assert_true(sl_etag_list_match(tag, n, tag, false));
    assert_true(sl_if_range_ok(tag, n, false, 0, tag, 0));
    char weak[SL_ETAG_MAX + 2];
    snprintf(weak, sizeof weak, "W/%s", tag);
    assert_false(sl_etag_list_match(weak, strlen(weak), tag, false));
    assert_true(sl_etag_list_match(weak, strlen(weak), tag, true));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_list_single_strong),
        cmocka_unit_test(test_list_several),
        cmocka_unit_test(test_list_ows_and_empty_elements),
        cmocka_unit_test(test_list_strong_rejects_weak),
        cmocka_unit_test(test_list_weak_ignores_prefix),
        cmocka_unit_test(test_list_weak_prefix_is_case_sensitive),
        cmocka_unit_test(test_list_comma_inside_opaque),
        cmocka_unit_test(test_list_syntax_errors_match_nothing),
        cmocka_unit_test(test_list_obs_text_and_empty_opaque),
        cmocka_unit_test(test_list_respects_len),
        cmocka_unit_test(test_list_bad_own_etag),
        cmocka_unit_test(test_eval_no_conditions),
        cmocka_unit_test(test_eval_if_match_star),
        cmocka_unit_test(test_eval_if_match_strong),
        cmocka_unit_test(test_eval_if_match_without_etags),
        cmocka_unit_test(test_eval_if_unmodified_since),
        cmocka_unit_test(test_eval_if_match_overrides_unmodified_since),
        cmocka_unit_test(test_eval_if_none_match_get),
        cmocka_unit_test(test_eval_if_none_match_other_method),
        cmocka_unit_test(test_eval_if_none_match_suppresses_modified_since),
        cmocka_unit_test(test_eval_if_modified_since),
        cmocka_unit_test(test_eval_if_modified_since_only_get_head),
        cmocka_unit_test(test_eval_order_if_match_first),
        cmocka_unit_test(test_eval_order_unmodified_before_none_match),
        cmocka_unit_test(test_eval_both_dates),
        cmocka_unit_test(test_eval_header_len_respected),
        cmocka_unit_test(test_eval_lists_over_lines),
        cmocka_unit_test(test_eval_lists_over_lines_invalid),
        cmocka_unit_test(test_if_range_etag),
        cmocka_unit_test(test_if_range_etag_ignores_date),
        cmocka_unit_test(test_if_range_invalid_etag),
        cmocka_unit_test(test_if_range_date),
        cmocka_unit_test(test_if_range_neither),
        cmocka_unit_test(test_etag_make_format),
        cmocka_unit_test(test_etag_make_max_length),
        cmocka_unit_test(test_etag_make_changes_with_each_input),
        cmocka_unit_test(test_etag_make_is_valid_strong_tag))
