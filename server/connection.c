/* Client connections.
 *
 * One state machine per connection, driven by a single libevent event that is re-armed for
 * reading or writing as the state requires; its timeout is the idle limit of that state. Bytes are
 * read into one buffer sized to the request-head limit; the parser works in place, and pipelined
 * requests simply wait in the buffer until the response before them is sent, which is also the
 * back-pressure: we do not read while we write. Responses are built into an output chunk queue
 * and written until the socket would block. A connection that must close after a response with
 * input possibly still unread shuts its write side and drains input for a moment (lingering
 * close), so the client sees the response instead of a reset.
 */
#include "connection.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "accesslog.h"
#include "log.h"
#include "mod_static.h"
#include "path.h"
#include "server.h"
#include "threadpool.h"
#include "sl_version.h"

#define LINGER_SECONDS 2
#define LINGER_BYTES (256 * 1024)
#define MAX_PIPELINE_TURN 32      /* requests answered back to back before yielding */


static void conn_event(evutil_socket_t fd, short what, void *arg);
static void conn_run(sl_conn *c);
static void timing_start(sl_conn *c);
static void request_start(sl_conn *c);

void sl_conn_arm(sl_conn *c, short what, long secs)
{
    event_del(&c->ev);
    event_assign(&c->ev, c->srv->base, c->fd, what, conn_event, c);
    struct timeval tv = {.tv_sec = secs > 0 ? secs : 0, .tv_usec = secs > 0 ? 0 : 1000};
    event_add(&c->ev, &tv);
}

int sl_conn_new(struct sl_server *srv, int fd, const struct sockaddr *sa, int salen,
                const sl_listen_spec *ls)
{
    sl_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->srv = srv;
    c->fd = fd;
    c->listen = ls;
    c->file_fd = -1;
    c->id = ++srv->conn_seq;
    request_start(c);
    if (srv->timing) timing_start(c);
    if (salen > 0 && (size_t)salen <= sizeof c->peer) memcpy(&c->peer, sa, (size_t)salen);
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    c->state = SL_CONN_READ_HEAD;
    c->deadline = time(NULL) + srv->global.max_read_idle;
    event_assign(&c->ev, srv->base, fd, EV_READ, conn_event, c); /* so conn_arm may event_del */
    /* Try the request now rather than after an epoll round trip (two epoll_ctl and a wakeup per
     * connection); when it has not arrived yet, conn_run arms the read event. */
    conn_event(fd, EV_READ, c);
    return 0;
}

void sl_conn_nodelay(sl_conn *c)
{
    /* Nagle stays on for a connection's first response: its header goes out with MSG_MORE and
     * its body with sendfile(), which then leaves in full segments (with TCP_NODELAY every
     * splice step pushes a segment of its own and wakes the client again; about 8% of the
     * server's CPU on 100 KiB files). A tail that Nagle holds is pushed by the close, or here. */
    if (c->nodelay) return;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->nodelay = true;
}

void sl_conn_mark(sl_conn *c, uint64_t *field)
{
    if (c->srv->timing && !*field) *field = sl_now_ns();
}

static void request_start(sl_conn *c)
{
    if (c->srv->alog_fd <= 0) return; /* only the access log reads these clocks */
    c->req_start = sl_now_ns();
    clock_gettime(CLOCK_REALTIME, &c->req_wall);
}

/* %{Name}i: the field's combined value (RFC 9110 §5.3), its lines joined into one buffer that
 * the renderer copies out before it asks for the next field. */
typedef struct alog_ctx {
    const sl_http_request *req;
    char buf[4096];
} alog_ctx;

static const char *alog_header(void *ud, const char *name, size_t *len)
{
    alog_ctx *a = ud;
    const sl_http_header *h = sl_http_find_header(a->req, name);
    if (!h) return NULL;
    if (!h->next) {
        *len = h->value_len;
        return h->value;
    }
    size_t n = sl_http_field_join(h, strcasecmp(name, "cookie") ? ", " : "; ", a->buf,
                                  sizeof a->buf);
    *len = n < sizeof a->buf ? n : sizeof a->buf;
    return a->buf;
}

/* The access log line of the request that just ended. */
static void alog_emit(sl_conn *c)
{
    char ip[64] = "-";
    if (c->peer.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&c->peer)->sin_addr, ip, sizeof ip);
    else if (c->peer.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&c->peer)->sin6_addr, ip, sizeof ip);
    const char *colon = strrchr(c->listen->canon, ':');
    alog_ctx actx = {.req = &c->req};
    sl_accesslog_rec r = {
        .remote_addr = ip,
        .method = c->req.method_str,
        .method_len = c->req.method_str ? c->req.method_len : 0,
        .target = c->req.target,
        .target_len = c->req.target ? c->req.target_len : 0,
        .path = c->path,
        .query = c->query,
        .protocol = c->req.version == 10 ? "HTTP/1.0" : "HTTP/1.1",
        .host = c->host,
        .server_name = c->host,
        .port = colon ? atoi(colon + 1) : 0,
        .status = c->status,
        .body_bytes = c->bytes_out > c->hdr_bytes ? c->bytes_out - c->hdr_bytes : 0,
        .total_bytes = c->bytes_out,
        .duration_us = (sl_now_ns() - c->req_start) / 1000,
        .keepalive_requests = c->requests,
        .when = c->req_wall,
        .header = alog_header,
        .ud = &actx,
    };
    char buf[8192];
    size_t n = sl_accesslog_render(c->srv->alog_fmt, &r, buf, sizeof buf);
    ssize_t w = write(c->srv->alog_fd, buf, n); /* one write per line: O_APPEND keeps lines whole */
    (void)w;
}

static void timing_start(sl_conn *c)
{
    memset(&c->t, 0, sizeof c->t);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->t.wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    c->t.start = sl_now_ns();
}

/* One JSON line for the request that just ended (sent, failed or aborted). */
static void timing_emit(sl_conn *c, bool closing)
{
    const sl_timing *t = &c->t;
    char buf[4096];
    size_t n = 0;
#define OUT(...)                                                                                  \
    do {                                                                                          \
        int k_ = snprintf(buf + n, sizeof buf - n, __VA_ARGS__);                                  \
        if (k_ > 0) n += (size_t)k_ < sizeof buf - n ? (size_t)k_ : sizeof buf - n - 1;           \
    } while (0)
    OUT("{\"start\":%.6f,\"conn\":%llu,\"req\":%u,\"method\":\"%s\",\"path\":\"", t->wall,
        (unsigned long long)c->id, c->requests + 1, sl_method_name(c->req.method));
    /* JSON-escape the path: it is the client's (decoded) bytes. */
    for (size_t i = 0; c->path && i < c->path_len && n < sizeof buf - 600; i++) {
        unsigned char ch = (unsigned char)c->path[i];
        if (ch == '"' || ch == '\\')
            OUT("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            OUT("\\u%04x", ch);
        else
            buf[n++] = (char)ch;
    }
    OUT("\",\"status\":%d,\"bytes\":%llu,\"backend\":\"%s\",\"us\":{", c->status,
        (unsigned long long)c->bytes_out, c->srv->nb ? c->srv->nb->name : "-");
    const char *names[] = {"accept", "parsed", "stat_queued", "stat_started", "stat_done", "open",
                           "backend_connect", "backend_first_byte", "backend_done", "first_byte",
                           "last_byte"};
    const uint64_t vals[] = {t->start, t->parsed, t->stat_queued, t->stat_started, t->stat_done,
                             t->open, t->backend_connect, t->backend_first_byte, t->backend_done,
                             t->first_byte, t->last_byte};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        if (vals[i] && vals[i] >= t->start)
            OUT("\"%s\":%llu,", names[i], (unsigned long long)((vals[i] - t->start) / 1000));
        else
            OUT("\"%s\":null,", names[i]);
    }
    OUT("\"reads\":[");
    unsigned nr = t->n_reads < SL_TIMING_READS ? t->n_reads : SL_TIMING_READS;
    for (unsigned i = 0; i < nr; i++) {
        uint64_t q = t->reads[i][0] >= t->start ? (t->reads[i][0] - t->start) / 1000 : 0;
        uint64_t st = t->reads[i][1] >= t->start ? (t->reads[i][1] - t->start) / 1000 : q;
        uint64_t d = t->reads[i][2] >= t->start ? (t->reads[i][2] - t->start) / 1000 : st;
        OUT("%s[%llu,%llu,%llu]", i ? "," : "", (unsigned long long)q, (unsigned long long)st,
            (unsigned long long)d);
    }
    uint64_t now = sl_now_ns();
    if (closing)
        OUT("],\"reads_total\":%u,\"close\":%llu}}\n", t->n_reads,
            (unsigned long long)((now - t->start) / 1000));
    else
        OUT("],\"reads_total\":%u,\"close\":null}}\n", t->n_reads);
#undef OUT
    if (n >= sizeof buf - 1) buf[n++ - 1] = '\n';
    /* One write per line (O_APPEND): lines from a busy server never interleave. */
    ssize_t w = write(c->srv->timing_fd, buf, n);
    (void)w;
}

static void request_reset(sl_conn *c)
{
    if (c->status) {
        /* Counted where it is logged: an answer cut short (the connection closed mid-body)
         * is in the access log and the timing trace, so the status page counts it too. */
        sl_server *srv = c->srv;
        srv->requests_total++;
        srv->bytes_total += c->bytes_out;
        if (c->status >= 100 && c->status < 600) srv->responses[c->status / 100]++;
    }
    if (c->srv->timing && c->status) timing_emit(c, c->closed || !c->keep_alive);
    if (c->srv->alog_fd > 0 && c->status) alog_emit(c);
    const sl_server *srv = c->srv;
    for (size_t i = 0; i < srv->n_modules; i++)
        if (srv->modules[i]->request_done) srv->modules[i]->request_done(c);
    sl_chunkq_clear(&c->out);
    sl_fileread_reset(c->srv, &c->rd);
    free(c->path);
    free(c->query);
    c->path = c->query = NULL;
    c->status = c->error = 0;
    c->has_body = false;
    c->bytes_out = 0;
    c->streaming = false;
    c->on_drain = NULL;
    c->on_body = NULL;
    c->mod_ctx = NULL;
    c->hdr_bytes = 0;
    request_start(c);
    if (c->srv->timing) timing_start(c); /* the next request on this connection */
}

static void conn_free(sl_conn *c)
{
    if (c->fd >= 0) close(c->fd);
    request_reset(c);
    free(c->in);
    free(c);
}

void sl_conn_close(sl_conn *c)
{
    if (c->closed) return;
    event_del(&c->ev);
    if (c->pending == 0 || !c->rd.inflight) {
        /* Nothing but a read thread ever uses the socket off the loop. */
        close(c->fd);
        c->fd = -1;
    } else {
        /* A thread may be sending on this socket: the number must not be reused before the
         * job returns. Shutting it down ends the thread's sendfile() and tells the client. */
        shutdown(c->fd, SHUT_RDWR);
    }
    c->closed = true;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    struct sl_server *srv = c->srv;
    srv->n_conns--;
    /* A worker may still be using the request: its done() frees the rest. */
    if (c->pending == 0) conn_free(c);
    sl_server_conn_closed(srv);
}

void sl_conn_release(sl_conn *c)
{
    if (c->closed && c->pending == 0) conn_free(c);
}

void sl_conn_shutdown(sl_conn *c)
{
    /* Idle between requests: nothing is lost by closing now. */
    if (c->state == SL_CONN_READ_HEAD && c->in_len == 0) sl_conn_close(c);
}

/* ---- responses ---- */

const char *sl_status_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
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
    /* Always our own version, 1.1, also to a 1.0 client (RFC 9110 §2.5: the version says what
     * the sender can do, not what the recipient sent). The 1.0 semantics stay with the request:
     * no chunked coding, keep-alive only when asked (sl_resp_end_headers, handle_request). */
    c->status = status;
    sl_chunkq_printf(&c->out, "HTTP/1.1 %d %s\r\n", status, sl_status_reason(status));
}

void sl_resp_header(sl_conn *c, const char *name, const char *value)
{
    sl_chunkq_printf(&c->out, "%s: %s\r\n", name, value);
}

void sl_resp_end_headers(sl_conn *c, uint64_t content_length)
{
    const char *conn = NULL;
    if (!c->keep_alive)
        conn = "close";
    else if (c->req.version == 10)
        conn = "keep-alive";
    if (content_length != UINT64_MAX)
        sl_chunkq_printf(&c->out, "Content-Length: %llu\r\n", (unsigned long long)content_length);
    sl_chunkq_printf(&c->out, "Date: %s\r\nServer: seekless/" SL_VERSION "\r\n%s%s%s\r\n",
                     sl_server_date(c->srv), conn ? "Connection: " : "", conn ? conn : "",
                     conn ? "\r\n" : "");
    c->hdr_bytes = (size_t)sl_chunkq_length(&c->out); /* only the head is queued so far */
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
    char body[256];
    int n = snprintf(body, sizeof body,
                     "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                     "<body><h1>%d %s</h1></body></html>\n",
                     status, sl_status_reason(status), status, sl_status_reason(status));
    sl_resp_begin(c, status);
    if (status == 405) sl_resp_header(c, "Allow", "GET, HEAD");
    sl_resp_header(c, "Content-Type", "text/html");
    sl_resp_end_headers(c, (uint64_t)n);
    if (c->req.method != SL_METHOD_HEAD) sl_chunkq_append_mem(&c->out, body, (size_t)n);
}

/* ---- requests ---- */

static void start_write(sl_conn *c)
{
    c->state = SL_CONN_WRITE;
}

/* A parse error: answer and close. The request struct may be half-filled; reset what the
 * response code looks at. The method is kept when it is HEAD (the parser reports it whenever the
 * method token was read): an answer to HEAD never has a body (RFC 9110 §9.3.2), even an error. */
static void parse_error(sl_conn *c, int status)
{
    if (c->req.method != SL_METHOD_HEAD) c->req.method = SL_METHOD_GET;
    if (c->req.version != 10) c->req.version = 11;
    c->keep_alive = false;
    c->conf = c->srv->global;
    c->has_body = true; /* unread input may follow: linger */
    c->head_len = c->in_len;
    sl_resp_error(c, status);
    start_write(c);
}

/* c->host: the authority of an absolute-form target, else the Host field, normalized so that
 * conditions, the access log and backends see one spelling of each host (sl_host_normalize);
 * "" without either (HTTP/1.0). Every listener speaks http, so ":80" is the default port. An
 * invalid value is refused (400), as lighttpd does. */
static int set_host(sl_conn *c, const char *auth, size_t alen)
{
    const sl_http_header *h = c->req.host;
    c->host[0] = 0;
    if (!alen && !h) return 0;
    ssize_t n = alen ? sl_host_normalize(auth, alen, 80, c->host, sizeof c->host)
                     : sl_host_normalize(h->value, h->value_len, 80, c->host, sizeof c->host);
    return n < 0 ? (int)n : 0;
}

/* A module answered: turn an error into its response and start writing. */
static void handled(sl_conn *c, sl_hresult r)
{
    if (r == SL_ERROR) {
        int status = c->status ? c->status : sl_errno_to_status(c->error);
        if (status >= 500)
            sl_log("%s %s: %s (%d)", sl_method_name(c->req.method), c->path,
                   c->error ? strerror(-c->error) : "error", status);
        sl_resp_error(c, status);
    }
    start_write(c);
}

void sl_conn_handled(sl_conn *c, sl_hresult r)
{
    handled(c, r);
    conn_run(c);
}

void sl_conn_resume(sl_conn *c)
{
    if (c->state == SL_CONN_WRITE) conn_run(c);
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

static void handle_request(sl_conn *c)
{
    sl_http_request *rq = &c->req;
    sl_server *srv = c->srv;
    c->conf = srv->global; /* until the conditions are evaluated */
    c->keep_alive = rq->version == 11 ? !rq->conn_close : (rq->conn_keep_alive && !rq->conn_close);
    c->has_body = rq->content_length > 0 || rq->chunked;
    /* Never parse an unread body as the next request; a module that reads it (proxy_core)
     * restores ka_after_body. */
    c->ka_after_body = c->keep_alive;
    if (c->has_body) c->keep_alive = false;

    const char *p, *q, *auth;
    size_t plen, qlen, alen;
    bool asterisk = rq->target_len == 1 && rq->target[0] == '*';
    if (asterisk || sl_uri_split(rq->target, rq->target_len, &p, &plen, &q, &qlen, &auth, &alen) < 0) {
        /* "*" names no file: only OPTIONS may use it, and we offer no OPTIONS. */
        sl_resp_error(c, asterisk && rq->method == SL_METHOD_OPTIONS ? 405 : 400);
        start_write(c);
        return;
    }
    if (plen == 0) { /* absolute-form without a path ("http://host") means "/" */
        p = "/";
        plen = 1;
    }
    c->path = malloc(plen + 2);
    c->query = malloc(qlen + 1);
    if (!c->path || !c->query) {
        sl_resp_error(c, 503);
        start_write(c);
        return;
    }
    memcpy(c->query, q ? q : "", qlen);
    c->query[qlen] = 0;
    ssize_t n = sl_path_normalize(p, plen, c->path, plen + 2);
    if (n < 0) {
        sl_resp_error(c, sl_errno_to_status((int)n));
        start_write(c);
        return;
    }
    c->path_len = (size_t)n;
    if (set_host(c, auth, alen) < 0) {
        c->host[0] = 0;
        sl_resp_error(c, 400);
        start_write(c);
        return;
    }
    sl_cond_input in = {.socket = c->listen->literal, .url = c->path, .host = c->host,
                        .query = c->query};
    sl_settings_for_request(srv->tree, &srv->global, &in, &c->conf);
    if (c->requests + 1 >= (unsigned long)c->conf.max_keep_alive_requests || srv->stopping)
        c->keep_alive = c->ka_after_body = false;
    if (!expectations_met(rq->expect)) {
        sl_resp_error(c, 417);
        start_write(c);
        return;
    }
    if (rq->content_length > c->conf.max_request_size) {
        sl_resp_error(c, 413);
        start_write(c);
        return;
    }
    c->state = SL_CONN_HANDLE;
    for (size_t i = 0; i < srv->n_modules; i++) {
        const sl_module *m = srv->modules[i];
        sl_hresult r = m->handle_request ? m->handle_request(c) : SL_GO_ON;
        if (r == SL_GO_ON) continue;
        if (r == SL_WAIT) {
            /* The module resumes us; no socket event may run the connection meanwhile (unless
             * the module reads the body and armed the socket itself). */
            if (c->state == SL_CONN_HANDLE) event_del(&c->ev);
            return;
        }
        handled(c, r);
        return;
    }
    sl_resp_error(c, 404);
    start_write(c);
}

/* Try to take one request head out of the input buffer. Returns true when a request was taken
 * (the state moved on), false when more input is needed. */
static bool take_request(sl_conn *c)
{
    if (c->in_len == 0) return false;
    long field_size = c->srv->global.max_request_field_size;
    sl_http_limits lim = {.max_head = (size_t)field_size, .max_line = (size_t)field_size,
                          .max_headers = SL_HTTP_MAX_HEADERS};
    memset(&c->req, 0, sizeof c->req);
    int r = sl_http_parse_request(c->in, c->in_len, &lim, &c->req);
    if (r == 0) return false;
    if (r < 0) {
        parse_error(c, -r);
        return true;
    }
    c->head_len = (size_t)r;
    sl_conn_mark(c, &c->t.parsed);
    handle_request(c);
    return true;
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
    if (!c->keep_alive) {
        if (had_body || c->in_len > 0) {
            /* Input may still be arriving: shut our side and drain before closing, or the
             * kernel answers the unread bytes with a reset that can destroy the response. */
            shutdown(c->fd, SHUT_WR);
            c->state = SL_CONN_LINGER;
            c->in_len = 0;
            sl_conn_arm(c, EV_READ, LINGER_SECONDS);
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
        c->deadline = time(NULL) + c->srv->global.max_read_idle;
        return 0; /* conn_run parses the pipelined request next */
    }
    /* Idle between requests: give the buffer back so 10k idle connections stay cheap. */
    free(c->in);
    c->in = NULL;
    c->in_cap = 0;
    sl_conn_arm(c, EV_READ, c->conf.max_keep_alive_idle);
    return 0;
}

/* Read what the socket has. Returns 1 when bytes arrived, 0 on would-block, -1 when the
 * connection was closed. */
static int conn_read(sl_conn *c)
{
    if (!c->in) {
        c->in_cap = (size_t)c->srv->global.max_request_field_size + 1024;
        c->in = malloc(c->in_cap);
        if (!c->in) {
            sl_conn_close(c);
            return -1;
        }
    }
    if (c->in_len == c->in_cap) return 1; /* full: the parser reports 431/414 */
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n > 0) {
        if (c->in_len == 0 && c->requests > 0) {
            c->deadline = time(NULL) + c->srv->global.max_read_idle; /* a new request starts */
            request_start(c);
            if (c->srv->timing) timing_start(c);
        }
        c->in_len += (size_t)n;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    sl_conn_close(c); /* EOF or reset */
    return -1;
}

static void conn_run(sl_conn *c)
{
    for (int turn = 0;; turn++) {
        switch (c->state) {
        case SL_CONN_READ_HEAD:
            if (turn < MAX_PIPELINE_TURN && take_request(c)) continue;
            if (c->in_len == 0 && c->requests > 0 && c->in == NULL) return; /* idle, armed */
            {
                long left = (long)(c->deadline - time(NULL));
                if (left <= 0 && c->in_len > 0 && turn < MAX_PIPELINE_TURN) {
                    /* A head that trickles in must still be complete by the deadline: bytes
                     * arriving do not extend it (slowloris). */
                    sl_log("request head not complete after %lds; closing",
                           c->srv->global.max_read_idle);
                    sl_conn_close(c);
                    return;
                }
                if (left <= 0) left = 0;
                /* More pipelined requests than one turn answers: come back after others ran. */
                if (turn >= MAX_PIPELINE_TURN && c->in_len > 0)
                    event_active(&c->ev, EV_READ, 0);
                sl_conn_arm(c, EV_READ, left ? left : 1);
            }
            return;
        case SL_CONN_HANDLE:
        case SL_CONN_READ_BODY:
            return; /* an asynchronous module owns the connection */
        case SL_CONN_WRITE: {
            uint64_t before = c->bytes_out;
            int r = sl_netback_write(c);
            if (c->bytes_out > before && !c->t.first_byte) sl_conn_mark(c, &c->t.first_byte);
            if (r == 2) {
                event_del(&c->ev); /* a read is in flight: its completion resumes us */
                return;
            }
            if (r == 1) {
                sl_conn_arm(c, EV_WRITE, c->conf.max_write_idle);
                return;
            }
            if (r < 0) {
                if (r == -ENODATA)
                    sl_log("%s: file shrank while being sent; closing the connection", c->path);
                else if (r != -EPIPE && r != -ECONNRESET)
                    sl_log("write to client failed: %s", strerror(-r));
                sl_conn_close(c);
                return;
            }
            if (c->streaming) {
                /* The module has more to come: let it refill the queue. */
                event_del(&c->ev);
                if (c->on_drain) c->on_drain(c);
                return;
            }
            if (request_finished(c) < 0) return;
            continue;
        }
        case SL_CONN_LINGER:
            return;
        }
    }
}

static void conn_event(evutil_socket_t fd, short what, void *arg)
{
    sl_conn *c = arg;
    if ((what & EV_TIMEOUT) && c->state == SL_CONN_READ_BODY && c->on_body) {
        c->on_body(c, what); /* the module answers 408 */
        return;
    }
    if (what & EV_TIMEOUT) {
        if (c->state == SL_CONN_WRITE)
            sl_log("client did not read for %lds; closing", c->conf.max_write_idle);
        sl_conn_close(c);
        return;
    }
    switch (c->state) {
    case SL_CONN_READ_HEAD:
        if (c->in == NULL && c->requests > 0 && c->srv->stopping) {
            sl_conn_close(c);
            return;
        }
        if (conn_read(c) < 0) return;
        conn_run(c);
        return;
    case SL_CONN_WRITE:
        conn_run(c);
        return;
    case SL_CONN_LINGER: {
        char buf[16384];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0 && (c->in_len += (size_t)n) < LINGER_BYTES) {
            sl_conn_arm(c, EV_READ, LINGER_SECONDS);
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            sl_conn_arm(c, EV_READ, LINGER_SECONDS);
            return;
        }
        sl_conn_close(c);
        return;
    }
    case SL_CONN_READ_BODY:
        if (c->on_body) c->on_body(c, what);
        return;
    case SL_CONN_HANDLE:
        return;
    }
}
