/* loadgen counters, latency percentiles, and the final report (http_load text and JSON). */
#ifndef SL_LG_STATS_H
#define SL_LG_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Mean/max/min of a series of durations, in microseconds. */
struct sl_lg_minmax {
    uint64_t n;
    double sum_us;
    uint64_t min_us, max_us;
};

/* Why a started fetch did not count as a successful fetch. */
enum sl_lg_error {
    SL_LG_ERR_TIMEOUT,      /* no progress for -timeout seconds (connecting, sending or reading) */
    SL_LG_ERR_BAD_BYTES,    /* body shorter than framed, surplus bytes, or length differs from
                             * the first response of the same URL with the same status */
    SL_LG_ERR_BAD_CHECKSUM, /* -checksum: body differs from the first response of that URL */
    SL_LG_ERR_CONNECT,      /* socket() or connect() failed */
    SL_LG_ERR_CUT,          /* still running when the run ended (-seconds drain, or a signal) */
    SL_LG_ERR_BAD_RESPONSE, /* malformed status line/headers, or closed/reset before them */
    SL_LG_ERR_COUNT
};

/* Everything a run measures. Zero-initialise, fill in during the run, then sl_lg_stats_finish(). */
struct sl_lg_stats {
    uint64_t started;      /* fetches started (connect or request on a reused connection) */
    uint64_t fetches;      /* successful fetches: complete, consistent responses, any status */
    uint64_t bytes;        /* body bytes of successful fetches */
    uint64_t bytes_all;    /* body bytes received by all fetches, failed ones included */
    uint64_t connects;     /* TCP connections established */
    uint64_t reused;       /* fetches sent on a kept-alive connection */
    uint64_t retries;      /* fetches retried because a kept-alive connection closed under them */
    unsigned max_parallel; /* most fetches in flight at once */
    double elapsed_s;      /* from the first fetch started to the last one finished */
    struct sl_lg_minmax connect;        /* connect() to established */
    struct sl_lg_minmax first_response; /* request written to first response byte */
    struct sl_lg_minmax fetch;          /* successful fetches: start to last byte */
    /* System calls loadgen made, by kind (every call, failed ones included). */
    struct {
        uint64_t send, recv, discard, epoll_wait, epoll_ctl, connect, close;
    } sys;
    uint64_t status[1000];              /* successful fetches by HTTP status code */
    uint64_t errors[SL_LG_ERR_COUNT];   /* failed fetches by cause */
    /* Every successful fetch's duration in microseconds (sorted by sl_lg_stats_finish). */
    uint32_t *lat_us;
    size_t lat_n, lat_cap;
};

/* Add one duration to m. */
void sl_lg_minmax_add(struct sl_lg_minmax *m, uint64_t us);

/* Record a successful fetch's duration. Returns 0 or -ENOMEM. */
int sl_lg_stats_add_latency(struct sl_lg_stats *s, uint64_t us);

/* Sort the recorded latencies; call once before the percentile and report functions. */
void sl_lg_stats_finish(struct sl_lg_stats *s);

/* The p-th percentile (0 < p <= 100, nearest-rank: the smallest recorded value with at least p% of
 * all values at or below it) of the successful fetch durations, in microseconds; 0 when none. */
uint64_t sl_lg_stats_percentile(const struct sl_lg_stats *s, double p);

/* Free the latency array. */
void sl_lg_stats_free(struct sl_lg_stats *s);

/* Stable, machine-readable name of an error cause ("timed_out", "bad_byte_count", ...). */
const char *sl_lg_error_key(enum sl_lg_error e);

/* The run's settings, echoed into the JSON report. */
struct sl_lg_run_info {
    unsigned parallel;
    uint64_t fetches_limit; /* 0: none */
    double seconds_limit;   /* 0: none */
    double timeout_s;
    uint64_t seed;
    bool keepalive;
    bool checksum;
    bool copy;            /* bodies read into user space (-copy or -checksum), else discarded */
    bool sequential;      /* URLs taken in list order, else uniformly at random */
    uint64_t min_fetches; /* -min-fetches, 0: none */
    bool interrupted;     /* ended by SIGINT/SIGTERM */
    size_t urls;
    double cpu_user_s, cpu_sys_s; /* loadgen's own CPU time (getrusage) */
};

/* Print the http_load-format summary followed by the msecs/fetch, errors and client lines. */
void sl_lg_report_text(FILE *f, const struct sl_lg_stats *s, const struct sl_lg_run_info *info);

/* Write the same numbers as one JSON object (keys documented in bench/README.md). */
void sl_lg_report_json(FILE *f, const struct sl_lg_stats *s, const struct sl_lg_run_info *info);

#endif
