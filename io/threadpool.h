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
 *
 * A limiter (sl_tlimit) keeps one kind of slow job (a password hash, a directory listing, a
 * compression) from holding every worker of a pool: at most half the workers (at least one) run
 * its jobs at once, a bounded FIFO of others waits in it, any loop's, and the job that ends
 * starts the oldest one; beyond that bound the answer is "busy" (the modules send 503 with
 * Retry-After). Work already on a worker takes a slot without waiting (sl_tlimit_enter).
 */
#ifndef SL_THREADPOOL_H
#define SL_THREADPOOL_H

#include <pthread.h>
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

/* A limited queue in front of a pool, for one kind of job; static, set up with SL_TLIMIT_INIT.
 * The fields are its own. */
typedef struct sl_tlimit {
    pthread_mutex_t lock;     /* guards everything below */
    sl_tpool *pool;           /* where waiting jobs go: the pool they were submitted for */
    sl_job *head, *tail;      /* waiting, oldest first (linked by sl_job.next) */
    unsigned running;         /* slots taken: jobs on the pool and sl_tlimit_enter holders */
    unsigned waiting;
    unsigned max_waiting;
    uint64_t refused;         /* since start */
} sl_tlimit;

/* The initializer of a limiter whose queue holds at most `max_waiting` jobs. */
#define SL_TLIMIT_INIT(max_waiting)                                                                \
    {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, 0, 0, (max_waiting), 0}

/* How many slots a pool of `threads` workers gives one limiter: half, at least one. */
unsigned sl_tlimit_slots(unsigned threads);

/* Submit a job through the limiter: to the pool `p` now if fewer than half its workers hold
 * the limiter's slots, else to the limiter's queue, from which it goes to `p` when a slot is
 * free (every job of one limiter goes to the same pool). Any loop thread. Returns 0 (the job's
 * done() will run on `port`'s loop and must call sl_tlimit_done first), or -EAGAIN when both
 * are full (or the pool refused the job): the caller answers "busy", or does the work itself. */
int sl_tlimit_submit(sl_tlimit *l, sl_tpool *p, sl_tport *port, sl_job *job);

/* In the done() of a job submitted with sl_tlimit_submit, first: gives its slot to the oldest
 * waiting job (or back). Returns false when the job never ran: its turn came while the pool
 * stopped or was full, and it is to be answered "busy". */
bool sl_tlimit_done(sl_tlimit *l, sl_job *job);

/* Synchronous: take a slot without waiting, for work already on one of `threads` workers
 * (true), or find them all taken (false, counted as refused). sl_tlimit_leave gives it back. */
bool sl_tlimit_enter(sl_tlimit *l, unsigned threads);

/* Give back a slot taken with sl_tlimit_enter (starting the oldest waiting job, if any). */
void sl_tlimit_leave(sl_tlimit *l);

/* The limiter's counters: slots taken, jobs waiting, refused since start. Any thread. */
void sl_tlimit_get(sl_tlimit *l, unsigned *running, unsigned *waiting, uint64_t *refused);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sl_now_ns(void);

#endif
