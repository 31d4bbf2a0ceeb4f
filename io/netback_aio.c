/* Kernel and libc asynchronous-read backends: posix-aio and linux-aio-sendfile.
 *
 * posix-aio uses glibc's aio_read(), which runs its own helper threads; each finished read
 * notifies on one of them (SIGEV_THREAD), and that thread hands the read to its loop through the
 * loop's completion port, so there is still one path between threads. glibc is told to use
 * server.max-read-threads threads (one setting for the process: glibc's pool is shared).
 *
 * linux-aio-sendfile (the name lighttpd 1.5 gave it) uses Linux native AIO, io_submit() on a
 * file opened again with O_DIRECT, so reads go to the disk without the page cache and the
 * submission itself does not block. O_DIRECT wants offsets and lengths aligned to the logical
 * block size: the read is widened to 4 KiB boundaries and the bytes before the wanted offset are
 * skipped (x->skip); the tail of a file simply comes back short. Completions are counted on an
 * eventfd that libevent watches. On a file system that refuses O_DIRECT (tmpfs) the backend
 * submits buffered reads, which work but may block in io_submit(); it says so in the log once.
 */
#include <aio.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "netback.h"
#include "threadpool.h"

/* ---- posix-aio ---- */

static void paio_done(sl_job *job)
{
    sl_xfer_complete((sl_xfer *)job);
}

static void paio_notify(union sigval sv)
{
    /* glibc runs this on a thread of its own that starts with no signal blocked; signals are
     * the main thread's (see server.c), so block them here as in every worker. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sl_xfer *x = sv.sival_ptr;
    struct aiocb *cb = x->priv;
    int e = aio_error(cb);
    x->res = e == 0 ? aio_return(cb) : -e;
    if (e != 0) aio_return(cb); /* reap it either way */
    x->job.t_done = sl_now_ns();
    sl_tport_complete(x->io->port, &x->job);
}

static int paio_init(sl_io *io, char *err, size_t errlen)
{
    /* glibc keeps the first settings it is given; every loop asks for the same. */
    struct aioinit ai = {.aio_threads = (int)io->threads,
                         .aio_num = (int)io->max_reads,
                         .aio_idle_time = 10};
    aio_init(&ai);
    return 0;
}

static void paio_fini(sl_io *io)
{
    /* Reads in flight finish on glibc's threads and land on the port: run them. */
    while (io->reads_inflight > 0) {
        if (sl_tport_drain(io->port) == 0 && io->reads_inflight > 0) usleep(1000);
    }
}

static int paio_submit(sl_io *io, sl_xfer *x)
{
    if (!x->priv && !(x->priv = calloc(1, sizeof(struct aiocb)))) return -ENOMEM;
    struct aiocb *cb = x->priv;
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = x->fd;
    cb->aio_offset = x->off;
    cb->aio_buf = x->buf;
    cb->aio_nbytes = x->len;
    cb->aio_sigevent.sigev_notify = SIGEV_THREAD;
    cb->aio_sigevent.sigev_notify_function = paio_notify;
    cb->aio_sigevent.sigev_value.sival_ptr = x;
    x->job.work = NULL;
    x->job.done = paio_done;
    x->job.port = io->port;
    x->job.t_queued = sl_now_ns();
    x->job.t_started = x->job.t_done = 0;
    if (aio_read(cb) < 0) return errno == EAGAIN ? -EAGAIN : -errno;
    return 0;
}

static void paio_release(sl_io *io, sl_xfer *x)
{
    free(x->priv);
    x->priv = NULL;
}

const sl_netbackend sl_nb_posix_aio = {
    .name = "posix-aio",
    .kind = SL_NB_ASYNC,
    .init = paio_init,
    .fini = paio_fini,
    .submit = paio_submit,
    .release = paio_release,
};

#ifdef SL_HAVE_LIBAIO
#include <libaio.h>

#define DIO_ALIGN 4096

typedef struct laio_state {
    io_context_t ctx;
    int efd;
    struct event *ev;
    bool warned_buffered;
} laio_state;

/* Per read: the control block and the O_DIRECT twin of the file descriptor. */
typedef struct laio_read {
    struct iocb cb;
    int src_fd;  /* the descriptor dfd was opened from */
    int dfd;     /* O_DIRECT descriptor, or src_fd itself when the file system refuses it */
} laio_read;

static void laio_reap(evutil_socket_t fd, short what, void *arg)
{
    sl_io *io = arg;
    laio_state *st = io->priv;
    uint64_t n;
    ssize_t r = read(st->efd, &n, sizeof n);
    (void)r;
    struct io_event evs[64];
    struct timespec zero = {0, 0};
    int got;
    while ((got = io_getevents(st->ctx, 0, 64, evs, &zero)) > 0) {
        for (int i = 0; i < got; i++) {
            sl_xfer *x = evs[i].data;
            long res = (long)evs[i].res;
            if (res < 0) {
                x->res = res;
            } else {
                /* Drop the alignment head; the tail beyond what was asked is never sent. */
                long data = res - (long)x->skip;
                if (data < 0) data = 0;
                if ((size_t)data > x->len) data = (long)x->len;
                x->res = data;
            }
            x->job.t_done = sl_now_ns();
            sl_xfer_complete(x);
        }
        if (got < 64) break;
    }
}

static int laio_init(sl_io *io, char *err, size_t errlen)
{
    laio_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int r = st->efd < 0 ? -errno : io_setup((int)io->max_reads, &st->ctx);
    if (r < 0) {
        snprintf(err, errlen, "linux-aio-sendfile: io_setup(%u) failed: %s", io->max_reads,
                 strerror(-r));
        if (st->efd >= 0) close(st->efd);
        free(st);
        return -1;
    }
    st->ev = event_new(io->base, st->efd, EV_READ | EV_PERSIST, laio_reap, io);
    if (!st->ev || event_add(st->ev, NULL) < 0) {
        snprintf(err, errlen, "linux-aio-sendfile: cannot watch the eventfd");
        io_destroy(st->ctx);
        close(st->efd);
        free(st);
        return -1;
    }
    io->priv = st;
    return 0;
}

static void laio_fini(sl_io *io)
{
    laio_state *st = io->priv;
    if (!st) return;
    while (io->reads_inflight > 0) {
        /* Wait for the disk; completions release the owners that left. */
        struct io_event ev;
        if (io_getevents(st->ctx, 1, 1, &ev, NULL) == 1) {
            sl_xfer *x = ev.data;
            x->res = -ECANCELED;
            sl_xfer_complete(x);
        }
    }
    event_free(st->ev);
    io_destroy(st->ctx);
    close(st->efd);
    free(st);
    io->priv = NULL;
}

static int laio_direct_fd(sl_io *io, laio_read *lr, int fd)
{
    laio_state *st = io->priv;
    if (lr->src_fd == fd && lr->dfd >= 0) return lr->dfd;
    if (lr->dfd >= 0 && lr->dfd != lr->src_fd) close(lr->dfd);
    lr->src_fd = fd;
    /* Open the same file again through its descriptor: the name may have changed meanwhile. */
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    int d = open(p, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOATIME);
    if (d < 0 && errno == EPERM) d = open(p, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (d < 0) {
        if (!st->warned_buffered) {
            st->warned_buffered = true;
            sl_log("linux-aio-sendfile: cannot open files with O_DIRECT here (%s); using "
                   "buffered reads, which io_submit() may perform synchronously",
                   strerror(errno));
        }
        d = fd;
    }
    lr->dfd = d;
    return d;
}

static int laio_submit(sl_io *io, sl_xfer *x)
{
    laio_state *st = io->priv;
    if (!x->priv) {
        laio_read *lr = calloc(1, sizeof *lr);
        if (!lr) return -ENOMEM;
        lr->src_fd = lr->dfd = -1;
        x->priv = lr;
    }
    laio_read *lr = x->priv;
    int dfd = laio_direct_fd(io, lr, x->fd);
    off_t aoff = x->off;
    size_t alen = x->len;
    x->skip = 0;
    if (dfd != x->fd) {
        aoff = x->off & ~(off_t)(DIO_ALIGN - 1);
        x->skip = (size_t)(x->off - aoff);
        alen = (x->skip + x->len + DIO_ALIGN - 1) & ~(size_t)(DIO_ALIGN - 1);
    }
    io_prep_pread(&lr->cb, dfd, x->buf, alen, aoff);
    io_set_eventfd(&lr->cb, st->efd);
    lr->cb.data = x;
    x->job.t_queued = x->job.t_started = sl_now_ns();
    struct iocb *cbs[1] = {&lr->cb};
    int r = io_submit(st->ctx, 1, cbs);
    if (r == 1) return 0;
    return r == -EAGAIN ? -EAGAIN : (r < 0 ? r : -EIO);
}

static void laio_release(sl_io *io, sl_xfer *x)
{
    laio_read *lr = x->priv;
    if (!lr) return;
    if (lr->dfd >= 0 && lr->dfd != lr->src_fd) close(lr->dfd);
    free(lr);
    x->priv = NULL;
}

const sl_netbackend sl_nb_linux_aio = {
    .name = "linux-aio-sendfile",
    .kind = SL_NB_ASYNC,
    .init = laio_init,
    .fini = laio_fini,
    .submit = laio_submit,
    .release = laio_release,
};
#endif
