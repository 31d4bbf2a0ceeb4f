/* The residency memo: files lately found wholly in the page cache.
 *
 * The hybrid network backend asks the kernel (cachestat) whether a block is in the page cache
 * before it sends it with sendfile() on the loop, since a page that is not would stall every
 * client of the loop on the disk. The question costs about 1.6 us for a 100 KiB file (the kernel
 * walks each page), a twentieth of serving it from the cache. A file whose every page was there
 * a moment ago is still there: the kernel evicts the pages least recently used, and these were
 * just read. So each loop remembers, per file, when it last found the whole file resident, and
 * trusts that for a while before asking again.
 *
 * How long is learnt, not assumed: it starts at SL_RESMEMO_TRUST_MS, and one trusted answer in
 * SL_RESMEMO_AUDIT_EVERY is checked with the kernel anyway (an audit). An audit that finds pages
 * gone halves the trust time (down to SL_RESMEMO_TRUST_MIN_MS: the page cache turns over fast,
 * memory is short); SL_RESMEMO_AUDITS_TO_GROW audits in a row that find all pages double it (up to
 * SL_RESMEMO_TRUST_MAX_MS). So a mistake costs one blocking read at most per audit period before
 * the memo trusts less.
 *
 * A file is known by device, inode, size and change time, so a file replaced, rewritten or
 * truncated is a different file to the memo. The memo is a fixed array of slots in sets of four,
 * a set chosen by a hash of device and inode: a newer file takes an empty slot of its set, else
 * the one whose file was found resident longest ago, and a look-up that finds its file in none of
 * the four is a miss. One per loop, touched only by its thread: no locks.
 */
#ifndef SL_RESMEMO_H
#define SL_RESMEMO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define SL_RESMEMO_TRUST_MS 2000     /* trust time at start */
#define SL_RESMEMO_TRUST_MIN_MS 125
#define SL_RESMEMO_TRUST_MAX_MS 16000
#define SL_RESMEMO_AUDIT_EVERY 32    /* one trusted answer in this many is checked anyway */
#define SL_RESMEMO_AUDITS_TO_GROW 16 /* clean audits in a row that double the trust time */

/* What makes a file the same file for the memo. ino == 0: unknown (never remembered). */
typedef struct sl_file_id {
    uint64_t dev, ino;
    int64_t size;
    int64_t ctime_ns;   /* st_ctim: any write, truncation or rename of the inode moves it */
} sl_file_id;

/* The memo: 2^bits slots, in sets of four. */
typedef struct sl_resmemo sl_resmemo;

/* Counters, for the status page. */
typedef struct sl_resmemo_stats {
    uint64_t trusted;   /* answers taken from the memo (the kernel not asked) */
    uint64_t audits;    /* trusted answers checked with the kernel anyway */
    uint64_t misses;    /* audits that found pages gone (each halved the trust time) */
    uint64_t trust_ms;  /* the trust time now */
} sl_resmemo_stats;

/* A memo of 2^bits slots (bits 2..24: one set to 2^22), or NULL when out of memory. */
sl_resmemo *sl_resmemo_new(unsigned bits);
void sl_resmemo_free(sl_resmemo *m);

/* The identity of the file st describes. */
void sl_file_id_of(sl_file_id *id, const struct stat *st);

/* The file will be asked about soon: start loading its slot into the CPU cache (the memo is
 * megabytes, and a slot is seldom in cache when its file is asked about again seconds later). */
void sl_resmemo_prefetch(const sl_resmemo *m, const sl_file_id *id);
/* May the whole of this file be taken to be in the page cache without asking the kernel (it was
 * found so within the trust time, and this is not an audit)? false for an unknown id, a NULL
 * memo, or when the caller must ask and then report with sl_resmemo_note. */
bool sl_resmemo_trust(sl_resmemo *m, const sl_file_id *id, uint64_t now_ms);
/* The kernel was asked about the file: `whole` when the range asked covered the whole file,
 * `resident` when every page of it was cached. Remembers or forgets the file, and settles an
 * audit that sl_resmemo_trust just asked for. */
void sl_resmemo_note(sl_resmemo *m, const sl_file_id *id, uint64_t now_ms, bool whole,
                     bool resident);

/* The counters (any thread may ask). */
void sl_resmemo_get_stats(const sl_resmemo *m, sl_resmemo_stats *st);

#endif
