/* The gathering write BIO (tls_bio.h): TLS records of a response leave in few sendmsg() calls.
 *
 * A BIO method of our own rather than OpenSSL's BIO_f_buffer over a socket BIO: that one keeps
 * 8 KiB of buffers for every connection from its creation, idle or not, and cannot send its
 * buffer and the next record in one call. Here the buffer exists only while bytes wait (malloc'd
 * by the first write, freed when a flush empties it), and a write that overflows it goes out
 * together with what it holds in one sendmsg() of two iovecs. Bytes live in buf[off, off + len).
 * OpenSSL's own flushes are ignored: only the connection knows when it is about to wait.
 * Only the loop thread of the connection touches it; the method table is made once per process.
 */
#include "tls_bio.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

typedef struct gather {
    int fd;
    char *buf;  /* SL_TLS_GATHER_CAP bytes while anything waits, else NULL */
    size_t off, len;
} gather;

/* One sendmsg of a then b (either may be empty), EINTR retried. */
static ssize_t send2(int fd, const char *a, size_t alen, const char *b, size_t blen)
{
    struct iovec iov[2];
    int n = 0;
    if (alen) iov[n++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
    if (blen) iov[n++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r;
    do r = sendmsg(fd, &m, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r;
}

/* One empty buffer kept per thread (a loop's): a buffer lives from a response's first record to
 * its flush, and glibc would otherwise give the thread arena's top back with madvise() and fault
 * its pages in again on the next connection. Freed when the thread exits. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_init(void)
{
    if (pthread_key_create(&spare_key, free)) abort(); /* at start-up, out of keys: a bug */
}

static char *buf_get(void)
{
    pthread_once(&spare_once, spare_init);
    char *b = pthread_getspecific(spare_key);
    if (!b) return malloc(SL_TLS_GATHER_CAP);
    pthread_setspecific(spare_key, NULL);
    return b;
}

static void buf_put(char *b)
{
    if (!b) return;
    if (!pthread_getspecific(spare_key) && !pthread_setspecific(spare_key, b)) return;
    free(b);
}

/* Append n bytes (they fit: len + n <= the cap), moving what waits to the front if needed. */
static int keep(gather *g, const char *in, size_t n)
{
    if (!n) return 0;
    if (!g->buf && !(g->buf = buf_get())) return -1;
    if (g->off + g->len + n > SL_TLS_GATHER_CAP) {
        memmove(g->buf, g->buf + g->off, g->len);
        g->off = 0;
    }
    memcpy(g->buf + g->off + g->len, in, n);
    g->len += n;
    return 0;
}

static int g_write(BIO *b, const char *in, int inl)
{
    gather *g = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (inl <= 0) return 0;
    size_t n = (size_t)inl;
    if (g->len + n <= SL_TLS_GATHER_CAP) {
        if (keep(g, in, n) == 0) return inl;
        /* No memory for the buffer: send this write as it is, like a socket BIO would. */
    }
    /* It does not fit: what waits and the new bytes in one call. */
    ssize_t s = send2(g->fd, g->buf ? g->buf + g->off : NULL, g->len, in, n);
    if (s < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1; /* errno says why */
        s = 0;
    }
    size_t sent = (size_t)s, took;
    if (sent >= g->len) {
        took = sent - g->len;
        g->off = g->len = 0;
    } else {
        took = 0;
        g->off += sent;
        g->len -= sent;
    }
    /* Keep what the socket did not take, as far as the buffer holds it. */
    size_t room = SL_TLS_GATHER_CAP - g->len, rest = n - took;
    size_t more = rest < room ? rest : room;
    if (keep(g, in + took, more) < 0) more = 0;
    if (!g->len) {
        buf_put(g->buf);
        g->buf = NULL;
    }
    if (took + more == 0) {
        BIO_set_retry_write(b);
        return -1;
    }
    return (int)(took + more);
}

/* Send everything that waits: 1 when it is all out, -1 (retry set when the socket is full). */
static long g_flush(BIO *b, gather *g)
{
    BIO_clear_retry_flags(b);
    while (g->len) {
        ssize_t s = send2(g->fd, g->buf + g->off, g->len, NULL, 0);
        if (s < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
            return -1;
        }
        g->off += (size_t)s;
        g->len -= (size_t)s;
    }
    buf_put(g->buf);
    g->buf = NULL;
    g->off = 0;
    return 1;
}

static long g_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    gather *g = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        /* OpenSSL flushes after each handshake flight, each session ticket and each alert. The
         * connection sends before it waits for the client instead (sl_tls_gather_send), so the
         * two tickets of a TLS 1.3 handshake leave with the first response, not in two packets
         * of their own. */
        return 1;
    case BIO_CTRL_WPENDING:
        return (long)g->len;
    case BIO_CTRL_PENDING:
        return 0;
    default:
        return 0; /* no kernel TLS, no fd to give away, nothing else to set */
    }
}

static int g_destroy(BIO *b)
{
    gather *g = BIO_get_data(b);
    if (g) buf_put(g->buf);
    free(g);
    BIO_set_data(b, NULL);
    return 1;
}

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static void make_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "seekless gather");
    if (m && (!BIO_meth_set_write(m, g_write) || !BIO_meth_set_ctrl(m, g_ctrl) ||
              !BIO_meth_set_destroy(m, g_destroy))) {
        BIO_meth_free(m);
        m = NULL;
    }
    method = m;
}

int sl_tls_gather_send(BIO *b)
{
    return (int)g_flush(b, BIO_get_data(b));
}

BIO *sl_tls_gather_bio(int fd)
{
    pthread_once(&method_once, make_method);
    if (!method) return NULL;
    gather *g = calloc(1, sizeof *g);
    BIO *b = g ? BIO_new(method) : NULL;
    if (!b) {
        free(g);
        return NULL;
    }
    g->fd = fd;
    BIO_set_data(b, g);
    BIO_set_init(b, 1);
    return b;
}
