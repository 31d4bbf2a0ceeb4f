/* mod_extforward: the client's address from a trusted proxy's X-Forwarded-For (lighttpd's
 * extforward.*):
 *   extforward.forwarder = ( "10.0.0.232" => "trust", "192.168.0.0/16" => "trust" )
 *   extforward.headers   = ( "X-Real-IP" )      (default: X-Forwarded-For, Forwarded-For)
 *
 * Only a request whose connection comes from a trusted proxy is touched ("all" => "trust"
 * trusts every peer). Of the headers named, the first the request has is read as a list of
 * addresses, each proxy appending the one it got the request from; walking it from the right,
 * addresses of trusted proxies are passed over and the first other one is the client (with
 * "all" trusted and no entry of its own, that is the rightmost). It must be a numeric IPv4 or
 * IPv6 address, else nothing changes. The request then has that address (port 0) for
 * everything after: $HTTP["remoteip"] conditions, which are evaluated again (the hook answers
 * SL_COMEBACK, so the request starts over once with the new address), the access log, mod_status
 * allow lists, mod_evasive's counts, REMOTE_ADDR and X-Forwarded-For to back ends. With it, an
 * X-Forwarded-Proto of "http" or "https" (one value, as lighttpd takes it) becomes the request's
 * scheme ($HTTP["scheme"], redirects, REQUEST_SCHEME). The connection's own address is put back
 * when the request ends, so the next request on it is judged afresh.
 *
 * "Forwarded" among extforward.headers is read as RFC 7239 says: elements split at commas
 * outside quoted strings, the rightmost whose for= is not a trusted proxy's names the client
 * (an obfuscated or "unknown" node ends the search with no change), its proto= the scheme.
 * (lighttpd 1.4.69 never reads the leftmost element, so behind one proxy it changes nothing;
 * seekless reads them all.) A quoted string left open, or more than 64 elements, changes
 * nothing. The header values are parsed in xf_parse.c (pure code, with its own fuzz target).
 *
 * The hook runs in uri_raw, and this module is first in that phase (app/modules.c): no other
 * module has acted on the request when it starts over. extforward.params and the HAProxy PROXY
 * protocol (extforward.hap-PROXY) are refused at start-up as not implemented.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "addr.h"
#include "conf.h"
#include "connection.h"
#include "http_parse.h"
#include "module.h"
#include "xf_parse.h"

/* The trusted proxies. */
typedef struct xf_trust {
    bool all;        /* "all" => "trust": every peer may forward */
    size_t n;
    sl_net net[];    /* addresses and networks named "trust" */
} xf_trust;

typedef struct xf_conf {
    const xf_trust *trust;       /* extforward.forwarder; NULL: the module does nothing */
    sl_strlist headers;          /* extforward.headers; empty: the defaults */
} xf_conf;

#define SL_KEY_CONF xf_conf

/* Per request, when the address was replaced: what to put back. */
typedef struct xf_saved {
    struct sockaddr_storage peer;
} xf_saved;

sl_module sl_mod_extforward;

#define XCONF(c) SL_MODCONF((c)->conf, sl_mod_extforward, xf_conf)

static const char *const default_headers[] = {"X-Forwarded-For", "Forwarded-For", NULL};

static int prep_forwarder(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_ARRAY)
        return sl_key_fail(ctx, "extforward.forwarder must be a list "
                           "( \"10.0.0.1\" => \"trust\", \"10.1.0.0/16\" => \"trust\" )");
    xf_trust *t = calloc(1, sizeof *t + v->n_items * sizeof t->net[0]);
    if (!t) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        const sl_cval_item *it = &v->items[i];
        const char *what = it->val->type == SL_CV_STRING ? it->val->str : NULL;
        if (!it->key || !what) {
            snprintf(ctx->err, ctx->errlen,
                     "extforward.forwarder: each entry is \"address\" => \"trust\"");
            free(t);
            return -1;
        }
        bool trust = !strcasecmp(what, "trust");
        if (!trust && strcasecmp(what, "untrusted")) {
            snprintf(ctx->err, ctx->errlen, "extforward.forwarder: \"%s\" => \"%s\": use "
                     "\"trust\" or \"untrusted\"", it->key, what);
            free(t);
            return -1;
        }
        if (!strcasecmp(it->key, "all")) {
            t->all = trust;
            continue;
        }
        sl_net *n = &t->net[t->n];
        if (sl_cidr_parse(it->key, n->addr, &n->family, &n->bits) < 0) {
            snprintf(ctx->err, ctx->errlen, "extforward.forwarder: \"%s\" is not an IP address "
                     "or network (\"10.0.0.1\", \"10.0.0.0/8\", \"::1\", \"all\")", it->key);
            free(t);
            return -1;
        }
        if (trust) t->n++; /* an untrusted entry is the default for any address: nothing kept */
    }
    *out = t;
    return 0;
}

static int prep_headers(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *h = v->items[i].val->str;
        if (!h[0] || strpbrk(h, " \t:\r\n"))
            return sl_key_fail(ctx, "extforward.headers: \"%s\" is not a header name", h);
    }
    return 0;
}

static int prep_refused(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    snprintf(ctx->err, ctx->errlen, "%s is not implemented yet (seekless reads X-Forwarded-For "
             "and X-Forwarded-Proto only)", ctx->assign->key);
    return -1;
}

static bool trusted(const xf_trust *t, const struct sockaddr *sa)
{
    for (size_t i = 0; i < t->n; i++)
        if (sl_net_match(&t->net[i], sa)) return true;
    return false;
}

/* trusted() as xf_parse.h's test. */
static bool trusted_cb(const void *arg, const struct sockaddr *sa)
{
    return trusted(arg, sa);
}

static sl_hresult xf_uri_raw(sl_conn *c)
{
    const xf_conf *xc = XCONF(c);
    if (!xc->trust || SL_CTX(c, sl_mod_extforward)) return SL_GO_ON; /* off, or done already */
    const struct sockaddr *peer = (const struct sockaddr *)&c->peer;
    if (!xc->trust->all && !trusted(xc->trust, peer)) return SL_GO_ON;
    const char *const *names = default_headers;
    size_t n_names = 2;
    if (xc->headers.n) {
        names = xc->headers.v;
        n_names = xc->headers.n;
    }
    const sl_http_header *h = NULL;
    size_t found = 0;
    for (size_t i = 0; i < n_names && !h; i++) h = sl_http_find_header(&c->req, names[found = i]);
    if (!h) return SL_GO_ON;
    bool rfc7239 = !strcasecmp(names[found], "Forwarded");
    /* Lines of one field make one list (RFC 9110 §5.3), the last line's entries the newest. */
    char joined[4096];
    size_t len = sl_http_field_join(h, ",", joined, sizeof joined);
    if (len >= sizeof joined) return SL_GO_ON; /* a list this long is no proxy chain */
    struct sockaddr_storage client;
    const char *scheme = NULL;
    if ((rfc7239 ? sl_xf_forwarded_client(joined, len, trusted_cb, xc->trust, &client, &scheme)
                 : sl_xf_client(joined, len, trusted_cb, xc->trust, &client)) < 0)
        return SL_GO_ON;
    xf_saved *s = sl_conn_alloc(c, sizeof *s);
    if (!s) return SL_GO_ON;
    s->peer = c->peer;
    SL_CTX(c, sl_mod_extforward) = s;
    c->peer = client;
    const sl_http_header *proto = rfc7239 ? NULL : sl_http_find_header(&c->req, "X-Forwarded-Proto");
    if (scheme) c->scheme = scheme;
    if (proto && !proto->next) {
        if (proto->value_len == 5 && !strncasecmp(proto->value, "https", 5)) c->scheme = "https";
        else if (proto->value_len == 4 && !strncasecmp(proto->value, "http", 4)) c->scheme = "http";
    }
    /* Start over once: the conditions see the client's address (and scheme) now. */
    return SL_COMEBACK;
}

static void xf_request_done(sl_conn *c)
{
    xf_saved *s = SL_CTX(c, sl_mod_extforward);
    if (!s) return;
    c->peer = s->peer;
    SL_CTX(c, sl_mod_extforward) = NULL;
}

sl_module sl_mod_extforward = {
    SL_MODULE_HEAD("extforward", xf_conf, "mod_extforward"),
    .keys = SL_KEYS(
        SL_KEY_PREP("extforward.forwarder", SL_KEY_VALUE, trust, prep_forwarder, free),
        SL_KEY_PREP("extforward.headers", SL_KEY_STRLIST, headers, prep_headers, NULL),
        {"extforward.params", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
        {"extforward.hap-PROXY", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
        {"extforward.hap-PROXY-ssl-client-verify", SL_KEY_VALUE, 0, 0, prep_refused, NULL}),
    .uri_raw = xf_uri_raw,
    .request_done = xf_request_done,
};
