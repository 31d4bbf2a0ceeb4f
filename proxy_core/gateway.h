/* The gateway layer of proxy-core: backends, their connection pools, balancing, failover.
 *
 * Both protocols (FastCGI and HTTP) sit on top of it. A group is the set of backends one
 * proxy-core.backends value names; it is created on first use and lives until the server stops.
 * Each backend keeps idle connections for reuse, counts requests in flight, and can be disabled
 * for a while after a failure.
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

#include "settings.h"

struct sl_gw_group;
struct sl_gw_backend;

/* One connection to a backend. */
typedef struct sl_gw_conn {
    struct sl_gw_conn *next;      /* in the backend's idle list */
    struct sl_gw_backend *be;
    int fd;
    struct event ev;              /* owned by whoever uses the connection */
    unsigned requests;            /* requests sent on it */
    bool reused;                  /* it served a request before this one */
} sl_gw_conn;

/* One backend address. */
typedef struct sl_gw_backend {
    char name[128];               /* canonical: "ip:port", "[ip6]:port", "unix:/path" */
    struct sockaddr_storage sa;
    socklen_t salen;
    struct sl_gw_group *grp;
    sl_gw_conn *idle;             /* idle connections, most recently used first */
    unsigned n_idle;
    unsigned n_conns;             /* open connections, idle ones included */
    unsigned inflight;            /* requests using a connection now */
    time_t disabled_until;
    uint64_t requests, failures;
} sl_gw_backend;

/* A waiter for a free connection in a group (embedded in the proxy's request). */
typedef struct sl_gw_wait {
    struct sl_gw_wait *next;
    void (*wake)(struct sl_gw_wait *w);
    bool queued;
} sl_gw_wait;

/* The backends of one proxy-core.backends value. */
typedef struct sl_gw_group {
    struct sl_gw_group *next;
    const char *const *key;       /* the settings' list: identity of the group */
    sl_gw_backend *b;
    size_t n;
    size_t rr;                    /* round-robin cursor */
    sl_gw_wait *wait_head, *wait_tail;
    size_t n_waiting;
} sl_gw_group;

/* The group for a backends list (created on first use). NULL on ENOMEM. */
sl_gw_group *sl_gw_group_get(struct event_base *base, const sl_strlist *backends);

/* Every group, for the status page. */
sl_gw_group *sl_gw_groups(void);

/* Choose a backend with the balancer ("round-robin", "sqf", "static", "carp"; key and key_len
 * are hashed by carp) among those not disabled at now, skipping those in `tried` (a bit per
 * backend index, for retries). NULL when none is usable. */
sl_gw_backend *sl_gw_pick(sl_gw_group *g, const char *balancer, const char *key, size_t key_len,
                          time_t now, uint64_t tried);

/* An idle connection to be, or NULL. The caller owns it until sl_gw_release/sl_gw_close. */
sl_gw_conn *sl_gw_take_idle(sl_gw_backend *be);

/* Start a non-blocking connect to be. Returns a connection (*in_progress tells whether to wait
 * for writability) or NULL with *err set (negative errno). */
sl_gw_conn *sl_gw_connect(sl_gw_backend *be, bool *in_progress, int *err);

/* The request on gc ended cleanly and the backend may keep the connection: park it as idle (at
 * most keep_max per backend; beyond that it is closed). Wakes a waiter of the group. */
void sl_gw_release(sl_gw_conn *gc, unsigned keep_max);

/* Close gc (after an error, or when it may not be reused). Wakes a waiter of the group. */
void sl_gw_close(sl_gw_conn *gc);

/* Take the backend out of rotation for secs seconds and count a failure. */
void sl_gw_disable(sl_gw_backend *be, long secs, time_t now);

/* Wait for a connection to free up (FIFO, at most max waiters). 0 or -EAGAIN when full. */
int sl_gw_wait_add(sl_gw_group *g, sl_gw_wait *w, size_t max);
/* Leave the queue (request aborted). */
void sl_gw_wait_remove(sl_gw_group *g, sl_gw_wait *w);

/* Call cb for every backend of every group (the status page). */
void sl_gw_each_backend(void (*cb)(void *ud, const char *name, unsigned inflight, unsigned conns,
                                   unsigned idle, uint64_t requests, uint64_t failures,
                                   bool disabled),
                        void *ud);

/* Close every idle connection and free every group (server end). */
void sl_gw_shutdown(void);

#endif
