/* loadgen statistics and reports.
 *
 * Every successful fetch's duration is kept (4 bytes each, microseconds) and sorted once at the
 * end, so percentiles are exact rather than bucketed: a million fetches cost 4 MB, which is nothing
 * next to what a benchmark of that length moves. The text report reproduces http_load's lines and
 * number formatting (%g) so existing scripts keep working, with two additions at the end; the JSON
 * report carries the same numbers with unambiguous names for bench/run.
 */
#include "stats.h"

#include "sl_version.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void sl_lg_minmax_add(struct sl_lg_minmax *m, uint64_t us)
{
    if (m->n == 0 || us < m->min_us) m->min_us = us;
    if (us > m->max_us) m->max_us = us;
    m->sum_us += (double)us;
    m->n++;
}

int sl_lg_stats_add_latency(struct sl_lg_stats *s, uint64_t us)
{
    if (s->lat_n == s->lat_cap) {
        size_t ncap = s->lat_cap ? s->lat_cap * 2 : 65536;
        uint32_t *nv = realloc(s->lat_us, ncap * sizeof *nv);
        if (!nv) return -ENOMEM;
        s->lat_us = nv;
        s->lat_cap = ncap;
    }
    /* 2^32 us is 71 minutes; a fetch that long has long been cut by -timeout. */
    s->lat_us[s->lat_n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    sl_lg_minmax_add(&s->fetch, us);
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void sl_lg_stats_finish(struct sl_lg_stats *s)
{
    if (s->lat_n > 1) qsort(s->lat_us, s->lat_n, sizeof *s->lat_us, cmp_u32);
}

uint64_t sl_lg_stats_percentile(const struct sl_lg_stats *s, double p)
{
    if (s->lat_n == 0) return 0;
    double rank = ceil(p / 100.0 * (double)s->lat_n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    if (i >= s->lat_n) i = s->lat_n - 1;
    return s->lat_us[i];
}

void sl_lg_stats_free(struct sl_lg_stats *s)
{
    free(s->lat_us);
    s->lat_us = NULL;
    s->lat_n = s->lat_cap = 0;
}

const char *sl_lg_error_key(enum sl_lg_error e)
{
    switch (e) {
    case SL_LG_ERR_TIMEOUT:
        return "timed_out";
    case SL_LG_ERR_BAD_BYTES:
        return "bad_byte_count";
    case SL_LG_ERR_BAD_CHECKSUM:
        return "bad_checksum";
    case SL_LG_ERR_CONNECT:
        return "connect_failed";
    case SL_LG_ERR_CUT:
        return "cut_at_end";
    case SL_LG_ERR_BAD_RESPONSE:
        return "bad_response";
    default:
        return "unknown";
    }
}

static double ms(uint64_t us)
{
    return (double)us / 1000.0;
}

static double mean_ms(const struct sl_lg_minmax *m)
{
    return m->n ? m->sum_us / (double)m->n / 1000.0 : 0.0;
}

static uint64_t syscalls(const struct sl_lg_stats *s)
{
    return s->sys.send + s->sys.recv + s->sys.discard + s->sys.epoll_wait + s->sys.epoll_ctl +
           s->sys.connect + s->sys.close;
}

static double per_fetch(const struct sl_lg_stats *s, uint64_t n)
{
    return s->fetches ? (double)n / (double)s->fetches : 0.0;
}

void sl_lg_report_text(FILE *f, const struct sl_lg_stats *s, const struct sl_lg_run_info *info)
{
    unsigned long long fetches = (unsigned long long)s->fetches;
    fprintf(f, "%llu fetches, %u max parallel, %g bytes, in %g seconds\n", fetches, s->max_parallel,
            (double)s->bytes, s->elapsed_s);
    if (s->fetches) fprintf(f, "%g mean bytes/connection\n", (double)s->bytes / (double)s->fetches);
    if (s->elapsed_s > 0)
        fprintf(f, "%g fetches/sec, %g bytes/sec\n", (double)s->fetches / s->elapsed_s,
                (double)s->bytes / s->elapsed_s);
    if (s->connect.n)
        fprintf(f, "msecs/connect: %g mean, %g max, %g min\n", mean_ms(&s->connect),
                ms(s->connect.max_us), ms(s->connect.min_us));
    if (s->first_response.n)
        fprintf(f, "msecs/first-response: %g mean, %g max, %g min\n", mean_ms(&s->first_response),
                ms(s->first_response.max_us), ms(s->first_response.min_us));
    /* The patched http_load's extra lines, printed only when non-zero as it did. */
    if (s->errors[SL_LG_ERR_TIMEOUT])
        fprintf(f, "%llu timeouts\n", (unsigned long long)s->errors[SL_LG_ERR_TIMEOUT]);
    if (s->errors[SL_LG_ERR_BAD_BYTES])
        fprintf(f, "%llu bad byte counts\n", (unsigned long long)s->errors[SL_LG_ERR_BAD_BYTES]);
    if (s->errors[SL_LG_ERR_BAD_CHECKSUM])
        fprintf(f, "%llu bad checksums\n", (unsigned long long)s->errors[SL_LG_ERR_BAD_CHECKSUM]);
    fprintf(f, "HTTP response codes:\n");
    for (int i = 0; i < 1000; i++)
        if (s->status[i]) fprintf(f, "  code %03d -- %llu\n", i, (unsigned long long)s->status[i]);
    if (s->lat_n)
        fprintf(f, "msecs/fetch: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
                ms(sl_lg_stats_percentile(s, 50)), ms(sl_lg_stats_percentile(s, 90)),
                ms(sl_lg_stats_percentile(s, 99)), ms(sl_lg_stats_percentile(s, 99.9)),
                ms(s->fetch.max_us));
    fprintf(f,
            "errors: timed-out %llu, bad-byte-count %llu, bad-checksum %llu, connect-failed %llu, "
            "cut-at-end %llu, bad-response %llu\n",
            (unsigned long long)s->errors[SL_LG_ERR_TIMEOUT],
            (unsigned long long)s->errors[SL_LG_ERR_BAD_BYTES],
            (unsigned long long)s->errors[SL_LG_ERR_BAD_CHECKSUM],
            (unsigned long long)s->errors[SL_LG_ERR_CONNECT],
            (unsigned long long)s->errors[SL_LG_ERR_CUT],
            (unsigned long long)s->errors[SL_LG_ERR_BAD_RESPONSE]);
    fprintf(f, "client: %s bodies, %.3f s user, %.3f s sys, %.2f syscalls/fetch\n",
            info->copy ? "copied" : "discarded", info->cpu_user_s, info->cpu_sys_s,
            per_fetch(s, syscalls(s)));
}

static void json_minmax(FILE *f, const char *key, const struct sl_lg_minmax *m)
{
    fprintf(f, "  \"%s\": {\"n\": %llu, \"mean\": %.3f, \"max\": %.3f, \"min\": %.3f},\n", key,
            (unsigned long long)m->n, mean_ms(m), ms(m->max_us), ms(m->min_us));
}

void sl_lg_report_json(FILE *f, const struct sl_lg_stats *s, const struct sl_lg_run_info *info)
{
    double el = s->elapsed_s;
    fprintf(f, "{\n  \"tool\": \"seekless-loadgen\",\n  \"version\": \"%s\",\n", SL_VERSION);
    fprintf(f, "  \"settings\": {\"parallel\": %u, ", info->parallel);
    if (info->fetches_limit)
        fprintf(f, "\"fetches\": %llu, ", (unsigned long long)info->fetches_limit);
    else
        fprintf(f, "\"fetches\": null, ");
    if (info->seconds_limit > 0)
        fprintf(f, "\"seconds\": %.9g, ", info->seconds_limit);
    else
        fprintf(f, "\"seconds\": null, ");
    fprintf(f,
            "\"timeout_s\": %.9g, \"seed\": %llu, \"keepalive\": %s, \"checksum\": %s, "
            "\"body\": \"%s\", \"order\": \"%s\", \"min_fetches\": %llu, \"urls\": %zu},\n",
            info->timeout_s, (unsigned long long)info->seed, info->keepalive ? "true" : "false",
            info->checksum ? "true" : "false", info->copy ? "copy" : "discard",
            info->sequential ? "sequential" : "random", (unsigned long long)info->min_fetches,
            info->urls);
    fprintf(f, "  \"interrupted\": %s,\n", info->interrupted ? "true" : "false");
    fprintf(f, "  \"fetches_started\": %llu,\n", (unsigned long long)s->started);
    fprintf(f, "  \"fetches\": %llu,\n", (unsigned long long)s->fetches);
    fprintf(f, "  \"max_parallel\": %u,\n", s->max_parallel);
    fprintf(f, "  \"bytes\": %llu,\n", (unsigned long long)s->bytes);
    fprintf(f, "  \"bytes_all\": %llu,\n", (unsigned long long)s->bytes_all);
    fprintf(f, "  \"elapsed_s\": %.6f,\n", el);
    fprintf(f, "  \"mean_bytes_per_fetch\": %.9g,\n",
            s->fetches ? (double)s->bytes / (double)s->fetches : 0.0);
    fprintf(f, "  \"fetches_per_s\": %.9g,\n", el > 0 ? (double)s->fetches / el : 0.0);
    fprintf(f, "  \"bytes_per_s\": %.9g,\n", el > 0 ? (double)s->bytes / el : 0.0);
    fprintf(f, "  \"connects\": %llu,\n", (unsigned long long)s->connects);
    fprintf(f, "  \"keepalive_reused\": %llu,\n", (unsigned long long)s->reused);
    fprintf(f, "  \"keepalive_retries\": %llu,\n", (unsigned long long)s->retries);
    json_minmax(f, "connect_ms", &s->connect);
    json_minmax(f, "first_response_ms", &s->first_response);
    fprintf(f,
            "  \"fetch_ms\": {\"n\": %llu, \"mean\": %.3f, \"min\": %.3f, \"p50\": %.3f, "
            "\"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f},\n",
            (unsigned long long)s->fetch.n, mean_ms(&s->fetch), ms(s->fetch.min_us),
            ms(sl_lg_stats_percentile(s, 50)), ms(sl_lg_stats_percentile(s, 90)),
            ms(sl_lg_stats_percentile(s, 99)), ms(sl_lg_stats_percentile(s, 99.9)),
            ms(s->fetch.max_us));
    fprintf(f, "  \"status\": {");
    const char *sep = "";
    for (int i = 0; i < 1000; i++) {
        if (!s->status[i]) continue;
        fprintf(f, "%s\"%03d\": %llu", sep, i, (unsigned long long)s->status[i]);
        sep = ", ";
    }
    fprintf(f, "},\n  \"errors\": {");
    uint64_t total = 0;
    for (int e = 0; e < SL_LG_ERR_COUNT; e++) {
        fprintf(f, "%s\"%s\": %llu", e ? ", " : "", sl_lg_error_key((enum sl_lg_error)e),
                (unsigned long long)s->errors[e]);
        total += s->errors[e];
    }
    fprintf(f, "},\n  \"errors_total\": %llu,\n", (unsigned long long)total);
    fprintf(f, "  \"cpu_s\": {\"user\": %.6f, \"sys\": %.6f},\n", info->cpu_user_s,
            info->cpu_sys_s);
    fprintf(f,
            "  \"syscalls\": {\"send\": %llu, \"recv\": %llu, \"discard\": %llu, "
            "\"epoll_wait\": %llu, \"epoll_ctl\": %llu, \"connect\": %llu, \"close\": %llu},\n",
            (unsigned long long)s->sys.send, (unsigned long long)s->sys.recv,
            (unsigned long long)s->sys.discard, (unsigned long long)s->sys.epoll_wait,
            (unsigned long long)s->sys.epoll_ctl, (unsigned long long)s->sys.connect,
            (unsigned long long)s->sys.close);
    fprintf(f, "  \"syscalls_per_fetch\": %.4f\n}\n", per_fetch(s, syscalls(s)));
}
