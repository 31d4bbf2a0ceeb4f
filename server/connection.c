/* Client connections.
 *
 * One state machine per connection. The socket is added to the loop's epoll set once, for reading
 * and writing, edge-triggered: an event only records that the kernel reported the socket readable
 * or writable (rd_ready, wr_ready), and the state machine reads or writes while that holds, until
 * a call comes back short. So a keep-alive request costs no epoll_ctl at all, and an event that
 * arrives while a module works (a stat thread, a backend) is remembered, not lost. Timeouts are
 * deadlines in whole seconds that the loop's sweep checks once a second.
 *
 * Bytes are read into one buffer sized to the request-head limit; the parser works in place, and
 * pipelined requests simply wait in the buffer until the response before them is sent, which is
 * also the back-pressure: we do not read while we write. A request runs through the modules'
 * hooks phase by phase (module.h); a module may answer at any phase or go asynchronous and come
 * back through sl_conn_handled. The response head is kept as fields until the request is
 * handled; then the response_start hooks see it and it is written in front of the body chunks.
 * A connection that must close after a response with input possibly still unread shuts its write
 * side and drains input for a moment (lingering close), so the client sees the response instead
 * of a reset.
 */
#include "connection.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "addr.h"
#include "bwlimit.h"
#include "core_conf.h"
#include "errpages.h"
#include "fdcache.h"
#include "h2.h"
#include "log.h"
#include "loop.h"
#include "path.h"
#include "server.h"
#include "sl_version.h"
#include "tls.h"

#define LINGER_SECONDS 2
#define LINGER_BYTES (256 * 1024)
#define MAX_PIPELINE_TURN 32      /* requests answered back to back before yielding */
#define WRITE_BUDGET (512 * 1024) /* bytes per connection per loop turn */

/* Request phases, in order (module.h). */
/* The phases are the first four request hooks (conf.h); phase_mod indexes the phase's list of
 * modules that have its hook. */
enum {
    PH_URI_RAW = SL_HOOK_URI_RAW,
    PH_URI_CLEAN = SL_HOOK_URI_CLEAN,
    PH_PHYSICAL = SL_HOOK_PHYSICAL,
    PH_HANDLE = SL_HOOK_HANDLE,
    PH_DONE
};

struct sl_arena_block {
    struct sl_arena_block *next;
    char data[];
};

static void conn_event(evutil_socket_t fd, short what, void *arg);
static void conn_run(sl_conn *c);
static void request_start(sl_conn *c);
static void run_phases(sl_conn *c);

static sl_server *srv_of(const sl_conn *c)
{
    return c->loop->srv;
}

bool sl_conn_timing(const sl_conn *c)
{
    return srv_of(c)->timing;
}

/* ---- per-request memory ---- */

void *sl_conn_alloc(sl_conn *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (c->arena_used + n <= SL_ARENA_INLINE) {
        void *p = c->arena + c->arena_used;
        c->arena_used += n;
        return p;
    }
    struct sl_arena_block *b = malloc(sizeof *b + n);
    if (!b) return NULL;
    b->next = c->arena_more;
    c->arena_more = b;
    return b->data;
}

char *sl_conn_strdup(sl_conn *c, const char *s, size_t n)
{
    char *p = sl_conn_alloc(c, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

int sl_conn_mapped(const sl_conn *c, const char **rel)
{
    const char *p = c->phys_root ? c->phys_path : c->path;
    while (*p == '/') p++;
    *rel = *p ? p : ".";
    return c->phys_root ? c->phys_root->fd : c->docroot->fd;
}

unsigned sl_conn_local_port(const sl_conn *c)
{
    const char *canon = srv_of(c)->cs->listen[c->listener].canon;
    const char *colon = strrchr(canon, ':');
    return colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
}

static void arena_reset(sl_conn *c)
{
    c->arena_used = 0;
    while (c->arena_more) {
        struct sl_arena_block *b = c->arena_more;
        c->arena_more = b->next;
        free(b);
    }
}

/* ---- readiness and deadlines ---- */

/* The time now, read from the system, not the loop's clock: that one is set by the loop's
 * once-a-second tick, lags by up to a second (more when a busy loop runs its tick late), and a
 * deadline counted from it would expire early by as much. */
static time_t now_s(const sl_conn *c)
{
    (void)c;
    return time(NULL);
}

/* The deadline for a limit of `secs` seconds from now. Deadlines count whole seconds and
 * the sweep runs once a second, so one more second is added: the connection gets at least the
 * whole limit and less than two seconds more (lighttpd's "more than N seconds"). Without it, a
 * connection that went idle late in a second was closed after barely N-1. */
static time_t deadline_in(const sl_conn *c, time_t secs)
{
    return now_s(c) + secs + 1;
}

/* Come back to this connection after the other ready events ran (a budget was spent while the
 * socket can still take more, or pipelined requests wait): an edge that already fired will not
 * fire again. */
static void yield(sl_conn *c, short what)
{
    event_active(&c->ev, what, 0);
}

void sl_conn_nodelay(sl_conn *c)
{
    /* Nagle stays on for a connection's first response: its header goes out with MSG_MORE and
     * its body with sendfile(), which then leaves in full segments. A tail that Nagle holds is
     * pushed by the close, or here, when the connection outlives its first response. */
    if (c->nodelay || c->fd < 0) return;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->nodelay = true;
}

void sl_conn_mark(sl_conn *c, uint64_t *field)
{
    if (srv_of(c)->timing && !*field) *field = sl_now_ns();
}

static void timing_start(sl_conn *c)
{
    memset(&c->t, 0, sizeof c->t);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->t.wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    c->t.start = sl_now_ns();
}

static void request_start(sl_conn *c)
{
    if (srv_of(c)->req_clock) {
        c->req_start = sl_now_ns();
        clock_gettime(CLOCK_REALTIME, &c->req_wall);
    }
    if (srv_of(c)->timing) timing_start(c);
}

static void on_xfer(sl_xfer *x);
static void on_xfer_read(sl_xfer *x, uint64_t q, uint64_t s, uint64_t d)
{
    sl_conn *c = x->owner;
    unsigned i = c->t.n_reads++;
    if (i < SL_TIMING_READS) {
        c->t.reads[i][0] = q;
        c->t.reads[i][1] = s;
        c->t.reads[i][2] = d;
    }
}

int sl_conn_new(sl_loop *loop, int fd, const struct sockaddr *sa, int salen, unsigned listener)
{
    sl_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    sl_server *srv = loop->srv;
    c->loop = loop;
    c->fd = fd;
    c->listener = listener;
    c->id = ++loop->conn_seq;
    c->file_fd = -1;
    c->conf = srv->cs->global;
    c->docroot = sl_core(c->conf)->docroot;
    sl_xfer_init(&c->xfer, &loop->io, fd, on_xfer, c);
    if (srv->timing) c->xfer.on_read = on_xfer_read;
    if (salen > 0 && (size_t)salen <= sizeof c->peer) memcpy(&c->peer, sa, (size_t)salen);
    c->next = loop->conns;
    if (loop->conns) loop->conns->prev = c;
    loop->conns = c;
    loop->n_conns++;
    c->state = SL_CONN_READ_HEAD;
    c->deadline = deadline_in(c, srv->global->max_read_idle);
    c->rd_ready = c->wr_ready = true; /* try at once; the kernel says when not */
    /* EV_CLOSED (EPOLLRDHUP) tells a short read that the peer's FIN is queued behind the data:
     * with edge-triggered events no further edge would announce it. */
    event_assign(&c->ev, loop->base, fd, EV_READ | EV_WRITE | EV_CLOSED | EV_PERSIST | EV_ET,
                 conn_event, c);
    if (event_add(&c->ev, NULL) < 0 ||
        (srv->tls && sl_tls_listener(srv, listener) && sl_tls_conn_start(c) < 0)) {
        sl_conn_close(c);
        return -ENOMEM;
    }
    request_start(c);
    const sl_conf_set *cs = srv->cs;
    for (size_t i = 0; i < cs->n_mods; i++) {
        if (cs->mods[i]->conn_accept && cs->mods[i]->conn_accept(c) == SL_ERROR) {
            sl_conn_close(c);
            return 0;
        }
    }
    /* The request usually came with the handshake: answer it now, without a loop turn. Not a
     * TLS ClientHello: its reply costs a key exchange and a signature (~0.2 ms), and a burst of
     * new connections answered here, one after another, would keep the established ones
     * waiting; their edge (epoll reports data that came before the registration) puts them in
     * line with the others. */
    if (!c->tls) conn_run(c);
    return 0;
}

/* ---- closing ---- */

static void request_reset(sl_conn *c);

static void conn_free(sl_conn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    if (c->h2_id)
        sl_h2_stream_freed(c);
    else if (c->h2)
        sl_h2_free(c); /* its streams' files were on the queue: the socket is done with them */
    request_reset(c);
    if (c->tls) sl_tls_conn_free(c);
    sl_loop_buf_put(c->loop, c->in);
    free(c->conf_buf);
    free(c->caps);
    free(c);
}

void sl_conn_close(sl_conn *c)
{
    if (c->closed) return;
    if (c->h2_id) {
        sl_h2_stream_close(c); /* reset; freed once what it queued went out */
        return;
    }
    if (c->tls) sl_tls_close_notify(c);
    event_del(&c->ev);
    if (!c->xfer.inflight) {
        /* Nothing but a read thread ever uses the socket off the loop. */
        close(c->fd);
        c->fd = -1;
    } else {
        /* A thread may be sending on this socket: the number must not be reused before the
         * job returns. Shutting it down ends the thread's sendfile() and tells the client. */
        shutdown(c->fd, SHUT_RDWR);
    }
    sl_xfer_reset_if_idle(&c->xfer);
    c->closed = true;
    sl_loop *loop = c->loop;
    if (c->prev)
        c->prev->next = c->next;
    else
        loop->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    loop->n_conns--;
    const sl_conf_set *cs = loop->srv->cs;
    for (size_t i = 0; i < cs->n_mods; i++)
        if (cs->mods[i]->conn_close) cs->mods[i]->conn_close(c);
    /* A worker may still be using the request: its done() frees the rest. */
    if (c->pending == 0 && !c->xfer.inflight) conn_free(c);
    sl_loop_conn_closed(loop);
}

void sl_conn_release(sl_conn *c)
{
    if (c->closed && c->pending == 0 && !c->xfer.inflight) conn_free(c);
}

void sl_conn_shutdown(sl_conn *c)
{
    if (c->state == SL_CONN_H2) {
        sl_h2_shutdown(c); /* GOAWAY: streams already opened finish */
        return;
    }
    /* Idle between requests: nothing is lost by closing now (a client sends a request that
     * meets the close again, RFC 9112 §9.3.1). After a graceful restart a connection that has
     * not sent its first request yet is one the kernel queued for this server just before the
     * new one took over: its request is on the way and is answered (with Connection: close). */
    if (c->state == SL_CONN_READ_HEAD && c->in_len == 0 &&
        (c->requests > 0 || !srv_of(c)->handed_over))
        sl_conn_close(c);
    else
        sl_bw_stop(c); /* a response waiting for its bandwidth goes on, unlimited */
}

/* ---- responses ---- */

const char *sl_status_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

int sl_errno_to_status(int err)
{
    switch (-err) {
    case 0: return 200;
    case ENOENT:
    case ENOTDIR: return 404;
    case EACCES:
    case EPERM:
    case ELOOP: /* a symlink the policy does not follow */
    case EXDEV: /* a path or symlink leading out of the document root */
        return 403;
    /* A name the file system cannot hold names no file: 404, as nginx and lighttpd answer. The
     * URI itself was short enough, or the parser would have answered 414. */
    case ENAMETOOLONG: return 404;
    case EINVAL: return 400;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        /* Out of descriptors or memory says nothing about the file: never 403/404. */
        return 503;
    default: return 500;
    }
}

void sl_resp_begin(sl_conn *c, int status)
{
    c->status = status;
    c->resp.status = status;
    c->resp.n_fields = 0;
    c->resp.head_done = false;
    c->resp.content_length = UINT64_MAX;
}

void sl_resp_header_static(sl_conn *c, const char *name, size_t name_len, const char *value,
                           size_t value_len)
{
    sl_resp *r = &c->resp;
    if (!r->fields) {
        r->fields = r->inline_fields;
        r->cap_fields = SL_RESP_MAX_HEADERS;
    }
    if (r->n_fields == r->cap_fields) {
        /* Many fields (a backend's Set-Cookie lines): a bigger array in the request's memory. */
        sl_resp_field *f = sl_conn_alloc(c, 2 * r->cap_fields * sizeof *f);
        if (!f) {
            sl_log("response to %s: out of memory for header fields; dropping %s",
                   c->path ? c->path : "-", name);
            return;
        }
        memcpy(f, r->fields, r->n_fields * sizeof *f);
        r->fields = f;
        r->cap_fields *= 2;
    }
    if (name_len > 65535 || value_len > 65535) return;
    r->fields[r->n_fields++] = (sl_resp_field){name, value, (uint16_t)name_len,
                                               (uint16_t)value_len};
}

void sl_resp_header(sl_conn *c, const char *name, const char *value)
{
    size_t vl = strlen(value);
    const char *v = sl_conn_strdup(c, value, vl);
    if (v) sl_resp_header_static(c, name, strlen(name), v, vl);
}

sl_resp_field *sl_resp_find(sl_conn *c, const char *name)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < c->resp.n_fields; i++) {
        sl_resp_field *f = &c->resp.fields[i];
        if (f->name_len == n && !strncasecmp(f->name, name, n)) return f;
    }
    return NULL;
}

void sl_resp_remove(sl_conn *c, const char *name)
{
    size_t n = strlen(name);
    unsigned k = 0;
    for (unsigned i = 0; i < c->resp.n_fields; i++) {
        sl_resp_field *f = &c->resp.fields[i];
        if (!(f->name_len == n && !strncasecmp(f->name, name, n))) c->resp.fields[k++] = *f;
    }
    c->resp.n_fields = k;
}

void sl_resp_end_headers(sl_conn *c, uint64_t content_length)
{
    c->resp.content_length = content_length;
    c->resp.head_done = true;
}

void sl_resp_error(sl_conn *c, int status)
{
    /* After these the rest of the input cannot be trusted to be framed right. (A 501 for a
     * transfer coding comes from the parser, whose errors always close; a 501 for an unknown
     * method follows a head parsed whole, so the connection can go on.) */
    if (status == 400 || status == 408 || status == 413 || status == 414 || status == 431 ||
        status == 505)
        c->keep_alive = false;
    sl_chunkq_clear(&c->out);
    sl_resp_begin(c, status);
    if (status == 405) sl_resp_header_static(c, "Allow", 5, "GET, HEAD", 9);
    /* server.errorfile-prefix: the page read at load, typed as the file would be when served
     * (lighttpd's mimetype.assign for .html), or the built-in one. */
    size_t flen;
    const char *file = sl_errpages_get(sl_core(c->conf)->errpages, status, &flen);
    const char *type = file ? sl_mime_lookup(sl_core(c->conf)->mime, "e.html", 6) : NULL;
    if (!type) type = "text/html";
    sl_resp_header_static(c, "Content-Type", 12, type, strlen(type));
    if (file) {
        sl_resp_end_headers(c, flen);
        if (c->req.method != SL_METHOD_HEAD) sl_chunkq_append_mem(&c->out, file, flen);
        return;
    }
    char body[256];
    int n = snprintf(body, sizeof body,
                     "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                     "<body><h1>%d %s</h1></body></html>\n",
                     status, sl_status_reason(status), status, sl_status_reason(status));
    sl_resp_end_headers(c, (uint64_t)n);
    if (c->req.method != SL_METHOD_HEAD) sl_chunkq_append_mem(&c->out, body, (size_t)n);
}

void sl_conn_file_is(sl_conn *c, int fd, const struct stat *st)
{
    sl_xfer_set_file(&c->xfer, fd, st);
}

int sl_conn_send_file(sl_conn *c, int fd, off_t off, off_t len)
{
    return sl_chunkq_append_file(&c->out, fd, off, len);
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* Decimal digits of v (printf's machinery costs more than the rest of the head). */
static char *put_u64(char *p, uint64_t v)
{
    char t[20];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = t[--n];
    return p;
}

/* Write the response head in front of the queued body: the response_start hooks first. */
static int head_write(sl_conn *c)
{
    sl_resp *r = &c->resp;
    if (r->head_sent) return 0;
    const sl_conf_set *cs = srv_of(c)->cs;
    for (size_t i = 0; i < cs->n_hook_mods[SL_HOOK_RESPONSE_START]; i++)
        cs->hook_mods[SL_HOOK_RESPONSE_START][i]->response_start(c);
    if (c->h2_id) return sl_h2_stream_head(c);
    const char *conn = NULL;
    if (!c->keep_alive)
        conn = "close";
    else if (c->req.version == 10)
        conn = "keep-alive";
    const char *reason = sl_status_reason(r->status);
    const char *date = sl_loop_date(c->loop);
    const char *tag = sl_core(c->conf)->server_tag;
    size_t tag_len = strlen(tag);
    bool has_server = false;
    size_t need = 64 + strlen(reason) + SL_HTTP_DATE_LEN + 80 + tag_len;
    for (unsigned i = 0; i < r->n_fields; i++) {
        need += (size_t)r->fields[i].name_len + r->fields[i].value_len + 4;
        has_server |= r->fields[i].name_len == 6 && !strncasecmp(r->fields[i].name, "Server", 6);
    }
    char stackbuf[2048];
    char *buf = need <= sizeof stackbuf ? stackbuf : malloc(need);
    if (!buf) return -ENOMEM;
    char *p = buf;
    /* Always our own version, 1.1, also to a 1.0 client (RFC 9110 §2.5: the version says what
     * the sender can do, not what the recipient sent). The 1.0 semantics stay with the request:
     * no chunked coding, keep-alive only when asked. */
    p = put(p, "HTTP/1.1 ", 9);
    p = put_u64(p, (uint64_t)(unsigned)r->status);
    *p++ = ' ';
    p = put(p, reason, strlen(reason));
    p = put(p, "\r\n", 2);
    for (unsigned i = 0; i < r->n_fields; i++) {
        const sl_resp_field *f = &r->fields[i];
        p = put(p, f->name, f->name_len);
        p = put(p, ": ", 2);
        p = put(p, f->value, f->value_len);
        p = put(p, "\r\n", 2);
    }
    if (r->content_length != UINT64_MAX) {
        p = put(p, "Content-Length: ", 16);
        p = put_u64(p, r->content_length);
        p = put(p, "\r\n", 2);
    }
    p = put(p, "Date: ", 6);
    p = put(p, date, SL_HTTP_DATE_LEN);
    p = put(p, "\r\n", 2);
    /* server.tag, unless a module (setenv.set-response-header) named the server itself, as in
     * lighttpd; "" sends none. */
    if (tag_len && !has_server) {
        p = put(p, "Server: ", 8);
        p = put(p, tag, tag_len);
        p = put(p, "\r\n", 2);
    }
    if (conn) {
        p = put(p, "Connection: ", 12);
        p = put(p, conn, strlen(conn));
        p = put(p, "\r\n", 2);
    }
    p = put(p, "\r\n", 2);
    size_t len = (size_t)(p - buf);
    int e = sl_chunkq_prepend_mem(&c->out, buf, len);
    if (buf != stackbuf) free(buf);
    if (e < 0) return e;
    c->hdr_bytes = len;
    r->head_sent = true;
    return 0;
}

/* ---- requests ---- */

static void count_request(sl_conn *c);

/* Let go of the file a response was to send (and its body chunks). */
static void release_file(sl_conn *c)
{
    sl_chunkq_clear(&c->out);
    sl_xfer_reset_if_idle(&c->xfer);
    if (!c->xfer.inflight) {
        /* A read in flight still uses the file: the completion's own reset comes back here. */
        if (c->file_ent) {
            sl_fdc_release(srv_of(c)->fdc, c->file_ent); /* the cache keeps it open */
            c->file_ent = NULL;
        } else if (c->file_fd >= 0) {
            close(c->file_fd);
        }
        c->file_fd = -1;
    }
}

static void request_reset(sl_conn *c)
{
    /* Counted where it is logged: an answer cut short (the connection closed mid-body) is in
     * the access log and the timing trace, so the status page counts it too. */
    if (c->status) count_request(c);
    const sl_conf_set *cs = srv_of(c)->cs;
    if (c->status)
        for (size_t i = 0; i < cs->n_hook_mods[SL_HOOK_LOG_REQUEST]; i++)
            cs->hook_mods[SL_HOOK_LOG_REQUEST][i]->log_request(c);
    for (size_t i = 0; i < cs->n_hook_mods[SL_HOOK_REQUEST_DONE]; i++)
        cs->hook_mods[SL_HOOK_REQUEST_DONE][i]->request_done(c);
    release_file(c);
    arena_reset(c);
    c->path = c->query = NULL;
    c->path_len = 0;
    c->phys_root = NULL;
    c->phys_path = NULL;
    c->phys_len = 0;
    c->handler = NULL;
    c->edits = NULL;
    c->remote_user = c->auth_type = NULL;
    c->status = c->error = 0;
    c->eh_status = 0;
    memset(&c->resp, 0, sizeof c->resp);
    c->has_body = false;
    c->bytes_out = 0;
    c->streaming = false;
    c->on_drain = NULL;
    c->on_body = NULL;
    c->body_armed = false;
    memset(c->mctx, 0, sizeof c->mctx);
    c->hdr_bytes = 0;
    c->conf = srv_of(c)->cs->global;
    c->docroot = sl_core(c->conf)->docroot;
}

static void error_handler_end(sl_conn *c);

static void start_write(sl_conn *c)
{
    if (c->eh_status) error_handler_end(c);
    c->state = SL_CONN_WRITE;
    c->deadline = deadline_in(c, sl_core(c->conf)->max_write_idle);
    if (head_write(c) < 0) {
        sl_log("%s: out of memory for the response head", c->path ? c->path : "-");
        c->keep_alive = false;
    }
}

/* A parse error: answer and close. The request struct may be half-filled; reset what the
 * response code looks at. The method is kept when it is HEAD (the parser reports it whenever the
 * method token was read): an answer to HEAD never has a body (RFC 9110 §9.3.2), even an error. */
static void parse_error(sl_conn *c, int status)
{
    if (c->req.method != SL_METHOD_HEAD) c->req.method = SL_METHOD_GET;
    if (c->req.version != 10) c->req.version = 11;
    c->keep_alive = false;
    c->conf = srv_of(c)->cs->global;
    c->docroot = sl_core(c->conf)->docroot;
    c->has_body = true; /* unread input may follow: linger */
    c->head_len = c->in_len;
    sl_resp_error(c, status);
    start_write(c);
}

/* c->host: the authority of an absolute-form target, else the Host field, normalized so that
 * conditions, the access log and backends see one spelling of each host (sl_host_normalize);
 * "" without either (HTTP/1.0). ":80" is the default port on a plain listener, ":443" on a TLS
 * one. An invalid value is refused (400), as lighttpd does. */
static int set_host(sl_conn *c, const char *auth, size_t alen)
{
    const sl_http_header *h = c->req.host;
    if (!alen && !h) {
        c->host[0] = 0;
        c->host_raw_len = 0;
        return 0;
    }
    const char *raw = alen ? auth : h->value;
    size_t len = alen ? alen : h->value_len;
    unsigned dport = sl_conn_scheme(c)[4] == 's' ? 443 : 80;
    /* The same value as the last request's: c->host already holds its spelling (nothing else
     * writes c->host). */
    if (len && len == c->host_raw_len && dport == c->host_raw_port &&
        !memcmp(raw, c->host_raw, len))
        return 0;
    c->host_raw_len = 0;
    ssize_t n = sl_host_normalize(raw, len, dport, c->host, sizeof c->host);
    if (n < 0) {
        c->host[0] = 0;
        return (int)n;
    }
    if (len < sizeof c->host_raw) {
        memcpy(c->host_raw, raw, len);
        c->host_raw_len = (unsigned char)len;
        c->host_raw_port = (unsigned short)dport;
    }
    return 0;
}

static int comeback(sl_conn *c);

/* lighttpd's error handlers, for an error the hooks answered with (not one from a back end,
 * whose answer goes out as it is, nor one of a request head the server could not take):
 * server.error-handler takes every status >= 400, server.error-handler-404 only 404 and 403. The
 * request starts over with the handler's URL as its target (conditions evaluated for it, as a
 * rewrite would), once: an error of the handler's own request is not handled again.
 * error-handler's request is a GET (HEAD stays HEAD: no body); error-handler-404's keeps its
 * method. What status goes out is error_handler_end's. true when the handler took the request
 * (it is then answered or in flight). */
static bool error_handler_start(sl_conn *c, int status)
{
    if (c->eh_status || status < 400) return false;
    const sl_core_conf *cc = sl_core(c->conf);
    const char *url = cc->error_handler;
    bool h404 = false;
    if (!url && (status == 404 || status == 403)) {
        url = cc->error_handler_404;
        h404 = true;
    }
    if (!url) return false;
    c->eh_status = h404 ? -status : status;
    c->eh_method = c->req.method;
    if (!h404 && c->req.method != SL_METHOD_HEAD) c->req.method = SL_METHOD_GET;
    release_file(c);
    memset(&c->resp, 0, sizeof c->resp);
    c->status = c->error = 0;
    c->target = url;
    c->target_len = strlen(url);
    if (comeback(c) == 0) run_phases(c);
    return true;
}

/* The handler's request answered (c->status): the status the client gets, as lighttpd 1.4
 * decides it. server.error-handler: the original error, with the handler's body when the
 * handler answered 2xx, else the error page of the original error. server.error-handler-404: the
 * original 404/403 page when the handler's URL was not found or forbidden either, otherwise what
 * the handler answered, status included (a static page answers 200). */
static void error_handler_end(sl_conn *c)
{
    int saved = c->eh_status, sub = c->status;
    c->eh_status = 0;
    c->req.method = c->eh_method;
    if (saved > 0) {
        if (sub >= 200 && sub <= 299)
            c->status = c->resp.status = saved;
        else
            sl_resp_error(c, saved);
    } else if (sub == 404 || sub == 403) {
        sl_resp_error(c, -saved);
    }
}

/* A module answered: turn an error into its response and start writing. */
static void handled(sl_conn *c, sl_hresult r)
{
    if (r == SL_ERROR) {
        int status = c->status ? c->status : sl_errno_to_status(c->error);
        /* Our faults are logged; 501 and 505 answer what the client asked for (a method or a
         * version we do not implement), which nginx and lighttpd do not log either. */
        if (status >= 500 && status != 501 && status != 505)
            sl_log("%s %s: %s (%d)", sl_method_name(c->req.method), c->path ? c->path : "-",
                   c->error ? strerror(-c->error) : "error", status);
        if (error_handler_start(c, status)) return;
        sl_resp_error(c, status);
    } else if (!c->resp.head_done && !c->resp.head_sent) {
        /* A module that answered without a head: its status, no body. */
        sl_resp_begin(c, c->status ? c->status : 500);
        sl_resp_end_headers(c, 0);
    }
    start_write(c);
}

void sl_conn_handled(sl_conn *c, sl_hresult r)
{
    if (r == SL_GO_ON) {
        /* An asynchronous hook finished without answering: the next module, the next phase. */
        c->state = SL_CONN_HANDLE;
        c->phase_mod++;
        run_phases(c);
    } else if (r == SL_COMEBACK) {
        c->state = SL_CONN_HANDLE;
        if (comeback(c) == 0) run_phases(c);
    } else {
        handled(c, r);
    }
    conn_run(c);
}

void sl_conn_resume(sl_conn *c)
{
    if (c->state == SL_CONN_WRITE || c->state == SL_CONN_H2) conn_run(c);
}

/* Expect is a list over all its lines (RFC 9110 §10.1.1); 100-continue is the only expectation
 * we meet, so one other element anywhere is a 417. An empty field expects nothing. */
static bool expectations_met(const sl_http_header *h)
{
    for (; h; h = h->next) {
        size_t pos = 0, n;
        const char *e;
        while (sl_http_list_next(h->value, h->value_len, &pos, &e, &n))
            if (!(n == 12 && strncasecmp(e, "100-continue", 12) == 0)) return false;
    }
    return true;
}


/* What conditions on headers and on the client's address as text compare with, made only when
 * such a condition is tested: a header's lines joined (", ", "; " for Cookie, as lighttpd
 * combines them) and the address, in request memory so that captures may point into them. */
static const char *cond_lazy(void *ud, const sl_cblock *b)
{
    sl_conn *c = ud;
    if (b->field == SL_COND_REMOTE_IP) {
        char ip[64];
        sl_addr_str((const struct sockaddr *)&c->peer, ip, sizeof ip, NULL);
        return sl_conn_strdup(c, ip, strlen(ip));
    }
    const sl_http_header *h = sl_http_find_header(&c->req, b->header);
    if (!h) return NULL;
    if (!h->next) return sl_conn_strdup(c, h->value, h->value_len);
    const char *sep = strcasecmp(b->header, "cookie") ? ", " : "; ";
    size_t n = sl_http_field_join(h, sep, NULL, 0);
    char *v = sl_conn_alloc(c, n + 1);
    if (!v) return NULL;
    sl_http_field_join(h, sep, v, n);
    v[n] = 0;
    return v;
}

/* Split the target into path and query, normalize the path, evaluate conditions. 0, or an
 * error status. */
static int request_uri(sl_conn *c, const char *target, size_t target_len)
{
    const char *p, *q, *auth;
    size_t plen, qlen, alen;
    if (sl_uri_split(target, target_len, &p, &plen, &q, &qlen, &auth, &alen) < 0) return 400;
    if (plen == 0) { /* absolute-form without a path ("http://host") means "/" */
        p = "/";
        plen = 1;
    }
    c->path = sl_conn_alloc(c, plen + 2);
    c->query = sl_conn_strdup(c, q ? q : "", qlen);
    if (!c->path || !c->query) return 503;
    ssize_t n = sl_path_normalize(p, plen, c->path, plen + 2);
    if (n < 0) return sl_errno_to_status((int)n);
    c->path_len = (size_t)n;
    if (set_host(c, auth, alen) < 0) {
        c->host[0] = 0;
        return 400;
    }
    sl_server *srv = srv_of(c);
    const sl_conf_set *cs = srv->cs;
    if (cs->per_listener || !cs->tree->root->n_children) {
        /* The block does not depend on the request: no input to gather. */
        c->conf = sl_conf_for_request(cs, c->listener, NULL, NULL, NULL);
        c->docroot = sl_core(c->conf)->docroot;
        return 0;
    }
    if (!c->conf_buf && !(c->conf_buf = malloc(cs->block_size))) return 503;
    if (cs->n_captures && !c->caps && !(c->caps = calloc(cs->n_captures, sizeof *c->caps)))
        return 503;
    const char *method = sl_method_name(c->req.method);
    if (c->req.method == SL_METHOD_OTHER &&
        !(method = sl_conn_strdup(c, c->req.method_str, c->req.method_len)))
        return 503;
    sl_cond_input in = {.socket = cs->listen[c->listener].literal, .url = c->path,
                        .host = c->host, .query = c->query, .scheme = c->scheme, .method = method,
                        .peer = (const struct sockaddr *)&c->peer, .lazy = cond_lazy, .ud = c};
    c->conf = sl_conf_for_request(cs, c->listener, &in, c->conf_buf, c->caps);
    c->docroot = sl_core(c->conf)->docroot;
    return 0;
}

/* A hook changed c->target (SL_COMEBACK): the request starts over from the uri_raw phase with
 * the new target normalized and the conditions evaluated for it, as lighttpd does after a
 * rewrite. Sets up the phases and returns 0, or answers (and returns -1) when the new target is
 * bad or the request came back too often (a loop between rules). */
static int comeback(sl_conn *c)
{
    int st = ++c->comebacks > SL_MAX_COMEBACKS ? 500 : request_uri(c, c->target, c->target_len);
    if (st) {
        if (st == 500)
            sl_log("%s %s: came back more than %d times (rewrite rules in a loop?)",
                   sl_method_name(c->req.method), c->path ? c->path : "-", SL_MAX_COMEBACKS);
        sl_resp_error(c, st);
        start_write(c);
        return -1;
    }
    c->phys_root = NULL;
    c->phys_path = NULL;
    c->phys_len = 0;
    c->handler = NULL;
    c->phase = PH_URI_RAW;
    c->phase_mod = 0;
    return 0;
}

/* Run the modules' hooks from (phase, phase_mod) on until one answers or waits. */
static void run_phases(sl_conn *c)
{
    const sl_conf_set *cs = srv_of(c)->cs;
    while (c->phase < PH_DONE) {
        if (c->phase_mod >= cs->n_hook_mods[c->phase]) {
            c->phase++;
            c->phase_mod = 0;
            continue;
        }
        const sl_module *m = cs->hook_mods[c->phase][c->phase_mod];
        sl_hresult (*hook)(sl_conn *) = c->phase == PH_URI_RAW      ? m->uri_raw
                                        : c->phase == PH_URI_CLEAN  ? m->uri_clean
                                        : c->phase == PH_PHYSICAL   ? m->physical
                                                                    : m->handle;
        sl_hresult r = hook(c);
        if (r == SL_GO_ON) {
            c->phase_mod++;
        } else if (r == SL_WAIT) {
            return; /* the module calls sl_conn_handled */
        } else if (r == SL_COMEBACK) {
            if (comeback(c) < 0) return;
        } else {
            handled(c, r);
            return;
        }
    }
    if (error_handler_start(c, 404)) return;
    sl_resp_error(c, 404);
    start_write(c);
}

static void handle_request(sl_conn *c)
{
    sl_http_request *rq = &c->req;
    sl_server *srv = srv_of(c);
    c->conf = srv->cs->global; /* until the conditions are evaluated */
    c->docroot = sl_core(c->conf)->docroot;
    c->keep_alive = rq->version == 11 ? !rq->conn_close : (rq->conn_keep_alive && !rq->conn_close);
    c->has_body = rq->content_length > 0 || rq->chunked;
    /* Never parse an unread body as the next request; a module that reads it (proxy-core)
     * restores ka_after_body. */
    c->ka_after_body = c->keep_alive;
    if (c->has_body) c->keep_alive = false;
    c->target = rq->target;
    c->target_len = rq->target_len;
    c->scheme = sl_conn_scheme(c);
    bool asterisk = rq->target_len == 1 && rq->target[0] == '*';
    int st = asterisk ? (rq->method == SL_METHOD_OPTIONS ? 405 : 400)
                      : request_uri(c, rq->target, rq->target_len);
    if (st) {
        /* "*" names no file: only OPTIONS may use it, and we offer no OPTIONS. */
        sl_resp_error(c, st);
        start_write(c);
        return;
    }
    const sl_core_conf *cc = sl_core(c->conf);
    if (c->requests + 1 >= (unsigned long)cc->max_keep_alive_requests || c->loop->stopping)
        c->keep_alive = c->ka_after_body = false;
    if (!expectations_met(rq->expect)) {
        sl_resp_error(c, 417);
        start_write(c);
        return;
    }
    if (rq->content_length > (long long)cc->max_request_size * 1024) {
        sl_resp_error(c, 413);
        start_write(c);
        return;
    }
    c->state = SL_CONN_HANDLE;
    c->phase = PH_URI_RAW;
    c->phase_mod = 0;
    c->comebacks = 0;
    run_phases(c);
}

/* Try to take one request head out of the input buffer. Returns true when a request was taken
 * (the state moved on), false when more input is needed. */
static bool take_request(sl_conn *c)
{
    if (c->in_len == 0) return false;
    if (c->requests == 0 && !c->h2_id) {
        /* HTTP/2: ALPN chose it, or a cleartext client starts with the preface. */
        int h2 = c->tls ? (sl_tls_alpn_h2(c) ? 1 : -1)
                 : sl_core_h2proto(srv_of(c)->global) ? sl_h2_preface(c->in, c->in_len)
                                                       : -1;
        if (h2 == 0) return false;
        if (h2 > 0) {
            if (sl_h2_start(c) == 0) return true;
            parse_error(c, 503); /* out of memory */
            return true;
        }
    }
    long field_size = srv_of(c)->global->max_request_field_size;
    sl_http_limits lim = {.max_head = (size_t)field_size, .max_line = (size_t)field_size,
                          .max_headers = SL_HTTP_MAX_HEADERS};
    int r = sl_http_parse_request(c->in, c->in_len, &lim, &c->req);
    if (r == 0) return false;
    if (r < 0) {
        parse_error(c, -r);
        return true;
    }
    c->head_len = (size_t)r;
    sl_conn_mark(c, &c->t.parsed);
    int up = c->req.conn_upgrade && !c->tls ? sl_h2_upgrade(c) : 0;
    if (up < 0) {
        /* The 101 did not go out whole: nothing else can follow it. */
        shutdown(c->fd, SHUT_RDWR);
        c->state = SL_CONN_LINGER;
        c->deadline = now_s(c);
    }
    if (up == 0) handle_request(c);
    return true;
}

static void count_request(sl_conn *c)
{
    sl_loop_stats *st = &c->loop->stats;
    SL_STAT_ADD(st->requests, 1);
    SL_STAT_ADD(st->bytes, c->bytes_out);
    if (c->status >= 100 && c->status < 600) SL_STAT_ADD(st->responses[c->status / 100], 1);
}

/* The response is out. Returns -1 when the connection was closed (c is gone), 0 otherwise. */
static int request_finished(sl_conn *c)
{
    sl_conn_mark(c, &c->t.last_byte);
    bool had_body = c->has_body;
    request_reset(c);
    c->requests++;
    /* Drop the head we answered; pipelined bytes after it move to the front. */
    if (c->head_len < c->in_len)
        memmove(c->in, c->in + c->head_len, c->in_len - c->head_len);
    c->in_len -= c->head_len < c->in_len ? c->head_len : c->in_len;
    c->head_len = 0;
    /* Stopping: a request taken before the stop was answered as kept alive. Its connection closes
     * now (nginx does so too) instead of idling out the keep-alive limit while the graceful
     * timeout runs; a request already pipelined behind it is answered first, with a close. The
     * client was not told, so it may be sending a request right now: close through linger. */
    bool stop_now = c->loop->stopping && c->in_len == 0;
    if (!c->keep_alive || stop_now) {
        if (had_body || c->in_len > 0 || stop_now) {
            /* Input may still be arriving: shut our side and drain before closing, or the
             * kernel answers the unread bytes with a reset that can destroy the response. */
            if (c->tls) sl_tls_close_notify(c);
            shutdown(c->fd, SHUT_WR);
            c->state = SL_CONN_LINGER;
            c->in_len = 0;
            c->deadline = now_s(c) + LINGER_SECONDS;
            if (c->rd_ready) yield(c, EV_READ);
            return 0;
        }
        sl_conn_close(c);
        return -1;
    }
    c->state = SL_CONN_READ_HEAD;
    /* Kept alive: later responses may be small writes behind unacknowledged ones. This also
     * pushes a tail Nagle held back. */
    sl_conn_nodelay(c);
    if (c->in_len > 0) {
        c->deadline = deadline_in(c, srv_of(c)->global->max_read_idle);
        request_start(c);
        return 0; /* conn_run parses the pipelined request next */
    }
    /* Idle between requests: give the buffer back so 10k idle connections stay cheap. */
    sl_loop_buf_put(c->loop, c->in);
    c->in = NULL;
    c->in_cap = 0;
    c->deadline = deadline_in(c, sl_core(c->conf)->max_keep_alive_idle);
    return 0;
}

/* Read what the socket has into the head buffer. Returns 1 when bytes arrived, 0 when there is
 * nothing to read now, -1 when the connection was closed. */
static int conn_read(sl_conn *c)
{
    if (c->tls ? !sl_tls_can_read(c) : !c->rd_ready) return 0;
    if (!c->in) {
        c->in_cap = (size_t)srv_of(c)->global->max_request_field_size + 1024;
        c->in = sl_loop_buf_get(c->loop, c->in_cap);
        if (!c->in) {
            sl_conn_close(c);
            return -1;
        }
    }
    if (c->in_len == c->in_cap) return 0; /* full: the parser reports 431/414 */
    size_t room = c->in_cap - c->in_len;
    ssize_t n;
    if (c->tls) {
        /* The handshake runs inside these reads; readiness is the TLS layer's to clear (a
         * short read says nothing while OpenSSL may hold decrypted bytes). */
        n = sl_tls_recv(c, c->in + c->in_len, room);
        if (n == -EAGAIN) return 0;
        if (n <= 0) {
            sl_conn_close(c); /* end of input, garbage, a failed handshake */
            return -1;
        }
        if (c->in_len == 0 && c->requests > 0) {
            c->deadline = deadline_in(c, srv_of(c)->global->max_read_idle);
            request_start(c);
        }
        c->in_len += (size_t)n;
        return 1;
    }
    n = recv(c->fd, c->in + c->in_len, room, 0);
    if (n > 0) {
        if (c->in_len == 0 && c->requests > 0) {
            /* A new request starts on a kept-alive connection. */
            c->deadline = deadline_in(c, srv_of(c)->global->max_read_idle);
            request_start(c);
        }
        c->in_len += (size_t)n;
        /* Drained: the next edge says when there is more, unless the peer's FIN already came
         * (then the next recv returns 0). */
        if ((size_t)n < room && !c->rd_eof) c->rd_ready = false;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        c->rd_ready = false;
        return 0;
    }
    if (n < 0 && errno == EINTR) return 0;
    sl_conn_close(c); /* EOF or reset */
    return -1;
}

ssize_t sl_conn_recv(sl_conn *c, void *buf, size_t len)
{
    if (c->h2_id) return sl_h2_stream_recv(c, buf, len);
    if (c->tls) return sl_tls_can_read(c) ? sl_tls_recv(c, buf, len) : -EAGAIN;
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, 0);
        if (n >= 0) {
            if ((size_t)n < len && !c->rd_eof) c->rd_ready = false;
            return n;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) c->rd_ready = false;
        return -errno;
    }
}

ssize_t sl_conn_send_now(sl_conn *c, const void *buf, size_t len)
{
    if (c->h2_id) return -EOPNOTSUPP; /* no HTTP/1.1 interim responses in a stream */
    if (c->tls) {
        ssize_t n = sl_tls_send(c, buf, len);
        if (n > 0) {
            int f = sl_tls_flush(c); /* now means now: not gathered behind a later response */
            if (f < 0 && f != -EAGAIN) return f;
        }
        return n;
    }
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
}

/* The memory chunks at the head of the queue through TLS. Small ones are staged (tls.h) so that
 * a response head and an error page, or a head and the first bytes of its file, leave in one
 * record and one write(); the file's first sl_xfer_send completes the record, and an empty
 * queue flushes it (conn_write). The same results as sl_chunkq_write_mem. */
static int tls_write_mem(sl_conn *c, size_t budget, size_t *done)
{
    size_t here = 0;
    sl_chunkq *q = &c->out;
    while (q->head && q->head->fd < 0) {
        if (here >= budget) return 1;
        sl_chunk *h = q->head;
        size_t len = (size_t)(h->end - h->off);
        if (len == 0) {
            sl_chunkq_pop(q);
            continue;
        }
        ssize_t n = sl_tls_stage(c, h->data + h->off, len);
        if (n == 0) n = sl_tls_send(c, h->data + h->off, len);
        if (n == -EAGAIN) return 1;
        if (n < 0) return (int)n;
        here += (size_t)n;
        *done += (size_t)n;
        c->bytes_out += (uint64_t)n;
        h->off += n;
        if (h->off == h->end) sl_chunkq_pop(q);
    }
    return 0;
}

void sl_conn_want_body(sl_conn *c, long secs)
{
    c->body_armed = true;
    c->deadline = deadline_in(c, secs > 0 ? secs : 1);
    if (c->tls ? sl_tls_can_read(c) : c->rd_ready) yield(c, EV_READ);
}

void sl_conn_pause_body(sl_conn *c)
{
    c->body_armed = false;
    c->deadline = 0;
}

/* The memory chunks at the head of the queue (a response head, a multipart boundary) and, when a
 * file chunk follows, its first block with them. A block the backend reads into a buffer is read
 * before the head goes (sl_xfer_prepare: 2, the read's completion resumes us), so head and body
 * leave in one sendmsg() as nginx's writev() sends them: on cold 4 KiB files the head's own
 * send was a system call and a pass through tcp_sendmsg per request. Blocks sent with
 * sendfile() still follow a head sent with MSG_MORE. The results of sl_chunkq_write_mem. */
static int write_mem_then_file(sl_conn *c, size_t budget, size_t *done)
{
    sl_chunk *f = c->out.head;
    while (f && f->fd < 0) f = f->next;
    const void *p = NULL;
    size_t len = 0;
    if (f && f->off < f->end) {
        int r = sl_xfer_prepare(&c->xfer, f->fd, f->off, f->end);
        if (r == SL_XFER_WAIT) return 2;
        if (r < 0) return r;
        len = sl_xfer_peek(&c->xfer, f->fd, f->off, f->end, &p);
    }
    bool more = f && ((off_t)len < f->end - f->off || f->next);
    size_t went = 0;
    int r = sl_chunkq_write_mem_tail(&c->out, c->fd, budget, &c->bytes_out, done, p, len, more,
                                     &went);
    if (went) {
        /* Every memory chunk went before these bytes: the file chunk is the head now. */
        sl_xfer_consumed(&c->xfer, went);
        f->off += (off_t)went;
        if (f->off == f->end) sl_chunkq_pop(&c->out);
    }
    return r;
}

/* Write what can be written now, at most about budget bytes. Returns 0 when the queue is empty,
 * 1 when the socket is full, 2 when a read is in flight, 3 when this turn's budget is spent, or a
 * negative errno. */
static int conn_write(sl_conn *c, size_t budget)
{
    size_t done = 0;
    for (;;) {
        sl_chunk *h = c->out.head;
        if (!h) {
            if (!c->tls) return 0;
            /* What was staged for a body that did not follow; before a close, with close_notify
             * behind the response in the same send. */
            bool last = !c->keep_alive && c->state == SL_CONN_WRITE && !c->streaming &&
                        !c->h2 && !c->h2_id;
            int r = last ? sl_tls_flush_last(c) : sl_tls_flush(c);
            return r == -EAGAIN ? 1 : r;
        }
        if (done >= budget) return 3;
        int r;
        if (h->fd < 0 && !c->tls && !c->h2 && !c->h2_id) {
            r = write_mem_then_file(c, budget - done, &done);
            if (r == 1) return done >= budget ? 3 : 1;
            if (r != 0) return r;
            continue;
        }
        if (h->fd < 0) {
            r = c->tls ? tls_write_mem(c, budget - done, &done)
                       : sl_chunkq_write_mem(&c->out, c->fd, budget - done, &c->bytes_out,
                                             &done);
            if (r == 1) return done >= budget ? 3 : 1;
            if (r != 0) return r;
            continue;
        }
        uint64_t before = c->bytes_out;
        r = sl_xfer_send(&c->xfer, h->fd, &h->off, h->end, budget - done, &c->bytes_out);
        done += (size_t)(c->bytes_out - before);
        if (r == SL_XFER_AGAIN) return done >= budget ? 3 : 1;
        if (r == SL_XFER_WAIT) {
            /* The client gets what is gathered while the read runs (a full socket: later). */
            if (c->tls) {
                int f = sl_tls_flush(c);
                if (f < 0 && f != -EAGAIN) return f;
            }
            return 2;
        }
        if (r < 0) return r;
        sl_chunkq_pop(&c->out);
    }
}

/* The network backend can go on (a read completed, or a read slot freed). */
static void on_xfer(sl_xfer *x)
{
    sl_conn *c = x->owner;
    if (c->closed) {
        /* The client left while we read: now, and not before, its memory can go. */
        sl_conn_release(c);
        return;
    }
    if (c->state == SL_CONN_WRITE || c->state == SL_CONN_H2) conn_run(c);
}

int sl_conn_write_out(sl_conn *c)
{
    if (c->tls ? !sl_tls_can_write(c) : !c->wr_ready) return 1;
    /* Bandwidth limits bound the turn's bytes; 0: a timer resumes us (bwlimit.c). */
    size_t budget = sl_bw_budget(c, WRITE_BUDGET);
    if (!budget) return 1;
    uint64_t before = c->bytes_out;
    int r = conn_write(c, budget);
    sl_bw_sent(c, c->bytes_out - before);
    if (c->bytes_out > before) {
        if (!c->t.first_byte) sl_conn_mark(c, &c->t.first_byte);
        c->deadline = deadline_in(c, sl_core(c->conf)->max_write_idle);
    }
    /* 1: the next writable edge resumes us (TLS cleared what it waits for itself). 2: a read
     * is in flight, on_xfer resumes us. */
    if (r == 1 && !c->tls) c->wr_ready = false;
    if (r == 3) yield(c, EV_WRITE);
    if (r < 0) {
        if (r == -ENODATA) {
            /* The file is the request's, or on an HTTP/2 session the one of the stream whose
             * chunk is at the head of the queue. */
            sl_conn *rq = c;
            if (c->h2 && c->out.head) {
                sl_conn *s = sl_h2_stream_of_file(c, c->out.head->fd);
                if (s) rq = s;
            }
            sl_log("%s: file shrank while being sent; closing the connection",
                   rq->path ? rq->path : "-");
            /* A cached file's stat is out of date: the next request opens the path again
             * instead of meeting the same end (server.stat-cache-engine "simple" checks it
             * only once a second). */
            if (rq->file_ent) sl_fdc_forget(srv_of(c)->fdc, rq->file_ent);
        } else if (r != -EPIPE && r != -ECONNRESET) {
            sl_log("write to client failed: %s", strerror(-r));
        }
        sl_conn_close(c);
        return -1;
    }
    return r;
}

/* A stream's turn (h2.h): it has no socket; its body reader and its output are the session's. */
static void stream_run(sl_conn *c)
{
    if (c->state == SL_CONN_READ_BODY && c->rd_ready && c->body_armed && c->on_body) {
        c->body_armed = false;
        c->on_body(c, EV_READ);
    } else if (c->state == SL_CONN_WRITE) {
        sl_h2_stream_write(c);
    }
}

static void conn_run(sl_conn *c)
{
    if (c->h2_id) {
        stream_run(c);
        return;
    }
    for (int turn = 0;; turn++) {
        switch (c->state) {
        case SL_CONN_READ_HEAD: {
            if (turn < MAX_PIPELINE_TURN && take_request(c)) continue;
            if (turn >= MAX_PIPELINE_TURN && c->in_len > 0) {
                /* More pipelined requests than one turn answers: come back after others ran. */
                yield(c, EV_READ);
                return;
            }
            int r = conn_read(c);
            if (r < 0) return;
            if (r > 0) continue;
            if (c->in_len > 0 && now_s(c) >= c->deadline) {
                /* A head that trickles in must still be complete by the deadline: bytes
                 * arriving do not extend it (slowloris). */
                sl_conn_timeout(c);
            }
            return;
        }
        case SL_CONN_HANDLE:
            return; /* a module owns the connection */
        case SL_CONN_READ_BODY:
            if ((c->tls ? sl_tls_can_read(c) : c->rd_ready) && c->body_armed && c->on_body) {
                c->body_armed = false;
                c->deadline = 0;
                c->on_body(c, EV_READ);
            }
            return;
        case SL_CONN_H2:
            sl_h2_run(c);
            return;
        case SL_CONN_WRITE: {
            if (sl_conn_write_out(c) != 0) return;
            if (c->streaming) {
                /* The module has more to come: let it refill the queue. */
                c->deadline = 0;
                if (c->on_drain) c->on_drain(c);
                return;
            }
            if (request_finished(c) < 0) return;
            continue;
        }
        case SL_CONN_LINGER: {
            char buf[16384];
            while (c->rd_ready) {
                ssize_t n = sl_conn_recv(c, buf, sizeof buf);
                if (n > 0 && (c->in_len += (size_t)n) < LINGER_BYTES) continue;
                if (n == -EAGAIN || n == -EWOULDBLOCK) return;
                sl_conn_close(c);
                return;
            }
            return;
        }
        }
    }
}

void sl_conn_timeout(sl_conn *c)
{
    switch (c->state) {
    case SL_CONN_READ_HEAD:
        if (c->in_len > 0)
            sl_log("request head not complete after %lds; closing",
                   srv_of(c)->global->max_read_idle);
        sl_conn_close(c);
        return;
    case SL_CONN_READ_BODY:
        c->deadline = 0;
        if (c->body_armed && c->on_body) {
            c->body_armed = false;
            c->on_body(c, EV_TIMEOUT); /* the module answers 408 */
        }
        return;
    case SL_CONN_WRITE:
        if (sl_bw_waiting(c)) { /* not idle: waiting for its bandwidth */
            c->deadline = deadline_in(c, sl_core(c->conf)->max_write_idle);
            return;
        }
        sl_log("client did not read for %lds; closing", sl_core(c->conf)->max_write_idle);
        sl_conn_close(c);
        return;
    case SL_CONN_LINGER:
        sl_conn_close(c);
        return;
    case SL_CONN_HANDLE:
        c->deadline = 0; /* modules keep their own time */
        return;
    case SL_CONN_H2:
        sl_h2_timeout(c);
        return;
    }
}

static void conn_event(evutil_socket_t fd, short what, void *arg)
{
    sl_conn *c = arg;
    if (what & (EV_READ | EV_CLOSED)) c->rd_ready = true;
    if (what & EV_CLOSED) c->rd_eof = true;
    if (what & EV_WRITE) c->wr_ready = true;
    if (c->state == SL_CONN_READ_HEAD && c->in == NULL && c->requests > 0 && c->loop->stopping) {
        sl_conn_close(c);
        return;
    }
    conn_run(c);
}

/* ---- HTTP/2 streams (h2.c) ---- */

void sl_conn_stream_init(sl_conn *s, sl_conn *parent, struct sl_h2 *h2, int32_t id)
{
    sl_loop *loop = parent->loop;
    s->loop = loop;
    s->fd = -1;
    s->listener = parent->listener;
    s->peer = parent->peer;
    s->h2 = h2;
    s->h2_id = id;
    s->h2_tls = parent->tls != NULL;
    s->id = parent->id;
    s->file_fd = -1;
    s->conf = loop->srv->cs->global;
    s->docroot = sl_core(s->conf)->docroot;
    s->nodelay = true;
    sl_xfer_init(&s->xfer, &loop->io, -1, on_xfer, s);
    /* Never added: event_active runs the stream in a later turn (a body reader, yield). */
    event_assign(&s->ev, loop->base, -1, 0, conn_event, s);
    s->state = SL_CONN_READ_HEAD;
    request_start(s);
}

void sl_conn_stream_begin(sl_conn *s, int status)
{
    if (!status) {
        long field_size = srv_of(s)->global->max_request_field_size;
        sl_http_limits lim = {.max_head = (size_t)field_size, .max_line = (size_t)field_size,
                              .max_headers = SL_HTTP_MAX_HEADERS};
        int r = sl_http_parse_request(s->in, s->in_len, &lim, &s->req);
        status = r < 0 ? -r : r == 0 ? 431 : 0;
        if (!status) s->head_len = (size_t)r;
    }
    if (status) {
        parse_error(s, status);
    } else {
        sl_conn_mark(s, &s->t.parsed);
        s->req.version = 20;
        handle_request(s);
    }
    conn_run(s);
}

void sl_conn_stream_release(sl_conn *s)
{
    if (s->closed) return;
    s->closed = true;
    event_del(&s->ev);
    if (s->pending == 0) conn_free(s);
}
