/* The residency memo: what it trusts, for how long, what makes a file another file, and how
 * audits move the trust time. Times are the caller's, so no test waits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "resmemo.h"

static sl_file_id file(uint64_t ino)
{
    sl_file_id id = {.dev = 2049, .ino = ino, .size = 102400, .ctime_ns = 1700000000123456789};
    return id;
}

static uint64_t trust_ms(const sl_resmemo *m)
{
    sl_resmemo_stats st;
    sl_resmemo_get_stats(m, &st);
    return st.trust_ms;
}

static void test_trusted_for_the_trust_time_then_asked_again(void **state)
{
    sl_resmemo *m = sl_resmemo_new(8);
    sl_file_id a = file(42);
    assert_false(sl_resmemo_trust(m, &a, 1000));
    sl_resmemo_note(m, &a, 1000, true, true);
    assert_true(sl_resmemo_trust(m, &a, 1000));
    assert_true(sl_resmemo_trust(m, &a, 1000 + SL_RESMEMO_TRUST_MS - 1));
    assert_false(sl_resmemo_trust(m, &a, 1000 + SL_RESMEMO_TRUST_MS));
    sl_resmemo_stats st;
    sl_resmemo_get_stats(m, &st);
    assert_int_equal(st.trusted, 2);
    sl_resmemo_free(m);
}

static void test_only_a_whole_file_found_cached_is_remembered(void **state)
{
    sl_resmemo *m = sl_resmemo_new(8);
    sl_file_id a = file(42);
    sl_resmemo_note(m, &a, 1000, false, true); /* a part of it was cached: says nothing */
    assert_false(sl_resmemo_trust(m, &a, 1001));
    sl_resmemo_note(m, &a, 1000, true, true);
    assert_true(sl_resmemo_trust(m, &a, 1001));
    sl_resmemo_note(m, &a, 1002, false, false); /* any part found missing: forgotten */
    assert_false(sl_resmemo_trust(m, &a, 1003));
    sl_resmemo_free(m);
}

static void test_a_changed_file_is_another_file(void **state)
{
    sl_resmemo *m = sl_resmemo_new(8);
    sl_file_id a = file(42);
    sl_resmemo_note(m, &a, 5000, true, true);
    sl_file_id b = a;
    b.ctime_ns++; /* rewritten in place */
    assert_false(sl_resmemo_trust(m, &b, 5001));
    b = a;
    b.size = 4096; /* truncated */
    assert_false(sl_resmemo_trust(m, &b, 5001));
    b = a;
    b.dev = 2050; /* same inode number on another file system */
    assert_false(sl_resmemo_trust(m, &b, 5001));
    /* A note that another file is not cached leaves a's entry alone. */
    b = a;
    b.ctime_ns++;
    sl_resmemo_note(m, &b, 5001, true, false);
    assert_true(sl_resmemo_trust(m, &a, 5001));
    sl_resmemo_free(m);
}

static void test_unknown_files_and_no_memo(void **state)
{
    sl_resmemo *m = sl_resmemo_new(8);
    sl_file_id unknown = file(0), a = file(7);
    sl_resmemo_note(m, &unknown, 7000, true, true);
    assert_false(sl_resmemo_trust(m, &unknown, 7000)); /* never remembered */
    assert_false(sl_resmemo_trust(NULL, &a, 7000));
    sl_resmemo_note(NULL, &a, 7000, true, true); /* harmless */
    sl_resmemo_free(m);
}

/* One trusted answer in SL_RESMEMO_AUDIT_EVERY is withheld so the kernel is asked; an audit
 * that finds pages gone halves the trust time, clean ones in a row double it, within bounds. */
static void test_audits_move_the_trust_time(void **state)
{
    sl_resmemo *m = sl_resmemo_new(8);
    sl_file_id a = file(42);
    uint64_t now = 10000;
    sl_resmemo_note(m, &a, now, true, true);
    unsigned trusted = 0;
    for (unsigned i = 0; i < SL_RESMEMO_AUDIT_EVERY - 1; i++) trusted += sl_resmemo_trust(m, &a, now);
    assert_int_equal(trusted, SL_RESMEMO_AUDIT_EVERY - 1);
    assert_false(sl_resmemo_trust(m, &a, now)); /* the audit: ask the kernel */
    sl_resmemo_note(m, &a, now, true, false);   /* which found pages gone */
    assert_int_equal(trust_ms(m), SL_RESMEMO_TRUST_MS / 2);
    sl_resmemo_stats st;
    sl_resmemo_get_stats(m, &st);
    assert_int_equal(st.audits, 1);
    assert_int_equal(st.misses, 1);
    assert_false(sl_resmemo_trust(m, &a, now)); /* and the file was forgotten */
    /* Misses never take it below the minimum. */
    for (int k = 0; k < 20; k++) {
        sl_resmemo_note(m, &a, now, true, true);
        while (sl_resmemo_trust(m, &a, now)) {
        }
        sl_resmemo_note(m, &a, now, true, false);
    }
    assert_int_equal(trust_ms(m), SL_RESMEMO_TRUST_MIN_MS);
    /* Clean audits in a row double it, up to the maximum. */
    for (int k = 0; k < 40 * SL_RESMEMO_AUDITS_TO_GROW; k++) {
        sl_resmemo_note(m, &a, now, true, true);
        while (sl_resmemo_trust(m, &a, now)) {
        }
        sl_resmemo_note(m, &a, now, true, true);
    }
    assert_int_equal(trust_ms(m), SL_RESMEMO_TRUST_MAX_MS);
    /* A note for another file does not settle a pending audit. */
    sl_file_id b = file(43);
    while (sl_resmemo_trust(m, &a, now)) {
    }
    sl_resmemo_get_stats(m, &st);
    uint64_t audits = st.audits;
    sl_resmemo_note(m, &b, now, true, false);
    sl_resmemo_get_stats(m, &st);
    assert_int_equal(st.audits, audits);
    assert_int_equal(trust_ms(m), SL_RESMEMO_TRUST_MAX_MS);
    sl_resmemo_free(m);
}

/* 2^4 slots and 64 consecutive inodes: files share sets, a newer one takes a slot, and a
 * look-up never answers for a file with another's entry. */
static void test_slots_shared_never_confuse_files(void **state)
{
    sl_resmemo *m = sl_resmemo_new(4);
    for (uint64_t i = 1; i <= 64; i++) {
        sl_file_id id = file(i);
        sl_resmemo_note(m, &id, 100, true, true);
    }
    unsigned fresh = 0;
    for (uint64_t i = 1; i <= 64; i++) {
        sl_file_id id = file(i);
        fresh += sl_resmemo_trust(m, &id, 101);
    }
    assert_true(fresh >= 1 && fresh <= 16);
    sl_file_id last = file(64); /* the last one noted is always in */
    assert_true(sl_resmemo_trust(m, &last, 101));
    /* Consecutive inodes spread: 16 of them land in more than a few of 16 slots. */
    sl_resmemo *m2 = sl_resmemo_new(4);
    for (uint64_t i = 1000; i < 1016; i++) {
        sl_file_id id = file(i);
        sl_resmemo_note(m2, &id, 100, true, true);
    }
    unsigned kept = 0;
    for (uint64_t i = 1000; i < 1016; i++) {
        sl_file_id id = file(i);
        kept += sl_resmemo_trust(m2, &id, 101);
    }
    assert_true(kept >= 6);
    sl_resmemo_free(m);
    sl_resmemo_free(m2);
}

/* One set (2^2 slots): four files are all kept; a fifth takes the slot of the one found resident
 * longest ago, not of one just found so. */
static void test_a_full_set_gives_up_the_file_found_resident_longest_ago(void **state)
{
    sl_resmemo *m = sl_resmemo_new(2);
    for (uint64_t i = 1; i <= 4; i++) {
        sl_file_id id = file(i);
        sl_resmemo_note(m, &id, 100 + i, true, true);
    }
    for (uint64_t i = 1; i <= 4; i++) {
        sl_file_id id = file(i);
        assert_true(sl_resmemo_trust(m, &id, 110));
    }
    sl_file_id a = file(1), b = file(2), e = file(5);
    sl_resmemo_note(m, &a, 111, true, true); /* 1 found resident again: now 2 is the oldest */
    sl_resmemo_note(m, &e, 112, true, true);
    assert_true(sl_resmemo_trust(m, &e, 113));
    assert_false(sl_resmemo_trust(m, &b, 113));
    for (uint64_t i = 1; i <= 4; i++) {
        if (i == 2) continue;
        sl_file_id id = file(i);
        assert_true(sl_resmemo_trust(m, &id, 113));
    }
    /* A file found not resident frees its slot for the next newcomer, whatever its age. */
    sl_file_id c = file(3), f = file(6);
    sl_resmemo_note(m, &c, 114, true, false);
    assert_false(sl_resmemo_trust(m, &c, 115));
    sl_resmemo_note(m, &f, 115, true, true);
    assert_true(sl_resmemo_trust(m, &f, 116));
    assert_true(sl_resmemo_trust(m, &a, 116));
    sl_resmemo_free(m);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_a_full_set_gives_up_the_file_found_resident_longest_ago),
        cmocka_unit_test(test_trusted_for_the_trust_time_then_asked_again),
        cmocka_unit_test(test_only_a_whole_file_found_cached_is_remembered),
        cmocka_unit_test(test_a_changed_file_is_another_file),
        cmocka_unit_test(test_unknown_files_and_no_memo),
        cmocka_unit_test(test_audits_move_the_trust_time),
        cmocka_unit_test(test_slots_shared_never_confuse_files))
