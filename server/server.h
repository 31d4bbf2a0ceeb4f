/* The server process: the loaded config, the listening sockets, the event loops and what they
 * share, and the process's lifetime (signals, graceful stop).
 *
 * One process runs one event loop per core, each on a thread of its own (server.max-worker; 0,
 * the default, means one per CPU the process may run on, so `taskset -c 0 seekless` runs one).
 * Threads rather than processes: the loops share the stat and read thread pools, the loaded
 * config, the log files and proxy-core's view of each backend (its connection count and the
 * worker count learned for it) in memory, the status page sums counters without any IPC, and a
 * user signals one process. What each loop owns is listed in loop.h.
 *
 * Signals belong to the main thread: every thread blocks them, and the main thread takes them
 * with sigwaitinfo. SIGTERM/SIGINT/SIGQUIT stop every loop gracefully; SIGHUP and SIGUSR1
 * reopen every log file; SIGUSR2, SIGWINCH and SIGTTIN are logged and otherwise ignored;
 * SIGPIPE, SIGTTOU and SIGXFSZ are ignored.
 */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf.h"
#include "core_conf.h"
#include "loop.h"
#include "module.h"
#include "netback.h"
#include "threadpool.h"

typedef struct sl_server {
    sl_conf_set *cs;                  /* the loaded config */
    const sl_core_conf *global;       /* its top-level core settings */
    unsigned n_loops;
    sl_loop **loops;
    /* Listening sockets: [loop][listener] with SO_REUSEPORT, else [0][listener] shared. */
    int *listen_fd;
    const sl_netbackend *nb;
    sl_tpool *stat_pool;              /* server.max-stat-threads workers, NULL when 0 */
    sl_tpool *read_pool;              /* server.max-read-threads workers (thread backends) */
    struct sl_fdc *fdc;               /* the open-file cache (server.stat-cache-engine), or NULL */
    time_t started;                   /* wall clock at start */
    unsigned long n_conns;            /* atomic: connections open (and accepts under way) */
    unsigned n_paused;                /* atomic: loops paused at server.max-connections */
    bool timing;                      /* record each request's stages (the timing trace is on) */
    bool req_clock;                   /* read the clocks at each request's start (access log) */
    void *mod[SL_MAX_MODULES];        /* each module's process-wide state */
    /* Called on the main thread when a stop signal is taken, before the loops stop (app/main.c
     * tells systemd STOPPING=1 here); NULL: nothing. */
    void (*on_stopping)(void);
    /* Called on the main thread for SIGUSR1, lighttpd's graceful restart: 0 when a new server
     * took over (this one then stops accepting and finishes what is in flight, as on SIGTERM),
     * -1 when it did not (this one goes on; the reason is logged). NULL: USR1 reopens the logs
     * like HUP. */
    int (*on_restart)(struct sl_server *srv);
    bool handed_over;                 /* a graceful restart replaced this server */
    struct sl_tls *tls;               /* the TLS listeners' contexts (tls.h), NULL: none */
} sl_server;

/* First thing in main: ignore SIGPIPE, SIGTTOU and SIGXFSZ and block the signals the main thread
 * takes (TERM INT QUIT HUP USR1 USR2 WINCH TTIN), so one that arrives during start-up waits, and
 * every thread started later inherits the mask. */
void sl_server_block_signals(void);

/* The environment variable through which a graceful restart hands the listening sockets to the
 * new server: "fd:canonical-address,..." (the fds are inherited across exec). */
#define SL_INHERIT_ENV "SEEKLESS_LISTEN_FDS"

/* The listening sockets the loops watch now, each once, with their canonical addresses
 * (at most cap). For a graceful restart, on the main thread while the loops serve. */
size_t sl_server_listeners(const sl_server *srv, int *fds, const char **canons, size_t cap);

/* The number of loops a config asks for (server.max-worker, 0: the CPUs this process may use). */
unsigned sl_server_loops_wanted(const sl_core_conf *g);

/* Take cs: fill in the default listener from server.bind/server.port and decide the number of
 * loops. Returns 0, or -1 with a message in err. */
int sl_server_setup(sl_server *srv, sl_conf_set *cs, char *err, size_t errlen);
/* Bind every listening socket (before daemonizing and dropping privileges). 0 or -1 + err. */
int sl_server_bind(sl_server *srv, char *err, size_t errlen);
/* Run every module's init (log files are opened here, as root). 0 or -1 + err. */
int sl_server_init_modules(sl_server *srv, char *err, size_t errlen);
/* Start the thread pools and the loops (after the fork and the privilege drop); returns when
 * every loop serves. 0 or -1 + err. */
int sl_server_start(sl_server *srv, char *err, size_t errlen);
/* Wait for signals until SIGTERM/SIGINT, stop the loops gracefully. Returns the exit code. */
int sl_server_run(sl_server *srv);
/* Free everything the server holds (the config too). */
void sl_server_free(sl_server *srv);

#endif
