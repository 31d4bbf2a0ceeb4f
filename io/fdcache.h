/* The open-file cache (server.stat-cache-engine): files kept open, with their stat, so a hot
 * file costs no open(), fstat() or close() per request.
 *
 * One cache for the process, shared by every loop, in shards that each have a lock, a hash table
 * and a CLOCK list (a hit marks its entry; an eviction sweep gives a marked entry a second chance
 * and takes the first unmarked one nobody holds). An entry is found by the directory a path is
 * opened beneath, the open flags and the path. A request holds the entry it uses
 * (sl_fdc_release gives it back); an entry invalidated or evicted while held stays open until
 * the last holder lets go.
 *
 * How long a change can go unseen (the bound):
 *   inotify  every directory on a cached file's path is watched for its entries, and each
 *            cached file for itself. A change to a file through any of its names (write,
 *            truncate, chmod, touch, a link made or removed) invalidates its entries; a name of
 *            a directory moved or removed (rename over a file, delete) invalidates the entries
 *            of that directory; any change to a directory entry that is itself a directory
 *            (rename or removal of a subtree), a watch lost or an event queue overflow
 *            invalidates every entry. The kernel queues the event before the changing call
 *            returns; a loop that wakes from epoll reads the queue before its requests, and a
 *            hit reads it when it
 *            was last read more than 1 ms ago: a request read more than 1 ms after a change
 *            completed is always answered from the new file (one read() per millisecond on a
 *            busy server instead of one per hit). What no watch sees, a directory's own
 *            permissions changed (a watch for that would make the kernel look at the directory
 *            on every read of each of its files), is seen within a minute: an entry is also
 *            checked against its path, as simple does, when it is used 60 s or more after its
 *            last check (nginx's open_file_cache_valid).
 *   simple   lighttpd's: an entry is checked against the path (same inode, size, mtime, ctime)
 *            when it is used a second or more after its last check: a change is seen within
 *            one second. A file that ends before its cached size while it is sent is dropped
 *            at once (sl_fdc_forget): that answer is cut short, the next one is whole.
 *   disable  nothing is cached.
 * A file reached through a symlink is never cached (a change to its target's directory would go
 * unseen); the caller checks that before it offers a file.
 */
#ifndef SL_FDCACHE_H
#define SL_FDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

struct event_base;
struct event;

typedef enum { SL_FDC_DISABLE, SL_FDC_SIMPLE, SL_FDC_INOTIFY } sl_fdc_mode;

/* Bytes an entry keeps for its user (derived strings such as an ETag). */
#define SL_FDC_USER 96

/* A cached open file. fd and st are the caller's to read while it holds the entry. */
typedef struct sl_fdc_entry {
    int fd;
    struct stat st;
    const char *file;              /* the file's path, relative to the directory (no '/') */
    char user[SL_FDC_USER];        /* for the holder's derived data; user_set says it is filled */
    bool user_set;
} sl_fdc_entry;

typedef struct sl_fdc sl_fdc;

/* A cache of at most `capacity` open files. INOTIFY falls back to SIMPLE when inotify is not
 * available (logged). NULL on ENOMEM. */
sl_fdc *sl_fdc_new(sl_fdc_mode mode, size_t capacity);
/* Close every file (none may be held) and free the cache. */
void sl_fdc_free(sl_fdc *c);
/* The mode in effect. */
sl_fdc_mode sl_fdc_mode_of(const sl_fdc *c);

/* A loop's watch of the inotify queue, at the highest priority of base (which must have at
 * least two priorities). NULL when there is nothing to watch; free with event_free. */
struct event *sl_fdc_watch(sl_fdc *c, struct event_base *base);
/* Read the inotify queue now (the watch's callback, every lookup; tests). */
void sl_fdc_drain(sl_fdc *c);

/* The entry for path (relative to dirfd, no leading '/') opened with key (the open flags and
 * resolve rules, as the caller chose them), held, or NULL. now_ms: a monotonic clock in
 * milliseconds read for this request (sl_now_ns() / 1000000), not a loop's clock of seconds:
 * that lags by up to a second, differently in each loop, and "simple"'s bound would become two
 * seconds. */
sl_fdc_entry *sl_fdc_get(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len,
                         uint64_t now_ms);
/* Whether to offer the file at path (as for sl_fdc_get) to the cache, counting this request:
 * from its second request on (from its sixth while the files kept since the cache was last empty,
 * past the first eighth of its capacity, have not earned two hits each: an insert costs about
 * three), and when the cache is full only if it was asked for clearly more
 * often lately than the entry it would evict (half as often again and once more; a lossy count,
 * see fdcache.c). So a pool far larger than the cache, requested at random, costs a lookup and
 * not an insert and an eviction per request, and the popular files stay. A file not offered is
 * counted as deferred. */
bool sl_fdc_admit(sl_fdc *c, int dirfd, unsigned key, const char *path, size_t len);
/* A mark to take before opening a file that may be offered (sl_fdc_put): with it the cache
 * need not look at the path again when nothing that could have changed it happened since. 0
 * when c is NULL. */
uint64_t sl_fdc_mark(sl_fdc *c);
/* Offer fd, a regular file the caller opened as path beneath dirfd (dirpath is dirfd's
 * absolute path, for the watches; file is the path of the file actually opened, which differs
 * from path for an index file), with its stat. mark: sl_fdc_mark's, taken before the open (an
 * older one is as good), and only for a file opened with no symlink on its path (openat2
 * RESOLVE_NO_SYMLINKS); 0: none, the path is looked at again without following symlinks, which
 * also refuses a file reached through one (its target's changes reach no watch of the cache's).
 * On success the cache owns fd and the entry is returned held; NULL: not cached (full of held
 * entries, a watch could not be added, the file changed meanwhile), fd stays the caller's. */
sl_fdc_entry *sl_fdc_put(sl_fdc *c, int dirfd, const char *dirpath, unsigned key,
                         const char *path, size_t len, const char *file, int fd,
                         const struct stat *st, uint64_t now_ms, uint64_t mark);
/* Give an entry back. */
void sl_fdc_release(sl_fdc *c, sl_fdc_entry *e);
/* The held entry e was found not to be what its stat says (its file ended early while it was
 * sent: truncated within the bound above): take it out of the cache, counted as an
 * invalidation, so the next request opens the path again. It stays open for its holders until
 * each releases it. */
void sl_fdc_forget(sl_fdc *c, sl_fdc_entry *e);

/* Once a second, from one thread: while the cache rests (a cache that hits, or would hit full,
 * too little rests; see fdcache.c), close up to 1,024 of the files and remove up to 1,280 of the
 * watches it dropped, and end a rest that is over once every one is gone. A lookup that finds the
 * cache resting (sl_fdc_get) closes 2 and removes 4 itself. */
void sl_fdc_tick(sl_fdc *c);

/* How long the first rest lasts (10 s unless set; each further rest in a row lasts twice as
 * long, up to 300 s). */
void sl_fdc_set_first_rest(sl_fdc *c, unsigned ms);

/* Lookups per futility window (8192 unless set; 0: that default). For tests: smaller caches and
 * pools show the same judgement sooner. */
void sl_fdc_set_window(sl_fdc *c, unsigned lookups);

/* Counters for the status page. */
typedef struct sl_fdc_stats {
    uint64_t hits, misses, inserts, invalidations, evictions;
    uint64_t deferred;       /* requests counted and not offered to the cache (sl_fdc_admit) */
    uint64_t rests;          /* times the cache found itself futile and rested (fdcache.c) */
    bool resting;            /* resting now: nothing is cached */
    size_t entries, watches;
} sl_fdc_stats;
void sl_fdc_get_stats(sl_fdc *c, sl_fdc_stats *out);

#endif
