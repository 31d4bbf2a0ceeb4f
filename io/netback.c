/* Network backends: the shared driver and the backends that need no kernel AIO interface.
 *
 * The driver walks the output queue. Memory chunks go out with one sendmsg(). For a file chunk it
 * asks the backend's kind: SENDFILE sends straight from the page cache on the loop (blocking when
 * the pages are cold: the articles' baseline); PREAD reads a block on the loop and writes it;
 * ASYNC submits a block read to the backend and returns "waiting" until sl_fileread_complete()
 * brings the connection back; HYBRID first asks the kernel, without blocking, whether the block
 * is in the page cache and then does SENDFILE or ASYNC for that block. Each connection has at
 * most one block in flight; reads in flight across the server are bounded by
 * server.max-read-threads, and connections beyond that wait in FIFO order for a slot. Block
 * buffers are recycled through a small free list so busy servers do not page-fault fresh memory
 * per block.
 */
#include "netback.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "connection.h"
#include "log.h"
#include "server.h"

#define BUF_ALIGN 4096
#define WRITE_BUDGET (512 * 1024) /* bytes per connection per loop turn */

/* ---- the blocking core ---- */

void sl_fileread_sync(sl_fileread *rd)
{
    size_t got = 0;
    while (got < rd->len) {
        ssize_t n = pread(rd->fd, rd->buf + rd->skip + got, rd->len - got, rd->off + (off_t)got);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (got == 0) {
                rd->res = -errno;
                return;
            }
            break; /* report what arrived; the next read reports the error */
        }
        if (n == 0) break; /* end of file */
        got += (size_t)n;
    }
    rd->res = (ssize_t)got;
}

/* struct cachestat_range / struct cachestat of Linux 6.5, not yet in every libc's headers. */
struct sl_cachestat_range {
    unsigned long long off, len;
};
struct sl_cachestat {
    unsigned long long nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture */
#endif

int sl_page_cache_resident(int fd, off_t off, size_t len)
{
    static int unsupported;
    if (unsupported) return -ENOSYS;
    if (len == 0) return 1;
    struct sl_cachestat_range r = {(unsigned long long)off, len};
    struct sl_cachestat cs;
    if (syscall(__NR_cachestat, fd, &r, &cs, 0) < 0) {
        if (errno == ENOSYS) unsupported = 1;
        return -errno;
    }
    unsigned long long first = (unsigned long long)off / 4096;
    unsigned long long last = ((unsigned long long)off + len - 1) / 4096;
    return cs.nr_cache >= last - first + 1;
}

/* ---- buffers and read slots ---- */

static void buf_put(sl_server *srv, sl_fileread *rd);

/* A buffer for `want` bytes. Full-size block buffers are recycled through the free list; a
 * short file gets a buffer its own size, which malloc serves from its heap (below its mmap
 * threshold) without faulting in fresh pages for every request. */
static int buf_get(sl_server *srv, sl_fileread *rd, size_t want)
{
    size_t full = srv->block_size + BUF_ALIGN;
    size_t need = ((want + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1)) + BUF_ALIGN;
    if (need > full) need = full;
    if (rd->buf && rd->cap >= need) return 0;
    buf_put(srv, rd);
    if (need == full && srv->n_free_bufs > 0) {
        rd->buf = srv->free_bufs[--srv->n_free_bufs];
    } else {
        void *p;
        /* One extra page: an O_DIRECT read of an unaligned range spans one more block. */
        if (posix_memalign(&p, BUF_ALIGN, need) != 0) return -ENOMEM;
        rd->buf = p;
    }
    rd->cap = need;
    return 0;
}

static void buf_put(sl_server *srv, sl_fileread *rd)
{
    if (!rd->buf) return;
    if (rd->cap == srv->block_size + BUF_ALIGN && srv->n_free_bufs < srv->max_free_bufs)
        srv->free_bufs[srv->n_free_bufs++] = rd->buf;
    else
        free(rd->buf);
    rd->buf = NULL;
    rd->cap = 0;
}

void sl_fileread_adopt(sl_server *srv, sl_fileread *rd, int fd, char *buf, size_t cap, off_t off,
                       size_t n)
{
    buf_put(srv, rd);
    rd->buf = buf;
    rd->cap = cap;
    rd->fd = fd;
    rd->off = off;
    rd->len = n;
    rd->skip = 0;
    rd->pos = 0;
    rd->res = (ssize_t)n;
    rd->ready = true;
}

void sl_fileread_reset(sl_server *srv, sl_fileread *rd)
{
    if (rd->waiting) {
        /* Leave the slot queue: the request ended (or the client left) while it waited. */
        sl_fileread **pp = &srv->rd_wait_head;
        sl_fileread *prev = NULL;
        while (*pp && *pp != rd) {
            prev = *pp;
            pp = &(*pp)->wait_next;
        }
        if (*pp) {
            *pp = rd->wait_next;
            if (srv->rd_wait_tail == rd) srv->rd_wait_tail = prev;
        }
        rd->waiting = false;
        rd->wait_next = NULL;
    }
    if (srv->nb && srv->nb->release) srv->nb->release(srv, rd);
    buf_put(srv, rd);
    rd->ready = false;
    rd->sent = false;
    rd->res = 0;
    rd->pos = 0;
    rd->skip = 0;
}

static void wait_for_slot(sl_server *srv, sl_fileread *rd)
{
    rd->waiting = true;
    rd->wait_next = NULL;
    if (srv->rd_wait_tail)
        srv->rd_wait_tail->wait_next = rd;
    else
        srv->rd_wait_head = rd;
    srv->rd_wait_tail = rd;
}

static void conn_resume_write(sl_conn *c);
static void read_done(sl_job *job);

static void sendfile_work(sl_job *job)
{
    sl_fileread *rd = (sl_fileread *)job;
    off_t off = rd->off;
    size_t sent = 0;
    while (sent < rd->len) {
        ssize_t n = sendfile(rd->sock, rd->fd, &off, rd->len - sent);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (sent == 0) rd->res = n < 0 ? -errno : 0;
        if (sent == 0) return;
        break; /* socket full or file ended: report what went out */
    }
    rd->res = (ssize_t)sent;
}

/* A slot freed: let the longest-waiting connection try again. */
static void wake_waiter(sl_server *srv)
{
    sl_fileread *rd = srv->rd_wait_head;
    if (!rd) return;
    srv->rd_wait_head = rd->wait_next;
    if (!srv->rd_wait_head) srv->rd_wait_tail = NULL;
    rd->waiting = false;
    rd->wait_next = NULL;
    rd->sent = false;
    conn_resume_write(rd->conn);
}

void sl_fileread_complete(sl_fileread *rd)
{
    sl_conn *c = rd->conn;
    sl_server *srv = c->srv;
    if (srv->timing) {
        unsigned i = c->t.n_reads++;
        if (i < SL_TIMING_READS) {
            c->t.reads[i][0] = rd->job.t_queued;
            c->t.reads[i][1] = rd->job.t_started ? rd->job.t_started : rd->job.t_queued;
            c->t.reads[i][2] = rd->job.t_done ? rd->job.t_done : sl_now_ns();
        }
    }
    rd->inflight = false;
    srv->reads_inflight--;
    c->pending--;
    if (c->closed) {
        /* The client left while we read: now, and not before, its memory can go. */
        sl_conn_release(c);
    } else {
        rd->ready = true;
        rd->pos = 0;
        conn_resume_write(c);
    }
    wake_waiter(srv);
}

/* ---- the driver ---- */

static void conn_resume_write(sl_conn *c)
{
    sl_conn_resume(c);
}

/* Start the asynchronous transfer of the block at the head of the file chunk: a read into the
 * connection's buffer through the backend, or (hybrid, cold block, send_direct) a read thread
 * that calls sendfile() itself. The socket is non-blocking, so that thread waits only for the
 * disk, never for the client, and the pages go to the socket without the copy into and out of
 * a user buffer a pread() would cost; the socket stays open while the job is out (see
 * sl_conn_close). Either way at most max_reads are in flight; beyond that the connection waits
 * in FIFO order. Returns 2 (waiting) or a negative errno. */
static int start_block(sl_conn *c, const sl_chunk *h, bool send_direct)
{
    sl_server *srv = c->srv;
    sl_fileread *rd = &c->rd;
    if (rd->waiting) return 2;
    off_t left = h->end - h->off;
    size_t len = (size_t)left < srv->block_size ? (size_t)left : srv->block_size;
    if (!send_direct) {
        int r = buf_get(srv, rd, len);
        if (r < 0) return r;
    }
    rd->conn = c;
    rd->fd = h->fd;
    rd->sock = c->fd;
    rd->off = h->off;
    rd->len = len;
    rd->skip = 0;
    rd->pos = 0;
    rd->ready = false;
    rd->sent = send_direct;
    if (srv->reads_inflight >= srv->max_reads) {
        wait_for_slot(srv, rd);
        return 2;
    }
    int r;
    if (send_direct) {
        rd->job.work = sendfile_work;
        rd->job.done = read_done;
        r = sl_tpool_submit(srv->read_pool, &rd->job);
    } else {
        r = srv->nb->submit(srv, rd);
    }
    if (r == -EAGAIN) {
        wait_for_slot(srv, rd);
        return 2;
    }
    if (r < 0) return r;
    rd->inflight = true;
    srv->reads_inflight++;
    c->pending++;
    return 2;
}

/* Write from the block that arrived. Returns 0 to go on, 1 when the socket would block, or a
 * negative errno. */
static int write_block(sl_conn *c, sl_chunk *h, size_t *done)
{
    sl_fileread *rd = &c->rd;
    if (rd->res < 0) return (int)rd->res;
    if (rd->off + (off_t)rd->pos != h->off) {
        /* A block for a different place (a new chunk began): read again. */
        rd->ready = false;
        return 0;
    }
    size_t avail = (size_t)rd->res - rd->pos;
    if (avail == 0) return -ENODATA; /* the file ended before the chunk did */
    size_t want = (size_t)(h->end - h->off) < avail ? (size_t)(h->end - h->off) : avail;
    bool more = h->next != NULL || want < (size_t)(h->end - h->off);
    ssize_t n = send(c->fd, rd->buf + rd->skip + rd->pos, want, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
        if (errno == EINTR) return 0;
        return -errno;
    }
    rd->pos += (size_t)n;
    h->off += n;
    *done += (size_t)n;
    c->bytes_out += (uint64_t)n;
    if (rd->pos == (size_t)rd->res) rd->ready = false;
    if (h->off == h->end) sl_chunkq_pop(&c->out);
    return (size_t)n < want ? 1 : 0;
}

int sl_netback_write(sl_conn *c)
{
    sl_server *srv = c->srv;
    size_t done = 0;
    for (;;) {
        sl_chunk *h = c->out.head;
        if (!h) return 0;
        if (done >= WRITE_BUDGET) return 1;
        int r;
        if (h->fd < 0) {
            r = sl_chunkq_write_mem(&c->out, c->fd, WRITE_BUDGET - done, &c->bytes_out, &done);
            if (r != 0) return r;
            continue;
        }
        if (h->off == h->end) {
            sl_chunkq_pop(&c->out);
            continue;
        }
        sl_fileread *rd = &c->rd;
        if (rd->ready && rd->sent) {
            /* A thread sent part of this chunk straight from the file. */
            rd->ready = rd->sent = false;
            if (rd->res == -EAGAIN) return 1; /* the socket was full: wait until writable */
            if (rd->res < 0) return (int)rd->res;
            if (rd->res == 0) return -ENODATA;
            h->off += rd->res;
            done += (size_t)rd->res;
            c->bytes_out += (uint64_t)rd->res;
            if (h->off == h->end) sl_chunkq_pop(&c->out);
            continue;
        }
        if (rd->ready) {
            r = write_block(c, h, &done);
            if (r != 0) return r;
            continue;
        }
        if (rd->inflight || rd->waiting) return 2;
        switch (srv->nb->kind) {
        case SL_NB_SENDFILE:
            r = sl_chunkq_sendfile(&c->out, c->fd, WRITE_BUDGET - done, &c->bytes_out, &done);
            break;
        case SL_NB_PREAD:
            r = buf_get(srv, rd, (size_t)(h->end - h->off) < srv->block_size
                                     ? (size_t)(h->end - h->off)
                                     : srv->block_size);
            if (r < 0) return r;
            rd->fd = h->fd;
            rd->off = h->off;
            rd->len = (size_t)(h->end - h->off) < srv->block_size ? (size_t)(h->end - h->off)
                                                                   : srv->block_size;
            rd->skip = rd->pos = 0;
            sl_fileread_sync(rd);
            rd->ready = true;
            r = 0;
            break;
        case SL_NB_HYBRID: {
            size_t probe = (size_t)(h->end - h->off) < srv->block_size
                               ? (size_t)(h->end - h->off)
                               : srv->block_size;
            int res = sl_page_cache_resident(h->fd, h->off, probe);
            if (res > 0) {
                r = sl_chunkq_sendfile(&c->out, c->fd,
                                       probe < WRITE_BUDGET - done ? probe : WRITE_BUDGET - done,
                                       &c->bytes_out, &done);
                break;
            }
            if (res < 0) {
                /* No cachestat(): ask for the block with RWF_NOWAIT, which copies what the
                 * page cache has and never waits for the disk. */
                r = buf_get(srv, rd, probe);
                if (r < 0) return r;
                struct iovec iov = {rd->buf, probe};
                ssize_t n = preadv2(h->fd, &iov, 1, h->off, RWF_NOWAIT);
                if (n > 0) {
                    rd->fd = h->fd;
                    rd->off = h->off;
                    rd->len = probe;
                    rd->skip = rd->pos = 0;
                    rd->res = n;
                    rd->ready = true;
                    r = 0;
                    break;
                }
                if (n == 0) return -ENODATA;
            }
            r = start_block(c, h, true);
            break;
        }
        default:
            r = start_block(c, h, false);
            break;
        }
        if (r != 0) return r;
    }
}

/* ---- synchronous backends ---- */

static const sl_netbackend nb_sendfile = {
    .name = "linux-sendfile",
    .kind = SL_NB_SENDFILE,
};

static const sl_netbackend nb_writev = {
    .name = "writev",
    .kind = SL_NB_PREAD,
};

/* ---- gthread-aio: a pool of read threads ---- */

static void read_work(sl_job *job)
{
    sl_fileread_sync((sl_fileread *)job);
}

static void read_done(sl_job *job)
{
    /* shared by pread and sendfile jobs */
    sl_fileread_complete((sl_fileread *)job);
}

static int threads_init(sl_server *srv, char *err, size_t errlen)
{
    /* The queue never refuses in practice: reads are bounded before they get here. */
    srv->read_pool = sl_tpool_new(srv->base, "sl-read", (unsigned)srv->global.max_read_threads,
                                  (unsigned)srv->max_reads + 1);
    if (!srv->read_pool) {
        snprintf(err, errlen, "cannot start %ld read threads: %s", srv->global.max_read_threads,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void threads_fini(sl_server *srv)
{
    sl_tpool_free(srv->read_pool);
    srv->read_pool = NULL;
}

static int threads_submit(sl_server *srv, sl_fileread *rd)
{
    rd->job.work = read_work;
    rd->job.done = read_done;
    return sl_tpool_submit(srv->read_pool, &rd->job);
}

static const sl_netbackend nb_threads = {
    .name = "gthread-aio",
    .kind = SL_NB_ASYNC,
    .read_on_stat = true,
    .init = threads_init,
    .fini = threads_fini,
    .submit = threads_submit,
};

static const sl_netbackend nb_hybrid = {
    .name = "hybrid",
    .kind = SL_NB_HYBRID,
    .readahead_on_stat = true,
    .init = threads_init,
    .fini = threads_fini,
    .submit = threads_submit,
};

/* ---- registry ---- */

extern const sl_netbackend sl_nb_posix_aio;
#ifdef SL_HAVE_LIBAIO
extern const sl_netbackend sl_nb_linux_aio;
#endif
#ifdef SL_HAVE_URING
extern const sl_netbackend sl_nb_uring;
#endif

const sl_netbackend *const sl_netbackends[] = {
    &nb_hybrid,
    &nb_sendfile,
    &nb_writev,
    &nb_threads,
    &sl_nb_posix_aio,
#ifdef SL_HAVE_LIBAIO
    &sl_nb_linux_aio,
#endif
#ifdef SL_HAVE_URING
    &sl_nb_uring,
#endif
    NULL,
};

const sl_netbackend *sl_netback_find(const char *name)
{
    for (size_t i = 0; sl_netbackends[i]; i++)
        if (!strcmp(sl_netbackends[i]->name, name)) return sl_netbackends[i];
    return NULL;
}

int sl_netback_init(sl_server *srv, char *err, size_t errlen)
{
    srv->nb = sl_netback_find(srv->global.network_backend);
    if (!srv->nb) {
        snprintf(err, errlen, "network backend \"%s\" is not compiled in",
                 srv->global.network_backend);
        return -1;
    }
    srv->block_size = (size_t)srv->global.block_size;
    srv->max_reads = srv->global.max_read_threads > 0 ? (unsigned)srv->global.max_read_threads : 1;
    srv->max_free_bufs = srv->max_reads * 2;
    srv->free_bufs = calloc(srv->max_free_bufs, sizeof *srv->free_bufs);
    if (!srv->free_bufs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (srv->nb->init && srv->nb->init(srv, err, errlen) < 0) return -1;
    return 0;
}

void sl_netback_fini(sl_server *srv)
{
    if (srv->nb && srv->nb->fini) srv->nb->fini(srv);
    for (size_t i = 0; i < srv->n_free_bufs; i++) free(srv->free_bufs[i]);
    free(srv->free_bufs);
    srv->free_bufs = NULL;
    srv->n_free_bufs = 0;
}
