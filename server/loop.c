/* Event loops.
 *
 * Each loop runs on its own thread: it creates its event base there, watches its listening
 * sockets, and starts its network backend state and each module's per-loop state before it
 * serves. Accepting is paused, never failed, in two cases: when the process holds
 * server.max-connections connections (a slot is reserved, with one atomic add, before each
 * accept(), so loops together never exceed it; paused loops are resumed by whichever loop frees
 * a slot) and when the process runs out of descriptors (resumed by a short timer), so a full
 * server makes clients wait in the listen backlog instead of getting a wrong answer. A once-a-second timer refreshes
 * the loop's clock, acts on connections past their deadline and counts connections by state for
 * the status page. A stop message closes the listeners and idle connections and lets responses
 * in flight finish, bounded by server.graceful-shutdown-timeout.
 */
#include "loop.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection.h"
#include "core_conf.h"
#include "fdcache.h"
#include "log.h"
#include "server.h"
#include "tls.h"

#define FD_RETRY_MS 100
#define MAX_FREE_IN 64
#define ACCEPT_BATCH 64 /* connections accepted per wake-up before others get a turn */
/* On a TLS listener each new connection's first answer is a key exchange and a signature
 * (~0.2 ms). Taken 64 at a time, the established connections wait behind them (wrk, 50 new
 * connections at once, one core: median 5.3 ms from request to response); one at a time, as
 * nginx does, costs 4% more CPU per handshake in wake-ups (0.9 ms); 4 keeps the batching's CPU
 * and halves the wait (2.2 ms). */
#define TLS_ACCEPT_BATCH 4

const char *sl_loop_date(sl_loop *loop)
{
    struct timeval tv;
    event_base_gettimeofday_cached(loop->base, &tv);
    if (tv.tv_sec != loop->date_sec) {
        loop->date_sec = tv.tv_sec;
        sl_http_date_format(tv.tv_sec, loop->date);
    }
    return loop->date;
}

static void on_msg(sl_job *job)
{
    sl_loop_msg *m = (sl_loop_msg *)job;
    m->fn(m);
}

void sl_loop_post(sl_loop *loop, sl_loop_msg *m)
{
    m->loop = loop;
    m->job.work = NULL;
    m->job.done = on_msg;
    m->job.port = loop->port;
    sl_tport_complete(loop->port, &m->job);
}

char *sl_loop_buf_get(sl_loop *loop, size_t cap)
{
    (void)cap; /* every buffer of a server has the same size */
    if (loop->n_free_in) return loop->free_in[--loop->n_free_in];
    return malloc(cap);
}

void sl_loop_buf_put(sl_loop *loop, char *buf)
{
    if (!buf) return;
    if (loop->free_in && loop->n_free_in < MAX_FREE_IN)
        loop->free_in[loop->n_free_in++] = buf;
    else
        free(buf);
}

static void accept_enable(sl_loop *loop, bool on)
{
    for (size_t i = 0; i < loop->n_listeners; i++) {
        sl_listener *l = &loop->listeners[i];
        if (!l->ev || l->enabled == on) continue;
        if (on)
            event_add(l->ev, NULL);
        else
            event_del(l->ev);
        l->enabled = on;
    }
}

/* Reserve a connection slot of the process; false at server.max-connections. */
static bool slot_take(sl_server *srv)
{
    unsigned long n = __atomic_fetch_add(&srv->n_conns, 1, __ATOMIC_ACQ_REL);
    if (n < (unsigned long)srv->global->max_connections) return true;
    __atomic_fetch_sub(&srv->n_conns, 1, __ATOMIC_ACQ_REL);
    return false;
}

static void resume_msg(sl_loop_msg *m)
{
    sl_loop *loop = m->loop;
    free(m);
    if (!loop->paused_fds && !loop->stopping) accept_enable(loop, true);
}

/* A slot came free: resume the loops that paused for the limit (this one at once, the others
 * through their mailbox). */
static void slot_give(sl_loop *me)
{
    sl_server *srv = me->srv;
    __atomic_fetch_sub(&srv->n_conns, 1, __ATOMIC_ACQ_REL);
    if (!__atomic_load_n(&srv->n_paused, __ATOMIC_ACQUIRE)) return;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        sl_loop *l = srv->loops[i];
        bool yes = true;
        if (!l || !__atomic_compare_exchange_n(&l->paused_full, &yes, false, false,
                                               __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        __atomic_fetch_sub(&srv->n_paused, 1, __ATOMIC_ACQ_REL);
        if (l == me) {
            if (!me->paused_fds && !me->stopping) accept_enable(me, true);
            continue;
        }
        sl_loop_msg *m = calloc(1, sizeof *m);
        if (m) {
            m->fn = resume_msg;
            sl_loop_post(l, m);
        }
    }
}

static void pause_full(sl_loop *loop)
{
    sl_server *srv = loop->srv;
    accept_enable(loop, false);
    bool no = false;
    if (__atomic_compare_exchange_n(&loop->paused_full, &no, true, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        __atomic_fetch_add(&srv->n_paused, 1, __ATOMIC_ACQ_REL);
    /* A slot may have come free between the failed reservation and the pause. */
    if (__atomic_load_n(&srv->n_conns, __ATOMIC_ACQUIRE) < (unsigned long)srv->global->max_connections) {
        __atomic_fetch_add(&srv->n_conns, 1, __ATOMIC_ACQ_REL);
        slot_give(loop);
    }
}

static void accept_failed(sl_loop *loop, int e)
{
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        /* Out of descriptors: stop accepting for a moment, keep serving what we have. */
        if (!loop->paused_fds) {
            sl_log("accept: %s; pausing accept for %d ms", strerror(e), FD_RETRY_MS);
            loop->paused_fds = true;
            accept_enable(loop, false);
            struct timeval tv = {0, FD_RETRY_MS * 1000};
            evtimer_add(loop->ev_resume, &tv);
        }
        return;
    }
    if (e != ECONNABORTED && e != EPERM) sl_log("accept: %s", strerror(e));
}

static void on_listen(evutil_socket_t fd, short what, void *arg)
{
    sl_listener *l = arg;
    sl_loop *loop = (sl_loop *)((char *)(l - l->index) - offsetof(sl_loop, listeners));
    int batch = sl_tls_listener(loop->srv, l->index) ? TLS_ACCEPT_BATCH : ACCEPT_BATCH;
    for (int k = 0; k < batch && l->enabled; k++) {
        if (!slot_take(loop->srv)) {
            pause_full(loop);
            return;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int cfd = accept4(fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            int e = errno;
            /* Given back like any slot: while this loop held it for nothing, another loop may
             * have found the process full and paused, with a connection waiting in its own
             * listening socket (SO_REUSEPORT); a plain decrement would leave it paused until
             * some connection closed. */
            slot_give(loop);
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            if (e == EINTR) continue;
            accept_failed(loop, e);
            return;
        }
        SL_STAT_ADD(loop->stats.accepted, 1);
        /* The slot is the connection's now: sl_loop_conn_closed gives it back (also when
         * sl_conn_new fails, which closes the socket). */
        if (sl_conn_new(loop, cfd, (struct sockaddr *)&ss, (int)sl, l->index) == -ENOMEM)
            slot_give(loop);
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    sl_loop *loop = arg;
    loop->paused_fds = false;
    if (!__atomic_load_n(&loop->paused_full, __ATOMIC_ACQUIRE) && !loop->stopping)
        accept_enable(loop, true);
}

void sl_loop_conn_closed(sl_loop *loop)
{
    slot_give(loop);
    if (loop->stopping && loop->n_conns == 0) event_base_loopbreak(loop->base);
}

void sl_loop_count_conns(sl_loop *loop, sl_conn_counts *s)
{
    memset(s, 0, sizeof *s);
    for (const sl_conn *c = loop->conns; c; c = c->next) {
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
            if (c->pending)
                s->disk++; /* a stat or open on a thread or the ring */
            else if (c->streaming || c->on_drain)
                s->backend++;
            else
                s->writing++; /* being answered right now (a status page, for one) */
            break;
        case SL_CONN_WRITE:
            if (sl_xfer_busy(&c->xfer))
                s->disk++;
            else if (c->streaming)
                s->backend++;
            else
                s->writing++;
            break;
        case SL_CONN_LINGER: s->closing++; break;
        case SL_CONN_H2: s->writing++; break; /* an HTTP/2 session: its streams are not listed */
        }
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    sl_loop *loop = arg;
    loop->now = time(NULL);
    /* One loop judges whether the shared open-file cache pays (fdcache.c: futility). */
    if (loop->id == 0) sl_fdc_tick(loop->srv->fdc);
    sl_conn *next;
    for (sl_conn *c = loop->conns; c; c = next) {
        next = c->next;
        if (c->deadline && loop->now >= c->deadline) sl_conn_timeout(c);
    }
    sl_conn_counts cc;
    sl_loop_count_conns(loop, &cc);
    unsigned *dst = &loop->stats.conns.reading;
    const unsigned *src = &cc.reading;
    for (size_t i = 0; i < sizeof cc / sizeof(unsigned); i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

static void on_stop_timeout(evutil_socket_t fd, short what, void *arg)
{
    sl_loop *loop = arg;
    sl_log("graceful shutdown: %zu connection(s) still open after %lds; closing them",
           loop->n_conns, sl_core_graceful_timeout(loop->srv->global));
    event_base_loopbreak(loop->base);
}

static void listeners_close(sl_loop *loop)
{
    for (size_t i = 0; i < loop->n_listeners; i++) {
        sl_listener *l = &loop->listeners[i];
        if (l->ev) event_free(l->ev);
        l->ev = NULL;
        l->enabled = false;
        if (l->owned && l->fd >= 0) close(l->fd);
        l->fd = -1;
    }
}

/* Stop message: no new connections, idle ones close now, the rest finish (bounded). */
static void stop_loop(sl_loop_msg *m)
{
    sl_loop *loop = m->loop;
    free(m);
    if (loop->stopping) return;
    loop->stopping = true;
    listeners_close(loop);
    sl_conn *next;
    for (sl_conn *c = loop->conns; c; c = next) {
        next = c->next;
        sl_conn_shutdown(c);
    }
    if (loop->n_conns == 0) {
        event_base_loopbreak(loop->base);
        return;
    }
    struct timeval tv = {sl_core_graceful_timeout(loop->srv->global), 0};
    evtimer_add(loop->ev_stop_timeout, &tv);
}

int sl_loop_stop(sl_loop *loop)
{
    sl_loop_msg *m = calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    m->fn = stop_loop;
    sl_loop_post(loop, m);
    return 0;
}

/* On the loop's thread: everything it owns, then serve until stopped. */
int sl_loop_init(sl_loop *loop)
{
    sl_server *srv = loop->srv;
    const sl_core_conf *g = srv->global;
    char *err = loop->init_err;
    size_t errlen = sizeof loop->init_err;
    struct event_config *cfg = event_config_new();
    if (!cfg) return snprintf(err, errlen, "out of memory"), -1;
    /* epoll and nothing else: connections are registered once, edge-triggered. */
    event_config_avoid_method(cfg, "poll");
    event_config_avoid_method(cfg, "select");
    event_config_require_features(cfg, EV_FEATURE_ET | EV_FEATURE_O1 | EV_FEATURE_EARLY_CLOSE);
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
    loop->base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!loop->base)
        return snprintf(err, errlen, "server.event-handler \"%s\" is not available",
                        g->event_handler),
               -1;
    /* Two priorities: the open-file cache's change notices (0) before everything else (1). */
    event_base_priority_init(loop->base, 2);
    loop->now = time(NULL);
    loop->free_in = calloc(MAX_FREE_IN, sizeof *loop->free_in);
    loop->port = sl_tport_new(loop->base);
    if (!loop->port)
        return snprintf(err, errlen, "loop %u: cannot make its completion port: %s", loop->id,
                        strerror(errno)),
               -1;
    loop->ev_tick = event_new(loop->base, -1, EV_PERSIST, on_tick, loop);
    loop->ev_resume = evtimer_new(loop->base, on_resume, loop);
    loop->ev_stop_timeout = evtimer_new(loop->base, on_stop_timeout, loop);
    struct timeval sec = {1, 0};
    if (!loop->free_in || !loop->port || !loop->ev_tick || !loop->ev_resume ||
        !loop->ev_stop_timeout || event_add(loop->ev_tick, &sec) < 0)
        return snprintf(err, errlen, "out of memory"), -1;
    sl_conf_set *cs = srv->cs;
    unsigned share = srv->n_loops;
    for (size_t i = 0; i < cs->n_listen; i++) {
        sl_listener *l = &loop->listeners[i];
        size_t at = (g->reuse_port ? loop->id : 0) * cs->n_listen + i;
        /* A socket of its own is the loop's to close; a shared one stays the server's. */
        l->fd = srv->listen_fd[at];
        l->index = (unsigned)i;
        l->owned = g->reuse_port;
        if (l->owned) srv->listen_fd[at] = -1;
        loop->n_listeners = i + 1;
        l->ev = event_new(loop->base, l->fd, EV_READ | EV_PERSIST, on_listen, l);
        if (!l->ev) return snprintf(err, errlen, "cannot watch %s", cs->listen[i].canon), -1;
    }
    if (srv->fdc) loop->ev_fdc = sl_fdc_watch(srv->fdc, loop->base);
    accept_enable(loop, true);
    sl_io_config ic = {
        .nb = srv->nb,
        .read_pool = srv->read_pool,
        .block_size = (size_t)g->block_size,
        .max_reads = ((unsigned)g->max_read_threads + share - 1) / share,
        .threads = (unsigned)g->max_read_threads,
    };
    if (sl_io_init(&loop->io, loop->base, loop->port, &ic, err, errlen) < 0) return -1;
    for (size_t i = 0; i < cs->n_mods; i++)
        if (cs->mods[i]->loop_init && cs->mods[i]->loop_init(loop, err, errlen) < 0) return -1;
    return 0;
}

void sl_loop_run(sl_loop *loop)
{
    if (event_base_dispatch(loop->base) < 0) sl_log("event loop %u failed", loop->id);
    while (loop->conns) sl_conn_close(loop->conns);
}

/* After the loop's thread ended and the shared pools stopped: run what completed, free. */
void sl_loop_free(sl_loop *loop)
{
    if (!loop) return;
    sl_server *srv = loop->srv;
    while (loop->conns) sl_conn_close(loop->conns);
    listeners_close(loop);
    if (loop->base) {
        sl_io_fini(&loop->io);
        if (loop->port) sl_tport_free(loop->port); /* done() of the jobs that came back */
        loop->port = NULL;
        for (size_t i = srv->cs->n_mods; i-- > 0;)
            if (srv->cs->mods[i]->loop_fini) srv->cs->mods[i]->loop_fini(loop);
        struct event *evs[] = {loop->ev_tick, loop->ev_resume, loop->ev_stop_timeout,
                               loop->ev_fdc};
        for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
            if (evs[i]) event_free(evs[i]);
        event_base_free(loop->base);
    }
    for (size_t i = 0; i < loop->n_free_in; i++) free(loop->free_in[i]);
    free(loop->free_in);
    free(loop);
}
