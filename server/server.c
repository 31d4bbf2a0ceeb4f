/* The server process.
 *
 * Sockets are bound before daemonizing and before privileges are dropped, so a port below 1024
 * works for an unprivileged server; the event base is created after the fork. libevent's
 * evconnlistener does the accept loop. Accepting is paused, never failed, in two cases: at
 * server.max-connections (resumed as soon as a connection closes) and when the process runs out
 * of descriptors (resumed by a short timer), so a full server makes clients wait in the listen
 * backlog instead of getting a wrong answer. SIGTERM/SIGINT close the listeners and idle
 * connections and let responses in flight finish, bounded by server.graceful-shutdown-timeout.
 *
 * Signals: no signal an admin sends out of habit from another server may kill the process and
 * leave its pid file behind. nginx's QUIT (graceful stop) stops gracefully like TERM; HUP
 * (lighttpd, logrotate) and USR1 (nginx: reopen logs; lighttpd 1.4: graceful restart, which
 * seekless does not have) reopen the logs; USR2 and WINCH (nginx's binary upgrade and worker
 * stop) and TTIN (gunicorn: one worker more) are logged as having no effect. PIPE, TTOU (a write
 * to a terminal must proceed, not stop or loop) and XFSZ (a log over the file size limit fails
 * its write instead of killing) are ignored. TSTP keeps its default, so Ctrl-Z stops `seekless
 * -D` like any foreground job. All are handled by libevent on the loop thread; worker threads
 * block every signal (threadpool.c), so a signal never interrupts a blocking read.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection.h"
#include "accesslog.h"
#include "log.h"
#include "module.h"
#include "netback.h"
#include "threadpool.h"

#define LISTEN_BACKLOG 1024
#define FD_RETRY_MS 100

int sl_server_add_module(sl_server *srv, const sl_module *m)
{
    if (srv->n_modules == sizeof srv->modules / sizeof srv->modules[0]) return -ENOSPC;
    srv->modules[srv->n_modules++] = m;
    return 0;
}

const char *sl_server_date(sl_server *srv)
{
    struct timeval tv;
    event_base_gettimeofday_cached(srv->base, &tv);
    if (tv.tv_sec != srv->date_sec) {
        srv->date_sec = tv.tv_sec;
        sl_http_date_format(tv.tv_sec, srv->date);
    }
    return srv->date;
}

static int bind_one(const char *canon, char *err, size_t errlen)
{
    char host[128];
    const char *port;
    if (canon[0] == '[') {
        const char *e = strchr(canon, ']');
        snprintf(host, sizeof host, "%.*s", (int)(e - canon - 1), canon + 1);
        port = e + 2;
    } else {
        const char *colon = strrchr(canon, ':');
        snprintf(host, sizeof host, "%.*s", (int)(colon - canon), canon);
        port = colon + 1;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        snprintf(err, errlen, "%s: not a numeric address", canon);
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", canon, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    return fd;
}

int sl_server_bind(sl_server *srv, char *err, size_t errlen)
{
    for (size_t i = 0; i < srv->n_listen; i++) {
        srv->listen_fd[i] = bind_one(srv->listen[i].canon, err, errlen);
        if (srv->listen_fd[i] < 0) return -1;
    }
    return 0;
}

static void accept_enable(sl_server *srv, bool on)
{
    for (size_t i = 0; i < srv->n_listen; i++) {
        if (!srv->listener[i]) continue;
        if (on)
            evconnlistener_enable(srv->listener[i]);
        else
            evconnlistener_disable(srv->listener[i]);
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    sl_server *srv = arg;
    const sl_listen_spec *ls = &srv->listen[0];
    for (size_t i = 0; i < srv->n_listen; i++)
        if (srv->listener[i] == l) ls = &srv->listen[i];
    (void)sl_conn_new(srv, fd, sa, salen, ls); /* -ENOMEM: the socket is closed, nothing to do */
    if (srv->n_conns >= (size_t)srv->global.max_connections && !srv->paused_full) {
        srv->paused_full = true;
        accept_enable(srv, false);
    }
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    sl_server *srv = arg;
    int e = EVUTIL_SOCKET_ERROR();
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        /* Out of descriptors: stop accepting for a moment, keep serving what we have. */
        if (!srv->paused_fds) {
            sl_log("accept: %s; pausing accept for %d ms", strerror(e), FD_RETRY_MS);
            srv->paused_fds = true;
            accept_enable(srv, false);
            struct timeval tv = {0, FD_RETRY_MS * 1000};
            evtimer_add(srv->ev_resume, &tv);
        }
        return;
    }
    sl_log("accept: %s", strerror(e));
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    sl_server *srv = arg;
    srv->paused_fds = false;
    if (!srv->paused_full && !srv->stopping) accept_enable(srv, true);
}

void sl_server_conn_closed(sl_server *srv)
{
    if (srv->stopping) {
        if (srv->n_conns == 0) event_base_loopbreak(srv->base);
        return;
    }
    if (srv->paused_full && srv->n_conns < (size_t)srv->global.max_connections) {
        srv->paused_full = false;
        if (!srv->paused_fds) accept_enable(srv, true);
    }
}

static void on_stop_timeout(evutil_socket_t fd, short what, void *arg)
{
    sl_server *srv = arg;
    sl_log("graceful shutdown: %zu connection(s) still open after %lds; closing them",
           srv->n_conns, srv->global.graceful_shutdown_timeout);
    event_base_loopbreak(srv->base);
}

/* The signals the loop handles, in ev_sig[] order. */
static const int handled[SL_SIGNALS_HANDLED] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP,
                                                SIGUSR1, SIGUSR2, SIGWINCH, SIGTTIN};
/* Blocked from the start of main until the loop handles them: their default kills or stops. */
static const int habit[] = {SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGTTIN};

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGWINCH: return "SIGWINCH";
    case SIGTTIN: return "SIGTTIN";
    }
    return "signal";
}

static void habit_mask(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof habit / sizeof habit[0]; i++) sigaddset(set, habit[i]);
}

void sl_server_block_signals(void)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    sigset_t set;
    habit_mask(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
    sl_server *srv = arg;
    if (srv->stopping) return;
    srv->stopping = true;
    sl_log("received %s, shutting down gracefully", sig_name((int)sig));
    for (size_t i = 0; i < srv->n_listen; i++) {
        if (srv->listener[i]) evconnlistener_free(srv->listener[i]);
        srv->listener[i] = NULL;
    }
    sl_conn *next;
    for (sl_conn *c = srv->conns; c; c = next) {
        next = c->next;
        sl_conn_shutdown(c);
    }
    if (srv->n_conns == 0) {
        event_base_loopbreak(srv->base);
        return;
    }
    struct timeval tv = {srv->global.graceful_shutdown_timeout, 0};
    evtimer_add(srv->ev_stop_timeout, &tv);
}

static int timing_open(sl_server *srv)
{
    const char *f = srv->global.timing_file;
    char def[4200];
    if (!f) {
        /* Next to the error log, or in the working directory. */
        snprintf(def, sizeof def, "%s.timing", srv->global.errorlog ? srv->global.errorlog
                                                                    : "seekless");
        f = def;
    }
    int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    if (srv->timing_fd > 0) close(srv->timing_fd);
    srv->timing_fd = fd;
    return 0;
}

static int alog_open(sl_server *srv)
{
    int fd = open(srv->global.accesslog_filename, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    if (srv->alog_fd > 0) close(srv->alog_fd);
    srv->alog_fd = fd;
    return 0;
}

/* HUP, and USR1 until seekless has a graceful restart: reopen every log (for logrotate). */
static void on_reopen(evutil_socket_t sig, short what, void *arg)
{
    sl_server *srv = arg;
    const char *name = sig_name((int)sig);
    if (srv->alog_fd > 0 && alog_open(srv) < 0)
        sl_log("%s: cannot reopen the access log %s", name, srv->global.accesslog_filename);
    if (srv->timing && timing_open(srv) < 0) sl_log("%s: cannot reopen the timing file", name);
    int r = sl_log_reopen();
    if (r < 0)
        sl_log("%s: cannot reopen the error log: %s", name, strerror(-r));
    else
        sl_log("%s: reopened logs%s", name,
               sig == SIGUSR1 ? " (seekless has no graceful restart; SIGUSR1 reopens the logs "
                                "like SIGHUP)"
                              : "");
}

/* Signals other servers give a meaning seekless has no counterpart for. */
static void on_no_effect(evutil_socket_t sig, short what, void *arg)
{
    const char *why = sig == SIGUSR2    ? "seekless has no binary upgrade"
                      : sig == SIGWINCH ? "seekless has no worker processes to stop"
                                        : "seekless has no worker processes to add";
    sl_log("received %s: no effect (%s)", sig_name((int)sig), why);
}

int sl_server_init_loop(sl_server *srv, char *err, size_t errlen)
{
    struct event_config *cfg = event_config_new();
    if (!cfg) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Insist on the method asked for rather than silently using another. */
    if (!strcmp(srv->global.event_handler, "poll")) {
        event_config_avoid_method(cfg, "epoll");
        event_config_avoid_method(cfg, "select");
    } else {
        event_config_avoid_method(cfg, "poll");
        event_config_avoid_method(cfg, "select");
    }
    srv->base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!srv->base) {
        snprintf(err, errlen, "server.event-handler \"%s\" is not available",
                 srv->global.event_handler);
        return -1;
    }
    for (size_t i = 0; i < srv->n_listen; i++) {
        srv->listener[i] = evconnlistener_new(srv->base, on_accept, srv,
                                              LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
                                              srv->listen_fd[i]);
        if (!srv->listener[i]) {
            snprintf(err, errlen, "cannot watch %s", srv->listen[i].canon);
            return -1;
        }
        srv->listen_fd[i] = -1; /* owned by the listener now */
        evconnlistener_set_error_cb(srv->listener[i], on_accept_error);
    }
    sl_server_block_signals(); /* for callers that did not (tests); idempotent */
    for (size_t i = 0; i < SL_SIGNALS_HANDLED; i++) {
        int sig = handled[i];
        void (*cb)(evutil_socket_t, short, void *) =
            sig == SIGTERM || sig == SIGINT || sig == SIGQUIT ? on_stop
            : sig == SIGHUP || sig == SIGUSR1                 ? on_reopen
                                                              : on_no_effect;
        srv->ev_sig[i] = evsignal_new(srv->base, sig, cb, srv);
        if (!srv->ev_sig[i] || evsignal_add(srv->ev_sig[i], NULL) < 0) {
            snprintf(err, errlen, "cannot set up signal handling");
            return -1;
        }
    }
    srv->ev_resume = evtimer_new(srv->base, on_resume, srv);
    srv->ev_stop_timeout = evtimer_new(srv->base, on_stop_timeout, srv);
    if (!srv->ev_resume || !srv->ev_stop_timeout) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (srv->global.accesslog_filename) {
        char e[300];
        int r = sl_accesslog_compile(srv->global.accesslog_format, &srv->alog_fmt, e, sizeof e);
        if (r == 0) r = alog_open(srv);
        if (r < 0) {
            snprintf(err, errlen, "accesslog.filename %s: %s", srv->global.accesslog_filename,
                     r == -EINVAL ? e : strerror(-r));
            return -1;
        }
    }
    if (srv->global.log_timing) {
        int r = timing_open(srv);
        if (r < 0) {
            snprintf(err, errlen, "debug.timing-file: %s", strerror(-r));
            return -1;
        }
        srv->timing = true;
    }
    if (srv->global.max_stat_threads > 0) {
        /* The queue holds one stat per connection at most. */
        srv->stat_pool = sl_tpool_new(srv->base, "sl-stat", (unsigned)srv->global.max_stat_threads,
                                      (unsigned)srv->global.max_connections + 1);
        if (!srv->stat_pool) {
            snprintf(err, errlen, "cannot start %ld stat threads: %s",
                     srv->global.max_stat_threads, strerror(errno));
            return -1;
        }
    }
    if (sl_netback_init(srv, err, errlen) < 0) return -1;
    /* Handled now: what arrived during start-up is delivered to the loop at its first turn. */
    sigset_t set;
    habit_mask(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}

int sl_server_run(sl_server *srv)
{
    sl_log("seekless started (%s, %zu listener(s), event-handler %s)", srv->global.document_root,
           srv->n_listen, event_base_get_method(srv->base));
    if (event_base_dispatch(srv->base) < 0) {
        sl_log("event loop failed");
        return 1;
    }
    while (srv->conns) sl_conn_close(srv->conns);
    sl_log("seekless stopped");
    return 0;
}

void sl_server_free(sl_server *srv)
{
    while (srv->conns) sl_conn_close(srv->conns);
    /* Jobs of closed connections finish here; their done() frees what the clients left. */
    if (srv->stat_pool) sl_tpool_free(srv->stat_pool);
    srv->stat_pool = NULL;
    sl_netback_fini(srv);
    for (size_t i = 0; i < srv->n_listen; i++) {
        if (srv->listener[i]) evconnlistener_free(srv->listener[i]);
        if (srv->listen_fd[i] >= 0) close(srv->listen_fd[i]);
    }
    for (size_t i = 0; i < SL_SIGNALS_HANDLED; i++)
        if (srv->ev_sig[i]) event_free(srv->ev_sig[i]);
    if (srv->ev_resume) event_free(srv->ev_resume);
    if (srv->ev_stop_timeout) event_free(srv->ev_stop_timeout);
    if (srv->base) event_base_free(srv->base);
    if (srv->timing_fd > 0) close(srv->timing_fd);
    if (srv->alog_fd > 0) close(srv->alog_fd);
    sl_accesslog_fmt_free(srv->alog_fmt);
    sl_settings_release();
    if (srv->tree) sl_config_tree_free(srv->tree);
}
