/* cmocka tests for the loadgen body checksum (sum.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sum.h"

#include <string.h>

static uint64_t sum_of(const void *p, size_t len)
{
    struct sl_lg_sum s;
    sl_lg_sum_init(&s);
    sl_lg_sum_update(&s, p, len);
    return sl_lg_sum_final(&s);
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (uint8_t)(seed >> 16);
    }
}

static void test_split_points_do_not_matter(void **state)
{
    uint8_t buf[67];
    fill(buf, sizeof buf, 1);
    uint64_t whole = sum_of(buf, sizeof buf);
    for (size_t a = 0; a <= sizeof buf; a++) {
        for (size_t b = a; b <= sizeof buf; b++) {
            struct sl_lg_sum s;
            sl_lg_sum_init(&s);
            sl_lg_sum_update(&s, buf, a);
            sl_lg_sum_update(&s, buf + a, b - a);
            sl_lg_sum_update(&s, buf + b, sizeof buf - b);
            assert_true(sl_lg_sum_final(&s) == whole);
        }
    }
}

static void test_byte_at_a_time(void **state)
{
    uint8_t buf[1000];
    fill(buf, sizeof buf, 7);
    struct sl_lg_sum s;
    sl_lg_sum_init(&s);
    for (size_t i = 0; i < sizeof buf; i++)
        sl_lg_sum_update(&s, buf + i, 1);
    assert_true(sl_lg_sum_final(&s) == sum_of(buf, sizeof buf));
}

static void test_every_single_bit_flip_changes_sum(void **state)
{
    uint8_t buf[45];
    fill(buf, sizeof buf, 3);
    uint64_t ref = sum_of(buf, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_true(sum_of(buf, sizeof buf) != ref);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

static void test_length_matters(void **state)
{
    uint8_t zeros[16] = {0};
    for (size_t n = 0; n < sizeof zeros; n++)
        assert_true(sum_of(zeros, n) != sum_of(zeros, n + 1));
}

static void test_final_does_not_consume(void **state)
{
    struct sl_lg_sum s;
    sl_lg_sum_init(&s);
    sl_lg_sum_update(&s, "abc", 3);
    uint64_t first = sl_lg_sum_final(&s);
    assert_true(sl_lg_sum_final(&s) == first);
    sl_lg_sum_update(&s, "defghijklm", 10);
    assert_true(sl_lg_sum_final(&s) == sum_of("abcdefghijklm", 13));
}

static void test_swapped_words_differ(void **state)
{
    const char *a = "AAAAAAAABBBBBBBB", *b = "BBBBBBBBAAAAAAAA";
    assert_true(sum_of(a, 16) != sum_of(b, 16));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_points_do_not_matter),
        cmocka_unit_test(test_byte_at_a_time),
        cmocka_unit_test(test_every_single_bit_flip_changes_sum),
        cmocka_unit_test(test_length_matters),
        cmocka_unit_test(test_final_does_not_consume),
        cmocka_unit_test(test_swapped_words_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
