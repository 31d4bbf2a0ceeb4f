/* Virtual hosting's shared part: opening the directory a host maps to as the request's document
 * root.
 *
 * The directory is opened per request (O_PATH, closed when the request ends), so a site created,
 * renamed or removed is seen by the next request, with nothing cached to go stale: one openat2
 * and one close, as any static server pays per file. The open runs on the loop only when the
 * kernel can answer from its dentry cache (RESOLVE_CACHED); a cold lookup goes to a stat thread,
 * as every other lookup that may wait for the disk does. The host part of the path is checked
 * first (sl_vhost_name), so no host can lead outside the configured pattern; symlinks are
 * followed, as lighttpd's documentation suggests for several names of one site.
 */
#include "vhost.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_conf.h"
#include "loop.h"
#include "openat.h"
#include "server.h"
#include "threadpool.h"

/* What a request keeps in its module slot: the directory chosen (fd -1: none exists). */
typedef struct vh_req {
    sl_dir dir;
} vh_req;

const char *sl_vhost_name(sl_conn *c)
{
    const char *h = c->host;
    size_t n = strlen(h);
    if (h[0] == '[') {
        const char *close = strchr(h, ']');
        if (!close) return NULL;
        n = (size_t)(close - h) + 1;
    } else {
        const char *colon = strchr(h, ':');
        if (colon) n = (size_t)(colon - h);
    }
    if (!n || h[0] == '.' || memchr(h, '/', n) || memchr(h, '\\', n)) return NULL;
    return sl_conn_strdup(c, h, n);
}

/* Open path as a directory: from the dentry cache only (cached; -EAGAIN when it cannot tell),
 * or by a lookup that may wait. An fd or a negative errno. */
int sl_vhost_open_dir(const char *path, bool cached)
{
    if (cached) {
        if (!sl_open_cached_works()) return -EAGAIN;
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_CACHED};
        long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
        /* No openat2 (valgrind, old kernels) or no RESOLVE_CACHED: the kernel cannot say. */
        if (fd < 0 && (errno == ENOSYS || errno == EINVAL || errno == E2BIG)) return -EAGAIN;
        return fd < 0 ? -errno : (int)fd;
    }
    int fd;
    do fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

/* The first of paths that opens: its index, with *fd; -1 when none does; -EAGAIN (cached only)
 * when the dentry cache could not say for one of them before one opened. */
static int first_dir(const char *const *paths, size_t n, bool cached, int *fd)
{
    for (size_t i = 0; i < n; i++) {
        int r = sl_vhost_open_dir(paths[i], cached);
        if (r == -EAGAIN) return -EAGAIN;
        if (r >= 0) {
            *fd = r;
            return (int)i;
        }
    }
    return -1;
}

static void take(sl_conn *c, const sl_module *mod, const char *const *paths, int i, int fd)
{
    vh_req *v = sl_conn_alloc(c, sizeof *v);
    if (!v) {
        if (fd >= 0) close(fd);
        return; /* out of request memory: the configured document root serves */
    }
    v->dir.fd = i >= 0 ? fd : -1;
    v->dir.transient = true;
    /* Without a trailing '/', as configured document roots are (X-Sendfile's roots, the
     * DOCUMENT_ROOT back ends get). */
    size_t len = i >= 0 ? strlen(paths[i]) : 0;
    while (len > 1 && paths[i][len - 1] == '/') len--;
    v->dir.path = i >= 0 ? sl_conn_strdup(c, paths[i], len) : NULL;
    if (i >= 0 && !v->dir.path) {
        close(fd);
        v->dir.fd = -1;
    }
    c->mctx[mod->index] = v;
    if (v->dir.fd >= 0) c->docroot = &v->dir;
}

/* The lookup on a stat thread. */
typedef struct vh_job {
    sl_job job;
    sl_conn *c;
    const sl_module *mod;
    size_t n;
    int found, fd;
    char *paths[4];
} vh_job;

static void vh_work(sl_job *job)
{
    vh_job *j = (vh_job *)job;
    j->found = first_dir((const char *const *)j->paths, j->n, false, &j->fd);
}

bool sl_vhost_job_back(sl_conn *c, int fd)
{
    c->pending--;
    if (!c->closed) return true;
    if (fd >= 0) close(fd);
    sl_conn_release(c); /* the client went away while we looked */
    return false;
}

static void vh_done(sl_job *job)
{
    vh_job *j = (vh_job *)job;
    sl_conn *c = j->c;
    if (sl_vhost_job_back(c, j->found >= 0 ? j->fd : -1)) {
        take(c, j->mod, (const char *const *)j->paths, j->found, j->fd);
        sl_conn_handled(c, SL_GO_ON);
    }
    for (size_t i = 0; i < j->n; i++) free(j->paths[i]);
    free(j);
}

bool sl_vhost_applied(const sl_conn *c, const sl_module *mod)
{
    return c->mctx[mod->index] != NULL;
}

sl_hresult sl_vhost_apply(sl_conn *c, const sl_module *mod, const char *const *paths, size_t n)
{
    vh_req *v = c->mctx[mod->index];
    if (v) { /* started over after a rewrite: the conditions reset the document root */
        if (v->dir.fd >= 0) c->docroot = &v->dir;
        return SL_GO_ON;
    }
    if (n > 4) n = 4;
    sl_tpool *pool = c->loop->srv->stat_pool;
    int fd = -1;
    int i = first_dir(paths, n, pool != NULL, &fd);
    if (i == -EAGAIN) {
        /* Not in the dentry cache: the lookup may wait for the disk, so not on the loop. */
        vh_job *j = calloc(1, sizeof *j);
        bool ok = j != NULL;
        for (size_t k = 0; ok && k < n; k++) ok = (j->paths[k] = strdup(paths[k])) != NULL;
        if (ok) {
            j->job = (sl_job){.work = vh_work, .done = vh_done};
            j->c = c;
            j->mod = mod;
            j->n = n;
            if (sl_tpool_submit(pool, c->loop->port, &j->job) == 0) {
                c->pending++;
                return SL_WAIT;
            }
        }
        if (j)
            for (size_t k = 0; k < n; k++) free(j->paths[k]);
        free(j);
        i = first_dir(paths, n, false, &fd); /* queue full: a slow answer beats none */
    }
    take(c, mod, paths, i, fd);
    return SL_GO_ON;
}

void sl_vhost_done(sl_conn *c, const sl_module *mod)
{
    vh_req *v = c->mctx[mod->index];
    if (v && v->dir.fd >= 0) close(v->dir.fd);
    c->mctx[mod->index] = NULL;
}
