/* Unit tests for server/range.c: RFC 9110 §14 byte ranges, plus an exhaustive cross-check against a
 * deliberately naive reference (split on commas, mark bytes in a bitmap) for tiny representations. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "range.h"

#define MAXR 16

static sl_range_result parse_max(const char *s, uint64_t size, size_t max, sl_byte_range *out, size_t *n)
{
    return sl_range_parse(s, strlen(s), size, out, max, n);
}

static sl_range_result parse(const char *s, uint64_t size, sl_byte_range *out, size_t *n)
{
    return parse_max(s, size, MAXR, out, n);
}

/* Asserts an OK result with exactly one range [first, last]. */
static void expect_one(const char *s, uint64_t size, uint64_t first, uint64_t last)
{
    sl_byte_range r[MAXR];
    size_t n = 99;
    assert_int_equal(parse(s, size, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 1);
    assert_true(r[0].first == first);
    assert_true(r[0].last == last);
}

static void expect_result(const char *s, uint64_t size, sl_range_result want)
{
    sl_byte_range r[MAXR];
    size_t n = 99;
    assert_int_equal(parse(s, size, r, &n), want);
    if (want != SL_RANGE_OK) assert_int_equal(n, 0);
}

static void test_first_last(void **state)
{
    expect_one("bytes=0-499", 10000, 0, 499);
    expect_one("bytes=500-999", 10000, 500, 999);
    expect_one("bytes=0-0", 1, 0, 0);
}

static void test_open_ended(void **state)
{
    expect_one("bytes=500-", 10000, 500, 9999);
    expect_one("bytes=0-", 1, 0, 0);
    expect_one("bytes=9999-", 10000, 9999, 9999);
}

static void test_suffix(void **state)
{
    expect_one("bytes=-500", 10000, 9500, 9999);
    expect_one("bytes=-1", 10000, 9999, 9999);
    expect_one("bytes=-10000", 10000, 0, 9999);
}

static void test_suffix_larger_than_size_is_whole(void **state)
{
    expect_one("bytes=-500", 100, 0, 99);
    expect_one("bytes=-18446744073709551615", 7, 0, 6);
}

static void test_last_clipped_to_size(void **state)
{
    expect_one("bytes=0-499", 100, 0, 99);
    expect_one("bytes=50-18446744073709551615", 100, 50, 99);
}

static void test_first_and_suffix_coalesce(void **state)
{
    expect_one("bytes=0-0,-1", 1, 0, 0);
    sl_byte_range r[MAXR];
    size_t n;
    assert_int_equal(parse("bytes=0-0,-1", 10, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 2);
    assert_true(r[0].first == 0 && r[0].last == 0);
    assert_true(r[1].first == 9 && r[1].last == 9);
}

/* Asserts an OK result equal to the ranges in want ("a-b a-b ..."), in that order. */
static void expect_ranges(const char *s, uint64_t size, const char *want)
{
    sl_byte_range r[MAXR];
    size_t n = 99, k = 0;
    assert_int_equal(parse(s, size, r, &n), SL_RANGE_OK);
    for (const char *p = want; *p; k++) {
        char *e;
        unsigned long long a = strtoull(p, &e, 10), b = strtoull(e + 1, &e, 10);
        if (k >= n || r[k].first != a || r[k].last != b)
            fail_msg("\"%s\": range %zu is not %llu-%llu (n = %zu)", s, k, a, b, n);
        p = *e ? e + 1 : e;
    }
    assert_int_equal(n, k);
}

/* RFC 9110 §14.6: parts in the order the request asked for them. */
static void test_request_order_kept(void **state)
{
    expect_ranges("bytes=80-89,-5,0-9,40-49", 100, "80-89 95-99 0-9 40-49");
    expect_ranges("bytes=50-59,0-9", 100, "50-59 0-9");
    expect_ranges("bytes=-10,0-5", 100, "90-99 0-5");
}

/* A coalesced range stands where the earliest of its range-specs stood. */
static void test_coalesced_in_place(void **state)
{
    expect_ranges("bytes=0-9,50-59,5-14", 100, "0-14 50-59");
    expect_ranges("bytes=50-59,0-9,10-19", 100, "50-59 0-19");
    expect_ranges("bytes=50-59,0-9,30-39,5-35", 100, "50-59 0-39");
    /* A late range joining two earlier ones: they fold into the first. */
    expect_ranges("bytes=70-79,0-9,20-29,10-19", 100, "70-79 0-29");
    expect_ranges("bytes=20-29,70-79,0-9,5-24", 100, "0-29 70-79");
    expect_ranges("bytes=90-,0-9,80-89,10-79", 100, "0-99");
}

static void test_overlapping_coalesced(void **state)
{
    expect_one("bytes=0-10,5-20", 100, 0, 20);
    expect_one("bytes=5-20,0-10", 100, 0, 20);
    expect_one("bytes=0-99,10-20,30-", 100, 0, 99);
    expect_one("bytes=10-20,10-20,10-20", 100, 10, 20);
}

static void test_adjacent_coalesced(void **state)
{
    expect_one("bytes=0-9,10-19", 100, 0, 19);
    expect_one("bytes=10-19,0-9", 100, 0, 19);
    expect_one("bytes=0-49,-50", 100, 0, 99);
    /* A one-byte gap keeps them apart. */
    sl_byte_range r[MAXR];
    size_t n;
    assert_int_equal(parse("bytes=0-9,11-19", 100, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 2);
}

static void test_whitespace_around_commas(void **state)
{
    sl_byte_range r[MAXR];
    size_t n;
    assert_int_equal(parse("bytes=0-1 , 5-6,\t8-9 \t", 100, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 3);
    assert_true(r[2].first == 8 && r[2].last == 9);
    expect_one(" \tbytes=0-1", 10, 0, 1);
}

static void test_whitespace_inside_spec_ignored(void **state)
{
    expect_result("bytes=0 -1", 10, SL_RANGE_IGNORE);
    expect_result("bytes=0- 1", 10, SL_RANGE_IGNORE);
    expect_result("bytes=- 1", 10, SL_RANGE_IGNORE);
    expect_result("bytes =0-1", 10, SL_RANGE_IGNORE);
    expect_result("bytes= 0-1", 10, SL_RANGE_OK); /* OWS before the first list element is tolerated. */
    expect_result("bytes=0-1 2-3", 10, SL_RANGE_IGNORE);
}

static void test_unit_case_insensitive(void **state)
{
    expect_one("BYTES=0-1", 10, 0, 1);
    expect_one("Bytes=0-1", 10, 0, 1);
    expect_one("bYtEs=-2", 10, 8, 9);
}

static void test_other_units_ignored(void **state)
{
    expect_result("items=0-1", 10, SL_RANGE_IGNORE);
    expect_result("byte=0-1", 10, SL_RANGE_IGNORE);
    expect_result("bytesx=0-1", 10, SL_RANGE_IGNORE);
    expect_result("bytes", 10, SL_RANGE_IGNORE);
    expect_result("bytes:0-1", 10, SL_RANGE_IGNORE);
    expect_result("", 10, SL_RANGE_IGNORE);
    expect_result("0-1", 10, SL_RANGE_IGNORE);
}

static void test_empty_set_ignored(void **state)
{
    expect_result("bytes=", 10, SL_RANGE_IGNORE);
    expect_result("bytes=,", 10, SL_RANGE_IGNORE);
    expect_result("bytes= , ,", 10, SL_RANGE_IGNORE);
}

static void test_empty_elements_tolerated(void **state)
{
    sl_byte_range r[MAXR];
    size_t n;
    assert_int_equal(parse("bytes=,0-1,,5-6,", 10, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 2);
}

static void test_last_before_first_ignored(void **state)
{
    expect_result("bytes=5-4", 10, SL_RANGE_IGNORE);
    /* Invalid anywhere in the list invalidates the whole header, even beyond size. */
    expect_result("bytes=0-1,50-40", 10, SL_RANGE_IGNORE);
    expect_result("bytes=0-1,50-40", 0, SL_RANGE_IGNORE);
}

static void test_syntax_errors_ignored(void **state)
{
    static const char *bad[] = {
        "bytes=-",     "bytes=--1", "bytes=1",   "bytes=1--2", "bytes=a-b",    "bytes=0-1x",
        "bytes=0x1-2", "bytes=+1-2", "bytes=1-+2", "bytes=1-2-3", "bytes=-1-2", "bytes=0-1;2-3",
        "bytes=\"0-1\"", "bytes=0-1,x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_result(bad[i], 10, SL_RANGE_IGNORE);
}

static void test_embedded_nul_ignored(void **state)
{
    sl_byte_range r[MAXR];
    size_t n;
    assert_int_equal(sl_range_parse("bytes=0-1\0", 10, 10, r, MAXR, &n), SL_RANGE_IGNORE);
    assert_int_equal(sl_range_parse("byt\0s=0-1", 9, 10, r, MAXR, &n), SL_RANGE_IGNORE);
    /* The length bounds the parse: what follows it is never looked at. */
    assert_int_equal(sl_range_parse("bytes=0-1garbage", 9, 10, r, MAXR, &n), SL_RANGE_OK);
}

static void test_overflow_ignored(void **state)
{
    expect_result("bytes=18446744073709551616-", 10, SL_RANGE_IGNORE);
    expect_result("bytes=0-18446744073709551616", 10, SL_RANGE_IGNORE);
    expect_result("bytes=-18446744073709551616", 10, SL_RANGE_IGNORE);
    expect_result("bytes=99999999999999999999999999-", 10, SL_RANGE_IGNORE);
    /* The largest value is fine. */
    expect_result("bytes=18446744073709551615-", 10, SL_RANGE_UNSATISFIABLE);
    expect_one("bytes=18446744073709551614-", UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 1);
}

static void test_leading_zeros_are_not_overflow(void **state)
{
    expect_one("bytes=000000000000000000000000000000001-0000000000000000000000000002", 10, 1, 2);
    expect_one("bytes=-0000000000000000000000000000000003", 10, 7, 9);
}

static void test_huge_size(void **state)
{
    expect_one("bytes=-1", UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 1);
    expect_one("bytes=0-", UINT64_MAX, 0, UINT64_MAX - 1);
    expect_one("bytes=0-18446744073709551615", UINT64_MAX, 0, UINT64_MAX - 1);
}

static void test_first_beyond_size_unsatisfiable(void **state)
{
    expect_result("bytes=10-", 10, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=10-20", 10, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=10-20,30-40,11-", 10, SL_RANGE_UNSATISFIABLE);
}

static void test_unsatisfiable_dropped_next_to_satisfiable(void **state)
{
    expect_one("bytes=50-60,0-1", 10, 0, 1);
    expect_one("bytes=-0,3-4", 10, 3, 4);
}

static void test_zero_suffix_unsatisfiable(void **state)
{
    expect_result("bytes=-0", 10, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=-000", 10, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=-0,-0", 0, SL_RANGE_UNSATISFIABLE);
}

static void test_size_zero(void **state)
{
    expect_result("bytes=0-", 0, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=0-0", 0, SL_RANGE_UNSATISFIABLE);
    expect_result("bytes=-0", 0, SL_RANGE_UNSATISFIABLE);
    /* A non-zero suffix is satisfiable per RFC 9110 §14.1.2 but selects nothing: 200, not 416. */
    expect_result("bytes=-1", 0, SL_RANGE_IGNORE);
    expect_result("bytes=0-0,-5", 0, SL_RANGE_IGNORE);
}

static void test_max_limit(void **state)
{
    sl_byte_range r[3];
    size_t n = 7;
    assert_int_equal(parse_max("bytes=0-0,2-2,4-4", 10, 3, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 3);
    assert_int_equal(parse_max("bytes=0-0,2-2,4-4,6-6", 10, 3, r, &n), SL_RANGE_IGNORE);
    assert_int_equal(n, 0);
    /* The limit counts range-specs before coalescing. */
    assert_int_equal(parse_max("bytes=0-0,0-0,0-0,0-0", 10, 3, r, &n), SL_RANGE_IGNORE);
    /* Unsatisfiable specs are not stored and so do not count. */
    assert_int_equal(parse_max("bytes=0-0,20-,2-2,30-,4-4", 10, 3, r, &n), SL_RANGE_OK);
    assert_int_equal(n, 3);
}

static void test_max_zero(void **state)
{
    size_t n = 5;
    assert_int_equal(sl_range_parse("bytes=0-1", 9, 10, NULL, 0, &n), SL_RANGE_IGNORE);
    assert_int_equal(n, 0);
    assert_int_equal(sl_range_parse("bytes=20-", 9, 10, NULL, 0, &n), SL_RANGE_UNSATISFIABLE);
}

static void test_long_list(void **state)
{
    /* 2000 one-byte ranges in descending order; with a large max they stay apart, in that order. */
    enum { N = 2000 };
    static char buf[N * 16 + 16];
    static sl_byte_range r[N];
    size_t off = (size_t)snprintf(buf, sizeof buf, "bytes=");
    for (int k = N - 1; k >= 0; k--) off += (size_t)snprintf(buf + off, sizeof buf - off, "%d-%d,", 2 * k, 2 * k);
    size_t n;
    assert_int_equal(sl_range_parse(buf, off, 2 * N, r, N, &n), SL_RANGE_OK);
    assert_int_equal(n, N);
    for (size_t k = 0; k < N; k++) assert_true(r[k].first == 2 * (N - 1 - k) && r[k].last == r[k].first);
    assert_int_equal(sl_range_parse(buf, off, 2 * N, r, N - 1, &n), SL_RANGE_IGNORE);
}

static void test_long_whitespace(void **state)
{
    static char buf[70000];
    memcpy(buf, "bytes=1-2", 9);
    memset(buf + 9, ' ', sizeof buf - 9);
    sl_byte_range r[1];
    size_t n;
    assert_int_equal(sl_range_parse(buf, sizeof buf, 10, r, 1, &n), SL_RANGE_OK);
    assert_int_equal(n, 1);
}

/* ---- exhaustive cross-check against a naive reference ---- */

/* The reference: split on ',', trim OWS, classify each element with the grammar spelled out, and
 * mark selected bytes in a bitmap. Sizes stay below 64 and numbers in the alphabet below 2^32. */
static sl_range_result ref_parse(const char *set, uint64_t size, size_t max, sl_byte_range *out, size_t *n)
{
    char buf[64];
    uint64_t bitmap = 0;
    int specs = 0, stored = 0, satisfiable = 0;
    uint64_t spec_bits[64]; /* the bytes of each stored range-spec, in request order */
    *n = 0;
    snprintf(buf, sizeof buf, "%s", set);
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        char *s = p, *e = p + strlen(p);
        while (*s == ' ' || *s == '\t') s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
        *e = '\0';
        if (*s) {
            char *dash = strchr(s, '-');
            if (!dash) return SL_RANGE_IGNORE;
            size_t nd1 = strspn(s, "0123456789"), nd2 = strspn(dash + 1, "0123456789");
            if (s + nd1 != dash || dash[1 + nd2] != '\0') return SL_RANGE_IGNORE;
            if (nd1 == 0 && nd2 == 0) return SL_RANGE_IGNORE;
            specs++;
            uint64_t a = strtoull(s, NULL, 10), b = strtoull(dash + 1, NULL, 10);
            uint64_t lo, hi;
            if (nd1 == 0) {
                if (b == 0) goto next;
                satisfiable = 1;
                if (size == 0) goto next;
                lo = b >= size ? 0 : size - b;
                hi = size;
            } else {
                if (nd2 && b < a) return SL_RANGE_IGNORE;
                if (a >= size) goto next;
                satisfiable = 1;
                lo = a;
                hi = (nd2 && b < size) ? b + 1 : size;
            }
            spec_bits[stored] = 0;
            for (uint64_t k = lo; k < hi; k++) spec_bits[stored] |= 1ULL << k;
            bitmap |= spec_bits[stored];
            stored++;
        }
    next:
        if (!comma) break;
        p = comma + 1;
    }
    if (specs == 0) return SL_RANGE_IGNORE;
    if (!satisfiable) return SL_RANGE_UNSATISFIABLE;
    if ((size_t)stored > max || bitmap == 0) return SL_RANGE_IGNORE;
    /* The runs of selected bytes, in file order... */
    sl_byte_range runs[64];
    size_t nr = 0;
    for (uint64_t k = 0; k < size; k++) {
        if (!(bitmap >> k & 1)) continue;
        if (nr > 0 && runs[nr - 1].last + 1 == k) {
            runs[nr - 1].last = k;
        } else {
            runs[nr].first = runs[nr].last = k;
            nr++;
        }
    }
    /* ...each sent where the first range-spec with a byte in it stood. */
    for (int sp = 0; sp < stored; sp++) {
        for (size_t k = 0; k < nr; k++) {
            uint64_t mask = (runs[k].last - runs[k].first == 63 ? ~0ULL : ((1ULL << (runs[k].last - runs[k].first + 1)) - 1)) << runs[k].first;
            if (!(spec_bits[sp] & mask)) continue;
            bool seen = false;
            for (size_t j = 0; j < *n; j++) seen |= out[j].first == runs[k].first;
            if (!seen) out[(*n)++] = runs[k];
        }
    }
    return SL_RANGE_OK;
}

static void cross_check(const char *set, size_t setlen, uint64_t size, size_t max)
{
    char hdr[64];
    memcpy(hdr, "bytes=", 6);
    memcpy(hdr + 6, set, setlen);
    hdr[6 + setlen] = '\0';
    sl_byte_range got[8], want[64];
    size_t ngot = 99, nwant;
    sl_range_result rg = sl_range_parse(hdr, 6 + setlen, size, got, max, &ngot);
    sl_range_result rw = ref_parse(hdr + 6, size, max, want, &nwant);
    if (rg != rw || ngot != nwant) {
        print_error("mismatch for \"%s\" size %llu max %zu: got %d/%zu want %d/%zu\n", hdr,
                    (unsigned long long)size, max, rg, ngot, rw, nwant);
        fail();
    }
    for (size_t k = 0; k < ngot; k++) {
        if (got[k].first != want[k].first || got[k].last != want[k].last) {
            print_error("range %zu differs for \"%s\" size %llu\n", k, hdr, (unsigned long long)size);
            fail();
        }
    }
}

static void test_exhaustive_small(void **state)
{
    static const char alphabet[] = "0159-, ";
    enum { A = sizeof alphabet - 1, MAXLEN = 6 };
    char set[MAXLEN + 1];
    unsigned long checked = 0;
    for (int len = 0; len <= MAXLEN; len++) {
        unsigned long total = 1;
        for (int k = 0; k < len; k++) total *= A;
        for (unsigned long idx = 0; idx < total; idx++) {
            unsigned long x = idx;
            for (int k = 0; k < len; k++) {
                set[k] = alphabet[x % A];
                x /= A;
            }
            for (uint64_t size = 0; size <= 5; size++) {
                for (size_t max = 1; max <= 4; max += 3) {
                    cross_check(set, (size_t)len, size, max);
                    checked++;
                }
            }
        }
    }
    assert_true(checked > 1000000);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_first_last),
        cmocka_unit_test(test_open_ended),
        cmocka_unit_test(test_suffix),
        cmocka_unit_test(test_suffix_larger_than_size_is_whole),
        cmocka_unit_test(test_last_clipped_to_size),
        cmocka_unit_test(test_first_and_suffix_coalesce),
        cmocka_unit_test(test_request_order_kept),
        cmocka_unit_test(test_coalesced_in_place),
        cmocka_unit_test(test_overlapping_coalesced),
        cmocka_unit_test(test_adjacent_coalesced),
        cmocka_unit_test(test_whitespace_around_commas),
        cmocka_unit_test(test_whitespace_inside_spec_ignored),
        cmocka_unit_test(test_unit_case_insensitive),
        cmocka_unit_test(test_other_units_ignored),
        cmocka_unit_test(test_empty_set_ignored),
        cmocka_unit_test(test_empty_elements_tolerated),
        cmocka_unit_test(test_last_before_first_ignored),
        cmocka_unit_test(test_syntax_errors_ignored),
        cmocka_unit_test(test_embedded_nul_ignored),
        cmocka_unit_test(test_overflow_ignored),
        cmocka_unit_test(test_leading_zeros_are_not_overflow),
        cmocka_unit_test(test_huge_size),
        cmocka_unit_test(test_first_beyond_size_unsatisfiable),
        cmocka_unit_test(test_unsatisfiable_dropped_next_to_satisfiable),
        cmocka_unit_test(test_zero_suffix_unsatisfiable),
        cmocka_unit_test(test_size_zero),
        cmocka_unit_test(test_max_limit),
        cmocka_unit_test(test_max_zero),
        cmocka_unit_test(test_long_list),
        cmocka_unit_test(test_long_whitespace),
        cmocka_unit_test(test_exhaustive_small))
