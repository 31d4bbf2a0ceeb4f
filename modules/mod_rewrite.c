/* mod_rewrite: lighttpd's url.rewrite-* keys rewrite the request-target inside the server,
 * before a file or a backend is chosen:
 *   url.rewrite-once   = ( "^/img/(.*)$" => "/images/$1" )     (also url.rewrite-final and
 *                                                               the old name url.rewrite)
 *   url.rewrite-repeat = ( "^/a/(.*)$" => "/b/$1" )
 *   url.rewrite-if-not-file = ( "^/(.*)$" => "/index.php/$1" ) (and -repeat-if-not-file)
 *
 * The rules and their templates are urlrules.h's (as mod_redirect's). In the uri_raw phase the
 * target (normalized as lighttpd's default http-parseopts leave it, with its query) is tried
 * against the rules; a match replaces the target and the request starts over (SL_COMEBACK: the
 * new target normalized, the conditions evaluated for it, every module's uri_raw hook again).
 * A match of a -once rule ends rewriting for the request; a -repeat rule's result is tried
 * against the rules again (a loop ends at the core's SL_MAX_COMEBACKS with 500). The
 * -if-not-file rules act in the physical phase, only when no module claimed the request for
 * itself (c->handler: proxy-core's routes) and the mapped file is not a regular file. Finding
 * that out is a lookup that may read the disk: from the dentry cache on the loop when it can
 * answer, else on a stat thread (never blocking the loop).
 *
 * Which rules apply follows lighttpd: the four uri_raw keys set in one config block act
 * together (the -once ones first, then -repeat), and a block that sets any of them replaces the
 * rules of earlier blocks (so a url.rewrite-repeat inside a condition drops a url.rewrite-once
 * of the top level); the two -if-not-file keys likewise. A result must be a path ("/..."); a
 * rule that makes anything else answers 500 and is logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "loop.h"
#include "module.h"
#include "openat.h"
#include "path.h"
#include "server.h"
#include "threadpool.h"
#include "urlrules.h"

/* One key's rules and the block that set them. */
typedef struct rw_list {
    sl_urlrules *rules;
    unsigned block;
} rw_list;

typedef struct sl_rewrite_conf {
    /* uri_raw: in the order lighttpd tries them when one block sets several */
    const rw_list *once, *final, *plain, *repeat;
    /* physical */
    const rw_list *nf, *repeat_nf;
} sl_rewrite_conf;

#define SL_KEY_CONF sl_rewrite_conf

sl_module sl_mod_rewrite;

#define RCONF(c) SL_MODCONF((c)->conf, sl_mod_rewrite, sl_rewrite_conf)

/* Per request, in c->mctx: no rule may rewrite any more (a -once rule did). */
#define DONE_FLAG ((void *)(uintptr_t)1)

static void list_release(void *p)
{
    rw_list *l = p;
    if (!l) return;
    sl_urlrules_free(l->rules);
    free(l);
}

static int prep_list(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    rw_list *l = calloc(1, sizeof *l);
    if (!l) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    if (sl_urlrules_prepare(&l->rules, v, ctx) < 0) {
        free(l);
        return -1;
    }
    l->block = ctx->block;
    *out = l;
    return 0;
}

/* The lists that apply, in order, from the last block that set any of set[0..n): *once says
 * how many of the first lists are -once ones. Returns how many lists. */
static size_t pick(const rw_list *const *set, size_t n, size_t n_once, const rw_list **out,
                   size_t *once)
{
    unsigned last = 0;
    bool any = false;
    for (size_t i = 0; i < n; i++)
        if (set[i] && (!any || set[i]->block > last)) {
            last = set[i]->block;
            any = true;
        }
    size_t k = 0;
    *once = 0;
    for (size_t i = 0; any && i < n; i++)
        if (set[i] && set[i]->block == last) {
            out[k++] = set[i];
            if (i < n_once) (*once)++;
        }
    return k;
}

/* Try the lists on the current target; on a match set the new target. */
static sl_hresult rewrite(sl_conn *c, const rw_list *const *set, size_t n, size_t n_once)
{
    if (SL_CTX(c, sl_mod_rewrite) == DONE_FLAG) return SL_GO_ON;
    const rw_list *lists[4];
    size_t once;
    size_t nl = pick(set, n, n_once, lists, &once);
    if (!nl || !c->target) return SL_GO_ON;
    char norm[8192];
    ssize_t tl = sl_target_normalize(c->target, c->target_len, norm, sizeof norm);
    if (tl < 0) return SL_GO_ON; /* longer than any head seekless reads: nothing to match */
    sl_url_env env = {.scheme = c->scheme, .authority = c->host, .port = sl_conn_local_port(c),
                      .caps = c->caps};
    pcre2_match_data *md = c->loop->mod[sl_mod_rewrite.index];
    char to[8192];
    for (size_t i = 0; i < nl; i++) {
        size_t len, idx;
        int r = sl_urlrules_apply(lists[i]->rules, md, norm, (size_t)tl, &env, to, sizeof to,
                                  &len, &idx);
        if (r == SL_URL_NOMATCH) continue;
        if (r == SL_URL_EXEMPT) return SL_GO_ON;
        if (r < 0 || to[0] != '/') {
            sl_log("mod_rewrite: %s: %.*s%s",
                   r == -ENAMETOOLONG ? "the result is too long"
                   : r < 0            ? "PCRE2 match failed"
                                      : "the result is not a path (does not begin with '/')",
                   (int)(c->target_len > 200 ? 200 : c->target_len), c->target,
                   c->target_len > 200 ? "..." : "");
            c->status = 500;
            return SL_ERROR;
        }
        /* Kept as lighttpd keeps the new target: normalized (what a backend sees as
         * REDIRECT_URI and QUERY_STRING). */
        char *t = sl_conn_alloc(c, len * 3 + 1);
        ssize_t nn = t ? sl_target_normalize(to, len, t, len * 3 + 1) : -1;
        if (nn < 0) {
            c->status = 503;
            return SL_ERROR;
        }
        c->target = t;
        c->target_len = (size_t)nn;
        if (i < once) SL_CTX(c, sl_mod_rewrite) = DONE_FLAG;
        return SL_COMEBACK;
    }
    return SL_GO_ON;
}

static sl_hresult rewrite_uri_raw(sl_conn *c)
{
    const sl_rewrite_conf *rc = RCONF(c);
    const rw_list *set[4] = {rc->once, rc->final, rc->plain, rc->repeat};
    return rewrite(c, set, 4, 3);
}

/* 1: a regular file; 0: anything else (missing, a directory, unreadable); -EAGAIN: only when
 * cached, and the dentry cache could not say. */
static int is_file(int dirfd, const char *rel, bool follow, bool cached)
{
    int fd = sl_open_beneath_ex(dirfd, rel, O_PATH | O_CLOEXEC, follow, cached);
    if (fd == -EAGAIN) return -EAGAIN;
    if (fd < 0) return 0;
    struct stat st;
    int r = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    return r;
}

static sl_hresult rewrite_nf(sl_conn *c)
{
    const sl_rewrite_conf *rc = RCONF(c);
    const rw_list *set[2] = {rc->nf, rc->repeat_nf};
    return rewrite(c, set, 2, 1);
}

/* The lookup on a stat thread. */
typedef struct nf_job {
    sl_job job;
    sl_conn *c;
    int dirfd;
    bool follow;
    int res;
    char rel[];
} nf_job;

static void nf_work(sl_job *job)
{
    nf_job *j = (nf_job *)job;
    j->res = is_file(j->dirfd, j->rel, j->follow, false);
}

static void nf_done(sl_job *job)
{
    nf_job *j = (nf_job *)job;
    sl_conn *c = j->c;
    int res = j->res;
    free(j);
    c->pending--;
    if (c->closed) {
        sl_conn_release(c); /* the client went away while we looked */
        return;
    }
    sl_conn_handled(c, res == 1 ? SL_GO_ON : rewrite_nf(c));
}

static sl_hresult rewrite_physical(sl_conn *c)
{
    const sl_rewrite_conf *rc = RCONF(c);
    if ((!rc->nf && !rc->repeat_nf) || c->handler || SL_CTX(c, sl_mod_rewrite) == DONE_FLAG)
        return SL_GO_ON;
    const char *rel;
    int dirfd = sl_conn_mapped(c, &rel);
    bool follow = sl_core(c->conf)->follow_symlink;
    sl_tpool *pool = c->loop->srv->stat_pool;
    int r = is_file(dirfd, rel, follow, pool != NULL);
    if (r == -EAGAIN) {
        /* Not in the dentry cache: the lookup may wait for the disk, so not on the loop. */
        size_t n = strlen(rel);
        nf_job *j = malloc(sizeof *j + n + 1);
        if (j) {
            *j = (nf_job){.job = {.work = nf_work, .done = nf_done}, .c = c, .dirfd = dirfd,
                          .follow = follow};
            memcpy(j->rel, rel, n + 1);
            if (sl_tpool_submit(pool, c->loop->port, &j->job) == 0) {
                c->pending++;
                return SL_WAIT;
            }
            free(j);
        }
        r = is_file(dirfd, rel, follow, false); /* queue full: a slow answer beats none */
    }
    return r == 1 ? SL_GO_ON : rewrite_nf(c);
}

static int rewrite_loop_init(sl_loop *loop, char *err, size_t errlen)
{
    return sl_urlrules_loop_init(&loop->mod[sl_mod_rewrite.index], err, errlen);
}

static void rewrite_loop_fini(sl_loop *loop)
{
    sl_urlrules_loop_fini(&loop->mod[sl_mod_rewrite.index]);
}

sl_module sl_mod_rewrite = {
    SL_MODULE_HEAD("rewrite", sl_rewrite_conf, "mod_rewrite"),
    .keys = SL_KEYS(
        SL_KEY_PREP("url.rewrite-once", SL_KEY_VALUE, once, prep_list, list_release),
        SL_KEY_PREP("url.rewrite-final", SL_KEY_VALUE, final, prep_list, list_release),
        SL_KEY_PREP("url.rewrite", SL_KEY_VALUE, plain, prep_list, list_release),
        SL_KEY_PREP("url.rewrite-repeat", SL_KEY_VALUE, repeat, prep_list, list_release),
        SL_KEY_PREP("url.rewrite-if-not-file", SL_KEY_VALUE, nf, prep_list, list_release),
        SL_KEY_PREP("url.rewrite-repeat-if-not-file", SL_KEY_VALUE, repeat_nf, prep_list,
                    list_release)),
    .loop_init = rewrite_loop_init,
    .loop_fini = rewrite_loop_fini,
    .uri_raw = rewrite_uri_raw,
    .physical = rewrite_physical,
};
