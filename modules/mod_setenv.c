/* mod_setenv: header fields and back-end variables from the config (lighttpd's setenv.* keys):
 *   setenv.add-response-header = ( "Strict-Transport-Security" => "max-age=63072000" )
 *   setenv.set-response-header = ( "Server" => "" )          (set replaces; "" removes)
 *   setenv.add-request-header / setenv.set-request-header      (what back ends receive)
 *   setenv.add-environment / setenv.set-environment            (FastCGI variables)
 *
 * The response side is a response_start hook: every answer (files, listings, back ends, error
 * pages) gets the fields as it leaves, added ones first, then set ones replacing what is there. The request side
 * points the request at the lists (c->edits) in uri_clean, before a back end is chosen;
 * proxy-core applies them when it writes the request (HTTP fields, FastCGI HTTP_* and other
 * variables). Nothing is copied per request: the lists live in the loaded config.
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "module.h"

typedef struct setenv_conf {
    sl_req_edits req;  /* the request side, handed to back ends through c->edits */
    sl_kvlist resp_add, resp_set;
} setenv_conf;

#define SL_KEY_CONF setenv_conf

sl_module sl_mod_setenv;

#define ECONF(c) SL_MODCONF((c)->conf, sl_mod_setenv, setenv_conf)

/* A field name is a token (RFC 9110 §5.1) and a value has no CR, LF or NUL: whatever the config
 * says cannot split a message. */
static int prep_fields(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *k = v->items[i].key, *val = v->items[i].val->str;
        bool ok = k[0] != 0;
        for (const char *p = k; *p && ok; p++)
            ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 strchr("!#$%&'*+-.^_`|~", *p);
        if (!ok)
            return sl_key_fail(ctx, "%s: \"%s\" is not a header field name", ctx->assign->key, k);
        if (strpbrk(val, "\r\n")) {
            snprintf(ctx->err, ctx->errlen, "%s: the value of \"%s\" has a line break",
                     ctx->assign->key, k);
            return -1;
        }
    }
    return 0;
}

static int prep_env(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    for (size_t i = 0; i < v->n_items; i++)
        if (!v->items[i].key[0] || strchr(v->items[i].key, '='))
            return sl_key_fail(ctx, "%s: \"%s\" is not a variable name", ctx->assign->key,
                               v->items[i].key);
    return 0;
}

static sl_hresult setenv_uri_clean(sl_conn *c)
{
    const sl_req_edits *e = &ECONF(c)->req;
    if (e->hdr_add.n || e->hdr_set.n || e->env_add.n || e->env_set.n) c->edits = e;
    return SL_GO_ON;
}

/* Added fields first, then set ones, which replace whatever is there by then (an added one
 * too), as lighttpd applies them. */
static void setenv_response_start(sl_conn *c)
{
    const setenv_conf *sc = ECONF(c);
    for (size_t i = 0; i < sc->resp_add.n; i++)
        sl_resp_header_static(c, sc->resp_add.k[i], strlen(sc->resp_add.k[i]), sc->resp_add.v[i],
                              strlen(sc->resp_add.v[i]));
    for (size_t i = 0; i < sc->resp_set.n; i++) {
        sl_resp_remove(c, sc->resp_set.k[i]);
        if (sc->resp_set.v[i][0])
            sl_resp_header_static(c, sc->resp_set.k[i], strlen(sc->resp_set.k[i]),
                                  sc->resp_set.v[i], strlen(sc->resp_set.v[i]));
    }
}

sl_module sl_mod_setenv = {
    SL_MODULE_HEAD("setenv", setenv_conf, "mod_setenv"),
    .keys = SL_KEYS(
        SL_KEY_PREP("setenv.add-request-header", SL_KEY_KVLIST, req.hdr_add, prep_fields, NULL),
        SL_KEY_PREP("setenv.set-request-header", SL_KEY_KVLIST, req.hdr_set, prep_fields, NULL),
        SL_KEY_PREP("setenv.add-response-header", SL_KEY_KVLIST, resp_add, prep_fields, NULL),
        SL_KEY_PREP("setenv.set-response-header", SL_KEY_KVLIST, resp_set, prep_fields, NULL),
        SL_KEY_PREP("setenv.add-environment", SL_KEY_KVLIST, req.env_add, prep_env, NULL),
        SL_KEY_PREP("setenv.set-environment", SL_KEY_KVLIST, req.env_set, prep_env, NULL)),
    .uri_clean = setenv_uri_clean,
    .response_start = setenv_response_start,
};
