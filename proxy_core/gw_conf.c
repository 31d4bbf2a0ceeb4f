/* fastcgi.server and proxy.server (gw_conf.h): lighttpd 1.4's tables parsed into routes.
 *
 * The value is checked whole at load: every host needs "host" (with "port") or "socket", or
 * "bin-path" with one of them; every option is known and typed, or the load fails naming it.
 * The hosts of one key become one backend group, balanced by fastcgi.balance / proxy.balance;
 * their per-route options must agree (seekless keeps them per key, not per host). lighttpd's
 * options that do nothing in lighttpd 1.4 any more (min-procs, max-load-per-proc, idle-timeout)
 * are accepted. A "bin-path" host is registered for spawning (spawn.c) at start-up; -t only
 * checks it.
 */
#include "gw_conf.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mod_proxy.h"
#include "spawn.h"

#define ERR(...) (snprintf(ctx->err, ctx->errlen, __VA_ARGS__), -1)

typedef struct routes_prep {
    sl_proxy_routes rs;       /* first: the field points here */
    char **names;             /* every backend name, NULL-ended per route inside */
    size_t n_names, cap_names;
    sl_spawn_spec **spawns;
    size_t n_spawns;
    void **roots;             /* x-sendfile-docroot values (mod_proxy's prepared roots) */
    size_t n_roots;
} routes_prep;

void sl_gw_conf_release(void *p)
{
    routes_prep *rp = p;
    if (!rp) return;
    for (size_t i = 0; i < rp->rs.n; i++) free((void *)rp->rs.r[i].backends.v);
    free(rp->rs.r);
    for (size_t i = 0; i < rp->n_names; i++) free(rp->names[i]);
    free(rp->names);
    for (size_t i = 0; i < rp->n_spawns; i++) {
        sl_spawn_unregister(rp->spawns[i]);
        sl_spawn_free(rp->spawns[i]);
    }
    free(rp->spawns);
    for (size_t i = 0; i < rp->n_roots; i++) sl_proxy_roots_release(rp->roots[i]);
    free(rp->roots);
    free(rp);
}

static char *keep_name(routes_prep *rp, const char *s)
{
    if (rp->n_names == rp->cap_names) {
        size_t nc = rp->cap_names ? rp->cap_names * 2 : 16;
        char **nn = realloc(rp->names, nc * sizeof *nn);
        if (!nn) return NULL;
        rp->names = nn;
        rp->cap_names = nc;
    }
    char *d = strdup(s);
    if (d) rp->names[rp->n_names++] = d;
    return d;
}

static bool add_backend(sl_proxy_route *r, const char *name)
{
    const char **v = realloc((void *)r->backends.v, (r->backends.n + 2) * sizeof *v);
    if (!v) return false;
    v[r->backends.n++] = name;
    v[r->backends.n] = NULL;
    r->backends.v = v;
    return true;
}

static bool is_bool(const sl_cval *v, bool *out)
{
    if (v->type == SL_CV_INT) {
        *out = v->num != 0;
        return true;
    }
    if (v->type != SL_CV_STRING) return false;
    static const char *const yes[] = {"enable", "true", "on", "1", NULL};
    static const char *const no[] = {"disable", "false", "off", "0", NULL};
    for (size_t i = 0; yes[i]; i++)
        if (!strcmp(v->str, yes[i])) return (*out = true), true;
    for (size_t i = 0; no[i]; i++)
        if (!strcmp(v->str, no[i])) return (*out = false), true;
    return false;
}

/* An integer, also written as a string ("port" => "9000" is common). */
static bool is_int(const sl_cval *v, long *out)
{
    if (v->type == SL_CV_INT) return (*out = (long)v->num), v->num >= 0;
    if (v->type != SL_CV_STRING || !v->str[0]) return false;
    char *end;
    long n = strtol(v->str, &end, 10);
    return !*end && n >= 0 && ((*out = n), true);
}

static int signal_number(const sl_cval *v)
{
    long n;
    if (is_int(v, &n)) return n > 0 && n < NSIG ? (int)n : -1;
    if (v->type != SL_CV_STRING) return -1;
    static const struct { const char *name; int sig; } sigs[] = {
        {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGKILL", SIGKILL}, {"SIGQUIT", SIGQUIT},
        {"SIGHUP", SIGHUP}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {NULL, 0}};
    for (size_t i = 0; sigs[i].name; i++)
        if (!strcmp(v->str, sigs[i].name) || !strcmp(v->str, sigs[i].name + 3)) return sigs[i].sig;
    return -1;
}

/* One host's options into route r (first host) or checked against it (later hosts). */
typedef struct host_opts {
    const char *host, *socket, *bin_path, *mode;
    long port, max_procs, backlog;
    int kill_signal;
    const sl_cval *bin_env, *bin_copy_env, *xsendfile_docroot;
} host_opts;

static int parse_host(const char *mod, const char *key, const sl_cval *h, const sl_key_ctx *ctx,
                      bool fastcgi, sl_proxy_route *opt, host_opts *ho)
{
    memset(ho, 0, sizeof *ho);
    ho->port = -1;
    ho->max_procs = 4; /* lighttpd's default */
    ho->backlog = 1024;
    ho->kill_signal = SIGTERM;
    if (h->type != SL_CV_ARRAY) return ERR("%s: \"%s\": a host must be an array of options", mod, key);
    for (size_t i = 0; i < h->n_items; i++) {
        const char *o = h->items[i].key;
        const sl_cval *v = h->items[i].val;
        bool b;
        long n;
        if (!o) return ERR("%s: \"%s\": host options are \"name\" => value pairs", mod, key);
#define STR(field)                                                                              \
    do {                                                                                        \
        if (v->type != SL_CV_STRING) return ERR("%s: \"%s\": \"%s\" must be a string", mod, key, o); \
        field = v->str;                                                                         \
    } while (0)
#define BOOL(field)                                                                             \
    do {                                                                                        \
        if (!is_bool(v, &b)) return ERR("%s: \"%s\": \"%s\" must be \"enable\" or \"disable\"", mod, key, o); \
        field = b;                                                                              \
    } while (0)
        if (!strcmp(o, "host")) STR(ho->host);
        else if (!strcmp(o, "port")) {
            if (!is_int(v, &n) || n < 1 || n > 65535)
                return ERR("%s: \"%s\": \"port\" must be a port number", mod, key);
            ho->port = n;
        } else if (!strcmp(o, "socket")) STR(ho->socket);
        else if (!strcmp(o, "check-local")) BOOL(opt->check_local);
        else if (!strcmp(o, "x-sendfile") || !strcmp(o, "allow-x-send-file")) {
            BOOL(b);
            opt->xsendfile = b;
        } else if (!strcmp(o, "x-sendfile-docroot")) {
            if (v->type != SL_CV_ARRAY)
                return ERR("%s: \"%s\": \"x-sendfile-docroot\" must be a list of directories", mod, key);
            ho->xsendfile_docroot = v;
        } else if (!strcmp(o, "docroot")) STR(opt->docroot);
        else if (!strcmp(o, "strip-request-uri")) STR(opt->strip_request_uri);
        else if (!strcmp(o, "fix-root-scriptname")) BOOL(opt->fix_root_scriptname);
        else if (!strcmp(o, "broken-scriptfilename")) BOOL(opt->broken_scriptfilename);
        else if (fastcgi && !strcmp(o, "bin-path")) STR(ho->bin_path);
        else if (fastcgi && !strcmp(o, "bin-environment")) {
            if (v->type != SL_CV_ARRAY) return ERR("%s: \"%s\": \"bin-environment\" must be ( \"NAME\" => \"value\", ... )", mod, key);
            ho->bin_env = v;
        } else if (fastcgi && !strcmp(o, "bin-copy-environment")) {
            if (v->type != SL_CV_ARRAY) return ERR("%s: \"%s\": \"bin-copy-environment\" must be ( \"NAME\", ... )", mod, key);
            ho->bin_copy_env = v;
        } else if (fastcgi && !strcmp(o, "max-procs")) {
            if (!is_int(v, &n) || n < 1 || n > 256)
                return ERR("%s: \"%s\": \"max-procs\" must be 1 to 256", mod, key);
            ho->max_procs = n;
        } else if (fastcgi && !strcmp(o, "listen-backlog")) {
            if (!is_int(v, &n) || n < 1) return ERR("%s: \"%s\": \"listen-backlog\" must be a positive number", mod, key);
            ho->backlog = n;
        } else if (fastcgi && !strcmp(o, "kill-signal")) {
            if ((ho->kill_signal = signal_number(v)) < 0)
                return ERR("%s: \"%s\": \"kill-signal\" is not a signal", mod, key);
        } else if (fastcgi && !strcmp(o, "mode")) {
            STR(ho->mode);
            if (strcmp(ho->mode, "responder"))
                return ERR("%s: \"%s\": \"mode\" => \"%s\" is not supported: seekless runs FastCGI "
                           "applications as responders only (mod_auth does authentication)",
                           mod, key, ho->mode);
        } else if (!strcmp(o, "min-procs") || !strcmp(o, "max-load-per-proc") ||
                   !strcmp(o, "idle-timeout")) {
            /* lighttpd 1.4 itself ignores these now: max-procs are started and kept. */
            if (!is_int(v, &n)) return ERR("%s: \"%s\": \"%s\" must be a number", mod, key, o);
        } else {
            return ERR("%s: \"%s\": host option \"%s\" is not supported by seekless (it knows: "
                       "host, port, socket, check-local, docroot, strip-request-uri, "
                       "fix-root-scriptname, broken-scriptfilename, x-sendfile, "
                       "x-sendfile-docroot%s)", mod, key, o,
                       fastcgi ? ", bin-path, bin-environment, bin-copy-environment, max-procs, "
                                 "listen-backlog, kill-signal, mode" : "");
        }
#undef STR
#undef BOOL
    }
    if (ho->socket && ho->host) return ERR("%s: \"%s\": a host has \"socket\" or \"host\", not both", mod, key);
    if (ho->socket && ho->socket[0] != '/')
        return ERR("%s: \"%s\": \"socket\" must be an absolute path", mod, key);
    if (!ho->socket && !ho->host && !ho->bin_path)
        return ERR("%s: \"%s\": a host needs \"host\" (and \"port\") or \"socket\"", mod, key);
    if (!ho->socket && ho->port < 0) {
        if (fastcgi) return ERR("%s: \"%s\": a host with \"host\" needs \"port\"", mod, key);
        ho->port = 80;
    }
    if (!ho->socket && !ho->host) ho->host = "127.0.0.1";
    return 0;
}

static int route_opts_differ(const sl_proxy_route *a, const sl_proxy_route *b)
{
    return a->check_local != b->check_local || a->fix_root_scriptname != b->fix_root_scriptname ||
           a->broken_scriptfilename != b->broken_scriptfilename || a->xsendfile != b->xsendfile ||
           (a->docroot ? !b->docroot || strcmp(a->docroot, b->docroot) : !!b->docroot) ||
           (a->strip_request_uri ? !b->strip_request_uri || strcmp(a->strip_request_uri, b->strip_request_uri)
                                 : !!b->strip_request_uri);
}

static int add_spawn(routes_prep *rp, const host_opts *ho, const sl_key_ctx *ctx, const char *mod,
                     const char *key)
{
    sl_spawn_spec *s = calloc(1, sizeof *s);
    sl_spawn_spec **ns = realloc(rp->spawns, (rp->n_spawns + 1) * sizeof *ns);
    if (!s || !ns) {
        free(s);
        if (ns) rp->spawns = ns;
        return ERR("out of memory");
    }
    rp->spawns = ns;
    rp->spawns[rp->n_spawns++] = s;
    s->procs = ho->max_procs;
    s->backlog = ho->backlog;
    s->kill_signal = ho->kill_signal;
    s->port = ho->port;
    s->copy_all_env = !ho->bin_copy_env;
    if (!(s->bin_path = strdup(ho->bin_path)) || !(s->pids = calloc((size_t)s->procs, sizeof *s->pids)) ||
        (ho->socket && !(s->socket = strdup(ho->socket))) || (ho->host && !(s->host = strdup(ho->host))))
        return ERR("out of memory");
    /* The program must exist and be executable (its first word). */
    char prog[4096];
    snprintf(prog, sizeof prog, "%.*s", (int)strcspn(s->bin_path, " "), s->bin_path);
    if (access(prog, X_OK) < 0)
        return ERR("%s: \"%s\": \"bin-path\" \"%s\": %s", mod, key, prog, strerror(errno));
    size_t ne = (ho->bin_env ? ho->bin_env->n_items : 0) + (ho->bin_copy_env ? ho->bin_copy_env->n_items : 0);
    if (!(s->env = calloc(ne + 1, sizeof *s->env))) return ERR("out of memory");
    size_t k = 0;
    for (size_t i = 0; ho->bin_env && i < ho->bin_env->n_items; i++) {
        const sl_cval_item *it = &ho->bin_env->items[i];
        if (!it->key || it->val->type != SL_CV_STRING)
            return ERR("%s: \"%s\": \"bin-environment\" must be ( \"NAME\" => \"value\", ... )", mod, key);
        size_t L = strlen(it->key) + strlen(it->val->str) + 2;
        if (!(s->env[k] = malloc(L))) return ERR("out of memory");
        snprintf(s->env[k++], L, "%s=%s", it->key, it->val->str);
    }
    for (size_t i = 0; ho->bin_copy_env && i < ho->bin_copy_env->n_items; i++) {
        const sl_cval_item *it = &ho->bin_copy_env->items[i];
        if (it->key || it->val->type != SL_CV_STRING)
            return ERR("%s: \"%s\": \"bin-copy-environment\" must be ( \"NAME\", ... )", mod, key);
        const char *val = getenv(it->val->str);
        if (!val) continue; /* lighttpd passes on only what is set */
        size_t L = strlen(it->val->str) + strlen(val) + 2;
        if (!(s->env[k] = malloc(L))) return ERR("out of memory");
        snprintf(s->env[k++], L, "%s=%s", it->val->str, val);
    }
    sl_spawn_register(s);
    return 0;
}

static int prep_routes(const char *mod, bool fastcgi, const sl_cval *v, const sl_key_ctx *ctx,
                       void **out)
{
    if (v->type != SL_CV_ARRAY)
        return ERR("%s must be ( \"extension or /prefix\" => ( host, ... ), ... )", mod);
    routes_prep *rp = calloc(1, sizeof *rp);
    if (!rp || !(rp->rs.r = calloc(v->n_items ? v->n_items : 1, sizeof *rp->rs.r))) {
        free(rp);
        return ERR("out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < v->n_items && !rc; i++) {
        const char *key = v->items[i].key;
        const sl_cval *hosts = v->items[i].val;
        /* The key "" is a suffix every path has: everything goes there. */
        if (!key || hosts->type != SL_CV_ARRAY || !hosts->n_items) {
            rc = ERR("%s must be ( \"extension or /prefix\" => ( host, ... ), ... )", mod);
            break;
        }
        sl_proxy_route *r = &rp->rs.r[rp->rs.n++];
        r->key = key;
        r->key_len = strlen(key);
        r->prefix = key[0] == '/';
        r->proto = fastcgi ? &sl_proxy_fastcgi : &sl_proxy_http;
        r->always_length = fastcgi;
        /* ( "name" => ( options ) ) or ( ( options ) ): a host's options are an array of
         * pairs; a named host's value is such an array too. lighttpd also takes the options
         * right under the key (one unnamed host): ( ".php" => ( "host" => ... ) ). */
        bool direct = hosts->items[0].val->type != SL_CV_ARRAY;
        size_t nh = direct ? 1 : hosts->n_items;
        for (size_t j = 0; j < nh && !rc; j++) {
            const sl_cval *h = direct ? hosts : hosts->items[j].val;
            sl_proxy_route o = {.check_local = fastcgi, .xsendfile = -1};
            host_opts ho;
            if ((rc = parse_host(mod, key, h, ctx, fastcgi, &o, &ho)) < 0) break;
            if (j == 0) {
                r->check_local = o.check_local;
                r->fix_root_scriptname = o.fix_root_scriptname;
                r->broken_scriptfilename = o.broken_scriptfilename;
                r->strip_request_uri = o.strip_request_uri;
                r->docroot = o.docroot;
                r->xsendfile = o.xsendfile;
            } else if (route_opts_differ(r, &o)) {
                rc = ERR("%s: \"%s\": its hosts have different options; seekless keeps check-local, "
                         "docroot, strip-request-uri, fix-root-scriptname, broken-scriptfilename "
                         "and x-sendfile per key: use one key per set of options", mod, key);
                break;
            }
            if (ho.xsendfile_docroot && !r->xsendfile_roots) {
                void *roots = NULL;
                if ((rc = sl_proxy_roots_prepare(ho.xsendfile_docroot, ctx, &roots)) < 0) break;
                void **nr = realloc(rp->roots, (rp->n_roots + 1) * sizeof *nr);
                if (!nr) {
                    sl_proxy_roots_release(roots);
                    rc = ERR("out of memory");
                    break;
                }
                rp->roots = nr;
                rp->roots[rp->n_roots++] = roots;
                r->xsendfile_roots = roots;
            }
            if (ho.bin_path && (rc = add_spawn(rp, &ho, ctx, mod, key)) < 0) break;
            /* Its addresses: every process of a spawned host, or the one given. */
            long procs = ho.bin_path ? ho.max_procs : 1;
            for (long p = 0; p < procs && !rc; p++) {
                char spec[4200], addrs[16][128];
                if (ho.socket && ho.bin_path)
                    snprintf(spec, sizeof spec, "unix:%s-%ld", ho.socket, p);
                else if (ho.socket)
                    snprintf(spec, sizeof spec, "unix:%s", ho.socket);
                else if (strchr(ho.host, ':'))
                    snprintf(spec, sizeof spec, "[%s]:%ld", ho.host, ho.port + p);
                else
                    snprintf(spec, sizeof spec, "%s:%ld", ho.host, ho.port + p);
                int n = sl_backend_expand(spec, addrs, 16);
                if (n < 0) {
                    rc = ERR("%s: \"%s\": backend \"%s\": %s", mod, key, spec,
                             n == -ENAMETOOLONG ? "unix socket path too long"
                             : n == -EHOSTUNREACH ? "cannot resolve the host name" : "not an address");
                    break;
                }
                for (int a = 0; a < n && !rc; a++) {
                    char *name = keep_name(rp, addrs[a]);
                    if (!name || !add_backend(r, name)) rc = ERR("out of memory");
                }
            }
        }
    }
    if (rc < 0) {
        sl_gw_conf_release(rp);
        return -1;
    }
    *out = rp;
    return 0;
}

int sl_gw_conf_prep_fastcgi(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep_routes("fastcgi.server", true, v, ctx, out);
}

int sl_gw_conf_prep_proxy(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep_routes("proxy.server", false, v, ctx, out);
}

/* Does r take path? *script_len: the part that names the script. A suffix also matches
 * inside the path before a '/' ("/index.php/x/y": the script is /index.php, /x/y the path
 * info), as lighttpd finds the file a longer path starts with. */
static bool route_matches(const sl_proxy_route *r, const char *key, size_t key_len,
                          const char *path, size_t path_len, size_t *script_len)
{
    *script_len = path_len;
    if (path_len < key_len) return false;
    if (r->prefix) return !memcmp(path, key, key_len);
    if (!memcmp(path + path_len - key_len, key, key_len)) return true;
    for (const char *p = path; (p = memmem(p, path_len - (size_t)(p - path), key, key_len)); p++)
        if (p + key_len < path + path_len && p[key_len] == '/' && p > path && p[-1] != '/') {
            *script_len = (size_t)(p + key_len - path);
            return true;
        }
    return false;
}

const sl_proxy_route *sl_gw_conf_match(const sl_proxy_routes *rs, const sl_kvlist *map,
                                       const char *path, size_t path_len, size_t *script_len)
{
    if (!rs) return NULL;
    for (size_t i = 0; i < rs->n; i++)
        if (route_matches(&rs->r[i], rs->r[i].key, rs->r[i].key_len, path, path_len, script_len))
            return &rs->r[i];
    /* fastcgi.map-extensions: ".php3" => ".php" uses the route of ".php". */
    for (size_t m = 0; map && m < map->n; m++) {
        for (size_t i = 0; i < rs->n; i++)
            if (!strcmp(rs->r[i].key, map->v[m]) && !rs->r[i].prefix &&
                route_matches(&rs->r[i], map->k[m], strlen(map->k[m]), path, path_len, script_len))
                return &rs->r[i];
    }
    return NULL;
}

const char *sl_gw_conf_split(const sl_proxy_route *r, const char *path, size_t path_len,
                             size_t *script_len)
{
    if (!r->prefix) return path + *script_len; /* a suffix found the script's end */
    *script_len = path_len;
    if (r->check_local) return path + path_len;
    if (r->fix_root_scriptname && r->key_len == 1) {
        *script_len = 0;
        return path;
    }
    if (path_len <= r->key_len) return path + path_len;
    const char *pi = memchr(path + r->key_len, '/', path_len - r->key_len);
    if (!pi) return path + path_len;
    *script_len = (size_t)(pi - path);
    return pi;
}

const char *sl_gw_conf_balancer(const char *name)
{
    if (!strcmp(name, "fair")) return "sqf";
    if (!strcmp(name, "round-robin")) return "round-robin";
    if (!strcmp(name, "hash")) return "carp";
    return NULL;
}

typedef struct header_prep {
    sl_proxy_header h;
    const char **k, **v;
} header_prep;

static void header_release(void *p)
{
    header_prep *hp = p;
    free(hp->k);
    free(hp->v);
    free(hp);
}

static int pairs(const sl_cval *v, sl_kvlist *out, const char **k, const char **val)
{
    out->k = k;
    out->v = val;
    out->n = 0;
    for (size_t i = 0; i < v->n_items; i++) {
        if (!v->items[i].key || v->items[i].val->type != SL_CV_STRING) return -1;
        k[out->n] = v->items[i].key;
        val[out->n++] = v->items[i].val->str;
    }
    return 0;
}

int sl_gw_conf_prep_header(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_ARRAY) return ERR("proxy.header must be ( \"option\" => value, ... )");
    size_t total = 0;
    for (size_t i = 0; i < v->n_items; i++)
        if (v->items[i].val->type == SL_CV_ARRAY) total += v->items[i].val->n_items;
    header_prep *hp = calloc(1, sizeof *hp);
    if (hp) {
        hp->k = calloc(total + 1, sizeof *hp->k);
        hp->v = calloc(total + 1, sizeof *hp->v);
    }
    if (!hp || !hp->k || !hp->v) {
        if (hp) header_release(hp);
        return ERR("out of memory");
    }
    size_t used = 0;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *o = v->items[i].key;
        const sl_cval *x = v->items[i].val;
        sl_kvlist *list = !o ? NULL : !strcmp(o, "map-urlpath") ? &hp->h.map_urlpath
                                    : !strcmp(o, "map-host-request") ? &hp->h.map_host_request
                                                                     : NULL;
        bool off;
        if (list) {
            if (x->type != SL_CV_ARRAY || pairs(x, list, hp->k + used, hp->v + used) < 0) {
                header_release(hp);
                return ERR("proxy.header: \"%s\" must be ( \"from\" => \"to\", ... )", o);
            }
            used += list->n;
        } else if (o && (!strcmp(o, "upgrade") || !strcmp(o, "connect") ||
                         !strcmp(o, "force-http10") || !strcmp(o, "https-remap")) &&
                   is_bool(x, &off) && !off) {
            /* lighttpd's defaults: nothing to do. */
        } else {
            header_release(hp);
            return ERR("proxy.header: \"%s\" is not supported by seekless (it has "
                       "\"map-urlpath\" and \"map-host-request\"; \"upgrade\", \"connect\", "
                       "\"force-http10\" and \"https-remap\" only disabled, their default)",
                       o ? o : "?");
        }
    }
    *out = hp;
    return 0;
}

void sl_gw_conf_release_header(void *p)
{
    header_release(p);
}

const char *sl_gw_conf_map(const sl_kvlist *map, const char *s, size_t len, size_t *matched)
{
    for (size_t i = 0; map && i < map->n; i++) {
        size_t kl = strlen(map->k[i]);
        if (len >= kl && !memcmp(s, map->k[i], kl)) {
            *matched = kl;
            return map->v[i];
        }
    }
    return NULL;
}
