/* lighttpd 1.4's fastcgi.server and proxy.server, mapped onto proxy-core.
 *
 * A table ( ".php" => ( ( "host" => ..., "port" => ... ), ... ), "/app/" => ... ) becomes a list
 * of routes: a URL-path suffix ("extension") or prefix, the protocol, every backend of its hosts
 * as one balanced group, and the per-route options lighttpd has (check-local, docroot,
 * strip-request-uri, fix-root-scriptname, x-sendfile ...). A host with "bin-path" is spawned by
 * seekless at start-up as lighttpd does (spawn.c). An option seekless does not implement is
 * refused at load, naming it.
 */
#ifndef SL_GW_CONF_H
#define SL_GW_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "module.h"
#include "proto.h"

struct sl_proxy_roots;

/* A FastCGI application seekless starts (a host with "bin-path"). */
typedef struct sl_spawn_spec {
    char *bin_path;      /* command line, split on spaces */
    char **env;          /* NULL-ended "NAME=value" (bin-environment, bin-copy-environment) */
    bool copy_all_env;   /* no bin-copy-environment: the whole environment is passed on */
    char *socket;        /* unix socket base path (lighttpd appends "-<n>"), or NULL: TCP */
    char *host;          /* TCP: the address to bind */
    long port;           /* TCP: the first port (lighttpd adds <n>) */
    long procs;          /* max-procs */
    long backlog;        /* listen-backlog */
    int kill_signal;
    pid_t *pids;         /* procs entries, 0 when not running */
    struct sl_spawn_spec *next; /* the registry of spawn.c */
} sl_spawn_spec;

/* One route. */
typedef struct sl_proxy_route {
    const char *key;      /* ".php" (a suffix of the path) or "/app/" (a prefix) */
    size_t key_len;
    bool prefix;
    const sl_proxy_proto *proto;
    sl_strlist backends;  /* canonical addresses ("ip:port", "unix:/path") of every host */
    bool check_local;     /* the file must exist under the document root (else 404) */
    bool fix_root_scriptname;
    bool broken_scriptfilename; /* PHP's cgi.fix_pathinfo: PATH_INFO appended to SCRIPT_* */
    bool always_length;   /* CONTENT_LENGTH also without a body (lighttpd's FastCGI does) */
    const char *strip_request_uri;
    const char *docroot;  /* NULL: server.document-root */
    int xsendfile;        /* -1: proxy-core.allow-x-sendfile decides; 0/1 */
    const struct sl_proxy_roots *xsendfile_roots;
} sl_proxy_route;

/* The routes of one fastcgi.server or proxy.server value, in file order. */
typedef struct sl_proxy_routes {
    sl_proxy_route *r;
    size_t n;
} sl_proxy_routes;

/* Key prepare/release for fastcgi.server and proxy.server (module.h). */
int sl_gw_conf_prep_fastcgi(const sl_cval *v, const sl_key_ctx *ctx, void **out);
int sl_gw_conf_prep_proxy(const sl_cval *v, const sl_key_ctx *ctx, void **out);
void sl_gw_conf_release(void *p);

/* The first route whose key matches path: a prefix (keys starting with '/'), or a suffix at
 * the end of the path or before a '/' inside it (the rest is PATH_INFO), also through
 * fastcgi.map-extensions (map: "ext" => "key it is served as", may be NULL). *script_len: the
 * length of the part of path that names the script. */
const sl_proxy_route *sl_gw_conf_match(const sl_proxy_routes *rs, const sl_kvlist *map,
                                       const char *path, size_t path_len, size_t *script_len);

/* SCRIPT_NAME and PATH_INFO for path under route r: for a suffix, as matched (*script_len from
 * sl_gw_conf_match); for a prefix with check-local disabled, as lighttpd 1.4 splits it: PATH_INFO
 * starts at the first '/' after the prefix (all of the path for "/" with fix-root-scriptname).
 * Updates *script_len; returns where PATH_INFO starts in path (path + path_len: none). */
const char *sl_gw_conf_split(const sl_proxy_route *r, const char *path, size_t path_len,
                             size_t *script_len);

/* proxy.header: the request mappings lighttpd's mod_proxy has. */
typedef struct sl_proxy_header {
    sl_kvlist map_urlpath;      /* "/from/" => "/to/": a path prefix replaced */
    sl_kvlist map_host_request; /* "host" => "backend host" ("-": any host) */
} sl_proxy_header;

int sl_gw_conf_prep_header(const sl_cval *v, const sl_key_ctx *ctx, void **out);
void sl_gw_conf_release_header(void *p);

/* The value of the first pair of map whose key is a prefix of s[0..len) (*matched: its length),
 * or NULL. */
const char *sl_gw_conf_map(const sl_kvlist *map, const char *s, size_t len, size_t *matched);

/* lighttpd's balance names ("fair", "round-robin", "hash") as proxy-core balancers, or NULL. */
const char *sl_gw_conf_balancer(const char *lighttpd_name);

#endif
