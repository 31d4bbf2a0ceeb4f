/* Typed settings: the meaning of config keys.
 *
 * config_parse.c knows the syntax; this module knows the keys. One table lists every key seekless
 * knows, its type, whether it may appear inside a condition, and whether it works yet. Start-up
 * checks every assignment in the tree against that table; per request, the assignments of the blocks
 * that match are applied over a copy of the global settings.
 */
#ifndef SL_SETTINGS_H
#define SL_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config_parse.h"
#include "mime.h"

/* A list of strings taken from a config array (points into the config tree). */
typedef struct sl_strlist {
    const char *const *v;
    size_t n;
} sl_strlist;

/* Allowed roots (proxy-core.x-sendfile-docroot): absolute paths without a trailing slash, and
 * O_PATH descriptors opened at start-up. */
typedef struct sl_rootlist {
    const char *const *path;
    const int *fd;
    size_t n;
} sl_rootlist;

/* Everything a request or the process needs from the config. Strings point into the config tree
 * (or into tables owned by sl_settings_prepare) and live as long as the tree. */
typedef struct sl_settings {
    /* process-wide: only valid at the top level */
    const char *bind;
    long port;
    const char *errorlog;
    const char *pid_file;
    const char *username;
    const char *groupname;
    long max_connections;
    const char *event_handler;
    const char *network_backend;
    long max_stat_threads;
    long max_read_threads;
    long block_size;            /* server.network-backend-block-size, bytes */
    bool use_noatime;
    long graceful_shutdown_timeout;
    bool log_timing;            /* debug.log-timing */
    const char *accesslog_filename; /* accesslog.filename; NULL: no access log */
    const char *accesslog_format;   /* accesslog.format */
    const char *timing_file;    /* debug.timing-file */
    /* per request: may be overridden inside conditions */
    const char *document_root;
    int docroot_fd; /* O_PATH fd of document_root, opened by sl_settings_prepare */
    long max_keep_alive_requests;
    long max_keep_alive_idle;
    long max_read_idle;
    long max_write_idle;
    long long max_request_size; /* bytes (the config gives KiB, as lighttpd) */
    long max_request_field_size;
    bool range_requests;
    bool follow_symlink;
    bool etags;
    sl_strlist index_files;
    sl_strlist exclude_extensions;
    sl_strlist access_deny;
    const sl_mime_table *mime;
    /* proxy-core (proxy_core/): backends as canonical "ip:port", "[ip6]:port" or "unix:/path",
     * one per address (names are resolved at start-up). n == 0: not proxied. */
    sl_strlist proxy_backends;
    const char *proxy_protocol;       /* "fastcgi" or "http" */
    const char *proxy_balancer;       /* "round-robin", "sqf", "static", "carp" */
    long proxy_max_pool_size;         /* connections per backend */
    long proxy_max_keep_alive_requests;
    long proxy_disable_time;          /* seconds a failed backend is left alone */
    long proxy_connect_timeout;       /* seconds */
    long proxy_read_timeout;          /* seconds without a byte from the backend */
    long proxy_max_backlog_size;      /* requests waiting for a free connection */
    bool proxy_allow_x_sendfile;
    sl_rootlist proxy_xsendfile_roots; /* n == 0: the document root */
    /* status page (mod_status.c) */
    const char *status_url;          /* NULL: no status page */
    sl_strlist status_allow;         /* client networks; empty: everyone */
} sl_settings;

/* Defaults: lighttpd's, where lighttpd has one. */
void sl_settings_defaults(sl_settings *s);

/* One listening socket: its canonical address and the literal that $SERVER["socket"] conditions
 * compare with (the config's own spelling, so a condition matches the listener it named). */
typedef struct sl_listen_spec {
    char canon[128];
    char literal[128];
} sl_listen_spec;

#define SL_MAX_LISTENERS 64

/* Check every assignment in the tree (known key, right type, allowed in that block, implemented,
 * a value that works), make relative paths absolute against basedir, canonicalize
 * $SERVER["socket"] patterns, open document roots and build mime tables; then check what
 * start-up would refuse: a server.username / server.groupname that does not exist, a document
 * root (or X-Sendfile root) the server's user cannot enter, an error log, pid file, access log or
 * timing file that cannot be written or created. Files the server opens after dropping
 * privileges are judged as server.username (on a thread that alone takes that user's
 * credentials, when we are root).
 * Every fault is appended to errs ("file:line: message"); none stops the others being checked.
 * Fills *global from the top-level block and listen[] (at most SL_MAX_LISTENERS) with the
 * default socket (server.bind:server.port) first, then one per distinct $SERVER["socket"] value.
 * Returns 0, or -1 when it found errors or the tree is partial (t->partial: the parser already
 * reported why). Resources are released by sl_settings_release. */
int sl_settings_prepare(sl_config_tree *t, const char *basedir, sl_settings *global,
                        sl_listen_spec *listen, size_t *n_listen, sl_config_errors *errs);

/* Become uid/gid as start-up does after binding: supplementary groups cleared, then uname's
 * (when given) added; uid (uid_t)-1 keeps the user. Needs root. 0 or a negative errno. */
int sl_switch_user(const char *uname, uid_t uid, gid_t gid);

/* Release the document-root fds, mime tables and string lists made by sl_settings_prepare. */
void sl_settings_release(void);

/* Settings for one request: *out = *global with every matching block's assignments applied. */
void sl_settings_for_request(const sl_config_tree *t, const sl_settings *global,
                             const sl_cond_input *in, sl_settings *out);

/* Canonical "ip:port" / "[ip6]:port" form of a socket spec (":80", "host:port", "[::1]:80").
 * Resolves names with getaddrinfo (start-up only). Returns 0 or a negative errno / -EINVAL. */
int sl_socket_canonical(const char *spec, char *out, size_t outlen);

/* Expand a proxy-core backend spec ("host:port", "[ipv6]:port", "unix:/path") into canonical
 * addresses, one per address the host name resolves to (at most max). Returns how many, or
 * -EINVAL (syntax), -ENAMETOOLONG (unix path), -EHOSTUNREACH (name does not resolve). */
int sl_backend_expand(const char *spec, char (*out)[128], int max);

/* Parse "ip/bits" or "ip" (IPv4 or IPv6) into net (16 bytes), family and prefix length.
 * 0 or -EINVAL. */
int sl_cidr_parse(const char *s, unsigned char net[16], int *family, int *bits);
struct sockaddr;
/* Whether the address lies in the network cidr (IPv4-mapped IPv6 matches IPv4 networks). */
bool sl_cidr_match(const char *cidr, const struct sockaddr *sa);

/* Lines for `seekless -V`: the compiled-in network backends and features. */
void sl_settings_print_features(void);

#endif
