/* mod_simple_vhost: one directory per host (lighttpd's simple-vhost.*):
 *   simple-vhost.server-root   = "/var/www/servers/"
 *   simple-vhost.default-host  = "www.example.org"
 *   simple-vhost.document-root = "pages"
 * makes /var/www/servers/<host>/pages/ the document root of a request for <host> (its port left
 * out), or /var/www/servers/www.example.org/pages/ when that does not exist (or the host cannot
 * name a directory); when neither exists the configured server.document-root serves. The keys
 * may differ by condition, as in lighttpd (vhosting for all hosts but one). The lookup and its
 * thread fallback are vhost.c's; it runs in uri_clean, so mod_alias, rewrites to files and every
 * handler see the host's document root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "log.h"
#include "module.h"
#include "vhost.h"

typedef struct svh_conf {
    const char *server_root;    /* absolute, ends with '/'; NULL: off */
    const char *default_host;
    const char *document_root;  /* below the host's directory, no leading or trailing '/' */
    bool debug;
} svh_conf;

#define SL_KEY_CONF svh_conf

sl_module sl_mod_simple_vhost;

#define SCONF(c) SL_MODCONF((c)->conf, sl_mod_simple_vhost, svh_conf)

static int prep_server_root(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *dir;
    if (sl_key_dir(v, ctx, &dir) < 0) return -1;
    if (!dir) return 0; /* "": off */
    size_t n = strlen(dir);
    char *p = realloc(dir, n + 2); /* with the '/' the host name follows */
    if (!p) {
        free(dir);
        return sl_key_fail(ctx, "out of memory");
    }
    if (p[n - 1] != '/') strcpy(p + n, "/");
    *out = p;
    return 0;
}

static int prep_document_root(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING)
        return sl_key_fail(ctx, "simple-vhost.document-root must be a path");
    const char *s = v->str;
    while (*s == '/') s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == '/') n--;
    char *p = strndup(s, n);
    if (!p) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *out = p;
    return 0;
}

/* server-root + host + "/" + document-root + "/" in the request's memory. */
static const char *doc_root_of(sl_conn *c, const svh_conf *sc, const char *host)
{
    size_t n = strlen(sc->server_root) + strlen(host) + strlen(sc->document_root) + 3;
    char *p = sl_conn_alloc(c, n);
    if (p)
        snprintf(p, n, "%s%s/%s%s", sc->server_root, host, sc->document_root,
                 sc->document_root[0] ? "/" : "");
    return p;
}

static sl_hresult svh_uri_clean(sl_conn *c)
{
    const svh_conf *sc = SCONF(c);
    if (!sc->server_root) return SL_GO_ON;
    if (sl_vhost_applied(c, &sl_mod_simple_vhost))
        return sl_vhost_apply(c, &sl_mod_simple_vhost, NULL, 0);
    const char *paths[2];
    size_t n = 0;
    const char *host = sl_vhost_name(c);
    if (host && (paths[n] = doc_root_of(c, sc, host))) n++;
    if (sc->default_host && sc->default_host[0] && (paths[n] = doc_root_of(c, sc, sc->default_host)))
        n++;
    if (sc->debug)
        sl_log("simple-vhost: %s: %s%s%s", c->host[0] ? c->host : "(no host)", n ? paths[0] : "-",
               n > 1 ? ", else " : "", n > 1 ? paths[1] : "");
    return sl_vhost_apply(c, &sl_mod_simple_vhost, paths, n);
}

static void svh_request_done(sl_conn *c)
{
    sl_vhost_done(c, &sl_mod_simple_vhost);
}

static void svh_defaults(void *p)
{
    svh_conf *sc = p;
    sc->document_root = "";
}

sl_module sl_mod_simple_vhost = {
    SL_MODULE_HEAD("simple_vhost", svh_conf, "mod_simple_vhost"),
    .keys = SL_KEYS(
        SL_KEY_PREP("simple-vhost.server-root", SL_KEY_VALUE, server_root, prep_server_root, free),
        SL_KEY_AT("simple-vhost.default-host", SL_KEY_STRING, default_host),
        SL_KEY_PREP("simple-vhost.document-root", SL_KEY_VALUE, document_root,
                    prep_document_root, free),
        SL_KEY_AT("simple-vhost.debug", SL_KEY_BOOL, debug)),
    .defaults = svh_defaults,
    .uri_clean = svh_uri_clean,
    .request_done = svh_request_done,
};
