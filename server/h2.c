/* HTTP/2 sessions (libnghttp2) on client connections.
 *
 * nghttp2 does the protocol: framing, HPACK, stream states, flow control, SETTINGS, GOAWAY and
 * its flood limits. This file only moves bytes and maps streams to requests. The connection keeps
 * its socket, its TLS and its output queue: input read from it goes to nghttp2_session_mem_recv,
 * and frames nghttp2_session_mem_send produces are appended to the queue, which the connection
 * writes as it writes HTTP/1.1 responses (bandwidth limits, the TLS path, the network backend).
 * File bodies are not copied: a DATA frame of a file is its 9-byte header in memory followed by a
 * file chunk of the queue (NGHTTP2_DATA_FLAG_NO_COPY), so it leaves by sendfile on cleartext and
 * through the TLS sink otherwise, and a cold block is read off the loop by the network backend,
 * as for HTTP/1.1. nghttp2 is asked for frames only while the queue holds less than QUEUE_HIGH
 * bytes: a client that does not read stops the session's output, not the loop.
 *
 * A request stream is an sl_conn without a socket (c->h2, c->h2_id), allocated inside an
 * h2_stream. Its request head is written as HTTP/1.1 text from the HEADERS (:method, :path,
 * :authority as Host, the fields) and parsed by the HTTP/1.1 parser, so conditions and every
 * module see the same request they see for HTTP/1.1; its response head goes to
 * nghttp2_submit_response instead of text, and its output queue is the DATA source. A stream's
 * file (and open-file cache entry) is referenced by chunks on the connection's queue, so a stream
 * that ended is freed (its request logged) only when the connection wrote past the last byte it
 * queued (end_mark against the connection's bytes_out).
 */
#include "h2.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <nghttp2/nghttp2.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "connection.h"
#include "core_conf.h"
#include "fdcache.h"
#include "h2_head.h"
#include "log.h"
#include "loop.h"
#include "server.h"
#include "status.h"

#define QUEUE_HIGH (256 * 1024)    /* frames queued on the connection before nghttp2 waits */
#define READ_BUDGET (256 * 1024)   /* input bytes per connection per loop turn */

typedef struct h2_stream {
    sl_conn c;                     /* first: the stream is freed as an sl_conn */
    struct sl_h2 *h2;              /* NULL once the session is gone */
    struct h2_stream *prev, *next; /* the session's open streams, or its ending ones */
    sl_h2_head head;               /* the request head, written into c.in (h2_head.h) */
    bool begun;                    /* the request runs */
    bool body_end;                 /* its last byte arrived */
    bool ended;                    /* closed by nghttp2 or reset by us: on the ending list */
    bool deferred;                 /* the DATA source said NGHTTP2_ERR_DEFERRED */
    bool want_drain;               /* the queue ran empty while the module streams */
    sl_chunkq body_q;              /* request body bytes not yet read */
    size_t unconsumed;             /* DATA payload bytes not yet given back to flow control */
    uint64_t end_mark;             /* connection bytes to write before the stream is freed */
} h2_stream;

struct sl_h2 {
    nghttp2_session *ng;
    sl_conn *c;                    /* the connection */
    h2_stream *open;               /* streams nghttp2 knows */
    h2_stream *ending;             /* streams waiting for their bytes to go out */
    unsigned n_open;
    uint64_t queued;               /* bytes appended to c->out since the session began */
    bool in_run;                   /* sl_h2_run is on the stack: it pumps output itself */
    bool failed;                   /* a protocol error: send what nghttp2 queued, then close */
};

static atomic_ulong n_sessions, n_streams, n_active;

static h2_stream *stream_of(sl_conn *c)
{
    return (h2_stream *)c;
}

static void list_add(h2_stream **head, h2_stream *s)
{
    s->prev = NULL;
    s->next = *head;
    if (*head) (*head)->prev = s;
    *head = s;
}

static void list_del(h2_stream **head, h2_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        *head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

int sl_h2_preface(const char *p, size_t n)
{
    size_t k = n < SL_H2_PREFACE_LEN ? n : SL_H2_PREFACE_LEN;
    if (memcmp(p, SL_H2_PREFACE, k)) return -1;
    return n >= SL_H2_PREFACE_LEN ? 1 : 0;
}

/* Come back to the connection in a later turn of the loop (not from inside nghttp2). */
static void kick(struct sl_h2 *h)
{
    if (!h->in_run && !h->c->closed) event_active(&h->c->ev, EV_WRITE, 0);
}

/* ---- streams ---- */

static h2_stream *stream_new(struct sl_h2 *h, int32_t id)
{
    h2_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    sl_conn *c = h->c;
    sl_conn_stream_init(&s->c, c, h, id);
    s->c.in_cap = (size_t)c->loop->srv->global->max_request_field_size + 1024;
    s->c.in = sl_loop_buf_get(c->loop, s->c.in_cap);
    if (!s->c.in) {
        free(s);
        return NULL;
    }
    s->head.buf = s->c.in;
    s->head.cap = s->c.in_cap;
    s->h2 = h;
    list_add(&h->open, s);
    h->n_open++;
    atomic_fetch_add_explicit(&n_streams, 1, memory_order_relaxed);
    return s;
}

/* The request's HEADERS are complete: run it. */
static void stream_begin(h2_stream *s, bool end_stream)
{
    if (s->begun) return;
    s->begun = true;
    s->body_end = end_stream;
    int status = sl_h2_head_end(&s->head, !end_stream);
    s->c.in_len = s->head.len;
    sl_h2_head_free(&s->head);
    sl_conn_stream_begin(&s->c, status);
}

/* Give flow-control credit back for body bytes read (or dropped). */
static void stream_consume(h2_stream *s, size_t n)
{
    if (!n || !s->h2) return;
    if (n > s->unconsumed) n = s->unconsumed;
    s->unconsumed -= n;
    if (nghttp2_session_consume(s->h2->ng, s->c.h2_id, n) != 0)
        nghttp2_session_consume_connection(s->h2->ng, n);
    kick(s->h2);
}

static int body_put(h2_stream *s, const void *p, size_t n)
{
    return sl_chunkq_append_mem(&s->body_q, p, n);
}

/* Body bytes (or its end) arrived: wake the module that waits for them. */
static void body_wake(h2_stream *s)
{
    s->c.rd_ready = true;
    if (s->c.state == SL_CONN_READ_BODY && s->c.body_armed) event_active(&s->c.ev, EV_READ, 0);
}

ssize_t sl_h2_stream_recv(sl_conn *c, void *buf, size_t len)
{
    h2_stream *s = stream_of(c);
    size_t n = 0;
    while (n < len && s->body_q.head) {
        sl_chunk *ch = s->body_q.head;
        size_t k = (size_t)(ch->end - ch->off) < len - n ? (size_t)(ch->end - ch->off) : len - n;
        memcpy((char *)buf + n, ch->data + ch->off, k);
        n += k;
        ch->off += (off_t)k;
        if (ch->off == ch->end) sl_chunkq_pop(&s->body_q);
    }
    if (!s->body_q.head && !s->body_end) c->rd_ready = false;
    if (!n) return s->body_end ? 0 : !s->h2 ? -ECONNRESET : -EAGAIN;
    /* Credit for what the reader took (chunk framing bytes are ours: at most the payload). */
    stream_consume(s, n);
    return (ssize_t)n;
}

/* The stream is over for nghttp2 (closed, or reset by us): free it once its bytes are out. */
static void stream_end(h2_stream *s)
{
    if (s->ended) return;
    s->ended = true;
    struct sl_h2 *h = s->h2;
    if (!h) return;
    list_del(&h->open, s);
    h->n_open--;
    if (s->unconsumed) nghttp2_session_consume_connection(h->ng, s->unconsumed);
    s->unconsumed = 0;
    s->end_mark = h->queued;
    list_add(&h->ending, s);
    kick(h);
}

void sl_h2_stream_close(sl_conn *c)
{
    h2_stream *s = stream_of(c);
    struct sl_h2 *h = s->h2;
    if (!h) {
        sl_conn_stream_release(c);
        return;
    }
    if (!s->ended) {
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, c->h2_id, NGHTTP2_INTERNAL_ERROR);
        nghttp2_session_set_stream_user_data(h->ng, c->h2_id, NULL);
        stream_end(s);
    }
}

void sl_h2_stream_freed(sl_conn *c)
{
    h2_stream *s = stream_of(c);
    sl_h2_head_free(&s->head);
    sl_chunkq_clear(&s->body_q);
}

/* ---- the DATA source ---- */

static ssize_t data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    h2_stream *s = src->ptr;
    sl_chunkq *q = &s->c.out;
    while (q->head && q->head->fd < 0 && q->head->off == q->head->end) sl_chunkq_pop(q);
    sl_chunk *ch = q->head;
    if (!ch) {
        if (s->c.streaming) {
            s->deferred = s->want_drain = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    size_t n = (size_t)(ch->end - ch->off) < length ? (size_t)(ch->end - ch->off) : length;
    bool last = n == (size_t)(ch->end - ch->off) && !ch->next && !s->c.streaming;
    if (last) *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (ch->fd >= 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY; /* data_send queues the file range itself */
        return (ssize_t)n;
    }
    memcpy(buf, ch->data + ch->off, n);
    ch->off += (off_t)n;
    if (ch->off == ch->end) sl_chunkq_pop(q);
    s->c.bytes_out += n;
    return (ssize_t)n;
}

/* A DATA frame of a file: its header, then the file range as a file chunk of the connection. */
static int data_send(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *src, void *ud)
{
    struct sl_h2 *h = ud;
    h2_stream *s = src->ptr;
    sl_chunk *ch = s->c.out.head;
    if (!ch || ch->fd < 0 || (size_t)(ch->end - ch->off) < length ||
        sl_chunkq_append_mem(&h->c->out, framehd, 9) < 0 ||
        sl_chunkq_append_file(&h->c->out, ch->fd, ch->off, (off_t)length) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    h->queued += 9 + length;
    ch->off += (off_t)length;
    if (ch->off == ch->end) sl_chunkq_pop(&s->c.out);
    s->c.bytes_out += length;
    return 0;
}

/* ---- response heads ---- */

/* Fields that belong to one HTTP/1.1 connection: never in an HTTP/2 response (RFC 9113 §8.2.2). */
static bool hop_by_hop(const sl_resp_field *f)
{
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection",
                                        "transfer-encoding", "upgrade"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (f->name_len == strlen(names[i]) && !strncasecmp(f->name, names[i], f->name_len))
            return true;
    return false;
}

static nghttp2_nv nv(const char *name, size_t nl, const char *value, size_t vl)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, nl, vl, NGHTTP2_NV_FLAG_NONE};
}

int sl_h2_stream_head(sl_conn *c)
{
    h2_stream *s = stream_of(c);
    struct sl_h2 *h = s->h2;
    sl_resp *r = &c->resp;
    r->head_sent = true;
    if (!h || s->ended) return 0;
    nghttp2_nv *nva = sl_conn_alloc(c, (r->n_fields + 4) * sizeof *nva);
    char *status = sl_conn_alloc(c, 32);
    char *clen = status + 4;
    if (!nva || !status) return -ENOMEM;
    size_t n = 0, bytes = 0;
    unsigned st = (unsigned)r->status % 1000;
    status[0] = (char)('0' + st / 100);
    status[1] = (char)('0' + st / 10 % 10);
    status[2] = (char)('0' + st % 10);
    nva[n++] = nv(":status", 7, status, 3);
    bool has_server = false;
    for (unsigned i = 0; i < r->n_fields; i++) {
        const sl_resp_field *f = &r->fields[i];
        if (hop_by_hop(f)) continue;
        char *name = sl_conn_alloc(c, f->name_len);
        if (!name) return -ENOMEM;
        for (size_t k = 0; k < f->name_len; k++)
            name[k] = (char)((f->name[k] >= 'A' && f->name[k] <= 'Z') ? f->name[k] + 32
                                                                      : f->name[k]);
        has_server |= f->name_len == 6 && !memcmp(name, "server", 6);
        nva[n++] = nv(name, f->name_len, f->value, f->value_len);
    }
    if (r->content_length != UINT64_MAX)
        nva[n++] = nv("content-length", 14, clen,
                      (size_t)snprintf(clen, 28, "%llu", (unsigned long long)r->content_length));
    nva[n++] = nv("date", 4, sl_loop_date(c->loop), SL_HTTP_DATE_LEN);
    const char *tag = sl_core(c->conf)->server_tag;
    if (*tag && !has_server) nva[n++] = nv("server", 6, tag, strlen(tag));
    for (size_t i = 0; i < n; i++) bytes += nva[i].namelen + nva[i].valuelen + 4;
    c->hdr_bytes = bytes; /* counted as HTTP/1.1 counts its head: bytes_out includes it */
    c->bytes_out += bytes;
    bool no_body = c->req.method == SL_METHOD_HEAD || r->status == 204 || r->status == 304 ||
                   (!c->out.head && !c->streaming);
    if (c->req.method == SL_METHOD_HEAD || r->status == 204 || r->status == 304)
        sl_chunkq_clear(&c->out);
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = data_read};
    int e = nghttp2_submit_response(h->ng, c->h2_id, nva, n, no_body ? NULL : &prd);
    if (e != 0) return -ENOMEM;
    kick(h);
    return 0;
}

void sl_h2_stream_write(sl_conn *c)
{
    h2_stream *s = stream_of(c);
    if (!s->h2 || s->ended || !s->deferred) return;
    s->deferred = false;
    nghttp2_session_resume_data(s->h2->ng, c->h2_id);
    kick(s->h2);
}

/* ---- nghttp2's callbacks ---- */

static h2_stream *stream_get(nghttp2_session *ng, int32_t id)
{
    return nghttp2_session_get_stream_user_data(ng, id);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    struct sl_h2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    h2_stream *s = stream_new(h, frame->hd.stream_id);
    if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    h2_stream *s = stream_get(ng, frame->hd.stream_id);
    if (!s || s->begun) return 0;
    if (sl_h2_head_field(&s->head, name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    h2_stream *s = stream_get(ng, frame->hd.stream_id);
    if (!s) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        stream_begin(s, end);
        return 0;
    }
    if (end && !s->body_end) {
        s->body_end = true;
        if (s->head.chunked && body_put(s, "0\r\n\r\n", 5) < 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        body_wake(s);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    h2_stream *s = stream_get(ng, id);
    if (!s || s->ended || !s->begun) {
        if (nghttp2_session_consume(ng, id, len) != 0) nghttp2_session_consume_connection(ng, len);
        return 0;
    }
    s->unconsumed += len;
    if (s->head.chunked) {
        char hex[24];
        int k = snprintf(hex, sizeof hex, "%zx\r\n", len);
        if (body_put(s, hex, (size_t)k) < 0 || body_put(s, data, len) < 0 ||
            body_put(s, "\r\n", 2) < 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    } else if (body_put(s, data, len) < 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    body_wake(s);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    /* Our side of a stream ended while the client still sends a body nobody reads: stop it
     * (RFC 9113 §8.1), or its flow-control window would hold the stream open. */
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        h2_stream *s = stream_get(ng, frame->hd.stream_id);
        if (s && !s->body_end)
            nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                      NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    h2_stream *s = stream_get(ng, id);
    if (s) {
        nghttp2_session_set_stream_user_data(ng, id, NULL);
        stream_end(s);
    }
    return 0;
}

/* ---- the session ---- */

static nghttp2_session_callbacks *cbs;

static void callbacks_make(void)
{
    if (nghttp2_session_callbacks_new(&cbs) != 0) return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cbs, data_send);
}

/* Make the session of connection c and send our SETTINGS. NULL when out of memory. */
static struct sl_h2 *session_new(sl_conn *c)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, callbacks_make);
    struct sl_h2 *h = calloc(1, sizeof *h);
    if (!h || !cbs ||
        sl_h2_session_new(&h->ng, cbs, h,
                          (uint32_t)c->loop->srv->global->max_request_field_size) != 0)
        goto fail;
    h->c = c;
    c->h2 = h;
    c->state = SL_CONN_H2;
    c->bytes_out = 0;
    c->deadline = time(NULL) + c->loop->srv->global->max_read_idle + 1; /* see now_s */
    atomic_fetch_add_explicit(&n_sessions, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_active, 1, memory_order_relaxed);
    return h;
fail:
    free(h);
    return NULL;
}

/* Give the input buffer back: from now on input goes to nghttp2 as it is read. */
static void input_drop(sl_conn *c)
{
    sl_loop_buf_put(c->loop, c->in);
    c->in = NULL;
    c->in_len = c->in_cap = c->head_len = 0;
}

/* Feed input to the session. 0, or -1 after a fatal protocol error (h->failed set). */
static int feed(struct sl_h2 *h, const uint8_t *p, size_t n)
{
    ssize_t r = nghttp2_session_mem_recv(h->ng, p, n);
    if (r >= 0) return 0;
    h->failed = true;
    if (r != NGHTTP2_ERR_BAD_CLIENT_MAGIC)
        nghttp2_session_terminate_session(h->ng, r == NGHTTP2_ERR_FLOODED
                                                     ? NGHTTP2_ENHANCE_YOUR_CALM
                                                     : NGHTTP2_PROTOCOL_ERROR);
    return -1;
}

int sl_h2_start(sl_conn *c)
{
    struct sl_h2 *h = session_new(c);
    if (!h) return -ENOMEM;
    h->in_run = true;
    feed(h, (const uint8_t *)c->in, c->in_len);
    h->in_run = false;
    input_drop(c);
    return 0;
}

/* base64url (RFC 4648 §5, unpadded) to bytes: the length, or -1. */
static ssize_t b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    char tmp[256];
    if (n + 3 > sizeof tmp || (n % 4) == 1) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) tmp[k++] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
    size_t pad = (4 - n % 4) % 4;
    for (size_t i = 0; i < pad; i++) tmp[k++] = '=';
    if ((k / 4) * 3 > cap) return -1;
    int len = EVP_DecodeBlock(out, (const unsigned char *)tmp, (int)k);
    return len < 0 ? -1 : (ssize_t)(len - (int)pad);
}

int sl_h2_upgrade(sl_conn *c)
{
    sl_http_request *rq = &c->req;
    const sl_http_header *up = sl_http_find_header(rq, "upgrade");
    const sl_http_header *conn = sl_http_find_header(rq, "connection");
    const sl_http_header *set = sl_http_find_header(rq, "http2-settings");
    /* RFC 9113 drops h2c, lighttpd keeps it: HTTP/1.1, Upgrade listing h2c, Connection listing
     * HTTP2-Settings, exactly one HTTP2-Settings; no body (it would have to be read first). */
    if (c->tls || rq->version != 11 || !up || !conn || !set || set->next ||
        rq->content_length > 0 || rq->chunked ||
        !sl_http_list_has_token(up->value, up->value_len, "h2c") ||
        !sl_http_list_has_token(conn->value, conn->value_len, "http2-settings") ||
        !sl_core_h2c(c->loop->srv->global))
        return 0;
    unsigned char settings[192];
    ssize_t sl = b64url_decode(set->value, set->value_len, settings, sizeof settings);
    if (sl < 0) return 0;
    static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                             "Upgrade: h2c\r\n\r\n";
    /* A socket that cannot take 70 bytes at once, or no memory: the caller ends it. */
    if (sl_conn_send_now(c, sw, sizeof sw - 1) != (ssize_t)(sizeof sw - 1)) return -1;
    struct sl_h2 *h = session_new(c);
    if (!h) return -1;
    h->in_run = true;
    bool head = rq->method == SL_METHOD_HEAD;
    h2_stream *s = NULL;
    if (nghttp2_session_upgrade2(h->ng, settings, (size_t)sl, head, NULL) != 0 ||
        !(s = stream_new(h, 1))) {
        h->failed = true;
    } else {
        /* Stream 1 is the request that asked: its head as it came. */
        nghttp2_session_set_stream_user_data(h->ng, 1, s);
        memcpy(s->c.in, c->in, c->head_len);
        s->c.in_len = c->head_len;
        s->begun = s->body_end = true;
        size_t rest = c->in_len - c->head_len;
        char *after = c->in + c->head_len;
        sl_conn_stream_begin(&s->c, 0);
        if (rest) feed(h, (const uint8_t *)after, rest);
    }
    h->in_run = false;
    input_drop(c);
    return 1;
}

/* Streams whose bytes all went out: log them and free them. */
static void reap(struct sl_h2 *h)
{
    h2_stream *s = h->ending, *next;
    for (; s; s = next) {
        next = s->next;
        if (s->end_mark > h->c->bytes_out) continue;
        list_del(&h->ending, s);
        s->h2 = NULL;
        sl_conn_stream_release(&s->c);
    }
}

/* Let streaming modules refill queues that ran empty. Returns whether any was asked. */
static bool drains(struct sl_h2 *h)
{
    bool any = false;
    for (h2_stream *s = h->open; s; s = s->next) {
        if (!s->want_drain) continue;
        s->want_drain = false;
        if (s->c.streaming && s->c.on_drain) {
            any = true;
            s->c.on_drain(&s->c);
            break; /* the list may have changed */
        }
    }
    return any;
}

/* Append nghttp2's frames to the connection's queue while it is short. -1: fatal. */
static int fill(struct sl_h2 *h)
{
    sl_conn *c = h->c;
    for (int rounds = 0; rounds < 64; rounds++) {
        while (h->queued - c->bytes_out < QUEUE_HIGH) {
            const uint8_t *p;
            ssize_t n = nghttp2_session_mem_send(h->ng, &p);
            if (n < 0) return -1;
            if (n == 0) break;
            if (sl_chunkq_append_mem(&c->out, p, (size_t)n) < 0) return -1;
            h->queued += (uint64_t)n;
        }
        if (!drains(h)) break;
    }
    return 0;
}

static void set_deadline(struct sl_h2 *h)
{
    sl_conn *c = h->c;
    long secs = h->queued > c->bytes_out || h->n_open ? sl_core(c->conf)->max_write_idle
                                                     : sl_core(c->conf)->max_keep_alive_idle;
    c->deadline = time(NULL) + secs + 1; /* see now_s (connection.c) */
}

void sl_h2_run(sl_conn *c)
{
    struct sl_h2 *h = c->h2;
    h->in_run = true;
    size_t got = 0;
    while (!h->failed && nghttp2_session_want_read(h->ng)) {
        uint8_t buf[16384];
        if (got >= READ_BUDGET) {
            event_active(&c->ev, EV_READ, 0); /* more in a later turn: others go first */
            break;
        }
        ssize_t n = sl_conn_recv(c, buf, sizeof buf);
        if (n == -EAGAIN) break;
        if (n <= 0) { /* the client left (or reset, or TLS failed) */
            sl_conn_close(c);
            return;
        }
        got += (size_t)n;
        feed(h, buf, (size_t)n);
    }
    for (;;) {
        if (fill(h) < 0) {
            sl_conn_close(c);
            return;
        }
        int r = sl_conn_write_out(c);
        if (r < 0) return; /* closed */
        reap(h);
        if (r != 0 || !nghttp2_session_want_write(h->ng)) break;
    }
    h->in_run = false;
    if (!c->out.head && !nghttp2_session_want_write(h->ng) &&
        (h->failed || !nghttp2_session_want_read(h->ng))) {
        sl_conn_close(c);
        return;
    }
    set_deadline(h);
}

void sl_h2_free(sl_conn *c)
{
    struct sl_h2 *h = c->h2;
    if (!h) return;
    h2_stream **lists[] = {&h->open, &h->ending};
    for (size_t i = 0; i < 2; i++) {
        while (*lists[i]) {
            h2_stream *s = *lists[i];
            list_del(lists[i], s);
            s->h2 = NULL;
            s->ended = true;
            sl_conn_stream_release(&s->c);
        }
    }
    nghttp2_session_del(h->ng);
    free(h);
    c->h2 = NULL;
    atomic_fetch_sub_explicit(&n_active, 1, memory_order_relaxed);
}

sl_conn *sl_h2_stream_of_file(sl_conn *c, int fd)
{
    struct sl_h2 *h = c->h2;
    if (!h || fd < 0) return NULL;
    /* A stream whose frames are all queued is on the ending list until they went out. */
    h2_stream *lists[] = {h->open, h->ending};
    for (size_t i = 0; i < 2; i++)
        for (h2_stream *s = lists[i]; s; s = s->next)
            if (s->c.file_fd == fd || (s->c.file_ent && s->c.file_ent->fd == fd)) return &s->c;
    return NULL;
}

void sl_h2_shutdown(sl_conn *c)
{
    struct sl_h2 *h = c->h2;
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    event_active(&c->ev, EV_WRITE, 0);
}

void sl_h2_timeout(sl_conn *c)
{
    struct sl_h2 *h = c->h2;
    if (h->queued > c->bytes_out)
        sl_log("client did not read for %lds; closing", sl_core(c->conf)->max_write_idle);
    sl_conn_close(c);
}

/* ---- the module: status and -V ---- */

static void h2_status(struct sl_server *srv, sl_status_out *o)
{
    sl_status_list(o, "http2", "protocol");
    sl_status_item(o, "h2");
    sl_status_num(o, "sessions", atomic_load_explicit(&n_sessions, memory_order_relaxed), true);
    sl_status_num(o, "streams", atomic_load_explicit(&n_streams, memory_order_relaxed), true);
    sl_status_num(o, "active_sessions", atomic_load_explicit(&n_active, memory_order_relaxed),
                  false);
    sl_status_item_end(o);
    sl_status_list_end(o);
}

void sl_h2_print_features(void)
{
    printf("http2: nghttp2 %s (h2 over TLS by ALPN, h2 prior knowledge and Upgrade: h2c on "
           "cleartext)\n", nghttp2_version(0)->version_str);
}

sl_module sl_mod_h2 = {
    .name = "h2",
    .always = true,
    .status = h2_status,
};
