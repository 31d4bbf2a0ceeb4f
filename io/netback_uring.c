/* io-uring backend (liburing), and the ring the hybrid backend borrows.
 *
 * Block reads and opens are submitted to one ring per loop, sized for the loop's share of
 * server.max-read-threads (a ring has one submitter, so each loop owns its own); the kernel does
 * them without helper threads of ours (a buffered read of cold pages usually finishes from the
 * page's I/O completion; opens and what cannot wait that way go to the kernel's io-wq workers).
 * The ring signals completions on an eventfd that libevent watches, and the loop reaps every
 * ready completion in one go. Submissions are batched: a read is only queued in the SQ, and one
 * io_uring_submit() per loop turn (a libevent "prepare"-like zero timer) flushes them.
 *
 * The ring counts its own reads and opens: hybrid (netback.c) also has reads on its threads,
 * which the ring's end must not wait for. The kernel writes read buffers behind valgrind's back;
 * with valgrind's header at build time a completion tells memcheck the bytes are defined.
 */
#ifdef SL_HAVE_URING
#include <errno.h>
#include <event2/event.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "netback.h"
#include "threadpool.h"
#ifdef SL_HAVE_MEMCHECK_H
#include <valgrind/memcheck.h>
#else
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

typedef struct uring_state {
    struct io_uring ring;
    int efd;
    struct event *ev;
    struct event *flush; /* zero-delay timer: submit the batch once per loop turn */
    unsigned queued;     /* SQEs prepared but not yet submitted */
    unsigned opens;      /* opens in flight */
    unsigned max_opens;  /* at most (the completion queue has room for these and max_reads) */
    unsigned reads;      /* reads in flight (hybrid also has reads on its threads) */
} uring_state;

/* Reads carry their sl_xfer as user data; opens their sl_openreq with the low bit set. */
static void complete(sl_io *io, uintptr_t tag, int res)
{
    uring_state *st = io->priv;
    if (tag & 1) {
        sl_openreq *op = (sl_openreq *)(tag & ~(uintptr_t)1);
        st->opens--;
        op->res = res;
        op->done(op);
        return;
    }
    sl_xfer *x = (sl_xfer *)tag;
    st->reads--;
    if (res > 0) VALGRIND_MAKE_MEM_DEFINED(x->buf, (size_t)res);
    x->res = res;
    x->job.t_done = sl_now_ns();
    sl_xfer_complete(x);
}

static void uring_reap(evutil_socket_t fd, short what, void *arg)
{
    sl_io *io = arg;
    uring_state *st = io->priv;
    uint64_t n;
    ssize_t r = read(st->efd, &n, sizeof n);
    (void)r;
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&st->ring, &cqe) == 0) {
        uintptr_t tag = (uintptr_t)io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&st->ring, cqe);
        complete(io, tag, res);
    }
}

static void uring_flush(evutil_socket_t fd, short what, void *arg)
{
    sl_io *io = arg;
    uring_state *st = io->priv;
    if (st->queued == 0) return;
    int r = io_uring_submit(&st->ring);
    if (r < 0) {
        sl_log("io-uring: submit failed: %s", strerror(-r));
        return;
    }
    st->queued = 0;
}

int sl_uring_init(sl_io *io, char *err, size_t errlen)
{
    uring_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* The submission queue holds what one loop turn prepares (get_sqe flushes a full one); the
     * completion queue has room for every read and open in flight, so none waits in the
     * kernel's overflow list. Opens: up to 8 per read slot. An open waiting in the kernel's
     * queue costs nothing but its place, while one turned away goes to a stat thread (with 32,
     * cold 4 KiB files sent a quarter of their lookups to the threads, at 51.5 us per request
     * against 37 for the io-uring backend; bench/results/2026-11-30-hybrid-ring/). */
    st->max_opens = io->max_reads * 8;
    struct io_uring_params params = {.flags = IORING_SETUP_CQSIZE,
                                     .cq_entries = io->max_reads + st->max_opens};
    int r = io_uring_queue_init_params(io->max_reads * 2, &st->ring, &params);
    if (r < 0) {
        snprintf(err, errlen, "io-uring: cannot create a ring of %u entries: %s", io->max_reads * 2,
                 strerror(-r));
        free(st);
        return -1;
    }
    /* The kernel's io-wq workers do what cannot wait asynchronously (every open, a read the
     * block layer cannot queue). They are bounded at four per CPU by default, which would cap
     * the lookups and reads this loop has at the disk below max_reads: raise the bound to it
     * (the unbounded kind is left as it is). Refused by an older kernel: the default stands. */
    unsigned workers[2] = {io->max_reads, 0};
    io_uring_register_iowq_max_workers(&st->ring, workers);
    st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd < 0 || io_uring_register_eventfd(&st->ring, st->efd) < 0) {
        snprintf(err, errlen, "io-uring: cannot register an eventfd");
        goto fail;
    }
    st->ev = event_new(io->base, st->efd, EV_READ | EV_PERSIST, uring_reap, io);
    st->flush = evtimer_new(io->base, uring_flush, io);
    if (!st->ev || !st->flush || event_add(st->ev, NULL) < 0) {
        snprintf(err, errlen, "io-uring: cannot watch the eventfd");
        goto fail;
    }
    io->priv = st;
    io->async_opens = true;
    return 0;
fail:
    if (st->ev) event_free(st->ev);
    if (st->flush) event_free(st->flush);
    if (st->efd >= 0) close(st->efd);
    io_uring_queue_exit(&st->ring);
    free(st);
    return -1;
}

void sl_uring_fini(sl_io *io)
{
    uring_state *st = io->priv;
    if (!st) return;
    if (st->queued) io_uring_submit(&st->ring);
    while (st->reads > 0 || st->opens > 0) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&st->ring, &cqe) < 0) break;
        uintptr_t tag = (uintptr_t)io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&st->ring, cqe);
        complete(io, tag, res);
    }
    event_free(st->ev);
    event_free(st->flush);
    close(st->efd);
    io_uring_queue_exit(&st->ring);
    free(st);
    io->priv = NULL;
    io->async_opens = false;
}

static struct io_uring_sqe *get_sqe(uring_state *st)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    if (!sqe) {
        /* SQ full of unsubmitted entries: push them and try once more. */
        io_uring_submit(&st->ring);
        st->queued = 0;
        sqe = io_uring_get_sqe(&st->ring);
    }
    return sqe;
}

static void queued(uring_state *st)
{
    if (st->queued++ == 0) {
        struct timeval zero = {0, 0};
        evtimer_add(st->flush, &zero);
    }
}

int sl_uring_submit(sl_io *io, sl_xfer *x)
{
    uring_state *st = io->priv;
    struct io_uring_sqe *sqe = get_sqe(st);
    if (!sqe) return -EAGAIN;
    io_uring_prep_read(sqe, x->fd, x->buf, (unsigned)x->len, (uint64_t)x->off);
    io_uring_sqe_set_data(sqe, x);
    x->skip = 0;
    x->job.t_queued = x->job.t_started = sl_now_ns();
    st->reads++;
    queued(st);
    return 0;
}

int sl_uring_open_submit(sl_io *io, sl_openreq *op)
{
    uring_state *st = io->priv;
    /* Beyond what the completion queue was sized for: the caller uses a stat thread. */
    if (st->opens >= st->max_opens) return -EAGAIN;
    struct io_uring_sqe *sqe = get_sqe(st);
    if (!sqe) return -EAGAIN;
    io_uring_prep_openat2(sqe, op->dirfd, op->path, &op->how);
    /* Without IOSQE_ASYNC the kernel first walks the path again from its caches, on the loop
     * (inside io_uring_enter), only to find what the caller's RESOLVE_CACHED walk found: a miss.
     * That second walk was 1.1% of the loop's core on cold 4 KiB files. */
    if (op->uncached) io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
    io_uring_sqe_set_data(sqe, (void *)((uintptr_t)op | 1));
    st->opens++;
    queued(st);
    return 0;
}

const sl_netbackend sl_nb_uring = {
    .name = "io-uring",
    .kind = SL_NB_ASYNC,
    .init = sl_uring_init,
    .fini = sl_uring_fini,
    .submit = sl_uring_submit,
    .open_submit = sl_uring_open_submit,
};
#endif
