/* Thread pool and completion ports.
 *
 * A fixed set of workers sleeps on one condition variable over a bounded FIFO; the bound is the
 * back-pressure that keeps a burst of cold requests from queueing unbounded memory and latency.
 * Queue waits are measured by the worker that picks a job, under the queue lock it holds anyway.
 * Finished jobs go to the port the submitting loop named: a list under the port's own lock, and
 * an eventfd written only by the completion that found the list empty. The loop swaps the whole
 * list out under the lock and runs the done() callbacks without it, in completion order. Workers
 * block every signal, so a signal sent to the process always reaches the main thread.
 *
 * A limiter is a counter of taken slots and a FIFO under its own lock, in front of the pool. A
 * job that ends does not give its slot back when another waits: it hands it to the oldest
 * waiting job, which it submits to the pool; if the pool refuses it then, the job is completed
 * on its port without having run (t_started stays 0, which sl_tlimit_done reports), and its own
 * done() hands the slot on again.
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

#include "queue.h"

struct sl_tpool {
    pthread_t *threads;
    unsigned max_queue;

    pthread_mutex_t qlock; /* guards everything below */
    pthread_cond_t qcond;
    sl_job *qhead, *qtail;
    bool stop;
    sl_tpool_stats st; /* the counters as sl_tpool_get_stats gives them; wait_us is a ring of
                        * the latest queue waits, n_wait_samples its next slot */
};

struct sl_tport {
    struct event *ev;
    int efd;
    pthread_mutex_t lock; /* guards the completion list */
    sl_job *head, *tail;
};

uint64_t sl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- ports ---- */

void sl_tport_complete(sl_tport *port, sl_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&port->lock);
    bool was_empty = port->head == NULL;
    SL_QUEUE_APPEND(port->head, port->tail, job, next);
    pthread_mutex_unlock(&port->lock);
    if (was_empty) {
        uint64_t one = 1;
        /* The counter saturates long before this matters; a failed write means it is already
         * non-zero, which wakes the loop just the same. */
        ssize_t n = write(port->efd, &one, sizeof one);
        (void)n;
    }
}

unsigned sl_tport_drain(sl_tport *port)
{
    uint64_t v;
    ssize_t r = read(port->efd, &v, sizeof v); /* reset before swapping, so no wake-up is lost */
    (void)r;
    pthread_mutex_lock(&port->lock);
    sl_job *j = port->head;
    port->head = port->tail = NULL;
    pthread_mutex_unlock(&port->lock);
    unsigned n = 0;
    while (j) {
        sl_job *next = j->next; /* done() may free j */
        j->done(j);
        j = next;
        n++;
    }
    return n;
}

static void on_eventfd(evutil_socket_t fd, short what, void *arg)
{
    sl_tport_drain(arg);
}

sl_tport *sl_tport_new(struct event_base *base)
{
    sl_tport *port = calloc(1, sizeof *port);
    if (!port) return NULL;
    port->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (port->efd < 0) {
        free(port);
        return NULL;
    }
    pthread_mutex_init(&port->lock, NULL);
    port->ev = event_new(base, port->efd, EV_READ | EV_PERSIST, on_eventfd, port);
    if (!port->ev || event_add(port->ev, NULL) < 0) {
        if (port->ev) event_free(port->ev);
        pthread_mutex_destroy(&port->lock);
        close(port->efd);
        free(port);
        errno = ENOMEM;
        return NULL;
    }
    return port;
}

void sl_tport_free(sl_tport *port)
{
    if (!port) return;
    while (sl_tport_drain(port) > 0) {
    }
    event_free(port->ev);
    close(port->efd);
    pthread_mutex_destroy(&port->lock);
    free(port);
}

/* ---- the pool ---- */

static void *worker(void *arg)
{
    sl_tpool *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&p->qlock);
    for (;;) {
        while (!p->qhead && !p->stop) pthread_cond_wait(&p->qcond, &p->qlock);
        if (!p->qhead) break; /* stopping and nothing left */
        sl_job *job = p->qhead;
        p->qhead = job->next;
        if (!p->qhead) p->qtail = NULL;
        p->st.queued--;
        p->st.running++;
        job->t_started = sl_now_ns();
        uint64_t w = job->t_started - job->t_queued;
        p->st.wait_ns_total += w;
        if (w > p->st.wait_ns_max) p->st.wait_ns_max = w;
        uint64_t us = w / 1000;
        p->st.wait_us[p->st.n_wait_samples++ % SL_TPOOL_WAIT_SAMPLES] =
            us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
        pthread_mutex_unlock(&p->qlock);

        job->work(job);
        job->t_done = sl_now_ns();
        /* Counted before the loop hears of it: a done() that reads the pool's counters (the
         * status page, a test) finds its own job completed. */
        pthread_mutex_lock(&p->qlock);
        p->st.running--;
        p->st.completed++;
        pthread_mutex_unlock(&p->qlock);
        sl_tport_complete(job->port, job);
        pthread_mutex_lock(&p->qlock);
    }
    pthread_mutex_unlock(&p->qlock);
    return NULL;
}

sl_tpool *sl_tpool_new(const char *name, unsigned threads, unsigned max_queue)
{
    if (threads == 0) threads = 1;
    sl_tpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->max_queue = max_queue ? max_queue : 1;
    p->threads = calloc(threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->qlock, NULL);
    pthread_cond_init(&p->qcond, NULL);
    /* A new thread inherits its creator's mask: create the workers with every signal blocked,
     * so not even their first instructions can take one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < threads; i++) {
        int e = pthread_create(&p->threads[i], NULL, worker, p);
        if (e) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            sl_tpool_free(p);
            errno = e;
            return NULL;
        }
        p->st.threads++;
        if (name) pthread_setname_np(p->threads[i], name);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return p;
}

int sl_tpool_submit(sl_tpool *p, sl_tport *port, sl_job *job)
{
    job->next = NULL;
    job->port = port;
    job->t_queued = sl_now_ns();
    job->t_started = job->t_done = 0;
    pthread_mutex_lock(&p->qlock);
    if (p->stop) {
        pthread_mutex_unlock(&p->qlock);
        return -ESHUTDOWN;
    }
    if (p->st.queued >= p->max_queue) {
        p->st.rejected++;
        pthread_mutex_unlock(&p->qlock);
        return -EAGAIN;
    }
    SL_QUEUE_APPEND(p->qhead, p->qtail, job, next);
    p->st.queued++;
    p->st.submitted++;
    pthread_cond_signal(&p->qcond);
    pthread_mutex_unlock(&p->qlock);
    return 0;
}

void sl_tpool_get_stats(sl_tpool *p, sl_tpool_stats *out)
{
    pthread_mutex_lock(&p->qlock);
    *out = p->st;
    if (out->n_wait_samples > SL_TPOOL_WAIT_SAMPLES) out->n_wait_samples = SL_TPOOL_WAIT_SAMPLES;
    pthread_mutex_unlock(&p->qlock);
}

void sl_tpool_free(sl_tpool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->qlock);
    p->stop = true;
    pthread_cond_broadcast(&p->qcond);
    pthread_mutex_unlock(&p->qlock);
    for (unsigned i = 0; i < p->st.threads; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->qcond);
    pthread_mutex_destroy(&p->qlock);
    free(p->threads);
    free(p);
}

/* ---- limiters ---- */

unsigned sl_tlimit_slots(unsigned threads)
{
    return threads / 2 ? threads / 2 : 1;
}

/* A slot is free (the job that ended gives it up or the submit failed): hand it to the oldest
 * waiting job, or give it back. */
static void tlimit_next(sl_tlimit *l)
{
    pthread_mutex_lock(&l->lock);
    sl_job *next = l->head;
    if (next) {
        l->head = next->next;
        if (!l->head) l->tail = NULL;
        l->waiting--;
    } else {
        l->running--;
    }
    sl_tpool *p = l->pool;
    pthread_mutex_unlock(&l->lock);
    if (next && sl_tpool_submit(p, next->port, next) < 0) {
        /* Answered "busy" on its own loop, whose done() passes the slot on again. */
        next->t_started = 0;
        sl_tport_complete(next->port, next);
    }
}

int sl_tlimit_submit(sl_tlimit *l, sl_tpool *p, sl_tport *port, sl_job *job)
{
    job->next = NULL;
    job->port = port;
    job->t_started = 0;
    pthread_mutex_lock(&l->lock);
    l->pool = p;
    bool run = l->running < sl_tlimit_slots(p->st.threads);
    bool wait = !run && l->waiting < l->max_waiting;
    if (run) l->running++;
    if (wait) {
        SL_QUEUE_APPEND(l->head, l->tail, job, next);
        l->waiting++;
    }
    if (!run && !wait) l->refused++;
    pthread_mutex_unlock(&l->lock);
    if (run && sl_tpool_submit(p, port, job) < 0) {
        tlimit_next(l); /* give the slot back (or to a waiting job) */
        pthread_mutex_lock(&l->lock);
        l->refused++;
        pthread_mutex_unlock(&l->lock);
        return -EAGAIN;
    }
    return run || wait ? 0 : -EAGAIN;
}

bool sl_tlimit_done(sl_tlimit *l, sl_job *job)
{
    tlimit_next(l);
    return job->t_started != 0;
}

bool sl_tlimit_enter(sl_tlimit *l, unsigned threads)
{
    pthread_mutex_lock(&l->lock);
    bool ok = l->running < sl_tlimit_slots(threads);
    if (ok)
        l->running++;
    else
        l->refused++;
    pthread_mutex_unlock(&l->lock);
    return ok;
}

void sl_tlimit_leave(sl_tlimit *l)
{
    tlimit_next(l);
}

void sl_tlimit_get(sl_tlimit *l, unsigned *running, unsigned *waiting, uint64_t *refused)
{
    pthread_mutex_lock(&l->lock);
    if (running) *running = l->running;
    if (waiting) *waiting = l->waiting;
    if (refused) *refused = l->refused;
    pthread_mutex_unlock(&l->lock);
}
