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
 *
 * Everything here belongs to one loop except the shared records (sl_gw_shared): a list that
 * only grows, under a mutex, whose fields every loop updates with atomic operations. With
 * several loops the worker count is learned for the process (the answered connections open on
 * every loop) and each loop keeps its share of it; a loop whose new connection is stuck and that
 * has no kept connection of its own to close asks the others (want_ms, and a trim message).
 */
#include "gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "queue.h"

#define A_ADD(f, n) __atomic_add_fetch(&(f), (n), __ATOMIC_RELAXED)
#define A_SUB(f, n) __atomic_sub_fetch(&(f), (n), __ATOMIC_RELAXED)
#define A_GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static sl_gw_shared *shared;

/* The shared record of a backend address: found, or made, under the lock. */
static sl_gw_shared *shared_get(const char *name)
{
    pthread_mutex_lock(&shared_lock);
    sl_gw_shared *sh = shared;
    while (sh && strcmp(sh->name, name)) sh = sh->next;
    if (!sh && (sh = calloc(1, sizeof *sh))) {
        snprintf(sh->name, sizeof sh->name, "%s", name);
        /* Published with release semantics: readers walk the list without the lock. */
        sh->next = shared;
        __atomic_store_n(&shared, sh, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&shared_lock);
    return sh;
}

void sl_gw_shared_free(void)
{
    pthread_mutex_lock(&shared_lock);
    while (shared) {
        sl_gw_shared *n = shared->next;
        free(shared);
        shared = n;
    }
    pthread_mutex_unlock(&shared_lock);
}

void (*sl_gw_broadcast)(const sl_gw *from);

/* Requests waiting for room, on every loop (atomic). */
static unsigned waiting_total;

bool sl_gw_disabled(const sl_gw_backend *be, time_t now)
{
    return A_GET(be->sh->disabled_until) > now;
}

sl_gw *sl_gw_new(struct event_base *base, unsigned share)
{
    sl_gw *gw = calloc(1, sizeof *gw);
    if (gw) {
        gw->base = base;
        gw->share = share ? share : 1;
    }
    return gw;
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

sl_gw_group *sl_gw_group_get(sl_gw *gw, const sl_strlist *backends)
{
    for (sl_gw_group *g = gw->groups; g; g = g->next)
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
    g->gw = gw;
    for (size_t i = 0; i < g->n; i++) {
        sl_gw_backend *be = &g->b[i];
        snprintf(be->name, sizeof be->name, "%s", backends->v[i]);
        be->grp = g;
        if (!(be->sh = shared_get(be->name))) {
            free(g->b);
            free(g);
            return NULL;
        }
        /* The config layer checked and canonicalized every address at start-up. */
        if (parse_addr(be->name, &be->sa, &be->salen) < 0)
            __atomic_store_n(&be->sh->disabled_until, (time_t)1 << 62, __ATOMIC_RELAXED);
    }
    g->next = gw->groups;
    gw->groups = g;
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

/* Backend i of g may take a request at now: not tried yet (backends past the 64th have no bit
 * in `tried`) and not disabled. */
static bool usable(const sl_gw_group *g, size_t i, time_t now, uint64_t tried)
{
    return (i >= 64 || !(tried & (1ull << i))) && !sl_gw_disabled(&g->b[i], now);
}

sl_gw_backend *sl_gw_pick(sl_gw_group *g, const char *balancer, const char *key, size_t key_len,
                          time_t now, uint64_t tried)
{
    sl_gw_backend *best = NULL;
    size_t n = g->n;
#define USABLE(i) usable(g, (i), now, tried)
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

bool sl_gw_any_usable(const sl_gw_group *g, time_t now, uint64_t tried)
{
    for (size_t i = 0; i < g->n; i++)
        if (usable(g, i, now, tried)) return true;
    return false;
}

static void waiters_add(sl_gw_group *g, int d)
{
    for (size_t i = 0; i < g->n; i++) __atomic_add_fetch(&g->b[i].sh->waiters, (unsigned)d, __ATOMIC_RELAXED);
}

/* Requests of other loops wait for room in be's pool. */
static bool others_wait(const sl_gw_backend *be)
{
    return A_GET(be->sh->waiters) > be->grp->n_waiting;
}

static void wake_one(sl_gw_group *g)
{
    sl_gw_wait *w = g->wait_head;
    if (!w) return;
    waiters_add(g, -1);
    g->wait_head = w->next;
    if (!g->wait_head) g->wait_tail = NULL;
    g->n_waiting--;
    __atomic_sub_fetch(&waiting_total, 1, __ATOMIC_RELAXED);
    w->queued = false;
    w->next = NULL;
    w->wake(w);
}

int sl_gw_wait_add(sl_gw_group *g, sl_gw_wait *w, size_t max)
{
    if (g->n_waiting >= max) return -EAGAIN;
    w->next = NULL;
    w->queued = true;
    SL_QUEUE_APPEND(g->wait_head, g->wait_tail, w, next);
    g->n_waiting++;
    waiters_add(g, 1);
    __atomic_add_fetch(&waiting_total, 1, __ATOMIC_RELAXED);
    /* The room may be held by other loops' idle connections: they give them back. */
    if (g->n_waiting == 1 && g->gw->share > 1 && sl_gw_broadcast) sl_gw_broadcast(g->gw);
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
        waiters_add(g, -1);
        __atomic_sub_fetch(&waiting_total, 1, __ATOMIC_RELAXED);
    }
    w->queued = false;
}

uint64_t sl_gw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Take gc off the fresh list (it was on it). */
static void fresh_remove(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
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

/* gc was answered: off the fresh list, counted as holding a worker. */
static void fresh_unlink(sl_gw_conn *gc)
{
    if (gc->answered) return;
    gc->answered = true;
    A_ADD(gc->be->sh->answered, 1);
    fresh_remove(gc);
}

/* gc waits for its first answer from now_ms: at the tail of the backend's fresh list. */
static void fresh_append(sl_gw_backend *be, sl_gw_conn *gc, uint64_t now_ms)
{
    if (gc->answered) A_SUB(be->sh->answered, 1);
    gc->answered = false;
    be->n_fresh++;
    gc->opened_ms = now_ms;
    gc->fprev = be->fresh_tail;
    gc->fnext = NULL;
    SL_QUEUE_APPEND(be->fresh, be->fresh_tail, gc, fnext);
}

/* A worker was freed for the oldest new connection: restart its wait, so the next one is freed
 * only if it still waits SL_GW_STALL_MS from now (the worker takes a moment to accept). */
static void fresh_requeue(sl_gw_backend *be, uint64_t now_ms)
{
    sl_gw_conn *f = be->fresh;
    fresh_unlink(f);
    fresh_append(be, f, now_ms);
}

static void stall_confirmed(sl_gw_backend *be, uint64_t now_ms);

void sl_gw_answered(sl_gw_conn *gc, uint64_t now_ms)
{
    sl_gw_backend *be = gc->be;
    /* A new connection answered right after a worker was freed for one: the freed worker took
     * it, so the workers were all held (judged against the answer time before this one). */
    if (!gc->answered && be->rescue_ms && now_ms >= be->rescue_ms) {
        if (now_ms - be->rescue_ms <= SL_GW_STALL_MS + 2 * be->lat_ms) stall_confirmed(be, now_ms);
        be->rescue_ms = 0;
    }
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

/* This loop's share of the workers learned for be (0: none learned, or forgotten). */
static unsigned cap_share(const sl_gw_backend *be, uint64_t now_ms)
{
    unsigned cap = A_GET(be->sh->cap);
    if (!cap || now_ms - A_GET(be->sh->cap_ms) >= SL_GW_CAP_MS) return 0;
    unsigned share = be->grp->gw->share;
    /* Rounded down, at least one: loops together never hold more than the workers (unless
     * there are more loops than workers). */
    return cap / share ? cap / share : 1;
}

/* Room for one more connection when the process holds conns of them. */
static bool room_for(const sl_gw_backend *be, unsigned conns, long pool_max, uint64_t now_ms)
{
    if ((long)conns >= pool_max) return false;
    unsigned cap = A_GET(be->sh->cap);
    if (!cap || now_ms - A_GET(be->sh->cap_ms) >= SL_GW_CAP_MS) return true;
    return conns < cap;
}

bool sl_gw_may_open(sl_gw_backend *be, long pool_max, uint64_t now_ms)
{
    be->grp->pool_max = pool_max; /* for sl_gw_poke, which has no request to ask */
    return room_for(be, A_GET(be->sh->conns), pool_max, now_ms);
}

bool sl_gw_reserve(sl_gw_backend *be, long pool_max, uint64_t now_ms)
{
    be->grp->pool_max = pool_max;
    /* Counted before the connect, in one compare-and-swap: two loops that both saw room for
     * the last connection would otherwise open one more than the pool, and with a pool sized
     * to the workers that one waits in the accept queue behind kept connections. */
    unsigned conns = A_GET(be->sh->conns);
    do {
        if (!room_for(be, conns, pool_max, now_ms)) return false;
    } while (!__atomic_compare_exchange_n(&be->sh->conns, &conns, conns + 1, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return true;
}

static void unwatch(sl_gw_conn *gc)
{
    if (event_initialized(&gc->ev)) event_del(&gc->ev);
    if (event_initialized(&gc->wev)) event_del(&gc->wev);
}

/* Close a connection and forget it (it is on no list any more). */
static void conn_free(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
    if (gc->answered)
        A_SUB(be->sh->answered, 1);
    else
        fresh_remove(gc);
    unwatch(gc);
    close(gc->fd);
    be->n_conns--;
    A_SUB(be->sh->conns, 1);
    sl_gw *gw = be->grp->gw;
    free(gc);
    /* Room for a request another loop holds back. */
    if (gw->share > 1 && sl_gw_broadcast && __atomic_load_n(&waiting_total, __ATOMIC_RELAXED))
        sl_gw_broadcast(gw);
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
        A_SUB(be->sh->idle, 1);
    }
    conn_free(gc);
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
    struct event_base *base = gc->be->grp->gw->base;
    if (!base) return; /* unit tests without a loop */
    if (!event_initialized(&gc->ev))
        event_assign(&gc->ev, base, gc->fd, EV_READ | EV_PERSIST, conn_event, gc);
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
    struct event_base *base = gc->be->grp->gw->base;
    if (!base) return;
    if (what & EV_WRITE) {
        if (!event_initialized(&gc->wev))
            event_assign(&gc->wev, base, gc->fd, EV_WRITE, conn_wevent, gc);
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

/* Has the oldest new connection waited long enough to be stuck behind kept ones? Its answer
 * may already wait in its socket while this loop was busy elsewhere (a loaded machine, a loop
 * under valgrind): then it is not stuck, only not read yet, and a kept connection closed for
 * it would be lost for nothing. The look costs a poll() only when the time says stuck. */
static bool stalled(const sl_gw_backend *be, uint64_t now_ms)
{
    if (!be->fresh || now_ms - be->fresh->opened_ms < SL_GW_STALL_MS + 2 * be->lat_ms) return false;
    struct pollfd p = {.fd = be->fresh->fd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* A new connection looks stuck behind kept ones, and a worker is about to be freed for it:
 * remember how many answered connections held workers (each answered connection still open, on
 * any loop, holds one of its own, so their number is a lower bound of the workers; one slow to
 * answer makes it low, never high). Whether they really were all held, the next answer tells
 * (sl_gw_answered). */
static void stall_seen(sl_gw_backend *be, uint64_t now_ms)
{
    be->stalls++;
    A_ADD(be->sh->stalls, 1);
    be->stall_ms = now_ms;
    /* Several freed in a row (one per stuck connection): the first count, before any of them
     * closed, is the one that held them all. */
    unsigned held = A_GET(be->sh->answered);
    if (!be->rescue_ms || held > be->rescue_workers) be->rescue_workers = held;
    be->rescue_ms = now_ms;
}

/* The stall was real: learn the backend's workers, so the pool stops opening connections that
 * would only queue (each costing a kept one its worker); log it now and then. */
static void stall_confirmed(sl_gw_backend *be, uint64_t now_ms)
{
    /* Keep the largest seen while it is remembered. */
    unsigned workers = be->rescue_workers;
    if (!workers) workers = 1;
    unsigned cap = A_GET(be->sh->cap);
    if (cap && now_ms - A_GET(be->sh->cap_ms) < SL_GW_CAP_MS && cap > workers)
        workers = cap;
    else
        __atomic_store_n(&be->sh->cap_ms, now_ms, __ATOMIC_RELAXED);
    bool lower = workers != cap;
    __atomic_store_n(&be->sh->cap, workers, __ATOMIC_RELAXED);
    if (lower && be->grp->gw->share > 1 && sl_gw_broadcast) sl_gw_broadcast(be->grp->gw);
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

/* Kept connections hold the workers a new connection waits for: ours, or another loop's. */
static bool others_hold(const sl_gw_backend *be)
{
    unsigned mine = be->n_conns - be->n_fresh;
    return A_GET(be->sh->answered) > mine;
}

static void stall_arm(sl_gw_backend *be, uint64_t now_ms)
{
    struct event_base *base = be->grp->gw->base;
    if (!base || !be->fresh || !(be->idle || others_hold(be))) return;
    if (!be->stall_armed) {
        if (!event_initialized(&be->stall_ev)) evtimer_assign(&be->stall_ev, base, stall_check, be);
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
    if (stalled(be, now) && others_hold(be)) {
        /* Another loop's kept connections hold the workers: it closes one when its request
         * ends (sl_gw_release), or at once if idle (the trim message). */
        stall_seen(be, now);
        __atomic_store_n(&be->sh->want_ms, now, __ATOMIC_RELAXED);
        if (sl_gw_broadcast) sl_gw_broadcast(be->grp->gw);
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
    A_SUB(be->sh->idle, 1);
    gc->next = NULL;
    /* Its read event stays registered: the request takes it over with sl_gw_watch. */
    gc->busy = true;
    gc->reused = true;
    gc->sent_ms = sl_gw_now_ms();
    be->inflight++;
    A_ADD(be->sh->inflight, 1);
    A_ADD(be->sh->requests, 1);
    return gc;
}

sl_gw_conn *sl_gw_connect(sl_gw_backend *be, bool holds_worker, bool *in_progress, int *err)
{
    sl_gw_conn *gc = NULL;
    int fd = socket(be->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) goto fail;
    /* No TCP_NODELAY: a request leaves in one send(), which Nagle never holds back. */
    *in_progress = false;
    if (connect(fd, (struct sockaddr *)&be->sa, be->salen) < 0) {
        /* A unix socket whose listen queue is full answers EAGAIN: treat like a refusal. */
        if (errno != EINPROGRESS) goto fail;
        *in_progress = true;
    }
    gc = calloc(1, sizeof *gc);
    if (!gc) goto fail;
    gc->fd = fd;
    gc->be = be;
    gc->busy = true;
    gc->sent_ms = sl_gw_now_ms();
    fresh_append(be, gc, gc->sent_ms);
    be->n_conns++;
    be->inflight++;
    A_ADD(be->sh->inflight, 1);
    A_ADD(be->sh->requests, 1);
    /* Its workers may all be held by kept connections of other loops: only a timer would
     * notice (nothing here is released to look again). */
    if (holds_worker) stall_arm(be, gc->sent_ms);
    return gc;

fail:
    *err = -errno;
    if (fd >= 0) close(fd);
    A_SUB(be->sh->conns, 1); /* the reservation goes back */
    return NULL;
}

void sl_gw_release(sl_gw_conn *gc, unsigned keep_max, bool holds_worker, uint64_t now_ms)
{
    sl_gw_backend *be = gc->be;
    be->inflight--;
    A_SUB(be->sh->inflight, 1);
    fresh_unlink(gc);
    /* One kept connection per stall period: the worker it frees needs a moment to accept. */
    bool stuck = holds_worker && stalled(be, now_ms) &&
                 now_ms - be->stall_ms >= SL_GW_STALL_MS + 2 * be->lat_ms;
    if (stuck) {
        stall_seen(be, now_ms);
        fresh_requeue(be, now_ms);
    }
    /* Another loop asked for a worker, or this loop holds more than its share of them. */
    uint64_t want = A_GET(be->sh->want_ms);
    bool wanted = holds_worker && want && now_ms - want < SL_GW_STALL_MS + 2 * be->lat_ms &&
                  __atomic_compare_exchange_n(&be->sh->want_ms, &want, 0, false,
                                              __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    unsigned cap = holds_worker ? cap_share(be, now_ms) : 0;
    /* Fewer workers than loops: a kept connection would leave another loop without any, so
     * none is kept (each request opens its own, as lighttpd 1.4 does). */
    bool too_few = holds_worker && A_GET(be->sh->cap) &&
                   now_ms - A_GET(be->sh->cap_ms) < SL_GW_CAP_MS &&
                   A_GET(be->sh->cap) < be->grp->gw->share;
    if (be->n_idle >= keep_max || stuck || wanted || too_few || others_wait(be) ||
        (cap && be->n_conns - be->n_fresh > cap)) {
        conn_free(gc);
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
        A_ADD(be->sh->idle, 1);
        if (holds_worker) stall_arm(be, now_ms);
    }
    wake_one(be->grp);
}

void sl_gw_close(sl_gw_conn *gc)
{
    sl_gw_backend *be = gc->be;
    be->inflight--;
    A_SUB(be->sh->inflight, 1);
    conn_free(gc);
    wake_one(be->grp);
}

void sl_gw_poke(sl_gw *gw)
{
    uint64_t now = sl_gw_now_ms();
    for (sl_gw_group *g = gw->groups; g; g = g->next) {
        for (size_t i = 0; i < g->n; i++) {
            sl_gw_backend *be = &g->b[i];
            unsigned cap = cap_share(be, now);
            uint64_t want = A_GET(be->sh->want_ms);
            /* Idle connections above our share go; one more if a loop waits for a worker. */
            while (be->idle && ((cap && be->n_conns - be->n_fresh > cap) || others_wait(be)))
                idle_drop(be->idle);
            if (be->idle && want && now - want < SL_GW_STALL_MS + 2 * be->lat_ms &&
                __atomic_compare_exchange_n(&be->sh->want_ms, &want, 0, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                idle_drop(be->idle);
        }
        /* A waiting request tries again only if there is room now: with every connection busy
         * the loops would otherwise wake each other in turn for nothing. */
        bool room = false;
        for (size_t i = 0; i < g->n && !room; i++)
            room = g->b[i].idle || (g->pool_max && sl_gw_may_open(&g->b[i], g->pool_max, now));
        if (room) wake_one(g);
    }
}

void sl_gw_disable(sl_gw_backend *be, long secs, time_t now)
{
    A_ADD(be->sh->failures, 1);
    if (A_GET(be->sh->disabled_until) <= now)
        sl_log("proxy-core: backend %s disabled for %lds", be->name, secs);
    __atomic_store_n(&be->sh->disabled_until, now + secs, __ATOMIC_RELAXED);
}

void sl_gw_failed(sl_gw_backend *be)
{
    A_ADD(be->sh->failures, 1);
}

void sl_gw_each_backend(void (*cb)(void *ud, const sl_gw_shared *sh, bool disabled), void *ud)
{
    time_t now = time(NULL);
    for (sl_gw_shared *sh = __atomic_load_n(&shared, __ATOMIC_ACQUIRE); sh; sh = sh->next)
        cb(ud, sh, A_GET(sh->disabled_until) > now);
}

void sl_gw_free(sl_gw *gw)
{
    if (!gw) return;
    while (gw->groups) {
        sl_gw_group *g = gw->groups;
        gw->groups = g->next;
        for (size_t i = 0; i < g->n; i++) {
            if (g->b[i].stall_armed) event_del(&g->b[i].stall_ev);
            while (g->b[i].idle) idle_drop(g->b[i].idle);
        }
        free(g->b);
        free(g);
    }
    free(gw);
}
