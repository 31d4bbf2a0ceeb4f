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

/* A Range value, the representation's size, the result and the ranges it must give, in order
 * ("first-last ..."; none unless the result is SL_RANGE_OK). */
struct range_case {
    const char *spec;
    uint64_t size;
    sl_range_result result;
    const char *ranges;
};

#define OK(spec, size, ranges) {spec, size, SL_RANGE_OK, ranges}
#define IGNORED(spec, size) {spec, size, SL_RANGE_IGNORE, ""}
#define UNSATISFIABLE(spec, size) {spec, size, SL_RANGE_UNSATISFIABLE, ""}

static const struct range_case cases[] = {
    /* First last. */
    OK("bytes=0-499", 10000, "0-499"),
    OK("bytes=500-999", 10000, "500-999"),
    OK("bytes=0-0", 1, "0-0"),
    /* Open ended. */
    OK("bytes=500-", 10000, "500-9999"),
    OK("bytes=0-", 1, "0-0"),
    OK("bytes=9999-", 10000, "9999-9999"),
    /* Suffix. */
    OK("bytes=-500", 10000, "9500-9999"),
    OK("bytes=-1", 10000, "9999-9999"),
    OK("bytes=-10000", 10000, "0-9999"),
    /* Suffix larger than size is whole. */
    OK("bytes=-500", 100, "0-99"),
    OK("bytes=-18446744073709551615", 7, "0-6"),
    /* Last clipped to size. */
    OK("bytes=0-499", 100, "0-99"),
    OK("bytes=50-18446744073709551615", 100, "50-99"),
    /* First and suffix coalesce. */
    OK("bytes=0-0,-1", 1, "0-0"),
    OK("bytes=0-0,-1", 10, "0-0 9-9"),
    /* RFC 9110 §14.6: parts in the order the request asked for them. */
    OK("bytes=80-89,-5,0-9,40-49", 100, "80-89 95-99 0-9 40-49"),
    OK("bytes=50-59,0-9", 100, "50-59 0-9"),
    OK("bytes=-10,0-5", 100, "90-99 0-5"),
    /* A coalesced range stands where the earliest of its range-specs stood. */
    OK("bytes=0-9,50-59,5-14", 100, "0-14 50-59"),
    OK("bytes=50-59,0-9,10-19", 100, "50-59 0-19"),
    OK("bytes=50-59,0-9,30-39,5-35", 100, "50-59 0-39"),
    /* A late range joining two earlier ones: they fold into the first. */
    OK("bytes=70-79,0-9,20-29,10-19", 100, "70-79 0-29"),
    OK("bytes=20-29,70-79,0-9,5-24", 100, "0-29 70-79"),
    OK("bytes=90-,0-9,80-89,10-79", 100, "0-99"),
    /* Overlapping coalesced. */
    OK("bytes=0-10,5-20", 100, "0-20"),
    OK("bytes=5-20,0-10", 100, "0-20"),
    OK("bytes=0-99,10-20,30-", 100, "0-99"),
    OK("bytes=10-20,10-20,10-20", 100, "10-20"),
    /* Adjacent coalesced. */
    OK("bytes=0-9,10-19", 100, "0-19"),
    OK("bytes=10-19,0-9", 100, "0-19"),
    OK("bytes=0-49,-50", 100, "0-99"),
    /* A one-byte gap keeps them apart. */
    OK("bytes=0-9,11-19", 100, "0-9 11-19"),
    /* Whitespace around commas. */
    OK("bytes=0-1 , 5-6,\t8-9 \t", 100, "0-1 5-6 8-9"),
    OK(" \tbytes=0-1", 10, "0-1"),
    /* Whitespace inside spec ignored. */
    IGNORED("bytes=0 -1", 10),
    IGNORED("bytes=0- 1", 10),
    IGNORED("bytes=- 1", 10),
    IGNORED("bytes =0-1", 10),
    OK("bytes= 0-1", 10, "0-1"), /* OWS before the first list element is tolerated. */
    IGNORED("bytes=0-1 2-3", 10),
    /* Unit case insensitive. */
    OK("BYTES=0-1", 10, "0-1"),
    OK("Bytes=0-1", 10, "0-1"),
    OK("bYtEs=-2", 10, "8-9"),
    /* Other units ignored. */
    IGNORED("items=0-1", 10),
    IGNORED("byte=0-1", 10),
    IGNORED("bytesx=0-1", 10),
    IGNORED("bytes", 10),
    IGNORED("bytes:0-1", 10),
    IGNORED("", 10),
    IGNORED("0-1", 10),
    /* Empty set ignored. */
    IGNORED("bytes=", 10),
    IGNORED("bytes=,", 10),
    IGNORED("bytes= , ,", 10),
    /* Empty elements tolerated. */
    OK("bytes=,0-1,,5-6,", 10, "0-1 5-6"),
    /* Last before first ignored. */
    IGNORED("bytes=5-4", 10),
    /* Invalid anywhere in the list invalidates the whole header, even beyond size. */
    IGNORED("bytes=0-1,50-40", 10),
    IGNORED("bytes=0-1,50-40", 0),
    /* Syntax errors. */
    IGNORED("bytes=-", 10), IGNORED("bytes=--1", 10), IGNORED("bytes=1", 10),
    IGNORED("bytes=1--2", 10), IGNORED("bytes=a-b", 10), IGNORED("bytes=0-1x", 10),
    IGNORED("bytes=0x1-2", 10), IGNORED("bytes=+1-2", 10), IGNORED("bytes=1-+2", 10),
    IGNORED("bytes=1-2-3", 10), IGNORED("bytes=-1-2", 10), IGNORED("bytes=0-1;2-3", 10),
    IGNORED("bytes=\"0-1\"", 10), IGNORED("bytes=0-1,x", 10),
    /* Overflow ignored. */
    IGNORED("bytes=18446744073709551616-", 10),
    IGNORED("bytes=0-18446744073709551616", 10),
    IGNORED("bytes=-18446744073709551616", 10),
    IGNORED("bytes=99999999999999999999999999-", 10),
    /* The largest value is fine. */
    UNSATISFIABLE("bytes=18446744073709551615-", 10),
    OK("bytes=18446744073709551614-", UINT64_MAX, "18446744073709551614-18446744073709551614"),
    /* Leading zeros are not overflow. */
    OK("bytes=000000000000000000000000000000001-0000000000000000000000000002", 10, "1-2"),
    OK("bytes=-0000000000000000000000000000000003", 10, "7-9"),
    /* Huge size. */
    OK("bytes=-1", UINT64_MAX, "18446744073709551614-18446744073709551614"),
    OK("bytes=0-", UINT64_MAX, "0-18446744073709551614"),
    OK("bytes=0-18446744073709551615", UINT64_MAX, "0-18446744073709551614"),
    /* First beyond size unsatisfiable. */
    UNSATISFIABLE("bytes=10-", 10),
    UNSATISFIABLE("bytes=10-20", 10),
    UNSATISFIABLE("bytes=10-20,30-40,11-", 10),
    /* Unsatisfiable dropped next to satisfiable. */
    OK("bytes=50-60,0-1", 10, "0-1"),
    OK("bytes=-0,3-4", 10, "3-4"),
    /* Zero suffix unsatisfiable. */
    UNSATISFIABLE("bytes=-0", 10),
    UNSATISFIABLE("bytes=-000", 10),
    UNSATISFIABLE("bytes=-0,-0", 0),
    /* Size zero. */
    UNSATISFIABLE("bytes=0-", 0),
    UNSATISFIABLE("bytes=0-0", 0),
    UNSATISFIABLE("bytes=-0", 0),
    /* A non-zero suffix is satisfiable per RFC 9110 §14.1.2 but selects nothing: 200, not 416. */
    IGNORED("bytes=-1", 0),
    IGNORED("bytes=0-0,-5", 0),
};

static void test_cases(void **state)
{
    TU_EACH(c, cases) {
        sl_byte_range r[MAXR];
        size_t n = 99, k = 0;
        sl_range_result got = parse(c->spec, c->size, r, &n);
        if (got != c->result)
            fail_msg("\"%s\" (size %llu): result %d, want %d", c->spec, (unsigned long long)c->size,
                     got, c->result);
        for (const char *p = c->ranges; *p; k++) {
            char *e;
            unsigned long long a = strtoull(p, &e, 10), b = strtoull(e + 1, &e, 10);
            if (k >= n || r[k].first != a || r[k].last != b)
                fail_msg("\"%s\" (size %llu): range %zu is not %llu-%llu (n = %zu)", c->spec,
                         (unsigned long long)c->size, k, a, b, n);
            p = *e ? e + 1 : e;
        }
        if (n != k)
            fail_msg("\"%s\" (size %llu): %zu ranges, want %zu", c->spec,
                     (unsigned long long)c->size, n, k);
    }
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
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_embedded_nul_ignored),
        cmocka_unit_test(test_max_limit),
        cmocka_unit_test(test_max_zero),
        cmocka_unit_test(test_long_list),
        cmocka_unit_test(test_long_whitespace),
        cmocka_unit_test(test_exhaustive_small))
