/* The core's keys: the server.* settings and mimetype.assign.
 *
 * Declared in one table like any module's; values that need work at start-up (the document root
 * opened as a directory, the mime table built) are made by their prepare() once, and requests
 * read a pointer. lighttpd's defaults where lighttpd has one.
 */
#include "core_conf.h"

#include "sl_version.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "addr.h"
#include "errpages.h"
#include "netback.h"
#include "user.h"

#define SL_KEY_CONF sl_core_conf

/* server.tag goes into every response head as it is: no line break may split it. */
static int prep_tag(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (!strpbrk(v->str, "\r\n")) return 0;
    snprintf(ctx->err, ctx->errlen, "server.tag must not contain a line break");
    return -1;
}

/* server.errorfile-prefix: the pages are read here, at load (errpages.c says why). A relative
 * prefix is relative to the config file's directory, like every path seekless takes. */
static int prep_errorfile(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char buf[4096];
    const char *prefix = v->str;
    if (!prefix[0]) return sl_key_fail(ctx, "server.errorfile-prefix is empty");
    if (prefix[0] != '/') {
        if ((size_t)snprintf(buf, sizeof buf, "%s/%s", ctx->basedir, prefix) >= sizeof buf)
            return sl_key_fail(ctx, "server.errorfile-prefix: path too long");
        prefix = buf;
    }
    char e[512];
    sl_errpages *pages;
    if (sl_errpages_load(prefix, &pages, e, sizeof e) < 0)
        return sl_key_fail(ctx, "server.errorfile-prefix: %s", e);
    *out = pages;
    return 0;
}

static void errorfile_release(void *p)
{
    sl_errpages_free(p);
}

/* server.error-handler(-404) is a URL path the request starts over with, as a rewrite would. */
static int prep_error_handler(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    const char *s = v->str;
    if (s[0] == '/' && !strpbrk(s, " \t\r\n")) return 0;
    snprintf(ctx->err, ctx->errlen, "%s must be a URL path starting with \"/\" (got \"%s\")",
             ctx->assign->key, s);
    return -1;
}

/* server.name stands for the host in SERVER_NAME and the access log: one token, no spaces. */
static int prep_name(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->str[0] && !strpbrk(v->str, " \t\r\n/")) return 0;
    snprintf(ctx->err, ctx->errlen, "server.name \"%s\" is not a host name", v->str);
    return -1;
}

/* Fewer descriptors than this leave no room for the listening sockets, logs and a connection. */
#define MIN_FDS 64

static int prep_max_fds(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->num >= MIN_FDS && v->num <= 1L << 30) return 0;
    snprintf(ctx->err, ctx->errlen, "server.max-fds %lld: must be from %d to %ld", (long long)v->num, MIN_FDS,
             1L << 30);
    return -1;
}

int sl_fd_limit_plan(long want, unsigned long long cur, unsigned long long max, int root,
                     unsigned long long *new_cur, unsigned long long *new_max)
{
    (void)cur;
    if (want <= 0) {
        *new_cur = *new_max = max;
        return 0;
    }
    if ((unsigned long long)want > max && !root) return -EPERM;
    *new_cur = (unsigned long long)want;
    *new_max = (unsigned long long)want > max ? (unsigned long long)want : max;
    return 0;
}

int sl_fd_limit_apply(long want, char *err, size_t errlen)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        if (!want) return 0;
        snprintf(err, errlen, "server.max-fds: getrlimit: %s", strerror(errno));
        return -1;
    }
    unsigned long long nc, nm;
    if (sl_fd_limit_plan(want, rl.rlim_cur, rl.rlim_max, geteuid() == 0, &nc, &nm) < 0) {
        snprintf(err, errlen, "server.max-fds %ld is above the hard limit of open files (%llu) "
                 "and only root may raise that (systemd: LimitNOFILE=, shell: ulimit -Hn)",
                 want, (unsigned long long)rl.rlim_max);
        return -1;
    }
    if (nc == rl.rlim_cur && nm == rl.rlim_max) return 0;
    rl.rlim_cur = (rlim_t)nc;
    rl.rlim_max = (rlim_t)nm;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        if (!want) return 0; /* raising to the hard limit is a courtesy */
        snprintf(err, errlen, "server.max-fds %ld: setrlimit(RLIMIT_NOFILE): %s%s", want,
                 strerror(errno), errno == EPERM ? " (raising the hard limit needs CAP_SYS_RESOURCE, and at most fs.nr_open)" : "");
        return -1;
    }
    return 0;
}

static void core_defaults(void *p)
{
    sl_core_conf *s = p;
    s->bind = NULL; /* all IPv4 addresses */
    s->port = 80;
    s->max_connections = 1024;
    s->workers = 0; /* one loop per core */
    s->reuse_port = true;
    s->cpu_affinity = "disable";
    s->event_handler = "linux-sysepoll";
    s->network_backend = SL_NETBACK_DEFAULT;
    /* 32 of each, as nginx's default thread pool: on a virtio disk 4 stat and 16 read threads
     * kept about 5 reads at the disk where 32 kept 19 (bench/results/2026-11-29-cold-100k-queue/). */
    s->max_read_threads = 32;
    s->max_stat_threads = 32;
    s->block_size = 512 * 1024;
    s->graceful_shutdown_timeout = 30;
    s->stat_cache_engine = "inotify";
    s->max_keep_alive_requests = 1000;
    s->max_keep_alive_idle = 5;
    s->max_read_idle = 60;
    s->max_write_idle = 360;
    s->max_request_size = 2 * 1024 * 1024; /* KiB: 2 GiB */
    s->max_request_field_size = 8192;
    s->range_requests = true;
    s->follow_symlink = true;
    s->mime = sl_mime_default();
    s->server_tag = "seekless/" SL_VERSION;
}

static void dir_release(void *p)
{
    sl_dir *d = p;
    if (d->fd >= 0) close(d->fd);
    free(d->path);
    free(d);
}

static int prep_docroot(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    sl_dir *d = calloc(1, sizeof *d);
    if (!d) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    d->path = sl_key_abs_path(ctx, v->str);
    d->fd = d->path ? sl_key_open_dir(ctx, d->path) : -1; /* inside server.chroot */
    if (d->fd < 0) {
        snprintf(ctx->err, ctx->errlen, "server.document-root \"%s\": %s",
                 d->path ? d->path : v->str, d->path ? strerror(errno) : "out of memory");
        dir_release(d);
        return -1;
    }
    sl_key_access(ctx, d->path, SL_ACCESS_SEARCH_DIR, true); /* entered as server.username */
    *out = d;
    return 0;
}

/* server.chroot: an absolute directory; "" and "/" are none, as in lighttpd. */
static int prep_chroot(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (!v->str[0] || !strcmp(v->str, "/")) return 0;
    if (v->str[0] != '/')
        return sl_key_fail(ctx, "server.chroot \"%s\" must be an absolute path", v->str);
    if (ctx->check_system) {
        int fd = open(v->str, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return sl_key_fail(ctx, "server.chroot \"%s\": %s", v->str, strerror(errno));
        close(fd);
    }
    return 0;
}

static int prep_mime(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!sl_cval_strings(v, true))
        return sl_key_fail(ctx, "'mimetype.assign' must be an array of \".ext\" => \"type\" pairs");
    const char **sfx = calloc(v->n_items + 1, sizeof *sfx);
    const char **typ = calloc(v->n_items + 1, sizeof *typ);
    sl_mime_table *t = NULL;
    if (sfx && typ) {
        for (size_t i = 0; i < v->n_items; i++) {
            sfx[i] = v->items[i].key;
            typ[i] = v->items[i].val->str;
        }
        t = sl_mime_table_new(sfx, typ, v->n_items);
    }
    free(sfx);
    free(typ);
    if (!t) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *out = t;
    return 0;
}

static void mime_release(void *p)
{
    sl_mime_table_free(p);
}

static int prep_event_handler(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!strcmp(v->str, "linux-sysepoll")) return 0;
    if (!strcmp(v->str, "poll") || !strcmp(v->str, "select"))
        return sl_key_fail(ctx,
                           "server.event-handler \"%s\" is not supported: seekless registers each "
                           "connection once, edge-triggered, which only epoll can do (use "
                           "\"linux-sysepoll\", the default)", v->str);
    static const char *const ok[] = {"linux-sysepoll", NULL};
    return sl_key_choice("server.event-handler", v, ctx, ok);
}

static int prep_network_backend(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (sl_netback_find(v->str)) return 0;
    char names[256] = "";
    for (size_t i = 0; sl_netbackends[i]; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"", i ? ", " : "",
                 sl_netbackends[i]->name);
    snprintf(ctx->err, ctx->errlen,
             "server.network-backend \"%s\" is not compiled into this seekless (available: %s)",
             v->str, names);
    return -1;
}

static int prep_block_size(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->num >= 4096 && v->num <= 16 * 1024 * 1024 && v->num % 4096 == 0) return 0;
    snprintf(ctx->err, ctx->errlen,
             "server.network-backend-block-size must be a multiple of 4096 between 4096 and "
             "16777216 bytes, not %lld",
             v->num);
    return -1;
}

static int prep_read_threads(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return sl_key_range("server.max-read-threads", v, ctx, 1, 1024);
}

static int prep_stat_threads(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return sl_key_range("server.max-stat-threads", v, ctx, 0, 1024);
}

static int prep_cpu_affinity(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const char *const ok[] = {"auto", "disable", NULL};
    return sl_key_choice("server.worker-cpu-affinity", v, ctx, ok);
}

static int prep_stat_cache(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!strcmp(v->str, "fam")) {
        snprintf(ctx->err, ctx->errlen,
                 "server.stat-cache-engine \"fam\" is not supported: seekless watches files "
                 "with inotify (use \"inotify\", the default, \"simple\" or \"disable\")");
        return -1;
    }
    static const char *const ok[] = {"inotify", "simple", "disable", NULL};
    return sl_key_choice("server.stat-cache-engine", v, ctx, ok);
}

/* server.http-parseopts: lighttpd 1.4's switches for how strictly a request is read and how its
 * URL is normalized. seekless reads requests one way (see "HTTP behaviour" in the README): a
 * switch set the way seekless behaves is accepted, one set the other way is refused with what
 * seekless does instead, and a switch it does not know is refused by name. */
static int prep_http_parseopts(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const struct {
        const char *name;
        bool on;             /* what seekless does */
        const char *does;    /* said when a config asks for the other */
    } opts[] = {
        {"header-strict", true, "refuses control characters, obs-fold and whitespace before ':' in "
                                "header fields (RFC 9112)"},
        {"host-strict", true, "refuses a Host that is not a valid name or IP literal"},
        {"host-normalize", true, "normalizes the Host before conditions see it (lower case, one "
                                 "trailing dot and the default port removed)"},
        {"url-normalize", true, "decodes and normalizes the path before conditions and file "
                                "lookups see it"},
        {"url-normalize-unreserved", true, "decodes every %-escape in the path before matching"},
        {"url-normalize-required", true, "decodes every %-escape in the path before matching"},
        {"url-ctrls-reject", true, "refuses control characters in the request target"},
        {"url-path-2f-decode", true, "decodes %2F in the path and treats it as a '/'"},
        {"url-path-2f-reject", false, "decodes %2F in the path (url-path-2f-decode) instead of "
                                      "refusing it"},
        {"url-path-dotseg-remove", true, "removes '.' and '..' segments from the path"},
        {"url-path-dotseg-reject", false, "removes '.' and '..' segments "
                                          "(url-path-dotseg-remove) instead of refusing them"},
        {"url-path-backslash-trans", false, "keeps a '\\' in the path as a character"},
        {"url-query-20-plus", false, "passes the query string on as the client sent it"},
    };
    (void)out;
    if (v->type != SL_CV_ARRAY) {
        snprintf(ctx->err, ctx->errlen,
                 "server.http-parseopts must be an array of \"option\" => \"enable\" / \"disable\"");
        return -1;
    }
    for (size_t i = 0; i < v->n_items; i++) {
        const sl_cval_item *it = &v->items[i];
        const sl_cval *x = it->val;
        int want = -1;
        if (x->type == SL_CV_STRING && !strcmp(x->str, "enable")) want = 1;
        if (x->type == SL_CV_STRING && !strcmp(x->str, "disable")) want = 0;
        if (x->type == SL_CV_INT && (x->num == 0 || x->num == 1)) want = (int)x->num;
        if (!it->key || want < 0) {
            snprintf(ctx->err, ctx->errlen,
                     "server.http-parseopts: each entry is \"option\" => \"enable\" or \"disable\"%s%s%s",
                     it->key ? " (\"" : "", it->key ? it->key : "", it->key ? "\" is not)" : "");
            return -1;
        }
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && strcmp(opts[k].name, it->key)) k++;
        if (k == sizeof opts / sizeof opts[0])
            return sl_key_fail(ctx, "server.http-parseopts: unknown option \"%s\"", it->key);
        if (want != opts[k].on) {
            snprintf(ctx->err, ctx->errlen,
                     "server.http-parseopts \"%s\" => \"%s\" is not supported: seekless always %s",
                     it->key, want ? "enable" : "disable", opts[k].does);
            return -1;
        }
    }
    return 0;
}

/* server.feature-flags: lighttpd 1.4's switches for features. Those seekless has are applied,
 * those set to what seekless does anyway are accepted, and any other is refused by name with the
 * reason (a feature asked for must not be silently missing). */
static int prep_feature_flags(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const struct {
        const char *name;
        const char *missing; /* why "enable" is refused */
    } off_only[] = {
        {"server.graceful-restart-bg", "seekless has no graceful restart in the background"},
    };
    if (v->type != SL_CV_ARRAY)
        return sl_key_fail(ctx, "server.feature-flags must be an array of \"flag\" => value");
    sl_feature_flags *ff = malloc(sizeof *ff);
    if (!ff) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    ff->graceful_shutdown_timeout = -1;
    ff->h2proto = ff->h2c = false;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *k = v->items[i].key;
        const sl_cval *x = v->items[i].val;
        if (!k) {
            snprintf(ctx->err, ctx->errlen, "server.feature-flags: each entry is \"flag\" => value");
            goto bad;
        }
        if (!strcmp(k, "server.graceful-shutdown-timeout")) {
            if (x->type != SL_CV_INT || x->num < 0 || x->num > 86400) {
                snprintf(ctx->err, ctx->errlen, "server.feature-flags \"%s\" must be seconds "
                         "between 0 and 86400", k);
                goto bad;
            }
            ff->graceful_shutdown_timeout = (long)x->num;
            continue;
        }
        bool *h2 = !strcmp(k, "server.h2proto") ? &ff->h2proto
                   : !strcmp(k, "server.h2c")   ? &ff->h2c
                                                : NULL;
        size_t j = 0;
        while (!h2 && j < sizeof off_only / sizeof off_only[0] && strcmp(off_only[j].name, k)) j++;
        if (!h2 && j == sizeof off_only / sizeof off_only[0]) {
            snprintf(ctx->err, ctx->errlen, "server.feature-flags: \"%s\" is not a flag seekless "
                     "has (it has \"server.graceful-shutdown-timeout\", \"server.h2proto\", "
                     "\"server.h2c\"; \"server.graceful-restart-bg\" only as \"disable\")", k);
            goto bad;
        }
        bool disable = (x->type == SL_CV_STRING && !strcmp(x->str, "disable")) ||
                       (x->type == SL_CV_INT && x->num == 0);
        bool enable = (x->type == SL_CV_STRING && !strcmp(x->str, "enable")) ||
                      (x->type == SL_CV_INT && x->num == 1);
        if (h2 && (enable || disable)) {
            *h2 = enable;
            continue;
        }
        if (enable && !h2) {
            snprintf(ctx->err, ctx->errlen, "server.feature-flags \"%s\" => \"enable\" is not "
                     "supported: %s", k, off_only[j].missing);
            goto bad;
        }
        if (!disable) {
            snprintf(ctx->err, ctx->errlen, "server.feature-flags \"%s\" must be \"enable\" or "
                     "\"disable\"", k);
            goto bad;
        }
    }
    *out = ff;
    return 0;
bad:
    free(ff);
    return -1;
}

static void feature_flags_release(void *p)
{
    free(p);
}

/* server.upload-dirs: where lighttpd stores request bodies it must hold before passing them on.
 * seekless never stores one (it streams bodies to the backend as they arrive, up to
 * server.max-request-size), so nothing is ever written there; the directories are still checked
 * to exist, so a typo does not wait for the day a lighttpd reads this config. */
static int prep_upload_dirs(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (!sl_cval_strings(v, false)) {
        snprintf(ctx->err, ctx->errlen, "server.upload-dirs must be an array of directories");
        return -1;
    }
    for (size_t i = 0; ctx->check_system && i < v->n_items; i++) {
        const char *d = v->items[i].val->str;
        char *path = sl_key_abs_path(ctx, d); /* relative to the config file */
        struct stat st;
        int e = !path ? ENOMEM : stat(path, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
        free(path);
        if (e) return sl_key_fail(ctx, "server.upload-dirs \"%s\": %s", d, strerror(e));
    }
    return 0;
}

static int prep_port(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->num >= 1 && v->num <= 65535) return 0;
    snprintf(ctx->err, ctx->errlen, "server.port %lld is out of range", v->num);
    return -1;
}

static int prep_workers(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return sl_key_range("server.max-worker", v, ctx, 0, 1024);
}

/* What only the keys together or the system show. */
/* HTTP/2 streams share their connection, and a bandwidth limit is the connection's writes: a
 * limit that a condition sets for some requests (a host, URLs, even a listener, which the
 * connection only learns per request) cannot hold for streams of one connection that ask for
 * different things. With server.h2proto on, the limits are refused anywhere but at the top level,
 * where they hold for every HTTP/2 connection as for HTTP/1.1 (no silent exception). */
static void h2_bw_check(sl_conf_check *k, const sl_cblock *b)
{
    for (; b; b = b->else_next) {
        for (size_t i = 0; b->parent && i < b->n_assigns; i++) {
            const sl_cassign *a = &b->assigns[i];
            if (!strcmp(a->key, "connection.kbytes-per-second") ||
                !strcmp(a->key, "server.kbytes-per-second"))
                sl_conf_fail(k, a->file, a->line,
                             "%s inside a condition cannot limit HTTP/2 streams, which share "
                             "their connection: with server.feature-flags \"server.h2proto\" => "
                             "\"enable\" set it at the top level only", a->key);
        }
        for (size_t i = 0; i < b->n_children; i++) h2_bw_check(k, b->children[i]);
    }
}

static void core_check(sl_conf_check *k, const void *conf)
{
    const sl_core_conf *g = conf;
    const sl_config_tree *t = sl_conf_check_tree(k);
    /* In a partial tree the assignment may only have been lost to a syntax error, which was
     * reported: saying it is not set would only echo that. An assignment that was refused (a
     * directory that does not exist) was reported with its line too: it is set, just wrong. */
    bool assigned = false;
    for (size_t i = 0; i < t->root->n_assigns && !assigned; i++)
        assigned = !strcmp(t->root->assigns[i].key, "server.document-root");
    if (!g->docroot && !t->partial && !assigned)
        sl_conf_fail(k, t->root->file, 0, "server.document-root is not set");
    char spec[300], canon[128];
    const char *b = g->bind ? g->bind : "0.0.0.0";
    snprintf(spec, sizeof spec, strchr(b, ':') && b[0] != '[' ? "[%s]:%ld" : "%s:%ld", b, g->port);
    if (sl_socket_canonical(spec, canon, sizeof canon) < 0) {
        const sl_cassign *a = sl_conf_top_assign(k, "server.bind");
        if (!a) a = sl_conf_top_assign(k, "server.port");
        sl_conf_fail(k, a ? a->file : NULL, a ? a->line : 0,
                     "server.bind \"%s\" / server.port %ld: not a usable address", b, g->port);
    }
    /* lighttpd sets the graceful stop's wait only as a feature flag, seekless also as a key:
     * two different answers are a mistake, not a choice. */
    const sl_cassign *gk = sl_conf_top_assign(k, "server.graceful-shutdown-timeout");
    if (gk && g->feature_flags && g->feature_flags->graceful_shutdown_timeout >= 0 &&
        g->feature_flags->graceful_shutdown_timeout != g->graceful_shutdown_timeout)
        sl_conf_fail(k, gk->file, gk->line,
                     "server.graceful-shutdown-timeout %ld and server.feature-flags "
                     "\"server.graceful-shutdown-timeout\" => %ld disagree; set one of them",
                     g->graceful_shutdown_timeout, g->feature_flags->graceful_shutdown_timeout);
    /* -t says what start-up would: a server.max-fds this user cannot have. */
    struct rlimit rl;
    unsigned long long nc, nm;
    const sl_cassign *fk = sl_conf_top_assign(k, "server.max-fds");
    if (fk && g->max_fds && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
        sl_fd_limit_plan(g->max_fds, rl.rlim_cur, rl.rlim_max, geteuid() == 0, &nc, &nm) < 0)
        sl_conf_fail(k, fk->file, fk->line,
                     "server.max-fds %ld is above the hard limit of open files (%llu) and only "
                     "root may raise that (systemd: LimitNOFILE=, shell: ulimit -Hn)",
                     g->max_fds, (unsigned long long)rl.rlim_max);
    if (sl_core_h2proto(g)) h2_bw_check(k, t->root);
    sl_user_check(k, g);
}

sl_module sl_mod_core = {
    SL_MODULE_HEAD("core", sl_core_conf),
    .keys = SL_KEYS(
        SL_KEY_PREP("mimetype.assign", SL_KEY_VALUE, mime, prep_mime, mime_release),
        SL_KEY_FLAGS("server.bind", SL_KEY_STRING, SL_KEY_GLOBAL, bind, NULL, NULL),
        SL_KEY_FLAGS("server.chroot", SL_KEY_STRING, SL_KEY_GLOBAL, chroot_dir, prep_chroot, NULL),
        SL_KEY_PREP("server.document-root", SL_KEY_VALUE, docroot, prep_docroot, dir_release),
        SL_KEY_PREP("server.error-handler", SL_KEY_STRING, error_handler, prep_error_handler, NULL),
        SL_KEY_PREP("server.error-handler-404", SL_KEY_STRING, error_handler_404,
                    prep_error_handler, NULL),
        SL_KEY_PREP("server.errorfile-prefix", SL_KEY_VALUE, errpages,
                    prep_errorfile, errorfile_release),
        SL_KEY_FLAGS("server.errorlog", SL_KEY_PATH,
                     SL_KEY_GLOBAL | SL_KEY_APPENDS | SL_KEY_OPENED_BEFORE_DROP,
                     errorlog, NULL, NULL),
        SL_KEY_FLAGS("server.event-handler", SL_KEY_STRING, SL_KEY_GLOBAL, event_handler,
                     prep_event_handler, NULL),
        SL_KEY_AT("server.follow-symlink", SL_KEY_BOOL, follow_symlink),
        SL_KEY_FLAGS("server.graceful-shutdown-timeout", SL_KEY_INT, SL_KEY_GLOBAL,
                     graceful_shutdown_timeout, NULL, NULL),
        SL_KEY_FLAGS("server.groupname", SL_KEY_STRING, SL_KEY_GLOBAL, groupname, NULL, NULL),
        SL_KEY_FLAGS("server.feature-flags", SL_KEY_VALUE, SL_KEY_GLOBAL, feature_flags,
                     prep_feature_flags, feature_flags_release),
        SL_KEY_FLAGS("server.http-parseopts", SL_KEY_VALUE, SL_KEY_GLOBAL, http_parseopts,
                     prep_http_parseopts, NULL),
        SL_KEY_FLAGS("server.max-connections", SL_KEY_INT, SL_KEY_GLOBAL, max_connections, NULL,
                     NULL),
        SL_KEY_FLAGS("server.max-fds", SL_KEY_INT, SL_KEY_GLOBAL, max_fds, prep_max_fds, NULL),
        SL_KEY_AT("server.max-keep-alive-idle", SL_KEY_INT, max_keep_alive_idle),
        SL_KEY_AT("server.max-keep-alive-requests", SL_KEY_INT, max_keep_alive_requests),
        SL_KEY_AT("server.max-read-idle", SL_KEY_INT, max_read_idle),
        SL_KEY_FLAGS("server.max-read-threads", SL_KEY_INT, SL_KEY_GLOBAL, max_read_threads,
                     prep_read_threads, NULL),
        SL_KEY_AT("server.max-request-field-size", SL_KEY_INT, max_request_field_size),
        SL_KEY_AT("server.max-request-size", SL_KEY_INT, max_request_size),
        SL_KEY_FLAGS("server.max-stat-threads", SL_KEY_INT, SL_KEY_GLOBAL, max_stat_threads,
                     prep_stat_threads, NULL),
        SL_KEY_FLAGS("server.max-worker", SL_KEY_INT, SL_KEY_GLOBAL, workers, prep_workers, NULL),
        SL_KEY_AT("server.max-write-idle", SL_KEY_INT, max_write_idle),
        SL_KEY_PREP("server.name", SL_KEY_STRING, server_name, prep_name, NULL),
        SL_KEY_FLAGS("server.network-backend", SL_KEY_STRING, SL_KEY_GLOBAL, network_backend,
                     prep_network_backend, NULL),
        SL_KEY_FLAGS("server.network-backend-block-size", SL_KEY_INT, SL_KEY_GLOBAL, block_size,
                     prep_block_size, NULL),
        SL_KEY_FLAGS("server.pid-file", SL_KEY_PATH,
                     SL_KEY_GLOBAL | SL_KEY_APPENDS | SL_KEY_OPENED_BEFORE_DROP,
                     pid_file, NULL, NULL),
        SL_KEY_FLAGS("server.port", SL_KEY_INT, SL_KEY_GLOBAL, port, prep_port, NULL),
        SL_KEY_AT("server.range-requests", SL_KEY_BOOL, range_requests),
        SL_KEY_PREP("server.tag", SL_KEY_STRING, server_tag, prep_tag, NULL),
        SL_KEY_FLAGS("server.reuse-port", SL_KEY_BOOL, SL_KEY_GLOBAL, reuse_port, NULL, NULL),
        SL_KEY_FLAGS("server.stat-cache-engine", SL_KEY_STRING, SL_KEY_GLOBAL, stat_cache_engine,
                     prep_stat_cache, NULL),
        SL_KEY_FLAGS("server.upload-dirs", SL_KEY_VALUE, SL_KEY_GLOBAL, upload_dirs,
                     prep_upload_dirs, NULL),
        SL_KEY_FLAGS("server.use-noatime", SL_KEY_BOOL, SL_KEY_GLOBAL, use_noatime, NULL, NULL),
        SL_KEY_FLAGS("server.username", SL_KEY_STRING, SL_KEY_GLOBAL, username, NULL, NULL),
        SL_KEY_FLAGS("server.worker-cpu-affinity", SL_KEY_STRING, SL_KEY_GLOBAL, cpu_affinity,
                     prep_cpu_affinity, NULL)),
    .always = true,
    .defaults = core_defaults,
    .check = core_check,
};

void sl_core_print_features(void)
{
    for (size_t i = 0; sl_netbackends[i]; i++)
        printf("network-backend: %s%s\n", sl_netbackends[i]->name, i == 0 ? " (default)" : "");
    const char **m = event_get_supported_methods();
    for (size_t i = 0; m && m[i]; i++)
        if (!strcmp(m[i], "epoll")) printf("event-handler: linux-sysepoll\n");
    char pv[32] = "";
    pcre2_config(PCRE2_CONFIG_VERSION, pv);
    printf("regex-conditions: pcre2 %s\n", pv);
    printf("libevent: %s\n", event_get_version());
}
