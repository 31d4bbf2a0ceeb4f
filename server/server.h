/* The server: the event loop, its listeners, its connections and process lifetime. */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config_parse.h"
#include "http_date.h"
#include "settings.h"

struct event_base;
struct event;
struct evconnlistener;
struct sl_conn;
struct sl_netbackend;
struct sl_fileread;
struct sl_tpool;

/* Signals the loop handles (TERM INT QUIT HUP USR1 USR2 WINCH TTIN). */
#define SL_SIGNALS_HANDLED 8

/* One process's server. */
typedef struct sl_server {
    struct event_base *base;
    sl_config_tree *tree;
    sl_settings global;
    sl_listen_spec listen[SL_MAX_LISTENERS];
    int listen_fd[SL_MAX_LISTENERS];
    struct evconnlistener *listener[SL_MAX_LISTENERS];
    size_t n_listen;
    struct sl_conn *conns; /* every open connection, for shutdown */
    size_t n_conns;
    bool stopping;
    bool paused_full;  /* accept paused at server.max-connections */
    bool paused_fds;   /* accept paused after EMFILE/ENFILE */
    struct event *ev_sig[SL_SIGNALS_HANDLED]; /* see sl_server_block_signals */
    struct event *ev_resume, *ev_stop_timeout;
    time_t date_sec;
    char date[SL_HTTP_DATE_LEN + 1];
    unsigned long long boundary_seq;

    /* Network backend (netback.c) and the thread pools. */
    const struct sl_netbackend *nb;
    void *nb_priv;                 /* the backend's own state (AIO context, ring) */
    struct sl_tpool *read_pool;    /* server.max-read-threads workers (thread backends) */
    struct sl_tpool *stat_pool;    /* server.max-stat-threads workers, NULL when 0 */
    size_t block_size;             /* bytes per asynchronous read */
    unsigned max_reads;            /* reads in flight at most (server.max-read-threads) */
    unsigned reads_inflight;
    struct sl_fileread *rd_wait_head, *rd_wait_tail; /* waiting for a read slot */
    char **free_bufs;              /* recycled block buffers */
    size_t n_free_bufs, max_free_bufs;

    /* accesslog.filename / accesslog.format */
    int alog_fd;                   /* 0: no access log */
    struct sl_accesslog_fmt *alog_fmt;
    /* debug.log-timing: one JSON line per request, or NULL. */
    int timing_fd;
    bool timing;
    uint64_t conn_seq;

    /* Counters for the status page. */
    uint64_t requests_total, bytes_total;
    uint64_t responses[6]; /* by status class: [2] = 2xx ... [5] = 5xx */
    /* Set by main when proxy-core is linked: calls cb once per backend. */
    void (*backend_stats)(void (*cb)(void *ud, const char *name, unsigned inflight,
                                     unsigned conns, unsigned idle, uint64_t requests,
                                     uint64_t failures, bool disabled),
                          void *ud);

    /* Request handlers in the order they are asked (sl_server_add_module). */
    const struct sl_module *modules[8];
    size_t n_modules;
} sl_server;

/* Ask module m, after those added before it, to handle requests. Modules have a server-wide
 * init/fini only through their own setup calls. Returns 0 or -ENOSPC. */
int sl_server_add_module(sl_server *srv, const struct sl_module *m);

/* Bind every listening socket described by the settings (before daemonizing and dropping
 * privileges). Returns 0, or -1 with a message in err. */
int sl_server_bind(sl_server *srv, char *err, size_t errlen);
/* First thing in main: ignore SIGPIPE, SIGTTOU and SIGXFSZ, and block the signals that would
 * kill or stop the process by default but that users send by habit (HUP, USR1, USR2, TTIN; WINCH
 * for the same habit) until sl_server_init_loop handles them, so one that arrives during start-up
 * waits instead of killing it (also the parent waiting for a daemon to be ready). */
void sl_server_block_signals(void);

/* Create the event base (honouring server.event-handler), wire listeners and signals: on the
 * loop thread, TERM, INT and QUIT stop gracefully, HUP and USR1 reopen the logs, USR2, WINCH
 * and TTIN are logged and have no effect; then the signals sl_server_block_signals blocked are
 * unblocked (worker threads keep every signal blocked). Returns 0, or -1 with a message in err. */
int sl_server_init_loop(sl_server *srv, char *err, size_t errlen);
/* Run until SIGTERM/SIGINT and a graceful drain. Returns the process exit code. */
int sl_server_run(sl_server *srv);
/* Free everything the server holds. */
void sl_server_free(sl_server *srv);

/* The current Date header value, updated at most once a second. */
const char *sl_server_date(sl_server *srv);
/* Called by the connection code when a connection closes. */
void sl_server_conn_closed(sl_server *srv);

#endif
