/* The open-file cache (io/fdcache.c) on a real directory: hits, every kind of change seen
 * through inotify (content, attributes, replacement, deletion, a directory renamed above the
 * file, a write through another name of the file), each file's own watch (shared by its hard
 * links, removed with its last entry, its neighbours untouched by its changes), the simple
 * engine's once-a-second check, eviction that never closes a held file, the one-millisecond bound
 * on reading the event queue, resting while caching is futile, and a rest's closes and watch
 * removals paid a few per lookup, never all at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "fdcache.h"

static char root[] = "/tmp/sl_fdc_XXXXXX";
static int dirfd_;

static int setup(void **state)
{
    assert_non_null(mkdtemp(root));
    tu_mkdir(root, "d", 0755);
    tu_mkdir(root, "d/e", 0755);
    dirfd_ = open(root, O_PATH | O_DIRECTORY);
    return dirfd_ < 0;
}

static int teardown(void **state)
{
    close(dirfd_);
    return tu_rmtree(root);
}

/* Open rel and offer it; returns the held entry (or NULL). */
static sl_fdc_entry *offer(sl_fdc *c, const char *rel, uint64_t now)
{
    int fd = openat(dirfd_, rel, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char path[512];
    snprintf(path, sizeof path, "/%s", rel);
    sl_fdc_entry *e = sl_fdc_put(c, dirfd_, root, 1, path, strlen(path), rel, fd, &st, now, 0);
    if (!e) close(fd);
    return e;
}

static sl_fdc_entry *get(sl_fdc *c, const char *rel, uint64_t now)
{
    char path[512];
    snprintf(path, sizeof path, "/%s", rel);
    sl_fdc_drain(c);
    return sl_fdc_get(c, dirfd_, 1, path, strlen(path), now);
}

/* rel written with data, then offered to the cache at time now (and released). */
static void cached(sl_fdc *c, const char *rel, const char *data, uint64_t now)
{
    tu_put(root, rel, data);
    sl_fdc_entry *e = offer(c, rel, now);
    if (!e) fail_msg("%s: not cached", rel);
    sl_fdc_release(c, e);
}

/* Directory dir made and n files in it cached one after another: dir/PREFIX0, dir/PREFIX1... */
static void cache_many(sl_fdc *c, const char *dir, const char *prefix, int n)
{
    tu_mkdir(root, dir, 0755);
    char rel[128];
    for (int i = 0; i < n; i++) {
        snprintf(rel, sizeof rel, "%s/%s%d", dir, prefix, i);
        cached(c, rel, "x", 1);
    }
}

/* A lookup of rel at time now is a hit (the entry is released). */
static void expect_hit(sl_fdc *c, const char *rel, uint64_t now)
{
    sl_fdc_entry *e = get(c, rel, now);
    if (!e) fail_msg("%s: a miss", rel);
    sl_fdc_release(c, e);
}

/* Cached, then changed by `change`: the next lookup misses. */
static void expect_change_seen(sl_fdc *c, const char *rel, void (*change)(void))
{
    cached(c, rel, "one", 1);
    expect_hit(c, rel, 1);
    change();
    assert_null(get(c, rel, 1));
}

static void append(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/d/e/f.txt", root);
    FILE *f = fopen(p, "a");
    fputs("more", f);
    fclose(f);
}

static void touch_it(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/d/e/f.txt", root);
    chmod(p, 0600);
}

static void replace(void)
{
    tu_put(root, "d/e/new.tmp", "two");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/d/e/new.tmp", root);
    snprintf(b, sizeof b, "%s/d/e/f.txt", root);
    assert_int_equal(rename(a, b), 0);
}

static void delete(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/d/e/f.txt", root);
    assert_int_equal(unlink(p), 0);
}

static void rename_above(void)
{
    /* d/e/f.txt moves away with its directory; the path now leads to nothing (or to another
     * file, if a new d/e appears). */
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/d/e", root);
    snprintf(b, sizeof b, "%s/d/moved", root);
    assert_int_equal(rename(a, b), 0);
    assert_int_equal(rename(b, a), 0);
}

static void test_inotify_sees_every_change(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    assert_non_null(c);
    assert_int_equal(sl_fdc_mode_of(c), SL_FDC_INOTIFY);
    expect_change_seen(c, "d/e/f.txt", append);
    expect_change_seen(c, "d/e/f.txt", touch_it);
    expect_change_seen(c, "d/e/f.txt", replace);
    expect_change_seen(c, "d/e/f.txt", delete);
    expect_change_seen(c, "d/e/f.txt", rename_above);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.hits >= 5);
    assert_true(st.invalidations >= 5);
    sl_fdc_free(c);
}

static void test_simple_checks_once_a_second(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_SIMPLE, 64);
    cached(c, "s.txt", "one", 100000);
    tu_put(root, "s.txt", "longer now");
    /* Within a second of its check the old entry may still be served (the documented bound)... */
    expect_hit(c, "s.txt", 100999);
    /* ...a second after it, it is checked and found changed (times in milliseconds). */
    assert_null(get(c, "s.txt", 101000));
    sl_fdc_free(c);
}

static void test_forgotten_entry_is_reopened_and_stays_open_while_held(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_SIMPLE, 64);
    cached(c, "t.txt", "four", 100);
    sl_fdc_entry *e = get(c, "t.txt", 100);
    assert_non_null(e);
    int fd = e->fd;
    sl_fdc_stats before, after;
    sl_fdc_get_stats(c, &before);
    sl_fdc_forget(c, e);
    sl_fdc_forget(c, e); /* twice: counted once */
    sl_fdc_get_stats(c, &after);
    assert_int_equal(after.invalidations, before.invalidations + 1);
    assert_int_equal(after.entries, before.entries - 1);
    /* Within the same second, where "simple" would still trust it: gone. */
    assert_null(get(c, "t.txt", 100));
    /* Still open for its holder. */
    char b[8];
    assert_int_equal(pread(fd, b, sizeof b, 0), 4);
    sl_fdc_release(c, e);
    /* Offered again, it is cached again. */
    cached(c, "t.txt", "five!", 100);
    expect_hit(c, "t.txt", 100);
    sl_fdc_free(c);
}

static void test_disabled_caches_nothing(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_DISABLE, 64);
    tu_put(root, "x.txt", "x");
    assert_null(offer(c, "x.txt", 1));
    assert_null(get(c, "x.txt", 1));
    sl_fdc_free(c);
}

static void test_eviction_never_closes_a_held_file(void **state)
{
    /* 16 shards of 4: room for few entries. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1);
    sl_fdc_entry *held[200];
    int n = 0;
    for (int i = 0; i < 200; i++) {
        char rel[32];
        snprintf(rel, sizeof rel, "h%d", i);
        tu_put(root, rel, rel);
        sl_fdc_entry *e = offer(c, rel, 1);
        if (e) held[n++] = e; /* held: a full shard refuses rather than close it */
    }
    assert_true(n >= 16 && n < 200);
    for (int i = 0; i < n; i++) {
        char b[8] = "";
        assert_true(pread(held[i]->fd, b, sizeof b - 1, 0) > 0); /* still open */
        sl_fdc_release(c, held[i]);
    }
    /* Released, they may go for new ones. */
    sl_fdc_entry *e = offer(c, "h199", 1);
    if (e) sl_fdc_release(c, e);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.entries <= 16 * 4);
    sl_fdc_free(c);
}

static void test_admitted_from_the_second_request(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    assert_false(sl_fdc_admit(c, dirfd_, 1, "/a", 2)); /* first: remembered only */
    assert_true(sl_fdc_admit(c, dirfd_, 1, "/a", 2));  /* second: kept */
    assert_true(sl_fdc_admit(c, dirfd_, 1, "/a", 2));  /* and later ones, while there is room */
    assert_false(sl_fdc_admit(c, dirfd_, 2, "/a", 2)); /* another key is another file */
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_int_equal(st.deferred, 2);
    sl_fdc_free(c);
    sl_fdc *off = sl_fdc_new(SL_FDC_DISABLE, 64);
    assert_false(sl_fdc_admit(off, dirfd_, 1, "/a", 2));
    assert_false(sl_fdc_admit(off, dirfd_, 1, "/a", 2));
    sl_fdc_free(off);
}

/* An insert costs about three hits' savings: while the entries kept have not earned two hits
 * each, a file is kept only from its sixth request; once they have, from its second again. The first
 * eighth of the cache (at least 64) is kept from the second request whatever it earns. */
static void test_admission_waits_while_entries_do_not_earn_their_keep(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1024); /* its first 128 inserts are free */
    char path[32];
    for (int i = 0; i < 128; i++) {
        int n = snprintf(path, sizeof path, "/e%d", i);
        assert_false(sl_fdc_admit(c, dirfd_, 1, path, (size_t)n));
        assert_true(sl_fdc_admit(c, dirfd_, 1, path, (size_t)n));
        tu_put(root, path + 1, "x");
        sl_fdc_entry *e = offer(c, path + 1, 1);
        assert_non_null(e);
        sl_fdc_release(c, e);
    }
    /* 128 entries and no hit: a newcomer needs six requests. */
    for (int k = 1; k <= 5; k++) assert_false(sl_fdc_admit(c, dirfd_, 1, "/new", 4));
    assert_true(sl_fdc_admit(c, dirfd_, 1, "/new", 4));
    /* Two hits for each entry: from the second request again. */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 128; i++) {
            snprintf(path, sizeof path, "e%d", i);
            expect_hit(c, path, 1);
        }
    assert_false(sl_fdc_admit(c, dirfd_, 1, "/new2", 5));
    assert_true(sl_fdc_admit(c, dirfd_, 1, "/new2", 5));
    sl_fdc_free(c);
}

/* One request the way mod_static makes it: a hit, or an admission check and an offer. */
static bool request(sl_fdc *c, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "/%s", rel);
    sl_fdc_entry *e = sl_fdc_get(c, dirfd_, 1, path, strlen(path), 1);
    if (e) {
        sl_fdc_release(c, e);
        return true;
    }
    if (sl_fdc_admit(c, dirfd_, 1, path, strlen(path)) && (e = offer(c, rel, 1)))
        sl_fdc_release(c, e);
    return false;
}

/* rel is cached from its second request (the third is a hit), and a change to it is seen. */
static void expect_cached_and_change_seen(sl_fdc *c, const char *rel)
{
    request(c, rel);
    request(c, rel);
    assert_true(request(c, rel));
    tu_put(root, rel, "changed");
    assert_null(get(c, rel, 1));
}

static void test_popular_files_survive_a_scan(void **state)
{
    /* 64 entries (16 shards of 4). 20 files asked for often, then 300 others twice each, at
     * random as a pool far larger than the cache is: those must not push the popular ones out
     * (the old rule, "kept from the second request", inserted and evicted for each). */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    char rel[32];
    for (int i = 0; i < 320; i++) {
        snprintf(rel, sizeof rel, "p%d", i);
        tu_put(root, rel, "x");
    }
    for (int round = 0; round < 6; round++)
        for (int i = 0; i < 20; i++) {
            snprintf(rel, sizeof rel, "p%d", i);
            request(c, rel);
        }
    int cached_before = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(rel, sizeof rel, "p%d", i);
        sl_fdc_entry *e = get(c, rel, 1);
        if (e) cached_before++, sl_fdc_release(c, e);
    }
    assert_true(cached_before >= 12); /* most: a shard holds 4 */
    sl_fdc_stats before, after;
    sl_fdc_get_stats(c, &before);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 20; i < 320; i++) {
            snprintf(rel, sizeof rel, "p%d", (i * 7919 + pass * 13) % 300 + 20);
            request(c, rel);
        }
    sl_fdc_get_stats(c, &after);
    int cached_after = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(rel, sizeof rel, "p%d", i);
        sl_fdc_entry *e = get(c, rel, 1);
        if (e) cached_after++, sl_fdc_release(c, e);
    }
    assert_int_equal(cached_after, cached_before);
    /* The scan filled only the room the popular files left. */
    assert_true(after.inserts - before.inserts <= 64 - (uint64_t)cached_before);
    assert_true(after.deferred - before.deferred >= 300);
    /* A newcomer asked for more often than the entries of its shard gets in. */
    bool in = false;
    for (int k = 0; k < 12 && !in; k++) in = request(c, "p319");
    assert_true(in);
    sl_fdc_free(c);
}

/* One of n files "u0".."u<n-1>" into rel, drawn at random from the generator state x. */
static void pick_file(uint32_t *x, unsigned n, char *rel, size_t size)
{
    *x = *x * 1103515245u + 12345u;
    snprintf(rel, size, "u%u", (*x >> 8) % n);
}

static void test_a_pool_larger_than_the_cache_does_not_churn(void **state)
{
    /* 64 entries for 128 files asked for at random, each as often as any other: once full, a
     * newcomer's count beats its victim's only by chance, and each such win is an insert (watches,
     * a re-check) and an eviction (a close, a watch removed) for a file no more likely to come
     * back. With the rule "more often than the victim" 8% of the requests after the fill evicted
     * an entry (326 of 4096), with fdcache.c's beats 1.7%. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    char rel[32];
    for (int i = 0; i < 128; i++) {
        snprintf(rel, sizeof rel, "u%d", i);
        tu_put(root, rel, "x");
    }
    uint32_t x = 12345;
    for (int i = 0; i < 1024; i++) { /* the fill */
        pick_file(&x, 128, rel, sizeof rel);
        request(c, rel);
    }
    sl_fdc_stats before, after;
    sl_fdc_get_stats(c, &before);
    assert_true(before.entries >= 56);
    int hits = 0;
    for (int i = 0; i < 4096; i++) {
        pick_file(&x, 128, rel, sizeof rel);
        hits += request(c, rel);
    }
    sl_fdc_get_stats(c, &after);
    uint64_t evicted = after.evictions - before.evictions;
    print_message("after the fill: %d hits, %llu evictions in 4096 requests\n", hits,
                  (unsigned long long)evicted);
    assert_true(evicted * 100 <= 4096 * 3); /* at most 3% of the requests */
    assert_true(hits * 100 >= 4096 * 35); /* and the cache still hits about half of them */
    sl_fdc_free(c);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_change_seen_a_millisecond_later(void **state)
{
    /* No explicit drain here: sl_fdc_get reads the event queue itself when it was last read
     * more than 1 ms ago, so a lookup 2 ms after the change must miss. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    cached(c, "ms", "one", 1);
    sleep_ms(2);
    sl_fdc_entry *e = sl_fdc_get(c, dirfd_, 1, "/ms", 3, 1);
    assert_non_null(e); /* unchanged: a hit */
    sl_fdc_release(c, e);
    tu_put(root, "ms", "two");
    sleep_ms(2);
    assert_null(sl_fdc_get(c, dirfd_, 1, "/ms", 3, 1));
    sl_fdc_free(c);
}

static void test_futile_cache_rests(void **state)
{
    /* 64 entries, 2000 files asked for at random: full, and about 3% hits. Two windows of
     * such lookups and the cache rests: no entries, no watches, nothing looked up or admitted,
     * until the rest is over. */
    enum { FILES = 2000 };
    char rel[32];
    for (int i = 0; i < FILES; i++) {
        snprintf(rel, sizeof rel, "f%d", i);
        tu_put(root, rel, "x");
    }
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    sl_fdc_set_first_rest(c, 50);
    sl_fdc_stats st;
    unsigned x = 12345;
    int n = 0;
    for (; n < 40000; n++) {
        x = x * 1103515245u + 12345u;
        snprintf(rel, sizeof rel, "f%u", (x >> 8) % FILES);
        request(c, rel);
        sl_fdc_get_stats(c, &st);
        if (st.resting) break;
    }
    assert_true(st.resting);
    assert_int_equal(st.rests, 1);
    assert_true(n >= 2 * 8192 - 1); /* two whole windows were judged */
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.watches, 0);
    /* Resting: a file asked for again and again is neither found nor admitted. */
    for (int k = 0; k < 5; k++) assert_false(request(c, "f1"));
    assert_false(sl_fdc_admit(c, dirfd_, 1, "/f1", 3));
    sl_fdc_tick(c); /* not over yet */
    sl_fdc_get_stats(c, &st);
    assert_true(st.resting);
    sleep_ms(60);
    sl_fdc_tick(c);
    sl_fdc_get_stats(c, &st);
    assert_false(st.resting);
    /* Caching again: from the second request on, and a change is seen (new watches). */
    expect_cached_and_change_seen(c, "f1");
    sl_fdc_free(c);
}

/* The watches the cache had before the request that made it rest (until_rest). */
static size_t watches_before_rest;

/* Requests at random over `files` files named prefix%d (made here), n of them at most, until the
 * cache rests; returns the lookups made and, in *most, the most entries it held. */
static int until_rest(sl_fdc *c, const char *prefix, int files, int n, size_t *most)
{
    char rel[32];
    for (int i = 0; i < files; i++) {
        snprintf(rel, sizeof rel, "%s%d", prefix, i);
        tu_put(root, rel, "x");
    }
    sl_fdc_stats st;
    unsigned x = 777;
    *most = 0;
    int k = 0;
    for (; k < n; k++) {
        x = x * 1103515245u + 12345u;
        snprintf(rel, sizeof rel, "%s%u", prefix, (x >> 8) % (unsigned)files);
        request(c, rel);
        sl_fdc_get_stats(c, &st);
        if (st.resting) break;
        if (st.entries > *most) *most = st.entries;
        watches_before_rest = st.watches;
    }
    return k;
}

/* c is caching and never rested. */
static void assert_never_rested(sl_fdc *c)
{
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_false(st.resting);
    assert_int_equal(st.rests, 0);
}

static void test_filling_cache_rests_when_it_could_never_hit(void **state)
{
    /* 1024 entries, 5000 files at random: full, it would hit about 20%. Judged every 512
     * lookups, it rests while it fills (half full at most), not after: filling a cache that
     * will not pay costs every insert and every watch. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1024);
    sl_fdc_set_window(c, 512);
    size_t most;
    int k = until_rest(c, "q", 5000, 20000, &most);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.resting);
    assert_true(most < 512);
    assert_true(k >= 3 * 512 - 1); /* an eighth of the cache first, then two windows */
    sl_fdc_free(c);
}

static void test_filling_cache_of_a_set_that_fits_never_rests(void **state)
{
    /* The same cache, 900 files: while it fills, its hits project above what it needs. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1024);
    sl_fdc_set_window(c, 512);
    size_t most;
    until_rest(c, "r", 900, 20000, &most);
    assert_never_rested(c);
    assert_true(most > 800);
    sl_fdc_free(c);
}

/* Descriptors open in this process, and the inotify watches among them (fdinfo's wd lines). */
static int open_fds(int *watches)
{
    char buf[4096], link[64], path[320];
    int n = -1; /* the listing's own */
    *watches = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        n++;
        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0 || (link[k] = 0, !strstr(link, "inotify"))) continue;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%s", de->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(buf, sizeof buf, f))
            if (!strncmp(buf, "inotify wd:", 11)) ++*watches;
        if (f) fclose(f);
    }
    closedir(d);
    return n;
}

static void test_rest_closes_its_files_a_few_per_lookup(void **state)
{
    /* A cache of 1024 over 3000 files in 30 directories, judged every 256 lookups, rests
     * holding hundreds of files and 31 watches. The lookup that judged does not close them all
     * (a loop that did stalled 11-38 ms): each lookup while resting closes 2 files and removes
     * 2 watches until none is left. */
    char rel[32];
    for (int d = 0; d < 30; d++) {
        snprintf(rel, sizeof rel, "t%d", d);
        tu_mkdir(root, rel, 0755);
        for (int i = 0; i < 100; i++) {
            snprintf(rel, sizeof rel, "t%d/f%d", d, i);
            tu_put(root, rel, "x");
        }
    }
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1024);
    sl_fdc_set_window(c, 256);
    sl_fdc_set_first_rest(c, 60000);
    int w0, base = open_fds(&w0);
    sl_fdc_stats st;
    unsigned x = 4242;
    size_t before = 0;
    int fds_before = 0, w1;
    for (int k = 0; k < 40000; k++) {
        x = x * 1103515245u + 12345u;
        unsigned f = (x >> 8) % 3000;
        snprintf(rel, sizeof rel, "t%u/f%u", f / 100, f % 100);
        /* Windows end at every 256th lookup (one a request): what was open before it. */
        if ((k + 1) % 256 == 0) fds_before = open_fds(&w1);
        request(c, rel);
        sl_fdc_get_stats(c, &st);
        if (st.resting) break;
        before = st.entries;
    }
    assert_true(st.resting);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.watches, 0);
    assert_true(before > 100);
    int held = open_fds(&w1) - base;
    /* None closed by the lookup that judged, but the one its own request held (a hit): that
     * closes as the request lets go. */
    assert_true(held >= fds_before - base - 1);
    /* Nor a watch removed: 31 directories' and each file's own (the judging lookup's hit, if it
     * was one, has closed its file but not removed its watch). */
    assert_in_range(w1 - w0, 31 + held, 31 + held + 1);
    /* Each lookup pays an installment: 2 files and 4 watches... */
    request(c, "t1/f1");
    int w2, held2 = open_fds(&w2) - base;
    assert_int_equal(held - held2, 2);
    assert_int_equal(w1 - w2, 4);
    int k = 1;
    for (; k < 1000 && (held2 || w2 > w0); k++) {
        request(c, "t1/f1");
        held2 = open_fds(&w2) - base;
    }
    /* ...until all are gone, files and watches in step. */
    assert_int_equal(held2, 0);
    assert_int_equal(w2, w0);
    assert_int_equal(k, (held + 1) / 2); /* a lookup for each 2 files (and the held + 31
                                          * watches: fewer) */
    sl_fdc_get_stats(c, &st);
    assert_true(st.resting); /* 60 s from its start */
    sl_fdc_free(c);
}

static void test_watch_removed_by_a_rest_is_made_again(void **state)
{
    /* A directory watched, the cache rests and its teardown is paid by ticks alone, the rest
     * ends: the directory's watch is made again (not the old wd, removed), so a change to a
     * file in it is seen. */
    tu_mkdir(root, "u", 0755);
    tu_put(root, "u/a", "one");
    tu_put(root, "u/b", "one");
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    sl_fdc_set_first_rest(c, 30);
    int w0, w;
    open_fds(&w0);
    request(c, "u/a");
    request(c, "u/a");
    assert_true(request(c, "u/a"));
    /* Futile windows: 3000 files would never fit in 64 (cap/8 = 8 entries enough to judge). */
    size_t most;
    sl_fdc_set_window(c, 256);
    until_rest(c, "v", 3000, 40000, &most);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.resting);
    open_fds(&w);
    /* The root's, u's and each cached file's: none removed yet. */
    assert_true(watches_before_rest > 2);
    assert_int_equal(w - w0, (int)watches_before_rest);
    sleep_ms(40);
    sl_fdc_tick(c); /* no lookup paid: the tick that ends the rest pays it all first */
    sl_fdc_get_stats(c, &st);
    assert_false(st.resting);
    open_fds(&w);
    assert_int_equal(w, w0);
    expect_cached_and_change_seen(c, "u/b");
    sl_fdc_free(c);
}

static void test_fitting_set_never_rests(void **state)
{
    /* 40 files and room for 64: after the first requests nearly every lookup hits. */
    char rel[32];
    for (int i = 0; i < 40; i++) {
        snprintf(rel, sizeof rel, "w%d", i);
        tu_put(root, rel, "x");
    }
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    int hits = 0;
    for (int n = 0; n < 30000; n++) {
        snprintf(rel, sizeof rel, "w%d", (n * 7) % 40);
        hits += request(c, rel);
    }
    assert_never_rested(c);
    assert_true(hits > 29000);
    sl_fdc_free(c);
}

static void test_write_through_another_name_is_seen(void **state)
{
    /* d/e/g.txt and d/g2.txt are one file: a write through d/g2.txt is an event of d's, not of
     * d/e's, which only the file's own watch sees. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    tu_put(root, "d/e/g.txt", "one");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/d/e/g.txt", root);
    snprintf(b, sizeof b, "%s/d/g2.txt", root);
    assert_int_equal(link(a, b), 0);
    sl_fdc_entry *e = offer(c, "d/e/g.txt", 1);
    assert_non_null(e);
    sl_fdc_release(c, e);
    expect_hit(c, "d/e/g.txt", 1);
    FILE *f = fopen(b, "a");
    assert_non_null(f);
    fputs("more", f);
    fclose(f);
    assert_null(get(c, "d/e/g.txt", 1));
    assert_int_equal(unlink(b), 0);
    sl_fdc_free(c);
}

/* Open rel now, for an offer later (offer_open). */
typedef struct opened {
    int fd;
    struct stat st;
} opened;

static opened open_now(const char *rel)
{
    opened o;
    o.fd = openat(dirfd_, rel, O_RDONLY | O_CLOEXEC);
    assert_true(o.fd >= 0);
    assert_int_equal(fstat(o.fd, &o.st), 0);
    return o;
}

/* Offer what open_now opened, with mark; NULL (and the descriptor closed) when not cached. */
static sl_fdc_entry *offer_open(sl_fdc *c, const char *rel, opened o, uint64_t mark)
{
    char path[512];
    snprintf(path, sizeof path, "/%s", rel);
    sl_fdc_entry *e = sl_fdc_put(c, dirfd_, root, 1, path, strlen(path), rel, o.fd, &o.st, 1, mark);
    if (!e) close(o.fd);
    return e;
}

/* rel replaced by another file (a new inode under the same name, as an upload tool does). */
static void replace_file(const char *rel, const char *data)
{
    char tmp[256], a[1024], b[1024];
    snprintf(tmp, sizeof tmp, "%s.new", rel);
    tu_put(root, tmp, data);
    snprintf(a, sizeof a, "%s/%s", root, tmp);
    snprintf(b, sizeof b, "%s/%s", root, rel);
    assert_int_equal(rename(a, b), 0);
}

static void test_a_mark_skips_the_recheck_only_when_nothing_moved(void **state)
{
    /* sl_fdc_put looks at the path again unless no directory event was read and no directory
     * watch made since the caller's mark, taken before its open. A file replaced between the
     * open and the offer must not be cached under its name, whether its directory was watched
     * already (an event read by the offer's drain) or not yet (no event: the watch is made by
     * the offer itself). */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    tu_mkdir(root, "mk", 0755);
    tu_mkdir(root, "mk/sub", 0755);
    /* Nothing moved: cached with the mark. */
    tu_put(root, "mk/a", "one");
    uint64_t mark = sl_fdc_mark(c);
    assert_true(mark != 0);
    sl_fdc_entry *e = offer_open(c, "mk/a", open_now("mk/a"), mark);
    assert_non_null(e);
    sl_fdc_release(c, e);
    expect_hit(c, "mk/a", 1);
    /* The directory watched already; the file replaced after the open and the rename read
     * (a loop woken by the queue) before the offer: the path is looked at again and the offer
     * refused. */
    tu_put(root, "mk/b", "one");
    mark = sl_fdc_mark(c);
    opened o = open_now("mk/b");
    replace_file("mk/b", "two");
    sl_fdc_drain(c);
    assert_null(offer_open(c, "mk/b", o, mark));
    assert_null(get(c, "mk/b", 1));
    /* The same with the rename not read yet: the queue was read just before, under
     * DRAIN_EVERY_NS ago, so the offer does not read it and takes the old file without the
     * re-check (or, on a machine slow enough to let a millisecond pass, reads it and refuses).
     * Either way a lookup a millisecond after the change reads the queue: the entry is invalid. */
    tu_put(root, "mk/b2", "one");
    sl_fdc_drain(c);
    mark = sl_fdc_mark(c);
    o = open_now("mk/b2");
    replace_file("mk/b2", "two");
    e = offer_open(c, "mk/b2", o, mark);
    if (e) {
        assert_int_equal(e->st.st_size, 3);
        sl_fdc_release(c, e);
    }
    usleep(2000);
    assert_null(get(c, "mk/b2", 1));
    /* A directory not watched at the mark: no event can tell of the replacement, the watch the
     * offer makes moves the mark. */
    tu_put(root, "mk/sub/c", "one");
    mark = sl_fdc_mark(c);
    o = open_now("mk/sub/c");
    replace_file("mk/sub/c", "two");
    assert_null(offer_open(c, "mk/sub/c", o, mark));
    assert_null(get(c, "mk/sub/c", 1));
    /* And then, cached from a fresh open, it is the new file. */
    mark = sl_fdc_mark(c);
    e = offer_open(c, "mk/sub/c", open_now("mk/sub/c"), mark);
    assert_non_null(e);
    assert_int_equal(e->st.st_size, 3);
    sl_fdc_release(c, e);
    sl_fdc_free(c);
}

static void test_a_change_leaves_its_neighbours_cached(void **state)
{
    /* A file's contents and attributes are its own watch's: the other files of its directory
     * keep their entries. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    cached(c, "d/n1", "one", 1);
    cached(c, "d/n2", "one", 1);
    tu_put(root, "d/n1", "two");
    assert_null(get(c, "d/n1", 1));
    expect_hit(c, "d/n2", 1);
    char p[512];
    snprintf(p, sizeof p, "%s/d/n2", root);
    assert_int_equal(chmod(p, 0600), 0);
    assert_null(get(c, "d/n2", 1));
    sl_fdc_free(c);
}

static void test_hard_links_share_a_watch_that_goes_with_the_last_entry(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    int w0, w;
    open_fds(&w0);
    tu_put(root, "d/e/l1", "one");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/d/e/l1", root);
    snprintf(b, sizeof b, "%s/d/e/l2", root);
    assert_int_equal(link(a, b), 0);
    sl_fdc_entry *e1 = offer(c, "d/e/l1", 1), *e2 = offer(c, "d/e/l2", 1);
    assert_non_null(e1);
    assert_non_null(e2);
    sl_fdc_release(c, e1);
    sl_fdc_release(c, e2);
    /* The root's, d's and d/e's, and one for the two names of the file (one inode, one wd). */
    open_fds(&w);
    assert_int_equal(w - w0, 4);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_int_equal(st.watches, 4);
    /* One entry goes: the watch stays for the other, which is still trusted. */
    e1 = get(c, "d/e/l1", 1);
    assert_non_null(e1);
    sl_fdc_forget(c, e1);
    sl_fdc_release(c, e1);
    open_fds(&w);
    assert_int_equal(w - w0, 4);
    expect_hit(c, "d/e/l2", 1);
    /* The last one goes: so does the watch, from the kernel too. */
    e2 = get(c, "d/e/l2", 1);
    sl_fdc_forget(c, e2);
    sl_fdc_release(c, e2);
    open_fds(&w);
    assert_int_equal(w - w0, 3);
    sl_fdc_get_stats(c, &st);
    assert_int_equal(st.watches, 3);
    /* Cached again, a write through either name is seen. */
    cached(c, "d/e/l2", "two", 1);
    tu_put(root, "d/e/l1", "three");
    assert_null(get(c, "d/e/l2", 1));
    assert_int_equal(unlink(b), 0);
    sl_fdc_free(c);
}

static void test_eviction_removes_the_files_watches(void **state)
{
    /* 16 shards of 4 and 300 files of one directory: the kernel keeps a watch for each file
     * cached and for the two directories, not one for each file ever cached. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1);
    int w0, w;
    open_fds(&w0);
    cache_many(c, "ev", "x", 300);
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.evictions >= 300 - 64);
    assert_true(st.entries > 0 && st.entries <= 64);
    assert_int_equal(st.watches, st.entries + 2);
    open_fds(&w);
    assert_int_equal(w - w0, (int)st.entries + 2);
    sl_fdc_free(c);
}

static void test_an_entry_hit_often_is_never_evicted(void **state)
{
    /* 16 shards of 4, 400 files offered one after another (no admission here), and one file
     * looked up after each: the least recently used go, never the file hit after every insert,
     * and an entry not hit since it was cached goes too. */
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 1);
    tu_mkdir(root, "lru", 0755);
    cached(c, "lru/hot", "x", 1);
    cached(c, "lru/cold", "x", 1);
    char rel[32];
    for (int i = 0; i < 400; i++) {
        snprintf(rel, sizeof rel, "lru/s%d", i);
        cached(c, rel, "x", 1);
        expect_hit(c, "lru/hot", 1);
    }
    assert_null(get(c, "lru/cold", 1));
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.evictions >= 400 - 64);
    sl_fdc_free(c);
}

static void test_directory_permissions_seen_within_a_minute(void **state)
{
    /* A directory's own chmod is an event of no watch the cache keeps; the check against the
     * path an entry gets a minute after its last one sees it (as a user other than root, whom
     * permissions do not stop). In a child, as nobody when run as root. */
    tu_mkdir(root, "perm", 0755);
    tu_put(root, "perm/x", "one");
    char p[512];
    snprintf(p, sizeof p, "%s/perm", root);
    assert_int_equal(chmod(root, 0755), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (chown(p, 65534, 65534) || setresgid(65534, 65534, 65534) ||
                               setresuid(65534, 65534, 65534)))
            _exit(10);
        sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
        int fd = openat(dirfd_, "perm/x", O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (!c || fd < 0 || fstat(fd, &st)) _exit(11);
        sl_fdc_entry *e = sl_fdc_put(c, dirfd_, root, 1, "/perm/x", 7, "perm/x", fd, &st, 100000, 0);
        if (!e) _exit(12);
        sl_fdc_release(c, e);
        if (chmod(p, 0)) _exit(13);
        if (openat(dirfd_, "perm/x", O_RDONLY) >= 0) _exit(14); /* an open is refused now */
        sl_fdc_drain(c);
        if (!(e = sl_fdc_get(c, dirfd_, 1, "/perm/x", 7, 159999))) _exit(15); /* not seen yet */
        sl_fdc_release(c, e);
        if (sl_fdc_get(c, dirfd_, 1, "/perm/x", 7, 160000)) _exit(16); /* a minute on: checked */
        chmod(p, 0755);
        sl_fdc_free(c);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(chmod(root, 0700), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_thousands_of_directories(void **state)
{
    /* More watches than the watch tables' first size (they grow): each file is found again and
     * a change in any directory is still seen. */
    enum { N = 2600 };
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 4 * N);
    char rel[64];
    for (int i = 0; i < N; i++) {
        snprintf(rel, sizeof rel, "m%d", i);
        tu_mkdir(root, rel, 0755);
        snprintf(rel, sizeof rel, "m%d/f", i);
        cached(c, rel, "x", 1);
    }
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_true(st.watches > (size_t)N);
    for (int i = 0; i < N; i++) {
        snprintf(rel, sizeof rel, "m%d/f", i);
        sl_fdc_entry *e = get(c, rel, 1);
        assert_non_null(e);
        sl_fdc_release(c, e);
    }
    tu_put(root, "m7/f", "changed");
    assert_null(get(c, "m7/f", 1));
    tu_put(root, "m2599/f", "changed");
    assert_null(get(c, "m2599/f", 1));
    sl_fdc_entry *e = get(c, "m1000/f", 1); /* the others stay */
    assert_non_null(e);
    sl_fdc_release(c, e);
    sl_fdc_free(c);
}

/* Entries come from an arena of fixed slots made with the cache; one whose paths do not fit a
 * slot, or one made while every slot is taken, is malloc'd, and each goes back where it came
 * from (ASan and valgrind see a mistake). */
static void test_entries_in_and_out_of_the_arena(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    /* Paths too long for a slot. */
    char rel[400];
    int n = snprintf(rel, sizeof rel, "ar/");
    memset(rel + n, 'a', 250);
    rel[n + 250] = 0;
    tu_mkdir(root, "ar", 0755);
    tu_mkdir(root, rel, 0755);
    snprintf(rel + n + 250, sizeof rel - (size_t)n - 250, "/f");
    cached(c, rel, "long", 1);
    sl_fdc_entry *e = get(c, rel, 1);
    assert_non_null(e);
    assert_string_equal(e->file, rel);
    assert_int_equal(e->st.st_size, 4);
    sl_fdc_release(c, e);
    /* Every slot held, and more offered: the cache takes what its shards have room for, from
     * the arena and then from malloc, and gives back each. */
    sl_fdc_entry *held[200];
    size_t nh = 0;
    for (int i = 0; i < 200; i++) {
        char r[64];
        snprintf(r, sizeof r, "ar/h%d", i);
        tu_put(root, r, "x");
        sl_fdc_entry *x = offer(c, r, 1);
        if (x) {
            assert_string_equal(x->file, r);
            held[nh++] = x;
        }
    }
    assert_true(nh >= 32);
    for (size_t i = 0; i < nh; i++) sl_fdc_release(c, held[i]);
    /* Evicted and made again many times over: freed slots are reused. */
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < 100; i++) {
            char r[64];
            snprintf(r, sizeof r, "ar/h%d", (i * 7 + round) % 200);
            sl_fdc_entry *x = get(c, r, 1);
            if (!x) x = offer(c, r, 1);
            if (x) {
                assert_string_equal(x->file, r);
                sl_fdc_release(c, x);
            }
        }
    sl_fdc_free(c);
}

/* Several threads (loops) looking up at once: each counts on its own stripe, and the totals are
 * exact, with more threads than stripes too (two then share one). */
typedef struct counter_arg {
    sl_fdc *c;
    int seed;
    int hits, misses, cached; /* cached: lookups of a cached file */
} counter_arg;

static void *count_lookups(void *p)
{
    counter_arg *a = p;
    char rel[64];
    for (int i = 0; i < 5000; i++) {
        int k = (i * 7 + a->seed) % 16;
        /* the first 8 are cached, the others do not exist */
        snprintf(rel, sizeof rel, k < 8 ? "thr/f%d" : "thr/none%d", k);
        a->cached += k < 8;
        sl_fdc_entry *e = get(a->c, rel, 1);
        if (e) {
            a->hits++;
            sl_fdc_release(a->c, e);
        } else {
            a->misses++;
        }
    }
    return NULL;
}

static void test_lookups_from_several_threads_are_all_counted(void **state)
{
    sl_fdc *c = sl_fdc_new(SL_FDC_INOTIFY, 64);
    cache_many(c, "thr", "f", 8);
    sl_fdc_stats before;
    sl_fdc_get_stats(c, &before);
    enum { THREADS = 11 };
    pthread_t t[THREADS];
    counter_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (counter_arg){.c = c, .seed = i};
        assert_int_equal(pthread_create(&t[i], NULL, count_lookups, &a[i]), 0);
    }
    int hits = 0, misses = 0, cached_lookups = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        hits += a[i].hits;
        misses += a[i].misses;
        cached_lookups += a[i].cached;
    }
    sl_fdc_stats st;
    sl_fdc_get_stats(c, &st);
    assert_int_equal(hits + misses, THREADS * 5000);
    assert_int_equal(hits, cached_lookups); /* every cached file stayed valid */
    assert_int_equal(st.hits - before.hits, (uint64_t)hits);
    assert_int_equal(st.misses - before.misses, (uint64_t)misses);
    sl_fdc_free(c);
}

TU_MAIN(setup, teardown,
        cmocka_unit_test(test_inotify_sees_every_change),
        cmocka_unit_test(test_write_through_another_name_is_seen),
        cmocka_unit_test(test_a_change_leaves_its_neighbours_cached),
        cmocka_unit_test(test_hard_links_share_a_watch_that_goes_with_the_last_entry),
        cmocka_unit_test(test_eviction_removes_the_files_watches),
        cmocka_unit_test(test_directory_permissions_seen_within_a_minute),
        cmocka_unit_test(test_an_entry_hit_often_is_never_evicted),
        cmocka_unit_test(test_simple_checks_once_a_second),
        cmocka_unit_test(test_forgotten_entry_is_reopened_and_stays_open_while_held),
        cmocka_unit_test(test_disabled_caches_nothing),
        cmocka_unit_test(test_eviction_never_closes_a_held_file),
        cmocka_unit_test(test_admitted_from_the_second_request),
        cmocka_unit_test(test_admission_waits_while_entries_do_not_earn_their_keep),
        cmocka_unit_test(test_a_pool_larger_than_the_cache_does_not_churn),
        cmocka_unit_test(test_a_mark_skips_the_recheck_only_when_nothing_moved),
        cmocka_unit_test(test_popular_files_survive_a_scan),
        cmocka_unit_test(test_thousands_of_directories),
        cmocka_unit_test(test_change_seen_a_millisecond_later),
        cmocka_unit_test(test_futile_cache_rests),
        cmocka_unit_test(test_fitting_set_never_rests),
        cmocka_unit_test(test_filling_cache_rests_when_it_could_never_hit),
        cmocka_unit_test(test_filling_cache_of_a_set_that_fits_never_rests),
        cmocka_unit_test(test_rest_closes_its_files_a_few_per_lookup),
        cmocka_unit_test(test_watch_removed_by_a_rest_is_made_again),
        cmocka_unit_test(test_entries_in_and_out_of_the_arena),
        cmocka_unit_test(test_lookups_from_several_threads_are_all_counted))
