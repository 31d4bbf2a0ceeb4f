/* Output queue.
 *
 * Responses are a header block, maybe multipart separators, and file ranges. Memory chunks are
 * gathered into one sendmsg() so a header and a small body leave in one segment; MSG_MORE tells
 * TCP that a file chunk follows, so the header and the first file bytes share a packet without
 * TCP_CORK's extra syscalls. File chunks are sent by the network backends (netback.h); the
 * sendfile() helpers here are the synchronous ones.
 */
#include "chunk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "queue.h"

#define MEM_CHUNK_MIN 4096
#define IOV_MAX_BATCH 32

static sl_chunk *chunk_push(sl_chunkq *q, size_t cap)
{
    sl_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = NULL;
    c->fd = -1;
    c->off = c->end = 0;
    c->cap = cap;
    SL_QUEUE_APPEND(q->head, q->tail, c, next);
    return c;
}

int sl_chunkq_append_mem(sl_chunkq *q, const void *p, size_t n)
{
    sl_chunk *t = q->tail;
    if (!t || t->fd >= 0 || t->cap - (size_t)t->end < n) {
        t = chunk_push(q, n > MEM_CHUNK_MIN ? n : MEM_CHUNK_MIN);
        if (!t) return -ENOMEM;
    }
    memcpy(t->data + t->end, p, n);
    t->end += (off_t)n;
    return 0;
}

int sl_chunkq_prepend_mem(sl_chunkq *q, const void *p, size_t n)
{
    /* Its own size, not MEM_CHUNK_MIN: a response head (a few hundred bytes) is prepended once
     * and never grown, and a small block comes from malloc's per-thread cache. */
    sl_chunk *c = malloc(sizeof *c + n);
    if (!c) return -ENOMEM;
    c->fd = -1;
    c->off = 0;
    c->end = (off_t)n;
    c->cap = n;
    memcpy(c->data, p, n);
    c->next = q->head;
    q->head = c;
    if (!q->tail) q->tail = c;
    return 0;
}

int sl_chunkq_vprintf(sl_chunkq *q, const char *fmt, va_list ap)
{
    char buf[1024];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    int r;
    if (n < 0) {
        r = -EINVAL;
    } else if ((size_t)n < sizeof buf) {
        r = sl_chunkq_append_mem(q, buf, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (big) vsnprintf(big, (size_t)n + 1, fmt, again);
        r = big ? sl_chunkq_append_mem(q, big, (size_t)n) : -ENOMEM;
        free(big);
    }
    va_end(again);
    return r;
}

int sl_chunkq_printf(sl_chunkq *q, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = sl_chunkq_vprintf(q, fmt, ap);
    va_end(ap);
    return r;
}

int sl_chunkq_append_file(sl_chunkq *q, int fd, off_t off, off_t len)
{
    if (len == 0) return 0;
    sl_chunk *c = chunk_push(q, 0);
    if (!c) return -ENOMEM;
    c->fd = fd;
    c->off = off;
    c->end = off + len;
    return 0;
}

uint64_t sl_chunkq_length(const sl_chunkq *q)
{
    uint64_t n = 0;
    for (const sl_chunk *c = q->head; c; c = c->next) n += (uint64_t)(c->end - c->off);
    return n;
}

void sl_chunkq_pop(sl_chunkq *q)
{
    sl_chunk *c = q->head;
    q->head = c->next;
    if (!q->head) q->tail = NULL;
    free(c);
}

void sl_chunkq_clear(sl_chunkq *q)
{
    while (q->head) sl_chunkq_pop(q);
}

int sl_chunkq_sendfile(sl_chunkq *q, int sock, size_t max, uint64_t *sent, size_t *done)
{
    sl_chunk *c = q->head;
    size_t want = (size_t)(c->end - c->off) < max ? (size_t)(c->end - c->off) : max;
    ssize_t n;
    do {
        n = sendfile(sock, c->fd, &c->off, want);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -errno;
    if (n == 0) return -ENODATA; /* EOF before the end of the chunk: the file shrank */
    *done += (size_t)n;
    *sent += (uint64_t)n;
    if (c->off == c->end) sl_chunkq_pop(q);
    /* A short count is a full socket or the end of the file: the next call tells which. */
    return 0;
}

int sl_chunkq_write(sl_chunkq *q, int sock, size_t budget, uint64_t *sent)
{
    size_t done = 0;
    while (q->head) {
        if (done >= budget) return 1;
        int r = q->head->fd < 0 ? sl_chunkq_write_mem(q, sock, budget - done, sent, &done)
                                : sl_chunkq_sendfile(q, sock, budget - done, sent, &done);
        if (r != 0) return r;
    }
    return 0;
}

int sl_chunkq_write_mem(sl_chunkq *q, int sock, size_t budget, uint64_t *sent, size_t *done)
{
    size_t unused = 0;
    return sl_chunkq_write_mem_tail(q, sock, budget, sent, done, NULL, 0, false, &unused);
}

int sl_chunkq_write_mem_tail(sl_chunkq *q, int sock, size_t budget, uint64_t *sent, size_t *done,
                             const void *tail, size_t tail_len, bool more, size_t *tail_sent)
{
    size_t here = 0;
    *tail_sent = 0;
    while (q->head && q->head->fd < 0) {
        if (here >= budget) return 1;
        struct iovec iov[IOV_MAX_BATCH];
        int k = 0;
        sl_chunk *m = q->head;
        /* At most the budget: a bandwidth limit's budget is what may go now. */
        size_t cap = budget - here, tot = 0, with_tail = 0;
        for (; m && m->fd < 0 && k < IOV_MAX_BATCH && tot < cap; m = m->next) {
            size_t len = (size_t)(m->end - m->off);
            if (len > cap - tot) len = cap - tot;
            iov[k].iov_base = m->data + m->off;
            iov[k++].iov_len = len;
            tot += len;
        }
        /* Every memory chunk is in this batch and the file chunk is next: its bytes join it. */
        if (tail_len && m && m->fd >= 0 && k < IOV_MAX_BATCH && tot < cap) {
            with_tail = tail_len < cap - tot ? tail_len : cap - tot;
            iov[k].iov_base = (void *)tail;
            iov[k++].iov_len = with_tail;
            tot += with_tail;
        }
        bool rest = with_tail ? more || with_tail < tail_len : m && tot < cap;
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | (rest ? MSG_MORE : 0));
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
            if (errno == EINTR) continue;
            return -errno;
        }
        here += (size_t)n;
        *done += (size_t)n;
        *sent += (uint64_t)n;
        while (n > 0 && q->head && q->head->fd < 0) {
            sl_chunk *h = q->head;
            off_t left = h->end - h->off;
            if (n >= left) {
                n -= left;
                sl_chunkq_pop(q);
            } else {
                h->off += n;
                n = 0;
            }
        }
        /* Empty memory chunks (0 bytes) would otherwise stay forever. */
        while (q->head && q->head->fd < 0 && q->head->off == q->head->end) sl_chunkq_pop(q);
        *tail_sent = (size_t)n; /* what is left went from the tail (the caller's file chunk) */
    }
    return 0;
}
