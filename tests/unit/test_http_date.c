/* Unit tests for server/http_date.c: the three HTTP-date formats (RFC 9110 §5.6.7), range
 * validation, the RFC 850 two-digit-year window, and format/parse round trips cross-checked
 * against gmtime_r. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "testutil.h"

#include "http_date.h"

#define T_1994 784111777LL /* Sun, 06 Nov 1994 08:49:37 GMT */

/* Parses a heap copy without a terminating NUL, so reads past len are caught by ASan. */
static int parse(const char *s, time_t *t)
{
    size_t len = strlen(s);
    char *copy = tu_copy(s, len);
    int rc = sl_http_date_parse(copy, len, t);
    free(copy);
    return rc;
}

static void expect_time(const char *s, long long want)
{
    time_t t = 0;
    if (parse(s, &t) != 0) fail_msg("\"%s\" refused", s);
    if ((long long)t != want) fail_msg("\"%s\": %lld, want %lld", s, (long long)t, want);
}

static void expect_invalid(const char *s)
{
    time_t t = 12345;
    int rc = parse(s, &t);
    if (rc != -EINVAL) fail_msg("\"%s\" accepted (%d)", s, rc);
    assert_int_equal((long long)t, 12345); /* untouched */
}

static int current_year(void)
{
    time_t now = time(NULL);
    struct tm tm;
    assert_non_null(gmtime_r(&now, &tm));
    return tm.tm_year + 1900;
}

/* ---- IMF-fixdate ---- */

static void test_imf_fixdate(void **state)
{
    expect_time("Sun, 06 Nov 1994 08:49:37 GMT", T_1994);
    expect_time("Thu, 01 Jan 1970 00:00:00 GMT", 0);
    expect_time("Wed, 31 Dec 1969 23:59:59 GMT", -1);
    expect_time("Tue, 29 Feb 2000 00:00:00 GMT", 951782400LL);
    expect_time("Tue, 19 Jan 2038 03:14:08 GMT", 2147483648LL);
    expect_time("Fri, 31 Dec 9999 23:59:59 GMT", 253402300799LL);
    expect_time("Sat, 01 Jan 0000 00:00:00 GMT", -62167219200LL);
}

static void test_weekday_not_cross_checked(void **state)
{
    /* Any valid day name is accepted; only the date fields determine the time. */
    expect_time("Mon, 06 Nov 1994 08:49:37 GMT", T_1994);
    expect_time("Sat Nov  6 08:49:37 1994", T_1994);
}

static void test_leap_second(void **state)
{
    expect_time("Sun, 06 Nov 1994 08:49:60 GMT", T_1994 + 23);
    expect_time("Sat, 31 Dec 2016 23:59:60 GMT", 1483228800LL);
    /* The last minute of year 9999 has none after it: its leap second would format as 23:59:59. */
    expect_time("Fri, 31 Dec 9999 23:59:59 GMT", 253402300799LL);
    expect_invalid("Fri, 31 Dec 9999 23:59:60 GMT");
    expect_invalid("Fri Dec 31 23:59:60 9999");
    expect_time("Fri, 31 Dec 9999 23:58:60 GMT", 253402300740LL);
}

/* ---- obsolete formats ---- */

static void test_asctime(void **state)
{
    expect_time("Sun Nov  6 08:49:37 1994", T_1994);
    expect_time("Sun Nov 06 08:49:37 1994", T_1994);
    expect_time("Wed Nov 16 08:49:37 1994", T_1994 + 10 * 86400LL);
    expect_time("Thu Jan  1 00:00:00 1970", 0);
    expect_time("Tue Feb 29 12:00:00 2000", 951825600LL);
}

static void test_rfc850(void **state)
{
    int cur = current_year();
    /* 94 is 1994 until 2044 makes 2094 no longer "more than 50 years in the future". */
    long long y94 = cur - cur % 100 + 94;
    if (y94 > cur + 50) y94 -= 100;
    if (y94 == 1994) expect_time("Sunday, 06-Nov-94 08:49:37 GMT", T_1994);
    expect_time("Thursday, 01-Jan-70 00:00:00 GMT", cur + 50 < 2070 ? 0 : 3155760000LL);

    static const char *const names[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};
    time_t t;
    char buf[64];
    for (size_t i = 0; i < 7; i++) {
        snprintf(buf, sizeof buf, "%s, 06-Nov-94 08:49:37 GMT", names[i]);
        assert_int_equal(parse(buf, &t), 0);
    }
}

static void test_rfc850_year_window(void **state)
{
    int cur = current_year();
    char buf[64];
    time_t t;
    struct tm tm;
    /* Offsets from the current year and the year each two-digit year must mean. */
    static const int offs[] = {-51, -50, -49, -1, 0, 1, 49, 50, 51, 99};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        int y = cur + offs[i];
        int want = offs[i] > 50 ? y - 100 : offs[i] <= -50 ? y + 100 : y;
        snprintf(buf, sizeof buf, "Friday, 01-Jun-%02d 12:00:00 GMT", ((y % 100) + 100) % 100);
        assert_int_equal(parse(buf, &t), 0);
        assert_non_null(gmtime_r(&t, &tm));
        if (tm.tm_year + 1900 != want)
            fail_msg("%s: year %d, want %d", buf, tm.tm_year + 1900, want);
        assert_int_equal(tm.tm_mon, 5);
        assert_int_equal(tm.tm_mday, 1);
        assert_int_equal(tm.tm_hour, 12);
    }
}

static void test_three_formats_agree(void **state)
{
    time_t a, b, c;
    assert_int_equal(parse("Sat, 01 Jun 2024 10:20:30 GMT", &a), 0);
    assert_int_equal(parse("Saturday, 01-Jun-24 10:20:30 GMT", &b), 0);
    assert_int_equal(parse("Sat Jun  1 10:20:30 2024", &c), 0);
    assert_true(a == b && b == c);
}

/* ---- invalid input ---- */

static void test_invalid_syntax(void **state)
{
    static const char *const bad[] = {
        "",
        "Sun",
        "Sun,",
        "Sun, 06 Nov 1994 08:49:37 GM",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "Sun, 06 Nov 1994 08:49:37 GMT ",
        " Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun,  6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06-Nov-1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "Sux, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08.49.37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT ",
        "Sun, 06 Nov 19a4 08:49:37 GMT",
        "Sun, 0x Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:3  GMT",
        "Sun, 06 Nov 1994 08:49:37\tGMT",
        "Sun, 06 Nov +994 08:49:37 GMT",
        "Sun, 06 Nov 1994 -8:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT ",
        "Sunday, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT x",
        "Sundays, 06-Nov-94 08:49:37 GMT",
        "Sunday 06-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 UTC",
        "Sunday, 6-Nov-94 08:49:37 GMT ",
        "Sunday, 06-Nov-9 08:49:37 GMT ",
        "sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 08:49:37 1994 ",
        "Sun Nov 6  08:49:37 1994",
        "Sun Nov  6 08:49:37 GMT 1994",
        "Sun Nov  x 08:49:37 1994",
        "Sunday Nov  6 08:49:37 1994",
        "1994-11-06T08:49:37Z",
        "784111777",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_invalid(bad[i]);
}

static void test_invalid_ranges(void **state)
{
    static const char *const bad[] = {
        "Sun, 00 Nov 1994 08:49:37 GMT",  "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT",  "Sun, 31 Apr 1994 08:49:37 GMT",
        "Sun, 30 Feb 2000 08:49:37 GMT",  "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sun, 29 Feb 2023 08:49:37 GMT",  "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",  "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 1994 99:99:99 GMT",  "Sunday, 00-Nov-94 08:49:37 GMT",
        "Sunday, 31-Sep-94 08:49:37 GMT", "Sunday, 06-Nov-94 25:49:37 GMT",
        "Sun Nov  0 08:49:37 1994",       "Sun Nov 31 08:49:37 1994",
        "Sun Feb 29 08:49:37 2100",       "Sun Nov  6 08:49:60 1994x",
        "Sun Nov  6 23:59:99 1994",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_invalid(bad[i]);
    expect_time("Sun, 29 Feb 2004 00:00:00 GMT", 1078012800LL);
    expect_time("Sun, 31 Dec 1995 23:59:59 GMT", 820454399LL);
}

static void test_embedded_nul_and_length(void **state)
{
    time_t t = 7;
    /* Only len bytes are looked at: a valid date followed by more bytes outside len is fine, a
     * truncated len is not. */
    const char *s = "Sun, 06 Nov 1994 08:49:37 GMTxyz";
    assert_int_equal(sl_http_date_parse(s, 29, &t), 0);
    assert_int_equal((long long)t, T_1994);
    assert_int_equal(sl_http_date_parse(s, 28, &t), -EINVAL);
    assert_int_equal(sl_http_date_parse(s, 32, &t), -EINVAL);
    assert_int_equal(sl_http_date_parse("Sun, 06 Nov 1994 08:49:37 G\0T", 29, &t), -EINVAL);
    assert_int_equal(sl_http_date_parse("", 0, &t), -EINVAL);
}

/* ---- formatting ---- */

static void expect_format(long long t, const char *want)
{
    char buf[SL_HTTP_DATE_LEN + 1];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(sl_http_date_format((time_t)t, buf), SL_HTTP_DATE_LEN);
    assert_int_equal(buf[SL_HTTP_DATE_LEN], 0);
    assert_string_equal(buf, want);
}

static void test_format_known(void **state)
{
    expect_format(0, "Thu, 01 Jan 1970 00:00:00 GMT");
    expect_format(-1, "Wed, 31 Dec 1969 23:59:59 GMT");
    expect_format(T_1994, "Sun, 06 Nov 1994 08:49:37 GMT");
    expect_format(951782400LL, "Tue, 29 Feb 2000 00:00:00 GMT");
    expect_format(951868800LL, "Wed, 01 Mar 2000 00:00:00 GMT");
    expect_format(2147483648LL, "Tue, 19 Jan 2038 03:14:08 GMT");
    expect_format(4107542400LL, "Mon, 01 Mar 2100 00:00:00 GMT");
    expect_format(253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT");
    expect_format(-62167219200LL, "Sat, 01 Jan 0000 00:00:00 GMT");
}

static void test_format_clamps(void **state)
{
    expect_format(253402300800LL, "Fri, 31 Dec 9999 23:59:59 GMT");
    expect_format(-62167219201LL, "Sat, 01 Jan 0000 00:00:00 GMT");
    expect_format(0x7fffffffffffffffLL, "Fri, 31 Dec 9999 23:59:59 GMT");
    expect_format(-0x7fffffffffffffffLL - 1, "Sat, 01 Jan 0000 00:00:00 GMT");
}

/* Format then parse gives the same time, and the text matches what gmtime_r computes. */
static void test_round_trip(void **state)
{
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const mn[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char buf[SL_HTTP_DATE_LEN + 1], ref[64];
    unsigned long long seed = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) {
        long long t;
        if (i < 1000) {
            t = -2000000LL + (long long)i * 4001; /* dense around the epoch */
        } else {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            /* Years 1000..9999 (glibc formats %Y without padding below 1000). */
            t = -30610224000LL + (long long)(seed % (253402300800ULL + 30610224000ULL));
        }
        assert_int_equal(sl_http_date_format((time_t)t, buf), SL_HTTP_DATE_LEN);
        time_t back;
        if (sl_http_date_parse(buf, SL_HTTP_DATE_LEN, &back) != 0) fail_msg("%s refused", buf);
        if ((long long)back != t) fail_msg("%lld -> %s -> %lld", t, buf, (long long)back);
        struct tm tm;
        time_t tt = (time_t)t;
        assert_non_null(gmtime_r(&tt, &tm));
        snprintf(ref, sizeof ref, "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[tm.tm_wday], tm.tm_mday,
                 mn[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        if (strcmp(buf, ref) != 0) fail_msg("%lld: %s, gmtime_r says %s", t, buf, ref);
    }
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_imf_fixdate),
        cmocka_unit_test(test_weekday_not_cross_checked),
        cmocka_unit_test(test_leap_second),
        cmocka_unit_test(test_asctime),
        cmocka_unit_test(test_rfc850),
        cmocka_unit_test(test_rfc850_year_window),
        cmocka_unit_test(test_three_formats_agree),
        cmocka_unit_test(test_invalid_syntax),
        cmocka_unit_test(test_invalid_ranges),
        cmocka_unit_test(test_embedded_nul_and_length),
        cmocka_unit_test(test_format_known),
        cmocka_unit_test(test_format_clamps),
        cmocka_unit_test(test_round_trip))
