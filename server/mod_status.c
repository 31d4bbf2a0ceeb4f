/* Status page (status.status-url): what the server is doing now.
 *
 * Connections by state (reading a request, writing, waiting on the disk, waiting on a backend,
 * idle keep-alive), requests and bytes served and responses by status class, per-backend
 * requests in flight and failures (from proxy-core, through the server's backend_stats hook), and
 * the thread pools' queue depths with queue-wait percentiles over their latest waits. Three
 * renderings of the same snapshot: text for people, `?json` for programs, `?format=prometheus`
 * for a Prometheus scrape. status.allow-networks limits who may ask (403 for others).
 */
#include "mod_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connection.h"
#include "server.h"
#include "threadpool.h"

typedef struct snapshot {
    unsigned reading, writing, disk, backend, keepalive, closing, total;
} snapshot;

static void take(const sl_server *srv, snapshot *s)
{
    memset(s, 0, sizeof *s);
    for (const sl_conn *c = srv->conns; c; c = c->next) {
        s->total++;
        switch (c->state) {
        case SL_CONN_READ_HEAD:
            if (c->in == NULL && c->requests > 0)
                s->keepalive++;
            else
                s->reading++;
            break;
        case SL_CONN_READ_BODY: s->reading++; break;
        case SL_CONN_HANDLE:
            if (c->mod_ctx)
                s->backend++;
            else if (c->pending)
                s->disk++; /* a stat or open on a thread or the ring */
            else
                s->writing++; /* being answered right now (this page, for one) */
            break;
        case SL_CONN_WRITE:
            if (c->rd.inflight || c->rd.waiting)
                s->disk++;
            else if (c->streaming && c->mod_ctx)
                s->backend++;
            else
                s->writing++;
            break;
        case SL_CONN_LINGER: s->closing++; break;
        }
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

typedef enum { F_TEXT, F_JSON, F_PROM } fmt;

typedef struct out {
    sl_chunkq *q;
    fmt f;
    int n; /* items written in the current JSON array */
} out;

static void put(out *o, const char *fmt_, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt_, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt_);
    int n = vsnprintf(buf, sizeof buf, fmt_, ap);
    va_end(ap);
    if (n > 0) sl_chunkq_append_mem(o->q, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void backend_line(void *ud, const char *name, unsigned inflight, unsigned conns,
                         unsigned idle, uint64_t requests, uint64_t failures, bool disabled)
{
    out *o = ud;
    switch (o->f) {
    case F_TEXT:
        put(o, "backend %-28s inflight %u conns %u idle %u requests %llu failures %llu%s\n", name,
            inflight, conns, idle, (unsigned long long)requests, (unsigned long long)failures,
            disabled ? " DISABLED" : "");
        break;
    case F_JSON:
        put(o, "%s{\"name\":\"%s\",\"inflight\":%u,\"conns\":%u,\"idle\":%u,\"requests\":%llu,"
            "\"failures\":%llu,\"disabled\":%s}", o->n++ ? "," : "", name, inflight, conns, idle,
            (unsigned long long)requests, (unsigned long long)failures, disabled ? "true" : "false");
        break;
    case F_PROM:
        put(o, "seekless_backend_inflight{backend=\"%s\"} %u\n", name, inflight);
        put(o, "seekless_backend_connections{backend=\"%s\"} %u\n", name, conns);
        put(o, "seekless_backend_requests_total{backend=\"%s\"} %llu\n", name,
            (unsigned long long)requests);
        put(o, "seekless_backend_failures_total{backend=\"%s\"} %llu\n", name,
            (unsigned long long)failures);
        put(o, "seekless_backend_up{backend=\"%s\"} %d\n", name, !disabled);
        break;
    }
}

static void pools(out *o, sl_server *srv)
{
    struct {
        const char *name;
        sl_tpool *p;
    } ps[] = {{"stat", srv->stat_pool}, {"read", srv->read_pool}};
    for (size_t i = 0; i < 2; i++) {
        if (!ps[i].p) continue;
        sl_tpool_stats *st = malloc(sizeof *st);
        if (!st) continue;
        sl_tpool_get_stats(ps[i].p, st);
        uint32_t p50, p90, p99;
        pool_pct(st, &p50, &p90, &p99);
        const char *nm = ps[i].name;
        switch (o->f) {
        case F_TEXT:
            put(o, "pool %-5s threads %u queued %u running %u completed %llu rejected %llu "
                "wait-us p50 %u p90 %u p99 %u max %llu\n", nm, st->threads, st->queued,
                st->running, (unsigned long long)st->completed, (unsigned long long)st->rejected,
                p50, p90, p99, (unsigned long long)(st->wait_ns_max / 1000));
            break;
        case F_JSON:
            put(o, "%s\"%s\":{\"threads\":%u,\"queued\":%u,\"running\":%u,\"completed\":%llu,"
                "\"rejected\":%llu,\"wait_us\":{\"p50\":%u,\"p90\":%u,\"p99\":%u,\"max\":%llu}}",
                o->n++ ? "," : "", nm, st->threads, st->queued, st->running,
                (unsigned long long)st->completed, (unsigned long long)st->rejected, p50, p90,
                p99, (unsigned long long)(st->wait_ns_max / 1000));
            break;
        case F_PROM:
            put(o, "seekless_pool_threads{pool=\"%s\"} %u\n", nm, st->threads);
            put(o, "seekless_pool_queued{pool=\"%s\"} %u\n", nm, st->queued);
            put(o, "seekless_pool_running{pool=\"%s\"} %u\n", nm, st->running);
            put(o, "seekless_pool_completed_total{pool=\"%s\"} %llu\n", nm,
                (unsigned long long)st->completed);
            put(o, "seekless_pool_wait_seconds{pool=\"%s\",quantile=\"0.5\"} %.6f\n", nm, p50 / 1e6);
            put(o, "seekless_pool_wait_seconds{pool=\"%s\",quantile=\"0.9\"} %.6f\n", nm, p90 / 1e6);
            put(o, "seekless_pool_wait_seconds{pool=\"%s\",quantile=\"0.99\"} %.6f\n", nm, p99 / 1e6);
            break;
        }
        free(st);
    }
}

static void render(sl_server *srv, out *o)
{
    snapshot s;
    take(srv, &s);
    const char *nb = srv->nb ? srv->nb->name : "-";
    if (o->f == F_TEXT) {
        put(o, "seekless status\n\nconnections %u: reading %u, writing %u, waiting-disk %u, "
            "waiting-backend %u, keep-alive %u, closing %u\n", s.total, s.reading, s.writing,
            s.disk, s.backend, s.keepalive, s.closing);
        put(o, "requests %llu, bytes %llu, 1xx %llu 2xx %llu 3xx %llu 4xx %llu 5xx %llu\n",
            (unsigned long long)srv->requests_total, (unsigned long long)srv->bytes_total,
            (unsigned long long)srv->responses[1], (unsigned long long)srv->responses[2],
            (unsigned long long)srv->responses[3], (unsigned long long)srv->responses[4],
            (unsigned long long)srv->responses[5]);
        put(o, "network-backend %s, reads in flight %u of %u, waiting for a slot %s\n", nb,
            srv->reads_inflight, srv->max_reads, srv->rd_wait_head ? "yes" : "no");
        pools(o, srv);
        if (srv->backend_stats) srv->backend_stats(backend_line, o);
        return;
    }
    if (o->f == F_JSON) {
        put(o, "{\"connections\":{\"total\":%u,\"reading\":%u,\"writing\":%u,\"waiting_disk\":%u,"
            "\"waiting_backend\":%u,\"keepalive\":%u,\"closing\":%u},", s.total, s.reading,
            s.writing, s.disk, s.backend, s.keepalive, s.closing);
        put(o, "\"requests\":%llu,\"bytes\":%llu,\"responses\":{\"1xx\":%llu,\"2xx\":%llu,"
            "\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},", (unsigned long long)srv->requests_total,
            (unsigned long long)srv->bytes_total, (unsigned long long)srv->responses[1],
            (unsigned long long)srv->responses[2], (unsigned long long)srv->responses[3],
            (unsigned long long)srv->responses[4], (unsigned long long)srv->responses[5]);
        put(o, "\"network_backend\":\"%s\",\"reads_inflight\":%u,\"max_reads\":%u,\"pools\":{", nb,
            srv->reads_inflight, srv->max_reads);
        o->n = 0;
        pools(o, srv);
        put(o, "},\"backends\":[");
        o->n = 0;
        if (srv->backend_stats) srv->backend_stats(backend_line, o);
        put(o, "]}\n");
        return;
    }
    put(o, "# TYPE seekless_connections gauge\n");
    const char *st[] = {"reading", "writing", "waiting_disk", "waiting_backend", "keepalive", "closing"};
    unsigned v[] = {s.reading, s.writing, s.disk, s.backend, s.keepalive, s.closing};
    for (size_t i = 0; i < 6; i++) put(o, "seekless_connections{state=\"%s\"} %u\n", st[i], v[i]);
    put(o, "# TYPE seekless_requests_total counter\nseekless_requests_total %llu\n",
        (unsigned long long)srv->requests_total);
    put(o, "# TYPE seekless_bytes_sent_total counter\nseekless_bytes_sent_total %llu\n",
        (unsigned long long)srv->bytes_total);
    put(o, "# TYPE seekless_responses_total counter\n");
    for (int k = 1; k <= 5; k++)
        put(o, "seekless_responses_total{class=\"%dxx\"} %llu\n", k,
            (unsigned long long)srv->responses[k]);
    put(o, "# TYPE seekless_reads_inflight gauge\nseekless_reads_inflight %u\n", srv->reads_inflight);
    pools(o, srv);
    if (srv->backend_stats) srv->backend_stats(backend_line, o);
}

static sl_hresult status_handle(sl_conn *c)
{
    const char *url = c->conf.status_url;
    if (!url || strcmp(url, c->path) != 0) return SL_GO_ON;
    if (c->conf.status_allow.n) {
        bool ok = false;
        for (size_t i = 0; i < c->conf.status_allow.n && !ok; i++)
            ok = sl_cidr_match(c->conf.status_allow.v[i], (const struct sockaddr *)&c->peer);
        if (!ok) {
            c->status = 403;
            return SL_ERROR;
        }
    }
    if (c->req.method != SL_METHOD_GET && c->req.method != SL_METHOD_HEAD) {
        c->status = sl_method_refused_status(c->req.method);
        return SL_ERROR;
    }
    fmt f = F_TEXT;
    if (!strcmp(c->query, "json")) f = F_JSON;
    if (!strcmp(c->query, "format=prometheus")) f = F_PROM;
    sl_chunkq body = {0};
    out o = {&body, f, 0};
    render(c->srv, &o);
    uint64_t len = sl_chunkq_length(&body);
    sl_resp_begin(c, 200);
    sl_resp_header(c, "Content-Type", f == F_JSON ? "application/json"
                                      : f == F_PROM ? "text/plain; version=0.0.4"
                                                    : "text/plain; charset=utf-8");
    sl_resp_header(c, "Cache-Control", "no-store");
    sl_resp_end_headers(c, len);
    if (c->req.method == SL_METHOD_HEAD) {
        sl_chunkq_clear(&body);
    } else if (body.head) {
        /* Move the body's chunks behind the head. */
        if (c->out.tail)
            c->out.tail->next = body.head;
        else
            c->out.head = body.head;
        c->out.tail = body.tail;
    }
    return SL_FINISHED;
}

const sl_module sl_mod_status = {
    .name = "status",
    .handle_request = status_handle,
};
