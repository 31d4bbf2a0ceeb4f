/* mod_redirect: url.redirect answers requests whose target matches a regular expression with a
 * redirect to a URL built from the match, as lighttpd's mod_redirect does:
 *   url.redirect = ( "^/old/(.*)$" => "/new/$1" )   url.redirect-code = 301
 *
 * The rules are urlrules.h's (shared with mod_rewrite), compiled once at load. In the uri_raw
 * phase the request-target (still %-encoded, with its query, normalized as lighttpd's default
 * http-parseopts do: escapes of unreserved characters decoded, other hex upper-cased) is tried
 * against each pattern in order; the first that matches answers with url.redirect-code (301,
 * 302, 303, 307 or 308) and a Location made from its template. A match whose template is empty
 * stops the search without redirecting (lighttpd's way to exempt URLs). The answer carries no
 * body, like lighttpd's. A template's %N is a group of the =~ condition of the block that set
 * url.redirect (the core keeps those groups per request, only for such blocks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "log.h"
#include "loop.h"
#include "module.h"
#include "path.h"
#include "urlrules.h"

typedef struct sl_redirect_conf {
    const sl_urlrules *rules; /* url.redirect; NULL: none */
    long code;                /* url.redirect-code */
} sl_redirect_conf;

#define SL_KEY_CONF sl_redirect_conf

sl_module sl_mod_redirect;

static int prep_rules(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    sl_urlrules *rs = NULL;
    if (sl_urlrules_prepare(&rs, v, ctx) < 0) return -1;
    *out = rs;
    return 0;
}

static int prep_code(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->num == 301 || v->num == 302 || v->num == 303 || v->num == 307 || v->num == 308) return 0;
    snprintf(ctx->err, ctx->errlen, "url.redirect-code must be 301, 302, 303, 307 or 308, not %lld",
             v->num);
    return -1;
}

static sl_hresult redirect_uri_raw(sl_conn *c)
{
    const sl_redirect_conf *rc = SL_MODCONF(c->conf, sl_mod_redirect, sl_redirect_conf);
    if (!rc->rules || !c->target) return SL_GO_ON;
    /* The target as lighttpd's rules see it (url-normalize-unreserved/-required). */
    char norm[8192];
    ssize_t nl = sl_target_normalize(c->target, c->target_len, norm, sizeof norm);
    if (nl < 0) return SL_GO_ON; /* longer than any head seekless reads: nothing to match */
    /* The loop's own match data: one request at a time runs on a loop, so no allocation per
     * request. */
    pcre2_match_data *md = c->loop->mod[sl_mod_redirect.index];
    sl_url_env env = {.scheme = c->scheme, .authority = c->host, .port = sl_conn_local_port(c),
                      .caps = c->caps};
    char loc[4096];
    size_t len, idx;
    int r = sl_urlrules_apply(rc->rules, md, norm, (size_t)nl, &env, loc, sizeof loc, &len, &idx);
    if (r == SL_URL_NOMATCH || r == SL_URL_EXEMPT) return SL_GO_ON;
    if (r < 0) {
        /* A Location of 4 KiB or more is a broken rule, not a redirect. */
        sl_log("url.redirect: %s: %s", c->path, r == -ENAMETOOLONG ? "Location too long"
                                                                   : "PCRE2 match failed");
        c->status = 500;
        return SL_ERROR;
    }
    c->status = (int)rc->code;
    sl_resp_begin(c, (int)rc->code);
    sl_resp_header(c, "Location", loc);
    sl_resp_end_headers(c, 0);
    return SL_FINISHED;
}

static int redirect_loop_init(sl_loop *loop, char *err, size_t errlen)
{
    return sl_urlrules_loop_init(&loop->mod[sl_mod_redirect.index], err, errlen);
}

static void redirect_loop_fini(sl_loop *loop)
{
    sl_urlrules_loop_fini(&loop->mod[sl_mod_redirect.index]);
}

static void redirect_defaults(void *p)
{
    sl_redirect_conf *rc = p;
    rc->code = 301;
}

sl_module sl_mod_redirect = {
    SL_MODULE_HEAD("redirect", sl_redirect_conf, "mod_redirect"),
    .keys = SL_KEYS(
        SL_KEY_PREP("url.redirect", SL_KEY_VALUE, rules, prep_rules, sl_urlrules_free),
        SL_KEY_PREP("url.redirect-code", SL_KEY_INT, code, prep_code, NULL)),
    .defaults = redirect_defaults,
    .loop_init = redirect_loop_init,
    .loop_fini = redirect_loop_fini,
    .uri_raw = redirect_uri_raw,
};
