/* Network backends: how file bytes get from the disk to a socket.
 *
 * The io layer knows files, offsets and sockets; it knows no connection, request or config.
 * Each event loop owns one sl_io (the chosen backend's per-loop state: its ring or AIO context,
 * the read slots and the buffers); the read thread pool behind it is shared by every loop.
 *
 * A caller sends a file range to a socket through an sl_xfer it embeds (one per connection).
 * Synchronous backends send from the loop (sendfile, or pread into a buffer and send);
 * asynchronous ones read one block at a time into the xfer's buffer off the loop (threads, POSIX
 * AIO, Linux AIO, io_uring) and send it when the read completes. The hybrid default sends pages
 * that are already in the page cache inline with sendfile() and sends only cold blocks through a
 * read thread, which sendfile()s them itself. When a transfer has to wait (a read in flight, or
 * no free read slot), sl_xfer_send returns SL_XFER_WAIT and the io layer later calls the
 * resume() callback the owner gave: the owner then calls sl_xfer_send again. resume() also runs
 * for an xfer whose owner has gone (closed its connection) while a read was in flight: the owner
 * checks that first and releases its memory then, never before.
 */
#ifndef SL_NETBACK_H
#define SL_NETBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <sys/types.h>

#include "resmemo.h"
#include "threadpool.h"

struct event_base;
struct sl_io;

/* sl_xfer_send results besides 0 (range sent) and negative errnos. */
#define SL_XFER_AGAIN 1 /* the socket would block, or this turn's byte budget is spent */
#define SL_XFER_WAIT 2  /* a read is in flight or waits for a slot: resume() follows */

/* Where an xfer's bytes go when they may not go to the socket as they are: a TLS connection, whose
 * records are encrypted by OpenSSL (in user space) or by the kernel (kTLS). The functions get the
 * xfer's owner. With a sink the xfer never touches the socket itself, and the hybrid backend's
 * threads never sendfile() to it: file bytes are read into the xfer's buffer (hot blocks with
 * pread on the loop, cold ones through the backend, off the loop) and handed to write(). */
typedef struct sl_xfer_sink {
    /* Take up to len bytes of buf: the bytes taken (> 0), -EAGAIN when the peer cannot take more
     * now (the owner learns when it can from its own events; resume() is not called for it),
     * or another negative errno. A call after -EAGAIN passes the same bytes again. */
    ssize_t (*write)(void *owner, const void *buf, size_t len);
    /* Send len bytes of fd at off from the page cache, encrypted by the kernel (kTLS's
     * SSL_sendfile); same results as write. NULL: file bytes go through buffers and write(). */
    ssize_t (*sendfile)(void *owner, int fd, off_t off, size_t len);
    const char *name;      /* what the status page and the logs call this path */
} sl_xfer_sink;

/* One file range being sent to one socket. At most one block read is in flight per xfer. */
typedef struct sl_xfer {
    sl_job job;            /* thread-pool and POSIX-AIO completions travel as jobs */
    struct sl_io *io;
    int sock;              /* the socket bytes go to */
    /* The owner's callback, on the loop thread: a read completed or a read slot freed. */
    void (*resume)(struct sl_xfer *x);
    /* Optional, loop thread: a block read finished (CLOCK_MONOTONIC ns; for the timing trace). */
    void (*on_read)(struct sl_xfer *x, uint64_t queued, uint64_t started, uint64_t done);
    void *owner;
    /* NULL: bytes go to sock (sendfile, send). Otherwise through the sink (TLS); set by the
     * owner before the first sl_xfer_send and kept for the xfer's life. */
    const sl_xfer_sink *sink;
    /* The block read. */
    int fd;                /* the file (owned by the caller) */
    off_t off;             /* file offset of the first wanted byte */
    size_t len;            /* bytes wanted */
    char *buf;             /* block buffer, 4 KiB aligned, cap bytes */
    size_t cap;
    size_t skip;           /* bytes before `off` at the start of buf (O_DIRECT alignment) */
    ssize_t res;           /* bytes of the file at buf + skip, or a negative errno */
    size_t pos;            /* bytes of the result already sent */
    bool inflight;         /* submitted, completion not yet seen on the loop */
    bool ready;            /* res holds data not yet fully sent */
    bool waiting;          /* queued on the loop's list for a free read slot */
    bool sent;             /* hybrid: a thread sendfile()d res bytes itself (no buffer) */
    struct sl_xfer *wait_next;
    uint64_t wait_ticket;  /* the loop's wait_seq when it queued (wake order within one pass) */
    void *priv;            /* backend's per-xfer state (control blocks, O_DIRECT fd) */
    /* The file being sent, as its owner knows it (sl_xfer_set_file): lets the hybrid backend
     * trust the loop's residency memo for it. id_fd < 0 or another fd: unknown. */
    int id_fd;
    sl_file_id id;
    /* What sl_xfer_prepare learnt of the block at known_off of known_fd (hybrid): 1 in the page
     * cache, 2 not, 0 nothing; sl_xfer_send then does not ask the kernel again. */
    int known;
    int known_fd;
    off_t known_off;
} sl_xfer;

/* An open(2) submitted to a backend that can open without blocking (io-uring). */
typedef struct sl_openreq {
    int dirfd;             /* open beneath this directory */
    const char *path;      /* relative to dirfd */
    struct open_how how;   /* openat2 flags and resolve rules */
    int res;               /* the fd, or a negative errno */
    /* The caller found the path missing from the dentry cache (an openat2 with RESOLVE_CACHED
     * said -EAGAIN): the ring skips its own cached attempt and hands the open straight to its
     * workers. False: the ring tries the caches first (an open that cannot wait otherwise). */
    bool uncached;
    /* Loop thread: the open finished. */
    void (*done)(struct sl_openreq *op);
} sl_openreq;

/* A network backend. */
typedef struct sl_netbackend {
    const char *name;
    /* How file chunks are sent. */
    enum { SL_NB_SENDFILE, SL_NB_PREAD, SL_NB_ASYNC, SL_NB_HYBRID } kind;
    /* Per loop, after the event base exists: create rings, contexts. 0 or -1 with a message in
     * err. NULL when nothing is needed. */
    int (*init)(struct sl_io *io, char *err, size_t errlen);
    /* Per loop, at its end: wait for reads in flight, run their completions, release. */
    void (*fini)(struct sl_io *io);
    /* Start reading x->len bytes at x->off into x->buf. Returns 0 when the read is under way
     * (sl_xfer_complete follows on the loop thread), -EAGAIN when no slot is free (the xfer
     * waits for one), or another negative errno. */
    int (*submit)(struct sl_io *io, sl_xfer *x);
    /* An xfer's request ended with it idle: release backend state kept in x->priv. */
    void (*release)(struct sl_io *io, sl_xfer *x);
    /* Submit an openat2 that completes on the loop (op->done); NULL when the backend cannot.
     * 0 or a negative errno (-EAGAIN: no room now). */
    int (*open_submit)(struct sl_io *io, sl_openreq *op);
    /* Reads run on threads anyway: a stat thread may read the first block of a cold file. */
    bool read_on_stat;
    /* A stat thread may start the kernel's readahead of a cold file's first block, so the disk
     * is already busy with it when the loop asks for the data. */
    bool readahead_on_stat;
    /* Needs the shared read thread pool. */
    bool uses_read_pool;
} sl_netbackend;

/* hybrid with a ring: cold blocks (and remaining ranges) up to this many bytes are read through
 * the ring, larger ones by a read thread. */
#define SL_HYBRID_RING_MAX 65536

/* The io_uring ring of one loop (netback_uring.c; only with liburing): the io-uring backend's,
 * and hybrid's for lookups and cold small blocks. init: 0 (io->priv is the ring, and
 * io->async_opens is set), or -1 with err (no ring: the kernel or a sandbox refuses io_uring).
 * fini waits for the ring's own reads and opens only. submit and open_submit as the backend's
 * hooks above. */
int sl_uring_init(struct sl_io *io, char *err, size_t errlen);
void sl_uring_fini(struct sl_io *io);
int sl_uring_submit(struct sl_io *io, sl_xfer *x);
int sl_uring_open_submit(struct sl_io *io, sl_openreq *op);

/* What one loop's io needs to start. */
typedef struct sl_io_config {
    const sl_netbackend *nb;
    sl_tpool *read_pool;   /* shared read threads (nb->uses_read_pool), else NULL */
    size_t block_size;     /* bytes per asynchronous read */
    unsigned max_reads;    /* reads in flight at most on this loop */
    unsigned threads;      /* read threads configured (posix-aio sizes glibc's with it) */
} sl_io_config;

/* Short buffers a loop keeps for reuse (sl_io.small): 16 sizes, 2 to 17 pages (a range of up to
 * 64 KiB and a page), 32 of each at most, 2 MiB in all. */
#define SL_IO_SMALL_CLASSES 16
#define SL_IO_SMALL_KEEP 32
#define SL_IO_SMALL_BYTES (2u << 20)

/* One loop's io state. */
typedef struct sl_io {
    struct event_base *base;
    sl_tport *port;        /* the loop's completion port */
    const sl_netbackend *nb;
    void *priv;            /* the backend's own per-loop state (AIO context, ring) */
    sl_tpool *read_pool;
    size_t block_size;
    unsigned max_reads;
    unsigned threads;
    unsigned reads_inflight;
    sl_xfer *wait_head, *wait_tail; /* waiting for a read slot, FIFO */
    uint64_t wait_seq;     /* tickets handed to xfers as they queue */
    char **free_bufs;      /* recycled full-size block buffers */
    size_t n_free_bufs, max_free_bufs;
    /* Recycled short buffers, by size in pages (2 to SL_IO_SMALL_CLASSES + 1), at most
     * SL_IO_SMALL_KEEP of each and SL_IO_SMALL_BYTES in all. */
    char *small[SL_IO_SMALL_CLASSES][SL_IO_SMALL_KEEP];
    unsigned n_small[SL_IO_SMALL_CLASSES];
    size_t small_bytes;
    bool async_opens;      /* the backend opens files without blocking on this loop (a ring;
                            * set by its init): sl_io_open_submit works */
    sl_resmemo *memo;      /* hybrid: files lately found wholly in the page cache, else NULL */
    uint64_t memo_checks;  /* hybrid: cachestat() calls made for files with a known identity
                            * (written by the loop, read atomically by the status page) */
} sl_io;

/* The backend called `name`, if compiled in. */
const sl_netbackend *sl_netback_find(const char *name);
/* Every compiled-in backend, NULL-terminated, default first. */
extern const sl_netbackend *const sl_netbackends[];
/* The default backend's name. */
#define SL_NETBACK_DEFAULT "hybrid"

/* Start a loop's io on base with completions through port. 0 or -1 with a message in err. */
int sl_io_init(sl_io *io, struct event_base *base, sl_tport *port, const sl_io_config *cfg,
               char *err, size_t errlen);
/* Stop it: waits for reads in flight and runs their completions (owners release). */
void sl_io_fini(sl_io *io);

/* Submit an open to the backend's ring; -ENOSYS when this loop cannot open asynchronously
 * (io->async_opens is false). */
int sl_io_open_submit(sl_io *io, sl_openreq *op);

/* Prepare x (embedded in its owner) for io, sending to sock. */
void sl_xfer_init(sl_xfer *x, sl_io *io, int sock, void (*resume)(sl_xfer *x), void *owner);

/* The file the next sl_xfer_send calls send from fd is the one st describes (the owner's fstat):
 * the hybrid backend may then skip asking the kernel whether its pages are cached when the
 * loop found them all cached a moment ago. Cleared by sl_xfer_reset. */
void sl_xfer_set_file(sl_xfer *x, int fd, const struct stat *st);

/* Send bytes [*off, end) of fd to x->sock (or x->sink), at most about `budget` bytes now; *off
 * advances and *sent grows by what went out. Returns 0 when the range is sent, SL_XFER_AGAIN, SL_XFER_WAIT,
 * or a negative errno; -ENODATA means the file ended before `end` (truncated while sent). */
int sl_xfer_send(sl_xfer *x, int fd, off_t *off, off_t end, size_t budget, uint64_t *sent);

/* Before the bytes the owner queued ahead of [off, end) of fd go out (a response head): when the
 * first block of the range will be read into x's buffer (an asynchronous backend; hybrid's ring
 * for a cold small range), start that read now and return SL_XFER_WAIT (resume() follows), so
 * that the head can leave with the block in one write (sl_xfer_peek). 0 when the block goes out
 * another way (sendfile of cached pages, a read thread's sendfile, a sink) or is ready already:
 * send the head now. A negative errno when the read cannot start. Either way what it learnt
 * spares sl_xfer_send a second look at the page cache. */
int sl_xfer_prepare(sl_xfer *x, int fd, off_t off, off_t end);

/* The bytes of [off, end) of fd that x's buffer holds ready to go (a block read that completed,
 * or one a stat thread read): their length, *p their address; 0 when none. */
size_t sl_xfer_peek(const sl_xfer *x, int fd, off_t off, off_t end, const void **p);

/* n of the bytes sl_xfer_peek gave went out in the owner's own write. */
void sl_xfer_consumed(sl_xfer *x, size_t n);

/* A read is in flight or x waits for a slot. */
static inline bool sl_xfer_busy(const sl_xfer *x)
{
    return x->inflight || x->waiting;
}

/* The range being sent ended (request over, or the owner leaves): leave the slot queue, return
 * the buffer, release backend state. x must not be in flight. */
void sl_xfer_reset(sl_xfer *x);

/* sl_xfer_reset unless a read is in flight (then its completion comes first). */
static inline void sl_xfer_reset_if_idle(sl_xfer *x)
{
    if (!x->inflight) sl_xfer_reset(x);
}

/* Give x a block read elsewhere (a stat thread): buf (cap bytes, 4 KiB aligned, from malloc)
 * holds n bytes of fd at off. x must not be in flight. */
void sl_xfer_adopt(sl_xfer *x, int fd, char *buf, size_t cap, off_t off, size_t n);

/* Backends call this on the loop thread when x's read finished (x->res set). */
void sl_xfer_complete(sl_xfer *x);

/* The blocking core every asynchronous backend shares with the tests: pread until len bytes
 * or end of file. Returns the bytes read, or a negative errno when nothing could be read. */
ssize_t sl_pread_full(int fd, void *buf, size_t len, off_t off);

/* Whether the bytes [off, off+len) of fd are all in the page cache, probed without blocking:
 * 1 yes, 0 no, negative errno when the kernel cannot tell (no cachestat()). */
int sl_page_cache_resident(int fd, off_t off, size_t len);

/* Whether the last and first pages of [off, off+len) can be read without waiting for the disk
 * (a one-byte preadv2(RWF_NOWAIT) each): cachestat() counts pages read-ahead has asked for and
 * not yet got. 1 yes, 0 no, negative errno when the kernel cannot tell (-EOPNOTSUPP: a file
 * RWF_NOWAIT cannot be asked of; -ENODATA: the file ends before the range). */
int sl_page_cache_settled(int fd, off_t off, size_t len);

#endif
