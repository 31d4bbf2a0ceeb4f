/* Thread pool: the only path between threads.
 *
 * Blocking calls (stat, open, pread) run on worker threads; everything else stays on the event
 * loop thread. A job carries two functions: work() runs on a worker and must touch nothing but
 * the job's own data; done() runs later on the loop thread. Submission goes into a bounded FIFO;
 * finished jobs go onto a locked completion list, and one eventfd watched by libevent wakes the
 * loop, which runs done() for each. Owners of a job that may be abandoned (a client that
 * disconnects while its read is queued) keep their state alive until done() runs, and done()
 * checks for that first.
 */
#ifndef SL_THREADPOOL_H
#define SL_THREADPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* One unit of blocking work. Embed it in the owner's struct and recover the owner in the
 * callbacks with container_of-style arithmetic. */
typedef struct sl_job {
    struct sl_job *next;
    /* Worker thread: do the blocking call. NULL for jobs completed elsewhere (see
     * sl_tpool_complete). */
    void (*work)(struct sl_job *job);
    /* Loop thread: use the result; may free the job. */
    void (*done)(struct sl_job *job);
    /* CLOCK_MONOTONIC nanoseconds: submitted, picked by a worker, finished. */
    uint64_t t_queued, t_started, t_done;
} sl_job;

/* A pool of worker threads. */
typedef struct sl_tpool sl_tpool;

/* Queue waits remembered for percentiles on the status page. */
#define SL_TPOOL_WAIT_SAMPLES 1024

/* Counters for the status page and the benchmarks. */
typedef struct sl_tpool_stats {
    unsigned threads;
    unsigned queued;         /* waiting for a worker now */
    unsigned running;        /* being worked on now */
    uint64_t submitted;      /* since start */
    uint64_t rejected;       /* refused because the queue was full */
    uint64_t completed;      /* done() has run */
    uint64_t wait_ns_total;  /* sum of (t_started - t_queued) */
    uint64_t wait_ns_max;
    unsigned n_wait_samples;                 /* valid entries of wait_us (unordered) */
    uint32_t wait_us[SL_TPOOL_WAIT_SAMPLES]; /* recent queue waits, microseconds */
} sl_tpool_stats;

/* Start `threads` workers (at least 1) whose queue holds at most `max_queue` jobs; completions
 * are delivered on `base`. `name` (<= 15 chars) names the threads for top/ps. NULL on failure
 * with errno set. */
sl_tpool *sl_tpool_new(struct event_base *base, const char *name, unsigned threads,
                       unsigned max_queue);

/* Queue a job. Returns 0, or -EAGAIN when the queue is full (the caller retries later or does
 * the work itself), or -ESHUTDOWN after sl_tpool_free began. Loop thread only. */
int sl_tpool_submit(sl_tpool *p, sl_job *job);

/* Hand a job that finished outside the pool (e.g. a POSIX AIO notification thread) to the loop:
 * its done() will run on the loop thread. Any thread. */
void sl_tpool_complete(sl_tpool *p, sl_job *job);

/* Run the done() of every finished job now (normally the eventfd callback does this).
 * Loop thread only. Returns how many ran. */
unsigned sl_tpool_drain(sl_tpool *p);

/* A snapshot of the counters. */
void sl_tpool_get_stats(sl_tpool *p, sl_tpool_stats *out);

/* Stop the workers once the queue is empty, join them, and run every outstanding done() on the
 * calling (loop) thread, so owners can release what they kept. */
void sl_tpool_free(sl_tpool *p);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sl_now_ns(void);

#endif
