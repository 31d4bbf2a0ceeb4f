/* mod_evhost: the document root from a pattern over the host's labels (lighttpd's
 * evhost.path-pattern):
 *   evhost.path-pattern = "/var/www/%0/%3/htdocs/"
 * For "www.shop.example.org": %0 "example.org" (domain and top-level domain), %1 "org", %2
 * "example", %3 "shop", %4 "www" (and so on leftwards), %_ the whole host, %% a '%', %{N} part N
 * and %{N.M} its M-th character (1-based; 0: the whole part). The port never counts; an IPv6
 * literal is all %0. A part the host lacks is empty. When the directory the pattern gives does
 * not exist (or the host cannot name one) the configured server.document-root serves, as in
 * lighttpd. The pattern is compiled at load; the lookup and its thread fallback are vhost.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "module.h"
#include "vhost.h"

/* A compiled pattern: literal text and placeholders in turn. */
typedef struct evh_piece {
    const char *text; /* literal (NULL: a placeholder) */
    size_t len;
    int part;         /* placeholder: -1 the whole host, else the part number */
    int ch;           /* placeholder: the character of the part (1-based), 0 the whole part */
} evh_piece;

typedef struct evh_pattern {
    char *src;
    size_t n;
    evh_piece p[];
} evh_pattern;

typedef struct evh_conf {
    const evh_pattern *pattern; /* NULL: off */
} evh_conf;

#define SL_KEY_CONF evh_conf

sl_module sl_mod_evhost;

#define ECONF(c) SL_MODCONF((c)->conf, sl_mod_evhost, evh_conf)

static void pattern_free(void *p)
{
    evh_pattern *e = p;
    if (e) free(e->src);
    free(e);
}

static int prep_pattern(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING) return sl_key_fail(ctx, "evhost.path-pattern must be a string");
    if (!v->str[0]) return 0; /* "": off */
    if (v->str[0] != '/')
        return sl_key_fail(ctx, "evhost.path-pattern \"%s\" must be an absolute path", v->str);
    size_t len = strlen(v->str);
    evh_pattern *e = calloc(1, sizeof *e + (len + 1) * sizeof e->p[0]);
    if (!e || !(e->src = strdup(v->str))) {
        free(e);
        return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    }
    const char *s = e->src;
    while (*s) {
        evh_piece *pc = &e->p[e->n++];
        if (*s != '%') {
            size_t k = strcspn(s, "%");
            *pc = (evh_piece){.text = s, .len = k};
            s += k;
            continue;
        }
        if (s[1] == '%') {
            *pc = (evh_piece){.text = s, .len = 1};
            s += 2;
        } else if (s[1] == '_') {
            *pc = (evh_piece){.part = -1};
            s += 2;
        } else if (s[1] >= '0' && s[1] <= '9') {
            *pc = (evh_piece){.part = s[1] - '0'};
            s += 2;
        } else if (s[1] == '{' && s[2] >= '0' && s[2] <= '9' &&
                   (s[3] == '}' || (s[3] == '.' && s[4] >= '0' && s[4] <= '9' && s[5] == '}'))) {
            *pc = (evh_piece){.part = s[2] - '0', .ch = s[3] == '.' ? s[4] - '0' : 0};
            s += s[3] == '}' ? 4 : 6;
        } else {
            snprintf(ctx->err, ctx->errlen, "evhost.path-pattern \"%s\": \"%.3s\" is not a "
                     "placeholder (%%0..%%9, %%_, %%%%, %%{N}, %%{N.M})", v->str, s);
            pattern_free(e);
            return -1;
        }
    }
    *out = e;
    return 0;
}

/* Part k of host (no port): 0 the last two labels, 1 the last, 2 the one before, ... */
static void part_of(const char *host, int k, const char **p, size_t *n)
{
    size_t len = strlen(host);
    *p = host;
    *n = 0;
    if (host[0] == '[') { /* an IPv6 literal is all %0 */
        if (k == 0) *n = len;
        return;
    }
    if (k == 0) {
        const char *last = memrchr(host, '.', len);
        const char *before = last ? memrchr(host, '.', (size_t)(last - host)) : NULL;
        *p = before ? before + 1 : host;
        *n = len - (size_t)(*p - host);
        return;
    }
    size_t end = len;
    for (int i = 1;; i++) {
        size_t start = end;
        while (start > 0 && host[start - 1] != '.') start--;
        if (i == k) {
            *p = host + start;
            *n = end - start;
            return;
        }
        if (start == 0) return; /* fewer labels than k */
        end = start - 1;
    }
}

static sl_hresult evh_uri_clean(sl_conn *c)
{
    const evh_pattern *e = ECONF(c)->pattern;
    if (!e) return SL_GO_ON;
    if (sl_vhost_applied(c, &sl_mod_evhost)) return sl_vhost_apply(c, &sl_mod_evhost, NULL, 0);
    const char *host = sl_vhost_name(c);
    if (!host) return SL_GO_ON;
    char path[4096];
    size_t at = 0;
    for (size_t i = 0; i < e->n; i++) {
        const evh_piece *pc = &e->p[i];
        const char *s = pc->text;
        size_t n = pc->len;
        if (!s) {
            if (pc->part < 0) {
                s = host;
                n = strlen(host);
            } else {
                part_of(host, pc->part, &s, &n);
                if (pc->ch) {
                    s += pc->ch - 1;
                    n = (size_t)pc->ch <= n ? 1 : 0;
                }
            }
        }
        if (at + n >= sizeof path) return SL_GO_ON; /* no such directory */
        memcpy(path + at, s, n);
        at += n;
    }
    path[at] = 0;
    /* An empty part can make "//" or end on "/.": still within the pattern's directories. */
    const char *paths[1] = {sl_conn_strdup(c, path, at)};
    return paths[0] ? sl_vhost_apply(c, &sl_mod_evhost, paths, 1) : SL_GO_ON;
}

static void evh_request_done(sl_conn *c)
{
    sl_vhost_done(c, &sl_mod_evhost);
}

sl_module sl_mod_evhost = {
    SL_MODULE_HEAD("evhost", evh_conf, "mod_evhost"),
    .keys = SL_KEYS(SL_KEY_PREP("evhost.path-pattern", SL_KEY_VALUE, pattern, prep_pattern,
                                pattern_free)),
    .uri_clean = evh_uri_clean,
    .request_done = evh_request_done,
};
