/* Thread pool.
 *
 * A fixed set of workers sleeps on one condition variable over a bounded FIFO; the bound is the
 * back-pressure that keeps a burst of cold requests from queueing unbounded memory and latency.
 * Finished jobs are appended to a completion list under a second lock, and the worker that turns
 * the list from empty to non-empty writes the eventfd once, so a burst of completions costs the
 * loop one wake-up. The loop swaps the whole list out under the lock and runs the done()
 * callbacks without it, in completion order. Workers block every signal (they start with the
 * full mask), so signals are handled on the loop thread only and never interrupt a blocking call.
 */
#include "threadpool.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct sl_tpool {
    struct event_base *base;
    struct event *ev;
    int efd;
    pthread_t *threads;
    unsigned n_threads;
    unsigned max_queue;

    pthread_mutex_t qlock; /* guards the queue, stop and the counters workers update */
    pthread_cond_t qcond;
    sl_job *qhead, *qtail;
    unsigned queued, running;
    bool stop;

    pthread_mutex_t clock; /* guards the completion list */
    sl_job *chead, *ctail;

    /* Loop-thread counters. */
    uint64_t submitted, rejected, completed, wait_total, wait_max;
    uint32_t wait_us[SL_TPOOL_WAIT_SAMPLES]; /* ring of the latest queue waits */
    unsigned n_wait;
};

uint64_t sl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sl_tpool_complete(sl_tpool *p, sl_job *job)
{
    job->next = NULL;
    if (!job->t_done) job->t_done = sl_now_ns();
    pthread_mutex_lock(&p->clock);
    bool was_empty = p->chead == NULL;
    if (p->ctail)
        p->ctail->next = job;
    else
        p->chead = job;
    p->ctail = job;
    pthread_mutex_unlock(&p->clock);
    if (was_empty) {
        uint64_t one = 1;
        /* The counter saturates long before this matters; a failed write means it is already
         * non-zero, which wakes the loop just the same. */
        ssize_t n = write(p->efd, &one, sizeof one);
        (void)n;
    }
}

static void *worker(void *arg)
{
    sl_tpool *p = arg;
    pthread_mutex_lock(&p->qlock);
    for (;;) {
        while (!p->qhead && !p->stop) pthread_cond_wait(&p->qcond, &p->qlock);
        if (!p->qhead) break; /* stopping and nothing left */
        sl_job *job = p->qhead;
        p->qhead = job->next;
        if (!p->qhead) p->qtail = NULL;
        p->queued--;
        p->running++;
        pthread_mutex_unlock(&p->qlock);

        job->t_started = sl_now_ns();
        job->work(job);
        job->t_done = sl_now_ns();
        sl_tpool_complete(p, job);

        pthread_mutex_lock(&p->qlock);
        p->running--;
    }
    pthread_mutex_unlock(&p->qlock);
    return NULL;
}

unsigned sl_tpool_drain(sl_tpool *p)
{
    uint64_t v;
    ssize_t r = read(p->efd, &v, sizeof v); /* reset before swapping, so no wake-up is lost */
    (void)r;
    pthread_mutex_lock(&p->clock);
    sl_job *j = p->chead;
    p->chead = p->ctail = NULL;
    pthread_mutex_unlock(&p->clock);
    unsigned n = 0;
    while (j) {
        sl_job *next = j->next; /* done() may free j */
        if (j->t_started >= j->t_queued && j->t_started) {
            uint64_t w = j->t_started - j->t_queued;
            p->wait_total += w;
            if (w > p->wait_max) p->wait_max = w;
            uint64_t us = w / 1000;
            p->wait_us[p->n_wait++ % SL_TPOOL_WAIT_SAMPLES] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
        }
        p->completed++;
        j->done(j);
        j = next;
        n++;
    }
    return n;
}

static void on_eventfd(evutil_socket_t fd, short what, void *arg)
{
    sl_tpool_drain(arg);
}

sl_tpool *sl_tpool_new(struct event_base *base, const char *name, unsigned threads,
                       unsigned max_queue)
{
    if (threads == 0) threads = 1;
    sl_tpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->base = base;
    p->max_queue = max_queue ? max_queue : 1;
    p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    p->threads = calloc(threads, sizeof *p->threads);
    if (p->efd < 0 || !p->threads) goto fail;
    pthread_mutex_init(&p->qlock, NULL);
    pthread_mutex_init(&p->clock, NULL);
    pthread_cond_init(&p->qcond, NULL);
    p->ev = event_new(base, p->efd, EV_READ | EV_PERSIST, on_eventfd, p);
    if (!p->ev || event_add(p->ev, NULL) < 0) goto fail_locks;
    /* A new thread inherits its creator's mask: create the workers with every signal blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < threads; i++) {
        int e = pthread_create(&p->threads[i], NULL, worker, p);
        if (e) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            errno = e;
            goto fail_threads;
        }
        p->n_threads++;
        if (name) pthread_setname_np(p->threads[i], name);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return p;

fail_threads: {
    int saved = errno;
    pthread_mutex_lock(&p->qlock);
    p->stop = true;
    pthread_cond_broadcast(&p->qcond);
    pthread_mutex_unlock(&p->qlock);
    for (unsigned i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    errno = saved;
}
fail_locks:
    if (p->ev) event_free(p->ev);
    pthread_cond_destroy(&p->qcond);
    pthread_mutex_destroy(&p->qlock);
    pthread_mutex_destroy(&p->clock);
fail:
    if (p->efd >= 0) close(p->efd);
    free(p->threads);
    free(p);
    return NULL;
}

int sl_tpool_submit(sl_tpool *p, sl_job *job)
{
    job->next = NULL;
    job->t_queued = sl_now_ns();
    job->t_started = job->t_done = 0;
    pthread_mutex_lock(&p->qlock);
    if (p->stop) {
        pthread_mutex_unlock(&p->qlock);
        return -ESHUTDOWN;
    }
    if (p->queued >= p->max_queue) {
        pthread_mutex_unlock(&p->qlock);
        p->rejected++;
        return -EAGAIN;
    }
    if (p->qtail)
        p->qtail->next = job;
    else
        p->qhead = job;
    p->qtail = job;
    p->queued++;
    pthread_cond_signal(&p->qcond);
    pthread_mutex_unlock(&p->qlock);
    p->submitted++;
    return 0;
}

void sl_tpool_get_stats(sl_tpool *p, sl_tpool_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&p->qlock);
    out->queued = p->queued;
    out->running = p->running;
    pthread_mutex_unlock(&p->qlock);
    out->threads = p->n_threads;
    out->submitted = p->submitted;
    out->rejected = p->rejected;
    out->completed = p->completed;
    out->wait_ns_total = p->wait_total;
    out->wait_ns_max = p->wait_max;
    out->n_wait_samples = p->n_wait < SL_TPOOL_WAIT_SAMPLES ? p->n_wait : SL_TPOOL_WAIT_SAMPLES;
    memcpy(out->wait_us, p->wait_us, sizeof out->wait_us);
}

void sl_tpool_free(sl_tpool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->qlock);
    p->stop = true;
    pthread_cond_broadcast(&p->qcond);
    pthread_mutex_unlock(&p->qlock);
    for (unsigned i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    /* Every queued job has run; let the owners see their results and clean up. */
    while (sl_tpool_drain(p) > 0) {
    }
    event_free(p->ev);
    close(p->efd);
    pthread_cond_destroy(&p->qcond);
    pthread_mutex_destroy(&p->qlock);
    pthread_mutex_destroy(&p->clock);
    free(p->threads);
    free(p);
}
