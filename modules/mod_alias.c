/* mod_alias: alias.url maps URL path prefixes to places in the file system, as lighttpd's
 * mod_alias does ( "/javascript" => "/usr/share/javascript" ).
 *
 * The map is prepared once at load: each target is opened (O_PATH) as a directory, or, for a
 * target that is a file, its directory is opened and its name kept, so a request never walks
 * the target's own path again and the static handler resolves beneath the opened directory
 * with the same rules as beneath the document root (no "..", symlinks as
 * server.follow-symlink says). In the physical phase the first entry whose prefix matches the
 * normalized path (in config order, as lighttpd) sets the connection's physical root and the
 * rest of the path beneath it; the static handler then serves from there. A prefix matches at a
 * path segment boundary only ("/js" matches "/js" and "/js/a", not "/jsx"): lighttpd compares
 * bytes, which would map "/jsx" to the target's sibling "<target>x"; seekless resolves beneath
 * the target and never leaves it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "module.h"

typedef struct alias_entry {
    char *prefix;       /* normalized URL path prefix */
    size_t prefix_len;
    sl_dir dir;         /* the target directory (or a file target's directory) */
    char *file;         /* a file target: "/name" beneath dir; NULL for a directory */
    size_t file_len;
} alias_entry;

typedef struct alias_map {
    size_t n;
    alias_entry e[];
} alias_map;

typedef struct sl_alias_conf {
    const alias_map *map; /* alias.url; NULL: none */
} sl_alias_conf;

#define SL_KEY_CONF sl_alias_conf

sl_module sl_mod_alias;

static void map_release(void *p)
{
    alias_map *m = p;
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].prefix);
        free(m->e[i].dir.path);
        if (m->e[i].dir.fd >= 0) close(m->e[i].dir.fd);
        free(m->e[i].file);
    }
    free(m);
}

/* One target: a directory, or a file whose directory is opened. 0, or -1 with ctx->err. */
static int open_target(alias_entry *e, const char *target, const sl_key_ctx *ctx)
{
    char *abs = sl_key_abs_path(ctx, target);
    if (!abs) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    /* "/usr/share/javascript/" and "/usr/share/javascript" are the same directory. */
    size_t n = strlen(abs);
    while (n > 1 && abs[n - 1] == '/') abs[--n] = 0;
    struct stat st;
    if (stat(abs, &st) < 0) {
        snprintf(ctx->err, ctx->errlen, "alias.url \"%s\" => \"%s\": %s", e->prefix, abs,
                 strerror(errno));
        free(abs);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        e->dir.path = abs;
    } else {
        char *slash = strrchr(abs, '/');
        if (!slash || !slash[1]) {
            snprintf(ctx->err, ctx->errlen, "alias.url \"%s\" => \"%s\": not a file or directory",
                     e->prefix, abs);
            free(abs);
            return -1;
        }
        e->file = strdup(slash);
        e->file_len = e->file ? strlen(e->file) : 0;
        *slash = 0;
        e->dir.path = slash == abs ? strdup("/") : abs;
        if (slash == abs) free(abs);
        if (!e->file || !e->dir.path) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    }
    e->dir.fd = sl_key_open_dir(ctx, e->dir.path); /* inside server.chroot */
    if (e->dir.fd < 0)
        return sl_key_fail(ctx, "alias.url \"%s\" => \"%s\": %s", e->prefix, e->dir.path,
                           strerror(errno));
    return 0;
}

static int prep_alias(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!sl_cval_strings(v, true))
        return sl_key_fail(ctx, "alias.url must be an array of \"/url-prefix\" => \"/path\" pairs");
    alias_map *m = calloc(1, sizeof *m + v->n_items * sizeof m->e[0]);
    if (!m) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) m->e[i].dir.fd = -1;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *k = v->items[i].key;
        alias_entry *e = &m->e[m->n++];
        if (k[0] != '/') {
            snprintf(ctx->err, ctx->errlen, "alias.url \"%s\": a URL prefix starts with '/'", k);
            goto bad;
        }
        e->prefix = strdup(k);
        if (!e->prefix) goto oom;
        /* Matching is at segment boundaries: "/js/" is the prefix "/js". */
        e->prefix_len = strlen(k);
        while (e->prefix_len > 1 && e->prefix[e->prefix_len - 1] == '/') e->prefix[--e->prefix_len] = 0;
        for (size_t j = 0; j + 1 < m->n; j++) {
            const alias_entry *p = &m->e[j];
            bool shadows = p->prefix_len == 1 ||
                           (p->prefix_len <= e->prefix_len &&
                            !memcmp(p->prefix, e->prefix, p->prefix_len) &&
                            (e->prefix_len == p->prefix_len || e->prefix[p->prefix_len] == '/'));
            if (shadows) {
                /* lighttpd warns and goes on; an entry that can never match is a mistake. */
                snprintf(ctx->err, ctx->errlen,
                         "alias.url \"%s\" can never match: \"%s\" before it takes its URLs "
                         "(list the longer prefix first)", k, p->prefix);
                goto bad;
            }
        }
        if (open_target(e, v->items[i].val->str, ctx) < 0) goto bad;
    }
    /* Entered as server.username. Only now: the check keeps the path, which must outlive it
     * (a map that failed half way is freed). */
    for (size_t i = 0; i < m->n; i++) sl_key_access(ctx, m->e[i].dir.path, SL_ACCESS_SEARCH_DIR, true);
    *out = m;
    return 0;
oom:
    snprintf(ctx->err, ctx->errlen, "out of memory");
bad:
    map_release(m);
    return -1;
}

/* Physical phase: the first prefix that matches sets where the static handler looks. */
static sl_hresult alias_physical(sl_conn *c)
{
    const alias_map *m = SL_MODCONF(c->conf, sl_mod_alias, sl_alias_conf)->map;
    if (!m || !c->path) return SL_GO_ON;
    for (size_t i = 0; i < m->n; i++) {
        const alias_entry *e = &m->e[i];
        size_t pl = e->prefix_len == 1 ? 0 : e->prefix_len; /* "/" matches every path */
        if (c->path_len < pl || memcmp(c->path, e->prefix, pl) ||
            (c->path_len > pl && c->path[pl] != '/'))
            continue;
        const char *rest = c->path + pl;
        size_t rest_len = c->path_len - pl;
        c->phys_root = &e->dir;
        if (e->file) {
            /* A file target has nothing beneath it. */
            if (rest_len > 0 && !(rest_len == 1 && rest[0] == '/')) {
                c->status = 404;
                return SL_ERROR;
            }
            c->phys_path = e->file;
            c->phys_len = e->file_len;
        } else if (rest_len == 0) {
            c->phys_path = "/";
            c->phys_len = 1;
        } else {
            c->phys_path = rest;
            c->phys_len = rest_len;
        }
        return SL_GO_ON;
    }
    return SL_GO_ON;
}

sl_module sl_mod_alias = {
    SL_MODULE_HEAD("alias", sl_alias_conf, "mod_alias"),
    .keys = SL_KEYS(
        SL_KEY_PREP("alias.url", SL_KEY_VALUE, map, prep_alias, map_release)),
    .physical = alias_physical,
};
