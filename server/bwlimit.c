/* Bandwidth limits (connection.kbytes-per-second, server.kbytes-per-second), as lighttpd 1.4 has
 * them, without giving up sendfile() or the asynchronous backends.
 *
 * The limiter decides only how many bytes a connection's next send may carry and when to try
 * again: connection.c asks sl_bw_budget before it writes, passes the answer to the network
 * backend as the turn's byte budget (the backend sends at most about that much, from the file
 * or from its block buffer, as it would anyway), reports what went out with sl_bw_sent, and a
 * per-connection timer resumes a connection that has to wait. Nothing is copied, nothing else
 * waits: a limited connection is simply not written to until its timer fires, and its write
 * timeout is held off meanwhile (sl_bw_waiting).
 *
 * What the keys mean is lighttpd's. connection.kbytes-per-second limits each connection; 0 is
 * no limit. server.kbytes-per-second limits all the connections whose request's config takes
 * the value from one and the same assignment: set at the top level it is the whole server's
 * limit, inside $SERVER["socket"] that listener's, inside $HTTP["host"] that virtual host's,
 * inside $HTTP["url"] =~ "..." that of those URLs; each assignment is a bucket of its own
 * (lighttpd keeps a counter per assignment), and 0 inside a block lifts an outer limit for its
 * requests. KB are KiB (lighttpd multiplies by 1024); values above 65535 are refused (lighttpd
 * keeps the value in 16 bits and silently wraps it). Everything written to the client counts,
 * response heads included, as in lighttpd, whose limit counts all bytes written on the
 * connection. A connection's bucket lives as long as the connection (keep-alive requests do not
 * start with a fresh allowance); the rate is the current request's. A graceful stop (SIGTERM,
 * SIGINT, or the old server of a graceful restart, SIGUSR1) lifts every limit, as lighttpd's
 * does, so that limited transfers finish within server.graceful-shutdown-timeout.
 *
 * The buckets are GCRA buckets (bwlimit.h): one 64-bit time per bucket. A server bucket is
 * shared by every loop (server.max-worker > 1) and updated with compare-and-swap, not split
 * into per-loop shares: shares would hold bandwidth back for loops whose connections are idle
 * (the kernel spreads connections over loops by hash, not by what they download), and the
 * contention is one CAS per grant of a quantum (1/32 s of traffic), which no loop notices.
 * Connections waiting for a shared bucket reserve their next quantum in it (the bucket is
 * charged ahead, the connection waits until the reserved time): the reservations line up in
 * the bucket's time, so waiters are served in turn, first come, first served, on any loop, and
 * one fast connection cannot take what several slow ones wait for. A reservation not sent
 * (the socket was full, the response ended) is given back.
 */
#include "bwlimit.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "loop.h"
#include "module.h"
#include "status.h"
#include "threadpool.h"

#define NS 1000000000ull
#define MAX_KB 65535

/* ---- the bucket ---- */

/* Nanoseconds n bytes take at the bucket's rate, rounded up. */
static uint64_t ns_for(const sl_bucket *b, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)n * NS + b->rate - 1) / b->rate);
}

/* Bytes that ns nanoseconds bring, rounded down. */
static uint64_t bytes_for(const sl_bucket *b, uint64_t ns)
{
    return (uint64_t)((unsigned __int128)ns * b->rate / NS);
}

void sl_bucket_set_rate(sl_bucket *b, uint64_t rate)
{
    b->rate = rate ? rate : 1;
    uint64_t q = b->rate / 32;
    b->quantum = q < 512 ? 512 : q > 256 * 1024 ? 256 * 1024 : q;
    b->burst = b->rate / 8 > b->quantum ? b->rate / 8 : b->quantum;
}

uint64_t sl_bucket_avail(const sl_bucket *b, uint64_t now)
{
    uint64_t tat = __atomic_load_n(&b->tat, __ATOMIC_RELAXED);
    if (tat <= now) return b->burst;
    uint64_t burst_ns = ns_for(b, b->burst), debt = tat - now;
    if (debt >= burst_ns) return 0;
    uint64_t n = bytes_for(b, burst_ns - debt);
    return n < b->burst ? n : b->burst;
}

uint64_t sl_bucket_wait(const sl_bucket *b, uint64_t now, uint64_t n)
{
    if (n > b->burst) n = b->burst;
    uint64_t tat = __atomic_load_n(&b->tat, __ATOMIC_RELAXED);
    /* n bytes are there once the debt beyond the burst has run off: at tat + T(n) - T(burst). */
    uint64_t need = tat + ns_for(b, n), burst_ns = ns_for(b, b->burst);
    if (need <= burst_ns || need - burst_ns <= now) return 0;
    return need - burst_ns - now;
}

/* tat becomes max(tat, now) + T(n): a full bucket never holds more than its burst. Returns the
 * new tat. */
static uint64_t take(sl_bucket *b, uint64_t now, uint64_t n)
{
    uint64_t d = ns_for(b, n);
    uint64_t old = __atomic_load_n(&b->tat, __ATOMIC_RELAXED), nu;
    do {
        nu = (old > now ? old : now) + d;
    } while (!__atomic_compare_exchange_n(&b->tat, &old, nu, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return nu;
}

void sl_bucket_charge(sl_bucket *b, uint64_t now, uint64_t n)
{
    if (n) take(b, now, n);
}

void sl_bucket_reserve(sl_bucket *b, uint64_t now, uint64_t want, uint64_t *at)
{
    uint64_t tat = take(b, now, want), burst_ns = ns_for(b, b->burst);
    *at = tat > burst_ns ? tat - burst_ns : 0;
}

void sl_bucket_refund(sl_bucket *b, uint64_t n)
{
    if (!n) return;
    uint64_t d = ns_for(b, n);
    uint64_t old = __atomic_load_n(&b->tat, __ATOMIC_RELAXED), nu;
    do {
        nu = old > d ? old - d : 0;
    } while (!__atomic_compare_exchange_n(&b->tat, &old, nu, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

/* ---- config ---- */

/* One server.kbytes-per-second assignment: its bucket is shared state, changed by every loop
 * (atomically), although the config holds it as a const pointer. */
typedef struct bw_server {
    sl_bucket b;
    long kb; /* 0: this block lifts the limit */
} bw_server;

typedef struct bw_conf {
    const bw_server *server; /* server.kbytes-per-second; NULL: none */
    long conn_kb;            /* connection.kbytes-per-second; 0: none */
} bw_conf;

#define SL_KEY_CONF bw_conf

sl_module sl_mod_bwlimit;

#define BWCONF(c) SL_MODCONF((c)->conf, sl_mod_bwlimit, bw_conf)

/* Some config of this process sets a limit: until one does, sl_bw_budget costs one test. Set at
 * load, before the loops start. */
static bool bw_configured;

static int check_kb(const char *key, const sl_cval *v, const sl_key_ctx *ctx)
{
    /* The words of the config layer's own checks of integer keys (server.kbytes-per-second is
     * a prepared value, so the layer leaves them to us). */
    if (v->type != SL_CV_INT)
        return sl_key_fail(ctx, "'%s' must be an integer, not %s", key, sl_cval_type_name(v->type));
    if (v->num < 0) return sl_key_fail(ctx, "'%s' must not be negative", key);
    if (v->num > MAX_KB) {
        snprintf(ctx->err, ctx->errlen,
                 "'%s' %lld is out of range (0..%d KiB per second; 0: no limit; lighttpd keeps "
                 "only 16 bits of it)",
                 key, v->num, MAX_KB);
        return -1;
    }
    if (v->num > 0) bw_configured = true;
    return 0;
}

static int prep_conn(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    return check_kb("connection.kbytes-per-second", v, ctx);
}

static int prep_server(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (check_kb("server.kbytes-per-second", v, ctx) < 0) return -1;
    bw_server *s = calloc(1, sizeof *s);
    if (!s) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    s->kb = (long)v->num;
    if (s->kb) sl_bucket_set_rate(&s->b, (uint64_t)s->kb << 10);
    *out = s; /* also for 0: the block's requests have no server limit */
    return 0;
}

/* ---- connections ---- */

/* Counters for the status page (relaxed atomics: any loop adds, any reads). */
static uint64_t n_waits, n_bytes;
static int64_t n_waiting;

/* A limited connection's state, made when it first meets a limit, freed when it closes. */
struct sl_bwconn {
    sl_conn *c;
    struct event timer;   /* resumes the connection when its budget is back */
    bool waiting;         /* the timer is armed */
    bool own_used;        /* the last grant came from own: charge it what went out */
    bool res_used;        /* ... and from the reservation */
    sl_bucket own;        /* connection.kbytes-per-second (rate 0: not set yet) */
    bw_server *res_from;  /* the bucket the reservation is in */
    uint64_t reserved;    /* bytes reserved there, not sent yet */
    uint64_t ready_at;    /* ns when they may go */
};

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sl_bwconn *bw = arg;
    if (bw->waiting) __atomic_fetch_sub(&n_waiting, 1, __ATOMIC_RELAXED);
    bw->waiting = false;
    sl_conn_resume(bw->c);
}

static struct sl_bwconn *bw_get(sl_conn *c)
{
    if (c->bw) return c->bw;
    struct sl_bwconn *bw = calloc(1, sizeof *bw);
    if (!bw) return NULL;
    bw->c = c;
    evtimer_assign(&bw->timer, c->loop->base, on_timer, bw);
    c->bw = bw;
    return bw;
}

/* Wait ns nanoseconds (at least 1 µs: libevent rounds up to its clock) for the budget. */
static size_t bw_wait(struct sl_bwconn *bw, uint64_t ns)
{
    struct timeval tv = {(time_t)(ns / NS), (suseconds_t)((ns % NS + 999) / 1000)};
    if (tv.tv_usec >= 1000000) {
        tv.tv_sec++;
        tv.tv_usec -= 1000000;
    }
    if (!tv.tv_sec && !tv.tv_usec) tv.tv_usec = 1;
    if (evtimer_add(&bw->timer, &tv) < 0) return 1; /* cannot wait: let a byte go */
    bw->waiting = true;
    bw->own_used = bw->res_used = false;
    __atomic_fetch_add(&n_waits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_waiting, 1, __ATOMIC_RELAXED);
    return 0;
}

static void unwait(struct sl_bwconn *bw)
{
    if (!bw->waiting) return;
    event_del(&bw->timer);
    bw->waiting = false;
    __atomic_fetch_sub(&n_waiting, 1, __ATOMIC_RELAXED);
}

static void give_back(struct sl_bwconn *bw)
{
    if (bw->reserved) sl_bucket_refund(&bw->res_from->b, bw->reserved);
    bw->reserved = 0;
    bw->res_from = NULL;
    bw->own_used = bw->res_used = false;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

size_t sl_bw_budget(sl_conn *c, size_t max)
{
    if (!bw_configured) return max;
    const bw_conf *bc = BWCONF(c);
    bw_server *sv = bc->server && bc->server->kb ? (bw_server *)bc->server : NULL;
    struct sl_bwconn *bw = c->bw;
    if (bw) bw->own_used = bw->res_used = false;
    if ((!sv && !bc->conn_kb) || c->loop->stopping || !c->out.head) return max;
    if (!bw && !(bw = bw_get(c))) return max; /* out of memory: unlimited beats stuck */
    if (bw->waiting) return 0;
    uint64_t now = sl_now_ns(), n = max;
    if (bc->conn_kb) {
        uint64_t rate = (uint64_t)bc->conn_kb << 10;
        if (bw->own.rate != rate) sl_bucket_set_rate(&bw->own, rate);
        uint64_t need = min64(bw->own.quantum, max), avail = sl_bucket_avail(&bw->own, now);
        if (avail < need) return bw_wait(bw, sl_bucket_wait(&bw->own, now, need));
        n = min64(n, avail);
    }
    if (sv) {
        if (bw->reserved && bw->res_from != sv) give_back(bw); /* another block's bucket now */
        if (!bw->reserved) {
            bw->reserved = min64(n, sv->b.quantum);
            bw->res_from = sv;
            sl_bucket_reserve(&sv->b, now, bw->reserved, &bw->ready_at);
        }
        if (bw->ready_at > now) return bw_wait(bw, bw->ready_at - now);
        n = min64(n, bw->reserved);
        bw->res_used = true;
    }
    bw->own_used = bc->conn_kb != 0;
    return (size_t)n;
}

void sl_bw_sent(sl_conn *c, uint64_t n)
{
    struct sl_bwconn *bw = c->bw;
    if (!bw || !n || (!bw->own_used && !bw->res_used)) return;
    uint64_t now = sl_now_ns();
    if (bw->own_used) sl_bucket_charge(&bw->own, now, n);
    if (bw->res_used) {
        /* A send may overshoot its grant a little (a backend sends whole pages): the bucket
         * is charged the rest, which delays the next grant by as much. */
        if (n <= bw->reserved) {
            bw->reserved -= n;
        } else {
            sl_bucket_charge(&bw->res_from->b, now, n - bw->reserved);
            bw->reserved = 0;
        }
    }
    bw->own_used = bw->res_used = false;
    __atomic_fetch_add(&n_bytes, n, __ATOMIC_RELAXED);
}

bool sl_bw_waiting(const sl_conn *c)
{
    return c->bw && c->bw->waiting;
}

void sl_bw_stop(sl_conn *c)
{
    struct sl_bwconn *bw = c->bw;
    if (!bw || !bw->waiting) return;
    /* Resume from the loop, not from inside the caller's walk over the connections. */
    event_del(&bw->timer);
    event_active(&bw->timer, EV_TIMEOUT, 1);
}

/* The request ended (answered or aborted): its reservation goes back; the connection's own
 * bucket stays for its next request. */
static void bw_request_done(sl_conn *c)
{
    if (!c->bw) return;
    unwait(c->bw);
    give_back(c->bw);
}

static void bw_conn_close(sl_conn *c)
{
    struct sl_bwconn *bw = c->bw;
    if (!bw) return;
    unwait(bw);
    event_del(&bw->timer); /* also one sl_bw_stop made active */
    give_back(bw);
    free(bw);
    c->bw = NULL;
}

static void bw_status(struct sl_server *srv, sl_status_out *o)
{
    (void)srv;
    if (!bw_configured) return;
    int64_t w = __atomic_load_n(&n_waiting, __ATOMIC_RELAXED);
    sl_status_list(o, "bandwidth", "limit");
    sl_status_item(o, "kbytes-per-second");
    sl_status_num(o, "bytes_limited", __atomic_load_n(&n_bytes, __ATOMIC_RELAXED), true);
    sl_status_num(o, "waits", __atomic_load_n(&n_waits, __ATOMIC_RELAXED), true);
    sl_status_num(o, "waiting", w > 0 ? (uint64_t)w : 0, false);
    sl_status_item_end(o);
    sl_status_list_end(o);
}

/* lighttpd's core keys: loaded whatever server.modules says, and no module name loads it. */
sl_module sl_mod_bwlimit = {
    SL_MODULE_HEAD("bwlimit", bw_conf),
    .keys = SL_KEYS(
        SL_KEY_PREP("connection.kbytes-per-second", SL_KEY_INT, conn_kb, prep_conn, NULL),
        SL_KEY_PREP("server.kbytes-per-second", SL_KEY_VALUE, server, prep_server, free)),
    .always = true,
    .request_done = bw_request_done,
    .conn_close = bw_conn_close,
    .status = bw_status,
};
