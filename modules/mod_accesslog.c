/* Access log (accesslog.filename, accesslog.format): one line per request.
 *
 * The format is compiled once at start-up (accesslog.c, pure) and rendered per request on the
 * loop that served it into a stack buffer, then written with one write() to a file opened with
 * O_APPEND: lines from every loop land whole, never interleaved. The file is opened as root
 * before privileges are dropped, and reopened over the same descriptor on SIGHUP/SIGUSR1 for
 * logrotate, so a loop writing at that moment writes to the old file or the new, never to a
 * closed descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "accesslog.h"
#include "addr.h"
#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "module.h"
#include "server.h"

extern sl_module sl_mod_accesslog;

typedef struct alog_conf {
    const char *filename;   /* accesslog.filename; NULL: no access log */
    const char *format;     /* accesslog.format */
} alog_conf;

typedef struct alog_state {
    int fd;
    const char *path;
    sl_accesslog_fmt *fmt;
} alog_state;

static alog_state *state(sl_server *srv)
{
    return srv->mod[sl_mod_accesslog.index];
}

/* %{Name}i: the field's combined value (RFC 9110 §5.3), its lines joined into one buffer that
 * the renderer copies out before it asks for the next field. */
typedef struct alog_ctx {
    const sl_http_request *req;
    char buf[4096];
} alog_ctx;

static const char *header(void *ud, const char *name, size_t *len)
{
    alog_ctx *a = ud;
    const sl_http_header *h = sl_http_find_header(a->req, name);
    if (!h) return NULL;
    if (!h->next) {
        *len = h->value_len;
        return h->value;
    }
    size_t n = sl_http_field_join(h, strcasecmp(name, "cookie") ? ", " : "; ", a->buf,
                                  sizeof a->buf);
    *len = n < sizeof a->buf ? n : sizeof a->buf;
    return a->buf;
}

static void alog_request_done(sl_conn *c)
{
    alog_state *st = state(c->loop->srv);
    if (!st || !c->status) return;
    char ip[64];
    sl_addr_str((const struct sockaddr *)&c->peer, ip, sizeof ip, NULL);
    const char *canon = c->loop->srv->cs->listen[c->listener].canon;
    const char *colon = strrchr(canon, ':');
    alog_ctx actx = {.req = &c->req};
    sl_accesslog_rec r = {
        .remote_addr = ip,
        .method = c->req.method_str,
        .method_len = c->req.method_str ? c->req.method_len : 0,
        .target = c->req.target,
        .target_len = c->req.target ? c->req.target_len : 0,
        .path = c->path,
        .query = c->query,
        .protocol = c->req.version == 10 ? "HTTP/1.0" : "HTTP/1.1",
        .host = c->host,
        .server_name = sl_core(c->conf)->server_name ? sl_core(c->conf)->server_name : c->host,
        .port = colon ? atoi(colon + 1) : 0,
        .status = c->status,
        .body_bytes = c->bytes_out > c->hdr_bytes ? c->bytes_out - c->hdr_bytes : 0,
        .total_bytes = c->bytes_out,
        .duration_us = (sl_now_ns() - c->req_start) / 1000,
        .keepalive_requests = c->requests,
        .when = c->req_wall,
        .header = header,
        .ud = &actx,
    };
    char buf[8192];
    size_t n = sl_accesslog_render(st->fmt, &r, buf, sizeof buf);
    ssize_t w = write(st->fd, buf, n); /* one write per line: O_APPEND keeps lines whole */
    (void)w;
}

static int alog_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    const alog_conf *ac = SL_MODCONF(conf, sl_mod_accesslog, alog_conf);
    if (!ac->filename) return 0;
    alog_state *st = calloc(1, sizeof *st);
    if (!st) return snprintf(err, errlen, "out of memory"), -1;
    char e[300];
    int r = sl_accesslog_compile(ac->format, &st->fmt, e, sizeof e);
    if (r == 0) {
        st->fd = sl_kept_open(ac->filename, O_WRONLY | O_APPEND | O_CREAT);
        if (st->fd < 0) r = st->fd;
    }
    if (r < 0) {
        snprintf(err, errlen, "accesslog.filename %s: %s", ac->filename,
                 r == -EINVAL ? e : strerror(-r));
        sl_accesslog_fmt_free(st->fmt);
        free(st);
        return -1;
    }
    st->path = ac->filename;
    srv->mod[sl_mod_accesslog.index] = st;
    srv->req_clock = true;
    return 0;
}

static void alog_reopen(sl_server *srv)
{
    alog_state *st = state(srv);
    if (st && sl_reopen_fd(st->fd, st->path) < 0)
        sl_log("cannot reopen the access log %s: %s", st->path, strerror(errno));
}

static void alog_fini(sl_server *srv)
{
    alog_state *st = state(srv);
    if (!st) return;
    sl_kept_close(st->fd);
    sl_accesslog_fmt_free(st->fmt);
    free(st);
    srv->mod[sl_mod_accesslog.index] = NULL;
}

static void alog_defaults(void *p)
{
    ((alog_conf *)p)->format = SL_ACCESSLOG_DEFAULT;
}

static int prep_format(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    sl_accesslog_fmt *f;
    if (sl_accesslog_compile(v->str, &f, ctx->err, ctx->errlen) < 0) return -1;
    sl_accesslog_fmt_free(f);
    /* The formatter can print response headers, but the server does not keep them once they
     * are sent: refuse rather than log "-" forever. */
    for (const char *q = strstr(v->str, "%{"); q; q = strstr(q + 2, "%{")) {
        const char *e = strchr(q, '}');
        if (e && e[1] == 'o') {
            snprintf(ctx->err, ctx->errlen,
                     "access log format: %%{...}o (response headers) is not supported by seekless");
            return -1;
        }
    }
    return 0;
}

static const sl_key alog_keys[] = {
    {"accesslog.filename", SL_KEY_PATH, SL_KEY_GLOBAL | SL_KEY_APPENDS | SL_KEY_OPENED_BEFORE_DROP, offsetof(alog_conf, filename), NULL, NULL},
    {"accesslog.format", SL_KEY_STRING, SL_KEY_GLOBAL, offsetof(alog_conf, format), prep_format,
     NULL},
    {NULL},
};

static const char *const alog_aliases[] = {"mod_accesslog", NULL};

sl_module sl_mod_accesslog = {
    .name = "accesslog",
    .aliases = alog_aliases,
    .keys = alog_keys,
    .conf_size = sizeof(alog_conf),
    .defaults = alog_defaults,
    .init = alog_init,
    .fini = alog_fini,
    .reopen = alog_reopen,
    .request_done = alog_request_done,
};
