/* Access log (accesslog.filename, accesslog.format): one line per request.
 *
 * Both keys may be set in conditions, as in lighttpd (a log per virtual host). Each distinct
 * filename is one target, made when the config is loaded and shared by every block naming it:
 * a file, opened with O_APPEND, or a piped logger ("|command", started with /bin/sh -c, its stdin
 * a pipe). Targets are opened as the user starting the server, before privileges are dropped,
 * and kept across a graceful restart (the new server takes the old one's descriptors, so a
 * piped logger keeps running and sees one stream). A format is compiled once per block that sets
 * one.
 *
 * A line is rendered on the loop that served the request into a stack buffer and written with
 * one write(): O_APPEND keeps lines from every loop whole in a file; for a pipe a line is cut at
 * PIPE_BUF, the most the kernel writes atomically. Writes block like a file's would: a logger
 * that stops reading stalls the loops (lighttpd behaves the same) rather than losing lines.
 * Files are reopened over the same descriptor on SIGHUP/SIGUSR1 for logrotate, so a loop writing
 * at that moment writes to the old file or the new, never to a closed descriptor; pipes are left
 * alone. The line is rendered in the log_request hook, before any module's request_done frees
 * what the response's header fields point into (%{Name}o).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accesslog.h"
#include "addr.h"
#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "http_date.h"
#include "log.h"
#include "loop.h"
#include "module.h"
#include "registry.h"
#include "server.h"
#include "threadpool.h"

extern sl_module sl_mod_accesslog;

/* Where lines go: a file or a piped logger, shared by every block that names it. */
typedef struct alog_target {
    sl_named named;    /* its name: absolute path, or "|command"; refs: blocks of loaded
                        * configs naming it */
    int fd;            /* -1 until the server opens it (init) */
    pid_t pid;         /* a piped logger this process started, else 0 */
} alog_target;

/* Every target of the configs loaded now (the running one, and while SIGUSR1 checks a new one,
 * that one too). Touched only on the main thread: config load and free, init, reopen, fini. */
static sl_registry targets = SL_REGISTRY_INIT;

typedef struct alog_conf {
    alog_target *target;           /* accesslog.filename; NULL: no access log */
    const sl_accesslog_fmt *fmt;   /* accesslog.format; NULL: lighttpd's default */
} alog_conf;

#define SL_KEY_CONF alog_conf

/* A server's own: the targets its init opened (a server set up only to check a new config for
 * a graceful restart opens none of those the running one has, and closes only its own), and
 * the default format. */
typedef struct alog_state {
    sl_accesslog_fmt *default_fmt;
    size_t n_opened;
    alog_target *opened[];
} alog_state;

static alog_state *state(const sl_server *srv)
{
    return srv->mod[sl_mod_accesslog.index];
}

static void target_release(void *p)
{
    alog_target *t = p;
    if (!sl_registry_drop(&targets, &t->named)) return;
    if (t->fd >= 0) sl_kept_close(t->fd);
    sl_named_free(&t->named);
}

static int prep_filename(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING || !v->str[0])
        return sl_key_fail(ctx, "accesslog.filename must be a file name or \"|command\"");
    char *name;
    if (v->str[0] == '|') {
        if (!v->str[1 + strspn(v->str + 1, " \t")])
            return sl_key_fail(ctx, "accesslog.filename \"|\": no command to pipe to");
        name = strdup(v->str);
    } else {
        name = sl_key_abs_path(ctx, v->str);
    }
    if (!name) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    bool created;
    alog_target *t = (alog_target *)sl_registry_get(&targets, name, sizeof *t, &created);
    if (!t) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    if (created) t->fd = -1;
    *out = t;
    /* Opened by the starting user, before the drop (init). The check keeps the name: the
     * target's, which lives as long as this config. */
    if (t->named.name[0] != '|') sl_key_access(ctx, t->named.name, SL_ACCESS_APPEND_FILE, false);
    return 0;
}

static void fmt_release(void *p)
{
    sl_accesslog_fmt_free(p);
}

static int prep_format(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING) return sl_key_fail(ctx, "accesslog.format must be a string");
    sl_accesslog_fmt *f;
    if (sl_accesslog_compile(v->str, &f, ctx->err, ctx->errlen) < 0) return -1;
    *out = f;
    return 0;
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

/* %{Name}o: the response's header fields as sent, the core's own (Content-Length, Date,
 * Server, Connection) included; several fields of one name joined with ", ". */
typedef struct alog_resp {
    const sl_conn *c;
    char buf[4096];
} alog_resp;

static const char *resp_header(void *ud, const char *name, size_t *len)
{
    alog_resp *a = ud;
    const sl_resp *r = &a->c->resp;
    size_t nl = strlen(name), n = 0;
    bool found = false;
    for (unsigned i = 0; i < r->n_fields; i++) {
        const sl_resp_field *f = &r->fields[i];
        if (f->name_len != nl || strncasecmp(f->name, name, nl)) continue;
        if (found && n + 2 < sizeof a->buf) {
            memcpy(a->buf + n, ", ", 2);
            n += 2;
        }
        size_t k = f->value_len < sizeof a->buf - n ? f->value_len : sizeof a->buf - n;
        memcpy(a->buf + n, f->value, k);
        n += k;
        found = true;
    }
    if (found) {
        *len = n;
        return a->buf;
    }
    if (!r->head_sent) return NULL; /* cut short before a head went out: nothing else was sent */
    const char *tag = sl_core(a->c->conf)->server_tag;
    const char *v = NULL;
    if (!strcasecmp(name, "Content-Length") && r->content_length != UINT64_MAX) {
        *len = (size_t)snprintf(a->buf, sizeof a->buf, "%llu", (unsigned long long)r->content_length);
        return a->buf;
    }
    if (!strcasecmp(name, "Server") && tag[0]) v = tag;
    else if (!strcasecmp(name, "Date")) v = sl_loop_date(a->c->loop);
    else if (!strcasecmp(name, "Connection") && (!a->c->keep_alive || a->c->req.version == 10))
        v = a->c->keep_alive ? "keep-alive" : "close";
    if (v) *len = strlen(v);
    return v;
}

static void alog_log_request(sl_conn *c)
{
    const alog_conf *ac = SL_MODCONF(c->conf, sl_mod_accesslog, alog_conf);
    const alog_target *t = ac->target;
    if (!t || t->fd < 0) return;
    const alog_state *st = state(c->loop->srv);
    char ip[64];
    sl_addr_str((const struct sockaddr *)&c->peer, ip, sizeof ip, NULL);
    const char *canon = c->loop->srv->cs->listen[c->listener].canon;
    const char *colon = strrchr(canon, ':');
    alog_ctx actx = {.req = &c->req};
    alog_resp aresp = {.c = c};
    sl_accesslog_rec r = {
        .remote_addr = ip,
        .remote_user = c->remote_user,
        .method = c->req.method_str,
        .method_len = c->req.method_str ? c->req.method_len : 0,
        .target = c->req.target,
        .target_len = c->req.target ? c->req.target_len : 0,
        .path = c->path,
        .query = c->query,
        .protocol = c->req.version == 10 ? "HTTP/1.0" : c->req.version == 20 ? "HTTP/2.0" : "HTTP/1.1",
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
        .resp_header = resp_header,
        .resp_ud = &aresp,
    };
    char buf[8192];
    size_t n = sl_accesslog_render(ac->fmt ? ac->fmt : st->default_fmt, &r, buf,
                                   t->named.name[0] == '|' ? PIPE_BUF : sizeof buf);
    ssize_t w = write(t->fd, buf, n); /* one write per line: kept whole */
    (void)w;
}

static int alog_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    (void)conf;
    if (!targets.head) return 0;
    size_t n = 0;
    for (sl_named *e = targets.head; e; e = e->next) n++;
    alog_state *st = calloc(1, sizeof *st + n * sizeof st->opened[0]);
    if (!st) return snprintf(err, errlen, "out of memory"), -1;
    srv->mod[sl_mod_accesslog.index] = st; /* fini undoes what was done if this fails */
    if (sl_accesslog_compile(SL_ACCESSLOG_DEFAULT, &st->default_fmt, err, errlen) < 0) return -1;
    for (sl_named *e = targets.head; e; e = e->next) {
        alog_target *t = (alog_target *)e;
        if (t->fd >= 0) continue; /* the running server's (this one checks a new config) */
        const char *name = t->named.name;
        int fd = name[0] == '|' ? sl_kept_spawn(name + 1, &t->pid)
                                : sl_kept_open(name, O_WRONLY | O_APPEND | O_CREAT);
        if (fd < 0) {
            snprintf(err, errlen, "accesslog.filename %s: %s", t->named.name, strerror(-fd));
            return -1;
        }
        t->fd = fd;
        st->opened[st->n_opened++] = t;
    }
    srv->req_clock = true;
    return 0;
}

static void alog_reopen(sl_server *srv)
{
    const alog_state *st = state(srv);
    for (size_t i = 0; st && i < st->n_opened; i++) {
        const alog_target *t = st->opened[i];
        if (t->named.name[0] != '|' && sl_reopen_fd(t->fd, t->named.name) < 0)
            sl_log("cannot reopen the access log %s: %s", t->named.name, strerror(errno));
    }
}

/* Close the targets this server opened. A piped logger it started sees the end of its input
 * and is given up to 2 s to write out what it holds, then reaped (no zombie is left); after a
 * graceful restart the new server writes to it on, so it is left running (init reaps it later). */
static void alog_fini(sl_server *srv)
{
    alog_state *st = state(srv);
    if (!st) return;
    for (size_t i = 0; i < st->n_opened; i++) {
        alog_target *t = st->opened[i];
        sl_kept_close(t->fd);
        t->fd = -1;
        for (int tries = 0; t->pid && !srv->handed_over && tries < 200; tries++) {
            if (waitpid(t->pid, NULL, WNOHANG) != 0) t->pid = 0;
            else poll(NULL, 0, 10);
        }
        if (t->pid && !srv->handed_over)
            sl_log("access log %s: the logger (pid %ld) is still running", t->named.name,
                   (long)t->pid);
        t->pid = 0;
    }
    sl_accesslog_fmt_free(st->default_fmt);
    free(st);
    srv->mod[sl_mod_accesslog.index] = NULL;
}

sl_module sl_mod_accesslog = {
    SL_MODULE_HEAD("accesslog", alog_conf, "mod_accesslog"),
    .keys = SL_KEYS(
        SL_KEY_PREP("accesslog.filename", SL_KEY_VALUE, target, prep_filename, target_release),
        SL_KEY_PREP("accesslog.format", SL_KEY_VALUE, fmt, prep_format, fmt_release)),
    .init = alog_init,
    .fini = alog_fini,
    .reopen = alog_reopen,
    .log_request = alog_log_request,
};
