/* Typed settings.
 *
 * One sorted table describes every key: its type, where it may appear, and whether this build
 * implements it (a key that parses but does not work yet is refused at start-up with a message
 * that says so, never silently ignored). Start-up walks the whole tree once, checks each assignment
 * against the table and "prepares" values that need work (absolute paths, document-root fds, mime
 * tables, string lists), keyed by the value's address. Per request, applying an assignment is a
 * table look-up and a field store, with no allocation.
 */
#include "settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "accesslog.h"
#include "netback.h"
#include "sl_version.h"

typedef enum {
    KT_STR,
    KT_PATH,
    KT_DOCROOT,
    KT_INT,
    KT_BOOL,
    KT_STRLIST,
    KT_MIME,
    KT_BACKENDS, /* list of backend addresses, expanded and canonicalized at start-up */
    KT_ROOTS,    /* list of directories, opened at start-up */
} key_type;

typedef struct key_def {
    const char *name;
    key_type type;
    bool global_only;
    size_t off;
    /* NULL: implemented. Otherwise the reason it is refused; `allowed` may name the one value
     * that already works (e.g. the backend we have), which is then accepted. */
    const char *not_yet;
    const char *allowed;
} key_def;

#define OFF(f) offsetof(sl_settings, f)

static const key_def keys[] = {
    {"accesslog.filename", KT_PATH, true, OFF(accesslog_filename), NULL, NULL},
    {"accesslog.format", KT_STR, true, OFF(accesslog_format), NULL, NULL},
    {"debug.log-timing", KT_BOOL, true, OFF(log_timing), NULL, NULL},
    {"debug.timing-file", KT_PATH, true, OFF(timing_file), NULL, NULL},
    {"index-file.names", KT_STRLIST, false, OFF(index_files), NULL, NULL},
    {"mimetype.assign", KT_MIME, false, OFF(mime), NULL, NULL},
    {"proxy-core.allow-x-sendfile", KT_BOOL, false, OFF(proxy_allow_x_sendfile), NULL, NULL},
    {"proxy-core.backends", KT_BACKENDS, false, OFF(proxy_backends), NULL, NULL},
    {"proxy-core.balancer", KT_STR, false, OFF(proxy_balancer), NULL, NULL},
    {"proxy-core.connect-timeout", KT_INT, false, OFF(proxy_connect_timeout), NULL, NULL},
    {"proxy-core.disable-time", KT_INT, false, OFF(proxy_disable_time), NULL, NULL},
    {"proxy-core.max-backlog-size", KT_INT, false, OFF(proxy_max_backlog_size), NULL, NULL},
    {"proxy-core.max-keep-alive-requests", KT_INT, false, OFF(proxy_max_keep_alive_requests), NULL,
     NULL},
    {"proxy-core.max-pool-size", KT_INT, false, OFF(proxy_max_pool_size), NULL, NULL},
    {"proxy-core.protocol", KT_STR, false, OFF(proxy_protocol), NULL, NULL},
    {"proxy-core.read-timeout", KT_INT, false, OFF(proxy_read_timeout), NULL, NULL},
    {"proxy-core.x-sendfile-docroot", KT_ROOTS, false, OFF(proxy_xsendfile_roots), NULL, NULL},
    {"server.bind", KT_STR, true, OFF(bind), NULL, NULL},
    {"server.document-root", KT_DOCROOT, false, OFF(document_root), NULL, NULL},
    {"server.errorlog", KT_PATH, true, OFF(errorlog), NULL, NULL},
    {"server.event-handler", KT_STR, true, OFF(event_handler), NULL, NULL},
    {"server.follow-symlink", KT_BOOL, false, OFF(follow_symlink), NULL, NULL},
    {"server.graceful-shutdown-timeout", KT_INT, true, OFF(graceful_shutdown_timeout), NULL, NULL},
    {"server.groupname", KT_STR, true, OFF(groupname), NULL, NULL},
    {"server.max-connections", KT_INT, true, OFF(max_connections), NULL, NULL},
    {"server.max-keep-alive-idle", KT_INT, false, OFF(max_keep_alive_idle), NULL, NULL},
    {"server.max-keep-alive-requests", KT_INT, false, OFF(max_keep_alive_requests), NULL, NULL},
    {"server.max-read-idle", KT_INT, false, OFF(max_read_idle), NULL, NULL},
    {"server.max-read-threads", KT_INT, true, OFF(max_read_threads), NULL, NULL},
    {"server.max-request-field-size", KT_INT, false, OFF(max_request_field_size), NULL, NULL},
    {"server.max-request-size", KT_INT, false, OFF(max_request_size), NULL, NULL},
    {"server.max-stat-threads", KT_INT, true, OFF(max_stat_threads), NULL, NULL},
    {"server.max-write-idle", KT_INT, false, OFF(max_write_idle), NULL, NULL},
    {"server.network-backend", KT_STR, true, OFF(network_backend), NULL, NULL},
    {"server.network-backend-block-size", KT_INT, true, OFF(block_size), NULL, NULL},
    {"server.pid-file", KT_PATH, true, OFF(pid_file), NULL, NULL},
    {"server.port", KT_INT, true, OFF(port), NULL, NULL},
    {"server.range-requests", KT_BOOL, false, OFF(range_requests), NULL, NULL},
    {"server.use-noatime", KT_BOOL, true, OFF(use_noatime), NULL, NULL},
    {"server.username", KT_STR, true, OFF(username), NULL, NULL},
    {"static-file.etags", KT_BOOL, false, OFF(etags), NULL, NULL},
    {"static-file.exclude-extensions", KT_STRLIST, false, OFF(exclude_extensions), NULL, NULL},
    {"status.allow-networks", KT_STRLIST, false, OFF(status_allow), NULL, NULL},
    {"status.status-url", KT_STR, false, OFF(status_url), NULL, NULL},
    {"url.access-deny", KT_STRLIST, false, OFF(access_deny), NULL, NULL},
};

static int key_cmp(const void *k, const void *d)
{
    return strcmp(k, ((const key_def *)d)->name);
}

static const key_def *key_find(const char *name)
{
    return bsearch(name, keys, sizeof keys / sizeof keys[0], sizeof keys[0], key_cmp);
}

/* Work done once at start-up for a value, found again per request by the value's address. */
typedef struct prepared {
    const sl_cval *val;
    char *path;      /* KT_PATH, KT_DOCROOT: absolute path */
    int fd;          /* KT_DOCROOT */
    sl_mime_table *mime;
    const char **list;
    size_t n;
    int *fds;        /* KT_ROOTS */
} prepared;

static prepared *preps;
static size_t n_preps, cap_preps;

static const prepared *prep_find(const sl_cval *v)
{
    for (size_t i = 0; i < n_preps; i++)
        if (preps[i].val == v) return &preps[i];
    return NULL;
}

static prepared *prep_add(const sl_cval *v)
{
    if (n_preps == cap_preps) {
        size_t nc = cap_preps ? cap_preps * 2 : 16;
        prepared *p = realloc(preps, nc * sizeof *p);
        if (!p) return NULL;
        preps = p;
        cap_preps = nc;
    }
    prepared *p = &preps[n_preps++];
    memset(p, 0, sizeof *p);
    p->val = v;
    p->fd = -1;
    return p;
}

void sl_settings_release(void)
{
    for (size_t i = 0; i < n_preps; i++) {
        free(preps[i].path);
        if (preps[i].fd >= 0) close(preps[i].fd);
        sl_mime_table_free(preps[i].mime);
        if (preps[i].fds) {
            for (size_t j = 0; j < preps[i].n; j++) {
                if (preps[i].fds[j] >= 0) close(preps[i].fds[j]);
                free((char *)preps[i].list[j]); /* KT_ROOTS and KT_BACKENDS own their strings */
            }
            free(preps[i].fds);
        }
        free(preps[i].list);
    }
    free(preps);
    preps = NULL;
    n_preps = cap_preps = 0;
}

void sl_settings_defaults(sl_settings *s)
{
    memset(s, 0, sizeof *s);
    s->bind = NULL; /* all addresses */
    s->port = 80;
    s->max_connections = 1024;
    s->event_handler = "linux-sysepoll";
    s->network_backend = SL_NETBACK_DEFAULT;
    s->max_read_threads = 16;
    s->max_stat_threads = 4;
    s->block_size = 512 * 1024;
    s->use_noatime = false;
    s->graceful_shutdown_timeout = 30;
    s->docroot_fd = -1;
    s->max_keep_alive_requests = 1000;
    s->max_keep_alive_idle = 5;
    s->max_read_idle = 60;
    s->max_write_idle = 360;
    s->max_request_size = 2LL * 1024 * 1024 * 1024;
    s->max_request_field_size = 8192;
    s->range_requests = true;
    s->follow_symlink = true;
    s->etags = true;
    s->mime = sl_mime_default();
    s->accesslog_format = SL_ACCESSLOG_DEFAULT;
    s->proxy_protocol = "http";
    s->proxy_balancer = "sqf";
    s->proxy_max_pool_size = 16;
    s->proxy_max_keep_alive_requests = -1; /* per protocol: see sl_proxy_keepalive_max */
    s->proxy_disable_time = 10;
    s->proxy_connect_timeout = 5;
    s->proxy_read_timeout = 60;
    s->proxy_max_backlog_size = 1024;
}

/* Store a checked value into its field. Used at start-up and per request. */
static void apply_value(sl_settings *s, const key_def *k, const sl_cval *v)
{
    if (!k->off && k->not_yet) return; /* a refused key never reaches here, an allowed value has no effect */
    void *field = (char *)s + k->off;
    const prepared *p;
    switch (k->type) {
    case KT_STR:
        *(const char **)field = v->str;
        break;
    case KT_PATH:
        p = prep_find(v);
        *(const char **)field = p ? p->path : v->str;
        break;
    case KT_DOCROOT:
        p = prep_find(v);
        if (p) {
            s->document_root = p->path;
            s->docroot_fd = p->fd;
        }
        break;
    case KT_INT:
        if (k->off == OFF(max_request_size))
            s->max_request_size = v->num * 1024;
        else
            *(long *)field = (long)v->num;
        break;
    case KT_BOOL:
        *(bool *)field = strcmp(v->str, "enable") == 0;
        break;
    case KT_STRLIST:
        p = prep_find(v);
        if (p) {
            ((sl_strlist *)field)->v = p->list;
            ((sl_strlist *)field)->n = p->n;
        }
        break;
    case KT_MIME:
        p = prep_find(v);
        if (p) s->mime = p->mime;
        break;
    case KT_BACKENDS:
        p = prep_find(v);
        if (p) {
            s->proxy_backends.v = p->list;
            s->proxy_backends.n = p->n;
        }
        break;
    case KT_ROOTS:
        p = prep_find(v);
        if (p) {
            s->proxy_xsendfile_roots.path = p->list;
            s->proxy_xsendfile_roots.fd = p->fds;
            s->proxy_xsendfile_roots.n = p->n;
        }
        break;
    }
}

/* A file or directory start-up will open, checked by sl_settings_prepare as the user that will
 * open it (see check_access). */
typedef enum { ACC_SEARCH_DIR, ACC_APPEND_FILE } access_kind;

typedef struct access_check {
    const sl_cassign *a; /* the assignment that names it, for file:line and the key */
    const char *path;    /* absolute (owned by the prepared value) */
    access_kind kind;
    bool as_server;      /* opened after privileges are dropped (else by the starting user) */
} access_check;

/* An error waiting to be reported in file order. */
typedef struct pending_error {
    const char *file;
    int line;
    size_t seq;
    char *msg;
} pending_error;

typedef struct prep_ctx {
    const char *basedir;
    sl_config_errors *errs;
    int n_err;
    pending_error *pend; /* the walk visits blocks, not lines: sorted before they are reported */
    size_t n_pend, cap_pend;
    sl_settings *global;
    const sl_config_tree *tree;
    sl_listen_spec *listen; /* [0] is reserved for the default socket */
    size_t n_listen;
    /* Top-level assignments that passed their checks, for the checks that combine them. */
    const sl_cassign *username, *groupname, *bind, *port, *docroot;
    access_check *acc;
    size_t n_acc, cap_acc;
} prep_ctx;

/* Every check reports its own error and the walk goes on, so one run names every fault. */
static void fail(prep_ctx *c, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(prep_ctx *c, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->n_err++;
    if (c->n_pend == c->cap_pend) {
        size_t nc = c->cap_pend ? c->cap_pend * 2 : 16;
        pending_error *np = realloc(c->pend, nc * sizeof *np);
        if (!np) {
            sl_config_error_add(c->errs, file, line, "%s", msg); /* out of order, not lost */
            return;
        }
        c->pend = np;
        c->cap_pend = nc;
    }
    char *m = strdup(msg);
    if (!m) {
        sl_config_error_add(c->errs, file, line, "%s", msg);
        return;
    }
    c->pend[c->n_pend] = (pending_error){file, line, c->n_pend, m};
    c->n_pend++;
}

static int pending_cmp(const void *x, const void *y)
{
    const pending_error *a = x, *b = y;
    if (a->file != b->file) return a->seq < b->seq ? -1 : 1; /* files keep their first order */
    if (a->line != b->line) return a->line < b->line ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Report the pending errors in file order: by line within a file, files in the order their
 * first error was found. */
static void flush_errors(prep_ctx *c)
{
    /* Give every error of a file the seq of that file's first error (kept in `first`), so that
     * the sort groups files without comparing names. */
    size_t *first = calloc(c->n_pend + 1, sizeof *first);
    for (size_t i = 0; first && i < c->n_pend; i++) {
        first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (c->pend[j].file == c->pend[i].file) {
                first[i] = first[j];
                break;
            }
    }
    for (size_t i = 0; first && i < c->n_pend; i++) c->pend[i].seq = first[i] * (c->n_pend + 1) + i;
    free(first);
    if (c->n_pend) qsort(c->pend, c->n_pend, sizeof *c->pend, pending_cmp); /* NULL when empty */
    for (size_t i = 0; i < c->n_pend; i++) {
        sl_config_error_add(c->errs, c->pend[i].file, c->pend[i].line, "%s", c->pend[i].msg);
        free(c->pend[i].msg);
    }
    free(c->pend);
    c->pend = NULL;
    c->n_pend = c->cap_pend = 0;
}

static void want_access(prep_ctx *c, const sl_cassign *a, const char *path, access_kind kind,
                        bool as_server)
{
    if (c->n_acc == c->cap_acc) {
        size_t nc = c->cap_acc ? c->cap_acc * 2 : 8;
        access_check *na = realloc(c->acc, nc * sizeof *na);
        if (!na) {
            fail(c, a->file, a->line, "out of memory");
            return;
        }
        c->acc = na;
        c->cap_acc = nc;
    }
    c->acc[c->n_acc++] = (access_check){a, path, kind, as_server};
}

static char *abs_path(const char *basedir, const char *p)
{
    if (p[0] == '/' || !basedir) return strdup(p);
    size_t n = strlen(basedir) + strlen(p) + 2;
    char *r = malloc(n);
    if (r) snprintf(r, n, "%s/%s", basedir, p);
    return r;
}

static const char *type_want(key_type t)
{
    switch (t) {
    case KT_INT: return "an integer";
    case KT_BOOL: return "\"enable\" or \"disable\"";
    case KT_BACKENDS:
    case KT_ROOTS: return "an array of strings";
    case KT_STRLIST: return "an array of strings";
    case KT_MIME: return "an array of \".ext\" => \"type\" pairs";
    default: return "a string";
    }
}

static void check_assign(const sl_cblock *b, const sl_cassign *a, void *ud)
{
    prep_ctx *c = ud;
    const key_def *k = key_find(a->key);
    const sl_cval *v = a->val;
    if (!k) {
        fail(c, a->file, a->line, "unknown config key '%s'", a->key);
        return;
    }
    if (k->global_only && b->field != SL_COND_NONE) {
        fail(c, a->file, a->line, "'%s' can only be set at the top level, not inside a condition",
             a->key);
        return;
    }
    bool ok;
    switch (k->type) {
    case KT_INT: ok = v->type == SL_CV_INT; break;
    case KT_BOOL:
        ok = v->type == SL_CV_STRING && (!strcmp(v->str, "enable") || !strcmp(v->str, "disable"));
        break;
    case KT_STRLIST:
    case KT_BACKENDS:
    case KT_ROOTS:
        ok = v->type == SL_CV_ARRAY;
        for (size_t i = 0; ok && i < v->n_items; i++)
            ok = !v->items[i].key && v->items[i].val->type == SL_CV_STRING;
        break;
    case KT_MIME:
        ok = v->type == SL_CV_ARRAY;
        for (size_t i = 0; ok && i < v->n_items; i++)
            ok = v->items[i].key && v->items[i].val->type == SL_CV_STRING;
        break;
    default: ok = v->type == SL_CV_STRING; break;
    }
    if (!ok) {
        fail(c, a->file, a->line, "'%s' must be %s, not %s", a->key, type_want(k->type),
             sl_cval_type_name(v->type));
        return;
    }
    if (k->not_yet) {
        char have[32] = "";
        if (v->type == SL_CV_STRING) snprintf(have, sizeof have, "%s", v->str);
        if (v->type == SL_CV_INT) snprintf(have, sizeof have, "%lld", v->num);
        if (!k->allowed || strcmp(have, k->allowed) != 0) {
            fail(c, a->file, a->line, "'%s': %s in this version of seekless", a->key, k->not_yet);
            return;
        }
    }
    if (!strcmp(a->key, "server.event-handler") && strcmp(v->str, "linux-sysepoll") &&
        strcmp(v->str, "poll")) {
        fail(c, a->file, a->line, "server.event-handler \"%s\" is not supported (use "
             "\"linux-sysepoll\" or \"poll\")", v->str);
        return;
    }
    if (!strcmp(a->key, "server.network-backend") && !sl_netback_find(v->str)) {
        char names[256] = "";
        for (size_t i = 0; sl_netbackends[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"",
                     i ? ", " : "", sl_netbackends[i]->name);
        fail(c, a->file, a->line, "server.network-backend \"%s\" is not compiled into this "
             "seekless (available: %s)", v->str, names);
        return;
    }
    if (!strcmp(a->key, "server.network-backend-block-size") &&
        (v->num < 4096 || v->num > 16 * 1024 * 1024 || v->num % 4096)) {
        fail(c, a->file, a->line, "server.network-backend-block-size must be a multiple of 4096 "
             "between 4096 and 16777216 bytes, not %lld", v->num);
        return;
    }
    if ((!strcmp(a->key, "server.max-read-threads") && (v->num < 1 || v->num > 1024)) ||
        (!strcmp(a->key, "server.max-stat-threads") && v->num > 1024)) {
        fail(c, a->file, a->line, "'%s' %lld is out of range (%s..1024)", a->key, v->num,
             strcmp(a->key, "server.max-read-threads") ? "0" : "1");
        return;
    }
    if (!strcmp(a->key, "proxy-core.protocol") && strcmp(v->str, "fastcgi") &&
        strcmp(v->str, "http")) {
        fail(c, a->file, a->line, "proxy-core.protocol \"%s\" is not supported (use \"fastcgi\" "
             "or \"http\")", v->str);
        return;
    }
    if (!strcmp(a->key, "proxy-core.balancer") && strcmp(v->str, "round-robin") &&
        strcmp(v->str, "sqf") && strcmp(v->str, "static") && strcmp(v->str, "carp")) {
        fail(c, a->file, a->line, "proxy-core.balancer \"%s\" is not supported (use "
             "\"round-robin\", \"sqf\", \"static\" or \"carp\")", v->str);
        return;
    }
    if (!strcmp(a->key, "proxy-core.max-pool-size") && v->num < 1) {
        fail(c, a->file, a->line, "proxy-core.max-pool-size must be at least 1");
        return;
    }
    if (!strcmp(a->key, "accesslog.format")) {
        sl_accesslog_fmt *f;
        char e[300];
        if (sl_accesslog_compile(v->str, &f, e, sizeof e) < 0) {
            fail(c, a->file, a->line, "%s", e);
            return;
        }
        sl_accesslog_fmt_free(f);
        /* The formatter can print response headers, but the server does not keep them once
         * they are sent: refuse rather than log "-" forever. */
        for (const char *q = strstr(v->str, "%{"); q; q = strstr(q + 2, "%{")) {
            const char *e2 = strchr(q, '}');
            if (e2 && e2[1] == 'o') {
                fail(c, a->file, a->line, "access log format: %%{...}o (response headers) is not "
                     "supported by seekless");
                return;
            }
        }
    }
    if (!strcmp(a->key, "status.status-url") && v->str[0] != '/') {
        fail(c, a->file, a->line, "status.status-url must start with '/'");
        return;
    }
    if (!strcmp(a->key, "status.allow-networks")) {
        for (size_t i = 0; i < v->n_items; i++) {
            unsigned char net[16];
            int fam, bits;
            if (sl_cidr_parse(v->items[i].val->str, net, &fam, &bits) < 0) {
                fail(c, a->file, a->line, "status.allow-networks: \"%s\" is not a network "
                     "(want \"ip/bits\" or \"ip\")", v->items[i].val->str);
                return;
            }
        }
    }
    if (k->type == KT_INT && v->num < 0) {
        fail(c, a->file, a->line, "'%s' must not be negative", a->key);
        return;
    }
    if (!strcmp(a->key, "server.port") && (v->num < 1 || v->num > 65535)) {
        fail(c, a->file, a->line, "server.port %lld is out of range", v->num);
        return;
    }
    /* The parser shares value objects (a variable used twice is one value), so a value may
     * come back here under another key: prepare what this key needs that is still missing. */
    prepared *p = (prepared *)prep_find(v);
    if (p && !(k->type == KT_DOCROOT && p->fd < 0)) goto record;
    switch (k->type) {
    case KT_PATH:
    case KT_DOCROOT:
        if (!p && (!(p = prep_add(v)) || !(p->path = abs_path(c->basedir, v->str)))) goto nomem;
        if (k->type == KT_DOCROOT) {
            p->fd = open(p->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (p->fd < 0)
                fail(c, a->file, a->line, "server.document-root \"%s\": %s", p->path,
                     strerror(errno));
        }
        break;
    case KT_STRLIST:
        if (!(p = prep_add(v))) goto nomem;
        p->n = v->n_items;
        if (!(p->list = calloc(v->n_items + 1, sizeof *p->list))) goto nomem;
        for (size_t i = 0; i < v->n_items; i++) p->list[i] = v->items[i].val->str;
        break;
    case KT_BACKENDS: {
        if (!(p = prep_add(v))) goto nomem;
        if (!(p->fds = calloc(1, sizeof *p->fds))) goto nomem; /* marks owned strings */
        p->fds[0] = -1;
        size_t cap = 0;
        for (size_t i = 0; i < v->n_items; i++) {
            char addrs[16][128];
            int n = sl_backend_expand(v->items[i].val->str, addrs, 16);
            if (n < 0) {
                fail(c, a->file, a->line, "proxy-core.backends: \"%s\": %s", v->items[i].val->str,
                     n == -ENAMETOOLONG ? "unix socket path too long"
                     : n == -EHOSTUNREACH ? "cannot resolve the host name"
                                          : "not \"host:port\", \"[ipv6]:port\" or \"unix:/path\"");
                return;
            }
            for (int j = 0; j < n; j++) {
                if (p->n + 1 >= cap) {
                    cap = cap ? cap * 2 : 8;
                    const char **nl = realloc(p->list, (cap + 1) * sizeof *nl);
                    int *nf = realloc(p->fds, (cap + 1) * sizeof *nf);
                    if (nl) p->list = nl;
                    if (nf) p->fds = nf;
                    if (!nl || !nf) goto nomem;
                }
                if (!(p->list[p->n] = strdup(addrs[j]))) goto nomem;
                p->fds[p->n++] = -1;
                p->list[p->n] = NULL;
            }
        }
        if (p->n == 0) {
            fail(c, a->file, a->line, "proxy-core.backends is empty");
            return;
        }
        break;
    }
    case KT_ROOTS:
        if (!(p = prep_add(v))) goto nomem;
        p->list = calloc(v->n_items + 1, sizeof *p->list);
        p->fds = calloc(v->n_items + 1, sizeof *p->fds);
        if (!p->list || !p->fds) goto nomem;
        for (size_t i = 0; i < v->n_items; i++) {
            char *r = abs_path(c->basedir, v->items[i].val->str);
            if (!r) goto nomem;
            size_t L = strlen(r);
            while (L > 1 && r[L - 1] == '/') r[--L] = 0; /* the prefix match adds the slash */
            p->list[i] = r;
            p->fds[i] = open(r, O_PATH | O_DIRECTORY | O_CLOEXEC);
            p->n = i + 1;
            if (p->fds[i] < 0) {
                fail(c, a->file, a->line, "proxy-core.x-sendfile-docroot \"%s\": %s", r,
                     strerror(errno));
                return;
            }
        }
        break;
    case KT_MIME: {
        if (!(p = prep_add(v))) goto nomem;
        const char **sfx = calloc(v->n_items + 1, sizeof *sfx);
        const char **typ = calloc(v->n_items + 1, sizeof *typ);
        if (sfx && typ) {
            for (size_t i = 0; i < v->n_items; i++) {
                sfx[i] = v->items[i].key;
                typ[i] = v->items[i].val->str;
            }
            p->mime = sl_mime_table_new(sfx, typ, v->n_items);
        }
        free(sfx);
        free(typ);
        if (!p->mime) goto nomem;
        break;
    }
    default: break;
    }
record:
    /* What start-up opens, checked as the user who opens it once the walk is over. */
    if (k->type == KT_DOCROOT && p && p->fd >= 0) want_access(c, a, p->path, ACC_SEARCH_DIR, true);
    if (k->type == KT_ROOTS && p)
        for (size_t i = 0; i < p->n; i++)
            if (p->fds[i] >= 0) want_access(c, a, p->list[i], ACC_SEARCH_DIR, true);
    /* The error log and the pid file are opened before privileges are dropped, the access log
     * and the timing file after. */
    if (k->type == KT_PATH && p)
        want_access(c, a, p->path, ACC_APPEND_FILE,
                    strcmp(a->key, "server.errorlog") && strcmp(a->key, "server.pid-file"));
    if (b->field == SL_COND_NONE) {
        if (!strcmp(a->key, "server.username")) c->username = a;
        if (!strcmp(a->key, "server.groupname")) c->groupname = a;
        if (!strcmp(a->key, "server.bind")) c->bind = a;
        if (!strcmp(a->key, "server.port")) c->port = a;
    }
    return;
nomem:
    fail(c, a->file, a->line, "out of memory");
}

static void check_block(const sl_cblock *b, void *ud)
{
    prep_ctx *c = ud;
    if (b->field != SL_COND_SOCKET) return;
    char canon[128];
    int r = sl_socket_canonical(b->pattern, canon, sizeof canon);
    if (r < 0) {
        fail(c, b->file, b->line, "$SERVER[\"socket\"] \"%s\": %s", b->pattern,
             r == -EINVAL ? "not a socket address (want \":port\", \"ip:port\" or \"[ip6]:port\")"
                          : "cannot resolve");
        return;
    }
    if (strlen(b->pattern) >= sizeof c->listen[0].literal) {
        fail(c, b->file, b->line, "$SERVER[\"socket\"] value too long");
        return;
    }
    for (size_t i = 1; i < c->n_listen; i++) {
        if (!strcmp(c->listen[i].canon, canon)) {
            if (strcmp(c->listen[i].literal, b->pattern))
                fail(c, b->file, b->line,
                     "$SERVER[\"socket\"] \"%s\" names the same socket as \"%s\"; write it one way",
                     b->pattern, c->listen[i].literal);
            return;
        }
    }
    if (c->n_listen == SL_MAX_LISTENERS) {
        fail(c, b->file, b->line, "too many distinct $SERVER[\"socket\"] values");
        return;
    }
    snprintf(c->listen[c->n_listen].canon, sizeof c->listen[0].canon, "%s", canon);
    snprintf(c->listen[c->n_listen].literal, sizeof c->listen[0].literal, "%s", b->pattern);
    c->n_listen++;
}

static void apply_cb(const sl_cassign *a, void *ud)
{
    const key_def *k = key_find(a->key);
    if (k) apply_value(ud, k, a->val);
}

int sl_switch_user(const char *uname, uid_t uid, gid_t gid)
{
    if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || (uname && initgroups(uname, gid) < 0) ||
        (uid != (uid_t)-1 && setuid(uid) < 0))
        return -errno;
    return 0;
}

/* One access check, by the calling process's effective ids: 0 or an errno; *creating tells
 * whether a file that does not exist yet was judged by its directory. */
static int access_one(const access_check *k, bool *creating)
{
    *creating = false;
    if (k->kind == ACC_SEARCH_DIR)
        return faccessat(AT_FDCWD, k->path, X_OK, AT_EACCESS) < 0 ? errno : 0;
    struct stat st;
    if (stat(k->path, &st) == 0)
        return S_ISDIR(st.st_mode) ? EISDIR
               : faccessat(AT_FDCWD, k->path, W_OK, AT_EACCESS) < 0 ? errno : 0;
    if (errno != ENOENT) return errno;
    *creating = true;
    char *dir = strdup(k->path);
    if (!dir) return ENOMEM;
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    int r = faccessat(AT_FDCWD, slash ? dir : ".", W_OK | X_OK, AT_EACCESS) < 0 ? errno : 0;
    free(dir);
    return r;
}

/* The server user's checks, run on a thread of their own that takes the server's credentials. */
typedef struct as_user_job {
    const struct passwd *pw;
    gid_t gid;
    const access_check *v;
    size_t n;
    int *res;
    bool ok;
} as_user_job;

static void *access_as_user_thread(void *arg)
{
    as_user_job *j = arg;
    /* The groups initgroups() would give, as start-up's switch does. */
    int ng = 64;
    gid_t *groups = malloc((size_t)ng * sizeof *groups);
    if (groups && getgrouplist(j->pw->pw_name, j->gid, groups, &ng) < 0) {
        gid_t *more = realloc(groups, (size_t)ng * sizeof *groups);
        groups = more ? more : groups;
        if (!more || getgrouplist(j->pw->pw_name, j->gid, groups, &ng) < 0) ng = -1;
    }
    /* Raw system calls on purpose: on Linux credentials belong to a thread, and only glibc's
     * wrappers make every thread of the process follow. So this thread alone becomes the server's
     * user (uid, gid and groups, as sl_switch_user makes the process), the kernel judges the
     * checks exactly as it will judge the server, and the credentials die with the thread. */
    if (groups && ng >= 0 && syscall(SYS_setgroups, (size_t)ng, groups) == 0 &&
        syscall(SYS_setresgid, j->gid, j->gid, j->gid) == 0 &&
        syscall(SYS_setresuid, j->pw->pw_uid, j->pw->pw_uid, j->pw->pw_uid) == 0) {
        for (size_t i = 0; i < j->n; i++) {
            bool creating;
            j->res[i] = access_one(&j->v[i], &creating) << 1 | creating;
        }
        j->ok = true;
    }
    free(groups);
    return NULL;
}

/* res[i] = errno << 1 | creating for each check, judged as pw with group gid. 0, or -1 when they
 * could not be judged (then res is untouched). */
static int access_as_user(const struct passwd *pw, gid_t gid, const access_check *v, size_t n,
                          int *res)
{
    as_user_job j = {pw, gid, v, n, res, false};
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay the main thread's */
    int e = pthread_create(&th, NULL, access_as_user_thread, &j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) return -1;
    pthread_join(th, NULL);
    return j.ok ? 0 : -1;
}

/* What start-up would refuse beyond single values: a user or group that does not exist, and a
 * document root, log directory or pid-file directory its user cannot use. Files opened after
 * privileges are dropped are judged as server.username; when that needs root and we are not
 * root, they are left to start-up (which then refuses anyway: switching user needs root). */
static void check_environment(prep_ctx *c)
{
    const struct passwd *pw = NULL;
    gid_t gid = 0;
    bool user_ok = true;
    if (c->username) {
        const sl_cassign *a = c->username;
        if (!(pw = getpwnam(a->val->str))) {
            fail(c, a->file, a->line, "server.username \"%s\": no such user", a->val->str);
            user_ok = false;
        } else {
            gid = pw->pw_gid;
        }
    }
    if (c->groupname) {
        const sl_cassign *a = c->groupname;
        const struct group *g = getgrnam(a->val->str);
        if (!g) {
            fail(c, a->file, a->line, "server.groupname \"%s\": no such group", a->val->str);
            user_ok = false;
        } else {
            gid = g->gr_gid;
        }
    }
    bool switching = pw && user_ok && pw->pw_uid != 0 && geteuid() == 0;
    bool cannot_judge = (c->username || c->groupname) && geteuid() != 0;
    int *res = calloc(c->n_acc + 1, sizeof *res);
    access_check *mine = calloc(c->n_acc + 1, sizeof *mine);
    size_t n_mine = 0;
    if (!res || !mine) {
        fail(c, c->tree->root->file, 0, "out of memory");
        free(res);
        free(mine);
        return;
    }
    for (size_t i = 0; i < c->n_acc; i++) {
        if (c->acc[i].as_server && switching) {
            mine[n_mine++] = c->acc[i];
            continue;
        }
        bool creating;
        int e = access_one(&c->acc[i], &creating);
        /* Without the server's user to judge by, only what no user could do is an error. */
        if (c->acc[i].as_server && (cannot_judge || !user_ok) && e != ENOENT && e != ENOTDIR &&
            e != EISDIR)
            e = 0;
        res[i] = e << 1 | creating;
    }
    /* The server user's checks, run on one thread, then put back in file order. */
    int *theirs = calloc(n_mine + 1, sizeof *theirs);
    if (n_mine && theirs && access_as_user(pw, gid, mine, n_mine, theirs) == 0)
        for (size_t i = 0, j = 0; i < c->n_acc; i++)
            if (c->acc[i].as_server && switching) res[i] = theirs[j++];
    for (size_t i = 0; i < c->n_acc; i++) {
        const access_check *k = &c->acc[i];
        int e = res[i] >> 1;
        if (!e) continue;
        char who[300] = "";
        if (k->as_server && switching) snprintf(who, sizeof who, " by user \"%s\"", pw->pw_name);
        if (k->kind == ACC_SEARCH_DIR) {
            fail(c, k->a->file, k->a->line, "%s \"%s\": cannot be entered%s: %s", k->a->key,
                 k->path, who, strerror(e));
        } else if (res[i] & 1) {
            const char *slash = strrchr(k->path, '/');
            int dl = !slash ? 1 : slash == k->path ? 1 : (int)(slash - k->path);
            fail(c, k->a->file, k->a->line, "%s \"%s\": cannot be created in %.*s%s: %s",
                 k->a->key, k->path, dl, slash ? k->path : ".", who, strerror(e));
        } else {
            fail(c, k->a->file, k->a->line, "%s \"%s\": cannot be written%s: %s", k->a->key,
                 k->path, who, strerror(e));
        }
    }
    free(theirs);
    free(mine);
    free(res);
}

int sl_settings_prepare(sl_config_tree *t, const char *basedir, sl_settings *global,
                        sl_listen_spec *listen, size_t *n_listen, sl_config_errors *errs)
{
    prep_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        sl_config_error_add(errs, t->root->file, 0, "out of memory");
        return -1;
    }
    c->basedir = basedir;
    c->errs = errs;
    c->global = global;
    c->tree = t;
    c->listen = listen;
    c->n_listen = 1;
    sl_config_walk(t, check_assign, check_block, c);
    for (size_t i = 0; i < t->root->n_assigns; i++)
        if (!strcmp(t->root->assigns[i].key, "server.document-root")) c->docroot = &t->root->assigns[i];
    /* Not set at all (a partial tree may have lost the assignment to a syntax error: that error
     * was reported, this would only echo it). */
    if (!c->docroot && !t->partial)
        fail(c, t->root->file, 0, "server.document-root is not set");
    /* The default socket; when a condition names the same address, the listener takes the
     * condition's spelling so that the condition matches it. */
    char spec[300], canon[128];
    const char *b = c->bind ? c->bind->val->str : "0.0.0.0";
    long port = c->port ? (long)c->port->val->num : 80;
    snprintf(spec, sizeof spec, strchr(b, ':') && b[0] != '[' ? "[%s]:%ld" : "%s:%ld", b, port);
    if (sl_socket_canonical(spec, canon, sizeof canon) < 0) {
        const sl_cassign *a = c->bind ? c->bind : c->port;
        fail(c, a ? a->file : t->root->file, a ? a->line : 0,
             "server.bind \"%s\" / server.port %ld: not a usable address", b, port);
    }
    check_environment(c);
    flush_errors(c);
    int n_err = c->n_err;
    size_t nl = c->n_listen;
    free(c->acc);
    free(c);
    if (n_err || t->partial) return -1;
    /* Global settings are the top-level block's own assignments; conditions are per request. */
    sl_settings_defaults(global);
    for (size_t i = 0; i < t->root->n_assigns; i++) apply_cb(&t->root->assigns[i], global);
    snprintf(listen[0].canon, sizeof listen[0].canon, "%s", canon);
    snprintf(listen[0].literal, sizeof listen[0].literal, "%s", canon);
    for (size_t i = 1; i < nl; i++) {
        if (!strcmp(listen[i].canon, canon)) {
            listen[0] = listen[i];
            listen[i] = listen[--nl];
            break;
        }
    }
    *n_listen = nl;
    return 0;
}

void sl_settings_for_request(const sl_config_tree *t, const sl_settings *global,
                             const sl_cond_input *in, sl_settings *out)
{
    *out = *global;
    /* Without conditions the global settings are final; skip the walk. */
    if (t->root->n_children) sl_config_eval(t, in, apply_cb, out);
}

int sl_cidr_parse(const char *s, unsigned char net[16], int *family, int *bits)
{
    char ip[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n >= sizeof ip) return -EINVAL;
    memcpy(ip, s, n);
    ip[n] = 0;
    memset(net, 0, 16);
    if (inet_pton(AF_INET, ip, net) == 1)
        *family = AF_INET;
    else if (inet_pton(AF_INET6, ip, net) == 1)
        *family = AF_INET6;
    else
        return -EINVAL;
    int max = *family == AF_INET ? 32 : 128;
    *bits = max;
    if (slash) {
        char *end;
        long b = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || b < 0 || b > max) return -EINVAL;
        *bits = (int)b;
    }
    return 0;
}

bool sl_cidr_match(const char *cidr, const struct sockaddr *sa)
{
    unsigned char net[16], addr[16];
    int fam, bits;
    if (sl_cidr_parse(cidr, net, &fam, &bits) < 0) return false;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (fam == AF_INET && IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(addr, a6->s6_addr + 12, 4);
        } else {
            if (fam != AF_INET6) return false;
            memcpy(addr, a6->s6_addr, 16);
        }
    } else if (sa->sa_family == AF_INET) {
        if (fam != AF_INET) return false;
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else {
        return false;
    }
    for (int i = 0; i < bits; i++) {
        int byte = i / 8, bit = 7 - i % 8;
        if (((addr[byte] >> bit) & 1) != ((net[byte] >> bit) & 1)) return false;
    }
    return true;
}

/* Split "host:port" or "[ipv6]:port" into host (may come out empty: ":80") and a port number
 * 1..65535 whose digits *port points at. 0 or -EINVAL. */
static int split_host_port(const char *spec, char host[256], const char **port, long *pn)
{
    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');
        if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= 256) return -EINVAL;
        memcpy(host, spec + 1, (size_t)(end - spec - 1));
        host[end - spec - 1] = 0;
        *port = end + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= 256) return -EINVAL;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = 0;
        if (strchr(host, ':')) return -EINVAL; /* IPv6 without brackets */
        *port = colon + 1;
    }
    char *endp;
    *pn = strtol(*port, &endp, 10);
    if (!**port || *endp || *pn < 1 || *pn > 65535) return -EINVAL;
    return 0;
}

int sl_backend_expand(const char *spec, char (*out)[128], int max)
{
    if (!strncmp(spec, "unix:", 5)) {
        const char *path = spec + 5;
        struct sockaddr_un un;
        if (path[0] != '/') return -EINVAL;
        if (strlen(path) >= sizeof un.sun_path) return -ENAMETOOLONG;
        snprintf(out[0], 128, "unix:%s", path);
        return 1;
    }
    char host[256];
    const char *port;
    long pn;
    if (split_host_port(spec, host, &port, &pn) < 0 || !host[0]) return -EINVAL;
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -EHOSTUNREACH;
    int n = 0;
    for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
        char ip[INET6_ADDRSTRLEN], one[128];
        if (ai->ai_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
            snprintf(one, sizeof one, "%s:%ld", ip, pn);
        } else if (ai->ai_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
            snprintf(one, sizeof one, "[%s]:%ld", ip, pn);
        } else {
            continue;
        }
        bool dup = false; /* getaddrinfo repeats an address once per socket type it knows */
        for (int i = 0; i < n; i++) dup |= !strcmp(out[i], one);
        if (!dup) snprintf(out[n++], 128, "%s", one);
    }
    freeaddrinfo(res);
    return n ? n : -EHOSTUNREACH;
}

int sl_socket_canonical(const char *spec, char *out, size_t outlen)
{
    char host[256];
    const char *port;
    long pn;
    if (split_host_port(spec, host, &port, &pn) < 0) return -EINVAL;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &res) != 0) return -EHOSTUNREACH;
    /* A passive look-up of "" yields both wildcards; lighttpd's ":port" means IPv4 any. */
    struct addrinfo *ai = res;
    if (!host[0])
        for (struct addrinfo *i = res; i; i = i->ai_next)
            if (i->ai_family == AF_INET) ai = i;
    char ip[INET6_ADDRSTRLEN];
    int r = 0;
    if (ai->ai_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
        r = snprintf(out, outlen, "%s:%ld", ip, pn);
    } else {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
        r = snprintf(out, outlen, "[%s]:%ld", ip, pn);
    }
    freeaddrinfo(res);
    return r < 0 || (size_t)r >= outlen ? -ENAMETOOLONG : 0;
}

void sl_settings_print_features(void)
{
    for (size_t i = 0; sl_netbackends[i]; i++)
        printf("network-backend: %s%s\n", sl_netbackends[i]->name, i == 0 ? " (default)" : "");
    const char **m = event_get_supported_methods();
    for (size_t i = 0; m && m[i]; i++) {
        if (!strcmp(m[i], "epoll")) printf("event-handler: linux-sysepoll\n");
        if (!strcmp(m[i], "poll")) printf("event-handler: poll\n");
    }
    char pv[32] = "";
    pcre2_config(PCRE2_CONFIG_VERSION, pv);
    printf("regex-conditions: pcre2 %s\n", pv);
    printf("libevent: %s\n", event_get_version());
}
