/* The open-file cache.
 *
 * Validity is a pair of generation numbers instead of lists to walk: every watched directory has
 * one, bumped by an event about a file in it, and the cache has one, bumped by anything that can
 * change what a path leads to beyond one directory (a directory renamed or removed, a watch
 * lost, the event queue overflowing). An entry remembers both numbers when it is made and is
 * valid while they have not moved, so an event costs an increment and a lookup compares two
 * integers. Watches live as long as the cache (a directory that held a cached file is likely to
 * hold another); the number of them is bounded by the directories of the tree and by the
 * kernel's max_user_watches, past which files simply are not cached.
 *
 * Admission (TinyLFU's idea): a lossy count of how often each path was asked for lately, a
 * count-min sketch of small counters shared by the loops (relaxed atomics: a lost increment
 * only makes a count one lower), halved every ten cache-fulls of requests so that old
 * popularity fades. A file is offered to the cache from its second request on, and when its
 * shard is full only if it was asked for more often than the entry it would evict. Keeping a
 * file costs several system calls (watches, a re-check, the victim's close): worth it for a file
 * that comes back more than what it replaces, not for each of a pool far larger than the cache
 * requested at random, where every insert would evict a file as likely to come back.
 *
 * Locks: each shard's lock guards its table, its LRU and its entries' hold counts; the watch
 * lock guards the watch tables. No code path holds both.
 */
#include "fdcache.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "log.h"
#include "openat.h"

#define SHARDS 16
#define WATCH_MASK                                                                                 \
    (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE |            \
     IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

typedef struct watch {
    struct watch *next_rel, *next_wd;
    int wd;
    unsigned gen;            /* atomic: bumped by an event about a file in the directory */
    bool dead;
    char rel[];              /* "" for the directory itself, else "a/b" */
} watch;

typedef struct ent {
    sl_fdc_entry pub;
    struct ent *hnext, *lprev, *lnext;
    uint64_t h;
    int dirfd;
    unsigned key;
    unsigned refs;
    bool linked;             /* in its shard's table and LRU */
    watch *w;                /* the directory of the file (inotify) */
    unsigned wgen, ggen;
    time_t checked;          /* simple: last checked against the path */
    char *file;              /* the path of the file opened (simple mode checks it) */
    size_t len;
    char path[];
} ent;

typedef struct shard {
    pthread_mutex_t lock;
    ent **tab;
    size_t nb;
    ent lru;                 /* sentinel: lru.lnext most recent */
    size_t n, cap;
} shard;

struct sl_fdc {
    sl_fdc_mode mode;
    shard sh[SHARDS];
    unsigned ggen;           /* atomic */
    int ifd;
    pthread_mutex_t wlock;
    watch **by_rel, **by_wd;
    size_t wnb, n_watches;
    uint64_t hits, misses, inserts, invalidations, evictions, deferred; /* atomic */
    uint8_t *freq;           /* admission: the count-min sketch (atomic counters) */
    size_t freq_mask;
    uint64_t freq_adds;      /* atomic: increments since the last halving */
    uint64_t freq_period;    /* halve every this many */
    pthread_mutex_t freq_lock; /* one halving at a time */
};

#define FREQ_MAX 15          /* counters saturate: "often" is enough to rank */

/* A shard is chosen by the hash's low bits, a bucket in it by the bits above them (by the low
 * bits again, a shard would use one bucket in SHARDS). */
#define BUCKET(h, nb) (((h) / SHARDS) & ((nb)-1))

#define A_INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)
#define A_GET(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

static uint64_t hash(int dirfd, unsigned key, const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)(unsigned)dirfd << 32 | key);
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

sl_fdc *sl_fdc_new(sl_fdc_mode mode, size_t capacity)
{
    sl_fdc *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mode = mode;
    c->ifd = -1;
    pthread_mutex_init(&c->wlock, NULL);
    size_t per = capacity / SHARDS;
    if (per < 4) per = 4;

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
    c->freq = calloc(slots, 1);
    if (!c->freq) goto fail;
    c->freq_mask = slots - 1;
    c->freq_period = 10 * per * SHARDS;
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

static void ent_free(ent *e)
{
    if (e->pub.fd >= 0) close(e->pub.fd);
    free(e->file);
    free(e);
}

/* Off the table and the LRU (shard locked); freed now unless held. */
static void ent_kill(shard *s, ent *e)
{
    if (!e->linked) return;
    ent **pp = &s->tab[BUCKET(e->h, s->nb)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext;
    e->lprev->lnext = e->lnext;
    e->lnext->lprev = e->lprev;
    e->linked = false;
    s->n--;
    if (e->refs == 0) ent_free(e);
}

void sl_fdc_free(sl_fdc *c)
{
    if (!c) return;
    for (size_t i = 0; i < SHARDS; i++) {
        shard *s = &c->sh[i];
        if (s->tab)
            while (s->lru.lnext != &s->lru) {
                ent *e = s->lru.lnext;
                e->refs = 0;
                ent_kill(s, e);
            }
        free(s->tab);
        pthread_mutex_destroy(&s->lock);
    }
    for (size_t i = 0; c->by_rel && i < c->wnb; i++)
        while (c->by_rel[i]) {
            watch *w = c->by_rel[i];
            c->by_rel[i] = w->next_rel;
            free(w);
        }
    free(c->by_rel);
    free(c->by_wd);
    if (c->ifd >= 0) close(c->ifd);
    pthread_mutex_destroy(&c->wlock);
    if (c->freq) pthread_mutex_destroy(&c->freq_lock);
    free(c->freq);
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

/* The live watch of directory rel (relative to dirpath), made if need be. wlock held. */
static watch *watch_get(sl_fdc *c, const char *dirpath, const char *rel, size_t n)
{
    size_t b = rel_hash(rel, n) & (c->wnb - 1);
    for (watch *w = c->by_rel[b]; w; w = w->next_rel)
        if (!w->dead && strlen(w->rel) == n && !memcmp(w->rel, rel, n)) return w;
    char abs[4200];
    int k = snprintf(abs, sizeof abs, "%s%s%.*s", dirpath, n ? "/" : "", (int)n, rel);
    if (k < 0 || (size_t)k >= sizeof abs) return NULL;
    int wd = inotify_add_watch(c->ifd, abs, WATCH_MASK);
    if (wd < 0) {
        static bool told;
        if (errno == ENOSPC && !told) {
            told = true;
            sl_log("inotify: out of watches (fs.inotify.max_user_watches); files in further "
                   "directories are not kept open");
        }
        return NULL;
    }
    /* The kernel gives one wd per directory: a renamed path may come back to a watch we have
     * under another name; that one is stale now. */
    watch *old = watch_by_wd(c, wd);
    if (old) {
        old->dead = true;
        A_INC(c->ggen);
    }
    if (c->n_watches >= 2 * c->wnb) {
        watch_grow(c);
        b = rel_hash(rel, n) & (c->wnb - 1);
    }
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

void sl_fdc_drain(sl_fdc *c)
{
    if (c->ifd < 0) return;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    pthread_mutex_lock(&c->wlock);
    for (;;) {
        ssize_t n = read(c->ifd, buf, sizeof buf);
        if (n <= 0) break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                A_INC(c->ggen);
                continue;
            }
            watch *w = watch_by_wd(c, ev->wd);
            if (!w) continue;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
                w->dead = ev->mask & IN_IGNORED ? true : w->dead;
                A_INC(c->ggen);
            } else if ((ev->mask & IN_ISDIR) || ev->len == 0) {
                /* A subdirectory renamed or removed, or the directory itself changed: paths
                 * below may lead elsewhere now. */
                A_INC(c->ggen);
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

/* The sketch's four counters of h: four 16-bit slices of a remixed hash. */
static size_t freq_slot(const sl_fdc *c, uint64_t h, int i)
{
    uint64_t m = (h ^ (h >> 31)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(m >> (16 * i)) & c->freq_mask;
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
    if (__atomic_add_fetch(&c->freq_adds, 1, __ATOMIC_RELAXED) >= c->freq_period &&
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

bool sl_fdc_admit(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len)
{
    if (!c || c->mode == SL_FDC_DISABLE) return false;
    uint64_t h = hash(dirfd, key, path, len);
    unsigned est = freq_add(c, h);
    bool admit = est >= 2;
    if (admit) {
        /* A full shard: only for a file asked for more often than the one it would evict. */
        shard *s = &c->sh[h % SHARDS];
        pthread_mutex_lock(&s->lock);
        if (s->n >= s->cap) {
            ent *v = s->lru.lprev;
            while (v != &s->lru && v->refs > 0) v = v->lprev;
            admit = v == &s->lru || est > freq_estimate(c, v->h);
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (!admit) A_INC(c->deferred);
    return admit;
}

sl_fdc_entry *sl_fdc_get(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len,
                         time_t now)
{
    if (!c || c->mode == SL_FDC_DISABLE) return NULL;
    /* A change that completed before this request was read must count, even when the loop has
     * not been back to epoll since (a request read right after another, or accepted in the same
     * batch): read the queue now. Nothing queued costs one read() that says EAGAIN. */
    uint64_t h = hash(dirfd, key, path, len);
    shard *s = &c->sh[h % SHARDS];
    pthread_mutex_lock(&s->lock);
    ent *e = find(s, h, dirfd, key, path, len);
    if (e && c->mode == SL_FDC_INOTIFY) {
        /* Only when there is an entry to trust (a miss opens the path anyway): the drain takes
         * the watch lock, which is never held with a shard's, so look again after it. */
        pthread_mutex_unlock(&s->lock);
        sl_fdc_drain(c);
        pthread_mutex_lock(&s->lock);
        e = find(s, h, dirfd, key, path, len);
    }
    if (!e) {
        pthread_mutex_unlock(&s->lock);
        A_INC(c->misses);
        return NULL;
    }
    bool ok;
    if (c->mode == SL_FDC_INOTIFY) {
        ok = e->ggen == A_GET(c->ggen) && e->wgen == A_GET(e->w->gen);
    } else {
        ok = now == e->checked || still_same(e);
        if (ok) e->checked = now;
    }
    if (!ok) {
        ent_kill(s, e);
        pthread_mutex_unlock(&s->lock);
        A_INC(c->invalidations);
        A_INC(c->misses);
        return NULL;
    }
    e->refs++;
    /* Most recent first. */
    e->lprev->lnext = e->lnext;
    e->lnext->lprev = e->lprev;
    e->lnext = s->lru.lnext;
    e->lprev = &s->lru;
    s->lru.lnext->lprev = e;
    s->lru.lnext = e;
    pthread_mutex_unlock(&s->lock);
    A_INC(c->hits);
    freq_add(c, h); /* an entry's popularity is what a newcomer must beat */
    return &e->pub;
}

sl_fdc_entry *sl_fdc_put(sl_fdc *c, int dirfd, const char *dirpath, unsigned key,
                         const char *path, size_t len, const char *file, int fd,
                         const struct stat *st, time_t now)
{
    if (!c || c->mode == SL_FDC_DISABLE || !S_ISREG(st->st_mode)) return NULL;
    watch *w = NULL;
    /* Changes already queued count before the entry, not after it. */
    if (c->mode == SL_FDC_INOTIFY) sl_fdc_drain(c);
    unsigned wgen = 0, ggen = A_GET(c->ggen);
    if (c->mode == SL_FDC_INOTIFY) {
        /* Watch every directory on the way down, then look again: a change after the watches
         * exist is an event; one before them shows here. */
        size_t flen = strlen(file);
        pthread_mutex_lock(&c->wlock);
        w = watch_get(c, dirpath, "", 0);
        for (size_t i = 0; w && i < flen; i++)
            if (file[i] == '/') w = watch_get(c, dirpath, file, i);
        if (w) wgen = A_GET(w->gen);
        pthread_mutex_unlock(&c->wlock);
        if (!w) return NULL;
        ent probe = {.dirfd = dirfd, .pub.st = *st};
        probe.file = (char *)file;
        struct stat now_st;
        if (fstat(fd, &now_st) < 0 || !still_same(&probe) || now_st.st_size != st->st_size ||
            now_st.st_mtim.tv_nsec != st->st_mtim.tv_nsec ||
            now_st.st_mtim.tv_sec != st->st_mtim.tv_sec)
            return NULL;
    }
    ent *e = calloc(1, sizeof *e + len + 1);
    char *f = e ? strdup(file) : NULL;
    if (!e || !f) {
        free(e);
        return NULL;
    }
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
    e->ggen = ggen;
    e->checked = now;
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
            ent_free(e);
            return NULL;
        }
    }
    /* Room: the least recently used entries nobody holds go. */
    for (ent *x = s->lru.lprev; s->n >= s->cap && x != &s->lru;) {
        ent *prev = x->lprev;
        if (x->refs == 0) {
            ent_kill(s, x);
            A_INC(c->evictions);
        }
        x = prev;
    }
    if (s->n >= s->cap) {
        pthread_mutex_unlock(&s->lock);
        e->pub.fd = -1;
        ent_free(e);
        return NULL;
    }
    e->hnext = s->tab[b];
    s->tab[b] = e;
    e->lnext = s->lru.lnext;
    e->lprev = &s->lru;
    s->lru.lnext->lprev = e;
    s->lru.lnext = e;
    e->linked = true;
    s->n++;
    pthread_mutex_unlock(&s->lock);
    A_INC(c->inserts);
    return &e->pub;
}

void sl_fdc_release(sl_fdc *c, sl_fdc_entry *pub)
{
    ent *e = (ent *)pub;
    shard *s = &c->sh[e->h % SHARDS];
    pthread_mutex_lock(&s->lock);
    if (--e->refs == 0 && !e->linked) ent_free(e);
    pthread_mutex_unlock(&s->lock);
}

void sl_fdc_get_stats(sl_fdc *c, sl_fdc_stats *out)
{
    memset(out, 0, sizeof *out);
    out->hits = A_GET(c->hits);
    out->misses = A_GET(c->misses);
    out->inserts = A_GET(c->inserts);
    out->invalidations = A_GET(c->invalidations);
    out->evictions = A_GET(c->evictions);
    out->deferred = A_GET(c->deferred);
    for (size_t i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&c->sh[i].lock);
        out->entries += c->sh[i].n;
        pthread_mutex_unlock(&c->sh[i].lock);
    }
    pthread_mutex_lock(&c->wlock);
    out->watches = c->n_watches;
    pthread_mutex_unlock(&c->wlock);
}
