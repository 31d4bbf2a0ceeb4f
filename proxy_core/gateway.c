/* Gateway: backends, pools and balancers.
 *
 * Groups are found by the identity of their backends list (settings keep one list per config
 * value), so every request of a condition shares the same pools. Idle connections sit on a
 * per-backend stack watched for readability: a backend that closes an idle connection (or sends
 * anything unasked) has it dropped at once. Balancers: round-robin; sqf picks the backend with the
 * fewest requests in flight; static takes the first healthy backend (failover); carp hashes the
 * URL path so a URL sticks to a backend while it is healthy. A failed backend is disabled for
 * proxy-core.disable-time seconds and the request moves on to another one.
 *
 * Kept FastCGI connections each hold one of the application's workers (libfcgi blocks a worker
 * on its connection between requests). New connections are tracked until their first answer, so
 * one stuck in the application's accept queue behind kept connections is noticed and a kept
 * connection is closed to let it in (sl_gw_release); the answered connections then open are the
 * application's worker count, and the pool stops growing past it for a while (sl_gw_may_open).
 * Each connection has one persistent read event for its whole life: the request using it and
 * the idle stack share it (conn_event dispatches on `busy`), so reusing a kept connection
 * changes no epoll registration.
 */
#include "gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static sl_gw_group *groups;
static struct event_base *gw_base;

sl_gw_group *sl_gw_groups(void)
{
    return groups;
}

static int parse_addr(const char *name, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (!strncmp(name, "unix:", 5)) {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        un->sun_family = AF_UNIX;
        if (strlen(name + 5) >= sizeof un->sun_path) return -ENAMETOOLONG;
        strcpy(un->sun_path, name + 5);
        *len = (socklen_t)sizeof *un;
        return 0;
    }
    char host[128];
    const char *port;
    if (name[0] == '[') {
        const char *e = strchr(name, ']');
        if (!e) return -EINVAL;
        snprintf(host, sizeof host, "%.*s", (int)(e - name - 1), name + 1);
        port = e + 2;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)atoi(port));
        if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) return -EINVAL;
        *len = (socklen_t)sizeof *s6;
        return 0;
    }
    const char *colon = strrchr(name, ':');
    if (!colon) return -EINVAL;
    snprintf(host, sizeof host, "%.*s", (int)(colon - name), name);
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) return -EINVAL;
    *len = (socklen_t)sizeof *s4;
    return 0;
}

sl_gw_group *sl_gw_group_get(struct event_base *base, const sl_strlist *backends)
{
    gw_base = base;
    for (sl_gw_group *g = groups; g; g = g->next)
        if (g->key == backends->v) return g;
    sl_gw_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->b = calloc(backends->n, sizeof *g->b);
    if (!g->b) {
        free(g);
        return NULL;
    }
    g->key = backends->v;
    g->n = backends->n;
    for (size_t i = 0; i < g->n; i++) {
        sl_gw_backend *be = &g->b[i];
        snprintf(be->name, sizeof be->name, "%s", backends->v[i]);
        be->grp = g;
        /* The settings checked and canonicalized every address at start-up. */
        if (parse_addr(be->name, &be->sa, &be->salen) < 0) be->disabled_until = (time_t)1 << 62;
    }
    g->next = groups;
    groups = g;
    return g;
}

static uint32_t hash32(const char *s, size_t n, uint32_t seed)
{
    uint32_t h = 2166136261u ^ seed; /* FNV-1a, then a final avalanche */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

sl_gw_backend *sl_gw_pick(sl_gw_group *g, const char *balancer, const char *key, size_t key_len,
                          time_t now, uint64_t tried)
{
    sl_gw_backend *best = NULL;
    size_t n = g->n;
#define USABLE(i) ((i) >= 64 || !(tried & (1ull << (i)))) && g->b[i].disabled_until <= now
    if (!strcmp(balancer, "static")) {
        for (size_t i = 0; i < n; i++)
            if (USABLE(i)) return &g->b[i];
        return NULL;
    }
    if (!strcmp(balancer, "carp")) {
        /* Highest random weight: each backend scores the key; removing one moves only its
         * share of the URLs. */
        uint32_t top = 0;
        for (size_t i = 0; i < n; i++) {
            if (!(USABLE(i))) continue;
            uint32_t s = hash32(key, key_len, hash32(g->b[i].name, strlen(g->b[i].name), 0));
            if (!best || s > top) {
                best = &g->b[i];
                top = s;
            }
        }
        return best;
    }
    if (!strcmp(balancer, "sqf")) {
        /* Shortest queue first; ties go round-robin so idle backends share the load. */
        for (size_t k = 0; k < n; k++) {
            size_t i = (g->rr + k) % n;
            if (!(USABLE(i))) continue;
            if (!best || g->b[i].inflight < best->inflight) best = &g->b[i];
        }
        g->rr = (g->rr + 1) % n;
        return best;
    }
    for (size_t k = 0; k < n; k++) { /* round-robin */
        size_t i = (g->rr + k) % n;
        if (USABLE(i)) {
            g->rr = (i + 1) % n;
            return &g->b[i];
        }
    }
    return NULL;
#undef USABLE
}

static void wake_one(sl_gw_group *g)
{
    sl_gw_wait *w = g->wait_head;
    if (!w) return;
    g->wait_head = w->next;
    if (!g->wait_head) g->wait_tail = NULL;
    g->n_waiting--;
    w->queued = false;
    w->next = NULL;
    w->wake(w);
}

int sl_gw_wait_add(sl_gw_group *g, sl_gw_wait *w, size_t max)
{
    if (g->n_waiting >= max) return -EAGAIN;
    w->next = NULL;
    w->queued = true;
    if (g->wait_tail)
        g->wait_tail->next = w;
    else
        g->wait_head = w;
    g->wait_tail = w;
    g->n_waiting++;
    return 0;
}

void sl_gw_wait_remove(sl_gw_group *g, sl_gw_wait *w)
{
    if (!w->queued) return;
    sl_gw_wait **pp = &g->wait_head, *prev = NULL;
    while (*pp && *pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp) {
        *pp = w->next;
        if (g->wait_tail == w) g->wait_tail = prev;
        g->n_waiting--;
    }
    w->queued = false;
}

uint64_t sl_gw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void fresh_unlink(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
    if (gc->answered) return;
    gc->answered = true;
    be->n_fresh--;
    if (gc->fprev)
        gc->fprev->fnext = gc->fnext;
    else
        be->fresh = gc->fnext;
    if (gc->fnext)
        gc->fnext->fprev = gc->fprev;
    else
        be->fresh_tail = gc->fprev;
    gc->fprev = gc->fnext = NULL;
}

/* gc waits for its first answer from now_ms: at the tail of the backend's fresh list. */
static void fresh_append(sl_gw_backend *be, sl_gw_conn *gc, uint64_t now_ms)
{
    gc->answered = false;
    be->n_fresh++;
    gc->opened_ms = now_ms;
    gc->fprev = be->fresh_tail;
    gc->fnext = NULL;
    if (be->fresh_tail)
        be->fresh_tail->fnext = gc;
    else
        be->fresh = gc;
    be->fresh_tail = gc;
}

/* A worker was freed for the oldest new connection: restart its wait, so the next one is freed
 * only if it still waits SL_GW_STALL_MS from now (the worker takes a moment to accept). */
static void fresh_requeue(sl_gw_backend *be, uint64_t now_ms)
{
    sl_gw_conn *f = be->fresh;
    fresh_unlink(f);
    fresh_append(be, f, now_ms);
}

void sl_gw_answered(sl_gw_conn *gc, uint64_t now_ms)
{
    sl_gw_backend *be = gc->be;
    if (now_ms >= gc->sent_ms) {
        /* A decaying maximum: one slow answer raises it at once, fast ones lower it slowly. A
         * new connection's time may include a wait in the accept queue; that only makes the
         * stall test more patient, which is the safe side: taking a slow backend (a cold disk)
         * for a full one would close connections its workers were about to answer on. */
        uint64_t lat = now_ms - gc->sent_ms;
        if (lat >= be->lat_ms)
            be->lat_ms = lat;
        else
            be->lat_ms -= (be->lat_ms - lat + 7) / 8;
    }
    fresh_unlink(gc);
}

bool sl_gw_may_open(sl_gw_backend *be, long pool_max, uint64_t now_ms)
{
    if (be->cap && now_ms - be->cap_ms >= SL_GW_CAP_MS) be->cap = 0;
    if ((long)be->n_conns >= pool_max) return false;
    return !be->cap || be->n_conns < be->cap;
}

static void unwatch(sl_gw_conn *gc)
{
    if (event_initialized(&gc->ev)) event_del(&gc->ev);
    if (event_initialized(&gc->wev)) event_del(&gc->wev);
}

/* Take an idle connection off the idle stack and close it. */
static void idle_drop(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
    sl_gw_conn **pp = &be->idle;
    while (*pp && *pp != gc) pp = &(*pp)->next;
    if (*pp) {
        *pp = gc->next;
        be->n_idle--;
    }
    unwatch(gc);
    close(gc->fd);
    be->n_conns--;
    free(gc);
}

/* The connection's read event, for its whole life. */
static void conn_event(evutil_socket_t fd, short what, void *arg)
{
    sl_gw_conn *gc = arg;
    if (!gc->busy) {
        /* An idle connection became readable: the backend closed it (or misbehaves). */
        sl_gw_group *g = gc->be->grp;
        idle_drop(gc);
        wake_one(g);
        return;
    }
    if (gc->cb) gc->cb(fd, what, gc->cb_arg);
}

static void conn_wevent(evutil_socket_t fd, short what, void *arg)
{
    sl_gw_conn *gc = arg;
    if (gc->busy && gc->cb) gc->cb(fd, what, gc->cb_arg);
}

/* Register read interest (once: the event is persistent) and set or clear its timeout. Re-adding
 * a pending event only moves its timer, which costs no system call. */
static void read_watch(sl_gw_conn *gc, const struct timeval *tv)
{
    if (!gw_base) return; /* unit tests without a loop */
    if (!event_initialized(&gc->ev))
        event_assign(&gc->ev, gw_base, gc->fd, EV_READ | EV_PERSIST, conn_event, gc);
    if (tv || !event_pending(&gc->ev, EV_READ, NULL))
        event_add(&gc->ev, tv);
    else
        event_remove_timer(&gc->ev);
}

void sl_gw_watch(sl_gw_conn *gc, short what, long secs, event_callback_fn cb, void *arg)
{
    gc->cb = cb;
    gc->cb_arg = arg;
    struct timeval tv = {secs > 0 ? secs : 1, 0};
    const struct timeval *t = secs < 0 ? NULL : &tv;
    if (!gw_base) return;
    if (what & EV_WRITE) {
        if (!event_initialized(&gc->wev))
            event_assign(&gc->wev, gw_base, gc->fd, EV_WRITE, conn_wevent, gc);
        event_add(&gc->wev, t);
    } else if (event_initialized(&gc->wev)) {
        event_del(&gc->wev);
    }
    if (what & EV_READ)
        read_watch(gc, (what & EV_WRITE) ? NULL : t);
    else if (event_initialized(&gc->ev))
        event_del(&gc->ev);
}

void sl_gw_unwatch(sl_gw_conn *gc)
{
    unwatch(gc);
}

/* Has the oldest new connection waited long enough to be stuck behind kept ones? */
static bool stalled(const sl_gw_backend *be, uint64_t now_ms)
{
    return be->fresh && now_ms - be->fresh->opened_ms >= SL_GW_STALL_MS + 2 * be->lat_ms;
}

/* A new connection is stuck behind kept ones: count it; learn the backend's workers from the
 * answered connections open now, so the pool stops opening connections that would only queue
 * (each costing a kept one its worker); log it now and then. */
static void stall_seen(sl_gw_backend *be, uint64_t now_ms)
{
    be->stalls++;
    be->stall_ms = now_ms;
    /* Each answered connection still open holds a worker of its own, so their number is a
     * lower bound of the workers; one slow to answer makes it low, never high. Keep the
     * largest seen while it is remembered. */
    unsigned workers = be->n_conns > be->n_fresh ? be->n_conns - be->n_fresh : 1;
    if (be->cap && now_ms - be->cap_ms < SL_GW_CAP_MS && be->cap > workers) workers = be->cap;
    else be->cap_ms = now_ms;
    be->cap = workers;
    time_t now = time(NULL);
    if (now - be->stall_logged < 60) return;
    be->stall_logged = now;
    sl_log("proxy-core: backend %s: a new connection waited for a worker while kept "
           "connections held them all; closing kept connections to make room, and opening no "
           "more than it has shown workers for (%u so far; is proxy-core.max-pool-size above "
           "the application's worker count?)",
           be->name, workers);
}

static void stall_check(evutil_socket_t fd, short what, void *arg);

static void stall_arm(sl_gw_backend *be, uint64_t now_ms)
{
    if (!gw_base || !be->fresh || !be->idle) return;
    if (!be->stall_armed) {
        if (!event_initialized(&be->stall_ev)) evtimer_assign(&be->stall_ev, gw_base, stall_check, be);
        uint64_t age = now_ms - be->fresh->opened_ms;
        uint64_t left = age >= SL_GW_STALL_MS ? 1 : SL_GW_STALL_MS - age;
        struct timeval tv = {.tv_sec = 0, .tv_usec = (suseconds_t)(left * 1000)};
        evtimer_add(&be->stall_ev, &tv);
        be->stall_armed = true;
    }
}

static void stall_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sl_gw_backend *be = arg;
    be->stall_armed = false;
    uint64_t now = sl_gw_now_ms();
    /* One idle connection per stuck new one: each close frees a worker for one of them. */
    while (be->idle && stalled(be, now)) {
        stall_seen(be, now);
        idle_drop(be->idle);
        fresh_requeue(be, now);
    }
    stall_arm(be, now);
}

sl_gw_conn *sl_gw_take_idle(sl_gw_backend *be)
{
    sl_gw_conn *gc = be->idle;
    if (!gc) return NULL;
    be->idle = gc->next;
    be->n_idle--;
    gc->next = NULL;
    /* Its read event stays registered: the request takes it over with sl_gw_watch. */
    gc->busy = true;
    gc->reused = true;
    gc->sent_ms = sl_gw_now_ms();
    be->inflight++;
    return gc;
}

sl_gw_conn *sl_gw_connect(sl_gw_backend *be, bool *in_progress, int *err)
{
    int fd = socket(be->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    /* No TCP_NODELAY: a request leaves in one send(), which Nagle never holds back. */
    *in_progress = false;
    if (connect(fd, (struct sockaddr *)&be->sa, be->salen) < 0) {
        /* A unix socket whose listen queue is full answers EAGAIN: treat like a refusal. */
        if (errno != EINPROGRESS) {
            *err = -errno;
            close(fd);
            return NULL;
        }
        *in_progress = true;
    }
    sl_gw_conn *gc = calloc(1, sizeof *gc);
    if (!gc) {
        close(fd);
        *err = -ENOMEM;
        return NULL;
    }
    gc->fd = fd;
    gc->be = be;
    gc->busy = true;
    gc->sent_ms = sl_gw_now_ms();
    fresh_append(be, gc, gc->sent_ms);
    be->n_conns++;
    be->inflight++;
    return gc;
}

void sl_gw_release(sl_gw_conn *gc, unsigned keep_max, bool holds_worker, uint64_t now_ms)
{
    sl_gw_backend *be = gc->be;
    be->inflight--;
    fresh_unlink(gc);
    /* One kept connection per stall period: the worker it frees needs a moment to accept. */
    bool stuck = holds_worker && stalled(be, now_ms) &&
                 now_ms - be->stall_ms >= SL_GW_STALL_MS + 2 * be->lat_ms;
    if (stuck) {
        stall_seen(be, now_ms);
        fresh_requeue(be, now_ms);
    }
    if (be->n_idle >= keep_max || stuck) {
        unwatch(gc);
        close(gc->fd);
        be->n_conns--;
        free(gc);
    } else {
        /* Idle: a read now means the backend closed it (conn_event). The read event is
         * usually registered already; only its timeout goes. */
        gc->busy = false;
        gc->cb = NULL;
        if (event_initialized(&gc->wev)) event_del(&gc->wev);
        read_watch(gc, NULL);
        gc->next = be->idle;
        be->idle = gc;
        be->n_idle++;
        if (holds_worker) stall_arm(be, now_ms);
    }
    wake_one(be->grp);
}

void sl_gw_close(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
    be->inflight--;
    fresh_unlink(gc);
    unwatch(gc);
    close(gc->fd);
    be->n_conns--;
    free(gc);
    wake_one(be->grp);
}

void sl_gw_disable(sl_gw_backend *be, long secs, time_t now)
{
    be->failures++;
    if (be->disabled_until <= now)
        sl_log("proxy-core: backend %s disabled for %lds", be->name, secs);
    be->disabled_until = now + secs;
}

void sl_gw_each_backend(void (*cb)(void *ud, const char *name, unsigned inflight, unsigned conns,
                                   unsigned idle, uint64_t requests, uint64_t failures,
                                   bool disabled),
                        void *ud)
{
    time_t now = time(NULL);
    for (sl_gw_group *g = groups; g; g = g->next)
        for (size_t i = 0; i < g->n; i++) {
            const sl_gw_backend *b = &g->b[i];
            cb(ud, b->name, b->inflight, b->n_conns, b->n_idle, b->requests, b->failures,
               b->disabled_until > now);
        }
}

void sl_gw_shutdown(void)
{
    while (groups) {
        sl_gw_group *g = groups;
        groups = g->next;
        for (size_t i = 0; i < g->n; i++) {
            if (g->b[i].stall_armed) event_del(&g->b[i].stall_ev);
            while (g->b[i].idle) {
                sl_gw_conn *gc = g->b[i].idle;
                g->b[i].idle = gc->next;
                unwatch(gc);
                close(gc->fd);
                free(gc);
            }
        }
        free(g->b);
        free(g);
    }
}
