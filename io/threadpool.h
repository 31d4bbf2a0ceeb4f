/* Thread pool: the only path between threads.
 *
 * Blocking calls (stat, open, pread, sendfile of cold pages) run on worker threads; everything
 * else stays on the event loops. A job carries two functions: work() runs on a worker and must
 * touch nothing but the job's own data; done() runs later on the loop thread that submitted it.
 *
 * A pool (sl_tpool) is shared by every loop: one bounded FIFO, one set of workers, sized once for
 * the machine. A port (sl_tport) belongs to one loop: a locked completion list and one eventfd
 * watched by that loop's event base. A job is submitted with the port of the loop that wants its
 * result; the worker that finishes it appends it to that port's list, and the worker that turns
 * the list from empty to non-empty writes the eventfd once, so a burst of completions costs the
 * loop one wake-up. Owners of a job that may be abandoned (a client that disconnects while its
 * read is queued) keep their state alive until done() runs, and done() checks for that first.
 *
 * A port is also a loop's mailbox: any thread may hand it a job with no work() through
 * sl_tport_complete(), and the job's done() then runs on that loop (how one loop asks another
 * to stop, or the main thread asks a loop to reopen its files).
 */
#ifndef SL_THREADPOOL_H
#define SL_THREADPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct sl_tport;

/* One unit of blocking work. Embed it in the owner's struct and recover the owner in the
 * callbacks with container_of-style arithmetic. */
typedef struct sl_job {
    struct sl_job *next;
    /* Worker thread: do the blocking call. NULL for jobs completed elsewhere (see
     * sl_tport_complete). */
    void (*work)(struct sl_job *job);
    /* Loop thread (the port's): use the result; may free the job. */
    void (*done)(struct sl_job *job);
    /* Where done() runs; set by sl_tpool_submit. */
    struct sl_tport *port;
    /* CLOCK_MONOTONIC nanoseconds: submitted, picked by a worker, finished. */
    uint64_t t_queued, t_started, t_done;
} sl_job;

/* A pool of worker threads (shared by every loop). */
typedef struct sl_tpool sl_tpool;
/* A loop's completion port (one per loop and pool user). */
typedef struct sl_tport sl_tport;

/* Queue waits remembered for percentiles on the status page. */
#define SL_TPOOL_WAIT_SAMPLES 1024

/* Counters for the status page and the benchmarks. */
typedef struct sl_tpool_stats {
    unsigned threads;
    unsigned queued;         /* waiting for a worker now */
    unsigned running;        /* being worked on now */
    uint64_t submitted;      /* since start */
    uint64_t rejected;       /* refused because the queue was full */
    uint64_t completed;      /* finished by a worker */
    uint64_t wait_ns_total;  /* sum of (t_started - t_queued) */
    uint64_t wait_ns_max;
    unsigned n_wait_samples;                 /* valid entries of wait_us (unordered) */
    uint32_t wait_us[SL_TPOOL_WAIT_SAMPLES]; /* recent queue waits, microseconds */
} sl_tpool_stats;

/* Start `threads` workers (at least 1) whose queue holds at most `max_queue` jobs. `name`
 * (<= 15 chars) names the threads for top/ps. Workers block every signal: signals belong to
 * the main thread. NULL on failure with errno set. */
sl_tpool *sl_tpool_new(const char *name, unsigned threads, unsigned max_queue);

/* Queue a job whose done() will run on `port`'s loop. Any loop thread. Returns 0, or -EAGAIN
 * when the queue is full (the caller retries later or does the work itself), or -ESHUTDOWN
 * after sl_tpool_free began. */
int sl_tpool_submit(sl_tpool *p, sl_tport *port, sl_job *job);

/* A snapshot of the counters. Any thread. */
void sl_tpool_get_stats(sl_tpool *p, sl_tpool_stats *out);

/* Stop the workers once the queue is empty and join them. Jobs finished meanwhile are on their
 * ports; each loop runs them when it drains its port (sl_tport_free does). */
void sl_tpool_free(sl_tpool *p);

/* A completion port on `base` (the loop's event base). NULL on failure with errno set. */
sl_tport *sl_tport_new(struct event_base *base);

/* Hand a finished job (or a message: a job without work()) to the port's loop: its done() will
 * run there. Any thread. */
void sl_tport_complete(sl_tport *port, sl_job *job);

/* Run the done() of every finished job now (normally the eventfd callback does this). The
 * port's loop thread only. Returns how many ran. */
unsigned sl_tport_drain(sl_tport *port);

/* Run what is left (sl_tport_drain until empty) and free the port. The loop thread, after
 * every pool that completes to this port has been freed. */
void sl_tport_free(sl_tport *port);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sl_now_ns(void);

#endif
