/* The per-request timing trace (debug.log-timing, debug.timing-file).
 *
 * The core records when each stage of a request happened (accept, parse, stat queued, started
 * and done, open, backend connect and answer, first and last byte, every block read) into the
 * connection when server.timing is set; this module sets it at start-up and writes one JSON line
 * per request when the request ends, answered or not, with one write() to a file opened with
 * O_APPEND, so lines from every loop never interleave. When the trace is off the only cost per
 * request is a test of one flag.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "loop.h"
#include "module.h"
#include "server.h"

extern sl_module sl_mod_timing;

typedef struct timing_conf {
    bool on;                /* debug.log-timing */
    const char *file;       /* debug.timing-file; NULL: <server.errorlog>.timing */
} timing_conf;

#define SL_KEY_CONF timing_conf

typedef struct timing_state {
    int fd;
    char path[4200];
} timing_state;

static timing_state *state(sl_server *srv)
{
    return srv->mod[sl_mod_timing.index];
}

/* One JSON line for the request that just ended (sent, failed or aborted). */
static void timing_request_done(sl_conn *c)
{
    timing_state *st = state(c->loop->srv);
    if (!st || !c->status) return;
    bool closing = c->closed || !c->keep_alive;
    const sl_timing *t = &c->t;
    char buf[4096];
    size_t n = 0;
#define OUT(...)                                                                                  \
    do {                                                                                          \
        int k_ = snprintf(buf + n, sizeof buf - n, __VA_ARGS__);                                  \
        if (k_ > 0) n += (size_t)k_ < sizeof buf - n ? (size_t)k_ : sizeof buf - n - 1;           \
    } while (0)
    OUT("{\"start\":%.6f,\"conn\":%llu,\"loop\":%u,\"req\":%u,\"method\":\"%s\",\"path\":\"",
        t->wall, (unsigned long long)c->id, c->loop->id, c->requests + 1,
        sl_method_name(c->req.method));
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
        (unsigned long long)c->bytes_out, c->loop->srv->nb ? c->loop->srv->nb->name : "-");
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
        uint64_t s = t->reads[i][1] >= t->start ? (t->reads[i][1] - t->start) / 1000 : q;
        uint64_t d = t->reads[i][2] >= t->start ? (t->reads[i][2] - t->start) / 1000 : s;
        OUT("%s[%llu,%llu,%llu]", i ? "," : "", (unsigned long long)q, (unsigned long long)s,
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
    ssize_t w = write(st->fd, buf, n);
    (void)w;
}

static int timing_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    const timing_conf *tc = SL_MODCONF(conf, sl_mod_timing, timing_conf);
    if (!tc->on) return 0;
    timing_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "out of memory"), -1;
    const char *errorlog = sl_core(conf)->errorlog;
    /* Next to the error log, or in the working directory. */
    if (tc->file)
        snprintf(st->path, sizeof st->path, "%s", tc->file);
    else
        snprintf(st->path, sizeof st->path, "%s.timing", errorlog ? errorlog : "seekless");
    st->fd = sl_kept_open(st->path, O_WRONLY | O_APPEND | O_CREAT);
    if (st->fd < 0) {
        snprintf(err, errlen, "debug.timing-file %s: %s", st->path, strerror(-st->fd));
        free(st);
        return -1;
    }
    srv->mod[sl_mod_timing.index] = st;
    srv->timing = true;
    return 0;
}

static void timing_reopen(sl_server *srv)
{
    timing_state *st = state(srv);
    if (st && sl_reopen_fd(st->fd, st->path) < 0)
        sl_log("cannot reopen the timing file %s: %s", st->path, strerror(errno));
}

static void timing_fini(sl_server *srv)
{
    timing_state *st = state(srv);
    if (!st) return;
    sl_kept_close(st->fd);
    free(st);
    srv->mod[sl_mod_timing.index] = NULL;
}

sl_module sl_mod_timing = {
    SL_MODULE_HEAD("timing", timing_conf, "mod_timing"),
    .keys = SL_KEYS(
        SL_KEY_FLAGS("debug.log-timing", SL_KEY_BOOL, SL_KEY_GLOBAL, on, NULL, NULL),
        SL_KEY_FLAGS("debug.timing-file", SL_KEY_PATH,
                     SL_KEY_GLOBAL | SL_KEY_APPENDS | SL_KEY_OPENED_BEFORE_DROP, file, NULL, NULL)),
    .always = true,
    .init = timing_init,
    .fini = timing_fini,
    .reopen = timing_reopen,
    .request_done = timing_request_done,
};
