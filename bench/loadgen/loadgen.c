/* loadgen: an http_load-compatible HTTP load generator for the seekless benchmarks.
 *
 * One thread, one level-triggered epoll set, non-blocking sockets. Plain epoll rather than
 * libevent: the loop has exactly three kinds of waits (connect, write, read) and one kind of timer
 * (the same -timeout for every connection), and both are simpler and cheaper done directly. Because
 * every connection has the same idle timeout, the active fetches are kept in a list ordered by last
 * progress: progress moves a fetch to the tail in O(1), and the only deadline that can fire next is
 * the head's, so no timer heap (and no per-read timer rearm, which libevent would do) is needed.
 * Level-triggered mode gives fairness for free: a 10 MB body is read a bounded number of times per
 * wakeup and the kernel reports the rest next round.
 *
 * Bodies are never kept, and by default never even copied into user space: the status line and
 * headers are read into one shared scratch buffer (HEAD_READ bytes at a time) for the response
 * parser (resp.c), which only tracks framing and says how many body bytes follow; those are then
 * dropped inside the kernel by recv(MSG_TRUNC), which on TCP frees the queued data without
 * copying it, at most as many bytes as the framing allows, so byte counts stay exact and a surplus
 * byte still shows up as one. Measured against nginx on the 2-vCPU VM (hot pools, 100 keep-alive
 * connections, loadgen's own user+sys per response): 100 KiB bodies cost ~21 us copied, ~15 us
 * discarded with MSG_TRUNC, ~18 us spliced to /dev/null through a pipe (two calls per chunk
 * instead of one), so MSG_TRUNC it is. A head read of 8 KiB takes a 4 KiB file's whole response
 * in one call (4 KiB reads needed a second call per response for the same CPU, 16 KiB copied
 * more of every large body). -copy (implied by -checksum) reads every body into the scratch
 * buffer, 256 KiB at a time, as a copying client such as wrk does. Each fetch writes a request
 * prebuilt at startup (url.c) in one send(2); every system call is counted for the report.
 *
 * Slots that finish a fetch are not restarted from inside the event handler but queued and
 * restarted after the batch of events: a server that refuses connections synchronously would
 * otherwise recurse, and the queue keeps the order of work independent of handler nesting.
 * The k-th fetch started always uses the k-th draw of the seeded PRNG, so -seed reproduces the
 * sequence of URLs (with -parallel 1, also their order on the wire).
 *
 * Counting is exact: every started fetch ends in exactly one bucket, either a successful fetch
 * (counted by HTTP status) or one error cause (stats.h), so started == fetches + errors.
 */
#include "resp.h"
#include "stats.h"
#include "sum.h"
#include "url.h"

#include "sl_version.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH_SIZE (256 * 1024)
/* Discard mode: bytes copied per read while the parser must look at them (status line, headers,
 * chunk-size lines). A 4 KiB file's whole response fits in this one read; the rest of a larger
 * body is dropped in the kernel with MSG_TRUNC. See the design note above for why 8 KiB. */
#define HEAD_READ (8 * 1024)
/* Largest MSG_TRUNC discard asked for in one call (recv's length is an int in the kernel). */
#define DISCARD_MAX (1U << 30)
/* Without keep-alive, the discard of a body's last bytes asks for this many more: nothing may
 * follow the response on that connection, so whatever comes along is surplus and is counted. */
#define SURPLUS_PROBE (64 * 1024)
#define READS_PER_EVENT 4
#define MAX_EVENTS 256
#define NS_PER_S 1000000000ULL
#define PROGRESS_INTERVAL_NS (5 * NS_PER_S)
#define MESSAGES_PER_CAUSE 10
#define PARALLEL_MAX 100000

enum conn_state { C_IDLE, C_CONNECTING, C_SENDING, C_READING };

/* One parallel slot: at most one fetch in flight, plus possibly a kept-alive connection. */
struct conn {
    int fd;          /* -1 when no connection is open */
    int state;       /* enum conn_state */
    uint32_t ev;     /* events registered with epoll, 0 when not registered */
    unsigned target; /* target the open connection goes to */
    bool reused;     /* the current fetch runs on a kept-alive connection */
    bool got_bytes;  /* the current fetch has seen a response byte */
    bool queued;     /* waiting in the start queue */
    bool in_list;    /* in the progress list */
    size_t url;      /* index of the URL being fetched */
    size_t sent;     /* request bytes written */
    uint64_t t_fetch, t_connect, t_request, t_progress; /* CLOCK_MONOTONIC ns */
    struct conn *prev, *next;                           /* progress list links */
    struct sl_lg_resp resp;
    struct sl_lg_sum sum;
};

/* What the first complete response of a URL looked like; later ones are compared against it. */
struct url_ref {
    uint64_t bytes;
    uint64_t sum;
    int status; /* 0 until the first complete response */
};

/* Command-line settings. */
struct opts {
    bool checksum, verbose, keepalive;
    bool copy;       /* read bodies into user space (-copy, implied by -checksum) */
    bool sequential; /* the k-th fetch takes the k-th URL of the list (wrapping) */
    unsigned parallel;
    uint64_t fetches;
    uint64_t min_fetches; /* with -seconds: keep starting fetches until this many started */
    double seconds;
    double timeout;
    uint64_t seed;
    bool seed_set;
    const char *json;
    const char *url_file;
};

/* The whole state of one run. */
struct run {
    struct opts o;
    struct sl_lg_urls urls;
    struct url_ref *refs;
    struct conn *conns;
    struct conn **queue;
    size_t qn;
    struct conn *head, *tail; /* active fetches, oldest progress first */
    int epfd;
    int sigfd; /* SIGINT/SIGTERM, registered in the epoll set with data.ptr NULL */
    bool got_signal;
    uint64_t now, t_start, t_stop, t_cut, next_progress, timeout_ns;
    bool stopping;
    bool interrupted;
    unsigned active;
    uint64_t finished;
    uint64_t rng[4];
    unsigned shown[SL_LG_ERR_COUNT];
    char *scratch;
    struct sl_lg_stats st;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* --- PRNG: xoshiro256**, seeded through splitmix64 --- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject). */
static uint64_t rng_below(uint64_t s[4], uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rng_next(s) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)rng_next(s) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* --- progress list: active fetches ordered by their last progress --- */

static void list_remove(struct run *r, struct conn *c)
{
    if (!c->in_list) return;
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->tail = c->prev;
    c->prev = c->next = NULL;
    c->in_list = false;
}

static void list_append(struct run *r, struct conn *c)
{
    c->prev = r->tail;
    c->next = NULL;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    c->in_list = true;
}

static void touch(struct run *r, struct conn *c)
{
    c->t_progress = r->now;
    if (r->tail == c) return;
    list_remove(r, c);
    list_append(r, c);
}

/* --- fetch life cycle --- */

static void open_connection(struct run *r, struct conn *c);

static void close_conn(struct run *r, struct conn *c)
{
    if (c->fd >= 0) {
        close(c->fd); /* also drops it from the epoll set */
        r->st.sys.close++;
    }
    c->fd = -1;
    c->ev = 0;
}

static void queue_push(struct run *r, struct conn *c)
{
    if (c->queued) return;
    c->queued = true;
    r->queue[r->qn++] = c;
}

static void finish(struct run *r, struct conn *c)
{
    list_remove(r, c);
    c->state = C_IDLE;
    r->active--;
    r->finished++;
    queue_push(r, c);
}

static void fail(struct run *r, struct conn *c, enum sl_lg_error cause, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct run *r, struct conn *c, enum sl_lg_error cause, const char *fmt, ...)
{
    r->st.errors[cause]++;
    /* Cuts are expected at the end of a -seconds run and summarised once, not per fetch. */
    if (cause != SL_LG_ERR_CUT && r->shown[cause] <= MESSAGES_PER_CAUSE) {
        if (r->shown[cause] < MESSAGES_PER_CAUSE) {
            va_list ap;
            va_start(ap, fmt);
            fprintf(stderr, "loadgen: %s: ", r->urls.v[c->url].text);
            vfprintf(stderr, fmt, ap);
            fputc('\n', stderr);
            va_end(ap);
        } else {
            fprintf(stderr, "loadgen: further %s errors not shown\n", sl_lg_error_key(cause));
        }
        r->shown[cause]++;
    }
    close_conn(r, c);
    finish(r, c);
}

static int set_interest(struct run *r, struct conn *c, uint32_t events)
{
    if (c->ev == events) return 0;
    struct epoll_event e = {.events = events, .data.ptr = c};
    r->st.sys.epoll_ctl++;
    if (epoll_ctl(r->epfd, c->ev ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &e) < 0) return -errno;
    c->ev = events;
    return 0;
}

/* A kept-alive connection the server had already closed: redo the fetch on a new connection.
 * Only done before any response byte arrived, where nothing can have been processed twice. */
static void retry_fresh(struct run *r, struct conn *c)
{
    r->st.retries++;
    close_conn(r, c);
    c->reused = false;
    c->got_bytes = false;
    c->sent = 0;
    sl_lg_resp_init(&c->resp);
    sl_lg_sum_init(&c->sum);
    open_connection(r, c);
}

static void send_request(struct run *r, struct conn *c)
{
    const struct sl_lg_url *u = &r->urls.v[c->url];
    c->state = C_SENDING;
    while (c->sent < u->request_len) {
        r->st.sys.send++;
        ssize_t n = send(c->fd, u->request + c->sent, u->request_len - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
            touch(r, c);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = set_interest(r, c, EPOLLOUT);
            if (rc < 0) fail(r, c, SL_LG_ERR_CONNECT, "epoll_ctl: %s", strerror(-rc));
            return;
        }
        if (c->reused) {
            retry_fresh(r, c);
            return;
        }
        fail(r, c, SL_LG_ERR_BAD_RESPONSE, "send: %s", strerror(errno));
        return;
    }
    c->t_request = r->now;
    c->state = C_READING;
    int rc = set_interest(r, c, EPOLLIN);
    if (rc < 0) fail(r, c, SL_LG_ERR_CONNECT, "epoll_ctl: %s", strerror(-rc));
}

static void connected(struct run *r, struct conn *c)
{
    r->now = now_ns();
    r->st.connects++;
    sl_lg_minmax_add(&r->st.connect, (r->now - c->t_connect) / 1000);
    touch(r, c);
    if (r->o.keepalive) {
        /* Later requests on this connection follow a response we have fully read, so Nagle
         * would not normally hold them back; this just rules it out. */
        int one = 1;
        r->st.sys.connect++;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    send_request(r, c);
}

static void open_connection(struct run *r, struct conn *c)
{
    const struct sl_lg_target *t = &r->urls.targets[r->urls.v[c->url].target];
    c->t_connect = r->now;
    r->st.sys.connect += 2; /* socket() and connect() */
    int fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(r, c, SL_LG_ERR_CONNECT, "socket: %s", strerror(errno));
        return;
    }
    c->fd = fd;
    c->ev = 0;
    c->target = r->urls.v[c->url].target;
    if (connect(fd, (const struct sockaddr *)&t->addr, t->addr_len) == 0) {
        connected(r, c);
        return;
    }
    if (errno != EINPROGRESS && errno != EINTR) {
        fail(r, c, SL_LG_ERR_CONNECT, "connect: %s", strerror(errno));
        return;
    }
    /* Over loopback the handshake has normally completed by the time connect() returns
     * EINPROGRESS, so try the request right away: success proves the connection is established
     * and saves an epoll round trip and an epoll_ctl per fetch; EAGAIN means it really is still
     * connecting; anything else is the connect error itself. */
    const struct sl_lg_url *u = &r->urls.v[c->url];
    r->st.sys.send++;
    ssize_t n = send(fd, u->request, u->request_len, MSG_NOSIGNAL);
    if (n >= 0) {
        c->sent = (size_t)n;
        connected(r, c);
        return;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        fail(r, c, SL_LG_ERR_CONNECT, "connect: %s", strerror(errno));
        return;
    }
    c->state = C_CONNECTING;
    int rc = set_interest(r, c, EPOLLOUT);
    if (rc < 0) fail(r, c, SL_LG_ERR_CONNECT, "epoll_ctl: %s", strerror(-rc));
}

static bool may_start(const struct run *r)
{
    if (r->stopping) return false;
    return r->o.fetches == 0 || r->st.started < r->o.fetches;
}

/* -seconds has run out: stop starting fetches once -min-fetches have been started too. */
static bool time_is_up(const struct run *r)
{
    return r->o.seconds > 0 && r->now >= r->t_stop && r->st.started >= r->o.min_fetches;
}

static void start_fetch(struct run *r, struct conn *c)
{
    if (!may_start(r)) {
        close_conn(r, c); /* the slot retires; drop its kept-alive connection */
        return;
    }
    /* Fresh time: a batch of restarts takes a while, and a stale clock would inflate latencies. */
    r->now = now_ns();
    uint64_t k = r->st.started++;
    r->active++;
    if (r->active > r->st.max_parallel) r->st.max_parallel = r->active;
    c->url = r->o.sequential ? (size_t)(k % r->urls.n) : (size_t)rng_below(r->rng, r->urls.n);
    c->t_fetch = r->now;
    c->t_progress = r->now;
    c->sent = 0;
    c->got_bytes = false;
    sl_lg_resp_init(&c->resp);
    sl_lg_sum_init(&c->sum);
    list_append(r, c);
    if (c->fd >= 0 && c->target == r->urls.v[c->url].target) {
        c->reused = true;
        r->st.reused++;
        send_request(r, c);
        return;
    }
    close_conn(r, c);
    c->reused = false;
    open_connection(r, c);
}

static void complete(struct run *r, struct conn *c)
{
    struct url_ref *ref = &r->refs[c->url];
    int status = c->resp.status;
    uint64_t bytes = c->resp.body_bytes;
    uint64_t sum = r->o.checksum ? sl_lg_sum_final(&c->sum) : 0;
    if (ref->status == status) {
        if (bytes != ref->bytes) {
            fail(r, c, SL_LG_ERR_BAD_BYTES,
                 "byte count wrong: %llu body bytes, first fetch had %llu",
                 (unsigned long long)bytes, (unsigned long long)ref->bytes);
            return;
        }
        if (r->o.checksum && sum != ref->sum) {
            fail(r, c, SL_LG_ERR_BAD_CHECKSUM, "checksum wrong");
            return;
        }
    } else if (ref->status == 0) {
        ref->status = status;
        ref->bytes = bytes;
        ref->sum = sum;
    }
    r->st.fetches++;
    r->st.bytes += bytes;
    r->st.status[status]++;
    if (sl_lg_stats_add_latency(&r->st, (r->now - c->t_fetch) / 1000) < 0) die("out of memory");
    if (!r->o.keepalive || !sl_lg_resp_reusable(&c->resp)) close_conn(r, c);
    finish(r, c);
}

static void on_body(void *arg, const char *p, size_t len)
{
    sl_lg_sum_update(arg, p, len);
}

static void on_closed(struct run *r, struct conn *c, int err)
{
    if (c->reused && !c->got_bytes) {
        retry_fresh(r, c);
        return;
    }
    int rc;
    if (err)
        rc = sl_lg_resp_headers_done(&c->resp) ? -EPIPE : -EPROTO;
    else
        rc = sl_lg_resp_eof(&c->resp);
    if (rc == 0) {
        complete(r, c);
    } else if (rc == -EPIPE) {
        if (c->resp.content_length >= 0)
            fail(r, c, SL_LG_ERR_BAD_BYTES, "connection %s after %llu of %lld body bytes",
                 err ? strerror(err) : "closed", (unsigned long long)c->resp.body_bytes,
                 (long long)c->resp.content_length);
        else
            fail(r, c, SL_LG_ERR_BAD_BYTES, "connection %s inside the body after %llu bytes",
                 err ? strerror(err) : "closed", (unsigned long long)c->resp.body_bytes);
    } else {
        fail(r, c, SL_LG_ERR_BAD_RESPONSE, "connection %s before the end of the headers",
             err ? strerror(err) : "closed");
    }
}

/* Bytes of the current response arrived (n > 0): first-response time and progress. */
static void got_bytes(struct run *r, struct conn *c)
{
    if (!c->got_bytes) {
        c->got_bytes = true;
        sl_lg_minmax_add(&r->st.first_response, (r->now - c->t_request) / 1000);
    }
    touch(r, c);
}

/* After bytes of the response were consumed: `surplus` bytes beyond its end make the fetch a bad
 * byte count, a complete response ends it. Returns true when the fetch ended. */
static bool fetch_ended(struct run *r, struct conn *c, size_t surplus)
{
    if (surplus) {
        fail(r, c, SL_LG_ERR_BAD_BYTES, "%zu bytes after the end of the response", surplus);
        return true;
    }
    if (!sl_lg_resp_done(&c->resp)) return false;
    complete(r, c);
    return true;
}

/* recv returned n <= 0: the peer closed, a signal interrupted, the socket is drained, or the
 * connection failed. Returns true when the caller should read again right away. */
static bool recv_stopped(struct run *r, struct conn *c, ssize_t n)
{
    if (n == 0) {
        on_closed(r, c, 0);
        return false;
    }
    if (errno == EINTR) return true;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    on_closed(r, c, errno);
    return false;
}

/* Drop up to the framed rest of the body in the kernel, unread. Returns true when the caller
 * should try another read now, false when the fetch ended or the socket is drained. */
static bool discard_body(struct run *r, struct conn *c, uint64_t skippable, bool ends_message)
{
    size_t want = skippable > DISCARD_MAX ? DISCARD_MAX : (size_t)skippable;
    /* Copy mode notices surplus bytes that arrive with the end of the body in one read; this
     * keeps that check (and counts the surplus) where the connection carries nothing else. A
     * kept-alive connection is left alone: its next response starts right there. */
    size_t probe = !r->o.keepalive && ends_message && want == skippable ? SURPLUS_PROBE : 0;
    r->st.sys.discard++;
    /* MSG_TRUNC on a TCP socket removes up to `want` bytes from the receive queue without
     * copying them: no buffer is needed, and NULL makes any copy a loud EFAULT, not a scribble. */
    ssize_t n = recv(c->fd, NULL, want + probe, MSG_TRUNC | MSG_DONTWAIT);
    if (n <= 0) return recv_stopped(r, c, n);
    got_bytes(r, c);
    size_t body = (size_t)n > want ? want : (size_t)n;
    sl_lg_resp_skip(&c->resp, body);
    r->st.bytes_all += body;
    if (fetch_ended(r, c, (size_t)n - body)) return false;
    return (size_t)n == want;
}

/* Read into the scratch buffer and let the parser see it. Same return as discard_body. */
static bool read_and_parse(struct run *r, struct conn *c, size_t size)
{
    r->st.sys.recv++;
    ssize_t n = recv(c->fd, r->scratch, size, 0);
    if (n <= 0) return recv_stopped(r, c, n);
    got_bytes(r, c);
    uint64_t before = c->resp.body_bytes;
    ssize_t used = sl_lg_resp_feed(&c->resp, r->scratch, (size_t)n,
                                   r->o.checksum ? on_body : NULL, &c->sum);
    r->st.bytes_all += c->resp.body_bytes - before;
    if (used < 0) {
        fail(r, c, SL_LG_ERR_BAD_RESPONSE, "malformed response (%s)", strerror((int)-used));
        return false;
    }
    /* The parser stops right after the end of the message: what is left is surplus. */
    if (fetch_ended(r, c, (size_t)(n - used))) return false;
    /* A short read means the socket is drained; level-triggered epoll reports more. */
    return (size_t)n == size;
}

static void on_readable(struct run *r, struct conn *c)
{
    for (int k = 0; k < READS_PER_EVENT; k++) {
        if (!r->o.copy) {
            bool ends_message;
            uint64_t skippable = sl_lg_resp_skippable(&c->resp, &ends_message);
            if (skippable) {
                if (!discard_body(r, c, skippable, ends_message)) return;
                continue;
            }
        }
        if (!read_and_parse(r, c, r->o.copy ? SCRATCH_SIZE : HEAD_READ)) return;
    }
}

static void on_event(struct run *r, struct conn *c, uint32_t ev)
{
    switch (c->state) {
    case C_CONNECTING:
        if (ev & (EPOLLERR | EPOLLHUP)) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            fail(r, c, SL_LG_ERR_CONNECT, "connect: %s", strerror(err ? err : ECONNREFUSED));
        } else if (ev & EPOLLOUT) {
            connected(r, c);
        }
        break;
    case C_SENDING:
        send_request(r, c);
        break;
    case C_READING:
        on_readable(r, c);
        break;
    default:
        /* An idle kept-alive connection became readable: the server closed it (or sent bytes
         * nobody asked for). Either way it cannot carry the next request. */
        close_conn(r, c);
        break;
    }
}

static void cut_all(struct run *r)
{
    uint64_t before = r->st.errors[SL_LG_ERR_CUT];
    while (r->head)
        fail(r, r->head, SL_LG_ERR_CUT, "cut");
    uint64_t cut = r->st.errors[SL_LG_ERR_CUT] - before;
    if (cut)
        fprintf(stderr, "loadgen: %llu fetch%s still running at the end, cut\n",
                (unsigned long long)cut, cut == 1 ? "" : "es");
}

static void drain_queue(struct run *r)
{
    /* Restarts may queue their slot again (a synchronous failure); those wait for the next round
     * so a dead server cannot trap us here. */
    size_t n = r->qn;
    for (size_t i = 0; i < n; i++) {
        struct conn *c = r->queue[i];
        c->queued = false;
        start_fetch(r, c);
    }
    memmove(r->queue, r->queue + n, (r->qn - n) * sizeof *r->queue);
    r->qn -= n;
}

static int wait_ms(const struct run *r)
{
    if (r->qn) return 0;
    uint64_t deadline = UINT64_MAX;
    if (r->head) deadline = r->head->t_progress + r->timeout_ns;
    if (r->o.verbose && r->next_progress < deadline) deadline = r->next_progress;
    /* Past t_stop but short of -min-fetches, the stop is decided by finishing fetches (events),
     * not by the clock; a deadline in the past would spin. */
    if (r->o.seconds > 0 && !r->stopping && r->t_stop > r->now && r->t_stop < deadline)
        deadline = r->t_stop;
    if (r->o.seconds > 0 && r->stopping && r->t_cut < deadline) deadline = r->t_cut;
    if (deadline == UINT64_MAX) return -1;
    if (deadline <= r->now) return 0;
    uint64_t ms = (deadline - r->now + 999999) / 1000000;
    return ms > 3600000 ? 3600000 : (int)ms;
}

static void read_signals(struct run *r)
{
    struct signalfd_siginfo si;
    while (read(r->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
        r->got_signal = true;
}

static void run_loop(struct run *r)
{
    struct epoll_event evs[MAX_EVENTS];
    r->now = now_ns();
    r->t_start = r->now;
    r->next_progress = r->t_start + PROGRESS_INTERVAL_NS;
    if (r->o.seconds > 0) r->t_stop = r->t_start + (uint64_t)(r->o.seconds * 1e9);
    for (unsigned i = 0; i < r->o.parallel; i++)
        queue_push(r, &r->conns[i]);

    for (;;) {
        r->now = now_ns();
        if (r->got_signal && !r->interrupted) {
            r->interrupted = true;
            r->stopping = true;
            r->t_cut = r->now;
            cut_all(r);
        }
        if (!r->stopping && time_is_up(r)) {
            /* Unlike http_load's hard cut, fetches in flight get up to -timeout to finish. */
            r->stopping = true;
            r->t_cut = r->t_stop + r->timeout_ns;
        }
        if (r->o.seconds > 0 && r->stopping && r->now >= r->t_cut) cut_all(r);
        while (r->head && r->head->t_progress + r->timeout_ns <= r->now)
            fail(r, r->head, SL_LG_ERR_TIMEOUT, "timed out (no progress for %g s)", r->o.timeout);
        if (r->o.verbose && r->now >= r->next_progress) {
            fprintf(stderr, "--- %g secs, %llu fetches started, %llu completed, %u current\n",
                    (double)(r->now - r->t_start) / 1e9, (unsigned long long)r->st.started,
                    (unsigned long long)r->finished, r->active);
            while (r->next_progress <= r->now)
                r->next_progress += PROGRESS_INTERVAL_NS;
        }
        drain_queue(r);
        if (r->active == 0 && r->qn == 0) break;

        r->st.sys.epoll_wait++;
        int n = epoll_wait(r->epfd, evs, MAX_EVENTS, wait_ms(r));
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            r->now = now_ns();
            if (evs[i].data.ptr)
                on_event(r, evs[i].data.ptr, evs[i].events);
            else
                read_signals(r);
        }
    }
    r->st.elapsed_s = (double)(r->now - r->t_start) / 1e9;
}

/* --- command line --- */

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen [-checksum] [-verbose] [-keepalive] [-timeout SECS] [-seed N]\n"
            "               [-json FILE] [-copy] [-sequential] [-min-fetches N]\n"
            "               -parallel N (-fetches N | -seconds N) url_file\n"
            "  -parallel N   N fetches in flight at all times (required; -rate is not supported)\n"
            "  -fetches N    stop after N fetches have been started and have finished\n"
            "  -seconds S    stop starting fetches after S seconds; running ones get -timeout\n"
            "                more seconds to finish, the rest are reported as cut-at-end\n"
            "  -timeout T    a fetch without progress for T seconds fails (default 60)\n"
            "  -checksum     compare each body with the first body fetched for its URL\n"
            "  -keepalive    reuse connections (HTTP/1.1 keep-alive)\n"
            "  -seed N       PRNG seed for the URL sequence (default: from the clock)\n"
            "  -json FILE    also write the results as JSON to FILE\n"
            "  -verbose      progress line on stderr every 5 seconds\n"
            "  -copy         read bodies into user space (default: drop them in the kernel,\n"
            "                recv MSG_TRUNC; -checksum always copies)\n"
            "  -sequential   take URLs in list order (wrapping) instead of at random\n"
            "  -min-fetches N  with -seconds: keep starting fetches past S seconds until N\n"
            "                have been started\n"
            "URLs: one per line, http://HOST[:PORT]/path, loopback hosts only.\n"
            "Options may be abbreviated to any prefix (first match in the order above).\n");
}

enum opt_id {
    O_FLAG,  /* sets the bool at field */
    O_COUNT, /* a positive integer, into the uint64_t at field */
    O_PARALLEL,
    O_RATE,
    O_SECONDS,
    O_SEED,
    O_TIMEOUT,
    O_JSON,
    O_HELP,
    O_UNSUPPORTED
};

struct opt_def {
    const char *name;
    int id;
    bool arg;
    size_t field; /* O_FLAG, O_COUNT: where in struct opts the option goes */
};

#define FLAG_OPT(name, member) {name, O_FLAG, false, offsetof(struct opts, member)}
#define COUNT_OPT(name, member) {name, O_COUNT, true, offsetof(struct opts, member)}

/* Order matters: an abbreviation picks the first entry it is a prefix of, as in http_load. */
static const struct opt_def opt_defs[] = {
    FLAG_OPT("checksum", checksum),
    FLAG_OPT("verbose", verbose),
    FLAG_OPT("keepalive", keepalive),
    {"parallel", O_PARALLEL, true, 0},
    {"rate", O_RATE, true, 0},
    COUNT_OPT("fetches", fetches),
    {"seconds", O_SECONDS, true, 0},
    {"seed", O_SEED, true, 0},
    {"timeout", O_TIMEOUT, true, 0},
    {"json", O_JSON, true, 0},
    {"help", O_HELP, false, 0},
    /* After http_load's own options, so their abbreviations keep their meaning. */
    FLAG_OPT("copy", copy),
    FLAG_OPT("sequential", sequential),
    COUNT_OPT("min-fetches", min_fetches),
    {"throttle", O_UNSUPPORTED, false, 0},
    {"proxy", O_UNSUPPORTED, true, 0},
    {"jitter", O_UNSUPPORTED, false, 0},
    {"sip", O_UNSUPPORTED, true, 0},
    {"cipher", O_UNSUPPORTED, true, 0},
};

#define STR_(x) #x
#define STR(x) STR_(x)

/* Says that option d's value v is not what it wants; returns parse_args's status for that. */
static int bad_value(const struct opt_def *d, const char *wants, const char *v)
{
    fprintf(stderr, "loadgen: -%s wants %s, not '%s'\n", d->name, wants, v);
    return 2;
}

static const struct opt_def *find_opt(const char *arg)
{
    const char *name = arg + 1;
    if (*name == '-') name++;
    size_t n = strlen(name);
    if (n == 0) return NULL;
    for (size_t i = 0; i < sizeof opt_defs / sizeof opt_defs[0]; i++)
        if (strncmp(opt_defs[i].name, name, n) == 0) return &opt_defs[i];
    return NULL;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_secs(const char *s, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v) || v <= 0 || v > 1e7) return false;
    *out = v;
    return true;
}

/* Returns 0, or 2 after printing a message (the exit code for usage errors). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (o->url_file) {
                fprintf(stderr, "loadgen: more than one url_file given ('%s', '%s')\n", o->url_file,
                        a);
                return 2;
            }
            o->url_file = a;
            continue;
        }
        const struct opt_def *d = find_opt(a);
        if (!d) {
            fprintf(stderr, "loadgen: unknown option %s\n", a);
            usage();
            return 2;
        }
        const char *v = NULL;
        if (d->arg) {
            if (i + 1 >= argc) {
                fprintf(stderr, "loadgen: -%s needs a value\n", d->name);
                return 2;
            }
            v = argv[++i];
        }
        uint64_t u;
        switch (d->id) {
        case O_FLAG:
            *(bool *)((char *)o + d->field) = true;
            break;
        case O_COUNT:
            if (!parse_u64(v, &u) || u < 1) return bad_value(d, "a positive integer", v);
            *(uint64_t *)((char *)o + d->field) = u;
            break;
        case O_PARALLEL:
            if (!parse_u64(v, &u) || u < 1 || u > PARALLEL_MAX)
                return bad_value(d, "1.." STR(PARALLEL_MAX), v);
            o->parallel = (unsigned)u;
            break;
        case O_RATE:
            fprintf(stderr, "loadgen: -rate is not supported; use -parallel N (a closed loop of N "
                            "fetches in flight)\n");
            return 2;
        case O_SECONDS:
            if (!parse_secs(v, &o->seconds)) return bad_value(d, "a positive number", v);
            break;
        case O_SEED:
            if (!parse_u64(v, &o->seed)) return bad_value(d, "a non-negative integer", v);
            o->seed_set = true;
            break;
        case O_TIMEOUT:
            if (!parse_secs(v, &o->timeout)) return bad_value(d, "a positive number", v);
            break;
        case O_JSON:
            o->json = v;
            break;
        case O_HELP:
            usage();
            return 2;
        default:
            fprintf(stderr, "loadgen: http_load's -%s is not supported\n", d->name);
            return 2;
        }
    }
    if (!o->parallel) {
        fprintf(stderr, "loadgen: -parallel N is required\n");
        usage();
        return 2;
    }
    if (!o->fetches && o->seconds <= 0) {
        fprintf(stderr, "loadgen: one of -fetches N or -seconds N is required\n");
        usage();
        return 2;
    }
    if (o->min_fetches && o->seconds <= 0) {
        fprintf(stderr, "loadgen: -min-fetches only makes sense with -seconds\n");
        return 2;
    }
    if (o->min_fetches && o->fetches && o->min_fetches > o->fetches) {
        fprintf(stderr, "loadgen: -min-fetches %llu is more than -fetches %llu\n",
                (unsigned long long)o->min_fetches, (unsigned long long)o->fetches);
        return 2;
    }
    /* The checksum needs every body byte in user space. */
    if (o->checksum) o->copy = true;
    if (!o->url_file) {
        fprintf(stderr, "loadgen: no url_file given\n");
        usage();
        return 2;
    }
    return 0;
}

static void raise_nofile(unsigned parallel)
{
    /* One socket per slot, plus stdio, the epoll fd, the JSON file and some slack. */
    rlim_t need = (rlim_t)parallel + 32;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) die("getrlimit: %s", strerror(errno));
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need) return;
    if (rl.rlim_cur == RLIM_INFINITY) return;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        die("-parallel %u needs %llu file descriptors, but the hard limit is %llu", parallel,
            (unsigned long long)need, (unsigned long long)rl.rlim_max);
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) die("setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    struct run *r = calloc(1, sizeof *r);
    if (!r) die("out of memory");
    r->o = o;

    char err[SL_LG_URL_MAX + 512];
    rc = sl_lg_urls_load(&r->urls, r->o.url_file, r->o.keepalive, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "loadgen: %s\n", err);
        free(r);
        return 2;
    }
    if (!r->o.seed_set) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* Kept below 2^53 so the seed survives a round trip through any JSON reader. */
        r->o.seed = ((uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid();
        r->o.seed &= (1ULL << 53) - 1;
    }
    uint64_t x = r->o.seed;
    for (int i = 0; i < 4; i++)
        r->rng[i] = splitmix64(&x);

    raise_nofile(r->o.parallel);
    r->timeout_ns = (uint64_t)(r->o.timeout * 1e9);
    r->refs = calloc(r->urls.n, sizeof *r->refs);
    r->conns = calloc(r->o.parallel, sizeof *r->conns);
    r->queue = calloc(2 * (size_t)r->o.parallel, sizeof *r->queue);
    r->scratch = malloc(SCRATCH_SIZE);
    if (!r->refs || !r->conns || !r->queue || !r->scratch) die("out of memory");
    for (unsigned i = 0; i < r->o.parallel; i++)
        r->conns[i].fd = -1;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) die("epoll_create1: %s", strerror(errno));

    /* SIGINT/SIGTERM arrive as an event in the epoll set: no handler can interrupt a half-updated
     * counter, and unlike epoll_pwait (which leaves a signal pending whenever events are ready)
     * they are noticed promptly under full load. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t block, oldmask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &oldmask);
    r->sigfd = signalfd(-1, &block, SFD_NONBLOCK | SFD_CLOEXEC);
    if (r->sigfd < 0) die("signalfd: %s", strerror(errno));
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->sigfd, &sev) < 0)
        die("epoll_ctl: %s", strerror(errno));

    if (r->o.verbose)
        fprintf(stderr, "loadgen %s: %zu URLs, %zu target%s, seed %llu\n", SL_VERSION, r->urls.n,
                r->urls.ntargets, r->urls.ntargets == 1 ? "" : "s", (unsigned long long)r->o.seed);

    run_loop(r);
    /* From here on a (second) Ctrl-C just ends the process. */
    sigprocmask(SIG_SETMASK, &oldmask, NULL);

    for (unsigned i = 0; i < r->o.parallel; i++)
        close_conn(r, &r->conns[i]);
    sl_lg_stats_finish(&r->st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct sl_lg_run_info info = {
        .parallel = r->o.parallel,
        .fetches_limit = r->o.fetches,
        .seconds_limit = r->o.seconds,
        .timeout_s = r->o.timeout,
        .seed = r->o.seed,
        .keepalive = r->o.keepalive,
        .checksum = r->o.checksum,
        .copy = r->o.copy,
        .sequential = r->o.sequential,
        .min_fetches = r->o.min_fetches,
        .interrupted = r->interrupted,
        .urls = r->urls.n,
        .cpu_user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
        .cpu_sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
    };
    sl_lg_report_text(stdout, &r->st, &info);
    if (fflush(stdout) != 0) die("writing the report: %s", strerror(errno));

    int exit_code = r->interrupted ? 1 : 0;
    if (r->o.json) {
        FILE *f = fopen(r->o.json, "we");
        if (!f) die("%s: %s", r->o.json, strerror(errno));
        sl_lg_report_json(f, &r->st, &info);
        if (ferror(f) | fclose(f)) die("%s: write failed", r->o.json);
    }

    close(r->sigfd);
    close(r->epfd);
    sl_lg_stats_free(&r->st);
    sl_lg_urls_free(&r->urls);
    free(r->refs);
    free(r->conns);
    free(r->queue);
    free(r->scratch);
    free(r);
    return exit_code;
}
