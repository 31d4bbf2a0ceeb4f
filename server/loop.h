/* One event loop: a thread, its event base, its listeners and the connections it accepted.
 *
 * A loop owns, and only its thread touches: its connections, its listening sockets (one per
 * address with SO_REUSEPORT, or its own watch of a shared one), its network backend state (sl_io:
 * a ring or AIO context of its own, sized for its share of the reads in flight), its completion
 * port, the date cache, its counters and each module's per-loop state (proxy-core's backend
 * connection pools, for one). What every loop shares is in sl_server: the loaded config, the stat
 * and read thread pools, the log files. Other threads talk to a loop only through its completion
 * port (sl_loop_post).
 */
#ifndef SL_LOOP_H
#define SL_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf.h"
#include "http_date.h"
#include "module.h"
#include "netback.h"
#include "threadpool.h"

struct event_base;
struct event;
struct sl_server;
struct sl_conn;
struct sl_loop;

/* A loop's watch of one listening socket. */
typedef struct sl_listener {
    struct event *ev;                  /* readable: connections wait to be accepted */
    int fd;
    unsigned index;                    /* in the config's listen specs */
    bool owned;                        /* the loop's own socket (SO_REUSEPORT): it closes it */
    bool enabled;
} sl_listener;

/* Connections of a loop by what they are doing, counted at each once-a-second sweep (and
 * live for the loop that renders a status page). */
typedef struct sl_conn_counts {
    unsigned reading, writing, disk, backend, keepalive, closing, total;
} sl_conn_counts;

/* A loop's counters. Only the loop writes them; the status page reads them from any loop
 * (relaxed atomic loads and stores: no lock, no torn values). */
typedef struct sl_loop_stats {
    uint64_t accepted;
    uint64_t requests;
    uint64_t bytes;
    uint64_t responses[6];       /* by status class: [2] = 2xx ... [5] = 5xx */
    sl_conn_counts conns;        /* as of the last sweep */
} sl_loop_stats;

/* Add to a single-writer counter. */
#define SL_STAT_ADD(field, n) \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
/* Read a counter another thread writes. */
#define SL_STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

typedef struct sl_loop {
    struct sl_server *srv;
    unsigned id;
    pthread_t thread;
    int cpu;                           /* the CPU the loop's thread is bound to, or -1 */
    bool started;                      /* the thread runs */
    bool serving;                      /* it started and serves (until its thread ends) */
    struct event_base *base;
    sl_listener listeners[SL_MAX_LISTENERS];
    size_t n_listeners;
    struct sl_conn *conns;             /* every open connection */
    size_t n_conns;
    bool paused_full;                  /* accept paused: the process is at server.max-connections */
    bool paused_fds;                   /* accept paused after EMFILE/ENFILE */
    bool stopping;
    struct event *ev_tick;             /* the once-a-second sweep */
    struct event *ev_resume;           /* accept again after EMFILE */
    struct event *ev_stop_timeout;
    struct event *ev_fdc;              /* the open-file cache's inotify queue */
    time_t now;                        /* wall clock seconds, refreshed by the sweep */
    time_t date_sec;
    char date[SL_HTTP_DATE_LEN + 1];   /* the Date header value of date_sec */
    sl_tport *port;                    /* completions of its jobs; its mailbox */
    sl_io io;                          /* its network backend state */
    uint64_t conn_seq;                 /* connection numbers */
    uint64_t boundary_seq;             /* multipart boundaries */
    sl_loop_stats stats;
    void *mod[SL_MAX_MODULES];         /* each module's per-loop state */
    char **free_in;                    /* recycled request buffers */
    size_t n_free_in;
    char init_err[512];                /* why loop_start failed */
} sl_loop;

/* The current Date header value, updated at most once a second. */
const char *sl_loop_date(sl_loop *loop);

/* Run fn(arg) on loop's thread (from any thread). The message is the caller's memory until
 * fn runs; fn may free it. */
typedef struct sl_loop_msg {
    sl_job job;
    void (*fn)(struct sl_loop_msg *m);
    sl_loop *loop;
    void *arg;
} sl_loop_msg;
void sl_loop_post(sl_loop *loop, sl_loop_msg *m);

/* A connection closed: resume accepting when it was paused at the connection limit, or end the
 * loop when it is stopping and this was the last one. */
void sl_loop_conn_closed(sl_loop *loop);

/* A request buffer of `cap` bytes for a connection (recycled when one is free); NULL on ENOMEM. */
char *sl_loop_buf_get(sl_loop *loop, size_t cap);
/* Give a request buffer back. */
void sl_loop_buf_put(sl_loop *loop, char *buf);

/* Lifetime, for server.c: set up everything the loop owns (on its own thread; a message in
 * loop->init_err on failure), serve until stopped, ask it to stop (any thread), and free it
 * (after its thread ended and the shared pools stopped). */
int sl_loop_init(sl_loop *loop);
void sl_loop_run(sl_loop *loop);
int sl_loop_stop(sl_loop *loop);
void sl_loop_free(sl_loop *loop);

/* Count the loop's connections by state, now (its own thread only). */
void sl_loop_count_conns(sl_loop *loop, sl_conn_counts *out);

#endif
