/* The open-file cache.
 *
 * Validity is three generation numbers instead of lists to walk: every watched directory has
 * one, bumped by an event about one of its entries (a name moved away or in, or removed), every
 * cached file's own watch has one, bumped by a change to the file through any of its names
 * (write, truncate, chmod, touch, a link made or removed), and the cache has one, bumped by
 * anything that can change what a path leads to beyond one directory (a directory renamed or
 * removed, a watch lost, the event queue overflowing). An entry remembers the three when it is
 * made and is valid while they have not moved, so an event costs an increment and a lookup
 * compares three integers. Directories are not watched for their files' events (see DIR_MASK:
 * that would cost every read of every file in them); each file is, by a watch that lives as long
 * as the last entry of its inode (hard links share it: the kernel has one wd per inode) and is
 * removed with it, outside any shard's lock. Directory watches live as long as the cache (a
 * directory that held a cached file is likely to hold another); the number of watches is bounded
 * by the directories of the tree plus the entries, and by the kernel's max_user_watches, past
 * which files simply are not cached.
 *
 * Admission (TinyLFU's idea): a lossy count of how often each path was asked for lately, a
 * count-min sketch of small counters shared by the loops (relaxed atomics: a lost increment
 * only makes a count one lower), halved every ten cache-fulls of requests so that old
 * popularity fades. A file is offered to the cache from its second request on (from its sixth
 * while the entries kept have not earned two hits each: admit_count), and when its shard is
 * full only if it was asked for clearly more often than the entry it would evict (beats: half as
 * often again, and once more). Keeping a file costs several system calls (watches, the victim's
 * close, a re-check of the path for a file that may have been reached through a symlink or
 * whose directories changed since its open: sl_fdc_mark): worth it for a file
 * that comes back more than what it replaces, not for each of a pool far larger than the cache
 * requested at random, where every insert would evict a file as likely to come back.
 *
 * Futility: a cache that cannot hold what is asked for costs more than it saves. Every lookup,
 * every admission count and every insert has a price (watches added, a re-check, the victim's
 * close and its watch removed), and a hit saves an open, an fstat and a close. Measured on the
 * 4 KiB pool (200,000 files asked for at random, a cache of a few thousand), when directories
 * were still watched for their files' events: about 2.5 us more per request with the cache than
 * without. So every FUTILE_WINDOW lookups the cache judges the window: fewer than FUTILE_HIT_PCT
 * percent hits, projected to a full cache, twice in a row, and it rests: every entry and every
 * watch goes, and lookups and admissions return at once (one atomic load) for REST_MIN_MS
 * (sl_fdc_tick ends the rest), twice as long after each rest that ends in futility again (up to
 * REST_MAX_MS), back to the first length after a window of good hits. A working set that fits
 * never rests.
 * The projection: with requests spread over more files than the cache holds, hits grow with the
 * entries held (uniformly at random, hits / lookups = entries / files asked for), so a window's
 * hit rate times capacity / entries is what the full cache would hit. A cache that projects too
 * few hits while it fills rests then, not after it filled: on the 200,000-file pool a cache of
 * 15,648 files took 73,000 lookups to fill and judge, serving about a quarter slower meanwhile,
 * and its rest then closed 15,648 files and removed 5,000 watches in one 34 ms stall. A set that
 * fits projects above 100% from its first windows. Files asked for more often than others are
 * cached first (admission), which only raises the projection: such a set is worth caching.
 *
 * Locks: each shard's lock guards its table, its CLOCK list, its entries' hold counts and marks;
 * the watch lock guards the watch tables. No code path holds both. What every lookup counts is
 * in per-thread stripes (atomics), so loops do not pass counters' cache lines to each other.
 */
#include "fdcache.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "openat.h"

#define SHARDS 16
#define REST_MIN_MS 10000      /* the first rest */
#define REST_MAX_MS 300000
#define FUTILE_HIT_PCT 40      /* a full cache hitting less than this is resting's candidate */
#define FUTILE_WINDOW 8192      /* lookups judged at a time */
#define FUTILE_MIN_N 1024       /* entries enough to project from (or an eighth of the cache) */
#define DRAIN_EVERY_NS 1000000 /* a hit reads the event queue when it was last read before this */
#define TEARDOWN_FILES 2       /* a rest's files closed per lookup while it rests (a loop
                                * iteration serves up to 32 requests: 64 closes, ~0.2 ms) */
#define TEARDOWN_WATCHES 4     /* and watches removed (a file's own and its directories') */
#define REVALIDATE_MS 60000   /* inotify: an entry is checked against its path this often */
#define SIMPLE_MS 1000         /* simple: an entry is trusted this long after its check */
#define TICK_FILES 1024        /* per sl_fdc_tick (a second) while resting: about 2 ms */
#define TICK_WATCHES 1280
/* A directory is watched for its entries only (a name moved away, moved in over another, removed;
 * the directory itself moved or removed), never for what happens to the files in it: a directory
 * watched for its children's events (IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE) makes the kernel take
 * the parent's dentry on every open, read and close of every file in it, cached or not (measured:
 * 1.1-1.3 us per request, bench/results/2026-11-29-floor). Each cached file has a watch of its
 * own for its contents and attributes, which also sees a change made through another of its
 * names. */
#define DIR_MASK (IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DONT_FOLLOW)

typedef struct watch {
    struct watch *next_rel, *next_wd;
    int wd;
    unsigned gen;            /* atomic: bumped by an event about an entry of the directory, or
                              * about the file */
    bool dead;
    bool file;               /* a cached file's own watch: in by_wd only, shared by the entries
                              * of the inode (hard links: the kernel has one wd per inode) */
    unsigned refs;           /* file: the entries that hold it (wlock) */
    char rel[];              /* directory: "" for the top one, else "a/b"; file: "" */
} watch;

typedef struct ent {
    sl_fdc_entry pub;
    struct ent *hnext, *lprev, *lnext;
    uint64_t h;
    int dirfd;
    unsigned key;
    unsigned refs;
    bool linked;             /* in its shard's table and CLOCK list */
    bool referenced;         /* hit since the eviction sweep last passed it (CLOCK) */
    watch *w;                /* the directory of the file (inotify) */
    watch *fw;               /* the file's own watch (inotify) */
    int fwd;                 /* its wd, to let go of it (0: none) */
    unsigned wgen, fwgen, ggen;
    uint64_t checked_ms;     /* last checked against the path (the caller's clock) */
    char *file;              /* the path of the file opened (simple mode checks it) */
    size_t len;
    char path[];
} ent;

typedef struct shard {
    pthread_mutex_t lock;
    ent **tab;
    size_t nb;
    ent lru;                 /* sentinel: lru.lnext most recently inserted or given its
                              * second chance; evictions sweep from lru.lprev */
    size_t n, cap;
} shard;

/* What every lookup counts, one stripe per thread (loop) on a block of its own: a counter that
 * every loop writes on every request moves its cache line between cores each time. (The reason
 * to look: two loops spent 1.8 us more per request than one on the popular set,
 * bench/results/2026-11-29-scaling-hot; with the stripes and CLOCK no change was measurable on
 * this 2-core machine, bench/results/2026-11-29-two-loops-cache: they are for machines with more
 * loops.) Totals are the stripes' sum; a thread keeps its stripe (threads past STRIPES share one:
 * the counts stay exact, atomics). */
#define STRIPES 8
typedef struct stripe {
    uint64_t hits, misses;   /* atomic */
    uint64_t window;         /* atomic: this thread's lookups, to end windows (judge) */
    uint64_t freq_adds;      /* atomic: this thread's sketch increments (freq_add) */
} __attribute__((aligned(128))) stripe; /* 128: the adjacent-line prefetcher pairs lines */

struct sl_fdc {
    stripe stripes[STRIPES];
    sl_fdc_mode mode;
    shard sh[SHARDS];
    unsigned ggen;           /* atomic */
    uint64_t evseq;          /* atomic: directory events read, directory watches made, ggen
                              * bumped (sl_fdc_mark) */
    int ifd;
    pthread_mutex_t wlock;
    watch **by_rel, **by_wd;
    size_t wnb, n_watches;
    uint64_t inserts, invalidations, evictions, deferred; /* atomic */
    char *arena;             /* entries' memory, made at start (ent_alloc): ARENA_SLOT each */
    size_t arena_slots, arena_next; /* slots, and the first never given out (arena_lock) */
    void *arena_free;        /* given back, a stack through their first bytes (arena_lock) */
    pthread_mutex_t arena_lock;
    uint8_t *freq;           /* admission: the count-min sketch (atomic counters) */
    size_t freq_mask;
    uint64_t freq_adds;      /* atomic: increments since the last halving, added a batch at a
                              * time from the stripes */
    unsigned freq_batch;     /* that batch: 64, or 1 for a small cache (its period is short) */
    uint64_t boot;           /* inserts made from the second request whatever they earn */
    uint64_t earn_hits0, earn_ins0; /* atomic: hits and inserts when the cache was last empty */
    uint64_t freq_period;    /* halve every this many */
    pthread_mutex_t freq_lock; /* one halving at a time */
    uint64_t last_drain_ns;  /* atomic: when the event queue was last read */
    bool resting;            /* atomic: futile lately; lookups and admissions return at once */
    uint64_t rests;          /* atomic: rests begun */
    uint64_t window;         /* atomic: lookups, counted to end windows */
    pthread_mutex_t judge_lock; /* guards what follows */
    uint64_t rest_until_ns;
    unsigned rest_min_ms, rest_ms, futile_streak;
    uint64_t judge_lookups, judge_hits;
    size_t judge_n;          /* entries at the last judgement */
    uint64_t window_len;     /* lookups per window: FUTILE_WINDOW (tests set fewer) */
    /* A rest's teardown, paid in installments (see pay_teardown): entries to close (through
     * hnext) and watches to remove (through next_rel), under doom_lock; doomed counts both. */
    pthread_mutex_t doom_lock;
    ent *doomed;
    watch *doomed_w;
    size_t doomed_n;          /* atomic */
};

#define FREQ_MAX 15          /* counters saturate: "often" is enough to rank */

/* A shard is chosen by the hash's low bits, a bucket in it by the bits above them (by the low
 * bits again, a shard would use one bucket in SHARDS). */
#define BUCKET(h, nb) (((h) / SHARDS) & ((nb)-1))

#define A_INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)
#define A_GET(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

static unsigned stripe_next;              /* atomic: stripes handed out, over all caches */
static _Thread_local unsigned my_stripe;  /* 1 + this thread's stripe; 0: none yet */

static stripe *stripe_of(sl_fdc *c)
{
    if (!my_stripe)
        my_stripe = 1 + __atomic_fetch_add(&stripe_next, 1, __ATOMIC_SEQ_CST) % STRIPES;
    return &c->stripes[my_stripe - 1];
}

/* The stripes handed out so far (to any cache's threads): the others are all zero, and one
 * loop's server then sums one cache line, not STRIPES (admission reads the hits on every miss). */
static int stripes_used(void)
{
    unsigned n = __atomic_load_n(&stripe_next, __ATOMIC_ACQUIRE);
    return n < STRIPES ? (int)n : STRIPES;
}

static uint64_t hits_of(const sl_fdc *c)
{
    uint64_t n = 0;
    for (int i = 0, used = stripes_used(); i < used; i++) n += A_GET(c->stripes[i].hits);
    return n;
}

static uint64_t misses_of(const sl_fdc *c)
{
    uint64_t n = 0;
    for (int i = 0, used = stripes_used(); i < used; i++) n += A_GET(c->stripes[i].misses);
    return n;
}

/* Anything that may change what a path leads to beyond one directory: every entry is invalid. */
static void moved(sl_fdc *c)
{
    A_INC(c->ggen);
    A_INC(c->evseq);
}

static void count_lookup(sl_fdc *c, bool hit);
static void arena_init(sl_fdc *c, size_t capacity);
static void pay_teardown(sl_fdc *c, size_t files, size_t watches);

static uint64_t hash(int dirfd, unsigned key, const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)(unsigned)dirfd << 32 | key);
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

sl_fdc *sl_fdc_new(sl_fdc_mode mode, size_t capacity)
{
    sl_fdc *c = aligned_alloc(_Alignof(sl_fdc), sizeof *c); /* the stripes' cache lines */
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    c->mode = mode;
    c->ifd = -1;
    pthread_mutex_init(&c->wlock, NULL);
    pthread_mutex_init(&c->doom_lock, NULL);
    size_t per = capacity / SHARDS;
    if (per < 4) per = 4;
    arena_init(c, per * SHARDS);
    c->boot = per * SHARDS / 8 > 64 ? per * SHARDS / 8 : 64;

    for (size_t i = 0; i < SHARDS; i++) {
        shard *s = &c->sh[i];
        pthread_mutex_init(&s->lock, NULL);
        s->cap = per;
        s->nb = 64;
        while (s->nb < per) s->nb *= 2;
        s->tab = calloc(s->nb, sizeof *s->tab);
        s->lru.lnext = s->lru.lprev = &s->lru;
        if (!s->tab) goto fail;
    }
    /* About eight counters per entry, as TinyLFU sizes its sketch. */
    size_t slots = 4096;
    while (slots < 8 * per * SHARDS) slots *= 2;
    c->freq = aligned_alloc(64, slots); /* blocks of 64 on cache lines (freq_slot) */
    if (!c->freq) goto fail;
    memset(c->freq, 0, slots);
    c->freq_mask = slots - 1;
    c->freq_period = 10 * per * SHARDS;
    c->freq_batch = c->freq_period >= 64 * 64 ? 64 : 1;
    c->rest_min_ms = c->rest_ms = REST_MIN_MS;
    c->window_len = FUTILE_WINDOW;
    pthread_mutex_init(&c->judge_lock, NULL);
    pthread_mutex_init(&c->freq_lock, NULL);
    if (mode == SL_FDC_INOTIFY) {
        c->wnb = 1024;
        c->by_rel = calloc(c->wnb, sizeof *c->by_rel);
        c->by_wd = calloc(c->wnb, sizeof *c->by_wd);
        if (!c->by_rel || !c->by_wd) goto fail;
        c->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (c->ifd < 0) {
            sl_log("server.stat-cache-engine \"inotify\": inotify_init1: %s; checking files "
                   "once a second instead (\"simple\")",
                   strerror(errno));
            c->mode = SL_FDC_SIMPLE;
        }
    }
    return c;
fail:
    sl_fdc_free(c);
    return NULL;
}

sl_fdc_mode sl_fdc_mode_of(const sl_fdc *c)
{
    return c->mode;
}

static void file_watch_release(sl_fdc *c, int wd);

/* Entries live in an arena made when the cache is (MAP_POPULATE), one ARENA_SLOT each with its
 * two paths; an entry whose paths do not fit, or one past the arena's slots, is malloc'd. Why:
 * memory first written by a request is a page fault on the request's path, and in a virtual
 * machine whose host has not backed that memory yet it cost 14 us a page (2 us once backed):
 * entries malloc'd as the cache filled took some 1,900 faults over the first 50,000 requests of a
 * fresh server (bench/results/2026-11-29-cheaper-insert). */
#define ARENA_SLOT 512
#define ARENA_MAX_SLOTS 16384 /* 8 MiB: a larger cache's other entries are malloc'd */

static void arena_init(sl_fdc *c, size_t capacity)
{
    pthread_mutex_init(&c->arena_lock, NULL);
    size_t n = capacity < ARENA_MAX_SLOTS ? capacity : ARENA_MAX_SLOTS;
    void *a = mmap(NULL, n * ARENA_SLOT, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (a == MAP_FAILED) return; /* every entry malloc'd */
    c->arena = a;
    c->arena_slots = n;
}

static bool in_arena(const sl_fdc *c, const void *p)
{
    return c->arena && (const char *)p >= c->arena &&
           (const char *)p < c->arena + c->arena_slots * ARENA_SLOT;
}

/* Zeroed memory for an entry of `bytes`; NULL on ENOMEM. */
static ent *ent_alloc(sl_fdc *c, size_t bytes)
{
    void *p = NULL;
    if (bytes <= ARENA_SLOT && c->arena) {
        pthread_mutex_lock(&c->arena_lock);
        if (c->arena_free) {
            p = c->arena_free;
            c->arena_free = *(void **)p;
        } else if (c->arena_next < c->arena_slots) {
            p = c->arena + c->arena_next++ * ARENA_SLOT;
        }
        pthread_mutex_unlock(&c->arena_lock);
        if (p) return memset(p, 0, bytes);
    }
    return calloc(1, bytes);
}

static void ent_free(sl_fdc *c, ent *e)
{
    if (!in_arena(c, e)) {
        free(e);
        return;
    }
    pthread_mutex_lock(&c->arena_lock);
    *(void **)e = c->arena_free;
    c->arena_free = e;
    pthread_mutex_unlock(&c->arena_lock);
}

/* Close and free an entry nobody holds any more, and let go of its file's watch. Never under a
 * shard's lock: that takes the watch lock. */
static void ent_drop(sl_fdc *c, ent *e)
{
    if (e->pub.fd >= 0) close(e->pub.fd);
    if (e->fwd > 0) file_watch_release(c, e->fwd);
    ent_free(c, e); /* e->file is in the same block */
}

/* Off the table and the CLOCK list (shard locked). Returns the entry when nobody holds it, for
 * the caller to ent_drop once it has unlocked the shard; NULL when it is held (its last
 * sl_fdc_release drops it). */
static ent *ent_kill(shard *s, ent *e)
{
    if (!e->linked) return NULL;
    ent **pp = &s->tab[BUCKET(e->h, s->nb)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext;
    e->lprev->lnext = e->lnext;
    e->lnext->lprev = e->lprev;
    e->linked = false;
    s->n--;
    return e->refs == 0 ? e : NULL;
}

void sl_fdc_free(sl_fdc *c)
{
    if (!c) return;
    /* The watches first (every one is in by_wd once; the kernel's go with the inotify
     * descriptor), so the entries dropped next find no file watch to remove one by one. */
    for (size_t i = 0; c->by_wd && i < c->wnb; i++)
        while (c->by_wd[i]) {
            watch *w = c->by_wd[i];
            c->by_wd[i] = w->next_wd;
            free(w);
        }
    if (c->by_rel) memset(c->by_rel, 0, c->wnb * sizeof *c->by_rel);
    for (size_t i = 0; i < SHARDS; i++) {
        shard *s = &c->sh[i];
        if (s->tab)
            while (s->lru.lnext != &s->lru) {
                ent *e = s->lru.lnext;
                e->refs = 0;
                ent_drop(c, ent_kill(s, e));
            }
        free(s->tab);
        pthread_mutex_destroy(&s->lock);
    }
    while (c->doomed) {
        ent *e = c->doomed;
        c->doomed = e->hnext;
        ent_drop(c, e);
    }
    free(c->by_rel);
    free(c->by_wd);
    while (c->doomed_w) { /* their watches go with the inotify descriptor */
        watch *w = c->doomed_w;
        c->doomed_w = w->next_rel;
        free(w);
    }
    if (c->ifd >= 0) close(c->ifd);
    pthread_mutex_destroy(&c->wlock);
    pthread_mutex_destroy(&c->doom_lock);
    if (c->freq) pthread_mutex_destroy(&c->freq_lock);
    free(c->freq);
    if (c->arena) munmap(c->arena, c->arena_slots * ARENA_SLOT);
    pthread_mutex_destroy(&c->arena_lock);
    free(c);
}

/* ---- watches ---- */

static size_t rel_hash(const char *rel, size_t n)
{
    return (size_t)hash(0, 0, rel, n);
}

static watch *watch_by_wd(sl_fdc *c, int wd)
{
    for (watch *w = c->by_wd[(size_t)wd & (c->wnb - 1)]; w; w = w->next_wd)
        if (w->wd == wd && !w->dead) return w;
    return NULL;
}

/* Twice the buckets once there are twice as many watches as buckets. wlock held. */
static void watch_grow(sl_fdc *c)
{
    size_t nb = c->wnb * 2;
    watch **by_rel = calloc(nb, sizeof *by_rel), **by_wd = calloc(nb, sizeof *by_wd);
    if (!by_rel || !by_wd) { /* longer chains, still right */
        free(by_rel);
        free(by_wd);
        return;
    }
    for (size_t i = 0; i < c->wnb; i++) {
        for (watch *w = c->by_rel[i], *next; w; w = next) {
            next = w->next_rel;
            size_t b = rel_hash(w->rel, strlen(w->rel)) & (nb - 1);
            w->next_rel = by_rel[b];
            by_rel[b] = w;
        }
        for (watch *w = c->by_wd[i], *next; w; w = next) {
            next = w->next_wd;
            size_t b = (size_t)w->wd & (nb - 1);
            w->next_wd = by_wd[b];
            by_wd[b] = w;
        }
    }
    free(c->by_rel);
    free(c->by_wd);
    c->by_rel = by_rel;
    c->by_wd = by_wd;
    c->wnb = nb;
}

/* The kernel's watch of dirpath/rel[0..n) (dirpath itself when n is 0) with mask: its wd, or -1
 * (a path too long, out of watches: said once). wlock held. */
static int add_watch(sl_fdc *c, const char *dirpath, const char *rel, size_t n, uint32_t mask)
{
    char abs[4200];
    int k = snprintf(abs, sizeof abs, "%s%s%.*s", dirpath, n ? "/" : "", (int)n, rel);
    if (k < 0 || (size_t)k >= sizeof abs) return -1;
    int wd = inotify_add_watch(c->ifd, abs, mask);
    static bool told;
    if (wd < 0 && errno == ENOSPC && !__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
        sl_log("inotify: out of watches (fs.inotify.max_user_watches); further files are not "
               "kept open");
    return wd;
}

/* Room in the tables for one more watch. wlock held. */
static void watch_room(sl_fdc *c)
{
    if (c->n_watches >= 2 * c->wnb) watch_grow(c);
}

/* The live watch of directory rel (relative to dirpath), made if need be. wlock held. */
static watch *watch_get(sl_fdc *c, const char *dirpath, const char *rel, size_t n)
{
    /* None while resting: the rest's teardown may not have removed the kernel's watch of this
     * directory yet, and inotify_add_watch would hand back that watch's wd, which the teardown
     * then removes under the new one. (rest_begin sets the flag before it takes wlock.) */
    if (__atomic_load_n(&c->resting, __ATOMIC_ACQUIRE)) return NULL;
    size_t b = rel_hash(rel, n) & (c->wnb - 1);
    for (watch *w = c->by_rel[b]; w; w = w->next_rel)
        if (!w->dead && strlen(w->rel) == n && !memcmp(w->rel, rel, n)) return w;
    int wd = add_watch(c, dirpath, rel, n, DIR_MASK);
    if (wd < 0) return NULL;
    /* The kernel gives one wd per directory: a renamed path may come back to a watch we have
     * under another name; that one is stale now. */
    watch *old = watch_by_wd(c, wd);
    if (old) {
        old->dead = true;
        moved(c);
    }
    A_INC(c->evseq); /* a watch made: its directory's earlier changes were never events */
    watch_room(c);
    b = rel_hash(rel, n) & (c->wnb - 1);
    watch *w = calloc(1, sizeof *w + n + 1);
    if (!w) return NULL;
    w->wd = wd;
    memcpy(w->rel, rel, n);
    w->next_rel = c->by_rel[b];
    c->by_rel[b] = w;
    w->next_wd = c->by_wd[(size_t)wd & (c->wnb - 1)];
    c->by_wd[(size_t)wd & (c->wnb - 1)] = w;
    c->n_watches++;
    return w;
}

/* A hold on the watch of the file at dirpath/file (made if need be; shared with the other
 * entries of the same inode, which the kernel gives the same wd). NULL when it cannot be had.
 * The caller checks afterwards that the path still leads to the file it opened. wlock held. */
static watch *watch_file(sl_fdc *c, const char *dirpath, const char *file)
{
    if (__atomic_load_n(&c->resting, __ATOMIC_ACQUIRE)) return NULL; /* as in watch_get */
    int wd = add_watch(c, dirpath, file, strlen(file), FILE_MASK);
    if (wd < 0) return NULL;
    watch *w = watch_by_wd(c, wd);
    if (w && !w->file) {
        /* The path led to one of our directories by now (replaced between the open and here):
         * that watch's mask is a file's now. It is not trusted any more (watch_get makes it
         * again), nor is anything cached. */
        w->dead = true;
        moved(c);
        return NULL;
    }
    if (w) {
        w->refs++;
        return w;
    }
    watch_room(c);
    if (!(w = calloc(1, sizeof *w + 1))) {
        inotify_rm_watch(c->ifd, wd);
        return NULL;
    }
    w->wd = wd;
    w->file = true;
    w->refs = 1;
    w->next_wd = c->by_wd[(size_t)wd & (c->wnb - 1)];
    c->by_wd[(size_t)wd & (c->wnb - 1)] = w;
    c->n_watches++;
    return w;
}

/* An entry lets go of its file's watch: the last removes it, from the kernel too unless the
 * kernel dropped it first (IN_IGNORED). A wd not in the tables (a rest took every watch) is
 * nobody's: the kernel allocates wds cyclically, so it is not another watch's by now. Takes
 * wlock. */
static void file_watch_release(sl_fdc *c, int wd)
{
    pthread_mutex_lock(&c->wlock);
    for (watch **pp = c->by_wd ? &c->by_wd[(size_t)wd & (c->wnb - 1)] : NULL; pp && *pp;
         pp = &(*pp)->next_wd) {
        watch *w = *pp;
        if (w->wd != wd || !w->file) continue;
        if (--w->refs == 0) {
            *pp = w->next_wd;
            c->n_watches--;
            if (!w->dead) inotify_rm_watch(c->ifd, wd);
            free(w);
        }
        break;
    }
    pthread_mutex_unlock(&c->wlock);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sl_fdc_drain(sl_fdc *c)
{
    if (c->ifd < 0) return;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    pthread_mutex_lock(&c->wlock);
    /* Stamped before the read: a change queued after this instant is read by a later drain. */
    __atomic_store_n(&c->last_drain_ns, mono_ns(), __ATOMIC_RELAXED);
    for (;;) {
        ssize_t n = read(c->ifd, buf, sizeof buf);
        if (n <= 0) break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                moved(c);
                continue;
            }
            watch *w = watch_by_wd(c, ev->wd);
            if (!w) continue;
            if (!w->file) A_INC(c->evseq); /* a name in a directory may lead elsewhere now */
            if (w->file) {
                /* Written, truncated, chmod, touched, linked or unlinked under any name; or
                 * gone from the kernel (its file system unmounted): its entries only. */
                if (ev->mask & IN_IGNORED) w->dead = true;
                A_INC(w->gen);
            } else if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                w->dead = ev->mask & IN_IGNORED ? true : w->dead;
                moved(c);
            } else if ((ev->mask & IN_ISDIR) || ev->len == 0) {
                /* A subdirectory renamed or removed, or the directory itself changed: paths
                 * below may lead elsewhere now. */
                moved(c);
            } else {
                A_INC(w->gen);
            }
        }
    }
    pthread_mutex_unlock(&c->wlock);
}

static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
    sl_fdc_drain(arg);
}

struct event *sl_fdc_watch(sl_fdc *c, struct event_base *base)
{
    if (c->ifd < 0) return NULL;
    struct event *ev = event_new(base, c->ifd, EV_READ | EV_PERSIST, on_inotify, c);
    if (!ev) return NULL;
    event_priority_set(ev, 0); /* before the connections of the same wake-up */
    if (event_add(ev, NULL) < 0) {
        event_free(ev);
        return NULL;
    }
    return ev;
}

/* ---- entries ---- */

/* simple: is the path still the file we keep? Without waiting for the disk. */
static bool still_same(const ent *e)
{
    /* From the dentry cache only, so a check on the loop never waits for the disk (a path
     * that fell out of it counts as changed: it is opened again the ordinary way). Where the
     * kernel cannot answer that way, the ordinary walk: else nothing would ever be cached. */
    int fd = sl_open_beneath_ex(e->dirfd, e->file, O_PATH | O_CLOEXEC, false,
                                sl_open_cached_works());
    if (fd < 0) return false;
    struct stat st;
    int r = fstat(fd, &st);
    close(fd);
    const struct stat *o = &e->pub.st;
    return r == 0 && st.st_ino == o->st_ino && st.st_dev == o->st_dev &&
           st.st_size == o->st_size && st.st_mtim.tv_sec == o->st_mtim.tv_sec &&
           st.st_mtim.tv_nsec == o->st_mtim.tv_nsec && st.st_ctim.tv_sec == o->st_ctim.tv_sec &&
           st.st_ctim.tv_nsec == o->st_ctim.tv_nsec;
}

static ent *find(shard *s, uint64_t h, int dirfd, unsigned key, const char *path, size_t len)
{
    ent *e = s->tab[BUCKET(h, s->nb)];
    while (e && !(e->h == h && e->dirfd == dirfd && e->key == key && e->len == len &&
                  !memcmp(e->path, path, len)))
        e = e->hnext;
    return e;
}

/* The sketch's four counters of h, all in one 64-byte block of the sketch (a blocked count-min
 * sketch, as Caffeine's): a count touches one cache line instead of four, which every request
 * pays (a sketch of eight counters per entry is 128 KiB for 15,648 entries, and the files sent
 * through the caches push it out: four misses were 0.13 us of a request). The block comes from
 * the high bits of a remixed hash, each counter from four of its low bits, in its own quarter of
 * the block so that no two of the four are the same counter. */
static size_t freq_slot(const sl_fdc *c, uint64_t h, int i)
{
    uint64_t m = (h ^ (h >> 31)) * 0x9e3779b97f4a7c15ull;
    size_t block = (size_t)(m >> 32) & c->freq_mask & ~(size_t)63;
    return block | (size_t)i << 4 | ((size_t)(m >> (4 * i)) & 15);
}

static unsigned freq_estimate(const sl_fdc *c, uint64_t h)
{
    unsigned est = FREQ_MAX;
    for (int i = 0; i < 4; i++) {
        unsigned v = __atomic_load_n(&c->freq[freq_slot(c, h, i)], __ATOMIC_RELAXED);
        if (v < est) est = v;
    }
    return est;
}

/* Count one request for h; returns the new estimate. */
static unsigned freq_add(sl_fdc *c, uint64_t h)
{
    unsigned est = FREQ_MAX;
    for (int i = 0; i < 4; i++) {
        uint8_t *p = &c->freq[freq_slot(c, h, i)];
        unsigned v = __atomic_load_n(p, __ATOMIC_RELAXED);
        if (v < FREQ_MAX) __atomic_store_n(p, (uint8_t)++v, __ATOMIC_RELAXED);
        if (v < est) est = v;
    }
    if (A_INC(stripe_of(c)->freq_adds) % c->freq_batch == 0 &&
        __atomic_add_fetch(&c->freq_adds, c->freq_batch, __ATOMIC_RELAXED) >= c->freq_period &&
        pthread_mutex_trylock(&c->freq_lock) == 0) {
        /* Age: what was popular long ago counts half. Whoever crosses the mark does it; the
         * others go on (their increments meanwhile may be lost or halved: lossy by design). */
        if (__atomic_load_n(&c->freq_adds, __ATOMIC_RELAXED) >= c->freq_period) {
            for (size_t i = 0; i <= c->freq_mask; i++)
                __atomic_store_n(&c->freq[i],
                                 (uint8_t)(__atomic_load_n(&c->freq[i], __ATOMIC_RELAXED) >> 1),
                                 __ATOMIC_RELAXED);
            __atomic_store_n(&c->freq_adds, 0, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&c->freq_lock);
    }
    return est;
}

/* The count a file needs to be kept. An insert costs about what three hits save (its watches
 * and the kernel's memory for them: 5-9 us, against the 2 us of an open, an fstat and a close a
 * hit saves, bench/results/2026-11-29-cheaper-insert), so a file is kept from its second
 * request on only while the entries kept so far (since the cache was last empty: its start or
 * a rest) have earned EARN_HITS hits each, or for the first eighth of the cache's capacity (a
 * small site is kept at once); otherwise from its WARY_COUNT-th. (Two hits rather than three:
 * in a simulation of both sets, as short a first second and a fill almost as fast after it.)
 * Measured there: a fresh server's first 50,000 requests over 20,000 files, each asked for about
 * 2.5 times, made 14,433 inserts for 17,431 hits, and seekless was 0.96x nginx with the cache
 * against 1.05x without. Entries that earn their keep (a working set asked for again and again)
 * soon bring the count back to two, so a long run fills almost as fast as before. */
#define EARN_HITS 2
#define WARY_COUNT 6

static unsigned admit_count(const sl_fdc *c)
{
    uint64_t ins = A_GET(c->inserts) - A_GET(c->earn_ins0);
    if (ins < c->boot) return 2;
    uint64_t hits = hits_of(c) - A_GET(c->earn_hits0);
    return hits >= EARN_HITS * ins ? 2 : WARY_COUNT;
}

/* Whether a newcomer asked for est times lately displaces an entry asked for victim times: by
 * half as many again and one more. Counts of files asked for at the same rate differ by chance
 * (requests at random, the sketch's halving), and a newcomer that merely drew more than its
 * victim would be pure churn: each costs an insert's system calls and the victim's close and
 * watch removal (the kernel frees an inotify mark in a worker after an SRCU grace period,
 * tens of microseconds). Measured on 20,000 files of 100 KiB asked for at random with 15,648
 * held, "more often" alone kept evicting 3 entries per 100 requests after the cache had
 * filled, at 1-4 us more CPU per request than no cache at all
 * (bench/results/2026-11-29-admission-margin). A file that really became popular still gets in,
 * and the halving brings an old favourite within reach. */
static bool beats(unsigned est, unsigned victim)
{
    return est > victim + victim / 2 + 1;
}

/* The rival a newcomer to a full shard must beat (shard locked): the oldest entry nobody holds,
 * where the eviction sweep starts (whether it was hit since is not looked at: reading the
 * entries behind it to find one that was not costs a cache miss each, on every admission, and
 * the rivalry is about how often each is asked for anyway); NULL when every entry is held. */
static ent *victim(shard *s)
{
    ent *v = s->lru.lprev;
    while (v != &s->lru && v->refs > 0) v = v->lprev;
    return v == &s->lru ? NULL : v;
}

bool sl_fdc_admit(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len)
{
    if (!c || c->mode == SL_FDC_DISABLE || __atomic_load_n(&c->resting, __ATOMIC_RELAXED))
        return false;
    uint64_t h = hash(dirfd, key, path, len);
    unsigned est = freq_add(c, h);
    bool admit = est >= 2 && est >= admit_count(c);
    if (admit) {
        /* A full shard: only for a file asked for more often than the one it would evict. */
        shard *s = &c->sh[h % SHARDS];
        pthread_mutex_lock(&s->lock);
        if (s->n >= s->cap) {
            ent *v = victim(s);
            admit = !v || beats(est, freq_estimate(c, v->h));
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (!admit) A_INC(c->deferred);
    return admit;
}

sl_fdc_entry *sl_fdc_get(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len,
                         uint64_t now_ms)
{
    if (!c || c->mode == SL_FDC_DISABLE) return NULL;
    if (__atomic_load_n(&c->resting, __ATOMIC_RELAXED)) {
        pay_teardown(c, TEARDOWN_FILES, TEARDOWN_WATCHES);
        return NULL;
    }
    /* A change that completed before this request was read must count, even when the loop has
     * not been back to epoll since (a request read right after another, or accepted in the same
     * batch). A change queued while a loop waits in epoll is read first when it wakes (the
     * queue's event has the first priority); one queued while loops work is read by the first
     * hit more than DRAIN_EVERY_NS after the last read: so a request read more than 1 ms after a
     * change completed is answered from the new file, and a busy server reads the queue about
     * once a millisecond instead of once a hit (a read() that says EAGAIN costs a system call). */
    uint64_t h = hash(dirfd, key, path, len);
    shard *s = &c->sh[h % SHARDS];
    pthread_mutex_lock(&s->lock);
    ent *e = find(s, h, dirfd, key, path, len);
    if (e && c->mode == SL_FDC_INOTIFY &&
        mono_ns() - __atomic_load_n(&c->last_drain_ns, __ATOMIC_RELAXED) > DRAIN_EVERY_NS) {
        /* Only when there is an entry to trust (a miss opens the path anyway): the drain takes
         * the watch lock, which is never held with a shard's, so look again after it. */
        pthread_mutex_unlock(&s->lock);
        sl_fdc_drain(c);
        pthread_mutex_lock(&s->lock);
        e = find(s, h, dirfd, key, path, len);
    }
    if (!e) {
        pthread_mutex_unlock(&s->lock);
        count_lookup(c, false);
        return NULL;
    }
    bool ok;
    if (c->mode == SL_FDC_INOTIFY) {
        ok = e->ggen == A_GET(c->ggen) && e->wgen == A_GET(e->w->gen) &&
             e->fwgen == A_GET(e->fw->gen);
        /* What no watch sees (a directory's own permissions): the path, once a minute. */
        if (ok && now_ms - e->checked_ms >= REVALIDATE_MS) {
            ok = still_same(e);
            if (ok) e->checked_ms = now_ms;
        }
    } else {
        /* Trusted within a second of the check, which only a check moves (a hit must not, or a
         * file asked for more often than once a second would never be checked again). */
        ok = now_ms - e->checked_ms < SIMPLE_MS;
        if (!ok && (ok = still_same(e))) e->checked_ms = now_ms;
    }
    if (!ok) {
        ent *dead = ent_kill(s, e);
        pthread_mutex_unlock(&s->lock);
        if (dead) ent_drop(c, dead);
        A_INC(c->invalidations);
        count_lookup(c, false);
        return NULL;
    }
    e->refs++;
    /* CLOCK instead of moving the entry to the front: a hit writes only its own entry, not its
     * neighbours and the shard's list head (cache lines another loop wrote last, with several
     * loops); the eviction sweep gives a hit entry its second chance. */
    e->referenced = true;
    pthread_mutex_unlock(&s->lock);
    count_lookup(c, true);
    freq_add(c, h); /* an entry's popularity is what a newcomer must beat */
    return &e->pub;
}

uint64_t sl_fdc_mark(sl_fdc *c)
{
    return c ? 1 + A_GET(c->evseq) : 0;
}

sl_fdc_entry *sl_fdc_put(sl_fdc *c, int dirfd, const char *dirpath, unsigned key,
                         const char *path, size_t len, const char *file, int fd,
                         const struct stat *st, uint64_t now_ms, uint64_t mark)
{
    if (!c || c->mode == SL_FDC_DISABLE || !S_ISREG(st->st_mode) ||
        __atomic_load_n(&c->resting, __ATOMIC_RELAXED))
        return NULL;
    watch *w = NULL, *fw = NULL;
    int fwd = 0; /* fw's wd, read under wlock (a rest may free fw once it is let go) */
    bool quiet = false; /* no directory event read and no directory watch made since mark */
    /* Changes already queued count before the entry, not after it, when the queue was last
     * read more than DRAIN_EVERY_NS ago (as a hit reads it). One queued since and not read yet is
     * read after the entry took its generations, so it makes the entry invalid, never stale
     * past that bound: the entry's descriptor was opened after the change anyway, and a change
     * between the open and this offer is what the mark and the re-check below are for. (Saves a
     * read() that says EAGAIN, 0.55 us of an insert's 4.5, while the cache fills.) */
    if (c->mode == SL_FDC_INOTIFY &&
        mono_ns() - __atomic_load_n(&c->last_drain_ns, __ATOMIC_RELAXED) > DRAIN_EVERY_NS)
        sl_fdc_drain(c);
    unsigned wgen = 0, fwgen = 0, ggen = A_GET(c->ggen);
    if (c->mode == SL_FDC_INOTIFY) {
        /* Watch every directory on the way down and the file, then look again: a change after
         * the watches exist is an event; one before them shows here. (Were the file's watch
         * put on another inode, the path was changed after the directory's watch existed: that
         * is an event of the directory's, which this entry's wgen predates.) */
        size_t flen = strlen(file);
        pthread_mutex_lock(&c->wlock);
        w = watch_get(c, dirpath, "", 0);
        for (size_t i = 0; w && i < flen; i++)
            if (file[i] == '/') w = watch_get(c, dirpath, file, i);
        if (w) {
            wgen = A_GET(w->gen);
            fw = watch_file(c, dirpath, file);
            if (fw) {
                fwgen = A_GET(fw->gen);
                fwd = fw->wd;
            }
        }
        quiet = mark && mark == 1 + A_GET(c->evseq);
        pthread_mutex_unlock(&c->wlock);
        if (!fw) return NULL;
        ent probe = {.dirfd = dirfd, .pub.st = *st};
        probe.file = (char *)file;
        struct stat now_st;
        /* The path looked at again, unless it cannot have changed since the caller opened it:
         * every directory on the way had its watch before the mark was taken (before the open),
         * and no event of theirs has been read since. One queued and not read yet moves its
         * directory's generation after wgen was read here, so the entry is invalid at its
         * first lookup. (Saves an O_PATH open, an fstat and a close, 2 us of an insert's 6.) */
        if (fstat(fd, &now_st) < 0 || (!quiet && !still_same(&probe)) ||
            now_st.st_size != st->st_size ||
            now_st.st_mtim.tv_nsec != st->st_mtim.tv_nsec ||
            now_st.st_mtim.tv_sec != st->st_mtim.tv_sec) {
            file_watch_release(c, fwd);
            return NULL;
        }
    }
    size_t flen = strlen(file);
    ent *e = ent_alloc(c, sizeof *e + len + 1 + flen + 1);
    if (!e) {
        if (fwd) file_watch_release(c, fwd);
        return NULL;
    }
    char *f = e->path + len + 1; /* the file's path after the request's, in the same block */
    memcpy(f, file, flen + 1);
    e->pub.fd = fd;
    e->pub.st = *st;
    e->h = hash(dirfd, key, path, len);
    e->dirfd = dirfd;
    e->key = key;
    e->len = len;
    memcpy(e->path, path, len);
    e->file = f;
    e->pub.file = f;
    e->w = w;
    e->wgen = wgen;
    e->fw = fw;
    e->fwd = fwd;
    e->fwgen = fwgen;
    e->ggen = ggen;
    e->checked_ms = now_ms;
    e->refs = 1;
    shard *s = &c->sh[e->h % SHARDS];
    pthread_mutex_lock(&s->lock);
    size_t b = BUCKET(e->h, s->nb);
    for (ent *x = s->tab[b]; x; x = x->hnext) {
        if (x->h == e->h && x->dirfd == dirfd && x->key == key && x->len == len &&
            !memcmp(x->path, path, len)) {
            /* Another loop put it first: keep theirs, the caller keeps its fd. */
            pthread_mutex_unlock(&s->lock);
            e->pub.fd = -1;
            ent_drop(c, e);
            return NULL;
        }
    }
    /* Room: a CLOCK sweep from the oldest end. An entry hit since the sweep last passed it gets
     * a second chance (to the front, unmarked); one nobody hit nor holds goes (dropped once the
     * shard is unlocked: its watches take the watch lock); a held one stays. Each entry is
     * passed at most twice (once marked, once moved to the front), so the sweep ends. */
    ent *evicted = NULL;
    for (ent *x = s->lru.lprev; s->n >= s->cap && x != &s->lru;) {
        ent *prev = x->lprev;
        if (x->refs == 0 && !x->referenced) {
            ent *d = ent_kill(s, x);
            d->hnext = evicted;
            evicted = d;
            A_INC(c->evictions);
        } else if (x->referenced) {
            x->referenced = false;
            x->lprev->lnext = x->lnext;
            x->lnext->lprev = x->lprev;
            x->lnext = s->lru.lnext;
            x->lprev = &s->lru;
            s->lru.lnext->lprev = x;
            s->lru.lnext = x;
        }
        x = prev;
    }
    bool room = s->n < s->cap;
    if (room) {
        e->hnext = s->tab[b];
        s->tab[b] = e;
        e->lnext = s->lru.lnext;
        e->lprev = &s->lru;
        s->lru.lnext->lprev = e;
        s->lru.lnext = e;
        e->linked = true;
        s->n++;
    }
    pthread_mutex_unlock(&s->lock);
    while (evicted) {
        ent *d = evicted;
        evicted = d->hnext;
        ent_drop(c, d);
    }
    if (!room) {
        e->pub.fd = -1;
        ent_drop(c, e);
        return NULL;
    }
    A_INC(c->inserts);
    return &e->pub;
}

void sl_fdc_release(sl_fdc *c, sl_fdc_entry *pub)
{
    ent *e = (ent *)pub;
    shard *s = &c->sh[e->h % SHARDS];
    pthread_mutex_lock(&s->lock);
    bool drop = --e->refs == 0 && !e->linked;
    pthread_mutex_unlock(&s->lock);
    if (drop) ent_drop(c, e);
}

void sl_fdc_forget(sl_fdc *c, sl_fdc_entry *pub)
{
    ent *e = (ent *)pub;
    shard *s = &c->sh[e->h % SHARDS];
    pthread_mutex_lock(&s->lock);
    if (e->linked) {
        (void)ent_kill(s, e); /* held: not dropped here */
        A_INC(c->invalidations);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Entries in the cache now, and (cap) how many it may hold. */
static size_t entries(sl_fdc *c, size_t *cap)
{
    size_t n = 0, room = 0;
    for (size_t i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&c->sh[i].lock);
        n += c->sh[i].n;
        room += c->sh[i].cap;
        pthread_mutex_unlock(&c->sh[i].lock);
    }
    if (cap) *cap = room;
    return n;
}

/* Rest: every entry out (a held one closes when its holder lets go) and every watch removed, so
 * no directory costs the kernel a look per file operation any more. Only taken out here: the
 * closes and the inotify_rm_watch calls (thousands of each: a loop that made them at once
 * stalled every connection it had, 11-12 ms for 3,445 files and their directories, 34-38 ms for
 * 15,648) are paid a few per lookup by
 * the lookups that find the cache resting (pay_teardown), the rest by sl_fdc_tick before the
 * rest ends. */
static void rest_begin(sl_fdc *c)
{
    /* First: watch_get adds no watch from here on (it reads the flag under wlock). */
    __atomic_store_n(&c->resting, true, __ATOMIC_RELEASE);
    A_INC(c->rests);
    ent *doomed = NULL;
    watch *doomed_w = NULL;
    size_t n = 0;
    for (size_t i = 0; i < SHARDS; i++) {
        shard *s = &c->sh[i];
        pthread_mutex_lock(&s->lock);
        for (ent *e = s->lru.lnext, *next; e != &s->lru; e = next) {
            next = e->lnext;
            e->linked = false;
            e->fwd = 0; /* its file's watch goes with the others below */
            if (e->refs == 0) { /* a held one is freed by its last sl_fdc_release */
                e->hnext = doomed;
                doomed = e;
                n++;
            }
        }
        s->lru.lnext = s->lru.lprev = &s->lru;
        memset(s->tab, 0, s->nb * sizeof *s->tab);
        s->n = 0;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&c->wlock);
    for (size_t i = 0; c->by_wd && i < c->wnb; i++) {
        /* Every watch is in by_wd once (a file's only there). A held entry killed before the
         * rest still counts on its file's watch: its release finds the wd gone and lets be. */
        while (c->by_wd[i]) {
            watch *w = c->by_wd[i];
            c->by_wd[i] = w->next_wd;
            w->next_rel = doomed_w;
            doomed_w = w;
            n++;
        }
        c->by_rel[i] = NULL;
    }
    c->n_watches = 0;
    pthread_mutex_unlock(&c->wlock);
    pthread_mutex_lock(&c->doom_lock);
    for (ent *e = doomed, *next; e; e = next) {
        next = e->hnext;
        e->hnext = c->doomed;
        c->doomed = e;
    }
    for (watch *w = doomed_w, *next; w; w = next) {
        next = w->next_rel;
        w->next_rel = c->doomed_w;
        c->doomed_w = w;
    }
    __atomic_add_fetch(&c->doomed_n, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->doom_lock);
    /* After the watches are out of the tables: a put that began before the flag and got one of
     * them read the generation before this, so its entry is invalid at its first lookup, which
     * then never reads the freed watch (sl_fdc_get compares the generations in that order). The
     * removals' IN_IGNORED events find no watch and are skipped. */
    moved(c);
}

/* Up to files of the rest's files closed and watches of its watches removed (SIZE_MAX: all,
 * waiting for doom_lock; else none when another thread is paying). */
static void pay_teardown(sl_fdc *c, size_t files, size_t watches)
{
    if (!__atomic_load_n(&c->doomed_n, __ATOMIC_ACQUIRE)) return;
    if (files == SIZE_MAX)
        pthread_mutex_lock(&c->doom_lock);
    else if (pthread_mutex_trylock(&c->doom_lock) != 0)
        return;
    size_t paid = 0;
    for (; c->doomed && paid < files; paid++) {
        ent *e = c->doomed;
        c->doomed = e->hnext;
        ent_drop(c, e); /* no file watch of its own any more (rest_begin) */
    }
    for (size_t k = 0; c->doomed_w && k < watches; k++, paid++) {
        watch *w = c->doomed_w;
        c->doomed_w = w->next_rel;
        /* The kernel may have removed it already (the directory went): EINVAL, harmless. Its
         * wd is not reused meanwhile: no watch is added before the teardown is over. */
        if (!w->dead && c->ifd >= 0) inotify_rm_watch(c->ifd, w->wd);
        free(w);
    }
    __atomic_sub_fetch(&c->doomed_n, paid, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->doom_lock);
}

/* The last FUTILE_WINDOW lookups: rest when the cache was full and hit too little, twice in a
 * row. Run by the thread whose lookup ends a window; judge_lock keeps it to one at a time. */
static void judge(sl_fdc *c)
{
    if (pthread_mutex_trylock(&c->judge_lock) != 0) return;
    uint64_t hits = hits_of(c), lookups = hits + misses_of(c);
    uint64_t l = lookups - c->judge_lookups, h = hits - c->judge_hits;
    c->judge_lookups = lookups;
    c->judge_hits = hits;
    size_t cap, n = entries(c, &cap);
    /* The entries the window's lookups met: the average, as the cache grows while it is judged
     * (measured at the end alone, a filling cache would project too few hits). */
    size_t avg = (c->judge_n + n) / 2;
    c->judge_n = n;
    bool full = n * 10 >= cap * 9;
    /* Filling: projected (h / l x cap / avg), once it holds enough entries to tell. */
    bool futile = full ? h * 100 < l * FUTILE_HIT_PCT
                       : (avg * 8 >= cap || avg >= FUTILE_MIN_N) &&
                             h * 100 * (uint64_t)cap < l * FUTILE_HIT_PCT * (uint64_t)avg;
    if (l > 0 && futile) {
        if (++c->futile_streak >= 2 && !__atomic_load_n(&c->resting, __ATOMIC_RELAXED)) {
            rest_begin(c);
            c->rest_until_ns = mono_ns() + (uint64_t)c->rest_ms * 1000000u;
            sl_log("open-file cache: %llu%% hits over the last %llu lookups with %zu of %zu files "
                   "held (%llu%% if full): not caching for %.1fs",
                   (unsigned long long)(h * 100 / l), (unsigned long long)l, n, cap,
                   (unsigned long long)(avg ? h * 100 * cap / (l * avg) : 0), c->rest_ms / 1e3);
            c->rest_ms = c->rest_ms * 2 > REST_MAX_MS ? REST_MAX_MS : c->rest_ms * 2;
            c->futile_streak = 0;
        }
    } else {
        c->futile_streak = 0;
        if (h * 100 >= l * FUTILE_HIT_PCT) c->rest_ms = c->rest_min_ms;
    }
    pthread_mutex_unlock(&c->judge_lock);
}

/* Count a lookup; the one that ends a window judges it. */
static void count_lookup(sl_fdc *c, bool hit)
{
    stripe *st = stripe_of(c);
    if (hit)
        A_INC(st->hits);
    else
        A_INC(st->misses);
    /* Each thread ends a window after window_len lookups of its own; judge counts the lookups
     * of every thread since the last judgement. */
    if (A_INC(st->window) % c->window_len == 0) judge(c);
}

void sl_fdc_set_first_rest(sl_fdc *c, unsigned ms)
{
    pthread_mutex_lock(&c->judge_lock);
    c->rest_min_ms = c->rest_ms = ms;
    pthread_mutex_unlock(&c->judge_lock);
}

void sl_fdc_set_window(sl_fdc *c, unsigned lookups)
{
    pthread_mutex_lock(&c->judge_lock);
    c->window_len = lookups ? lookups : FUTILE_WINDOW;
    pthread_mutex_unlock(&c->judge_lock);
}

void sl_fdc_tick(sl_fdc *c)
{
    if (!c || !__atomic_load_n(&c->resting, __ATOMIC_ACQUIRE)) return;
    pay_teardown(c, TICK_FILES, TICK_WATCHES); /* a quiet server's share */
    pthread_mutex_lock(&c->judge_lock);
    if (mono_ns() >= c->rest_until_ns) {
        /* What the lookups left of the teardown (all of it when none came): before any watch
         * may be added again. */
        pay_teardown(c, SIZE_MAX, SIZE_MAX);
        c->judge_hits = hits_of(c);
        c->judge_lookups = c->judge_hits + misses_of(c);
        c->judge_n = 0; /* the rest emptied it */
        c->futile_streak = 0;
        /* Empty again: the first inserts are made from the second request as at the start. */
        __atomic_store_n(&c->earn_hits0, hits_of(c), __ATOMIC_RELAXED);
        __atomic_store_n(&c->earn_ins0, A_GET(c->inserts), __ATOMIC_RELAXED);
        __atomic_store_n(&c->resting, false, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->judge_lock);
}

void sl_fdc_get_stats(sl_fdc *c, sl_fdc_stats *out)
{
    memset(out, 0, sizeof *out);
    out->hits = hits_of(c);
    out->misses = misses_of(c);
    out->inserts = A_GET(c->inserts);
    out->invalidations = A_GET(c->invalidations);
    out->evictions = A_GET(c->evictions);
    out->deferred = A_GET(c->deferred);
    out->rests = A_GET(c->rests);
    out->resting = __atomic_load_n(&c->resting, __ATOMIC_RELAXED);
    out->entries = entries(c, NULL);
    pthread_mutex_lock(&c->wlock);
    out->watches = c->n_watches;
    pthread_mutex_unlock(&c->wlock);
}
