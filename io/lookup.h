/* When a path lookup that missed the dentry cache may run on the event loop.
 *
 * A lookup the dentry cache cannot answer (openat2 RESOLVE_CACHED says EAGAIN) goes to a stat
 * thread, because it may read directories and inodes from the disk. Often it would not: the
 * dentries were reclaimed but the directory blocks and inodes are still in memory, and the
 * lookup costs a few microseconds of CPU, far less than the hand-off to a thread and back (two
 * wake-ups, a context switch each way). This policy, one per loop, watches how long such lookups
 * take and lets them run on the loop while they are fast, the way the hybrid network backend
 * sends resident pages inline:
 *   - Every lookup that missed the dentry cache is timed, on a thread or on the loop, and the
 *     caller says whether it slept (its thread's voluntary context switches grew: it waited for
 *     the disk, or for a lock). A lookup that slept counts as its wall time, at least
 *     SL_LOOKUP_SLOW_NS; one that did not counts as at most SL_LOOKUP_CPU_CAP_NS, because the
 *     rest of its wall time was the scheduler running something else (a pinned server's own
 *     threads, a neighbour), not the lookup. The average is exponentially weighted (1/8).
 *   - Lookups run on the loop when at least SL_LOOKUP_MIN_SAMPLES were timed and the average is
 *     under SL_LOOKUP_FAST_NS (roughly: fewer than one in ten lookups sleeps).
 *   - One lookup on the loop that slept sends every lookup back to the threads for
 *     SL_LOOKUP_HOLD_NS. So a loop never waits for the disk more than once per hold, for about
 *     one disk read.
 * Pure state and arithmetic: no clock, no thread, no system call (the caller passes the times).
 */
#ifndef SL_LOOKUP_H
#define SL_LOOKUP_H

#include <stdbool.h>
#include <stdint.h>

#define SL_LOOKUP_FAST_NS 30000ull       /* average below this: lookups are memory-only */
#define SL_LOOKUP_SLOW_NS 200000ull      /* what a lookup that slept counts as, at least */
#define SL_LOOKUP_CPU_CAP_NS 10000ull    /* what a lookup that did not sleep counts as, at most */
#define SL_LOOKUP_HOLD_NS 1000000000ull  /* then threads only, for this long */
#define SL_LOOKUP_MIN_SAMPLES 16

/* One loop's view of its lookups. Zero-initialised is the start state (threads). */
typedef struct sl_lookup_policy {
    uint64_t avg_ns;        /* weighted average duration of recent lookups */
    uint64_t hold_until;    /* monotonic ns: threads only until then */
    unsigned samples;       /* timed so far, saturating at SL_LOOKUP_MIN_SAMPLES */
    uint64_t inline_count;  /* lookups that ran on the loop (atomic for readers elsewhere) */
    uint64_t slow_inline;   /* of them, those that slept (atomic) */
    uint64_t small_bits;    /* the last 64 lookups off the loop: bit set = the file was small */
    uint64_t ring_count;    /* lookups submitted to the loop's ring (atomic, as above) */
} sl_lookup_policy;

/* Whether the next lookup that missed the dentry cache may run on the loop, at time now (ns). */
bool sl_lookup_inline(const sl_lookup_policy *p, uint64_t now);

/* A lookup that missed the dentry cache took ns of wall time and slept or not; on_loop says
 * where it ran. */
void sl_lookup_sample(sl_lookup_policy *p, uint64_t ns, bool slept, bool on_loop, uint64_t now);

/* Where a lookup off the loop goes when the loop has a ring (the hybrid backend) and a stat thread
 * could do it too. A stat thread opens the file and reads its first block in one trip; the ring
 * opens it in one trip and reads a small file's data without another, but a larger file's data
 * then takes a second trip through a read thread. So the ring is for pools of small files: it
 * is chosen while at least half of the last 64 files looked up off the loop were small (the
 * caller says what small is). Zero-initialised, the threads are chosen until files are seen. */
void sl_lookup_note_size(sl_lookup_policy *p, bool small);
bool sl_lookup_prefer_ring(const sl_lookup_policy *p);

/* The calling thread's voluntary context switches so far (getrusage RUSAGE_THREAD): the
 * difference across a lookup says whether it slept. One system call. */
long sl_lookup_sleeps(void);

#endif
