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

/* A list, the resource's own tag, weak or strong comparison, and whether the list matches. */
static const struct {
    const char *list, *etag;
    bool weak, match;
} list_cases[] = {
    /* One strong tag. */
    {"\"abc\"", ETAG, false, true},
    {"\"abd\"", ETAG, false, false},
    {"\"ABC\"", ETAG, false, false}, /* opaque tags are case-sensitive */
    {"\"abc \"", ETAG, false, false},
    /* Several tags. */
    {"\"x\", \"y\", \"abc\"", ETAG, false, true},
    {"\"abc\",\"y\"", ETAG, false, true},
    {"\"x\", \"y\"", ETAG, false, false},
    /* Optional white space and empty elements. */
    {"  \"x\" ,\t\"abc\"  ", ETAG, false, true},
    {",, \"abc\" ,,", ETAG, false, true},
    {"\"x\" , , \"abc\"", ETAG, false, true},
    {"", ETAG, false, false},
    {" , ", ETAG, false, false},
    /* Strong comparison rejects weak tags. */
    {"W/\"abc\"", ETAG, false, false},
    {"\"abc\"", "W/\"abc\"", false, false},
    {"W/\"abc\"", "W/\"abc\"", false, false},
    /* Weak comparison ignores the W/ prefix. */
    {"W/\"abc\"", ETAG, true, true},
    {"\"abc\"", ETAG, true, true},
    {"\"abc\"", "W/\"abc\"", true, true},
    {"W/\"abc\"", "W/\"abc\"", true, true},
    {"W/\"abd\"", ETAG, true, false},
    /* The weak prefix is case-sensitive. */
    {"w/\"abc\"", ETAG, true, false},
    {"W/ \"abc\"", ETAG, true, false},
    {"W\"abc\"", ETAG, true, false},
    /* A comma inside a tag. */
    {"\"a,b\"", "\"a,b\"", false, true},
    {"\"a,b\"", "\"a\"", false, false},
    {"\"x,\"abc\"", ETAG, false, false}, /* "x," then an unquoted abc: invalid */
    {"\"x,y\", \"abc\"", ETAG, false, true},
    /* obs-text, and an empty tag. */
    {"\"caf\xc3\xa9\"", "\"caf\xc3\xa9\"", false, true},
    {"\"\"", "\"\"", false, true},
    {"\"\"", ETAG, false, false},
    {"\"!#~\"", "\"!#~\"", false, true},
    /* A bad tag of the resource's own. */
    {"\"abc\"", NULL, false, false},
    {"abc", "abc", false, false},
    {"\"abc\"", "abc", true, false},
};

static void test_list_match(void **state)
{
    TU_EACH(c, list_cases)
        if (lm(c->list, c->etag, c->weak) != c->match)
            fail_msg("list %s, tag %s, %s: %s, want %s", c->list, c->etag ? c->etag : "NULL",
                     c->weak ? "weak" : "strong", c->match ? "no match" : "a match",
                     c->match ? "a match" : "no match");
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

static void test_list_respects_len(void **state)
{
    assert_false(sl_etag_list_match("\"abc\"", 4, ETAG, false));
    assert_true(sl_etag_list_match("\"x\", \"abc\", junk", 12, ETAG, false));
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

/* A GET or HEAD (or, with .other_method, another method) with the conditions given (a date of 0
 * is no such field), a resource's tag and modification time, and the outcome. */
struct eval_case {
    bool other_method;
    const char *im, *inm;              /* If-Match, If-None-Match: one line each */
    time_t ius, ims;                   /* If-Unmodified-Since, If-Modified-Since */
    const char *etag;
    time_t mtime;
    sl_precond_result want;
};

#define PASS SL_PRECOND_PASS
#define FAILED SL_PRECOND_FAILED
#define NOT_MODIFIED SL_PRECOND_NOT_MODIFIED

static const struct eval_case eval_cases[] = {
    /* No conditions. */
    {.etag = ETAG, .mtime = 1000, .want = PASS},
    {.other_method = true, .etag = ETAG, .mtime = 1000, .want = PASS},
    {.other_method = true, .etag = NULL, .mtime = 1000, .want = PASS},
    /* If-Match: "*". */
    {.im = "*", .etag = ETAG, .mtime = 1000, .want = PASS},
    {.im = "*", .etag = NULL, .mtime = 1000, .want = PASS},
    {.im = " * ", .etag = ETAG, .mtime = 1000, .want = PASS},
    /* If-Match: strong comparison. */
    {.im = "\"x\", \"abc\"", .etag = ETAG, .mtime = 1000, .want = PASS},
    {.im = "\"x\"", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.im = "W/\"abc\"", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.im = "", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.other_method = true, .im = "\"x\"", .etag = ETAG, .mtime = 1000, .want = FAILED},
    /* If-Match without ETags. */
    {.im = "\"abc\"", .etag = NULL, .mtime = 1000, .want = FAILED},
    /* If-Unmodified-Since. */
    {.ius = 1000, .etag = ETAG, .mtime = 1000, .want = PASS},
    {.ius = 1000, .etag = ETAG, .mtime = 999, .want = PASS},
    {.ius = 1000, .etag = ETAG, .mtime = 1001, .want = FAILED},
    {.other_method = true, .ius = 1000, .etag = ETAG, .mtime = 1001, .want = FAILED},
    {.other_method = true, .etag = ETAG, .mtime = 1001, .want = PASS},
    /* If-Match overrides If-Unmodified-Since. */
    {.ius = 1000, .im = ETAG, .etag = ETAG, .mtime = 5000, .want = PASS},
    {.ius = 1000, .im = "*", .etag = ETAG, .mtime = 5000, .want = PASS},
    /* If-None-Match on a GET. */
    {.inm = "\"abc\"", .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.inm = "W/\"abc\"", .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.inm = "\"x\", W/\"abc\"", .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.inm = "*", .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.inm = "*", .etag = NULL, .mtime = 1000, .want = NOT_MODIFIED},
    {.inm = "\"x\"", .etag = ETAG, .mtime = 1000, .want = PASS},
    /* If-None-Match on another method. */
    {.other_method = true, .inm = "\"abc\"", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.other_method = true, .inm = "*", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.other_method = true, .inm = "\"x\"", .etag = ETAG, .mtime = 1000, .want = PASS},
    /* If-None-Match present and not matching: If-Modified-Since is not looked at, even though it
     * alone would give 304. Also true when ETags are disabled. */
    {.ims = 2000, .inm = "\"x\"", .etag = ETAG, .mtime = 1000, .want = PASS},
    {.ims = 2000, .inm = "\"abc\"", .etag = NULL, .mtime = 1000, .want = PASS},
    /* If-Modified-Since. */
    {.ims = 1000, .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.ims = 1000, .etag = ETAG, .mtime = 999, .want = NOT_MODIFIED},
    {.ims = 1000, .etag = ETAG, .mtime = 1001, .want = PASS},
    {.etag = ETAG, .mtime = 999, .want = PASS},
    /* If-Modified-Since only for GET and HEAD. */
    {.other_method = true, .ims = 1000, .etag = ETAG, .mtime = 500, .want = PASS},
    /* A failing If-Match wins over a matching If-None-Match and over If-Modified-Since... */
    {.im = "\"x\"", .inm = "\"abc\"", .ims = 5000, .etag = ETAG, .mtime = 1000, .want = FAILED},
    /* ...a passing one leaves it to If-None-Match. */
    {.im = ETAG, .inm = "\"abc\"", .ims = 5000, .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    /* If-Unmodified-Since before If-None-Match. */
    {.ius = 500, .inm = "\"abc\"", .etag = ETAG, .mtime = 1000, .want = FAILED},
    {.ius = 1000, .inm = "\"abc\"", .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    /* Both dates. */
    {.ius = 2000, .ims = 1500, .etag = ETAG, .mtime = 1000, .want = NOT_MODIFIED},
    {.ius = 2000, .ims = 1500, .etag = ETAG, .mtime = 1800, .want = PASS},
    {.ius = 2000, .ims = 1500, .etag = ETAG, .mtime = 2500, .want = FAILED},
};

static void test_eval(void **state)
{
    TU_EACH(c, eval_cases) {
        sl_precond_input in = get_input();
        in.get_or_head = !c->other_method;
        if (c->im) set_im(&in, c->im);
        if (c->inm) set_inm(&in, c->inm);
        in.has_if_unmodified_since = c->ius != 0;
        in.if_unmodified_since = c->ius;
        in.has_if_modified_since = c->ims != 0;
        in.if_modified_since = c->ims;
        sl_precond_result got = sl_precond_eval(&in, c->etag, c->mtime);
        if (got != c->want)
            fail_msg("case %zu (If-Match %s, If-None-Match %s, dates %lld/%lld, mtime %lld): %d, "
                     "want %d", (size_t)(c - eval_cases), c->im ? c->im : "-",
                     c->inm ? c->inm : "-", (long long)c->ius, (long long)c->ims,
                     (long long)c->mtime, got, c->want);
    }
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

/* An If-Range value (with the date it holds, if the caller parsed one), the resource's tag and
 * modification time, and whether the range is to be sent. */
static const struct {
    const char *value;
    bool has_date;
    time_t date;
    const char *etag;
    time_t mtime;
    bool ok;
} if_range_cases[] = {
    /* An entity-tag. */
    {"\"abc\"", false, 0, ETAG, 1000, true},
    {"  \"abc\"\t", false, 0, ETAG, 1000, true},
    {"\"abd\"", false, 0, ETAG, 1000, false},
    {"W/\"abc\"", false, 0, ETAG, 1000, false},
    {"\"abc\"", false, 0, "W/\"abc\"", 1000, false},
    {"\"abc\"", false, 0, NULL, 1000, false},
    /* An entity-tag value is judged as a tag even if the caller also claims a date. */
    {"\"x\"", true, 1000, ETAG, 1000, false},
    /* An invalid entity-tag. */
    {"\"abc", true, 1000, ETAG, 1000, false},
    {"\"abc\", \"abc\"", false, 0, ETAG, 1000, false},
    {"\"abc\"x", false, 0, ETAG, 1000, false},
    {"W/", true, 1000, ETAG, 1000, false},
    /* A date. */
    {"Wed, 21 Oct 2015 07:28:00 GMT", true, 1445412480, ETAG, 1445412480, true},
    {"Wed, 21 Oct 2015 07:28:00 GMT", true, 1445412480, ETAG, 1445412481, false},
    {"Wed, 21 Oct 2015 07:28:00 GMT", true, 1445412481, ETAG, 1445412480, false},
    {"Wed, 21 Oct 2015 07:28:00 GMT", true, 1445412480, NULL, 1445412480, true},
    /* Neither. */
    {"garbage", false, 0, ETAG, 0, false},
    {"", false, 0, ETAG, 0, false},
    {"   ", true, 0, ETAG, 0, false}, /* an empty value is no validator at all */
};

static void test_if_range(void **state)
{
    TU_EACH(c, if_range_cases) {
        const char *v = c->value, *etag = c->etag;
        bool ok = sl_if_range_ok(v, strlen(v), c->has_date, c->date, etag, c->mtime);
        if (ok != c->ok)
            fail_msg("If-Range %s (tag %s, mtime %lld): %d, want %d", v, etag ? etag : "NULL",
                     (long long)c->mtime, ok, c->ok);
    }
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

/* The hex digits against printf's, at every digit count and bit length: all ones, a single bit,
 * and pseudo-random values of each length, in each of the three places. */
static void test_etag_make_against_printf(void **state)
{
    (void)state;
    char got[SL_ETAG_MAX], want[SL_ETAG_MAX + 16];
    unsigned long long seed = 0x9e3779b97f4a7c15ull;
    for (int bits = 0; bits <= 64; bits++) {
        unsigned long long mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
        unsigned long long vals[3] = {mask, bits ? 1ull << (bits - 1) : 0, 0};
        for (int r = 0; r < 50; r++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            vals[2] = (seed ^ (seed >> 29)) & mask;
            for (int v = 0; v < 3; v++) {
                unsigned long long x = vals[v], y = vals[(v + 1) % 3], z = vals[(v + 2) % 3];
                sl_etag_make(got, x, y, (long long)z, 0); /* mtime: z seconds, 0 ns */
                snprintf(want, sizeof want, "\"%llx-%llx-%llx\"", x, y, z * 1000000000ull);
                assert_string_equal(got, want);
            }
        }
    }
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
        cmocka_unit_test(test_list_match),
        cmocka_unit_test(test_list_syntax_errors_match_nothing),
        cmocka_unit_test(test_list_respects_len),
        cmocka_unit_test(test_eval),
        cmocka_unit_test(test_eval_header_len_respected),
        cmocka_unit_test(test_eval_lists_over_lines),
        cmocka_unit_test(test_eval_lists_over_lines_invalid),
        cmocka_unit_test(test_if_range),
        cmocka_unit_test(test_etag_make_format),
        cmocka_unit_test(test_etag_make_max_length),
        cmocka_unit_test(test_etag_make_against_printf),
        cmocka_unit_test(test_etag_make_changes_with_each_input),
        cmocka_unit_test(test_etag_make_is_valid_strong_tag))
