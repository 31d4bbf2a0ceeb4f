/* cmocka tests for loadgen statistics and reports (stats.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render_text(const struct sl_lg_stats *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    struct sl_lg_run_info info = {.parallel = 1};
    sl_lg_report_text(f, s, &info);
    fclose(f);
    return buf;
}

static void test_percentiles_nearest_rank(void **state)
{
    struct sl_lg_stats s = {0};
    /* Insert 100..1 so finish() has to sort. */
    for (uint64_t v = 100; v >= 1; v--)
        assert_int_equal(sl_lg_stats_add_latency(&s, v), 0);
    sl_lg_stats_finish(&s);
    assert_int_equal(sl_lg_stats_percentile(&s, 50), 50);
    assert_int_equal(sl_lg_stats_percentile(&s, 90), 90);
    assert_int_equal(sl_lg_stats_percentile(&s, 99), 99);
    assert_int_equal(sl_lg_stats_percentile(&s, 99.9), 100);
    assert_int_equal(sl_lg_stats_percentile(&s, 100), 100);
    assert_int_equal(sl_lg_stats_percentile(&s, 0.5), 1);
    assert_int_equal(s.fetch.min_us, 1);
    assert_int_equal(s.fetch.max_us, 100);
    assert_int_equal(s.fetch.n, 100);
    sl_lg_stats_free(&s);
}

static void test_percentiles_small_and_empty(void **state)
{
    struct sl_lg_stats s = {0};
    sl_lg_stats_finish(&s);
    assert_int_equal(sl_lg_stats_percentile(&s, 50), 0);
    assert_int_equal(sl_lg_stats_add_latency(&s, 7), 0);
    assert_int_equal(sl_lg_stats_add_latency(&s, 3), 0);
    sl_lg_stats_finish(&s);
    assert_int_equal(sl_lg_stats_percentile(&s, 50), 3);
    assert_int_equal(sl_lg_stats_percentile(&s, 51), 7);
    sl_lg_stats_free(&s);
}

static void test_latency_array_grows(void **state)
{
    struct sl_lg_stats s = {0};
    for (uint64_t i = 0; i < 200000; i++)
        assert_int_equal(sl_lg_stats_add_latency(&s, i % 1000), 0);
    assert_int_equal(s.lat_n, 200000);
    sl_lg_stats_finish(&s);
    assert_int_equal(sl_lg_stats_percentile(&s, 50), 499);
    assert_int_equal(sl_lg_stats_percentile(&s, 100), 999);
    /* values beyond 32 bits clamp instead of wrapping */
    assert_int_equal(sl_lg_stats_add_latency(&s, 1ULL << 40), 0);
    assert_int_equal(s.lat_us[s.lat_n - 1], UINT32_MAX);
    sl_lg_stats_free(&s);
}

static void test_minmax(void **state)
{
    struct sl_lg_minmax m = {0};
    sl_lg_minmax_add(&m, 500);
    sl_lg_minmax_add(&m, 100);
    sl_lg_minmax_add(&m, 900);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.min_us, 100);
    assert_int_equal(m.max_us, 900);
    assert_true(m.sum_us == 1500.0);
}

/* The article's own numbers must come out in http_load's exact format. */
static void test_text_report_http_load_format(void **state)
{
    struct sl_lg_stats s = {
        .fetches = 10000, .started = 10000, .max_parallel = 100, .bytes = 1024000000,
        .elapsed_s = 137.5508, /* the article printed it rounded to 137.551 */
        .connect = {.n = 2, .sum_us = 2 * 66908.8, .min_us = 223, .max_us = 197157},
        .first_response = {.n = 1, .sum_us = 226181, .min_us = 2098, .max_us = 6066960},
        .status[200] = 10000,
        .sys = {.send = 10000, .recv = 15000},
    };
    for (int i = 0; i < 4; i++)
        assert_int_equal(sl_lg_stats_add_latency(&s, 1000u * (unsigned)(i + 1)), 0);
    sl_lg_stats_finish(&s);
    char *out = render_text(&s);
    const char *want = "10000 fetches, 100 max parallel, 1.024e+09 bytes, in 137.551 seconds\n"
                       "102400 mean bytes/connection\n"
                       "72.7004 fetches/sec, 7.44452e+06 bytes/sec\n"
                       "msecs/connect: 66.9088 mean, 197.157 max, 0.223 min\n"
                       "msecs/first-response: 226.181 mean, 6066.96 max, 2.098 min\n"
                       "HTTP response codes:\n"
                       "  code 200 -- 10000\n"
                       "msecs/fetch: p50 2.000 p90 4.000 p99 4.000 p99.9 4.000 max 4.000\n"
                       "errors: timed-out 0, bad-byte-count 0, bad-checksum 0, connect-failed 0, "
                       "cut-at-end 0, bad-response 0\n"
                       "client: discarded bodies, 0.000 s user, 0.000 s sys, 2.50 syscalls/fetch\n";
    assert_string_equal(out, want);
    free(out);
    sl_lg_stats_free(&s);
}

static void test_text_report_errors(void **state)
{
    struct sl_lg_stats s = {
        .elapsed_s = 1,
        .errors = {[SL_LG_ERR_TIMEOUT] = 3, [SL_LG_ERR_BAD_BYTES] = 2, [SL_LG_ERR_BAD_CHECKSUM] = 1,
                   [SL_LG_ERR_CONNECT] = 4, [SL_LG_ERR_CUT] = 5, [SL_LG_ERR_BAD_RESPONSE] = 6},
    };
    sl_lg_stats_finish(&s);
    char *out = render_text(&s);
    assert_non_null(
        strstr(out, "\n3 timeouts\n2 bad byte counts\n1 bad checksums\nHTTP response codes:\n"));
    assert_non_null(strstr(out, "errors: timed-out 3, bad-byte-count 2, bad-checksum 1, "
                                "connect-failed 4, cut-at-end 5, bad-response 6\n"));
    /* no successful fetch: no per-fetch lines */
    assert_null(strstr(out, "mean bytes/connection"));
    assert_null(strstr(out, "msecs/fetch"));
    free(out);
}

static void test_json_report(void **state)
{
    struct sl_lg_stats s = {
        .started = 12, .fetches = 10, .bytes = 1000, .elapsed_s = 2,
        .status = {[200] = 9, [404] = 1},
        .errors[SL_LG_ERR_TIMEOUT] = 2,
        .sys = {.send = 10, .recv = 11, .discard = 7, .epoll_wait = 2},
    };
    assert_int_equal(sl_lg_stats_add_latency(&s, 1500), 0);
    sl_lg_stats_finish(&s);
    struct sl_lg_run_info info = {.parallel = 4,
                                  .fetches_limit = 12,
                                  .timeout_s = 60,
                                  .seed = 42,
                                  .keepalive = true,
                                  .sequential = true,
                                  .min_fetches = 5,
                                  .cpu_user_s = 0.25,
                                  .cpu_sys_s = 1.5,
                                  .urls = 3};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    sl_lg_report_json(f, &s, &info);
    fclose(f);
    assert_non_null(
        strstr(buf, "\"settings\": {\"parallel\": 4, \"fetches\": 12, \"seconds\": null, "));
    assert_non_null(strstr(buf, "\"seed\": 42, \"keepalive\": true, \"checksum\": false, "
                                "\"body\": \"discard\", \"order\": \"sequential\", "
                                "\"min_fetches\": 5, \"urls\": 3}"));
    assert_non_null(strstr(buf, "\"fetches_started\": 12,\n"));
    assert_non_null(strstr(buf, "\"fetches\": 10,\n"));
    assert_non_null(strstr(buf, "\"fetches_per_s\": 5,\n"));
    assert_non_null(strstr(buf, "\"bytes_per_s\": 500,\n"));
    assert_non_null(strstr(buf, "\"p50\": 1.500"));
    assert_non_null(strstr(buf, "\"status\": {\"200\": 9, \"404\": 1}"));
    assert_non_null(
        strstr(buf, "\"errors\": {\"timed_out\": 2, \"bad_byte_count\": 0, \"bad_checksum\": 0, "
                    "\"connect_failed\": 0, \"cut_at_end\": 0, \"bad_response\": 0}"));
    assert_non_null(strstr(buf, "\"errors_total\": 2,\n"));
    assert_non_null(strstr(buf, "\"cpu_s\": {\"user\": 0.250000, \"sys\": 1.500000},\n"));
    assert_non_null(strstr(buf, "\"syscalls\": {\"send\": 10, \"recv\": 11, \"discard\": 7, "
                                "\"epoll_wait\": 2, \"epoll_ctl\": 0, \"connect\": 0, "
                                "\"close\": 0},\n"));
    /* 30 calls for 10 fetches */
    assert_non_null(strstr(buf, "\"syscalls_per_fetch\": 3.0000\n}\n"));
    free(buf);
    sl_lg_stats_free(&s);
}

static void test_error_keys(void **state)
{
    assert_string_equal(sl_lg_error_key(SL_LG_ERR_TIMEOUT), "timed_out");
    assert_string_equal(sl_lg_error_key(SL_LG_ERR_CUT), "cut_at_end");
    assert_string_equal(sl_lg_error_key(SL_LG_ERR_COUNT), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_nearest_rank),
        cmocka_unit_test(test_percentiles_small_and_empty),
        cmocka_unit_test(test_latency_array_grows),
        cmocka_unit_test(test_minmax),
        cmocka_unit_test(test_text_report_http_load_format),
        cmocka_unit_test(test_text_report_errors),
        cmocka_unit_test(test_json_report),
        cmocka_unit_test(test_error_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
