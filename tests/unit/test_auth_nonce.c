/* Unit tests for modules/auth_nonce.c: nonces made and checked (fresh, stale, from the future,
 * forged, of another realm or secret, malformed), and the replay table (counts must rise, a
 * full table drops its oldest nonce and refuses everything as old from then on, a forked
 * process shares the table). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth_nonce.h"

#define NOW 1800000000LL

static void test_make_and_check(void **state)
{
    char n[SL_NONCE_MAX];
    sl_nonce got;
    sl_nonce_make("R", NULL, NOW, n);
    assert_true(strlen(n) < SL_NONCE_MAX);
    assert_int_equal(sl_nonce_check(n, "R", NULL, NOW, &got), 0);
    assert_int_equal(got.ts, NOW);
    assert_int_equal(sl_nonce_check(n, "R", NULL, NOW + SL_NONCE_LIFE, &got), 0);
    assert_int_equal(sl_nonce_check(n, "R", NULL, NOW + SL_NONCE_LIFE + 1, &got), -ESTALE);
    assert_int_equal(sl_nonce_check(n, "R", NULL, NOW - 10, &got), -ESTALE); /* from the future */
    assert_int_equal(sl_nonce_check(n, "other realm", NULL, NOW, &got), -EINVAL);
    assert_int_equal(sl_nonce_check(n, "R", "a secret", NOW, &got), -EINVAL);
    /* a rule's secret */
    sl_nonce_make("R", "a secret", NOW, n);
    assert_int_equal(sl_nonce_check(n, "R", "a secret", NOW, &got), 0);
    assert_int_equal(sl_nonce_check(n, "R", NULL, NOW, &got), -EINVAL);
    /* one character changed anywhere: not ours */
    for (size_t i = 0; n[i]; i++) {
        char m[SL_NONCE_MAX];
        strcpy(m, n);
        if (m[i] == ':') continue;
        m[i] = m[i] == '0' ? '1' : '0';
        assert_int_equal(sl_nonce_check(m, "R", "a secret", NOW, &got), -EINVAL);
    }
    static const char *const bad[] = {"", ":", "1:2:3", "x", "6b09800f:b8c376db:",
                                      "6B09800F:b8c376db:02450c0f35baab19053402736be3861a",
                                      "6b09800f:b8c376db:02450c0f35baab19053402736be3861a0",
                                      "11111111111111111:b8c376db:02450c0f35baab19053402736be3861a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(sl_nonce_check(bad[i], "R", NULL, NOW, &got), -EINVAL);
}

static sl_nonce fresh(int64_t ts)
{
    char n[SL_NONCE_MAX];
    sl_nonce got;
    sl_nonce_make("R", NULL, ts, n);
    assert_int_equal(sl_nonce_check(n, "R", NULL, ts, &got), 0);
    return got;
}

static void test_counts_rise(void **state)
{
    sl_nonce a = fresh(NOW), b = fresh(NOW);
    assert_true(sl_nonce_use(&a, 1, NOW));
    assert_false(sl_nonce_use(&a, 1, NOW)); /* replayed */
    assert_true(sl_nonce_use(&a, 2, NOW));
    assert_true(sl_nonce_use(&a, 7, NOW));
    assert_false(sl_nonce_use(&a, 5, NOW));
    assert_true(sl_nonce_use(&b, 1, NOW)); /* another nonce counts on its own */
    /* without qop there is no count (0): a nonce is good once */
    sl_nonce c = fresh(NOW);
    assert_true(sl_nonce_use(&c, 0, NOW));
    assert_false(sl_nonce_use(&c, 0, NOW));
}

static void test_full_table_drops_oldest_and_refuses_as_old(void **state)
{
    /* The table of this test has 8 slots, all probed by every nonce. */
    sl_nonce n[8];
    for (int i = 0; i < 8; i++) {
        n[i] = fresh(NOW + 100 + i);
        assert_true(sl_nonce_use(&n[i], 1, NOW + 100 + i));
    }
    /* a ninth, newer: the oldest (ts NOW+100) goes */
    sl_nonce x = fresh(NOW + 200);
    assert_true(sl_nonce_use(&x, 1, NOW + 200));
    /* the dropped one cannot come back, and nothing as old either */
    assert_false(sl_nonce_use(&n[0], 2, NOW + 200));
    sl_nonce old = fresh(NOW + 100);
    assert_false(sl_nonce_use(&old, 1, NOW + 200));
    /* those kept still count on */
    assert_true(sl_nonce_use(&n[7], 2, NOW + 200));
    assert_false(sl_nonce_use(&n[7], 2, NOW + 200));
    /* expired entries are room again */
    int64_t later = NOW + 200 + SL_NONCE_LIFE + 1;
    sl_nonce y = fresh(later);
    assert_true(sl_nonce_use(&y, 1, later));
}

static void test_forked_process_shares_the_table(void **state)
{
    sl_nonce a = fresh(NOW + 5000);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(sl_nonce_use(&a, 3, NOW + 5000) ? 0 : 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the child's use is seen here */
    assert_false(sl_nonce_use(&a, 3, NOW + 5000));
    assert_true(sl_nonce_use(&a, 4, NOW + 5000));
}

/* The eviction test gets a table of its own, of 8 slots; the others share one of the default
 * size. */
static int setup(void **state)
{
    sl_nonce_fini();
    return sl_nonce_init(8);
}

static int teardown(void **state)
{
    sl_nonce_fini();
    return sl_nonce_init(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_and_check),
        cmocka_unit_test(test_counts_rise),
        cmocka_unit_test_setup_teardown(test_full_table_drops_oldest_and_refuses_as_old, setup, teardown),
        cmocka_unit_test(test_forked_process_shares_the_table),
    };
    if (sl_nonce_init(0) < 0) return 1;
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    sl_nonce_fini();
    return r;
}
