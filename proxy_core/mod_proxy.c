/* proxy-core: requests routed to FastCGI or HTTP backends.
 *
 * The module takes a request when its conditions set proxy-core.backends. A request body is
 * streamed: the request goes to a backend at once and body bytes follow as the client sends
 * them, with back-pressure (the client is not read while BODY_HIGH bytes wait for the backend).
 * The first REPLAY_KEEP bytes of the request stay in memory, so a backend that refuses the
 * connection can still be replaced by another; past that, a backend failure mid-body is a 502.
 * A chunked body goes on chunked to HTTP backends; for FastCGI it is collected first (bounded by
 * server.max-request-size), because CGI applications need CONTENT_LENGTH; nginx does the same.
 * A backend that answers before the body is complete gets no more of it: the client's
 * connection closes after that answer. The gateway layer (gateway.c) picks a
 * backend, hands out a pooled connection or connects a new one, and queues the request when every
 * pool is full. The protocol (proto.h: fastcgi.c, http.c) encodes the request and decodes the
 * answer; this file knows none of them. A response with X-Sendfile (when
 * allowed) becomes a static file response: the path is checked against the allowed roots and
 * opened beneath one of them, and the core sends it through the configured network backend with
 * Range, conditional requests and HEAD applied. Any other response is streamed to the client,
 * with back-pressure: backend reading pauses while the client's queue is full. Failures map to
 * 502 (malformed or truncated answer), 503 (no backend, backlog full), 504 (no answer in time);
 * a backend that closes before its answer's head is complete passes an idempotent request on to
 * another backend of the group first (may_retry_elsewhere). After the response head went out, a
 * failure can only close the client connection.
 * A finished request's state goes on a per-loop list of spares with its small buffers, so the
 * next request through the proxy allocates nothing (the state is larger than malloc's
 * per-thread caches hold, and the response head buffer starts at 1 KiB and grows only for a
 * longer head).
 */
#include "mod_proxy.h"
#include "rewrite.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"
#include "connection.h"
#include "core_conf.h"
#include "gateway.h"
#include "gw_conf.h"
#include "proto.h"
#include "log.h"
#include "loop.h"
#include "mod_static.h"
#include "path.h"
#include "server.h"
#include "spawn.h"
#include "status.h"
#include "tls.h"

#define SL_KEY_CONF sl_proxy_conf

#define PCONF(c) SL_MODCONF((c)->conf, sl_mod_proxy, sl_proxy_conf)

typedef struct proxy_req proxy_req;

/* Finished requests kept for the next ones on this loop, with their buffers: a request then
 * costs no allocation (the state is 4 KiB, larger than malloc's per-thread caches hold). */
#define SPARE_MAX 256

/* What each loop keeps for proxy-core: its gateway (the connections and pools to the back ends),
 * one PCRE2 match block for proxy-core.rewrite-* (made once, not per request) and its spare
 * request states. */
typedef struct proxy_loop {
    sl_gw *gw;
    pcre2_match_data *md;
    proxy_req *spare;          /* a list through proxy_req.next_spare */
    unsigned n_spare;
} proxy_loop;

static proxy_loop *ploop(const sl_conn *c)
{
    return c->loop->mod[sl_mod_proxy.index];
}
#define CORE(c) sl_core((c)->conf)
#define CTX(c) SL_CTX(c, sl_mod_proxy)

#define HEAD_MAX (64 * 1024)         /* a backend's response head */
#define HEAD_FIRST 1024              /* hbuf's first size: most heads fit (it doubles up to
                                      * HEAD_MAX) */
#define KEEP_BUF (16 * 1024)         /* a spare request keeps buffers up to this size */
#define OUT_HIGH (256 * 1024)        /* stop reading the backend above this much queued output */
#define READ_CHUNK (64 * 1024)
#define BODY_HIGH (256 * 1024)       /* stop reading the client's body above this much unsent */
#define REPLAY_KEEP (64 * 1024)      /* request bytes kept for a retry on another backend */

typedef enum { P_BODY, P_WAIT, P_SEND, P_RECV, P_DONE } pstate;

struct proxy_req {
    sl_gw_wait wait;         /* first: wake() finds the request from it */
    proxy_req *next_spare;   /* on proxy_loop.spare */
    sl_conn *c;
    sl_gw_group *grp;
    sl_gw_conn *gc;
    pstate state;
    const sl_proxy_proto *proto;
    /* what serves it: proxy-core.backends, or a fastcgi.server / proxy.server route */
    const sl_proxy_route *route;   /* NULL: proxy-core.backends */
    const char *balancer;
    bool allow_xsendfile;
    const sl_proxy_roots *xsendfile_roots;
    size_t script_len;             /* route: the part of the path that names the script */
    char *cgi;                     /* route: SCRIPT_NAME, SCRIPT_FILENAME, REQUEST_URI */
    char *uri;                     /* route: the target after proxy.header map-urlpath */
    uint64_t tried;          /* backends tried (bit per index) */
    bool retried_reused;
    /* request body */
    bool req_body;           /* the request has one */
    bool stream;             /* the body goes to the backend as it arrives */
    bool body_in_done;       /* stream: every body byte is in out (or was sent) */
    bool body_paused;        /* stream: client reading not armed (BODY_HIGH bytes wait to be
                              * sent, or its event just fired) */
    bool body_stopped;       /* stream: reading ended early (backend answered or failed) */
    bool no_replay;          /* out no longer holds the whole request: no retry elsewhere */
    bool cut_short;          /* the backend took part of the request, then answered or closed */
    long long body_left;     /* stream with Content-Length: bytes still to read from the client */
    char *body;              /* a chunked body for FastCGI, collected */
    size_t body_len, body_cap; /* (body_len also counts a streamed chunked body's bytes) */
    sl_chunked_decoder cin;
    /* request bytes for the backend */
    sl_buf out;
    size_t out_off;
    bool built;              /* out holds the request head */
    sl_proxy_msg msg;        /* what the protocol encodes (set by build) */
    char remote[64], server_addr[64], server_port[8];
    /* response */
    _Alignas(max_align_t) unsigned char dec[SL_PROXY_STATE_MAX]; /* the protocol's decoder */
    char *hbuf;              /* head bytes collected (HTTP: raw; FastCGI: STDOUT) */
    size_t hlen, hcap;
    sl_upstream_head head;
    bool head_done;          /* parsed and acted on */
    bool sent_head;          /* the client has our response head */
    bool got_byte;           /* the backend answered something */
    bool xsendfile;          /* serving a file instead of the backend's body */
    bool backend_done;       /* the backend's answer is complete */
    bool keep_backend;       /* the connection may go back to the pool */
    sl_body_framing framing;
    uint64_t left;           /* SL_BODY_LENGTH: bytes still to come */
    sl_chunked_decoder cout;
    bool chunk_to_client;
    bool paused;
    bool connecting;         /* connect() in progress: no byte of the request sent yet */
    bool in_handle;          /* attempt() runs inside the handle hook: failures are returned */
    bool handle_failed;
    bool busy;               /* inside gc_event: request_done must not free us */
    bool orphan;             /* the client side ended while busy: free on the way out */
    struct event kick;       /* starts the first attempt outside the handle hook */
};

static void attempt(proxy_req *pr);
static void stop_body(proxy_req *pr);
static void gc_event(evutil_socket_t fd, short what, void *arg);
static void kick(evutil_socket_t fd, short what, void *arg);

/* ---- X-Sendfile path check (the synchronous core) ---- */

int sl_xsendfile_locate(const char *value, size_t len, const char *const *roots, size_t n_roots,
                        char *out, size_t outcap, const char **rel)
{
    if (len == 0 || value[0] != '/') return -EACCES; /* relative paths are never allowed */
    ssize_t n = sl_path_normalize(value, len, out, outcap);
    if (n < 0) return (int)n;
    for (size_t i = 0; i < n_roots; i++) {
        size_t rl = strlen(roots[i]);
        if (rl == 1 && roots[i][0] == '/') rl = 0; /* "/" as a root: everything */
        if ((size_t)n > rl + 1 && !strncmp(out, roots[i], rl) && out[rl] == '/') {
            *rel = out + rl + 1;
            return (int)i;
        }
    }
    return -EACCES;
}

/* ---- helpers ---- */

/* Requests per backend connection (FastCGI with FCGI_KEEP_CONN). libfcgi applications park a
 * worker on every kept connection; the gateway notices a pool larger than the workers and stops
 * keeping connections rather than leave a request unread (sl_gw_release). */
static long keepalive_max(const proxy_req *pr)
{
    long v = PCONF(pr->c)->max_keep_alive_requests;
    return v >= 0 ? v : 1000;
}

static time_t now_s(void)
{
    return time(NULL);
}

static void addr_str(const struct sockaddr_storage *ss, char *ip, size_t iplen, int *port)
{
    sl_addr_str((const struct sockaddr *)ss, ip, iplen, port);
}

static bool hdr_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && !strncasecmp(name, want, len);
}

/* The request is over for the backend side: release or close the connection. */
static void drop_backend(proxy_req *pr, bool reusable)
{
    if (!pr->gc) return;
    if (reusable && pr->keep_backend)
        sl_gw_release(pr->gc, (unsigned)PCONF(pr->c)->max_pool_size, pr->proto->holds_worker,
                      sl_gw_now_ms());
    else
        sl_gw_close(pr->gc);
    pr->gc = NULL;
}

/* Fail before any response byte reached the client. */
static void fail(proxy_req *pr, int status, const char *why)
{
    sl_conn *c = pr->c;
    sl_log("proxy-core: %s %s: %s -> %d", sl_method_name(c->req.method), c->path, why, status);
    stop_body(pr);
    drop_backend(pr, false);
    sl_gw_wait_remove(pr->grp, &pr->wait);
    pr->state = P_DONE;
    c->streaming = false;
    if (pr->in_handle) {
        /* Still inside the handle hook: let the core answer with the status it returns. */
        c->status = status;
        pr->handle_failed = true;
        return;
    }
    if (pr->sent_head) {
        /* The client has a head already: only closing tells it the body is incomplete. */
        sl_conn_close(c);
        return;
    }
    sl_resp_error(c, status);
    sl_conn_handled(c, SL_FINISHED);
}

/* ---- building the backend request ---- */

/* CONTENT_LENGTH / Content-Length towards the backend. */
static long long body_length(const proxy_req *pr)
{
    return pr->stream ? pr->c->req.content_length : (long long)pr->body_len;
}

/* lighttpd's CGI variables for a fastcgi.server / proxy.server route: the document root of the
 * route, SCRIPT_NAME and PATH_INFO split for a prefix, SCRIPT_FILENAME under the root (with
 * PATH_INFO for PHP's broken-scriptfilename), REQUEST_URI without strip-request-uri. */
static int route_vars(proxy_req *pr)
{
    const sl_proxy_route *rt = pr->route;
    sl_conn *c = pr->c;
    sl_proxy_msg *m = &pr->msg;
    if (rt->docroot) m->docroot = rt->docroot;
    if (m->body_length < 0 && rt->always_length) m->body_length = 0;
    size_t sl = pr->script_len;
    const char *pi = sl_gw_conf_split(rt, c->path, c->path_len, &sl);
    const sl_http_request *rq = &c->req;
    size_t pil = strlen(pi), dl = strlen(m->docroot);
    size_t cap = sl + 1 + dl + sl + pil + 1 + rq->target_len + 2;
    char *b = pr->cgi = malloc(cap);
    if (!b) return -ENOMEM;
    memcpy(b, c->path, sl);
    b[sl] = 0;
    m->script_name = b;
    m->path_info = pi;
    char *f = b + sl + 1;
    /* Built from c->path, not from the copy above: one buffer, no overlapping copies. */
    snprintf(f, cap - (size_t)(f - b), "%s%.*s%s", m->docroot, (int)sl, c->path,
             rt->broken_scriptfilename ? pi : "");
    m->script_filename = f;
    const char *strip = rt->strip_request_uri;
    size_t stl = strip ? strlen(strip) : 0;
    if (stl && rq->target_len >= stl && !memcmp(rq->target, strip, stl)) {
        /* The prefix goes, the slash that starts what is left stays. */
        char *u = f + strlen(f) + 1;
        size_t keep = stl && strip[stl - 1] == '/' ? stl - 1 : stl;
        const char *rest = rq->target + keep;
        size_t rl = rq->target_len - keep;
        snprintf(u, cap - (size_t)(u - b), "%s%.*s", rl && rest[0] == '/' ? "" : "/", (int)rl, rest);
        m->request_uri = u;
    }
    const sl_proxy_header *ph = PCONF(c)->proxy_header;
    if (ph && rt->proto == &sl_proxy_http) {
        /* proxy.header map-urlpath: a path prefix replaced; map-host-request: the Host. */
        size_t k;
        /* The target after rewrites, as lighttpd maps it. */
        const char *to = sl_gw_conf_map(&ph->map_urlpath, c->target, c->target_len, &k);
        if (to && (pr->uri = malloc(strlen(to) + c->target_len - k + 1)))
            sprintf(pr->uri, "%s%.*s", to, (int)(c->target_len - k), c->target + k);
        if (to && !pr->uri) return -ENOMEM;
        if (to) m->request_uri = pr->uri;
        const sl_kvlist *hm = &ph->map_host_request;
        for (size_t i = 0; i < hm->n && !m->host_header; i++)
            if (!strcmp(hm->k[i], c->host) || !strcmp(hm->k[i], "-")) m->host_header = hm->v[i];
    }
    return 0;
}

/* The request as the protocol sees it; then its head into out, and the whole request when the
 * body is not streamed (none, or collected). */
static int build(proxy_req *pr)
{
    sl_conn *c = pr->c;
    const sl_http_request *rq = &c->req;
    sl_proxy_msg *m = &pr->msg;
    memset(m, 0, sizeof *m);
    m->rq = rq;
    m->docroot = c->docroot->path;
    m->path = c->path;
    m->query = c->query;
    if (c->target != rq->target) {
        m->target = c->target;
        m->target_len = c->target_len;
    }
    m->edits = c->edits;
    m->remote_user = c->remote_user;
    m->auth_type = c->auth_type;
    m->tls_env = sl_tls_client_env(c);
    m->host = c->host;
    /* lighttpd's SERVER_NAME: server.name when set (whatever the Host), else the host. */
    m->server_name = sl_core(c->conf)->server_name ? sl_core(c->conf)->server_name : c->host;
    /* Serving server.error-handler(-404): the script learns which error, as lighttpd tells it. */
    m->redirect_status = c->eh_status ? abs(c->eh_status) : 200;
    addr_str(&c->peer, pr->remote, sizeof pr->remote, &m->remote_port);
    m->remote_addr = pr->remote;
    m->scheme = c->scheme;
    m->forwarded = PCONF(c)->forwarded ? *PCONF(c)->forwarded : 0;
    /* The listener's canonical "ip:port" says where the request came in, unless it listens on
     * a wildcard address. */
    const char *canon = c->loop->srv->cs->listen[c->listener].canon;
    const char *colon = strrchr(canon, ':');
    bool wild = !strncmp(canon, "0.0.0.0:", 8) || !strncmp(canon, "[::]:", 5);
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    size_t pl = colon ? strlen(colon + 1) : 0;
    if (colon && !wild && (size_t)(colon - canon) < sizeof pr->server_addr &&
        pl < sizeof pr->server_port) {
        /* Copied, not printed: this runs for every request. */
        bool v6 = canon[0] == '[';
        size_t al = (size_t)(colon - canon) - (v6 ? 2 : 0);
        memcpy(pr->server_addr, canon + v6, al);
        pr->server_addr[al] = 0;
        memcpy(pr->server_port, colon + 1, pl + 1);
        m->server_addr = pr->server_addr;
    } else if (getsockname(c->fd, (struct sockaddr *)&me, &ml) == 0) {
        int port;
        addr_str(&me, pr->server_addr, sizeof pr->server_addr, &port);
        snprintf(pr->server_port, sizeof pr->server_port, "%d", port);
        m->server_addr = pr->server_addr;
    }
    m->server_port = pr->server_port;
    m->body_length = pr->req_body || rq->content_length >= 0 ? body_length(pr) : -1;
    m->body_chunked = pr->stream && rq->chunked;
    m->keep = keepalive_max(pr) > 1;
    if (pr->route && route_vars(pr) < 0) return -ENOMEM;
    if (sl_proxy_rewrite_request(PCONF(c)->rewrite_request, c, m, ploop(c)->md) < 0)
        return -ENOMEM;
    int r = pr->proto->encode_head(m, &pr->out);
    if (pr->stream) return r; /* the body follows as it arrives (stream_put) */
    if (!r) r = pr->proto->encode_body(m, &pr->out, pr->body, pr->body_len);
    if (!r) r = pr->proto->encode_end(m, &pr->out);
    return r;
}

/* ---- a chunked request body for FastCGI, collected before the request goes out ---- */

static int body_put(proxy_req *pr, const char *p, size_t n)
{
    if ((long long)(pr->body_len + n) > CORE(pr->c)->max_request_size * 1024LL) return -E2BIG;
    if (pr->body_len + n > pr->body_cap) {
        size_t nc = pr->body_cap ? pr->body_cap : 16384;
        while (nc < pr->body_len + n) nc *= 2;
        char *nb = realloc(pr->body, nc);
        if (!nb) return -ENOMEM;
        pr->body = nb;
        pr->body_cap = nc;
    }
    memcpy(pr->body + pr->body_len, p, n);
    pr->body_len += n;
    return 0;
}

/* Feed chunked body bytes; returns how many belong to the body (<= n), with *done set at its
 * end, or an error. */
static long body_feed(proxy_req *pr, const char *p, size_t n, bool *done)
{
    size_t used = 0;
    while (used < n) {
        size_t k;
        const char *d;
        size_t dl;
        int r = sl_chunked_decode(&pr->cin, p + used, n - used, &k, &d, &dl);
        if (r < 0) return r;
        used += k;
        if (r == SL_CHUNKED_DATA && (r = body_put(pr, d, dl)) < 0) return r;
        if (sl_chunked_done(&pr->cin)) {
            *done = true;
            return (long)used;
        }
    }
    *done = false;
    return (long)used;
}

static void client_body_done(proxy_req *pr);

static void body_complete(proxy_req *pr)
{
    client_body_done(pr);
    static const struct timeval zero = {0, 0};
    evtimer_add(&pr->kick, &zero);
}

static void body_error(proxy_req *pr, long err)
{
    sl_conn *c = pr->c;
    c->state = SL_CONN_HANDLE;
    c->on_body = NULL;
    c->keep_alive = false;
    c->has_body = true; /* unread input may follow: linger */
    pr->state = P_DONE;
    pr->body_stopped = true;
    /* A streamed body may have a backend (or a place in the backlog) already. */
    drop_backend(pr, false);
    sl_gw_wait_remove(pr->grp, &pr->wait);
    int st = err == -E2BIG ? 413 : err == -ETIMEDOUT ? 408 : err == -ENOMEM ? 503 : 400;
    sl_log("proxy-core: %s: request body: %s", c->path, st == 413 ? "too large" :
           st == 408 ? "client too slow" : st == 503 ? "out of memory" : "malformed chunked body");
    sl_resp_error(c, st);
    sl_conn_handled(c, SL_FINISHED);
}

/* ---- the streamed request body ---- */

static size_t unsent(const proxy_req *pr)
{
    return pr->out.len - pr->out_off;
}

/* Body bytes for the backend, framed as its protocol wants; the end of the body ends FastCGI's
 * stdin stream. */
static int stream_put(proxy_req *pr, const char *p, size_t n)
{
    int r = pr->proto->encode_body(&pr->msg, &pr->out, p, n);
    if (r < 0) return r;
    pr->body_left -= (long long)n;
    if (pr->body_left == 0) {
        if ((r = pr->proto->encode_end(&pr->msg, &pr->out)) < 0) return r;
        pr->body_in_done = true;
    }
    return 0;
}

/* Client bytes for a streamed body: how many belong to it (<= n; a chunked body may be followed
 * by the next request), or an error (-E2BIG over server.max-request-size, -EBADMSG and the like
 * for a malformed chunked body, -ENOMEM). A chunked body goes on chunked (only to protocols
 * that do not collect it, see proto.h). */
static long stream_feed(proxy_req *pr, const char *p, size_t n)
{
    if (!pr->c->req.chunked) {
        size_t take = (long long)n < pr->body_left ? n : (size_t)pr->body_left;
        int r = stream_put(pr, p, take);
        return r < 0 ? r : (long)take;
    }
    size_t used = 0;
    while (used < n && !pr->body_in_done) {
        size_t k, dl;
        const char *d;
        int r = sl_chunked_decode(&pr->cin, p + used, n - used, &k, &d, &dl);
        if (r < 0) return r;
        used += k;
        if (r == SL_CHUNKED_DATA) {
            pr->body_len += dl;
            if ((long long)pr->body_len > CORE(pr->c)->max_request_size * 1024LL) return -E2BIG;
            int e = pr->proto->encode_body(&pr->msg, &pr->out, d, dl);
            if (e < 0) return e;
        }
        if (sl_chunked_done(&pr->cin)) {
            int e = pr->proto->encode_end(&pr->msg, &pr->out);
            if (e < 0) return e;
            pr->body_in_done = true;
        }
        if (r == SL_CHUNKED_NEED) break;
    }
    return (long)used;
}

/* The client has sent the whole body: its socket goes back to the core, for the response. */
static void client_body_done(proxy_req *pr)
{
    sl_conn *c = pr->c;
    c->on_body = NULL;
    c->state = SL_CONN_HANDLE;
    sl_conn_pause_body(c);
    c->has_body = false;
    pr->body_paused = false;
}

/* Read the client's body only while little waits for the backend: the client's own socket
 * buffers then hold the rest, and memory stays bounded whatever the body's size. */
static void stream_flow(proxy_req *pr)
{
    sl_conn *c = pr->c;
    if (c->on_body == NULL || pr->body_in_done) return;
    if (unsent(pr) >= BODY_HIGH) {
        if (!pr->body_paused) sl_conn_pause_body(c);
        pr->body_paused = true;
    } else if (pr->body_paused) {
        pr->body_paused = false;
        sl_conn_want_body(c, CORE(c)->max_read_idle);
    }
}

/* Body reading ends before the body did (the backend answered early, or failed): the rest of
 * it is never read, so the client connection closes after the answer. */
static void stop_body(proxy_req *pr)
{
    sl_conn *c = pr->c;
    if (!pr->stream || pr->body_in_done || pr->body_stopped) return;
    pr->body_stopped = true;
    pr->keep_backend = false; /* the backend saw half a request */
    if (c->on_body) {
        c->on_body = NULL;
        c->state = SL_CONN_HANDLE;
        sl_conn_pause_body(c);
    }
    c->keep_alive = false;
    c->has_body = true; /* unread input may follow: linger */
}

/* Sent bytes are dropped once they pass REPLAY_KEEP; from then on the request cannot be sent
 * to another backend. */
static void stream_compact(proxy_req *pr)
{
    if (!pr->stream || pr->out_off <= REPLAY_KEEP) return;
    memmove(pr->out.p, pr->out.p + pr->out_off, unsent(pr));
    pr->out.len -= pr->out_off;
    pr->out_off = 0;
    pr->no_replay = true;
}

static void stream_event(sl_conn *c, short what)
{
    proxy_req *pr = CTX(c);
    pr->body_paused = true; /* the call was the one asked for: ask again for more */
    if (what & EV_TIMEOUT) {
        body_error(pr, -ETIMEDOUT);
        return;
    }
    char buf[READ_CHUNK];
    size_t want = sizeof buf;
    if (BODY_HIGH - unsent(pr) < want) want = BODY_HIGH - unsent(pr);
    if (!c->req.chunked && pr->body_left < (long long)want)
        want = (size_t)pr->body_left; /* never read the next request */
    ssize_t n = sl_conn_recv(c, buf, want);
    if (n == 0 || (n < 0 && n != -EAGAIN)) {
        sl_log("proxy-core: %s: the client closed before sending all of the body", c->path);
        sl_conn_close(c);
        return;
    }
    if (n > 0) {
        long used = stream_feed(pr, buf, (size_t)n);
        if (used < 0) {
            body_error(pr, used);
            return;
        }
        /* Bytes after a chunked body came with it: they cannot be put back, so this connection
         * ends after the response. */
        if ((size_t)used < (size_t)n) c->keep_alive = false;
    }
    if (pr->body_in_done) client_body_done(pr);
    if (pr->gc && pr->state == P_SEND && !pr->connecting) {
        /* Send now; the send path decides whether to read on (stream_flow). c may be gone
         * after this call. */
        gc_event(pr->gc->fd, EV_WRITE, pr);
        return;
    }
    /* No connection yet (waiting for one, or connecting): read on while there is room. */
    stream_flow(pr);
}

static void body_event(sl_conn *c, short what)
{
    proxy_req *pr = CTX(c);
    if (what & EV_TIMEOUT) {
        body_error(pr, -ETIMEDOUT);
        return;
    }
    char buf[READ_CHUNK];
    ssize_t n = sl_conn_recv(c, buf, sizeof buf);
    if (n == 0 || (n < 0 && n != -EAGAIN)) {
        sl_conn_close(c); /* the client went away mid-body */
        return;
    }
    if (n > 0) {
        bool done = false;
        long used = body_feed(pr, buf, (size_t)n, &done);
        if (used < 0) {
            body_error(pr, used);
            return;
        }
        if (done) {
            /* Bytes after a chunked body were read along with it: they cannot be put back, so
             * this connection ends after the response. */
            if ((size_t)used < (size_t)n) c->keep_alive = false;
            body_complete(pr);
            return;
        }
    }
    sl_conn_want_body(c, CORE(c)->max_read_idle);
}

/* ---- talking to the backend ---- */

/* Wait for the backend socket; secs < 0: no timeout (the client's body is awaited, under the
 * client's own timeout). */
static void arm_gc(proxy_req *pr, short what, long secs)
{
    sl_gw_watch(pr->gc, what, secs, gc_event, pr);
}

static void wake(sl_gw_wait *w)
{
    attempt((proxy_req *)((char *)w - offsetof(proxy_req, wait)));
}

/* be's bit in pr->tried (backends past the 64th have none: they may be tried again). */
static uint64_t backend_bit(const proxy_req *pr, const sl_gw_backend *be)
{
    size_t idx = (size_t)(be - pr->grp->b);
    return idx < 64 ? 1ull << idx : 0;
}

/* Leave be (its connection closed) and start the request again on a backend not yet tried. */
static void try_another(proxy_req *pr, sl_gw_backend *be)
{
    drop_backend(pr, false);
    pr->tried |= backend_bit(pr, be);
    attempt(pr);
}

/* The backend failed before answering: disable it (when it is its fault) and try another. */
static void backend_failed(proxy_req *pr, sl_gw_backend *be, int err, bool disable)
{
    sl_conn *c = pr->c;
    sl_log("proxy-core: backend %s: %s", be->name, strerror(-err));
    if (disable) sl_gw_disable(be, PCONF(c)->disable_time, now_s());
    try_another(pr, be);
}

/* A request a backend dropped unanswered may go to another one: its method is idempotent
 * (RFC 9110 §9.2.2: sending it twice has the effect of sending it once), out still holds all of
 * it, and a backend it has not tried is enabled. */
static bool may_retry_elsewhere(const proxy_req *pr, const sl_gw_backend *be)
{
    switch (pr->c->req.method) {
    case SL_METHOD_GET: case SL_METHOD_HEAD: case SL_METHOD_PUT: case SL_METHOD_DELETE:
    case SL_METHOD_OPTIONS: case SL_METHOD_TRACE:
        break;
    default:
        return false;
    }
    if (pr->no_replay || pr->cut_short) return false;
    return sl_gw_any_usable(pr->grp, now_s(), pr->tried | backend_bit(pr, be));
}

static void begin_send(proxy_req *pr)
{
    if (!pr->built && build(pr) < 0) {
        fail(pr, 500, "cannot build the backend request");
        return;
    }
    pr->built = true;
    pr->state = P_SEND;
    pr->out_off = 0;
    sl_conn_mark(pr->c, &pr->c->t.backend_connect);
    pr->gc->requests++;
    pr->keep_backend = (long)pr->gc->requests < keepalive_max(pr);
    pr->proto->decode_init(pr->dec);
    pr->hlen = 0;
    gc_event(pr->gc->fd, EV_WRITE, pr);
}

static void attempt(proxy_req *pr)
{
    sl_conn *c = pr->c;
    const sl_proxy_conf *s = PCONF(c);
    if (pr->no_replay || pr->cut_short) {
        fail(pr, 502, "backend failed while the request body was streamed to it");
        return;
    }
    pr->state = P_WAIT;
    sl_gw_backend *be = sl_gw_pick(pr->grp, pr->balancer, c->path, c->path_len, now_s(),
                                   pr->tried);
    if (!be) {
        fail(pr, 503, "no backend available");
        return;
    }
    sl_gw_conn *gc = sl_gw_take_idle(be);
    if (!gc) {
        if (!sl_gw_reserve(be, s->max_pool_size, sl_gw_now_ms())) {
            pr->wait.wake = wake;
            if (sl_gw_wait_add(pr->grp, &pr->wait, (size_t)s->max_backlog_size) < 0)
                fail(pr, 503, "backlog full");
            return;
        }
        bool inprog;
        int err;
        gc = sl_gw_connect(be, pr->proto->holds_worker, &inprog, &err);
        if (!gc) {
            bool theirs = err == -ECONNREFUSED || err == -ENOENT || err == -EAGAIN ||
                          err == -ECONNRESET || err == -EHOSTUNREACH || err == -ENETUNREACH;
            backend_failed(pr, be, err, theirs);
            return;
        }
        pr->gc = gc;
        /* Still connecting (TCP): send at once anyway. Over loopback the handshake is
         * usually done already; otherwise the send would block and we wait for writability
         * under the connect timeout. This saves a loop turn and two epoll_ctl per request. */
        pr->connecting = inprog;
    } else {
        pr->gc = gc;
    }
    begin_send(pr);
}

/* Queue body bytes for the client, chunk-framed when we chose chunked. */
static int emit(proxy_req *pr, const char *d, size_t n)
{
    sl_conn *c = pr->c;
    if (n == 0 || c->req.method == SL_METHOD_HEAD || pr->xsendfile) return 0;
    if (pr->framing == SL_BODY_LENGTH) {
        if (n > pr->left) return -EPROTO; /* more than announced */
        pr->left -= n;
    }
    int r = 0;
    if (pr->chunk_to_client) r = sl_chunkq_printf(&c->out, "%zx\r\n", n);
    if (!r) r = sl_chunkq_append_mem(&c->out, d, n);
    if (!r && pr->chunk_to_client) r = sl_chunkq_append_mem(&c->out, "\r\n", 2);
    return r;
}

static const char *const hop_extra[] = {"Date", "Server", "Content-Length", "X-Sendfile",
                                        "X-LIGHTTPD-send-file", "Status", NULL};

static void serve_file(proxy_req *pr, const sl_upstream_field *xf)
{
    sl_conn *c = pr->c;
    pr->xsendfile = true;
    const sl_dir *docroot = c->docroot;
    const char *def[1] = {docroot->path};
    const int deffd[1] = {docroot->fd};
    const sl_proxy_roots *xr = pr->xsendfile_roots;
    const char *const *roots = xr ? xr->path : def;
    const int *fds = xr ? xr->fd : deffd;
    size_t nroots = xr ? xr->n : 1;
    char path[4096];
    const char *rel;
    int i = sl_xsendfile_locate(xf->value, xf->value_len, roots, nroots, path, sizeof path, &rel);
    sl_static_result r;
    if (i < 0) {
        sl_log("proxy-core: X-Sendfile \"%.*s\" refused: %s", (int)(xf->value_len > 300 ? 300 : xf->value_len),
               xf->value, i == -EACCES ? "outside the allowed roots" : "not a usable path");
        memset(&r, 0, sizeof r);
        r.err = i;
        r.status = sl_static_backend_status(sl_errno_to_status(i));
        r.fd = -1;
        sl_hresult h = sl_static_respond(c, &r);
        pr->sent_head = true;
        sl_conn_handled(c, h);
        return;
    }
    /* Served like a static file under that root: opened beneath it (no symlink or race leads
     * out), answered at once from the caches (the accelerator that sent the header has just
     * looked the file up) or through the ring or a stat thread, never blocking the loop. */
    pr->sent_head = true;
    sl_hresult h = sl_static_serve(c, fds[i], roots[i], rel - 1, strlen(rel - 1),
                                   SL_RESOLVE_FILE_ONLY | SL_RESOLVE_FROM_BACKEND);
    if (h != SL_WAIT) sl_conn_handled(c, h);
}

/* A complete head: answer the client from it. Returns 0, or -EPROTO for a bad answer. */
static int act_on_head(proxy_req *pr)
{
    sl_conn *c = pr->c;
    sl_upstream_head *h = &pr->head;
    bool head_req = c->req.method == SL_METHOD_HEAD;
    pr->head_done = true;
    const sl_upstream_field *xf = NULL;
    for (size_t i = 0; i < h->n_fields; i++) {
        const sl_upstream_field *f = &h->fields[i];
        if (hdr_is(f->name, f->name_len, "X-Sendfile") ||
            hdr_is(f->name, f->name_len, "X-LIGHTTPD-send-file"))
            xf = f;
    }
    if (xf && pr->allow_xsendfile) {
        serve_file(pr, xf);
        return 0;
    }
    if (xf) sl_log("proxy-core: %s: X-Sendfile from the backend ignored (not allowed)", c->path);
    pr->framing = pr->proto->framing(h, head_req, &pr->keep_backend);
    pr->left = h->content_length >= 0 ? (uint64_t)h->content_length : 0;
    /* An HTTP answer to HEAD, a 1xx/204/304 or a Content-Length of 0 ends with its head: no
     * body byte will come to mark the end, and the backend's close after it is no truncation.
     * (FastCGI answers end with END_REQUEST instead.) */
    if (pr->proto->ends_with_body && (pr->framing == SL_BODY_NONE || (pr->framing == SL_BODY_LENGTH && !pr->left)))
        pr->backend_done = true;
    if (pr->framing == SL_BODY_CHUNKED) sl_chunked_init(&pr->cout, 16384);
    sl_resp_begin(c, h->status);
    for (size_t i = 0; i < h->n_fields; i++) {
        const sl_upstream_field *f = &h->fields[i];
        bool skip = pr->proto->hop(h, f);
        for (size_t k = 0; !skip && hop_extra[k]; k++) skip = hdr_is(f->name, f->name_len, hop_extra[k]);
        if (skip) continue;
        /* The fields point into hbuf, which lives until the request ends; a rewritten value
         * into request memory. */
        size_t vl;
        const char *v = sl_proxy_rewrite_response(PCONF(c)->rewrite_response, c, ploop(c)->md,
                                                  f->name, f->name_len, f->value, f->value_len,
                                                  &vl);
        if (v)
            sl_resp_header_static(c, f->name, f->name_len, v, vl);
        else
            sl_resp_header_static(c, f->name, f->name_len, f->value, f->value_len);
    }
    uint64_t cl = UINT64_MAX;
    bool no_body = h->status == 204 || h->status == 304 || (h->status >= 100 && h->status < 200);
    if (h->content_length >= 0 && !no_body) {
        cl = (uint64_t)h->content_length;
    } else if (!head_req && !no_body) {
        if (c->req.version == 11) {
            sl_resp_header(c, "Transfer-Encoding", "chunked");
            pr->chunk_to_client = true;
        } else {
            c->keep_alive = false; /* HTTP/1.0: the end of the body is the close */
        }
    }
    sl_resp_end_headers(c, cl);
    pr->sent_head = true;
    c->streaming = true;
    sl_conn_nodelay(c); /* body pieces come as the backend sends them */
    sl_conn_handled(c, SL_FINISHED);
    return 0;
}

/* Response body bytes from the backend (after the head). */
static int body_bytes(proxy_req *pr, const char *d, size_t n)
{
    if (pr->framing == SL_BODY_NONE) return n ? -EPROTO : 0;
    if (pr->framing != SL_BODY_CHUNKED) {
        int r = emit(pr, d, n);
        if (r < 0) return r;
        if (pr->framing == SL_BODY_LENGTH && pr->left == 0 && pr->proto->ends_with_body)
            pr->backend_done = true;
        return 0;
    }
    while (n > 0) {
        size_t k;
        const char *s;
        size_t sl;
        int r = sl_chunked_decode(&pr->cout, d, n, &k, &s, &sl);
        if (r < 0) return r;
        if (r == SL_CHUNKED_DATA && (r = emit(pr, s, sl)) < 0) return r;
        d += k;
        n -= k;
        if (sl_chunked_done(&pr->cout)) {
            pr->backend_done = true;
            return n ? -EPROTO : 0;
        }
        if (r == SL_CHUNKED_NEED) break;
    }
    return 0;
}

/* Response bytes: the head until it is complete, then body bytes. */
static int stdout_bytes(proxy_req *pr, const char *d, size_t n)
{
    if (pr->head_done) return body_bytes(pr, d, n);
    if (pr->hlen + n > HEAD_MAX) return -E2BIG;
    if (pr->hlen + n > pr->hcap) {
        /* The parser keeps no pointer between calls: the bytes may move until the head is
         * complete. */
        size_t cap = pr->hcap ? pr->hcap : HEAD_FIRST;
        while (cap < pr->hlen + n) cap *= 2;
        if (cap > HEAD_MAX) cap = HEAD_MAX;
        char *nb = realloc(pr->hbuf, cap);
        if (!nb) return -ENOMEM;
        pr->hbuf = nb;
        pr->hcap = cap;
    }
    memcpy(pr->hbuf + pr->hlen, d, n);
    pr->hlen += n;
    sl_upstream_limits lim = {HEAD_MAX, SL_UPSTREAM_MAX_HEADERS};
    int r = pr->proto->parse_head(pr->hbuf, &pr->hlen, &lim, &pr->head);
    if (r <= 0) return r;
    size_t rest = pr->hlen - (size_t)r;
    /* The head's fields point into hbuf: keep it; body bytes after it go on now. */
    int e = act_on_head(pr);
    if (e < 0) return e;
    if (pr->orphan || pr->state == P_DONE || pr->xsendfile) return 0;
    if (rest) return body_bytes(pr, pr->hbuf + r, rest);
    return 0;
}

/* The backend's answer is complete. */
static void finish(proxy_req *pr)
{
    sl_conn *c = pr->c;
    pr->state = P_DONE;
    sl_conn_mark(c, &c->t.backend_done);
    drop_backend(pr, pr->backend_done);
    if (pr->xsendfile) return; /* the file response runs on its own */
    if (pr->framing == SL_BODY_LENGTH && pr->left) {
        sl_log("proxy-core: %s: backend answer shorter than its Content-Length", c->path);
        sl_conn_close(c);
        return;
    }
    if (pr->chunk_to_client) sl_chunkq_append_mem(&c->out, "0\r\n\r\n", 5);
    c->streaming = false;
    sl_conn_resume(c);
}

/* Bytes from the backend. Returns 0, or a negative errno for a malformed answer. */
static int recv_bytes(proxy_req *pr, const char *d, size_t n)
{
    while (n > 0) {
        size_t k;
        sl_proxy_piece p;
        int t = pr->proto->decode(pr->dec, d, n, &k, &p);
        if (t < 0) return t;
        d += k;
        n -= k;
        if (t == SL_PP_DATA && !pr->xsendfile) {
            int r = stdout_bytes(pr, p.data, p.len);
            if (r < 0) return r;
            /* With X-Sendfile the file may already be sent; read on to the end of the answer
             * anyway so the connection can go back to the pool. */
            if (pr->orphan && !pr->xsendfile) return 0;
        } else if (t == SL_PP_LOG) {
            sl_log("proxy-core: %s: backend stderr: %.*s", pr->c->path,
                   (int)(p.len && p.data[p.len - 1] == '\n' ? p.len - 1 : p.len), p.data);
        } else if (t == SL_PP_END) {
            if (!pr->head_done) return -EPROTO; /* ended without a head */
            pr->backend_done = true;
        } else if (t == SL_PP_NEED) {
            break;
        }
    }
    return 0;
}

static void on_drain(sl_conn *c)
{
    proxy_req *pr = CTX(c);
    if (pr && pr->paused && pr->gc) {
        pr->paused = false;
        arm_gc(pr, EV_READ, PCONF(c)->read_timeout);
    }
}

static void gc_event_body(proxy_req *pr, evutil_socket_t fd, short what)
{
    sl_conn *c = pr->c;
    sl_gw_backend *be = pr->gc->be;
    const sl_proxy_conf *s = PCONF(c);
    if (pr->state == P_SEND && (what & EV_READ) && pr->stream && !pr->body_in_done) {
        /* The backend answers, or closes, before it has the whole body: it gets no more. */
        stop_body(pr);
        pr->cut_short = true;
        pr->state = P_RECV;
    }
    if (pr->state == P_SEND) {
        if (what & EV_TIMEOUT) {
            if (pr->connecting) {
                backend_failed(pr, be, -ETIMEDOUT, true);
                return;
            }
            fail(pr, 504, "backend did not take the request in time");
            return;
        }
        while (pr->out_off < pr->out.len) {
            ssize_t n = send(fd, pr->out.p + pr->out_off, pr->out.len - pr->out_off, MSG_NOSIGNAL);
            if (n > 0) {
                pr->out_off += (size_t)n;
                pr->connecting = false;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                /* While the body streams, an early answer must be seen even when the backend
                 * stops reading. */
                bool watch = pr->stream && !pr->body_in_done && !pr->connecting;
                stream_compact(pr);
                arm_gc(pr, EV_WRITE | (watch ? EV_READ : 0),
                       pr->connecting ? s->connect_timeout : s->read_timeout);
                stream_flow(pr);
                return;
            }
            /* A pooled connection the backend had closed: retry once on a fresh one. */
            int e = n < 0 ? -errno : -EPIPE;
            if (pr->gc->reused && !pr->retried_reused && !pr->no_replay) {
                pr->retried_reused = true;
                drop_backend(pr, false);
                attempt(pr);
                return;
            }
            if (pr->stream && !pr->connecting) {
                /* It took part of the body and closed: it may have answered first (an upload
                 * it refuses). Read what it said. */
                stop_body(pr);
                pr->cut_short = true;
                pr->state = P_RECV;
                break;
            }
            backend_failed(pr, be, e, true);
            return;
        }
        if (pr->state == P_RECV) {
            /* read the early answer below */
        } else if (pr->stream && !pr->body_in_done) {
            /* Everything read so far is sent: wait for more of the client's body. */
            stream_compact(pr);
            arm_gc(pr, EV_READ, -1);
            stream_flow(pr);
            return;
        } else {
            pr->state = P_RECV;
            arm_gc(pr, EV_READ, s->read_timeout);
            return;
        }
    }
    if (pr->state != P_RECV) return;
    if (what & EV_TIMEOUT) {
        sl_log("proxy-core: backend %s: no answer for %lds", be->name, s->read_timeout);
        sl_gw_failed(be);
        fail(pr, 504, "backend timed out");
        return;
    }
    char buf[READ_CHUNK];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        arm_gc(pr, EV_READ, s->read_timeout);
        return;
    }
    if (n <= 0) {
        int e = n < 0 ? -errno : 0;
        if (!pr->got_byte && pr->gc->reused && !pr->retried_reused && !pr->req_body) {
            /* Closed before answering on a reused connection: the classic keep-alive race. */
            pr->retried_reused = true;
            drop_backend(pr, false);
            attempt(pr);
            return;
        }
        if (!pr->got_byte && e == -ECONNRESET) {
            backend_failed(pr, be, e, true);
            return;
        }
        if (!pr->head_done && may_retry_elsewhere(pr, be)) {
            /* Closed before the whole head of its answer (killed or restarting while it held
             * the request): nothing went to the client, so the request goes to another
             * backend, as nginx's proxy_next_upstream error does. The backend is not disabled:
             * a close can be about this one request; a dead one refuses the next connect and is
             * disabled then. With no other backend the answer is the 502 below. */
            sl_log("proxy-core: backend %s: closed %s; trying another", be->name,
                   pr->got_byte ? "before its answer's head was complete" : "without answering");
            sl_gw_failed(be);
            pr->got_byte = false; /* the next backend's answer starts afresh (begin_send) */
            try_another(pr, be);
            return;
        }
        pr->keep_backend = false;
        if (pr->proto->ends_with_body && pr->head_done && pr->framing == SL_BODY_UNTIL_CLOSE)
            pr->backend_done = true;
        if (pr->backend_done) {
            finish(pr);
            return;
        }
        sl_gw_failed(be);
        fail(pr, 502, pr->got_byte ? "backend answer truncated" : "backend closed without answering");
        return;
    }
    if (!pr->got_byte) sl_gw_answered(pr->gc, sl_gw_now_ms());
    pr->got_byte = true;
    sl_conn_mark(c, &c->t.backend_first_byte);
    int r = recv_bytes(pr, buf, (size_t)n);
    if (r < 0) {
        sl_gw_failed(be);
        fail(pr, 502, r == -E2BIG ? "backend response head too large" : "malformed backend answer");
        return;
    }
    if (pr->orphan || pr->state == P_DONE) return;
    if (pr->xsendfile) {
        /* The file is on its way; the rest of the backend's answer is not wanted. */
        if (!pr->proto->ends_with_body && !pr->backend_done) {
            arm_gc(pr, EV_READ, s->read_timeout);
            return;
        }
        finish(pr);
        return;
    }
    if (pr->backend_done) {
        finish(pr);
        return;
    }
    if (pr->head_done) {
        sl_conn_resume(c);
        if (pr->orphan || c->closed) return; /* the client went away while we wrote */
        if (sl_chunkq_length(&c->out) > OUT_HIGH) {
            pr->paused = true; /* on_drain resumes */
            sl_gw_unwatch(pr->gc);
            return;
        }
    }
    arm_gc(pr, EV_READ, s->read_timeout);
}

/* A request's state, zeroed, from this loop's spares (keeping their buffers) or new. */
static proxy_req *new_req(proxy_loop *pl)
{
    proxy_req *pr = pl->spare;
    if (!pr) return calloc(1, sizeof *pr);
    pl->spare = pr->next_spare;
    pl->n_spare--;
    char *hbuf = pr->hbuf, *out = pr->out.p;
    size_t hcap = pr->hcap, ocap = pr->out.cap;
    memset(pr, 0, sizeof *pr);
    pr->hbuf = hbuf;
    pr->hcap = hcap;
    pr->out.p = out;
    pr->out.cap = ocap;
    return pr;
}

static void free_req(proxy_req *pr)
{
    proxy_loop *pl = ploop(pr->c);
    if (pr->gc) drop_backend(pr, pr->backend_done);
    sl_gw_wait_remove(pr->grp, &pr->wait);
    if (event_initialized(&pr->kick)) event_del(&pr->kick);
    free(pr->body);
    free(pr->cgi);
    free(pr->uri);
    if (pl->n_spare >= SPARE_MAX) {
        sl_buf_free(&pr->out);
        free(pr->hbuf);
        free(pr);
        return;
    }
    /* A large buffer (a streamed body, a long head) is not kept for requests that need less. */
    if (pr->out.cap > KEEP_BUF) sl_buf_free(&pr->out);
    if (pr->hcap > KEEP_BUF) {
        free(pr->hbuf);
        pr->hbuf = NULL;
        pr->hcap = 0;
    }
    pr->next_spare = pl->spare;
    pl->spare = pr;
    pl->n_spare++;
}

/* Every backend event runs with the client connection pinned (pending) and the request marked
 * busy: writing to the client may end the request or close the connection, and neither may
 * free what this call still uses. */
static void gc_event(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *pr = arg;
    sl_conn *c = pr->c;
    bool nested = pr->busy;
    c->pending++;
    pr->busy = true;
    gc_event_body(pr, fd, what);
    if (!nested) {
        pr->busy = false;
        if (pr->orphan) free_req(pr);
    }
    c->pending--;
    if (c->closed) sl_conn_release(c);
}

static void kick(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *pr = arg;
    sl_conn *c = pr->c;
    c->pending++;
    pr->busy = true;
    attempt(pr);
    pr->busy = false;
    if (pr->orphan) free_req(pr);
    c->pending--;
    if (c->closed) sl_conn_release(c);
}

/* ---- module hooks ---- */

/* Connect and send right inside the handle hook, saving a loop turn; a failure comes back as
 * the hook's result rather than answering the client from inside the core. */
static sl_hresult send_now(proxy_req *pr)
{
    pr->in_handle = pr->busy = true;
    attempt(pr);
    pr->in_handle = pr->busy = false;
    return pr->handle_failed ? SL_ERROR : SL_WAIT;
}

/* A body streamed: the request goes out now with the body bytes that came along with the head,
 * and the rest follows as the client sends it (stream_event). */
static sl_hresult stream_start(proxy_req *pr)
{
    sl_conn *c = pr->c;
    pr->stream = true;
    pr->body_left = c->req.content_length;
    if (c->req.chunked) sl_chunked_init(&pr->cin, 8192);
    long r = build(pr);
    pr->built = true;
    size_t avail = c->in_len - c->head_len;
    if (!r) r = stream_feed(pr, c->in + c->head_len, avail);
    if (r < 0) {
        c->status = r == -ENOMEM ? 503 : r == -E2BIG ? 413 : r == -EOVERFLOW ? 500 : 400;
        return SL_ERROR; /* has_body stays: the core lingers and closes */
    }
    c->head_len += (size_t)r; /* what follows is the next request */
    c->keep_alive = c->ka_after_body;
    if (pr->body_in_done) {
        c->has_body = false;
    } else {
        c->state = SL_CONN_READ_BODY;
        c->on_body = stream_event;
    }
    pr->body_paused = true; /* not armed yet: stream_flow arms it while there is room */
    sl_hresult h = send_now(pr);
    if (h == SL_WAIT) stream_flow(pr);
    return h;
}

/* check-local: the script must exist under the route's document root. lighttpd stats it too;
 * this stat runs on the loop (the open-file cache usually has the answer's inode warm). */
static bool local_file_missing(const sl_conn *c, const sl_proxy_route *rt, size_t script_len)
{
    char f[4200];
    struct stat st;
    const char *root = rt->docroot ? rt->docroot : c->docroot->path;
    snprintf(f, sizeof f, "%s%.*s", root, (int)script_len, c->path);
    return stat(f, &st) < 0 || !S_ISREG(st.st_mode);
}

/* Claim the request (c->handler) where lighttpd's gateways claim it in uri_clean: a route
 * that does not look for a local file (check-local disabled; every proxy.server route), or
 * proxy-core.backends. Physical-phase rewrites for requests nobody claimed
 * (url.rewrite-if-not-file) then leave it alone; a route with check-local enabled is decided
 * after them, on the path they leave. */
static sl_hresult proxy_uri_clean(sl_conn *c)
{
    const sl_proxy_conf *pc = PCONF(c);
    size_t sl;
    const sl_proxy_route *rt = NULL;
    if (!pc->backends) {
        rt = sl_gw_conf_match(pc->fastcgi_server, &pc->fastcgi_map_extensions, c->path,
                              c->path_len, &sl);
        if (!rt) rt = sl_gw_conf_match(pc->proxy_server, NULL, c->path, c->path_len, &sl);
    }
    if (pc->backends || (rt && !rt->check_local)) c->handler = &sl_mod_proxy;
    return SL_GO_ON;
}

static sl_hresult proxy_handle(sl_conn *c)
{
    const sl_proxy_conf *pc = PCONF(c);
    const sl_proxy_route *rt = NULL;
    size_t script_len = 0;
    if (!pc->backends) {
        rt = sl_gw_conf_match(pc->fastcgi_server, &pc->fastcgi_map_extensions, c->path,
                              c->path_len, &script_len);
        if (!rt) rt = sl_gw_conf_match(pc->proxy_server, NULL, c->path, c->path_len, &script_len);
        if (!rt) return SL_GO_ON;
        if (rt->check_local && local_file_missing(c, rt, script_len)) {
            c->status = 404;
            return SL_ERROR;
        }
    }
    proxy_req *pr = new_req(ploop(c));
    if (!pr) {
        c->status = 503;
        return SL_ERROR;
    }
    pr->c = c;
    pr->route = rt;
    pr->script_len = script_len;
    pr->proto = rt ? rt->proto : pc->protocol;
    pr->allow_xsendfile = rt && rt->xsendfile >= 0 ? rt->xsendfile : pc->allow_x_sendfile;
    pr->xsendfile_roots = rt && rt->xsendfile_roots ? rt->xsendfile_roots : pc->xsendfile_roots;
    const char *lb = !rt ? NULL : rt->proto == &sl_proxy_http ? pc->proxy_balance : pc->fastcgi_balance;
    pr->balancer = lb ? lb : pc->balancer;
    pr->grp = sl_gw_group_get(ploop(c)->gw, rt ? &rt->backends : pc->backends);
    if (!pr->grp) {
        free_req(pr);
        c->status = 503;
        return SL_ERROR;
    }
    CTX(c) = pr;
    c->on_drain = on_drain;
    evtimer_assign(&pr->kick, c->loop->base, kick, pr);
    static const struct timeval zero = {0, 0};
    if (!c->has_body) return send_now(pr);
    const sl_http_request *rq = &c->req;
    pr->req_body = true;
    if (rq->expect && rq->version == 11) {
        /* The client waits for this before sending the body. A 1.0 client does not know 100
         * and sends the body anyway (RFC 9110 §10.1.1: ignore the expectation in 1.0). */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t w = sl_conn_send_now(c, cont, sizeof cont - 1);
        (void)w;
    }
    /* CGI applications want CONTENT_LENGTH: a chunked body is collected for them. */
    if (!rq->chunked || !pr->proto->collect_chunked) return stream_start(pr);
    pr->state = P_BODY;
    sl_chunked_init(&pr->cin, 8192);
    /* Body bytes that arrived with the head. */
    size_t avail = c->in_len - c->head_len;
    bool done = false;
    long used = avail ? body_feed(pr, c->in + c->head_len, avail, &done) : 0;
    if (used < 0) {
        c->keep_alive = false;
        c->status = used == -E2BIG ? 413 : 400;
        return SL_ERROR;
    }
    c->head_len += (size_t)used; /* what follows is the next request */
    c->keep_alive = c->ka_after_body;
    if (done) {
        c->has_body = false;
        evtimer_add(&pr->kick, &zero);
        return SL_WAIT;
    }
    c->state = SL_CONN_READ_BODY;
    c->on_body = body_event;
    sl_conn_want_body(c, CORE(c)->max_read_idle);
    return SL_WAIT;
}

static void proxy_request_done(sl_conn *c)
{
    proxy_req *pr = CTX(c);
    if (!pr) return;
    CTX(c) = NULL;
    if (pr->busy) {
        pr->orphan = true; /* gc_event frees it when it unwinds */
        return;
    }
    /* A request ended by the client mid-answer leaves the backend connection unusable. */
    free_req(pr);
}

int sl_backend_expand(const char *spec, char (*out)[128], int max)
{
    if (!strncmp(spec, "unix:", 5)) {
        const char *path = spec + 5;
        struct sockaddr_un un;
        if (path[0] != '/') return -EINVAL;
        if (strlen(path) >= sizeof un.sun_path) return -ENAMETOOLONG;
        snprintf(out[0], 128, "unix:%s", path);
        return 1;
    }
    char host[256];
    const char *port;
    long pn;
    if (sl_split_host_port(spec, host, &port, &pn) < 0 || !host[0]) return -EINVAL;
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -EHOSTUNREACH;
    int n = 0;
    for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
        char ip[INET6_ADDRSTRLEN], one[128];
        if (ai->ai_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
            snprintf(one, sizeof one, "%s:%ld", ip, pn);
        } else if (ai->ai_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
            snprintf(one, sizeof one, "[%s]:%ld", ip, pn);
        } else {
            continue;
        }
        bool dup = false; /* getaddrinfo repeats an address once per socket type it knows */
        for (int i = 0; i < n; i++) dup |= !strcmp(out[i], one);
        if (!dup) snprintf(out[n++], 128, "%s", one);
    }
    freeaddrinfo(res);
    return n ? n : -EHOSTUNREACH;
}

/* ---- settings ---- */

typedef struct backends_prep {
    sl_strlist list;
    char **names;
} backends_prep;

static void backends_release(void *p)
{
    backends_prep *b = p;
    for (size_t i = 0; i < b->list.n; i++) free(b->names[i]);
    free(b->names);
    free(b);
}

static int prep_backends(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    backends_prep *b = calloc(1, sizeof *b);
    if (!b) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    size_t cap = 0;
    for (size_t i = 0; i < v->n_items; i++) {
        char addrs[16][128];
        int n = sl_backend_expand(v->items[i].val->str, addrs, 16);
        if (n < 0) {
            snprintf(ctx->err, ctx->errlen, "proxy-core.backends: \"%s\": %s", v->items[i].val->str,
                     n == -ENAMETOOLONG   ? "unix socket path too long"
                     : n == -EHOSTUNREACH ? "cannot resolve the host name"
                                          : "not \"host:port\", \"[ipv6]:port\" or \"unix:/path\"");
            backends_release(b);
            return -1;
        }
        for (int j = 0; j < n; j++) {
            if (b->list.n + 1 >= cap) {
                cap = cap ? cap * 2 : 8;
                char **nn = realloc(b->names, (cap + 1) * sizeof *nn);
                if (!nn) {
                    backends_release(b);
                    return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
                }
                b->names = nn;
            }
            if (!(b->names[b->list.n] = strdup(addrs[j]))) {
                backends_release(b);
                return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
            }
            b->list.n++;
            b->names[b->list.n] = NULL;
        }
    }
    if (b->list.n == 0) {
        backends_release(b);
        snprintf(ctx->err, ctx->errlen, "proxy-core.backends is empty");
        return -1;
    }
    b->list.v = (const char *const *)b->names;
    *out = b; /* the field is the list, first member of b */
    return 0;
}

typedef struct roots_prep {
    sl_proxy_roots roots;
    char **paths;
    int *fds;
} roots_prep;

void sl_proxy_roots_release(void *p)
{
    roots_prep *r = p;
    for (size_t i = 0; i < r->roots.n; i++) {
        free(r->paths[i]);
        if (r->fds[i] >= 0) close(r->fds[i]);
    }
    free(r->paths);
    free(r->fds);
    free(r);
}

int sl_proxy_roots_prepare(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    roots_prep *r = calloc(1, sizeof *r);
    if (r) {
        r->paths = calloc(v->n_items + 1, sizeof *r->paths);
        r->fds = calloc(v->n_items + 1, sizeof *r->fds);
    }
    if (!r || !r->paths || !r->fds) {
        if (r) sl_proxy_roots_release(r);
        return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    }
    for (size_t i = 0; i < v->n_items; i++) {
        const char *p = v->items[i].val->str;
        char *a = p[0] == '/' || !ctx->basedir ? strdup(p) : NULL;
        if (!a && (a = malloc(strlen(ctx->basedir) + strlen(p) + 2)))
            sprintf(a, "%s/%s", ctx->basedir, p);
        if (!a) {
            sl_proxy_roots_release(r);
            return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
        }
        size_t L = strlen(a);
        while (L > 1 && a[L - 1] == '/') a[--L] = 0; /* the prefix match adds the slash */
        r->paths[i] = a;
        r->fds[i] = sl_key_open_dir(ctx, a); /* inside server.chroot */
        r->roots.n = i + 1;
        if (r->fds[i] < 0) {
            snprintf(ctx->err, ctx->errlen, "proxy-core.x-sendfile-docroot \"%s\": %s", a,
                     strerror(errno));
            sl_proxy_roots_release(r);
            return -1;
        }
    }
    for (size_t i = 0; i < v->n_items; i++) /* entered as server.username */
        sl_key_access(ctx, r->paths[i], SL_ACCESS_SEARCH_DIR, true);
    r->roots.path = (const char *const *)r->paths;
    r->roots.fd = r->fds;
    *out = r; /* the field is the roots, first member of r */
    return 0;
}

static int prep_protocol(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const char *const ok[] = {"fastcgi", "http", NULL};
    if (v->type != SL_CV_STRING)
        return snprintf(ctx->err, ctx->errlen, "proxy-core.protocol must be a string"), -1;
    if (sl_key_choice("proxy-core.protocol", v, ctx, ok) < 0) return -1;
    *out = (void *)sl_proxy_proto_find(v->str);
    return 0;
}

/* Prepared values that point to static tables: nothing to free. */
static void static_release(void *p)
{
    (void)p;
}

static int prep_balancer(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const char *const ok[] = {"round-robin", "sqf", "static", "carp", NULL};
    return sl_key_choice("proxy-core.balancer", v, ctx, ok);
}

/* fastcgi.balance / proxy.balance: lighttpd's names for proxy-core's balancers. */
static int prep_balance(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    const char *b = v->type == SL_CV_STRING ? sl_gw_conf_balancer(v->str) : NULL;
    if (!b)
        return snprintf(ctx->err, ctx->errlen, "%s: \"%s\" is not supported (use \"fair\", "
                        "\"round-robin\" or \"hash\"; \"sticky\" is not implemented)",
                        ctx->assign ? ctx->assign->key : "balance",
                        v->type == SL_CV_STRING ? v->str : "?"), -1;
    *out = (void *)b;
    return 0;
}

/* proxy.forwarded = ( "for" => 1, "proto" => "enable", ... ): lighttpd 1.4's names and values. */
static int prep_forwarded(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const struct { const char *name; unsigned bit; } params[] = {
        {"for", SL_FWD_FOR}, {"by", SL_FWD_BY}, {"proto", SL_FWD_PROTO}, {"host", SL_FWD_HOST},
        {"remote_user", SL_FWD_REMOTE_USER}};
    if (v->type != SL_CV_ARRAY)
        return sl_key_fail(ctx, "proxy.forwarded must be a list ( \"for\" => 1, ... )");
    unsigned bits = 0;
    for (size_t i = 0; i < v->n_items; i++) {
        const sl_cval_item *it = &v->items[i];
        size_t k = 0;
        while (k < sizeof params / sizeof params[0] && (!it->key || strcmp(it->key, params[k].name)))
            k++;
        if (k == sizeof params / sizeof params[0])
            return sl_key_fail(ctx, "proxy.forwarded: \"%s\" is not one of for, by, proto, "
                               "host, remote_user", it->key ? it->key : "(no name)");
        const sl_cval *x = it->val;
        int on = x->type == SL_CV_INT ? (x->num == 1 ? 1 : x->num == 0 ? 0 : -1)
               : x->type == SL_CV_STRING ? (!strcmp(x->str, "enable") ? 1 : !strcmp(x->str, "disable") ? 0 : -1)
               : -1;
        if (on < 0)
            return sl_key_fail(ctx, "proxy.forwarded: \"%s\" must be 1, 0, \"enable\" or "
                               "\"disable\"", it->key);
        if (on) bits |= params[k].bit;
    }
    unsigned *p = malloc(sizeof *p);
    if (!p) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *p = bits;
    *out = p;
    return 0;
}

static int prep_pool(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->num >= 1) return 0;
    snprintf(ctx->err, ctx->errlen, "proxy-core.max-pool-size must be at least 1");
    return -1;
}

static void proxy_defaults(void *p)
{
    sl_proxy_conf *s = p;
    s->protocol = &sl_proxy_http;
    s->balancer = "sqf";
    s->max_pool_size = 16;
    s->max_keep_alive_requests = -1; /* per protocol: see keepalive_max */
    s->disable_time = 10;
    s->connect_timeout = 5;
    s->read_timeout = 60;
    s->max_backlog_size = 1024;
}

static int proxy_loop_init(sl_loop *loop, char *err, size_t errlen)
{
    proxy_loop *pl = calloc(1, sizeof *pl);
    if (pl) pl->gw = sl_gw_new(loop->base, loop->srv->n_loops);
    if (pl && pl->gw) pl->md = sl_urlrules_match_data();
    if (!pl || !pl->gw || !pl->md) {
        if (pl) sl_gw_free(pl->gw);
        free(pl);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    loop->mod[sl_mod_proxy.index] = pl;
    return 0;
}

static void proxy_loop_fini(sl_loop *loop)
{
    proxy_loop *pl = loop->mod[sl_mod_proxy.index];
    if (!pl) return;
    sl_gw_free(pl->gw); /* after every client connection closed */
    pcre2_match_data_free(pl->md);
    while (pl->spare) {
        proxy_req *pr = pl->spare;
        pl->spare = pr->next_spare;
        sl_buf_free(&pr->out);
        free(pr->hbuf);
        free(pr);
    }
    free(pl);
    loop->mod[sl_mod_proxy.index] = NULL;
}

/* A loop learned that a backend's workers are all held: every other loop gives back what it
 * keeps above its share (sl_gw_trim), on its own thread. */
static sl_server *trim_srv;

static void trim_msg(sl_loop_msg *m)
{
    proxy_loop *pl = m->loop->mod[sl_mod_proxy.index];
    free(m);
    if (pl) sl_gw_poke(pl->gw);
}

static void broadcast_trim(const sl_gw *from)
{
    for (unsigned i = 0; trim_srv && i < trim_srv->n_loops; i++) {
        sl_loop *l = trim_srv->loops[i];
        proxy_loop *pl = l ? l->mod[sl_mod_proxy.index] : NULL;
        if (!pl || !l->serving || pl->gw == from) continue;
        sl_loop_msg *m = calloc(1, sizeof *m);
        if (!m) continue;
        m->fn = trim_msg;
        sl_loop_post(l, m);
    }
}

static int proxy_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    trim_srv = srv;
    sl_gw_broadcast = broadcast_trim;
    const sl_core_conf *core = sl_core(conf);
    return sl_spawn_start(core->username, core->groupname, err, errlen);
}

static void proxy_fini(sl_server *srv)
{
    sl_spawn_stop();
    sl_gw_broadcast = NULL;
    trim_srv = NULL;
    sl_gw_shared_free();
}

static void backend_status(void *ud, const sl_gw_shared *sh, bool disabled)
{
    sl_status_out *o = ud;
    sl_status_item(o, sh->name);
    sl_status_num(o, "inflight", __atomic_load_n(&sh->inflight, __ATOMIC_RELAXED), false);
    sl_status_num(o, "conns", __atomic_load_n(&sh->conns, __ATOMIC_RELAXED), false);
    sl_status_num(o, "idle", __atomic_load_n(&sh->idle, __ATOMIC_RELAXED), false);
    sl_status_num(o, "requests", __atomic_load_n(&sh->requests, __ATOMIC_RELAXED), true);
    sl_status_num(o, "failures", __atomic_load_n(&sh->failures, __ATOMIC_RELAXED), true);
    sl_status_num(o, "stalls", __atomic_load_n(&sh->stalls, __ATOMIC_RELAXED), true);
    sl_status_flag(o, "disabled", disabled);
    sl_status_item_end(o);
}

static void proxy_status(sl_server *srv, sl_status_out *o)
{
    sl_status_list(o, "backends", "backend");
    sl_gw_each_backend(backend_status, o);
    sl_status_list_end(o);
}

/* lighttpd's mod_fastcgi and mod_proxy are served by proxy-core (fastcgi.server, proxy.server). */
sl_module sl_mod_proxy = {
    SL_MODULE_HEAD("proxy-core", sl_proxy_conf, "mod_proxy_core", "mod_fastcgi", "mod_proxy"),
    .keys = SL_KEYS(
        SL_KEY_AT("proxy-core.allow-x-sendfile", SL_KEY_BOOL, allow_x_sendfile),
        SL_KEY_PREP("proxy-core.backends", SL_KEY_VALUE, backends, prep_backends, backends_release),
        SL_KEY_PREP("proxy-core.balancer", SL_KEY_STRING, balancer, prep_balancer, NULL),
        SL_KEY_AT("proxy-core.connect-timeout", SL_KEY_INT, connect_timeout),
        SL_KEY_AT("proxy-core.disable-time", SL_KEY_INT, disable_time),
        SL_KEY_AT("proxy-core.max-backlog-size", SL_KEY_INT, max_backlog_size),
        SL_KEY_AT("proxy-core.max-keep-alive-requests", SL_KEY_INT, max_keep_alive_requests),
        SL_KEY_PREP("proxy-core.max-pool-size", SL_KEY_INT, max_pool_size, prep_pool, NULL),
        SL_KEY_PREP("proxy-core.protocol", SL_KEY_VALUE, protocol, prep_protocol, static_release),
        SL_KEY_AT("proxy-core.read-timeout", SL_KEY_INT, read_timeout),
        SL_KEY_PREP("proxy-core.rewrite-request", SL_KEY_VALUE, rewrite_request,
                    sl_proxy_rewrites_prep_request, sl_proxy_rewrites_free),
        SL_KEY_PREP("proxy-core.rewrite-response", SL_KEY_VALUE, rewrite_response,
                    sl_proxy_rewrites_prep_response, sl_proxy_rewrites_free),
        SL_KEY_PREP("proxy-core.x-sendfile-docroot", SL_KEY_VALUE, xsendfile_roots,
                    sl_proxy_roots_prepare, sl_proxy_roots_release),
        /* lighttpd 1.4's mod_fastcgi and mod_proxy (gw_conf.h) */
        SL_KEY_PREP("fastcgi.server", SL_KEY_VALUE, fastcgi_server,
                    sl_gw_conf_prep_fastcgi, sl_gw_conf_release),
        SL_KEY_PREP("fastcgi.balance", SL_KEY_VALUE, fastcgi_balance, prep_balance, static_release),
        SL_KEY_AT("fastcgi.map-extensions", SL_KEY_KVLIST, fastcgi_map_extensions),
        SL_KEY_AT("fastcgi.debug", SL_KEY_INT, fastcgi_debug),
        SL_KEY_PREP("proxy.server", SL_KEY_VALUE, proxy_server,
                    sl_gw_conf_prep_proxy, sl_gw_conf_release),
        SL_KEY_PREP("proxy.balance", SL_KEY_VALUE, proxy_balance, prep_balance, static_release),
        SL_KEY_PREP("proxy.header", SL_KEY_VALUE, proxy_header,
                    sl_gw_conf_prep_header, sl_gw_conf_release_header),
        SL_KEY_AT("proxy.debug", SL_KEY_INT, proxy_debug),
        SL_KEY_PREP("proxy.forwarded", SL_KEY_VALUE, forwarded, prep_forwarded, free)),
    .defaults = proxy_defaults,
    .init = proxy_init,
    .fini = proxy_fini,
    .loop_init = proxy_loop_init,
    .loop_fini = proxy_loop_fini,
    .uri_clean = proxy_uri_clean,
    .handle = proxy_handle,
    .request_done = proxy_request_done,
    .status = proxy_status,
};
