/* The gateway layer of proxy-core: backends, their connection pools, balancing, failover.
 *
 * Both protocols (FastCGI and HTTP) sit on top of it. Each event loop has its own gateway
 * (sl_gw): its groups, its backends' connection pools and their events, touched only by that
 * loop. A group is the set of backends one proxy-core.backends value names; it is created on a
 * loop's first request for it and lives until the loop stops. Each backend keeps idle
 * connections for reuse, counts requests in flight, and can be disabled for a while after a
 * failure. What every loop shares about a backend is its sl_gw_shared record: whether it is
 * disabled (one loop's failure keeps every loop away) and the counters the status page shows.
 * proxy-core.max-pool-size is the process's: each loop may open its share (rounded up).
 */
#ifndef SL_GATEWAY_H
#define SL_GATEWAY_H

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "module.h"

struct sl_gw_group;
struct sl_gw_backend;
struct sl_gw;

/* What every loop shares about one backend address (process-wide, never freed before exit). */
typedef struct sl_gw_shared {
    struct sl_gw_shared *next;
    char name[128];
    time_t disabled_until;        /* atomic: every loop leaves it alone until then */
    uint64_t requests, failures;  /* atomic counters */
    unsigned inflight, conns, idle; /* atomic gauges, summed over loops */
    uint64_t stalls;
    /* Applications that tie a worker to each connection (see sl_gw_release): */
    unsigned answered;            /* atomic: open connections the backend answered on */
    unsigned cap;                 /* atomic: workers it was seen to have (0: not known) */
    uint64_t cap_ms;              /* atomic: when cap was learned; forgotten SL_GW_CAP_MS later */
    uint64_t want_ms;             /* atomic: when a loop last had a new connection stuck and no
                                   * kept one of its own to close: other loops close one */
    unsigned waiters;             /* atomic: requests of every loop waiting for room (the pool
                                   * is full): a loop without waiters keeps no idle connection */
} sl_gw_shared;

/* One connection to a backend. */
typedef struct sl_gw_conn {
    struct sl_gw_conn *next;      /* in the backend's idle list */
    struct sl_gw_backend *be;
    int fd;
    struct event ev;              /* read interest, persistent while the connection is open */
    struct event wev;             /* write interest (a request that does not fit the socket) */
    bool busy;                    /* taken by a request (else idle, on the idle list) */
    event_callback_fn cb;         /* the request's handler while busy (sl_gw_watch) */
    void *cb_arg;
    unsigned requests;            /* requests sent on it */
    bool reused;                  /* it served a request before this one */
    bool answered;                /* the backend answered on it: one of its workers took it */
    uint64_t opened_ms;           /* when it was opened (sl_gw_now_ms) */
    uint64_t sent_ms;             /* when its current request was sent (opened or taken idle) */
    struct sl_gw_conn *fprev, *fnext; /* in the backend's list of unanswered new connections */
} sl_gw_conn;

/* One backend address. */
typedef struct sl_gw_backend {
    char name[128];               /* canonical: "ip:port", "[ip6]:port", "unix:/path" */
    sl_gw_shared *sh;             /* shared with the other loops */
    struct sockaddr_storage sa;
    socklen_t salen;
    struct sl_gw_group *grp;
    sl_gw_conn *idle;             /* idle connections, most recently used first */
    unsigned n_idle;
    unsigned n_conns;             /* open connections, idle ones included */
    unsigned inflight;            /* requests using a connection now (this loop) */
    sl_gw_conn *fresh, *fresh_tail; /* opened, not answered yet: oldest first */
    struct event stall_ev;        /* looks again at fresh connections while idle ones wait */
    bool stall_armed;
    time_t stall_logged;          /* last "workers all held" log line */
    uint64_t stalls;              /* kept connections closed to free a worker */
    unsigned n_fresh;             /* connections on the fresh list */
    uint64_t lat_ms;              /* recent answer time (a decaying maximum) */
    uint64_t stall_ms;            /* when a connection was last closed for a stuck one */
    /* A worker was freed for a stuck connection at rescue_ms (0: none pending) while
     * rescue_workers connections held the backend's workers. Only a new connection answered
     * soon after confirms that the workers were all held; an answer that comes late says the
     * backend was slow (a busy machine), and nothing is learned. */
    uint64_t rescue_ms;
    unsigned rescue_workers;
} sl_gw_backend;

/* A waiter for a free connection in a group (embedded in the proxy's request). */
typedef struct sl_gw_wait {
    struct sl_gw_wait *next;
    void (*wake)(struct sl_gw_wait *w);
    bool queued;
} sl_gw_wait;

/* A new connection unanswered for this long, plus twice the backend's recent answer time,
 * while kept ones hold the backend's workers is taken as waiting in the backend's
 * accept queue (see sl_gw_release). The answer-time term keeps a slow backend (a cold disk
 * behind it) from looking stuck. */
#define SL_GW_STALL_MS 10
/* How long a learned worker count (sl_gw_backend.cap) holds before the pool may grow again. */
#define SL_GW_CAP_MS 10000

/* The backends of one proxy-core.backends value, on one loop. */
typedef struct sl_gw_group {
    struct sl_gw_group *next;
    struct sl_gw *gw;
    const char *const *key;       /* the settings' list: identity of the group */
    sl_gw_backend *b;
    size_t n;
    size_t rr;                    /* round-robin cursor */
    sl_gw_wait *wait_head, *wait_tail;
    size_t n_waiting;
    long pool_max;                /* proxy-core.max-pool-size its requests last asked with */
} sl_gw_group;

/* One loop's gateway. */
typedef struct sl_gw {
    struct event_base *base;      /* NULL in unit tests without a loop */
    sl_gw_group *groups;
    unsigned share;               /* loops sharing max-pool-size: each opens 1/share of it */
} sl_gw;

/* Set by the proxy module: ask every other loop to run sl_gw_poke on its gateway soon (a loop
 * waits for a connection the process's pool has no room for, a connection was freed while
 * requests wait, or a backend was found to have fewer workers than kept connections). NULL:
 * nothing (one loop). */
extern void (*sl_gw_broadcast)(const sl_gw *from);

/* Another loop asked: close idle connections above this loop's share of each backend's learned
 * workers, and one more when a loop waits for room; then let waiting requests try again. */
void sl_gw_poke(sl_gw *gw);

/* A loop's gateway on base (NULL: no events, for unit tests); share = the number of loops. */
sl_gw *sl_gw_new(struct event_base *base, unsigned share);
/* Close every idle connection and free every group of the loop (the loop stops). */
void sl_gw_free(sl_gw *gw);

/* The group for a backends list on this loop (created on first use). NULL on ENOMEM. */
sl_gw_group *sl_gw_group_get(sl_gw *gw, const sl_strlist *backends);

/* A backend is disabled (shared by every loop). */
bool sl_gw_disabled(const sl_gw_backend *be, time_t now);

/* Choose a backend with the balancer ("round-robin", "sqf", "static", "carp"; key and key_len
 * are hashed by carp) among those not disabled at now, skipping those in `tried` (a bit per
 * backend index, for retries). NULL when none is usable. */
sl_gw_backend *sl_gw_pick(sl_gw_group *g, const char *balancer, const char *key, size_t key_len,
                          time_t now, uint64_t tried);

/* Whether a backend of g outside `tried` is not disabled at now: a retry has somewhere to go. */
bool sl_gw_any_usable(const sl_gw_group *g, time_t now, uint64_t tried);

/* An idle connection to be, or NULL. The caller owns it until sl_gw_release/sl_gw_close. */
sl_gw_conn *sl_gw_take_idle(sl_gw_backend *be);

/* Start a non-blocking connect to be, on room claimed with sl_gw_reserve (a failed connect
 * gives the claim back). Returns a connection (*in_progress tells whether to wait
 * for writability) or NULL with *err set (negative errno). holds_worker: the application ties a
 * worker to each connection (see sl_gw_release): if kept connections, on any loop, hold the
 * workers, watch whether this one gets answered. */
sl_gw_conn *sl_gw_connect(sl_gw_backend *be, bool holds_worker, bool *in_progress, int *err);

/* A monotonic clock in milliseconds, for the times the gateway compares. */
uint64_t sl_gw_now_ms(void);

/* The backend sent its first bytes on gc at now_ms: one of its workers owns the connection now.
 * This also times the answer (sl_gw_backend.lat_ms), and a new connection's first answer soon
 * after a worker was freed for a stuck one confirms the stall (see sl_gw_release). */
void sl_gw_answered(sl_gw_conn *gc, uint64_t now_ms);

/* May a new connection to be be opened now? Below pool_max for the process (every loop's
 * connections count), and below the worker count learned
 * when a new connection was found stuck behind kept ones (sl_gw_release); that count is forgotten
 * SL_GW_CAP_MS after it was learned, so a backend given more workers is used fully again. */
bool sl_gw_may_open(sl_gw_backend *be, long pool_max, uint64_t now_ms);

/* sl_gw_may_open, and the room claimed at once: the process's connection count grows by one in
 * the same atomic step, so loops deciding together never open more than pool_max between them.
 * True: the caller calls sl_gw_connect next, which uses the claim. */
bool sl_gw_reserve(sl_gw_backend *be, long pool_max, uint64_t now_ms);

/* The request on gc ended cleanly and the backend may keep the connection: park it as idle (at
 * most keep_max per backend; beyond that it is closed). Wakes a waiter of the group.
 *
 * holds_worker says the application ties a worker to each open connection (libfcgi programs:
 * php-cgi, fcgi-stat-accel, each worker blocked reading its connection). Then a pool larger than
 * the application's workers would leave a new connection in its accept queue for as long as the
 * kept ones are reused. So when a new connection has waited SL_GW_STALL_MS without an answer,
 * gc is closed instead of kept, which frees its worker for the waiting connection; and idle
 * connections are closed the same way while new ones wait. When a new connection is then
 * answered within that same time, the freed worker took it: the workers were all held, and the
 * answered connections open at the close are the backend's worker count. The pool stays at that
 * size (sl_gw_may_open) instead of opening, and closing, a connection per request; the stall
 * is counted and logged with the advice to lower max-pool-size. An answer that comes later
 * says the backend was only slow (its workers had no CPU on a busy machine): nothing is
 * learned or logged. Requests never hang either way. */
void sl_gw_release(sl_gw_conn *gc, unsigned keep_max, bool holds_worker, uint64_t now_ms);

/* Have cb(fd, what, arg) called when gc is ready for what (EV_READ, EV_WRITE or both) or after
 * secs seconds of silence (EV_TIMEOUT; secs < 0: no timeout; with EV_WRITE the timeout is the
 * write's). Read interest stays registered with the kernel from one request to the next and
 * while the connection is idle, so a kept connection costs no epoll_ctl per request; call this
 * again to change the interest or the timeout. */
void sl_gw_watch(sl_gw_conn *gc, short what, long secs, event_callback_fn cb, void *arg);

/* Stop watching gc (the request pauses reading its backend). */
void sl_gw_unwatch(sl_gw_conn *gc);

/* Close gc (after an error, or when it may not be reused). Wakes a waiter of the group. */
void sl_gw_close(sl_gw_conn *gc);

/* Count a failure of the backend (a malformed or missing answer). */
void sl_gw_failed(sl_gw_backend *be);

/* Take the backend out of rotation for secs seconds and count a failure. */
void sl_gw_disable(sl_gw_backend *be, long secs, time_t now);

/* Wait for a connection to free up (FIFO, at most max waiters). 0 or -EAGAIN when full. */
int sl_gw_wait_add(sl_gw_group *g, sl_gw_wait *w, size_t max);
/* Leave the queue (request aborted). */
void sl_gw_wait_remove(sl_gw_group *g, sl_gw_wait *w);

/* Call cb for every backend any loop has used (the status page; any thread). */
void sl_gw_each_backend(void (*cb)(void *ud, const sl_gw_shared *sh, bool disabled), void *ud);

/* Forget every shared record (process end, after every loop stopped). */
void sl_gw_shared_free(void);

#endif
