/* Network backends: the shared driver and the backends that need no kernel AIO interface.
 *
 * sl_xfer_send sends one file range to one socket. For the range it asks the backend's kind:
 * SENDFILE sends straight from the page cache on the loop (blocking when the pages are cold: the
 * articles' baseline); PREAD reads a block on the loop and sends it; ASYNC submits a block read
 * to the backend and answers "wait" until sl_xfer_complete() calls the owner back; HYBRID first
 * asks the kernel, without blocking, whether the block is in the page cache (and, for a later
 * block of a file, whether read-ahead has finished reading it) and then does SENDFILE or sends
 * the cold block through a read thread that calls sendfile() itself. Each xfer
 * has at most one block in flight; reads in flight on a loop are bounded by its share of
 * server.max-read-threads, and xfers beyond that wait in FIFO order for a slot. Block buffers are
 * recycled through a small per-loop free list so busy servers do not page-fault fresh memory per
 * block.
 */
#include "netback.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "queue.h"

#define BUF_ALIGN 4096

/* ---- the blocking core ---- */

ssize_t sl_pread_full(int fd, void *buf, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (got == 0) return -errno;
            break; /* report what arrived; the next read reports the error */
        }
        if (n == 0) break; /* end of file */
        got += (size_t)n;
    }
    return (ssize_t)got;
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
    static int unsupported; /* a benign race: every thread finds the same answer */
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

int sl_page_cache_settled(int fd, off_t off, size_t len)
{
    if (len == 0) return 1;
    /* The last page first: read-ahead submits in file order, so it is the likelier to wait. */
    off_t at[2] = {(off_t)(off + (off_t)len - 1), off};
    int looks = at[0] / 4096 == at[1] / 4096 ? 1 : 2; /* a range within one page: one look */
    for (int i = 0; i < looks; i++) {
        char b;
        struct iovec iov = {&b, 1};
        ssize_t n;
        do {
            n = preadv2(fd, &iov, 1, at[i], RWF_NOWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0) return errno == EAGAIN ? 0 : -errno;
        if (n == 0) return -ENODATA; /* the file ends before the range does */
    }
    return 1;
}

/* ---- buffers and read slots ---- */

static void buf_put(sl_io *io, sl_xfer *x);

/* The small-buffer class of a buffer of cap bytes (2 to SL_IO_SMALL_CLASSES + 1 pages: ranges of
 * up to 64 KiB, what hybrid's ring reads), or -1. */
static int small_class(size_t cap)
{
    size_t pages = cap / BUF_ALIGN;
    return cap % BUF_ALIGN == 0 && pages >= 2 && pages < 2 + SL_IO_SMALL_CLASSES
               ? (int)(pages - 2)
               : -1;
}

/* A buffer for `want` bytes. Full-size block buffers are recycled through the free list, and so
 * are short files' buffers (their own size, by the page, up to 64 KiB): a page-aligned
 * posix_memalign() and its free() per request were malloc's slowest paths (_int_memalign, and
 * malloc_consolidate of the fastbins each large request triggers: 3% of the loop's core on cold
 * 4 KiB files). */
static int buf_get(sl_io *io, sl_xfer *x, size_t want)
{
    size_t full = io->block_size + BUF_ALIGN;
    size_t need = ((want + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1)) + BUF_ALIGN;
    if (need > full) need = full;
    if (x->buf && x->cap >= need) return 0;
    buf_put(io, x);
    int k = need == full ? -1 : small_class(need);
    if (need == full && io->n_free_bufs > 0) {
        x->buf = io->free_bufs[--io->n_free_bufs];
    } else if (k >= 0 && io->n_small[k] > 0) {
        x->buf = io->small[k][--io->n_small[k]];
        io->small_bytes -= need;
    } else {
        void *p;
        /* One extra page: an O_DIRECT read of an unaligned range spans one more block. */
        if (posix_memalign(&p, BUF_ALIGN, need) != 0) return -ENOMEM;
        x->buf = p;
    }
    x->cap = need;
    return 0;
}

static void buf_put(sl_io *io, sl_xfer *x)
{
    if (!x->buf) return;
    int k = x->cap == io->block_size + BUF_ALIGN ? -1 : small_class(x->cap);
    if (x->cap == io->block_size + BUF_ALIGN && io->n_free_bufs < io->max_free_bufs) {
        io->free_bufs[io->n_free_bufs++] = x->buf;
    } else if (k >= 0 && io->n_small[k] < SL_IO_SMALL_KEEP &&
               io->small_bytes + x->cap <= SL_IO_SMALL_BYTES) {
        io->small[k][io->n_small[k]++] = x->buf;
        io->small_bytes += x->cap;
    } else {
        free(x->buf);
    }
    x->buf = NULL;
    x->cap = 0;
}

void sl_xfer_init(sl_xfer *x, sl_io *io, int sock, void (*resume)(sl_xfer *x), void *owner)
{
    memset(x, 0, sizeof *x);
    x->io = io;
    x->sock = sock;
    x->resume = resume;
    x->owner = owner;
    x->fd = -1;
    x->id_fd = -1;
    x->known_fd = -1;
}

void sl_xfer_set_file(sl_xfer *x, int fd, const struct stat *st)
{
    x->id_fd = fd;
    sl_file_id_of(&x->id, st);
    /* The head is written and sent before the body's first block is looked at: time enough
     * for the slot to arrive. */
    if (x->io) sl_resmemo_prefetch(x->io->memo, &x->id);
}

/* The loop's millisecond clock for the memo: the coarse clock is read from the vDSO without a
 * system call, and its few milliseconds of granularity are nothing against the trust time. */
static uint64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sl_xfer_adopt(sl_xfer *x, int fd, char *buf, size_t cap, off_t off, size_t n)
{
    buf_put(x->io, x);
    x->buf = buf;
    x->cap = cap;
    x->fd = fd;
    x->off = off;
    x->len = n;
    x->skip = 0;
    x->pos = 0;
    x->res = (ssize_t)n;
    x->ready = true;
    x->sent = false;
}

void sl_xfer_reset(sl_xfer *x)
{
    sl_io *io = x->io;
    if (!io) return;
    if (x->waiting) {
        /* Leave the slot queue: the range ended (or the owner left) while it waited. */
        sl_xfer **pp = &io->wait_head;
        sl_xfer *prev = NULL;
        while (*pp && *pp != x) {
            prev = *pp;
            pp = &(*pp)->wait_next;
        }
        if (*pp) {
            *pp = x->wait_next;
            if (io->wait_tail == x) io->wait_tail = prev;
        }
        x->waiting = false;
        x->wait_next = NULL;
    }
    if (io->nb && io->nb->release) io->nb->release(io, x);
    buf_put(io, x);
    x->ready = false;
    x->sent = false;
    x->res = 0;
    x->pos = 0;
    x->skip = 0;
    x->id_fd = -1;
    x->known = 0;
    x->known_fd = -1;
}

static void wait_for_slot(sl_io *io, sl_xfer *x)
{
    x->waiting = true;
    x->wait_next = NULL;
    x->wait_ticket = ++io->wait_seq;
    SL_QUEUE_APPEND(io->wait_head, io->wait_tail, x, wait_next);
}

/* A slot freed: let the longest-waiting xfers try again, in order, while a slot is free. A woken
 * xfer need not take one: its owner may find the socket full and wait for the client, or its next
 * block may be in the page cache and go out inline. Waking one waiter per freed slot then left
 * the slot unused with xfers still queued until another read ended: with 8 or 16 read threads,
 * cold 10 MiB files went at 22 requests/s instead of 130, the read threads asleep and the disk
 * nearly idle (bench/results/2026-11-30-read-slots/). Only xfers queued before
 * this pass are woken: one that queues itself again meanwhile (the pool's queue full) waits for
 * the next read to end. */
static void wake_waiters(sl_io *io)
{
    uint64_t upto = io->wait_seq;
    while (io->wait_head && io->reads_inflight < io->max_reads &&
           io->wait_head->wait_ticket <= upto) {
        sl_xfer *x = io->wait_head;
        io->wait_head = x->wait_next;
        if (!io->wait_head) io->wait_tail = NULL;
        x->waiting = false;
        x->wait_next = NULL;
        x->sent = false;
        /* The owner may be gone after resume() (it checks and releases): x is not used after. */
        x->resume(x);
    }
}

void sl_xfer_complete(sl_xfer *x)
{
    sl_io *io = x->io;
    if (x->on_read)
        x->on_read(x, x->job.t_queued, x->job.t_started ? x->job.t_started : x->job.t_queued,
                   x->job.t_done ? x->job.t_done : sl_now_ns());
    x->inflight = false;
    io->reads_inflight--;
    x->ready = true;
    x->pos = 0;
    /* The owner may be gone (its resume() checks and releases): nothing of x is used after. */
    x->resume(x);
    wake_waiters(io);
}

static void sendfile_work(sl_job *job)
{
    sl_xfer *x = (sl_xfer *)job;
    off_t off = x->off;
    size_t sent = 0;
    while (sent < x->len) {
        ssize_t n = sendfile(x->sock, x->fd, &off, x->len - sent);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (sent == 0) {
            x->res = n < 0 ? -errno : 0;
            return;
        }
        break; /* socket full or file ended: report what went out */
    }
    x->res = (ssize_t)sent;
}

static void read_done(sl_job *job)
{
    sl_xfer_complete((sl_xfer *)job);
}

/* The most a send of a turn with `room` bytes of budget left may carry: room rounded up to whole
 * pages, so that an unlimited turn (room about a block) sends whole blocks as before, while a
 * bandwidth limit's small budget holds. */
static size_t room_cap(size_t room)
{
    return (room + 4095) & ~(size_t)4095;
}

/* Start the asynchronous transfer of the block at *off: a read into x's buffer through the
 * backend, or (hybrid, cold block, send_direct) a read thread that calls sendfile() itself. The
 * socket is non-blocking, so that thread waits only for the disk, never for the client, and the
 * pages go to the socket without the copy into and out of a user buffer a pread() would cost; the
 * owner keeps the socket open while the job is out. Either way at most max_reads are in flight;
 * beyond that the xfer waits in FIFO order. Returns SL_XFER_WAIT or a negative errno. */
static int start_block(sl_xfer *x, int fd, off_t off, off_t end, bool send_direct, size_t room)
{
    sl_io *io = x->io;
    if (x->waiting) return SL_XFER_WAIT;
    off_t left = end - off;
    size_t len = (size_t)left < io->block_size ? (size_t)left : io->block_size;
    /* A thread that sends the block itself sends it whole: keep it within the turn's budget. */
    if (send_direct && len > room_cap(room)) len = room_cap(room);
    if (!send_direct) {
        int r = buf_get(io, x, len);
        if (r < 0) return r;
    }
    x->fd = fd;
    x->off = off;
    x->len = len;
    x->skip = 0;
    x->pos = 0;
    x->ready = false;
    x->sent = send_direct;
    if (io->reads_inflight >= io->max_reads) {
        wait_for_slot(io, x);
        return SL_XFER_WAIT;
    }
    int r;
    if (send_direct) {
        x->job.work = sendfile_work;
        x->job.done = read_done;
        r = sl_tpool_submit(io->read_pool, io->port, &x->job);
    } else {
        r = io->nb->submit(io, x);
    }
    if (r == -EAGAIN) {
        wait_for_slot(io, x);
        return SL_XFER_WAIT;
    }
    if (r < 0) return r;
    x->inflight = true;
    io->reads_inflight++;
    return SL_XFER_WAIT;
}

/* Send from the block that arrived, at most about room bytes. Returns 0 to go on, SL_XFER_AGAIN,
 * or a negative errno. */
static int send_block(sl_xfer *x, off_t *off, off_t end, bool more, size_t room, uint64_t *sent,
                      size_t *done)
{
    if (x->res < 0) return (int)x->res;
    if (x->off + (off_t)x->pos != *off) {
        /* A block for a different place (a new range began): read again. */
        x->ready = false;
        return 0;
    }
    size_t avail = (size_t)x->res - x->pos;
    if (avail == 0) return -ENODATA; /* the file ended before the range did */
    size_t want = (size_t)(end - *off) < avail ? (size_t)(end - *off) : avail;
    if (want > room_cap(room)) want = room_cap(room);
    bool rest = more || want < (size_t)(end - *off);
    ssize_t n = send(x->sock, x->buf + x->skip + x->pos, want,
                     MSG_NOSIGNAL | (rest ? MSG_MORE : 0));
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return SL_XFER_AGAIN;
        if (errno == EINTR) return 0;
        return -errno;
    }
    x->pos += (size_t)n;
    *off += n;
    *done += (size_t)n;
    *sent += (uint64_t)n;
    if (x->pos == (size_t)x->res) x->ready = false;
    return (size_t)n < want ? SL_XFER_AGAIN : 0;
}

/* sendfile() up to max bytes at *off. 0 after a write (maybe short: call again), SL_XFER_AGAIN
 * when the socket is full, or a negative errno (-ENODATA: the file ended early). */
static int send_inline(sl_xfer *x, int fd, off_t *off, size_t max, uint64_t *sent, size_t *done)
{
    ssize_t n;
    do {
        n = sendfile(x->sock, fd, off, max);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? SL_XFER_AGAIN : -errno;
    if (n == 0) return -ENODATA; /* EOF before the end of the range: the file shrank */
    *done += (size_t)n;
    *sent += (uint64_t)n;
    return 0;
}

/* Hybrid: is the block at off in the page cache? 1 yes, 0 no, negative errno when the kernel
 * cannot tell. A file the loop found wholly cached within the trust time is taken as cached
 * without asking again; a check that covers the whole file teaches the memo either way. */
static inline __attribute__((always_inline)) int hybrid_resident(sl_xfer *x, int fd, off_t off,
                                                                 size_t block)
{
    sl_io *io = x->io;
    bool known = x->id_fd == fd && x->id.ino && io->memo;
    uint64_t now = known ? coarse_ms() : 0;
    if (known && sl_resmemo_trust(io->memo, &x->id, now)) return 1;
    int res = sl_page_cache_resident(fd, off, block);
    /* A later block of a file being read: cachestat() also counts the pages read-ahead has
     * asked the disk for and not yet got, and a sendfile() of them on the loop would wait for
     * the disk (cold 10 MiB files: the loop in D state 58% of the time, read-ahead of 8 MiB).
     * The first block comes from a read that finished or from none, so it needs no second
     * look, and a file of one block (the rest of it after a full socket too) pays nothing. */
    if (res > 0 && off >= (off_t)io->block_size) {
        int ok = sl_page_cache_settled(fd, off, block);
        if (ok == 0) res = 0;
    }
    if (known && res >= 0) {
        __atomic_store_n(&io->memo_checks, io->memo_checks + 1, __ATOMIC_RELAXED);
        sl_resmemo_note(io->memo, &x->id, now, off == 0 && (int64_t)block >= x->id.size,
                        res > 0);
    }
    return res;
}

/* What sl_xfer_prepare found for the block at off of fd, taken once: 1 cached, 0 not, -1 unknown
 * (ask). It holds for the moments between the two calls, while the head is written. */
static int take_known(sl_xfer *x, int fd, off_t off)
{
    int k = x->known;
    if (!k) return -1;
    x->known = 0;
    if (x->known_fd != fd || x->known_off != off) return -1;
    return k == 1 ? 1 : 0;
}

static void set_known(sl_xfer *x, int fd, off_t off, bool cached)
{
    x->known = cached ? 1 : 2;
    x->known_fd = fd;
    x->known_off = off;
}

/* Read the block at off on the loop into x's buffer (a hot block, or a synchronous backend).
 * nowait: only what the page cache holds (RWF_NOWAIT); -EAGAIN when that is nothing. 0 when a
 * block is ready, or a negative errno (-ENODATA: the file ended). */
static int read_inline(sl_xfer *x, int fd, off_t off, size_t block, bool nowait)
{
    int r = buf_get(x->io, x, block);
    if (r < 0) return r;
    ssize_t n;
    if (nowait) {
        struct iovec iov = {x->buf, block};
        do {
            n = preadv2(fd, &iov, 1, off, RWF_NOWAIT);
        } while (n < 0 && errno == EINTR);
        /* A file RWF_NOWAIT cannot be asked of (EOPNOTSUPP: a memfd or tmpfs file on some
         * kernels, any file under valgrind) says nothing about the page cache: the backend
         * reads it as it reads a cold block. */
        if (n < 0) n = errno == EOPNOTSUPP ? -EAGAIN : -errno;
    } else {
        n = sl_pread_full(fd, x->buf, block, off);
    }
    if (n == 0) return -ENODATA;
    if (n < 0) return (int)n;
    x->fd = fd;
    x->off = off;
    x->len = block;
    x->skip = x->pos = 0;
    x->res = n;
    x->ready = true;
    return 0;
}

/* Hand bytes of the block that arrived to the sink. 0 to go on, SL_XFER_AGAIN, or a negative
 * errno. The length offered after an -EAGAIN is the same as before (nothing moved), as
 * SSL_write's retry wants. */
static int sink_block(sl_xfer *x, off_t *off, off_t end, uint64_t *sent, size_t *done)
{
    if (x->res < 0) return (int)x->res;
    if (x->off + (off_t)x->pos != *off) {
        x->ready = false; /* a block for a different place: read again */
        return 0;
    }
    size_t avail = (size_t)x->res - x->pos;
    if (avail == 0) return -ENODATA;
    size_t want = (size_t)(end - *off) < avail ? (size_t)(end - *off) : avail;
    ssize_t n = x->sink->write(x->owner, x->buf + x->skip + x->pos, want);
    if (n == -EAGAIN) return SL_XFER_AGAIN;
    if (n < 0) return (int)n;
    x->pos += (size_t)n;
    *off += n;
    *done += (size_t)n;
    *sent += (uint64_t)n;
    if (x->pos == (size_t)x->res) x->ready = false;
    return 0;
}

/* sl_xfer_send through a sink (TLS). What is hot is read on the loop (or, with kTLS, sent with
 * the sink's sendfile), what is cold is read by the backend off the loop; the bytes then go to
 * the sink. Synchronous backends read on the loop, as they would send on it. */
static int sink_send(sl_xfer *x, int fd, off_t *off, off_t end, size_t budget, uint64_t *sent)
{
    sl_io *io = x->io;
    size_t done = 0;
    while (*off < end) {
        if (done >= budget) return SL_XFER_AGAIN;
        int r;
        if (x->ready) {
            r = sink_block(x, off, end, sent, &done);
            if (r != 0) return r;
            continue;
        }
        if (sl_xfer_busy(x)) return SL_XFER_WAIT;
        size_t block = (size_t)(end - *off) < io->block_size ? (size_t)(end - *off) : io->block_size;
        int hot; /* 1 hot, 0 cold, -1 unknown (hybrid without cachestat: try RWF_NOWAIT) */
        switch (io->nb->kind) {
        case SL_NB_SENDFILE:
        case SL_NB_PREAD: hot = 1; break;
        case SL_NB_HYBRID: hot = hybrid_resident(x, fd, *off, block); break;
        default: hot = 0; break;
        }
        if (hot > 0 && x->sink->sendfile) {
            size_t room = budget - done;
            ssize_t n = x->sink->sendfile(x->owner, fd, *off, block < room ? block : room);
            if (n == -EAGAIN) return SL_XFER_AGAIN;
            if (n < 0) return (int)n;
            if (n == 0) return -ENODATA;
            *off += n;
            done += (size_t)n;
            *sent += (uint64_t)n;
            continue;
        }
        if (hot != 0) {
            r = read_inline(x, fd, *off, block, hot < 0);
            if (r == 0 || r != -EAGAIN) {
                if (r != 0) return r;
                continue;
            }
        }
        r = start_block(x, fd, *off, end, false, budget - done);
        if (r != 0) return r;
    }
    return 0;
}

int sl_xfer_send(sl_xfer *x, int fd, off_t *off, off_t end, size_t budget, uint64_t *sent)
{
    if (x->sink) return sink_send(x, fd, off, end, budget, sent);
    sl_io *io = x->io;
    size_t done = 0;
    const bool more = false;
    while (*off < end) {
        if (done >= budget) return SL_XFER_AGAIN;
        size_t room = budget - done;
        int r;
        if (x->ready && x->sent) {
            /* A thread sent part of this range straight from the file. */
            x->ready = x->sent = false;
            if (x->res == -EAGAIN) return SL_XFER_AGAIN; /* the socket was full */
            if (x->res < 0) return (int)x->res;
            if (x->res == 0) return -ENODATA;
            *off += x->res;
            done += (size_t)x->res;
            *sent += (uint64_t)x->res;
            continue;
        }
        if (x->ready) {
            r = send_block(x, off, end, more, room, sent, &done);
            if (r != 0) return r;
            continue;
        }
        if (sl_xfer_busy(x)) return SL_XFER_WAIT;
        size_t block = (size_t)(end - *off) < io->block_size ? (size_t)(end - *off) : io->block_size;
        switch (io->nb->kind) {
        case SL_NB_SENDFILE:
            r = send_inline(x, fd, off, (size_t)(end - *off) < room ? (size_t)(end - *off) : room,
                            sent, &done);
            break;
        case SL_NB_PREAD:
            r = buf_get(io, x, block);
            if (r < 0) return r;
            x->fd = fd;
            x->off = *off;
            x->len = block;
            x->skip = x->pos = 0;
            x->res = sl_pread_full(fd, x->buf, block, *off);
            x->ready = true;
            r = 0;
            break;
        case SL_NB_HYBRID: {
            int res = take_known(x, fd, *off);
            if (res < 0) res = hybrid_resident(x, fd, *off, block);
            if (res > 0) {
                r = send_inline(x, fd, off, block < room ? block : room, sent, &done);
                break;
            }
            if (res < 0) {
                /* No cachestat(): ask for the block with RWF_NOWAIT, which copies what the
                 * page cache has and never waits for the disk. */
                r = buf_get(io, x, block);
                if (r < 0) return r;
                struct iovec iov = {x->buf, block};
                ssize_t n = preadv2(fd, &iov, 1, *off, RWF_NOWAIT);
                if (n > 0) {
                    x->fd = fd;
                    x->off = *off;
                    x->len = block;
                    x->skip = x->pos = 0;
                    x->res = n;
                    x->ready = true;
                    r = 0;
                    break;
                }
                if (n == 0) return -ENODATA;
            }
            /* A cold small block through the ring, read into a buffer without a thread; a
             * larger one (or any, without a ring) by a read thread that sends it itself. */
            r = start_block(x, fd, *off, end,
                            !io->priv || (size_t)(end - *off) > SL_HYBRID_RING_MAX, room);
            break;
        }
        default:
            r = start_block(x, fd, *off, end, false, room);
            break;
        }
        if (r != 0) return r;
    }
    return 0;
}

int sl_xfer_prepare(sl_xfer *x, int fd, off_t off, off_t end)
{
    sl_io *io = x->io;
    if (!io || x->sink || off >= end) return 0;
    if (x->ready) {
        /* A block is here (peek it), or a thread's sendfile result sl_xfer_send accounts for. */
        if (x->sent || (x->fd == fd && x->off + (off_t)x->pos == off)) return 0;
        x->ready = false; /* a block of another place: read again */
    }
    if (sl_xfer_busy(x)) return SL_XFER_WAIT;
    size_t block = (size_t)(end - off) < io->block_size ? (size_t)(end - off) : io->block_size;
    switch (io->nb->kind) {
    case SL_NB_ASYNC: return start_block(x, fd, off, end, false, block);
    case SL_NB_HYBRID: {
        /* Called again for the same block (woken from the slot queue, or the head met a full
         * socket): the look before still holds. */
        int res = x->known && x->known_fd == fd && x->known_off == off
                      ? x->known == 1
                      : hybrid_resident(x, fd, off, block);
        if (res < 0) return 0; /* no cachestat(): sl_xfer_send asks with RWF_NOWAIT */
        set_known(x, fd, off, res > 0);
        /* Cached pages go out with sendfile() behind the head, a large cold range through a
         * read thread's sendfile(): only the ring reads into the buffer. */
        if (res > 0 || !io->priv || (size_t)(end - off) > SL_HYBRID_RING_MAX) return 0;
        return start_block(x, fd, off, end, false, block);
    }
    default: return 0;
    }
}

size_t sl_xfer_peek(const sl_xfer *x, int fd, off_t off, off_t end, const void **p)
{
    if (!x->ready || x->sent || x->res <= 0 || x->fd != fd || x->off + (off_t)x->pos != off ||
        off >= end)
        return 0;
    size_t avail = (size_t)x->res - x->pos;
    *p = x->buf + x->skip + x->pos;
    return (size_t)(end - off) < avail ? (size_t)(end - off) : avail;
}

void sl_xfer_consumed(sl_xfer *x, size_t n)
{
    x->pos += n;
    if (x->pos == (size_t)x->res) x->ready = false;
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

/* ---- gthread-aio: the shared pool of read threads ---- */

static void read_work(sl_job *job)
{
    sl_xfer *x = (sl_xfer *)job;
    x->res = sl_pread_full(x->fd, x->buf + x->skip, x->len, x->off);
}

static int threads_submit(sl_io *io, sl_xfer *x)
{
    x->job.work = read_work;
    x->job.done = read_done;
    return sl_tpool_submit(io->read_pool, io->port, &x->job);
}

static const sl_netbackend nb_threads = {
    .name = "gthread-aio",
    .kind = SL_NB_ASYNC,
    .read_on_stat = true,
    .uses_read_pool = true,
    .submit = threads_submit,
};

/* hybrid with a ring (liburing, and a kernel that gives one): lookups that would touch the disk
 * (mod_static submits them with sl_io_open_submit) and cold blocks of small files go through the
 * loop's io_uring; without a ring, or as "hybrid-threads", stat and read threads do both.
 *
 * Measured on cold 4 KiB files (bench/results/2026-11-30-hybrid-ring): a lookup through the ring
 * costs one trip through the kernel's io-wq instead of one through a stat thread, and a cold small
 * block is read without any thread (the page's I/O completion finishes it); 1.90x nginx `aio
 * threads` against 1.35x with threads (wrk: 2.14x against 1.33x). Larger cold blocks stay with the read threads, which send
 * them straight from the file: the ring reads them into a buffer, and its buffered reads of
 * 100 KiB cost about 2.5 times the CPU (the io-uring backend: cold 100 KiB at 0.36x). */
#ifdef SL_HAVE_URING
static int hybrid_init(sl_io *io, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    char why[256];
    if (sl_uring_init(io, why, sizeof why) < 0) {
        /* Not an error: the threads do what the ring would. Said once, not per loop. */
        static bool said;
        if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
            sl_log("hybrid: %s; lookups and cold reads go to the stat and read threads", why);
    }
    return 0;
}

static void hybrid_fini(sl_io *io)
{
    if (io->priv) sl_uring_fini(io);
}

static int hybrid_submit(sl_io *io, sl_xfer *x)
{
    return io->priv && x->len <= SL_HYBRID_RING_MAX ? sl_uring_submit(io, x) : threads_submit(io, x);
}

static int hybrid_open_submit(sl_io *io, sl_openreq *op)
{
    return io->priv ? sl_uring_open_submit(io, op) : -ENOSYS;
}
#endif

static const sl_netbackend nb_hybrid = {
    .name = "hybrid",
    .kind = SL_NB_HYBRID,
    .readahead_on_stat = true,
    .uses_read_pool = true,
#ifdef SL_HAVE_URING
    .init = hybrid_init,
    .fini = hybrid_fini,
    .submit = hybrid_submit,
    .open_submit = hybrid_open_submit,
#else
    .submit = threads_submit,
#endif
};

/* hybrid without the ring: what hybrid does where the kernel refuses io_uring (and did before
 * it had one), for a kernel whose io_uring an administrator would rather not use. */
static const sl_netbackend nb_hybrid_threads = {
    .name = "hybrid-threads",
    .kind = SL_NB_HYBRID,
    .readahead_on_stat = true,
    .uses_read_pool = true,
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
    &nb_hybrid_threads,
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

int sl_io_init(sl_io *io, struct event_base *base, sl_tport *port, const sl_io_config *cfg,
               char *err, size_t errlen)
{
    memset(io, 0, sizeof *io);
    io->base = base;
    io->port = port;
    io->nb = cfg->nb;
    io->read_pool = cfg->read_pool;
    io->block_size = cfg->block_size;
    io->max_reads = cfg->max_reads ? cfg->max_reads : 1;
    io->threads = cfg->threads;
    io->max_free_bufs = io->max_reads * 2;
    io->free_bufs = calloc(io->max_free_bufs, sizeof *io->free_bufs);
    if (!io->free_bufs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (io->nb->uses_read_pool && !io->read_pool) {
        snprintf(err, errlen, "network backend %s needs the read threads", io->nb->name);
        return -1;
    }
    if (io->nb->kind == SL_NB_HYBRID) {
        /* 2^18 slots of 24 bytes in sets of four: 6 MiB of address space per loop, of which
         * only the pages of slots used are ever touched (calloc's fresh pages are the kernel's
         * zero page). A hot set of 100,000 files keeps about 98% of its entries. */
        io->memo = sl_resmemo_new(18);
        if (!io->memo) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    if (io->nb->init && io->nb->init(io, err, errlen) < 0) return -1;
    return 0;
}

void sl_io_fini(sl_io *io)
{
    if (io->nb && io->nb->fini) io->nb->fini(io);
    for (size_t i = 0; i < io->n_free_bufs; i++) free(io->free_bufs[i]);
    for (int k = 0; k < SL_IO_SMALL_CLASSES; k++) {
        while (io->n_small[k] > 0) free(io->small[k][--io->n_small[k]]);
    }
    io->small_bytes = 0;
    free(io->free_bufs);
    io->free_bufs = NULL;
    io->n_free_bufs = 0;
    sl_resmemo_free(io->memo);
    io->memo = NULL;
}

int sl_io_open_submit(sl_io *io, sl_openreq *op)
{
    if (!io->async_opens || !io->nb->open_submit) return -ENOSYS;
    return io->nb->open_submit(io, op);
}
