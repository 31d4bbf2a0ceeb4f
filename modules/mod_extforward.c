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
 * The hook runs in uri_raw, and this module is first in that phase (app/modules.c): no other
 * module has acted on the request when it starts over. lighttpd's RFC 7239 "Forwarded" header,
 * extforward.params and the HAProxy PROXY protocol (extforward.hap-PROXY) are refused at
 * start-up as not implemented.
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

/* Per request, when the address was replaced: what to put back. */
typedef struct xf_saved {
    struct sockaddr_storage peer;
} xf_saved;

sl_module sl_mod_extforward;

#define XCONF(c) SL_MODCONF((c)->conf, sl_mod_extforward, xf_conf)

static const char *const default_headers[] = {"X-Forwarded-For", "Forwarded-For", NULL};

static int prep_forwarder(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_ARRAY) {
        snprintf(ctx->err, ctx->errlen, "extforward.forwarder must be a list "
                 "( \"10.0.0.1\" => \"trust\", \"10.1.0.0/16\" => \"trust\" )");
        return -1;
    }
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
        if (!strcasecmp(h, "Forwarded")) {
            snprintf(ctx->err, ctx->errlen, "extforward.headers: \"Forwarded\" (RFC 7239) is not "
                     "implemented yet; X-Forwarded-For and headers of its form are");
            return -1;
        }
        if (!h[0] || strpbrk(h, " \t:\r\n")) {
            snprintf(ctx->err, ctx->errlen, "extforward.headers: \"%s\" is not a header name", h);
            return -1;
        }
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

/* The client in an X-Forwarded-For list: the rightmost address that is not a trusted proxy's.
 * 0 with *out set, or -1 (none, or not a numeric address). */
static int client_of(const xf_trust *t, const char *v, size_t len, struct sockaddr_storage *out)
{
    size_t end = len;
    while (end > 0) {
        size_t start = end;
        while (start > 0 && v[start - 1] != ',') start--;
        size_t a = start, b = end;
        while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
        end = start ? start - 1 : 0;
        if (a == b) continue; /* an empty element */
        /* "[v6]" and "v4:port" as some proxies write them. */
        if (v[a] == '[') {
            const char *close = memchr(v + a, ']', b - a);
            if (!close) return -1;
            b = (size_t)(close - v);
            a++;
        } else if (memchr(v + a, '.', b - a)) {
            const char *colon = memchr(v + a, ':', b - a);
            if (colon) b = (size_t)(colon - v);
        }
        if (sl_addr_parse(v + a, b - a, out) < 0) return -1;
        if (!trusted(t, (const struct sockaddr *)out)) return 0;
    }
    return -1;
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
    for (size_t i = 0; i < n_names && !h; i++) h = sl_http_find_header(&c->req, names[i]);
    if (!h) return SL_GO_ON;
    /* Lines of one field make one list (RFC 9110 §5.3), the last line's entries the newest. */
    char joined[4096];
    size_t len = sl_http_field_join(h, ",", joined, sizeof joined);
    if (len >= sizeof joined) return SL_GO_ON; /* a list this long is no proxy chain */
    struct sockaddr_storage client;
    if (client_of(xc->trust, joined, len, &client) < 0) return SL_GO_ON;
    xf_saved *s = sl_conn_alloc(c, sizeof *s);
    if (!s) return SL_GO_ON;
    s->peer = c->peer;
    SL_CTX(c, sl_mod_extforward) = s;
    c->peer = client;
    const sl_http_header *proto = sl_http_find_header(&c->req, "X-Forwarded-Proto");
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

#define OFF(f) offsetof(xf_conf, f)
static const sl_key xf_keys[] = {
    {"extforward.forwarder", SL_KEY_VALUE, 0, OFF(trust), prep_forwarder, free},
    {"extforward.headers", SL_KEY_STRLIST, 0, OFF(headers), prep_headers, NULL},
    {"extforward.params", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
    {"extforward.hap-PROXY", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
    {"extforward.hap-PROXY-ssl-client-verify", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
    {NULL},
};

static const char *const xf_aliases[] = {"mod_extforward", NULL};

sl_module sl_mod_extforward = {
    .name = "extforward",
    .aliases = xf_aliases,
    .keys = xf_keys,
    .conf_size = sizeof(xf_conf),
    .uri_raw = xf_uri_raw,
    .request_done = xf_request_done,
};
