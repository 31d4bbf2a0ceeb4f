/* The bandwidth limiter's token bucket (bwlimit.h): what a bucket holds, how long a sender
 * waits, that a long run keeps the rate, that reservations queue waiters in turn and that loops
 * sharing a bucket lose no update. Time is passed in, so no test sleeps. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "bwlimit.h"

#define SEC 1000000000ull
#define T0 (5000 * SEC) /* a CLOCK_MONOTONIC-like start */

static sl_bucket bucket(uint64_t kb)
{
    sl_bucket b;
    memset(&b, 0, sizeof b);
    sl_bucket_set_rate(&b, kb * 1024);
    return b;
}

static void test_quantum_and_burst_follow_the_rate(void **state)
{
    (void)state;
    sl_bucket b = bucket(200); /* 204800 B/s */
    assert_int_equal(b.quantum, 6400);
    assert_int_equal(b.burst, 25600);
    b = bucket(1); /* the floor: sends of at least 512 bytes */
    assert_int_equal(b.quantum, 512);
    assert_int_equal(b.burst, 512);
    b = bucket(65535); /* the ceiling: no grant beyond 256 KiB at once */
    assert_int_equal(b.quantum, 256 * 1024);
    assert_int_equal(b.burst, 65535 * 1024 / 8);
}

static void test_a_new_bucket_is_full_and_refills_at_the_rate(void **state)
{
    (void)state;
    sl_bucket b = bucket(200);
    assert_int_equal(sl_bucket_avail(&b, T0), 25600);
    assert_int_equal(sl_bucket_wait(&b, T0, 25600), 0);
    sl_bucket_charge(&b, T0, 25600);
    assert_int_equal(sl_bucket_avail(&b, T0), 0);
    /* 1/16 s brings 12800 bytes, 1/8 s the whole burst, and never more. */
    assert_int_equal(sl_bucket_avail(&b, T0 + SEC / 16), 12800);
    assert_int_equal(sl_bucket_avail(&b, T0 + SEC / 8), 25600);
    assert_int_equal(sl_bucket_avail(&b, T0 + 10 * SEC), 25600);
}

static void test_the_wait_ends_exactly_when_the_bytes_are_there(void **state)
{
    (void)state;
    sl_bucket b = bucket(200);
    sl_bucket_charge(&b, T0, 25600);
    uint64_t w = sl_bucket_wait(&b, T0, b.quantum);
    assert_true(w > 0);
    assert_true(w <= SEC * 6400 / 204800 + 1);
    assert_true(sl_bucket_avail(&b, T0 + w) >= b.quantum);
    assert_true(sl_bucket_avail(&b, T0 + w - 1) < b.quantum);
    /* More than the burst never fits: the wait is for the burst. */
    assert_int_equal(sl_bucket_wait(&b, T0, 1 << 30), sl_bucket_wait(&b, T0, 25600));
}

static void test_an_overshoot_is_a_debt(void **state)
{
    (void)state;
    sl_bucket b = bucket(100); /* 102400 B/s, burst 12800 */
    sl_bucket_charge(&b, T0, 12800 + 102400); /* a whole second more than it held */
    assert_int_equal(sl_bucket_avail(&b, T0 + SEC / 2), 0);
    assert_true(sl_bucket_wait(&b, T0, 512) > SEC);
    assert_int_equal(sl_bucket_avail(&b, T0 + SEC + SEC / 8), 12800);
}

/* A sender that always takes what is there, at least a quantum, and sleeps in between: over 10
 * simulated seconds it sends the rate times the time plus one burst, no more. */
static void test_a_long_run_keeps_the_rate(void **state)
{
    (void)state;
    sl_bucket b = bucket(300);
    uint64_t now = T0, sent = 0, sends = 0;
    while (now < T0 + 10 * SEC) {
        uint64_t w = sl_bucket_wait(&b, now, b.quantum);
        if (w) {
            now += w;
            continue;
        }
        uint64_t n = sl_bucket_avail(&b, now);
        sl_bucket_charge(&b, now, n);
        sent += n;
        sends++;
    }
    uint64_t want = 300 * 1024 * 10 + b.burst;
    assert_true(sent <= want + b.quantum);
    assert_true(sent >= want - b.quantum);
    assert_true(sends >= 300); /* small sends, no second-long bursts */
}

static void test_reservations_queue_waiters_in_turn(void **state)
{
    (void)state;
    sl_bucket b = bucket(200);
    sl_bucket_charge(&b, T0, b.burst); /* empty */
    uint64_t q = b.quantum, tq = SEC * q / (200 * 1024), a1, a2, a3;
    sl_bucket_reserve(&b, T0, q, &a1);
    sl_bucket_reserve(&b, T0, q, &a2);
    sl_bucket_reserve(&b, T0, q, &a3);
    assert_true(a1 > T0 && a1 <= T0 + tq + 1);
    assert_true(a2 >= a1 + tq && a2 <= a1 + tq + 1);
    assert_true(a3 >= a2 + tq && a3 <= a2 + tq + 1);
    /* The second gives its bytes back unsent: the next waiter lines up where the third ends,
     * minus what came back. */
    sl_bucket_refund(&b, q);
    uint64_t a4;
    sl_bucket_reserve(&b, T0, q, &a4);
    assert_true(a4 >= a3 - 1 && a4 <= a3 + 1);
    /* A full bucket lets a reservation go at once. */
    sl_bucket c = bucket(200);
    sl_bucket_reserve(&c, T0, c.quantum, &a1);
    assert_true(a1 <= T0);
}

/* Two senders share one bucket by reserving their next quantum and waiting for its time: over
 * 4 simulated seconds they get the rate between them, half each. */
static void test_two_senders_share_a_bucket_evenly(void **state)
{
    (void)state;
    sl_bucket b = bucket(256);
    uint64_t at[2] = {0, 0}, got[2] = {0, 0}, res[2] = {0, 0};
    uint64_t now = T0;
    while (now < T0 + 4 * SEC) {
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < 2; i++) {
            if (!res[i]) {
                res[i] = b.quantum;
                sl_bucket_reserve(&b, now, res[i], &at[i]);
            }
            if (at[i] <= now) {
                got[i] += res[i];
                res[i] = 0;
                next = now;
            } else if (at[i] < next) {
                next = at[i];
            }
        }
        now = next > now ? next : now + 1;
    }
    uint64_t total = got[0] + got[1], want = 256 * 1024 * 4 + b.burst;
    assert_true(total <= want + 2 * b.quantum);
    assert_true(total >= want - 2 * b.quantum);
    assert_true(got[0] >= total / 2 - b.quantum && got[0] <= total / 2 + b.quantum);
}

#define THREADS 4
#define ROUNDS 20000

static void *reserver(void *arg)
{
    sl_bucket *b = arg;
    uint64_t at;
    for (int i = 0; i < ROUNDS; i++) sl_bucket_reserve(b, 0, 1000, &at);
    return NULL;
}

static void test_loops_sharing_a_bucket_lose_no_update(void **state)
{
    (void)state;
    sl_bucket b = bucket(1000); /* 1024000 B/s: 1000 bytes are 976563 ns, rounded up */
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, reserver, &b), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    assert_int_equal(b.tat, (uint64_t)THREADS * ROUNDS * 976563);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_quantum_and_burst_follow_the_rate),
        cmocka_unit_test(test_a_new_bucket_is_full_and_refills_at_the_rate),
        cmocka_unit_test(test_the_wait_ends_exactly_when_the_bytes_are_there),
        cmocka_unit_test(test_an_overshoot_is_a_debt),
        cmocka_unit_test(test_a_long_run_keeps_the_rate),
        cmocka_unit_test(test_reservations_queue_waiters_in_turn),
        cmocka_unit_test(test_two_senders_share_a_bucket_evenly),
        cmocka_unit_test(test_loops_sharing_a_bucket_lose_no_update))
