/* The config layer.
 *
 * Loading walks the parsed tree once. Every assignment is looked up in the key tables of the
 * compiled-in modules: a key no module owns is unknown, a key of a module server.modules did not
 * load is refused as lighttpd refuses it, a process-wide key inside a condition is refused, and a
 * value of the wrong type or that the key's prepare() rejects is an error. Loading goes on after
 * an error, so one run reports every error in the file. Each block's assignments then become a
 * list of stores (offset, type, value) into a conf block, with prepared values (absolute paths,
 * what prepare() made) resolved once, so applying a block per request is a few stores and no
 * lookup or allocation.
 */
#include "conf.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "addr.h"

/* ---- messages ---- */

/* An error waiting to be given out: the walk visits blocks, not lines, so errors are collected
 * and sorted into file order before they reach the caller. */
typedef struct pending {
    const char *file;
    int line;
    size_t seq;
    char *msg;
} pending;

static int pending_cmp(const void *x, const void *y)
{
    const pending *a = x, *b = y;
    if (a->seq / 1000000 != b->seq / 1000000) return a->seq < b->seq ? -1 : 1; /* file order */
    if (a->line != b->line) return a->line < b->line ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int sl_key_choice(const char *key, const sl_cval *v, const sl_key_ctx *ctx,
                  const char *const *choices)
{
    char names[512] = "";
    for (size_t i = 0; choices[i]; i++) {
        if (!strcmp(v->str, choices[i])) return 0;
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"",
                 i ? (choices[i + 1] ? ", " : " or ") : "", choices[i]);
    }
    snprintf(ctx->err, ctx->errlen, "%s \"%s\" is not supported (use %s)", key, v->str, names);
    return -1;
}

int sl_key_fail(const sl_key_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, ctx->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int sl_key_dir(const sl_cval *v, const sl_key_ctx *ctx, char **dir)
{
    *dir = NULL;
    if (v->type != SL_CV_STRING)
        return sl_key_fail(ctx, "%s must be a directory name", ctx->assign->key);
    if (!v->str[0]) return 0;
    char *p = sl_key_abs_path(ctx, v->str);
    if (!p) return sl_key_fail(ctx, "out of memory");
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    *dir = p;
    return 0;
}

int sl_key_range(const char *key, const sl_cval *v, const sl_key_ctx *ctx, long long lo,
                 long long hi)
{
    if (v->num >= lo && v->num <= hi) return 0;
    return sl_key_fail(ctx, "'%s' %lld is out of range (%lld..%lld)", key, v->num, lo, hi);
}

/* ---- compiled assignments ---- */

/* One store into a conf block. */
typedef struct op {
    size_t off;
    sl_key_type type;
    union {
        const char *s;
        long i;
        bool b;
        sl_strlist l;
        sl_kvlist kv;
        const void *p;
    } v;
} op;

typedef struct ops {
    op *v;
    size_t n;
    int cap_slot; /* where a request keeps this block's regex groups (%N), or -1: not kept */
} ops;

/* Something made at load time, freed with the config. */
typedef struct owned {
    void *p;
    void (*release)(void *p);
} owned;

struct sl_conf_priv {
    owned *own;
    size_t n_own, cap_own;
    bool failed_oom;
};

static void *own(sl_conf_set *cs, void *p, void (*release)(void *))
{
    struct sl_conf_priv *pv = cs->priv;
    if (!p) return NULL;
    if (pv->n_own == pv->cap_own) {
        size_t nc = pv->cap_own ? pv->cap_own * 2 : 64;
        owned *o = realloc(pv->own, nc * sizeof *o);
        if (!o) {
            release ? release(p) : free(p);
            pv->failed_oom = true;
            return NULL;
        }
        pv->own = o;
        pv->cap_own = nc;
    }
    pv->own[pv->n_own++] = (owned){p, release};
    return p;
}

static void apply_ops(sl_conf *block, const ops *o)
{
    for (size_t i = 0; o && i < o->n; i++) {
        const op *x = &o->v[i];
        char *f = (char *)block + x->off;
        switch (x->type) {
        case SL_KEY_STRING:
        case SL_KEY_PATH: memcpy(f, &x->v.s, sizeof x->v.s); break;
        case SL_KEY_INT: memcpy(f, &x->v.i, sizeof x->v.i); break;
        case SL_KEY_BOOL: memcpy(f, &x->v.b, sizeof x->v.b); break;
        case SL_KEY_STRLIST: memcpy(f, &x->v.l, sizeof x->v.l); break;
        case SL_KEY_KVLIST: memcpy(f, &x->v.kv, sizeof x->v.kv); break;
        case SL_KEY_VALUE: memcpy(f, &x->v.p, sizeof x->v.p); break;
        }
    }
}

/* ---- loading ---- */

/* Loading state; modules' check() hooks see it as sl_conf_check. */
struct sl_conf_check {
    sl_conf_set *cs;
    sl_module *const *builtin;
    bool loaded[SL_MAX_MODULES];  /* by index into builtin */
    bool check_system;
    sl_config_errors *errs;
    pending *pend;
    size_t n_pend, cap_pend;
    size_t n_failed;              /* errors reported (pending or given out) */
    sl_conf_access *acc;          /* files the server will open */
    size_t n_acc, cap_acc;
    bool *accepted;               /* per top-level assignment: it compiled */
    unsigned block, n_blocks;     /* the block being compiled: its number in walk order */
    int cur_slot;                 /* its capture slot (sl_key_keep_captures), or -1 */
};
typedef struct sl_conf_check load_ctx;

static void lc_failv(load_ctx *lc, const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1200];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!file) file = lc->cs->tree->root->file;
    lc->n_failed++;
    if (lc->n_pend == lc->cap_pend) {
        size_t nc = lc->cap_pend ? lc->cap_pend * 2 : 16;
        pending *np = realloc(lc->pend, nc * sizeof *np);
        if (!np) {
            sl_config_error_add(lc->errs, file, line, "%s", msg); /* out of order, not lost */
            return;
        }
        lc->pend = np;
        lc->cap_pend = nc;
    }
    char *m = strdup(msg);
    if (!m) {
        sl_config_error_add(lc->errs, file, line, "%s", msg);
        return;
    }
    lc->pend[lc->n_pend] = (pending){file, line, lc->n_pend, m};
    lc->n_pend++;
}

static void lc_fail(load_ctx *lc, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void lc_fail(load_ctx *lc, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lc_failv(lc, file, line, fmt, ap);
    va_end(ap);
}

void sl_conf_fail(sl_conf_check *k, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lc_failv(k, file, line, fmt, ap);
    va_end(ap);
}

/* Give the pending errors out in file order: files in the order their first error was found,
 * by line within a file. */
static void flush_errors(load_ctx *lc)
{
    for (size_t i = 0; i < lc->n_pend; i++) {
        size_t first = i;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(lc->pend[j].file, lc->pend[i].file)) {
                first = lc->pend[j].seq / 1000000;
                break;
            }
        lc->pend[i].seq = first * 1000000 + i; /* SL_CONFIG_MAX_ERRORS keeps i far below */
    }
    if (lc->n_pend) qsort(lc->pend, lc->n_pend, sizeof *lc->pend, pending_cmp);
    for (size_t i = 0; i < lc->n_pend; i++) {
        sl_config_error_add(lc->errs, lc->pend[i].file, lc->pend[i].line, "%s", lc->pend[i].msg);
        free(lc->pend[i].msg);
    }
    free(lc->pend);
    lc->pend = NULL;
    lc->n_pend = lc->cap_pend = 0;
}

static void want_access(load_ctx *lc, const sl_cassign *a, const char *path, sl_access_kind kind,
                        bool as_server)
{
    if (lc->n_acc == lc->cap_acc) {
        size_t nc = lc->cap_acc ? lc->cap_acc * 2 : 8;
        sl_conf_access *na = realloc(lc->acc, nc * sizeof *na);
        if (!na) {
            lc_fail(lc, a->file, a->line, "out of memory");
            return;
        }
        lc->acc = na;
        lc->cap_acc = nc;
    }
    lc->acc[lc->n_acc++] = (sl_conf_access){a->file, a->line, a->key, path, kind, as_server};
}

const char *sl_key_top_string(const sl_key_ctx *ctx, const char *key)
{
    load_ctx *lc = ctx->loader;
    if (!lc) return NULL;
    /* Looked up in the tree, not the compiled keys: it may be set after the key asking. */
    const sl_cblock *root = lc->cs->tree->root;
    for (size_t i = root->n_assigns; i-- > 0;) {
        const sl_cassign *a = &root->assigns[i];
        if (!strcmp(a->key, key)) return a->val->type == SL_CV_STRING ? a->val->str : NULL;
    }
    return NULL;
}

const char *sl_key_chroot(const sl_key_ctx *ctx)
{
    const char *r = sl_key_top_string(ctx, "server.chroot");
    /* none, or refused by its own key */
    return r && r[0] == '/' && strcmp(r, "/") ? r : NULL;
}

char *sl_key_root_path(const sl_key_ctx *ctx, const char *path)
{
    const char *r = sl_key_chroot(ctx);
    char *p;
    if (!r) return strdup(path);
    size_t rl = strlen(r);
    while (rl > 1 && r[rl - 1] == '/') rl--;
    return asprintf(&p, "%.*s%s", (int)rl, r, path) < 0 ? NULL : p;
}

int sl_key_open_dir(const sl_key_ctx *ctx, const char *path)
{
    char *p = sl_key_root_path(ctx, path);
    if (!p) return errno = ENOMEM, -1;
    int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    free(p);
    errno = e;
    return fd;
}

void sl_key_access(const sl_key_ctx *ctx, const char *path, sl_access_kind kind, bool as_server)
{
    if (!ctx->loader || !ctx->assign) return;
    /* The server's user opens it after the chroot: judge it where it will be. */
    load_ctx *lc = ctx->loader;
    char *p = as_server && sl_key_chroot(ctx) ? own(lc->cs, sl_key_root_path(ctx, path), NULL)
                                              : NULL; /* kept: the check keeps the pointer */
    want_access(lc, ctx->assign, p ? p : path, kind, as_server);
}

int sl_key_keep_captures(const sl_key_ctx *ctx)
{
    load_ctx *lc = ctx->loader;
    if (!lc || sl_cond_groups(ctx->cond) < 0) return -1;
    if (lc->cur_slot < 0) lc->cur_slot = (int)lc->cs->n_captures++;
    return lc->cur_slot;
}

bool sl_conf_check_system(const sl_conf_check *k)
{
    return k->check_system;
}

const sl_config_tree *sl_conf_check_tree(const sl_conf_check *k)
{
    return k->cs->tree;
}

const sl_cassign *sl_conf_top_assign(const sl_conf_check *k, const char *key)
{
    const sl_cblock *root = k->cs->tree->root;
    for (size_t i = root->n_assigns; i-- > 0;)
        if (k->accepted && k->accepted[i] && !strcmp(root->assigns[i].key, key))
            return &root->assigns[i];
    return NULL;
}

size_t sl_conf_check_accesses(const sl_conf_check *k, const sl_conf_access **out)
{
    *out = k->acc;
    return k->n_acc;
}

static const char *type_want(sl_key_type t)
{
    switch (t) {
    case SL_KEY_INT: return "an integer";
    case SL_KEY_BOOL: return "\"enable\" or \"disable\"";
    case SL_KEY_STRLIST: return "an array of strings";
    case SL_KEY_KVLIST: return "an array of \"key\" => \"value\" pairs";
    case SL_KEY_VALUE: return "a value";
    default: return "a string";
    }
}

static int bool_of(const sl_cval *v, bool *out)
{
    static const char *const yes[] = {"enable", "true", "on", "1"};
    static const char *const no[] = {"disable", "false", "off", "0"};
    if (v->type == SL_CV_INT && (v->num == 0 || v->num == 1)) {
        *out = v->num == 1;
        return 0;
    }
    if (v->type != SL_CV_STRING) return -1;
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v->str, yes[i])) return *out = true, 0;
        if (!strcasecmp(v->str, no[i])) return *out = false, 0;
    }
    return -1;
}

static const sl_key *find_key(const load_ctx *lc, const char *name, size_t *mod)
{
    for (size_t m = 0; lc->builtin[m]; m++) {
        const sl_key *k = lc->builtin[m]->keys;
        for (; k && k->name; k++) {
            if (!strcmp(k->name, name)) {
                *mod = m;
                return k;
            }
        }
    }
    return NULL;
}

static const char *module_label(const sl_module *m)
{
    return m->aliases && m->aliases[0] ? m->aliases[0] : m->name;
}

static char *abs_path(const char *basedir, const char *p)
{
    if (p[0] == '/' || !basedir) return strdup(p);
    size_t n = strlen(basedir) + strlen(p) + 2;
    char *r = malloc(n);
    if (r) snprintf(r, n, "%s/%s", basedir, p);
    return r;
}

char *sl_key_abs_path(const sl_key_ctx *ctx, const char *p)
{
    return abs_path(ctx->basedir, p);
}

/* lighttpd modules seekless leaves out on purpose, and why: naming one in server.modules is an
 * error that says so (any other unknown name gets the list of the modules seekless has). This is
 * lighttpd's language, not a seekless module: the config layer still knows none of those. */
static const struct {
    const char *name, *prefix, *why; /* prefix: of the module's keys (NULL: none of its own) */
} absent[] = {
    {"mod_cgi", "cgi.", "it runs no programs itself (a fork per request beside the event loops); put CGI "
                "scripts behind fastcgi.server through a FastCGI-to-CGI bridge such as fcgiwrap, "
                "as nginx users do"},
    {"mod_ssi", "ssi.", "it never parses or rewrites the files it serves (they leave with sendfile and "
                "the network backends); serve server-side includes from an application behind "
                "proxy.server or fastcgi.server"},
    {"mod_sockproxy", "sockproxy.", "it speaks HTTP and relays no raw TCP connections; put a TCP proxy "
                      "(haproxy, a systemd socket unit) in front of it for that"},
    {"mod_webdav", "webdav.", "it serves files read-only: no method that writes (PUT, DELETE, MKCOL, "
                   "PROPPATCH, ...)"},
    {"mod_magnet", "magnet.", "it embeds no Lua: the modules' keys say what it does"},
    {"mod_gnutls", NULL, "TLS is OpenSSL's: load mod_openssl (or nothing: ssl.* keys load it)"},
    {"mod_mbedtls", NULL, "TLS is OpenSSL's: load mod_openssl (or nothing: ssl.* keys load it)"},
    {"mod_nss", NULL, "TLS is OpenSSL's: load mod_openssl (or nothing: ssl.* keys load it)"},
    {"mod_wolfssl", NULL, "TLS is OpenSSL's: load mod_openssl (or nothing: ssl.* keys load it)"},
    {NULL, NULL, NULL},
};

static const char *absent_why(const char *name)
{
    for (size_t i = 0; absent[i].name; i++)
        if (!strcmp(absent[i].name, name)) return absent[i].why;
    return NULL;
}

/* The left-out module a key belongs to (by its prefix), or -1. */
static int absent_of_key(const char *key)
{
    for (int i = 0; absent[i].name; i++)
        if (absent[i].prefix && !strncmp(key, absent[i].prefix, strlen(absent[i].prefix)))
            return i;
    return -1;
}

/* Check one assignment and turn it into a store. Returns 0 (stored in *o) or -1 (reported). */
static int compile_assign(load_ctx *lc, const sl_cblock *b, const sl_cassign *a, op *o)
{
    sl_conf_set *cs = lc->cs;
    size_t mi;
    const sl_key *k = find_key(lc, a->key, &mi);
    const sl_cval *v = a->val;
    if (!strcmp(a->key, "server.modules")) return 1; /* read before everything else */
    if (!k) {
        int ab = absent_of_key(a->key);
        if (ab >= 0)
            lc_fail(lc, a->file, a->line, "config key '%s' belongs to %s, which seekless leaves "
                    "out: %s", a->key, absent[ab].name, absent[ab].why);
        else
            lc_fail(lc, a->file, a->line, "unknown config key '%s'", a->key);
        return -1;
    }
    const sl_module *m = lc->builtin[mi];
    if (!lc->loaded[mi]) {
        lc_fail(lc, a->file, a->line,
                    "'%s' belongs to %s, which server.modules does not load (add \"%s\" to it)",
                    a->key, module_label(m), module_label(m));
        return -1;
    }
    if ((k->flags & SL_KEY_GLOBAL) && b->field != SL_COND_NONE) {
        lc_fail(lc, a->file, a->line,
                    "'%s' can only be set at the top level, not inside a condition", a->key);
        return -1;
    }
    bool ok = true;
    switch (k->type) {
    case SL_KEY_INT: ok = v->type == SL_CV_INT; break;
    case SL_KEY_BOOL: ok = bool_of(v, &o->v.b) == 0; break;
    case SL_KEY_STRLIST: ok = sl_cval_strings(v, false); break;
    case SL_KEY_KVLIST: ok = sl_cval_strings(v, true); break;
    case SL_KEY_VALUE: break;
    default: ok = v->type == SL_CV_STRING; break;
    }
    if (!ok) {
        lc_fail(lc, a->file, a->line, "'%s' must be %s, not %s", a->key,
                    type_want(k->type), sl_cval_type_name(v->type));
        return -1;
    }
    if (k->type == SL_KEY_INT && v->num < 0) {
        lc_fail(lc, a->file, a->line, "'%s' must not be negative", a->key);
        return -1;
    }
    void *prep = NULL;
    if (k->prepare) {
        char msg[1024] = "";
        sl_key_ctx ctx = {.basedir = cs->basedir, .check_system = lc->check_system,
                          .err = msg, .errlen = sizeof msg, .loader = lc, .assign = a,
                          .block = lc->block, .cond = b};
        if (k->prepare(v, &ctx, &prep) < 0) {
            lc_fail(lc, a->file, a->line, "%s", msg[0] ? msg : "invalid value");
            return -1;
        }
        if (prep) own(cs, prep, k->release);
    }
    o->off = m->conf_off + k->off;
    o->type = k->type;
    switch (k->type) {
    case SL_KEY_STRING: o->v.s = v->str; break;
    case SL_KEY_PATH: {
        char *p = own(cs, abs_path(cs->basedir, v->str), NULL);
        if (!p) return -1;
        o->v.s = p;
        if (k->flags & SL_KEY_APPENDS)
            want_access(lc, a, p, SL_ACCESS_APPEND_FILE, !(k->flags & SL_KEY_OPENED_BEFORE_DROP));
        break;
    }
    case SL_KEY_INT: o->v.i = (long)v->num; break;
    case SL_KEY_BOOL: break; /* set by bool_of */
    case SL_KEY_STRLIST: {
        const char **l = own(cs, calloc(v->n_items + 1, sizeof *l), NULL);
        if (!l) return -1;
        for (size_t i = 0; i < v->n_items; i++) l[i] = v->items[i].val->str;
        o->v.l = (sl_strlist){l, v->n_items};
        break;
    }
    case SL_KEY_KVLIST: {
        const char **kk = own(cs, calloc(v->n_items + 1, sizeof *kk), NULL);
        const char **vv = own(cs, calloc(v->n_items + 1, sizeof *vv), NULL);
        if (!kk || !vv) return -1;
        for (size_t i = 0; i < v->n_items; i++) {
            kk[i] = v->items[i].key;
            vv[i] = v->items[i].val->str;
        }
        o->v.kv = (sl_kvlist){kk, vv, v->n_items};
        break;
    }
    case SL_KEY_VALUE: o->v.p = prep ? prep : (const void *)v; break;
    }
    return 0;
}

static void compile_block(load_ctx *lc, sl_cblock *b)
{
    ops *o = own(lc->cs, calloc(1, sizeof *o), NULL);
    if (!o) return;
    o->v = own(lc->cs, calloc(b->n_assigns + 1, sizeof *o->v), NULL);
    if (!o->v) return;
    lc->block = lc->n_blocks++;
    lc->cur_slot = -1;
    for (size_t i = 0; i < b->n_assigns; i++) {
        if (compile_assign(lc, b, &b->assigns[i], &o->v[o->n]) != 0) continue;
        o->n++;
        if (b == lc->cs->tree->root && lc->accepted) lc->accepted[i] = true;
    }
    o->cap_slot = lc->cur_slot;
    b->ext = o;
}

static void collect_socket(load_ctx *lc, const sl_cblock *b)
{
    sl_conf_set *cs = lc->cs;
    if (b->field != SL_COND_SOCKET || b->is_else) return;
    char canon[128];
    int r = sl_socket_canonical(b->pattern, canon, sizeof canon);
    if (r < 0) {
        lc_fail(lc, b->file, b->line, "$SERVER[\"socket\"] \"%s\": %s", b->pattern,
                    r == -EINVAL
                        ? "not a socket address (want \":port\", \"ip:port\" or \"[ip6]:port\")"
                        : "cannot resolve");
        return;
    }
    if (strlen(b->pattern) >= sizeof cs->listen[0].literal) {
        lc_fail(lc, b->file, b->line, "$SERVER[\"socket\"] value too long");
        return;
    }
    for (size_t i = 1; i < cs->n_listen; i++) {
        if (!strcmp(cs->listen[i].canon, canon)) {
            if (strcmp(cs->listen[i].literal, b->pattern))
                lc_fail(lc, b->file, b->line,
                            "$SERVER[\"socket\"] \"%s\" names the same socket as \"%s\"; write it "
                            "one way",
                            b->pattern, cs->listen[i].literal);
            return;
        }
    }
    if (cs->n_listen == SL_MAX_LISTENERS) {
        lc_fail(lc, b->file, b->line, "too many distinct $SERVER[\"socket\"] values");
        return;
    }
    snprintf(cs->listen[cs->n_listen].canon, sizeof cs->listen[0].canon, "%s", canon);
    snprintf(cs->listen[cs->n_listen].literal, sizeof cs->listen[0].literal, "%s", b->pattern);
    cs->n_listen++;
}

static void walk(load_ctx *lc, sl_cblock *b, bool *only_socket)
{
    collect_socket(lc, b);
    if (b->field != SL_COND_NONE && b->field != SL_COND_SOCKET) *only_socket = false;
    compile_block(lc, b);
    for (size_t i = 0; i < b->n_children; i++)
        for (sl_cblock *x = b->children[i]; x; x = x->else_next) walk(lc, x, only_socket);
}

/* server.modules: which modules load, and in which order their hooks run. */
static void pick_modules(load_ctx *lc)
{
    sl_conf_set *cs = lc->cs;
    const sl_cassign *list = NULL;
    const sl_cblock *root = cs->tree->root;
    for (size_t i = 0; i < root->n_assigns; i++)
        if (!strcmp(root->assigns[i].key, "server.modules")) list = &root->assigns[i];
    size_t order[SL_MAX_MODULES], n = 0;
    bool listed[SL_MAX_MODULES] = {false};
    order[n++] = 0; /* the core */
    listed[0] = true;
    if (list) {
        const sl_cval *v = list->val;
        if (!sl_cval_strings(v, false)) {
            lc_fail(lc, list->file, list->line,
                        "'server.modules' must be an array of module names");
        } else {
            for (size_t i = 0; i < v->n_items; i++) {
                const char *name = v->items[i].val->str;
                size_t found = SIZE_MAX;
                for (size_t m = 0; lc->builtin[m] && found == SIZE_MAX; m++) {
                    const sl_module *mod = lc->builtin[m];
                    if (!strcmp(mod->name, name)) found = m;
                    for (size_t a = 0; mod->aliases && mod->aliases[a] && found == SIZE_MAX; a++)
                        if (!strcmp(mod->aliases[a], name)) found = m;
                }
                if (found == SIZE_MAX) {
                    const char *why = absent_why(name);
                    if (why) {
                        lc_fail(lc, list->file, list->line,
                                "server.modules: \"%s\" is not a module of seekless: %s", name,
                                why);
                        continue;
                    }
                    char have[1024] = "";
                    for (size_t m = 1; lc->builtin[m]; m++)
                        for (size_t a = 0; lc->builtin[m]->aliases && lc->builtin[m]->aliases[a]; a++)
                            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s",
                                     have[0] ? ", " : "", lc->builtin[m]->aliases[a]);
                    lc_fail(lc, list->file, list->line,
                                "server.modules: \"%s\" is not a module of seekless (it has: %s)",
                                name, have);
                    continue;
                }
                if (!listed[found] && n < SL_MAX_MODULES) {
                    listed[found] = true;
                    order[n++] = found;
                }
            }
        }
    }
    /* Without server.modules every module is loaded; with it, the listed ones and those
     * lighttpd loads anyway. */
    for (size_t m = 1; lc->builtin[m] && n < SL_MAX_MODULES; m++) {
        if (listed[m] || (list && !lc->builtin[m]->always)) continue;
        listed[m] = true;
        order[n++] = m;
    }
    /* Fallback handlers last, in their relative order. */
    size_t sorted[SL_MAX_MODULES], k = 0;
    for (size_t i = 0; i < n; i++)
        if (!lc->builtin[order[i]]->fallback) sorted[k++] = order[i];
    for (size_t i = 0; i < n; i++)
        if (lc->builtin[order[i]]->fallback) sorted[k++] = order[i];
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        sl_module *m = lc->builtin[sorted[i]];
        lc->loaded[sorted[i]] = true;
        m->index = (unsigned)i;
        m->conf_off = off;
        off += (m->conf_size + 15) & ~(size_t)15;
        cs->mods[cs->n_mods++] = m;
    }
    cs->block_size = off ? off : 16;
    for (size_t i = 0; i < cs->n_mods; i++) {
        const sl_module *m = cs->mods[i];
        const bool has[SL_HOOK_N] = {
            [SL_HOOK_URI_RAW] = m->uri_raw,
            [SL_HOOK_URI_CLEAN] = m->uri_clean,
            [SL_HOOK_PHYSICAL] = m->physical,
            [SL_HOOK_HANDLE] = m->handle,
            [SL_HOOK_RESPONSE_START] = m->response_start,
            [SL_HOOK_LOG_REQUEST] = m->log_request,
            [SL_HOOK_REQUEST_DONE] = m->request_done,
        };
        for (int h = 0; h < SL_HOOK_N; h++)
            if (has[h]) cs->hook_mods[h][cs->n_hook_mods[h]++] = m;
    }
}

static void defaults_into(const sl_conf_set *cs, sl_conf *block)
{
    memset(block, 0, cs->block_size);
    for (size_t i = 0; i < cs->n_mods; i++)
        if (cs->mods[i]->defaults) cs->mods[i]->defaults((char *)block + cs->mods[i]->conf_off);
}

/* Check a parsed tree (also a partial one, whose errors the parser gave: its statements are
 * still checked so that one run names every fault). Takes t. */
static sl_conf_set *load_tree(sl_config_tree *t, const char *basedir, sl_module *const *builtin,
                              bool check_system, sl_config_errors *errs)
{
    sl_conf_set *cs = calloc(1, sizeof *cs);
    struct sl_conf_priv *pv = calloc(1, sizeof *pv);
    if (!cs || !pv) {
        free(cs);
        free(pv);
        sl_config_error_add(errs, t->root->file, 0, "out of memory");
        sl_config_tree_free(t);
        return NULL;
    }
    cs->tree = t;
    cs->priv = pv;
    cs->basedir = basedir ? strdup(basedir) : NULL;
    cs->n_listen = 1; /* [0]: the core's server.bind:server.port */
    load_ctx lc = {.cs = cs, .builtin = builtin, .check_system = check_system, .errs = errs};
    lc.accepted = calloc(t->root->n_assigns + 1, sizeof *lc.accepted);
    if (!lc.accepted) lc_fail(&lc, NULL, 0, "out of memory");
    pick_modules(&lc);
    bool only_socket = true;
    walk(&lc, t->root, &only_socket);
    cs->global = own(cs, malloc(cs->block_size), NULL);
    if (pv->failed_oom || !cs->global) {
        lc_fail(&lc, NULL, 0, "out of memory");
    } else {
        /* The global block from what was accepted, so the checks below judge the values that
         * would be served, and each module's own combined checks. */
        defaults_into(cs, cs->global);
        apply_ops(cs->global, t->root->ext);
        for (size_t i = 0; i < cs->n_mods; i++)
            if (cs->mods[i]->check)
                cs->mods[i]->check(&lc, (const char *)cs->global + cs->mods[i]->conf_off);
    }
    flush_errors(&lc);
    free(lc.acc);
    free(lc.accepted);
    if (lc.n_failed || t->partial) {
        sl_conf_free(cs);
        return NULL;
    }
    cs->only_socket = only_socket;
    return cs;
}

sl_conf_set *sl_conf_load_string(const char *text, size_t len, const char *name,
                                 const char *basedir, sl_module *const *builtin,
                                 bool check_system, sl_config_errors *errs)
{
    sl_config_tree *t = sl_config_parse_string_all(text, len, name, basedir, errs);
    if (!t) return NULL;
    return load_tree(t, basedir, builtin, check_system, errs);
}

sl_conf_set *sl_conf_load(const char *path, sl_module *const *builtin, bool check_system,
                          sl_config_errors *errs)
{
    sl_config_tree *t = sl_config_parse_file_all(path, errs);
    if (!t) return NULL;
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        sl_config_error_add(errs, path, 0, "%s", strerror(errno));
        sl_config_tree_free(t);
        return NULL;
    }
    return load_tree(t, dirname(real), builtin, check_system, errs);
}

void sl_conf_free(sl_conf_set *cs)
{
    if (!cs) return;
    struct sl_conf_priv *pv = cs->priv;
    for (size_t i = pv ? pv->n_own : 0; i-- > 0;) {
        if (pv->own[i].release)
            pv->own[i].release(pv->own[i].p);
        else
            free(pv->own[i].p);
    }
    if (pv) free(pv->own);
    free(pv);
    free(cs->basedir);
    sl_config_tree_free(cs->tree);
    free(cs);
}

bool sl_conf_has_module(const sl_conf_set *cs, const sl_module *m)
{
    for (size_t i = 0; i < cs->n_mods; i++)
        if (cs->mods[i] == m) return true;
    return false;
}

/* ---- per request ---- */

/* Does block x hold? A block whose groups a %N uses keeps them in its slot of caps. */
static bool holds(const sl_cblock *x, const sl_cond_input *in, sl_cond_capture *caps)
{
    const ops *o = x->ext;
    return sl_cond_match_capture(x, in, caps && o && o->cap_slot >= 0 ? &caps[o->cap_slot] : NULL);
}

/* Apply the blocks under b that hold (b's own stores are already in out). */
static void eval_children(const sl_cblock *b, const sl_cond_input *in, sl_conf *out,
                          sl_cond_capture *caps)
{
    for (size_t i = 0; i < b->n_children; i++) {
        for (const sl_cblock *x = b->children[i]; x; x = x->else_next) {
            if (holds(x, in, caps)) {
                apply_ops(out, x->ext);
                eval_children(x, in, out, caps);
                break;
            }
        }
    }
}

const sl_conf *sl_conf_for_request(const sl_conf_set *cs, unsigned listener,
                                   const sl_cond_input *in, sl_conf *buf, sl_cond_capture *caps)
{
    const sl_cblock *root = cs->tree->root;
    if (root->n_children == 0) return cs->global; /* no conditions at all */
    if (cs->per_listener && listener < cs->n_listen && cs->per_listener[listener])
        return cs->per_listener[listener];
    memcpy(buf, cs->global, cs->block_size);
    for (size_t i = 0; caps && i < cs->n_captures; i++) caps[i].set = false;
    eval_children(root, in, buf, caps);
    return buf;
}

int sl_conf_listeners_done(sl_conf_set *cs)
{
    const sl_cblock *root = cs->tree->root;
    if (!cs->only_socket || root->n_children == 0) return 0;
    sl_conf **pl = own(cs, calloc(cs->n_listen, sizeof *pl), NULL);
    if (!pl) return -ENOMEM;
    for (size_t l = 0; l < cs->n_listen; l++) {
        if (!(pl[l] = own(cs, malloc(cs->block_size), NULL))) return -ENOMEM;
        sl_cond_input in = {.socket = cs->listen[l].literal};
        memcpy(pl[l], cs->global, cs->block_size);
        eval_children(root, &in, pl[l], NULL);
    }
    cs->per_listener = pl;
    return 0;
}
