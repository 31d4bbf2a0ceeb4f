/* Status page (status.status-url): what the server is doing now, summed over every loop.
 *
 * Connections by state (reading a request, writing, waiting on the disk, waiting on a backend,
 * idle keep-alive, closing), requests, bytes and responses by status class, the network backend
 * and the shared thread pools' queue depths with queue-wait percentiles, one line per loop, and
 * whatever the other modules add through their status() hooks (proxy-core's backends). Counters
 * are read from every loop without locks (each has one writer); the connection states of the
 * loop answering are counted now, those of the others as of their last once-a-second sweep. Four
 * renderings of the same numbers: text for people, `?json` for programs, `?format=prometheus`
 * for a Prometheus scrape and `?auto` in lighttpd's mod_status format for the monitoring tools
 * that parse it. status.allow-networks limits who may ask (403 for others).
 */
#include "mod_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addr.h"
#include "connection.h"
#include "fdcache.h"
#include "loop.h"
#include "queue.h"
#include "server.h"
#include "status.h"
#include "threadpool.h"

typedef struct status_conf {
    const char *url;          /* status.status-url; NULL: no status page */
    sl_strlist allow;         /* status.allow-networks; empty: everyone */
} status_conf;

#define SL_KEY_CONF status_conf

#define SCONF(c) SL_MODCONF((c)->conf, sl_mod_status, status_conf)

typedef struct totals {
    sl_conn_counts conns;
    uint64_t requests, bytes, responses[6];
    unsigned reads_inflight, max_reads;
} totals;

static void add_counts(sl_conn_counts *a, const sl_conn_counts *b)
{
    a->reading += b->reading;
    a->writing += b->writing;
    a->disk += b->disk;
    a->backend += b->backend;
    a->keepalive += b->keepalive;
    a->closing += b->closing;
    a->total += b->total;
}

static void loop_counts(sl_loop *me, sl_loop *l, sl_conn_counts *out)
{
    if (l == me) {
        sl_loop_count_conns(l, out);
        return;
    }
    const unsigned *src = &l->stats.conns.reading;
    unsigned *dst = &out->reading;
    for (size_t i = 0; i < sizeof *out / sizeof(unsigned); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

static void sum(sl_loop *me, totals *t)
{
    memset(t, 0, sizeof *t);
    sl_server *srv = me->srv;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        sl_loop *l = srv->loops[i];
        sl_conn_counts cc;
        loop_counts(me, l, &cc);
        add_counts(&t->conns, &cc);
        t->requests += SL_STAT_GET(l->stats.requests);
        t->bytes += SL_STAT_GET(l->stats.bytes);
        for (int k = 0; k < 6; k++) t->responses[k] += SL_STAT_GET(l->stats.responses[k]);
        t->reads_inflight += __atomic_load_n(&l->io.reads_inflight, __ATOMIC_RELAXED);
        t->max_reads += l->io.max_reads;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Queue-wait percentiles (microseconds) over the pool's latest waits. */
static void pool_pct(sl_tpool_stats *st, uint32_t *p50, uint32_t *p90, uint32_t *p99)
{
    *p50 = *p90 = *p99 = 0;
    unsigned n = st->n_wait_samples;
    if (!n) return;
    qsort(st->wait_us, n, sizeof st->wait_us[0], cmp_u32);
    *p50 = st->wait_us[(n - 1) * 50 / 100];
    *p90 = st->wait_us[(n - 1) * 90 / 100];
    *p99 = st->wait_us[(n - 1) * 99 / 100];
}

static void pools(sl_status_out *o, sl_server *srv)
{
    struct {
        const char *name;
        sl_tpool *p;
    } ps[] = {{"stat", srv->stat_pool}, {"read", srv->read_pool}};
    sl_status_list(o, "pools", "pool");
    for (size_t i = 0; i < 2; i++) {
        if (!ps[i].p) continue;
        sl_tpool_stats *st = malloc(sizeof *st);
        if (!st) continue;
        sl_tpool_get_stats(ps[i].p, st);
        uint32_t p50, p90, p99;
        pool_pct(st, &p50, &p90, &p99);
        sl_status_item(o, ps[i].name);
        sl_status_num(o, "threads", st->threads, false);
        sl_status_num(o, "queued", st->queued, false);
        sl_status_num(o, "running", st->running, false);
        sl_status_num(o, "completed", st->completed, true);
        sl_status_num(o, "rejected", st->rejected, true);
        sl_status_num(o, "wait_us_p50", p50, false);
        sl_status_num(o, "wait_us_p90", p90, false);
        sl_status_num(o, "wait_us_p99", p99, false);
        sl_status_num(o, "wait_us_max", st->wait_ns_max / 1000, false);
        sl_status_item_end(o);
        free(st);
    }
    sl_status_list_end(o);
}

static void open_files(sl_status_out *o, sl_server *srv)
{
    sl_status_list(o, "caches", "cache");
    if (srv->fdc) {
        sl_fdc_stats st;
        sl_fdc_get_stats(srv->fdc, &st);
        sl_status_item(o, sl_fdc_mode_of(srv->fdc) == SL_FDC_INOTIFY ? "open-files-inotify"
                                                                     : "open-files-simple");
        sl_status_num(o, "entries", st.entries, false);
        sl_status_num(o, "watches", st.watches, false);
        sl_status_num(o, "hits", st.hits, true);
        sl_status_num(o, "misses", st.misses, true);
        sl_status_num(o, "inserts", st.inserts, true);
        sl_status_num(o, "invalidations", st.invalidations, true);
        sl_status_num(o, "evictions", st.evictions, true);
        sl_status_num(o, "deferred", st.deferred, true);
        sl_status_num(o, "rests", st.rests, true);
        sl_status_num(o, "resting", st.resting, false);
        sl_status_item_end(o);
    }
    sl_status_list_end(o);
}

static void loops(sl_status_out *o, sl_loop *me)
{
    sl_server *srv = me->srv;
    sl_status_list(o, "loops", "loop");
    for (unsigned i = 0; i < srv->n_loops; i++) {
        sl_loop *l = srv->loops[i];
        char name[16];
        snprintf(name, sizeof name, "%u", l->id);
        sl_conn_counts cc;
        loop_counts(me, l, &cc);
        sl_status_item(o, name);
        sl_status_num(o, "connections", cc.total, false);
        /* server.worker-cpu-affinity: the CPU the loop is bound to, when it is. */
        sl_status_flag(o, "bound", l->cpu >= 0);
        sl_status_num(o, "cpu", l->cpu >= 0 ? (uint64_t)l->cpu : 0, false);
        sl_status_num(o, "accepted", SL_STAT_GET(l->stats.accepted), true);
        sl_status_num(o, "requests", SL_STAT_GET(l->stats.requests), true);
        sl_status_num(o, "bytes", SL_STAT_GET(l->stats.bytes), true);
        sl_status_num(o, "reads_inflight", __atomic_load_n(&l->io.reads_inflight, __ATOMIC_RELAXED),
                      false);
        if (l->io.memo) {
            /* hybrid: sends on the residency memo's word, those the kernel was asked about
             * (cachestat) instead, the memo's audits, those that found pages gone, and the
             * trust time they leave */
            sl_resmemo_stats ms;
            sl_resmemo_get_stats(l->io.memo, &ms);
            sl_status_num(o, "cache_trusted", ms.trusted, true);
            sl_status_num(o, "cache_checked", __atomic_load_n(&l->io.memo_checks, __ATOMIC_RELAXED),
                          true);
            sl_status_num(o, "cache_audits", ms.audits, true);
            sl_status_num(o, "cache_audit_misses", ms.misses, true);
            sl_status_num(o, "cache_trust_ms", ms.trust_ms, false);
        }
        sl_status_item_end(o);
    }
    sl_status_list_end(o);
}

static void modules(sl_status_out *o, sl_server *srv)
{
    for (size_t i = 0; i < srv->cs->n_mods; i++)
        if (srv->cs->mods[i]->status) srv->cs->mods[i]->status(srv, o);
}

static void render(sl_loop *me, sl_status_out *o)
{
    sl_server *srv = me->srv;
    totals t;
    sum(me, &t);
    const sl_conn_counts *s = &t.conns;
    const char *nb = srv->nb ? srv->nb->name : "-";
    long uptime = (long)(time(NULL) - srv->started);
    switch (o->fmt) {
    case SL_STATUS_TEXT:
        sl_status_printf(o, "seekless status\n\nuptime %lds, %u loop(s)\nconnections %u: reading %u, "
                         "writing %u, waiting-disk %u, waiting-backend %u, keep-alive %u, "
                         "closing %u\n",
                         uptime, srv->n_loops, s->total, s->reading, s->writing, s->disk,
                         s->backend, s->keepalive, s->closing);
        sl_status_printf(o, "requests %llu, bytes %llu, 1xx %llu 2xx %llu 3xx %llu 4xx %llu 5xx %llu\n",
                         (unsigned long long)t.requests, (unsigned long long)t.bytes,
                         (unsigned long long)t.responses[1], (unsigned long long)t.responses[2],
                         (unsigned long long)t.responses[3], (unsigned long long)t.responses[4],
                         (unsigned long long)t.responses[5]);
        sl_status_printf(o, "network-backend %s, reads in flight %u of %u\n", nb, t.reads_inflight,
                         t.max_reads);
        pools(o, srv);
        open_files(o, srv);
        loops(o, me);
        modules(o, srv);
        return;
    case SL_STATUS_JSON:
        sl_status_printf(o, "{\"uptime\":%ld,\"connections\":{\"total\":%u,\"reading\":%u,"
                         "\"writing\":%u,\"waiting_disk\":%u,\"waiting_backend\":%u,"
                         "\"keepalive\":%u,\"closing\":%u},",
                         uptime, s->total, s->reading, s->writing, s->disk, s->backend,
                         s->keepalive, s->closing);
        sl_status_printf(o, "\"requests\":%llu,\"bytes\":%llu,\"responses\":{\"1xx\":%llu,"
                         "\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},",
                         (unsigned long long)t.requests, (unsigned long long)t.bytes,
                         (unsigned long long)t.responses[1], (unsigned long long)t.responses[2],
                         (unsigned long long)t.responses[3], (unsigned long long)t.responses[4],
                         (unsigned long long)t.responses[5]);
        sl_status_printf(o, "\"network_backend\":\"%s\",\"reads_inflight\":%u,\"max_reads\":%u",
                         nb, t.reads_inflight, t.max_reads);
        o->n_top = 1;
        pools(o, srv);
        open_files(o, srv);
        loops(o, me);
        modules(o, srv);
        sl_status_printf(o, "}\n");
        return;
    case SL_STATUS_PROM: {
        sl_status_printf(o, "# TYPE seekless_connections gauge\n");
        const char *st[] = {"reading", "writing", "waiting_disk", "waiting_backend", "keepalive",
                            "closing"};
        unsigned v[] = {s->reading, s->writing, s->disk, s->backend, s->keepalive, s->closing};
        for (size_t i = 0; i < 6; i++)
            sl_status_printf(o, "seekless_connections{state=\"%s\"} %u\n", st[i], v[i]);
        sl_status_printf(o, "# TYPE seekless_requests_total counter\nseekless_requests_total %llu\n",
                         (unsigned long long)t.requests);
        sl_status_printf(o, "# TYPE seekless_bytes_sent_total counter\nseekless_bytes_sent_total "
                         "%llu\n",
                         (unsigned long long)t.bytes);
        sl_status_printf(o, "# TYPE seekless_responses_total counter\n");
        for (int k = 1; k <= 5; k++)
            sl_status_printf(o, "seekless_responses_total{class=\"%dxx\"} %llu\n", k,
                             (unsigned long long)t.responses[k]);
        sl_status_printf(o, "# TYPE seekless_reads_inflight gauge\nseekless_reads_inflight %u\n",
                         t.reads_inflight);
        sl_status_printf(o, "seekless_uptime_seconds %ld\n", uptime);
        pools(o, srv);
        open_files(o, srv);
        loops(o, me);
        modules(o, srv);
        return;
    }
    }
}

/* lighttpd's ?auto: the lines monitoring tools (collectd, Munin, Zabbix templates) parse. */
static void render_auto(sl_loop *me, sl_status_out *o)
{
    sl_server *srv = me->srv;
    totals t;
    sum(me, &t);
    const sl_conn_counts *s = &t.conns;
    long uptime = (long)(time(NULL) - srv->started);
    unsigned busy = s->total - s->keepalive;
    sl_status_printf(o, "Total Accesses: %llu\nTotal kBytes: %llu\nUptime: %ld\n",
                     (unsigned long long)t.requests, (unsigned long long)(t.bytes / 1024), uptime);
    sl_status_printf(o, "BusyServers: %u\nIdleServers: %u\n", busy, s->keepalive);
    /* One character per connection, as lighttpd: r read, W write, h handle (disk or backend),
     * k keep-alive, C closing. */
    sl_status_printf(o, "Scoreboard: ");
    char board[256];
    size_t n = 0;
    unsigned counts[] = {s->reading, s->writing, s->disk + s->backend, s->keepalive, s->closing};
    const char ch[] = {'r', 'W', 'h', 'k', 'C'};
    for (size_t i = 0; i < 5; i++)
        for (unsigned k = 0; k < counts[i]; k++) {
            board[n++] = ch[i];
            if (n == sizeof board) {
                sl_chunkq_append_mem(o->q, board, n);
                n = 0;
            }
        }
    board[n++] = '\n';
    sl_chunkq_append_mem(o->q, board, n);
}

static sl_hresult status_handle(sl_conn *c)
{
    const status_conf *sc = SCONF(c);
    if (!sc->url || strcmp(sc->url, c->path) != 0) return SL_GO_ON;
    if (sc->allow.n) {
        bool ok = false;
        for (size_t i = 0; i < sc->allow.n && !ok; i++)
            ok = sl_cidr_match(sc->allow.v[i], (const struct sockaddr *)&c->peer);
        if (!ok) {
            c->status = 403;
            return SL_ERROR;
        }
    }
    if (c->req.method != SL_METHOD_GET && c->req.method != SL_METHOD_HEAD) {
        c->status = sl_method_refused_status(c->req.method);
        return SL_ERROR;
    }
    sl_status_fmt f = SL_STATUS_TEXT;
    bool is_auto = !strcmp(c->query, "auto");
    if (!strcmp(c->query, "json")) f = SL_STATUS_JSON;
    if (!strcmp(c->query, "format=prometheus")) f = SL_STATUS_PROM;
    sl_chunkq body = {0};
    sl_status_out o = {.q = &body, .fmt = f};
    if (is_auto)
        render_auto(c->loop, &o);
    else
        render(c->loop, &o);
    uint64_t len = sl_chunkq_length(&body);
    sl_resp_begin(c, 200);
    const char *ct = f == SL_STATUS_JSON   ? "application/json"
                     : f == SL_STATUS_PROM ? "text/plain; version=0.0.4"
                                           : "text/plain; charset=utf-8";
    sl_resp_header_static(c, "Content-Type", 12, ct, strlen(ct));
    sl_resp_header_static(c, "Cache-Control", 13, "no-store", 8);
    sl_resp_end_headers(c, len);
    if (c->req.method == SL_METHOD_HEAD) {
        sl_chunkq_clear(&body);
    } else if (body.head) {
        /* Move the body's chunks behind whatever is queued. */
        SL_QUEUE_APPEND_CHAIN(c->out.head, c->out.tail, body.head, body.tail, next);
    }
    return SL_FINISHED;
}

static int prep_url(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->str[0] == '/') return 0;
    snprintf(ctx->err, ctx->errlen, "status.status-url must start with '/'");
    return -1;
}

static int prep_allow(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    for (size_t i = 0; i < v->n_items; i++) {
        unsigned char net[16];
        int fam, bits;
        if (sl_cidr_parse(v->items[i].val->str, net, &fam, &bits) < 0) {
            snprintf(ctx->err, ctx->errlen,
                     "status.allow-networks: \"%s\" is not a network (want \"ip/bits\" or \"ip\")",
                     v->items[i].val->str);
            return -1;
        }
    }
    return 0;
}

sl_module sl_mod_status = {
    SL_MODULE_HEAD("status", status_conf, "mod_status"),
    .keys = SL_KEYS(
        SL_KEY_PREP("status.allow-networks", SL_KEY_STRLIST, allow, prep_allow, NULL),
        SL_KEY_PREP("status.status-url", SL_KEY_STRING, url, prep_url, NULL)),
    .handle = status_handle,
};
