/* The server process.
 *
 * Sockets are bound before daemonizing and before privileges are dropped, so a port below 1024
 * works for an unprivileged server. With server.reuse-port (the default) every loop gets its own
 * listening socket per address (SO_REUSEPORT), and the kernel spreads new connections over the
 * loops with no lock and no thundering herd; otherwise the loops share one socket per address
 * and race to accept. The loops start after the fork: each is a thread that builds its event
 * base, listeners and per-loop state itself, and the main thread waits until all of them serve.
 * Then the main thread only takes signals.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "connection.h"
#include "fdcache.h"
#include "log.h"
#include "tls.h"

#define LISTEN_BACKLOG 1024

unsigned sl_server_loops_wanted(const sl_core_conf *g)
{
    if (g->workers > 0) return (unsigned)g->workers;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int sl_server_setup(sl_server *srv, sl_conf_set *cs, char *err, size_t errlen)
{
    srv->cs = cs;
    srv->global = sl_core(cs->global);
    const sl_core_conf *g = srv->global;
    if (!g->docroot) {
        snprintf(err, errlen, "server.document-root is not set");
        return -1;
    }
    /* The default socket; when a condition names the same address, the listener takes the
     * condition's spelling so that the condition matches it. */
    char spec[300], canon[128];
    const char *b = g->bind ? g->bind : "0.0.0.0";
    snprintf(spec, sizeof spec, strchr(b, ':') && b[0] != '[' ? "[%s]:%ld" : "%s:%ld", b, g->port);
    if (sl_socket_canonical(spec, canon, sizeof canon) < 0) {
        snprintf(err, errlen, "server.bind \"%s\" / server.port %ld: not a usable address", b,
                 g->port);
        return -1;
    }
    snprintf(cs->listen[0].canon, sizeof cs->listen[0].canon, "%s", canon);
    snprintf(cs->listen[0].literal, sizeof cs->listen[0].literal, "%s", canon);
    for (size_t i = 1; i < cs->n_listen; i++) {
        if (!strcmp(cs->listen[i].canon, canon)) {
            cs->listen[0] = cs->listen[i];
            cs->listen[i] = cs->listen[--cs->n_listen];
            break;
        }
    }
    if (sl_conf_listeners_done(cs) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    srv->nb = sl_netback_find(g->network_backend);
    srv->n_loops = sl_server_loops_wanted(g);
    /* Certificates were loaded with the config; the contexts are made here, so -t checks them. */
    return sl_tls_setup(srv, err, errlen);
}

static int bind_one(const char *canon, bool reuse_port, bool probe, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    long pn;
    if (sl_split_host_port(canon, host, &port, &pn) < 0) {
        snprintf(err, errlen, "%s: not an address", canon);
        return -1;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        snprintf(err, errlen, "%s: not a numeric address", canon);
        return -1;
    }
    int one = 1;
    if (probe) {
        /* SO_REUSEPORT would let us share the port with another process (a second seekless
         * started by mistake) and split the traffic. A plain bind fails on a port anyone
         * listens on: try that first. */
        int t = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (t >= 0) {
            setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (ai->ai_family == AF_INET6) setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
            int r = bind(t, ai->ai_addr, ai->ai_addrlen);
            int e = errno;
            close(t);
            if (r < 0) {
                snprintf(err, errlen, "cannot listen on %s: %s", canon, strerror(e));
                freeaddrinfo(ai);
                return -1;
            }
        }
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
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

/* Listening sockets handed over by the server this one replaces (SL_INHERIT_ENV). */
typedef struct inherited {
    int fd;
    char canon[128];
    bool taken;
} inherited;

/* Parse "fd:canon,fd:canon,..." and keep the entries that are listening sockets. */
static size_t inherited_parse(const char *env, inherited *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = env; p && *p && n < cap;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[160];
        if (len < sizeof item) {
            memcpy(item, p, len);
            item[len] = 0;
            char *colon = strchr(item, ':');
            int acc = 0;
            socklen_t al = sizeof acc;
            if (colon) {
                *colon = 0;
                int fd = atoi(item);
                if (fd > 2 && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc &&
                    strlen(colon + 1) < sizeof out[n].canon) {
                    out[n].fd = fd;
                    snprintf(out[n].canon, sizeof out[n].canon, "%s", colon + 1);
                    out[n].taken = false;
                    /* Ours now: not to be passed on to what this process runs. */
                    fcntl(fd, F_SETFD, FD_CLOEXEC);
                    n++;
                }
            }
        }
        p = end ? end + 1 : NULL;
    }
    return n;
}

int sl_server_bind(sl_server *srv, char *err, size_t errlen)
{
    const sl_conf_set *cs = srv->cs;
    bool rp = srv->global->reuse_port;
    size_t n = (rp ? srv->n_loops : 1) * cs->n_listen;
    srv->listen_fd = malloc(n * sizeof *srv->listen_fd);
    if (!srv->listen_fd) return snprintf(err, errlen, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) srv->listen_fd[i] = -1;
    /* A graceful restart hands the sockets over, so that no connection is refused or lost in
     * between: the ones for addresses this config listens on are taken as they are. */
    inherited inh[256];
    size_t n_inh = inherited_parse(getenv(SL_INHERIT_ENV), inh, sizeof inh / sizeof inh[0]);
    unsetenv(SL_INHERIT_ENV);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const char *canon = cs->listen[i % cs->n_listen].canon;
        bool known = false;
        for (size_t k = 0; k < n_inh && srv->listen_fd[i] < 0; k++) {
            if (strcmp(inh[k].canon, canon)) continue;
            known = true;
            if (!inh[k].taken) {
                inh[k].taken = true;
                srv->listen_fd[i] = inh[k].fd;
            }
        }
        if (srv->listen_fd[i] >= 0) continue;
        /* With SO_REUSEPORT the first bind of an address tells a taken port from our own (one
         * handed over is ours). */
        srv->listen_fd[i] = bind_one(canon, rp, rp && i < cs->n_listen && !known, err, errlen);
        if (srv->listen_fd[i] < 0) r = -1;
    }
    /* Addresses the new config no longer has: closed (the old server closes its copies too). */
    for (size_t k = 0; k < n_inh; k++)
        if (!inh[k].taken) close(inh[k].fd);
    return r;
}

size_t sl_server_listeners(const sl_server *srv, int *fds, const char **canons, size_t cap)
{
    const sl_conf_set *cs = srv->cs;
    size_t n = 0;
    for (unsigned i = 0; srv->loops && i < srv->n_loops; i++) {
        const sl_loop *loop = srv->loops[i];
        if (!loop || !loop->serving) continue;
        for (size_t k = 0; k < loop->n_listeners && n < cap; k++) {
            const sl_listener *l = &loop->listeners[k];
            if (l->fd < 0) continue;
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++) seen = fds[j] == l->fd;
            if (seen) continue; /* a shared socket, watched by every loop */
            fds[n] = l->fd;
            canons[n] = cs->listen[l->index].canon;
            n++;
        }
    }
    return n;
}

int sl_server_init_modules(sl_server *srv, char *err, size_t errlen)
{
    const sl_conf_set *cs = srv->cs;
    for (size_t i = 0; i < cs->n_mods; i++)
        if (cs->mods[i]->init && cs->mods[i]->init(srv, cs->global, err, errlen) < 0) return -1;
    return 0;
}

/* A loop's thread. Reports its start to the main thread through `start`, then waits until every
 * loop has reported before it serves: a loop reads the others' state (the status page sums
 * every loop's counters, a freed connection slot wakes a paused loop), and a loop that served at
 * once read a loop still being set up (under valgrind, the status page of loop 0 read loop 1
 * before the main thread had even made it, and crashed on the null pointer). */
typedef struct start_sync {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned done, failed;
    bool go;
} start_sync;

static start_sync start;

/* server.worker-cpu-affinity "auto": with two loops or more, loop i runs on the i-th CPU the
 * process may use (round robin when there are more loops than CPUs), as nginx's
 * `worker_cpu_affinity auto` binds its workers. Unbound, the scheduler moved each loop and the
 * kernel workers of its ring between the cores, and every wake-up between them became an IPI:
 * cold 4 KiB files with two loops cost 29.5 us per request unbound against 22-24 bound (48,000
 * against 55,000-60,000 requests/s, bench/results/2026-11-30-affinity/). But a bound loop cannot
 * leave a core another busy process shares, and its connections wait for it: hot 4 KiB files with
 * wrk beside two bound loops went at 78,000-80,000 requests/s against 97,000-100,000 unbound
 * (bench/results/2026-11-30-scaling-hot-bound/). So it is asked for, as nginx's is ("disable", the
 * default). One loop stays unbound: there is nothing to spread. The stat and read threads are
 * the server's, shared by the loops, and stay unbound too. */
static void assign_cpus(sl_server *srv)
{
    for (unsigned i = 0; i < srv->n_loops; i++) srv->loops[i]->cpu = -1;
    if (strcmp(srv->global->cpu_affinity, "auto") || srv->n_loops < 2) return;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) cpus[n++] = c;
    if (n < 2) return;
    /* The status page shows each loop's CPU (loops[].bound, .cpu). */
    for (unsigned i = 0; i < srv->n_loops; i++) srv->loops[i]->cpu = cpus[i % (unsigned)n];
}

static void *loop_thread(void *arg)
{
    sl_loop *loop = arg;
    /* Bound before the loop makes anything: the kernel's io-wq workers its ring starts later
     * inherit the binding, so a loop, its lookups and its reads wake each other on one CPU. */
    if (loop->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(loop->cpu, &one);
        int e = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        if (e) {
            sl_log("server.worker-cpu-affinity: cannot bind loop %u to CPU %d: %s; it runs "
                   "unbound", loop->id, loop->cpu, strerror(e));
            loop->cpu = -1;
        }
    }
    int r = sl_loop_init(loop);
    loop->serving = r == 0;
    pthread_mutex_lock(&start.lock);
    start.done++;
    if (r < 0) start.failed++;
    pthread_cond_broadcast(&start.cond);
    while (!start.go) pthread_cond_wait(&start.cond, &start.lock);
    pthread_mutex_unlock(&start.lock);
    if (r == 0) sl_loop_run(loop);
    return NULL;
}

/* Size the descriptor table now for the descriptors the server expects to hold (the open-file
 * cache's and the connections'). The kernel doubles the table as descriptors are opened, and in a
 * process with threads each doubling waits for an RCU grace period (expand_files() calls
 * synchronize_rcu(): milliseconds) with the opening thread blocked: a loop filling the open-file
 * cache stalled about eight times for 5-16 ms, which made the first second of a run's p99 7-17 ms
 * against 2.4-3 ms without the cache. Done before any thread starts, the one expansion is free of
 * that wait. A descriptor duplicated to the highest number expected sizes the table for it; it
 * is closed at once (the table never shrinks). Bounded by RLIMIT_NOFILE and by 2^18 entries (2
 * MiB of table), past which the kernel grows it as before. */
static void fd_table_presize(size_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return;
    if (rl.rlim_cur != RLIM_INFINITY && want >= (size_t)rl.rlim_cur) want = (size_t)rl.rlim_cur - 1;
    if (want > (1u << 18)) want = 1u << 18;
    if (want < 256) return;
    int top = (int)want;
    if (fcntl(top, F_GETFD) >= 0) return; /* in use: dup2 would close it */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (dup2(fd, top) == top) close(top);
    close(fd);
}

int sl_server_start(sl_server *srv, char *err, size_t errlen)
{
    const sl_core_conf *g = srv->global;
    srv->started = time(NULL);
    /* Descriptors kept for the connections, each of which may hold a socket, a file and a
     * backend connection, and for listeners and logs: files kept open get the rest. */
    size_t reserve = 4 * (size_t)g->max_connections + 256, fdc_cap = 0;
    if (strcmp(g->stat_cache_engine, "disable")) {
        struct rlimit rl;
        size_t cap = 0;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur > (rlim_t)reserve)
            cap = (size_t)rl.rlim_cur - reserve;
        if (cap > 65536) cap = 65536;
        if (cap >= 64) {
            fdc_cap = cap;
            srv->fdc = sl_fdc_new(strcmp(g->stat_cache_engine, "simple") ? SL_FDC_INOTIFY
                                                                          : SL_FDC_SIMPLE,
                                  cap);
            if (!srv->fdc) return snprintf(err, errlen, "out of memory"), -1;
        } else {
            sl_log("server.stat-cache-engine: too few descriptors (RLIMIT_NOFILE) to keep files "
                   "open; not caching");
        }
    }
    /* Before the first thread: see fd_table_presize. */
    fd_table_presize(fdc_cap + reserve);
    if (g->max_stat_threads > 0) {
        /* The queue holds one stat per connection at most. */
        srv->stat_pool = sl_tpool_new("sl-stat", (unsigned)g->max_stat_threads,
                                      (unsigned)g->max_connections + 1);
        if (!srv->stat_pool)
            return snprintf(err, errlen, "cannot start %ld stat threads: %s", g->max_stat_threads,
                            strerror(errno)),
                   -1;
    }
    if (srv->nb->uses_read_pool) {
        /* Reads in flight are bounded before they get here (server.max-read-threads). */
        srv->read_pool = sl_tpool_new("sl-read", (unsigned)g->max_read_threads,
                                      (unsigned)g->max_read_threads * 2 + srv->n_loops);
        if (!srv->read_pool)
            return snprintf(err, errlen, "cannot start %ld read threads: %s", g->max_read_threads,
                            strerror(errno)),
                   -1;
    }
    srv->loops = calloc(srv->n_loops, sizeof *srv->loops);
    if (!srv->loops) return snprintf(err, errlen, "out of memory"), -1;
    /* Every loop is made before any thread starts, so no loop ever sees a null one. */
    for (unsigned i = 0; i < srv->n_loops; i++) {
        sl_loop *loop = calloc(1, sizeof *loop);
        if (!loop) return snprintf(err, errlen, "out of memory"), -1;
        loop->srv = srv;
        loop->id = i;
        srv->loops[i] = loop;
    }
    assign_cpus(srv);
    pthread_mutex_init(&start.lock, NULL);
    pthread_cond_init(&start.cond, NULL);
    start.done = start.failed = 0;
    start.go = false;
    unsigned launched = 0;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        sl_loop *loop = srv->loops[i];
        if (pthread_create(&loop->thread, NULL, loop_thread, loop) != 0) break;
        loop->started = true;
        char name[16];
        snprintf(name, sizeof name, "sl-loop-%u", i % 10000000u);
        pthread_setname_np(loop->thread, name);
        launched++;
    }
    pthread_mutex_lock(&start.lock);
    while (start.done < launched) pthread_cond_wait(&start.cond, &start.lock);
    bool failed = start.failed > 0 || launched < srv->n_loops;
    /* Every loop serves, or is stopped by the caller (stop_loops) as before when one failed. */
    start.go = true;
    pthread_cond_broadcast(&start.cond);
    pthread_mutex_unlock(&start.lock);
    if (!failed) return 0;
    snprintf(err, errlen, "cannot start the event loops: out of memory or threads");
    for (unsigned i = 0; i < srv->n_loops; i++)
        if (srv->loops[i] && srv->loops[i]->init_err[0]) {
            snprintf(err, errlen, "%s", srv->loops[i]->init_err);
            break;
        }
    return -1;
}

/* Signals the main thread takes; every other thread, and the main thread outside sigwaitinfo,
 * keeps them blocked (sl_server_block_signals). */
static const int handled[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGTTIN};

static void handled_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) sigaddset(set, handled[i]);
}

void sl_server_block_signals(void)
{
    /* A write to a socket the client closed, to a terminal we are in the background of, or to
     * a log past the file size limit fails; it never stops or kills the process. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    sigset_t set;
    handled_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void reopen_logs(sl_server *srv, int sig)
{
    int r = sl_log_reopen();
    if (r < 0) sl_log("SIG%s: cannot reopen the error log: %s", sigabbrev_np(sig), strerror(-r));
    for (size_t i = 0; i < srv->cs->n_mods; i++)
        if (srv->cs->mods[i]->reopen) srv->cs->mods[i]->reopen(srv);
    sl_log("SIG%s: reopened logs", sigabbrev_np(sig));
}

/* Ask every serving loop to stop, and wait for every loop thread (one whose start failed has
 * ended already). */
static void stop_loops(sl_server *srv)
{
    for (unsigned i = 0; srv->loops && i < srv->n_loops; i++)
        if (srv->loops[i] && srv->loops[i]->serving) sl_loop_stop(srv->loops[i]);
    for (unsigned i = 0; srv->loops && i < srv->n_loops; i++)
        if (srv->loops[i] && srv->loops[i]->started) {
            pthread_join(srv->loops[i]->thread, NULL);
            srv->loops[i]->started = false;
            srv->loops[i]->serving = false;
        }
}

int sl_server_run(sl_server *srv)
{
    sl_log("seekless started (%s, %zu listener(s), %u loop(s), network-backend %s)",
           srv->global->docroot->path, srv->cs->n_listen, srv->n_loops, srv->nb->name);
    /* No signal a user sends by habit from another server kills the process and leaves its pid
     * file behind: nginx's QUIT (graceful stop) stops gracefully like TERM and INT; HUP
     * (lighttpd, logrotate) reopens the logs; USR1 is lighttpd 1.4's graceful restart (the new
     * config checked, a new server started on the same sockets, this one finishing what is in
     * flight; app/main.c's on_restart); USR2 and WINCH (nginx's binary upgrade and worker stop)
     * and TTIN (gunicorn: one worker more) are logged as having no effect.
     * PIPE, TTOU and XFSZ are ignored; TSTP keeps its default, so Ctrl-Z stops `seekless -D`
     * like any foreground job. */
    sigset_t set;
    handled_set(&set);
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0) continue; /* EINTR */
        if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
            sl_log("received SIG%s, shutting down gracefully", sigabbrev_np(sig));
            if (srv->on_stopping) srv->on_stopping();
            break;
        }
        if (sig == SIGUSR1 && srv->on_restart) {
            if (srv->on_restart(srv) < 0) continue;
            srv->handed_over = true;
            sl_log("SIGUSR1: the new server serves; this one finishes what is in flight");
            break;
        }
        if (sig == SIGHUP || sig == SIGUSR1) {
            reopen_logs(srv, sig);
            continue;
        }
        const char *why = sig == SIGUSR2    ? "seekless has no binary upgrade"
                          : sig == SIGWINCH ? "seekless has no worker processes to stop"
                                            : "seekless has no worker processes to add";
        sl_log("received SIG%s: no effect (%s)", sigabbrev_np(sig), why);
    }
    stop_loops(srv);
    sl_log("seekless stopped");
    return 0;
}

void sl_server_free(sl_server *srv)
{
    stop_loops(srv);
    /* Workers finish what is queued; their completions wait on the loops' ports, which
     * sl_loop_free runs, so clients that left release their memory. */
    sl_tpool_free(srv->stat_pool);
    sl_tpool_free(srv->read_pool);
    srv->stat_pool = srv->read_pool = NULL;
    for (unsigned i = 0; srv->loops && i < srv->n_loops; i++) sl_loop_free(srv->loops[i]);
    free(srv->loops);
    srv->loops = NULL;
    sl_fdc_free(srv->fdc);
    srv->fdc = NULL;
    if (srv->listen_fd && srv->cs) {
        size_t n = (srv->global->reuse_port ? srv->n_loops : 1) * srv->cs->n_listen;
        for (size_t i = 0; i < n; i++)
            if (srv->listen_fd[i] >= 0) close(srv->listen_fd[i]);
    }
    free(srv->listen_fd);
    srv->listen_fd = NULL;
    sl_tls_free(srv);
    if (srv->cs) {
        for (size_t i = srv->cs->n_mods; i-- > 0;)
            if (srv->cs->mods[i]->fini) srv->cs->mods[i]->fini(srv);
        sl_conf_free(srv->cs);
    }
    srv->cs = NULL;
}
