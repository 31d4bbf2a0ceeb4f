/* Network backends: how file bytes get from the disk to a client socket.
 *
 * A response is a queue of memory and file chunks (chunk.h). Memory is always written with
 * sendmsg(); what differs between backends is the file chunks. Synchronous backends send them
 * from the event loop (sendfile, or pread into a buffer and write); asynchronous ones read one
 * block at a time into the connection's buffer off the loop (threads, POSIX AIO, Linux AIO,
 * io_uring) and write it when the read completes. The hybrid default sends pages that are already
 * in the page cache inline with sendfile() and sends only cold blocks to the thread pool.
 */
#ifndef SL_NETBACK_H
#define SL_NETBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/openat2.h>
#include <sys/types.h>

#include "threadpool.h"

struct sl_server;
struct sl_conn;

/* One block read for one connection: at most one is in flight per connection. */
typedef struct sl_fileread {
    sl_job job;            /* thread-pool and POSIX-AIO completions travel as jobs */
    struct sl_conn *conn;
    int fd;                /* the file (owned by the connection's request) */
    off_t off;             /* file offset of the first wanted byte */
    size_t len;            /* bytes wanted */
    char *buf;             /* block buffer, 4 KiB aligned, cap bytes */
    size_t cap;
    size_t skip;           /* bytes before `off` at the start of buf (O_DIRECT alignment) */
    ssize_t res;           /* bytes of the file at buf + skip, or a negative errno */
    size_t pos;            /* bytes of the result already written */
    bool inflight;         /* submitted, completion not yet seen on the loop */
    bool ready;            /* res holds data not yet fully written */
    bool waiting;          /* queued on the server's list for a free read slot */
    bool sent;             /* hybrid: a thread sendfile()d res bytes itself (no buffer) */
    int sock;              /* hybrid: the socket the thread sends to */
    struct sl_fileread *wait_next;
    void *priv;            /* backend's per-read state (control blocks, O_DIRECT fd) */
} sl_fileread;

/* An open(2) submitted to a backend that can open without blocking (io-uring). */
typedef struct sl_openreq {
    int dirfd;             /* open beneath this directory */
    const char *path;      /* relative to dirfd */
    struct open_how how;   /* openat2 flags and resolve rules */
    int res;               /* the fd, or a negative errno */
    /* Loop thread: the open finished. */
    void (*done)(struct sl_openreq *op);
} sl_openreq;

/* A network backend. */
typedef struct sl_netbackend {
    const char *name;
    /* How the loop treats file chunks. */
    enum { SL_NB_SENDFILE, SL_NB_PREAD, SL_NB_ASYNC, SL_NB_HYBRID } kind;
    /* Server start (after the event base exists): create pools, rings, contexts. 0 or -1 with a
     * message in err. NULL when nothing is needed. */
    int (*init)(struct sl_server *srv, char *err, size_t errlen);
    /* Server end: wait for reads in flight, run their completions, release everything. */
    void (*fini)(struct sl_server *srv);
    /* Start reading rd->len bytes at rd->off into rd->buf. Returns 0 when the read is under
     * way (sl_fileread_complete follows on the loop thread), -EAGAIN when no slot is free (the
     * connection waits for one), or another negative errno. */
    int (*submit)(struct sl_server *srv, sl_fileread *rd);
    /* A connection's request ended with rd idle: release backend state kept in rd->priv. */
    void (*release)(struct sl_server *srv, sl_fileread *rd);
    /* Submit an openat2 that completes on the loop (op->done); NULL when the backend cannot.
     * 0 or a negative errno (-EAGAIN: no room now). */
    int (*open_submit)(struct sl_server *srv, sl_openreq *op);
    /* Reads run on threads anyway: a stat thread may read the first block of a cold file. */
    bool read_on_stat;
    /* A stat thread may start the kernel's readahead of a cold file's first block, so the disk
     * is already busy with it when the loop asks for the data. */
    bool readahead_on_stat;
} sl_netbackend;

/* The backend called `name`, if compiled in. */
const sl_netbackend *sl_netback_find(const char *name);
/* Every compiled-in backend, NULL-terminated, default first. */
extern const sl_netbackend *const sl_netbackends[];
/* The default backend's name. */
#define SL_NETBACK_DEFAULT "hybrid"

/* Start the configured backend for srv (server.network-backend and friends). 0 or -1 + err. */
int sl_netback_init(struct sl_server *srv, char *err, size_t errlen);
/* Stop it; runs outstanding completions. */
void sl_netback_fini(struct sl_server *srv);

/* Write what can be written of c->out now. Returns 0 when the queue is empty, 1 when the socket
 * would block or this turn's budget is spent, 2 when a read is in flight or waiting for a slot
 * (the backend resumes the connection), or a negative errno; -ENODATA means the file ended before
 * its chunk did (truncated while sent). */
int sl_netback_write(struct sl_conn *c);

/* Backends call this on the loop thread when rd's read finished (rd->res set). */
void sl_fileread_complete(sl_fileread *rd);

/* The request ended: return the buffer, release backend state. rd must not be in flight. */
void sl_fileread_reset(struct sl_server *srv, sl_fileread *rd);

/* Give rd a block read elsewhere (a stat thread): buf (cap bytes, 4 KiB aligned, from malloc)
 * holds n bytes of fd at off. rd must not be in flight. */
void sl_fileread_adopt(struct sl_server *srv, sl_fileread *rd, int fd, char *buf, size_t cap,
                       off_t off, size_t n);

/* Read synchronously what rd asks for (pread until len or EOF); the blocking core every
 * asynchronous backend shares with the tests. Sets rd->res. */
void sl_fileread_sync(sl_fileread *rd);

/* Whether the bytes [off, off+len) of fd are all in the page cache, probed without blocking:
 * 1 yes, 0 no, negative errno when the kernel cannot tell (no cachestat()). */
int sl_page_cache_resident(int fd, off_t off, size_t len);

#endif
