/* Kernel and libc asynchronous-read backends: posix-aio and linux-aio-sendfile.
 *
 * posix-aio uses glibc's aio_read(), which runs its own helper threads; each finished read
 * notifies on one of them (SIGEV_THREAD), and that thread hands the read to the loop through the
 * read pool's completion list, so there is still one path between threads. glibc is told to use
 * server.max-read-threads threads.
 *
 * linux-aio-sendfile (the name lighttpd 1.5 gave it) uses Linux native AIO, io_submit() on a
 * file opened again with O_DIRECT, so reads go to the disk without the page cache and the
 * submission itself does not block. O_DIRECT wants offsets and lengths aligned to the logical
 * block size: the read is widened to 4 KiB boundaries and the bytes before the wanted offset are
 * skipped (rd->skip); the tail of a file simply comes back short. Completions are counted on an
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

#include "connection.h"
#include "log.h"
#include "netback.h"
#include "server.h"
#include "threadpool.h"

/* ---- posix-aio ---- */

static void paio_done(sl_job *job)
{
    sl_fileread_complete((sl_fileread *)job);
}

static void paio_notify(union sigval sv)
{
    /* glibc runs this on a thread of its own that starts with no signal blocked; signals are
     * the loop thread's (see server.c), so block them here as in every worker. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sl_fileread *rd = sv.sival_ptr;
    struct aiocb *cb = rd->priv;
    int e = aio_error(cb);
    rd->res = e == 0 ? aio_return(cb) : -e;
    if (e != 0) aio_return(cb); /* reap it either way */
    sl_tpool_complete(rd->conn->srv->read_pool, &rd->job);
}

static int paio_init(sl_server *srv, char *err, size_t errlen)
{
    struct aioinit ai = {.aio_threads = (int)srv->global.max_read_threads,
                         .aio_num = (int)srv->max_reads,
                         .aio_idle_time = 10};
    aio_init(&ai);
    /* Only the completion list and its eventfd are used; one worker sits idle. */
    srv->read_pool = sl_tpool_new(srv->base, "sl-aio-done", 1, 1);
    if (!srv->read_pool) {
        snprintf(err, errlen, "cannot start the completion channel: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void paio_fini(sl_server *srv)
{
    /* aio_suspend-free drain: reads in flight finish on glibc's threads and land on the list. */
    while (srv->reads_inflight > 0) {
        sl_tpool_drain(srv->read_pool);
        if (srv->reads_inflight > 0) usleep(1000);
    }
    sl_tpool_free(srv->read_pool);
    srv->read_pool = NULL;
}

static int paio_submit(sl_server *srv, sl_fileread *rd)
{
    if (!rd->priv && !(rd->priv = calloc(1, sizeof(struct aiocb)))) return -ENOMEM;
    struct aiocb *cb = rd->priv;
    memset(cb, 0, sizeof *cb);
    cb->aio_fildes = rd->fd;
    cb->aio_offset = rd->off;
    cb->aio_buf = rd->buf;
    cb->aio_nbytes = rd->len;
    cb->aio_sigevent.sigev_notify = SIGEV_THREAD;
    cb->aio_sigevent.sigev_notify_function = paio_notify;
    cb->aio_sigevent.sigev_value.sival_ptr = rd;
    rd->job.work = NULL;
    rd->job.done = paio_done;
    rd->job.t_queued = sl_now_ns();
    rd->job.t_started = rd->job.t_done = 0;
    if (aio_read(cb) < 0) return errno == EAGAIN ? -EAGAIN : -errno;
    return 0;
}

static void paio_release(sl_server *srv, sl_fileread *rd)
{
    free(rd->priv);
    rd->priv = NULL;
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
    sl_server *srv = arg;
    laio_state *st = srv->nb_priv;
    uint64_t n;
    ssize_t r = read(st->efd, &n, sizeof n);
    (void)r;
    struct io_event evs[64];
    struct timespec zero = {0, 0};
    int got;
    while ((got = io_getevents(st->ctx, 0, 64, evs, &zero)) > 0) {
        for (int i = 0; i < got; i++) {
            sl_fileread *rd = evs[i].data;
            long res = (long)evs[i].res;
            if (res < 0) {
                rd->res = res;
            } else {
                /* Drop the alignment head; the tail beyond what was asked is never sent. */
                long data = res - (long)rd->skip;
                if (data < 0) data = 0;
                if ((size_t)data > rd->len) data = (long)rd->len;
                rd->res = data;
            }
            rd->job.t_done = sl_now_ns();
            sl_fileread_complete(rd);
        }
        if (got < 64) break;
    }
}

static int laio_init(sl_server *srv, char *err, size_t errlen)
{
    laio_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int r = st->efd < 0 ? -errno : io_setup((int)srv->max_reads, &st->ctx);
    if (r < 0) {
        snprintf(err, errlen, "linux-aio-sendfile: io_setup(%u) failed: %s", srv->max_reads,
                 strerror(-r));
        if (st->efd >= 0) close(st->efd);
        free(st);
        return -1;
    }
    st->ev = event_new(srv->base, st->efd, EV_READ | EV_PERSIST, laio_reap, srv);
    if (!st->ev || event_add(st->ev, NULL) < 0) {
        snprintf(err, errlen, "linux-aio-sendfile: cannot watch the eventfd");
        io_destroy(st->ctx);
        close(st->efd);
        free(st);
        return -1;
    }
    srv->nb_priv = st;
    return 0;
}

static void laio_fini(sl_server *srv)
{
    laio_state *st = srv->nb_priv;
    if (!st) return;
    while (srv->reads_inflight > 0) {
        /* Wait for the disk; completions release the connections that were closed. */
        struct io_event ev;
        if (io_getevents(st->ctx, 1, 1, &ev, NULL) == 1) {
            sl_fileread *rd = ev.data;
            rd->res = -ECANCELED;
            sl_fileread_complete(rd);
        }
    }
    event_free(st->ev);
    io_destroy(st->ctx);
    close(st->efd);
    free(st);
    srv->nb_priv = NULL;
}

static int laio_direct_fd(sl_server *srv, laio_read *lr, int fd)
{
    laio_state *st = srv->nb_priv;
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

static int laio_submit(sl_server *srv, sl_fileread *rd)
{
    laio_state *st = srv->nb_priv;
    if (!rd->priv) {
        laio_read *lr = calloc(1, sizeof *lr);
        if (!lr) return -ENOMEM;
        lr->src_fd = lr->dfd = -1;
        rd->priv = lr;
    }
    laio_read *lr = rd->priv;
    int dfd = laio_direct_fd(srv, lr, rd->fd);
    off_t aoff = rd->off;
    size_t alen = rd->len;
    rd->skip = 0;
    if (dfd != rd->fd) {
        aoff = rd->off & ~(off_t)(DIO_ALIGN - 1);
        rd->skip = (size_t)(rd->off - aoff);
        alen = (rd->skip + rd->len + DIO_ALIGN - 1) & ~(size_t)(DIO_ALIGN - 1);
    }
    io_prep_pread(&lr->cb, dfd, rd->buf, alen, aoff);
    io_set_eventfd(&lr->cb, st->efd);
    lr->cb.data = rd;
    rd->job.t_queued = rd->job.t_started = sl_now_ns();
    struct iocb *cbs[1] = {&lr->cb};
    int r = io_submit(st->ctx, 1, cbs);
    if (r == 1) return 0;
    return r == -EAGAIN ? -EAGAIN : (r < 0 ? r : -EIO);
}

static void laio_release(sl_server *srv, sl_fileread *rd)
{
    laio_read *lr = rd->priv;
    if (!lr) return;
    if (lr->dfd >= 0 && lr->dfd != lr->src_fd) close(lr->dfd);
    free(lr);
    rd->priv = NULL;
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
