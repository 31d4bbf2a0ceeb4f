/* Unit tests for the inline-lookup policy: when lookups that missed the dentry cache may run on
 * the event loop, and how one slow inline lookup sends them back to the threads; and when a
 * lookup off the loop goes to the ring rather than a stat thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testutil.h"

#include "lookup.h"

#define US 1000ull
#define SEC 1000000000ull

static void feed(sl_lookup_policy *p, unsigned n, uint64_t ns, bool slept, bool on_loop,
                 uint64_t now)
{
    for (unsigned i = 0; i < n; i++) sl_lookup_sample(p, ns, slept, on_loop, now);
}

static void test_threads_until_enough_fast_samples(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    assert_false(sl_lookup_inline(&p, 0));
    feed(&p, SL_LOOKUP_MIN_SAMPLES - 1, 5 * US, false, false, 0);
    assert_false(sl_lookup_inline(&p, 0)); /* too few to judge */
    feed(&p, 1, 5 * US, false, false, 0);
    assert_true(sl_lookup_inline(&p, 0));
}

static void test_slow_thread_lookups_keep_threads(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    /* A cold pool: every lookup reads the disk (it sleeps, on a thread). */
    feed(&p, 100, 400 * US, true, false, 0);
    assert_false(sl_lookup_inline(&p, 0));
    /* A few fast ones among them do not tip it. */
    feed(&p, 3, 4 * US, false, false, 0);
    assert_false(sl_lookup_inline(&p, 0));
    /* Nor does a short sleep: it counts as a slow one. */
    feed(&p, 1, 1 * US, true, false, 0);
    assert_true(p.avg_ns > SL_LOOKUP_FAST_NS);
}

static void test_one_slow_inline_lookup_holds_threads(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    feed(&p, 32, 5 * US, false, false, 10 * SEC);
    assert_true(sl_lookup_inline(&p, 10 * SEC));
    sl_lookup_sample(&p, 5 * US, false, true, 10 * SEC);
    assert_true(sl_lookup_inline(&p, 10 * SEC));
    /* One that slept (read the disk): the average alone would still say fast, the hold does
     * not. */
    sl_lookup_sample(&p, 150 * US, true, true, 10 * SEC);
    assert_int_equal(p.slow_inline, 1);
    assert_int_equal(p.inline_count, 2);
    assert_false(sl_lookup_inline(&p, 10 * SEC));
    assert_false(sl_lookup_inline(&p, 10 * SEC + SL_LOOKUP_HOLD_NS - 1));
    /* After the hold the average decides: the slow sample moved it, fast thread samples bring
     * it back. */
    feed(&p, 40, 5 * US, false, false, 11 * SEC);
    assert_true(sl_lookup_inline(&p, 10 * SEC + SL_LOOKUP_HOLD_NS));
}

static void test_preemption_is_not_a_slow_lookup(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    feed(&p, 32, 5 * US, false, false, 0);
    /* Long wall times without a sleep: the thread was preempted (the scheduler ran the loop or
     * a neighbour), the lookup itself stayed in memory. Inline stays on, no hold. */
    feed(&p, 64, 3000 * US, false, true, 0);
    assert_int_equal(p.slow_inline, 0);
    assert_true(sl_lookup_inline(&p, 0));
    /* More than about one lookup in ten sleeping: off. */
    for (int i = 0; i < 40; i++) sl_lookup_sample(&p, 300 * US, i % 4 == 0, false, 0);
    assert_false(sl_lookup_inline(&p, 0));
}

static void test_average_is_weighted(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    sl_lookup_sample(&p, 800 * US, true, false, 0);
    assert_int_equal(p.avg_ns, 800 * US); /* the first sample is the average */
    sl_lookup_sample(&p, 0, false, false, 0);
    assert_int_equal(p.avg_ns, 700 * US); /* one eighth of the way to the new sample */
    sl_lookup_sample(&p, 1, true, false, 0); /* a sleep counts as SL_LOOKUP_SLOW_NS at least */
    assert_int_equal(p.avg_ns, 700 * US - 700 * US / 8 + SL_LOOKUP_SLOW_NS / 8);
}

/* The ring is chosen while at least half of the last 64 files were small: threads from the start,
 * the ring after 32 small files, threads again once more than 32 of the last 64 were large, and
 * nothing older than 64 files counts. */
static void test_ring_while_half_the_recent_files_are_small(void **state)
{
    (void)state;
    sl_lookup_policy p = {0};
    assert_false(sl_lookup_prefer_ring(&p));
    for (int i = 0; i < 31; i++) sl_lookup_note_size(&p, true);
    assert_false(sl_lookup_prefer_ring(&p));
    sl_lookup_note_size(&p, true);
    assert_true(sl_lookup_prefer_ring(&p));
    for (int i = 0; i < 32; i++) sl_lookup_note_size(&p, false); /* 32 small, 32 large */
    assert_true(sl_lookup_prefer_ring(&p));
    sl_lookup_note_size(&p, false); /* the oldest small one leaves: 31 of 64 */
    assert_false(sl_lookup_prefer_ring(&p));
    for (int i = 0; i < 64; i++) sl_lookup_note_size(&p, i % 2 == 0);
    assert_true(sl_lookup_prefer_ring(&p)); /* exactly half */
    for (int i = 0; i < 64; i++) sl_lookup_note_size(&p, i % 4 == 0);
    assert_false(sl_lookup_prefer_ring(&p));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_threads_until_enough_fast_samples),
        cmocka_unit_test(test_slow_thread_lookups_keep_threads),
        cmocka_unit_test(test_one_slow_inline_lookup_holds_threads),
        cmocka_unit_test(test_preemption_is_not_a_slow_lookup),
        cmocka_unit_test(test_average_is_weighted),
        cmocka_unit_test(test_ring_while_half_the_recent_files_are_small))
