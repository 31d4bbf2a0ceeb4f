/* The core's settings: the server.* keys (and mimetype.assign), declared like any module's. */
#ifndef SL_CORE_CONF_H
#define SL_CORE_CONF_H

#include <stdbool.h>

#include "conf.h"
#include "mime.h"
#include "module.h"

/* A directory opened at start-up (server.document-root): its absolute path and an O_PATH fd. */
typedef struct sl_dir {
    char *path;
    int fd;
    bool transient; /* opened for one request (virtual hosting): its fd number may name another
                     * directory later, so nothing may be cached by it (the open-file cache) */
} sl_dir;

/* The core's part of a conf block (always first in it). Strings point into the config or into
 * what was prepared for it and live as long as the loaded config. */
typedef struct sl_core_conf {
    /* process-wide (top level only) */
    const char *bind;           /* server.bind; NULL: all IPv4 addresses */
    long port;                  /* server.port */
    const char *errorlog;       /* server.errorlog; NULL: stderr */
    const char *pid_file;
    const char *username, *groupname;
    const char *chroot_dir;     /* server.chroot (absolute); NULL: none */
    long max_connections;       /* per process */
    long workers;               /* server.max-worker / server.workers; 0: one per core */
    bool reuse_port;            /* a listening socket per loop (SO_REUSEPORT) */
    const char *cpu_affinity;   /* server.worker-cpu-affinity: "disable" (the default) or
                                 * "auto" (a CPU each loop, with two loops or more) */
    const char *event_handler;
    const char *network_backend;
    long max_stat_threads;
    long max_read_threads;
    long block_size;            /* server.network-backend-block-size, bytes */
    bool use_noatime;
    long graceful_shutdown_timeout;
    const char *stat_cache_engine; /* "inotify", "simple" or "disable" */
    const void *http_parseopts; /* server.http-parseopts: checked only (seekless parses one way) */
    const struct sl_feature_flags *feature_flags; /* server.feature-flags; NULL: none set */
    const void *upload_dirs;    /* server.upload-dirs: checked only (bodies are never stored) */
    /* per request: may be overridden inside conditions */
    const sl_dir *docroot;      /* server.document-root; NULL until set */
    long max_keep_alive_requests;
    long max_keep_alive_idle;
    long max_read_idle;
    long max_write_idle;
    long max_request_size;      /* KiB, as lighttpd */
    long max_request_field_size;
    bool range_requests;
    bool follow_symlink;
    const sl_mime_table *mime;  /* mimetype.assign */
    const char *server_tag;     /* server.tag: the Server field ("": none) */
    const struct sl_errpages *errpages; /* server.errorfile-prefix, read at load; NULL: none */
    const char *error_handler;  /* server.error-handler: URL served for any error; NULL: none */
    const char *error_handler_404; /* server.error-handler-404: URL served for 404 and 403 */
    const char *server_name;    /* server.name: SERVER_NAME and %v instead of the host; NULL */
    long max_fds;               /* server.max-fds: RLIMIT_NOFILE to set (0: raise to the hard) */
} sl_core_conf;

/* server.feature-flags, as far as seekless has them. */
typedef struct sl_feature_flags {
    long graceful_shutdown_timeout; /* "server.graceful-shutdown-timeout"; -1: not set */
    bool h2proto;                   /* "server.h2proto": HTTP/2 (ALPN h2, the cleartext preface) */
    bool h2c;                       /* "server.h2c": HTTP/1.1 Upgrade: h2c (with h2proto) */
} sl_feature_flags;

/* Is HTTP/2 on ("server.h2proto" => "enable")? */
static inline bool sl_core_h2proto(const struct sl_core_conf *g)
{
    return g->feature_flags && g->feature_flags->h2proto;
}

/* May a cleartext HTTP/1.1 request upgrade to HTTP/2 ("server.h2c", lighttpd: only with
 * "server.h2proto")? */
static inline bool sl_core_h2c(const struct sl_core_conf *g)
{
    return sl_core_h2proto(g) && g->feature_flags->h2c;
}

/* Seconds a graceful stop waits for responses in flight: server.feature-flags'
 * "server.graceful-shutdown-timeout" (lighttpd's place for it) or server.graceful-shutdown-timeout. */
static inline long sl_core_graceful_timeout(const struct sl_core_conf *g)
{
    if (g->feature_flags && g->feature_flags->graceful_shutdown_timeout >= 0)
        return g->feature_flags->graceful_shutdown_timeout;
    return g->graceful_shutdown_timeout;
}

/* A conf block: the core's settings, then every loaded module's at its offset. */
struct sl_conf {
    sl_core_conf core;
};

/* The core's settings in a conf block. */
static inline const sl_core_conf *sl_core(const sl_conf *b)
{
    return &b->core;
}

/* What RLIMIT_NOFILE becomes at start-up for server.max-fds `want` (0: not set) from the limits
 * (cur, max) the server starts with: without the key the soft limit is raised to the hard one;
 * with it the soft limit is set to it (also lower), and the hard one raised to it when that is
 * above and the server starts as root. 0 with *new_cur and *new_max, or -EPERM: above the hard limit
 * and not root (lighttpd then keeps the old limit and says so; seekless refuses to start). */
int sl_fd_limit_plan(long want, unsigned long long cur, unsigned long long max, int root,
                     unsigned long long *new_cur, unsigned long long *new_max);

/* Applies sl_fd_limit_plan to this process (start-up, still root). 0, or -1 with err. */
int sl_fd_limit_apply(long want, char *err, size_t errlen);

/* The core's key table, loaded first and always. */
extern sl_module sl_mod_core;

/* Lines for `seekless -V`: the compiled-in network backends and features. */
void sl_core_print_features(void);

#endif
