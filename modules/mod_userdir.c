/* mod_userdir: /~user/ URLs served from the users' own directories (lighttpd's userdir.*):
 *   userdir.path         = "public_html"      (required: unset, the module does nothing)
 *   userdir.exclude-user = ( "root", "postmaster" )
 *   userdir.include-user = ( ... )            (if set, only these)
 *   userdir.basepath     = "/var/www/users/"  (instead of the home directory from the user
 *                                              database: basepath/user/path)
 *   userdir.letterhomes  = "enable"           (with basepath: basepath/u/user/path)
 *   userdir.active       = "disable"          (in a block: off there)
 * /~jan/x.html is /home/jan/public_html/x.html; /~jan (no slash) gets 301 to /~jan/. A user the
 * lists leave out, one the user database does not know, or without that directory leaves the
 * request to the rest of the server (usually 404), as in lighttpd.
 *
 * The user database (getpwnam: files, but also LDAP or whatever NSS is set up with) and the
 * directory may both wait: the lookup runs on a stat thread (its synchronous core, user_dir(),
 * is all a test needs), except with basepath, where no database is asked and the directory is
 * opened from the dentry cache on the loop when it can be. The directory is opened for this
 * request only (vhost.c's rules: nothing stale, not a key of the open-file cache) and becomes
 * the request's physical root, as an alias.url target would.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "connection.h"
#include "loop.h"
#include "mod_static.h"
#include "module.h"
#include "server.h"
#include "threadpool.h"
#include "vhost.h"

typedef struct ud_conf {
    const char *path;          /* userdir.path; NULL: off */
    sl_strlist exclude, include;
    const char *basepath;      /* absolute, no trailing '/'; NULL: the user database */
    bool letterhomes;
    bool active;
} ud_conf;

#define SL_KEY_CONF ud_conf

/* Per request: the user's directory, opened. */
typedef struct ud_req {
    sl_dir dir;
} ud_req;

sl_module sl_mod_userdir;

#define UCONF(c) SL_MODCONF((c)->conf, sl_mod_userdir, ud_conf)

static int prep_basepath(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *dir;
    int r = sl_key_dir(v, ctx, &dir);
    *out = dir;
    return r;
}

static bool listed(const sl_strlist *l, const char *u, size_t n)
{
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->v[i]) == n && !memcmp(l->v[i], u, n)) return true;
    return false;
}

/* lighttpd's rule for names put into a path: letters, digits, '-', '_', '.'; not "." or "..". */
static bool safe_name(const char *u, size_t n)
{
    if ((n == 1 && u[0] == '.') || (n == 2 && u[0] == '.' && u[1] == '.')) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = u[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            return false;
    }
    return true;
}

/* The user's directory path into out (cap bytes): 0, or -ENOENT (no such user, or a name that
 * cannot be a path). May ask the user database: not on the loop. */
static int user_dir(const ud_conf *uc, const char *user, char *out, size_t cap)
{
    const char *sub = uc->path[0] ? uc->path : NULL;
    int n;
    if (uc->basepath) {
        if (uc->letterhomes && user[0] == '.') return -ENOENT;
        n = uc->letterhomes ? snprintf(out, cap, "%s/%c/%s%s%s", uc->basepath, user[0], user,
                                       sub ? "/" : "", sub ? sub : "")
                            : snprintf(out, cap, "%s/%s%s%s", uc->basepath, user,
                                       sub ? "/" : "", sub ? sub : "");
    } else {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwnam_r(user, &pw, buf, sizeof buf, &res) != 0 || !res || !pw.pw_dir ||
            pw.pw_dir[0] != '/')
            return -ENOENT;
        n = snprintf(out, cap, "%s%s%s", pw.pw_dir, sub ? "/" : "", sub ? sub : "");
    }
    return n > 0 && (size_t)n < cap ? 0 : -ENOENT;
}

static void take(sl_conn *c, const char *path, int fd)
{
    ud_req *u = sl_conn_alloc(c, sizeof *u);
    char *p = u ? sl_conn_strdup(c, path, strlen(path)) : NULL;
    if (!p) {
        close(fd);
        return; /* out of request memory: the request goes on as if there were no such user */
    }
    u->dir = (sl_dir){.path = p, .fd = fd, .transient = true};
    SL_CTX(c, sl_mod_userdir) = u;
}

/* The part of the path after /~user, from its '/'. */
static const char *rest_of(const sl_conn *c, size_t *len)
{
    const char *slash = memchr(c->path + 2, '/', c->path_len - 2);
    *len = c->path_len - (size_t)(slash - c->path);
    return slash;
}

static void place(sl_conn *c)
{
    ud_req *u = SL_CTX(c, sl_mod_userdir);
    if (!u) return;
    c->phys_root = &u->dir;
    c->phys_path = rest_of(c, &c->phys_len);
}

/* The lookup on a stat thread. */
typedef struct ud_job {
    sl_job job;
    sl_conn *c;
    const ud_conf *uc;
    int fd;
    char path[4200];
    char user[256];
} ud_job;

static void ud_work(sl_job *job)
{
    ud_job *j = (ud_job *)job;
    j->fd = user_dir(j->uc, j->user, j->path, sizeof j->path) < 0
                ? -ENOENT
                : sl_vhost_open_dir(j->path, false);
}

static void ud_done(sl_job *job)
{
    ud_job *j = (ud_job *)job;
    sl_conn *c = j->c;
    if (sl_vhost_job_back(c, j->fd)) {
        if (j->fd >= 0) {
            take(c, j->path, j->fd);
            place(c);
        }
        sl_conn_handled(c, SL_GO_ON);
    }
    free(j);
}

static sl_hresult ud_physical(sl_conn *c)
{
    const ud_conf *uc = UCONF(c);
    if (!uc->path || !uc->active || c->handler || c->path_len < 2 || c->path[1] != '~')
        return SL_GO_ON;
    if (SL_CTX(c, sl_mod_userdir)) { /* started over after a rewrite: put it back */
        place(c);
        return SL_GO_ON;
    }
    const char *user = c->path + 2;
    const char *slash = memchr(user, '/', c->path_len - 2);
    size_t n = slash ? (size_t)(slash - user) : c->path_len - 2;
    if (!slash) {
        if (!n) return SL_GO_ON; /* "/~" names no user */
        sl_static_redirect_dir(c); /* a user's directory, asked for without its slash */
        return SL_FINISHED;
    }
    if (!n || n >= 256 || !safe_name(user, n)) return SL_GO_ON;
    if (listed(&uc->exclude, user, n) || (uc->include.n && !listed(&uc->include, user, n)))
        return SL_GO_ON;
    ud_job *j = malloc(sizeof *j);
    if (!j) return SL_GO_ON;
    *j = (ud_job){.job = {.work = ud_work, .done = ud_done}, .c = c, .uc = uc, .fd = -1};
    memcpy(j->user, user, n);
    j->user[n] = 0;
    sl_tpool *pool = c->loop->srv->stat_pool;
    if (uc->basepath && user_dir(uc, j->user, j->path, sizeof j->path) == 0) {
        /* No database to ask: the directory alone, from the dentry cache if it can say. */
        j->fd = sl_vhost_open_dir(j->path, pool != NULL);
        if (j->fd != -EAGAIN) {
            if (j->fd >= 0) {
                take(c, j->path, j->fd);
                place(c);
            }
            free(j);
            return SL_GO_ON;
        }
    }
    if (pool && sl_tpool_submit(pool, c->loop->port, &j->job) == 0) {
        c->pending++;
        return SL_WAIT;
    }
    /* No stat threads (server.max-stat-threads = 0), or the queue is full: here, now. */
    ud_work(&j->job);
    if (j->fd >= 0) {
        take(c, j->path, j->fd);
        place(c);
    }
    free(j);
    return SL_GO_ON;
}

static void ud_request_done(sl_conn *c)
{
    ud_req *u = SL_CTX(c, sl_mod_userdir);
    if (u) close(u->dir.fd);
    SL_CTX(c, sl_mod_userdir) = NULL;
}

static void ud_defaults(void *p)
{
    ((ud_conf *)p)->active = true;
}

sl_module sl_mod_userdir = {
    SL_MODULE_HEAD("userdir", ud_conf, "mod_userdir"),
    .keys = SL_KEYS(
        SL_KEY_AT("userdir.path", SL_KEY_STRING, path),
        SL_KEY_AT("userdir.exclude-user", SL_KEY_STRLIST, exclude),
        SL_KEY_AT("userdir.include-user", SL_KEY_STRLIST, include),
        SL_KEY_PREP("userdir.basepath", SL_KEY_VALUE, basepath, prep_basepath, free),
        SL_KEY_AT("userdir.letterhomes", SL_KEY_BOOL, letterhomes),
        SL_KEY_AT("userdir.active", SL_KEY_BOOL, active)),
    .defaults = ud_defaults,
    .physical = ud_physical,
    .request_done = ud_request_done,
};
