/* proxy-core: the reverse-proxy module (FastCGI and HTTP backends, X-Sendfile). */
#ifndef SL_MOD_PROXY_H
#define SL_MOD_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "module.h"
#include "proto.h"

/* Allowed roots (proxy-core.x-sendfile-docroot): absolute paths without a trailing slash, and
 * O_PATH descriptors opened at start-up. */
typedef struct sl_proxy_roots {
    const char *const *path;
    const int *fd;
    size_t n;
} sl_proxy_roots;

/* The module's settings. */
typedef struct sl_proxy_conf {
    /* proxy-core.backends as canonical "ip:port", "[ip6]:port" or "unix:/path", one per address
     * (names are resolved at start-up); NULL: the request is not proxied. */
    const sl_strlist *backends;
    const sl_proxy_proto *protocol;    /* proxy-core.protocol: FastCGI or HTTP (proto.h) */
    const char *balancer;              /* "round-robin", "sqf", "static", "carp" */
    long max_pool_size;                /* connections per backend, for the whole process */
    long max_keep_alive_requests;      /* requests per backend connection (-1: default) */
    long disable_time;                 /* seconds a failed backend is left alone */
    long connect_timeout;              /* seconds */
    long read_timeout;                 /* seconds without a byte from the backend */
    long max_backlog_size;             /* requests waiting for a free connection */
    bool allow_x_sendfile;
    const sl_proxy_roots *xsendfile_roots; /* NULL: the document root */
    /* lighttpd 1.4's keys (gw_conf.h): used when proxy-core.backends is not set. */
    const struct sl_proxy_routes *fastcgi_server; /* fastcgi.server */
    const struct sl_proxy_routes *proxy_server;   /* proxy.server */
    const char *fastcgi_balance, *proxy_balance;  /* as proxy-core balancers; NULL: balancer */
    sl_kvlist fastcgi_map_extensions;             /* ".php3" => ".php" */
    const struct sl_proxy_header *proxy_header;   /* proxy.header (map-urlpath ...) */
    /* proxy-core.rewrite-request / -response (rewrite.h); NULL: none */
    const struct sl_proxy_rewrites *rewrite_request, *rewrite_response;
    const unsigned *forwarded;   /* proxy.forwarded: SL_FWD_* (proto.h); NULL: none */
    long fastcgi_debug, proxy_debug;              /* accepted (lighttpd's debug levels) */
} sl_proxy_conf;

/* The module table: takes requests whose settings name proxy-core.backends. */
extern sl_module sl_mod_proxy;

/* x-sendfile-docroot values: prepare (an array of directories, opened O_PATH) and release;
 * *out is an sl_proxy_roots. */
int sl_proxy_roots_prepare(const sl_cval *v, const sl_key_ctx *ctx, void **out);
void sl_proxy_roots_release(void *p);

/* Expand a proxy-core backend spec ("host:port", "[ipv6]:port", "unix:/path") into canonical
 * addresses, one per address the host name resolves to (at most max). Returns how many, or
 * -EINVAL (syntax), -ENAMETOOLONG (unix path), -EHOSTUNREACH (name does not resolve). */
int sl_backend_expand(const char *spec, char (*out)[128], int max);

/* Resolve an X-Sendfile value against the allowed roots: percent-decode, require an absolute
 * path, remove dot segments, and find the root it lies under (prefix match including the slash).
 * On success writes the normalized path to out (outcap bytes) and returns the index of the root
 * (roots[i]), with *rel pointing into out at the path relative to that root. Returns -EACCES
 * when the path is relative or outside every root, -EINVAL when it does not decode, or
 * -ENAMETOOLONG. The synchronous core of X-Sendfile, used by tests without a server. */
int sl_xsendfile_locate(const char *value, size_t len, const char *const *roots, size_t n_roots,
                        char *out, size_t outcap, const char **rel);

#endif
