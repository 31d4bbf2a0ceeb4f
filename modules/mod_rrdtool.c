/* mod_rrdtool: traffic into an RRD database every minute (lighttpd's rrdtool.*):
 *   rrdtool.binary  = "/usr/bin/rrdtool"
 *   rrdtool.db-name = "/var/lib/lighttpd/lighttpd.rrd"      (may differ by condition)
 *
 * Each request adds its bytes in (head and body read), bytes out and one request to the
 * counters of its block's database (atomics: every loop adds). One rrdtool process, started
 * with "-" (its remote-control mode: a command per line on stdin, "OK ..." or "ERROR: ..." on
 * stdout) as the user starting the server, creates a database that does not exist yet with
 * lighttpd's layout (one-minute steps; DS InOctets, OutOctets, Requests, ABSOLUTE; AVERAGE, MAX
 * and MIN archives) and gets "update db N:in:out:requests" for each database once a minute and
 * once more when the server stops, so the last minute is not lost. A thread of this module does
 * the talking: the loops never wait for rrdtool or its disk. An ERROR answer is logged and the
 * counts of that minute are dropped (as lighttpd does); a dead rrdtool is started again at the
 * next minute.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "connection.h"
#include "log.h"
#include "module.h"
#include "registry.h"
#include "server.h"

/* One database and what it has counted since its last update. */
typedef struct rrd_db {
    sl_named named;      /* its path */
    _Atomic unsigned long long requests, bytes_in, bytes_out;
} rrd_db;

/* Every database of the loaded configs: the main thread adds and drops them as configs are
 * loaded and freed (a graceful restart's check too) while the talking thread walks them, holding
 * each database it visits. */
static sl_registry dbs = SL_REGISTRY_INIT;

typedef struct rrd_conf {
    const char *binary;  /* rrdtool.binary */
    rrd_db *db;          /* rrdtool.db-name; NULL: nothing counted here */
} rrd_conf;

#define SL_KEY_CONF rrd_conf

/* The talking thread's state (one per server process that uses the module). */
typedef struct rrd_state {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    char *binary;
    pid_t pid;
    int to, from;        /* rrdtool's stdin and stdout, or -1 */
} rrd_state;

sl_module sl_mod_rrdtool;

#define RCONF(c) SL_MODCONF((c)->conf, sl_mod_rrdtool, rrd_conf)

static void db_release(void *p)
{
    rrd_db *d = p;
    if (sl_registry_drop(&dbs, &d->named)) sl_named_free(&d->named);
}

static int prep_db(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING || !v->str[0])
        return sl_key_fail(ctx, "rrdtool.db-name must be a file name");
    char *path = sl_key_abs_path(ctx, v->str);
    if (!path) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    rrd_db *d = (rrd_db *)sl_registry_get(&dbs, path, sizeof *d, NULL);
    if (!d) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *out = d;
    /* rrdtool, started by the user starting the server, creates and writes it. */
    sl_key_access(ctx, d->named.name, SL_ACCESS_APPEND_FILE, false);
    return 0;
}

static int prep_binary(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (ctx->check_system && access(v->str, X_OK) < 0)
        return sl_key_fail(ctx, "rrdtool.binary \"%s\": %s", v->str, strerror(errno));
    return 0;
}

static void rrd_log_request(sl_conn *c)
{
    rrd_db *d = RCONF(c)->db;
    if (!d) return;
    unsigned long long in = c->head_len + (c->req.content_length > 0 ? (unsigned long long)c->req.content_length : 0);
    atomic_fetch_add_explicit(&d->requests, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->bytes_in, in, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->bytes_out, c->bytes_out, memory_order_relaxed);
}

/* ---- the talking thread ---- */

static void stop_rrdtool(rrd_state *st)
{
    if (st->to >= 0) close(st->to);
    if (st->from >= 0) close(st->from);
    st->to = st->from = -1;
    if (st->pid > 0) waitpid(st->pid, NULL, 0); /* its input ended: it exits */
    st->pid = 0;
}

static int start_rrdtool(rrd_state *st)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) return -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return -e;
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
        execl(st->binary, st->binary, "-", (char *)NULL);
        _exit(127);
    }
    int e = errno;
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        close(in[1]);
        close(out[0]);
        return -e;
    }
    st->pid = pid;
    st->to = in[1];
    st->from = out[0];
    return 0;
}

/* Send one command line; 0 when rrdtool answered OK, -1 otherwise (logged). */
static int command(rrd_state *st, const char *line)
{
    if (st->to < 0 && start_rrdtool(st) < 0) {
        sl_log("rrdtool: cannot start %s: %s", st->binary, strerror(errno));
        return -1;
    }
    size_t n = strlen(line);
    if (write(st->to, line, n) != (ssize_t)n) {
        sl_log("rrdtool: %s stopped taking commands; it is started again", st->binary);
        stop_rrdtool(st);
        return -1;
    }
    /* The answer: one line "OK ..." or "ERROR: ...", within 10 s. */
    char ans[512];
    size_t got = 0;
    while (got < sizeof ans - 1 && !memchr(ans, '\n', got)) {
        struct pollfd p = {.fd = st->from, .events = POLLIN};
        ssize_t r = poll(&p, 1, 10000) > 0 ? read(st->from, ans + got, sizeof ans - 1 - got) : -1;
        if (r <= 0) {
            sl_log("rrdtool: no answer from %s; it is started again", st->binary);
            stop_rrdtool(st);
            return -1;
        }
        got += (size_t)r;
    }
    ans[got] = 0;
    if (!strncmp(ans, "OK", 2)) return 0;
    ans[strcspn(ans, "\n")] = 0;
    sl_log("rrdtool: %.*s: %s", (int)strcspn(line, "\n"), line, ans);
    return -1;
}

/* Create the database unless a non-empty file is there; then its counts since the last time. */
static void update(rrd_state *st, rrd_db *d)
{
    char line[4400];
    struct stat sb;
    if (stat(d->named.name, &sb) < 0 || sb.st_size == 0) {
        snprintf(line, sizeof line,
                 "create %s --step 60 DS:InOctets:ABSOLUTE:600:U:U "
                 "DS:OutOctets:ABSOLUTE:600:U:U DS:Requests:ABSOLUTE:600:U:U "
                 "RRA:AVERAGE:0.5:1:600 RRA:AVERAGE:0.5:6:700 RRA:AVERAGE:0.5:24:775 "
                 "RRA:AVERAGE:0.5:288:797 RRA:MAX:0.5:1:600 RRA:MAX:0.5:6:700 "
                 "RRA:MAX:0.5:24:775 RRA:MAX:0.5:288:797 RRA:MIN:0.5:1:600 "
                 "RRA:MIN:0.5:6:700 RRA:MIN:0.5:24:775 RRA:MIN:0.5:288:797\n",
                 d->named.name);
        if (command(st, line) < 0) return;
    }
    unsigned long long rq = atomic_exchange(&d->requests, 0),
                       in = atomic_exchange(&d->bytes_in, 0),
                       out = atomic_exchange(&d->bytes_out, 0);
    snprintf(line, sizeof line, "update %s N:%llu:%llu:%llu\n", d->named.name, in, out, rq);
    command(st, line);
}

static void *talk(void *arg)
{
    rrd_state *st = arg;
    pthread_mutex_lock(&st->lock);
    time_t last = 0;
    for (;;) {
        /* Until the next whole minute, or the stop. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec = (until.tv_sec / 60 + 1) * 60;
        until.tv_nsec = 0;
        while (!st->stop && pthread_cond_timedwait(&st->wake, &st->lock, &until) == 0) {
        }
        bool stopping = st->stop;
        pthread_mutex_unlock(&st->lock);
        /* rrdtool refuses two updates within one second: the stop's waits for the next. */
        time_t now = time(NULL);
        if (stopping && now == last) sleep(1);
        /* The databases now, each held while rrdtool is asked (it may take a while). */
        sl_named *walk[64];
        size_t n = sl_registry_hold_all(&dbs, walk, 64);
        for (size_t i = 0; i < n; i++) {
            update(st, (rrd_db *)walk[i]);
            db_release(walk[i]);
        }
        last = time(NULL);
        pthread_mutex_lock(&st->lock);
        if (stopping) break;
    }
    pthread_mutex_unlock(&st->lock);
    stop_rrdtool(st);
    return NULL;
}

static int rrd_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    const rrd_conf *rc = SL_MODCONF(conf, sl_mod_rrdtool, rrd_conf);
    if (!dbs.head) return 0;
    rrd_state *st = calloc(1, sizeof *st);
    if (!st || !(st->binary = strdup(rc->binary))) {
        free(st);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    st->to = st->from = -1;
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->wake, NULL);
    /* Started now, as the user starting the server (before privileges are dropped). */
    if (start_rrdtool(st) < 0) {
        snprintf(err, errlen, "rrdtool.binary %s: %s", st->binary, strerror(errno));
        free(st->binary);
        free(st);
        return -1;
    }
    /* The thread must not take the signals the main thread waits for. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int r = pthread_create(&st->thread, NULL, talk, st);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        stop_rrdtool(st);
        free(st->binary);
        free(st);
        return snprintf(err, errlen, "rrdtool: %s", strerror(r)), -1;
    }
    srv->mod[sl_mod_rrdtool.index] = st;
    return 0;
}

static void rrd_fini(sl_server *srv)
{
    rrd_state *st = srv->mod[sl_mod_rrdtool.index];
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    st->stop = true;
    pthread_cond_signal(&st->wake);
    pthread_mutex_unlock(&st->lock);
    pthread_join(st->thread, NULL); /* after the last update */
    pthread_mutex_destroy(&st->lock);
    pthread_cond_destroy(&st->wake);
    free(st->binary);
    free(st);
    srv->mod[sl_mod_rrdtool.index] = NULL;
}

static void rrd_defaults(void *p)
{
    ((rrd_conf *)p)->binary = "/usr/bin/rrdtool";
}

sl_module sl_mod_rrdtool = {
    SL_MODULE_HEAD("rrdtool", rrd_conf, "mod_rrdtool"),
    .keys = SL_KEYS(
        SL_KEY_FLAGS("rrdtool.binary", SL_KEY_STRING, SL_KEY_GLOBAL, binary, prep_binary, NULL),
        SL_KEY_PREP("rrdtool.db-name", SL_KEY_VALUE, db, prep_db, db_release)),
    .defaults = rrd_defaults,
    .init = rrd_init,
    .fini = rrd_fini,
    .log_request = rrd_log_request,
};
