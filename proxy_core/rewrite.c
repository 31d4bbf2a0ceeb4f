/* proxy-core.rewrite-request / proxy-core.rewrite-response: lighttpd 1.5's way to change what a
 * back end is told and what it answers, from the articles' configs:
 *
 *   proxy-core.rewrite-request = ( "_uri" => ( "^/app(/.*)" => "$1" ),
 *                                  "Host" => ( ".*" => "backend.internal" ) )
 *   proxy-core.rewrite-response = ( "Location" => ( "^http://backend.internal/(.*)" =>
 *                                                   "http://www.example.org/app/$1" ) )
 *
 * Each name holds an ordered list of "regex" => "template" rules in mod_rewrite's language
 * (modules/urlrules.c: $N, %N of the block's condition, ${url.*}, flags), compiled at load; the
 * first rule of a name that matches decides, an empty template keeps the value. Request names
 * starting with '_' are the CGI variables lighttpd 1.5 allowed ("_uri", "_docroot",
 * "_pathinfo", "_scriptname"); any other name is a header field, set (replacing the client's)
 * when a rule matches its value ("" when the client sent none). Response names are header
 * fields only. The work happens once per proxied request, in request memory; a request with no
 * rules pays one NULL test.
 */
#include "rewrite.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "http_parse.h"
#include "urlrules.h"

/* One name's rules. */
typedef struct rw_name {
    char *name;
    sl_urlrules *rules;
} rw_name;

struct sl_proxy_rewrites {
    size_t n;
    rw_name names[];
};

void sl_proxy_rewrites_free(void *p)
{
    sl_proxy_rewrites *rw = p;
    for (size_t i = 0; rw && i < rw->n; i++) {
        free(rw->names[i].name);
        sl_urlrules_free(rw->names[i].rules);
    }
    free(rw);
}

static const char *const request_specials[] = {"_uri", "_docroot", "_pathinfo", "_scriptname",
                                               NULL};

static int prep(const sl_cval *v, const sl_key_ctx *ctx, void **out, bool request)
{
    const char *key = ctx->assign->key;
    if (v->type != SL_CV_ARRAY) {
        snprintf(ctx->err, ctx->errlen, "%s must be a list ( \"name\" => ( \"regex\" => "
                 "\"template\" ) )", key);
        return -1;
    }
    sl_proxy_rewrites *rw = calloc(1, sizeof *rw + v->n_items * sizeof rw->names[0]);
    if (!rw) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        const sl_cval_item *it = &v->items[i];
        if (!it->key || it->val->type != SL_CV_ARRAY) {
            snprintf(ctx->err, ctx->errlen, "%s: each entry is \"name\" => ( \"regex\" => "
                     "\"template\", ... )", key);
            goto fail;
        }
        if (it->key[0] == '_' || !it->key[0] || strpbrk(it->key, " \t:\r\n")) {
            bool known = false;
            for (size_t k = 0; request && request_specials[k]; k++)
                known |= !strcmp(it->key, request_specials[k]);
            if (!known) {
                snprintf(ctx->err, ctx->errlen, "%s: \"%s\" is not a header name%s", key,
                         it->key, request ? " nor one of \"_uri\", \"_docroot\", \"_pathinfo\", "
                                            "\"_scriptname\"" : "");
                goto fail;
            }
        }
        rw_name *nm = &rw->names[rw->n];
        if (!(nm->name = strdup(it->key))) {
            snprintf(ctx->err, ctx->errlen, "out of memory");
            goto fail;
        }
        rw->n++;
        if (sl_urlrules_prepare(&nm->rules, it->val, ctx) < 0) goto fail;
    }
    *out = rw;
    return 0;
fail:
    sl_proxy_rewrites_free(rw);
    return -1;
}

int sl_proxy_rewrites_prep_request(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep(v, ctx, out, true);
}

int sl_proxy_rewrites_prep_response(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    return prep(v, ctx, out, false);
}

/* The first matching rule of nm over subject: its result in request memory, *subject itself for
 * an empty template or no match (NULL then: keep). */
static const char *apply(const rw_name *nm, sl_conn *c, pcre2_match_data *md,
                         const char *subject, size_t len, size_t *outlen)
{
    sl_url_env env = {.scheme = c->scheme, .authority = c->host,
                      .port = sl_conn_local_port(c), .caps = c->caps};
    char out[4096];
    size_t n = 0, idx;
    int r = sl_urlrules_apply(nm->rules, md, subject, len, &env, out, sizeof out, &n, &idx);
    if (r != SL_URL_MATCHED) return NULL;
    *outlen = n;
    return sl_conn_strdup(c, out, n);
}

int sl_proxy_rewrite_request(const sl_proxy_rewrites *rw, sl_conn *c, sl_proxy_msg *m,
                             pcre2_match_data *md)
{
    if (!rw) return 0;
    /* Header fields set by rules join the config's edits in a copy for this request. */
    size_t n_hdr = 0;
    for (size_t i = 0; i < rw->n; i++) n_hdr += rw->names[i].name[0] != '_';
    sl_req_edits *ed = NULL;
    const char **hk = NULL, **hv = NULL;
    size_t base = m->edits ? m->edits->hdr_set.n : 0;
    if (n_hdr) {
        ed = sl_conn_alloc(c, sizeof *ed);
        hk = sl_conn_alloc(c, (base + n_hdr) * sizeof *hk);
        hv = sl_conn_alloc(c, (base + n_hdr) * sizeof *hv);
        if (!ed || !hk || !hv) return -ENOMEM;
        *ed = m->edits ? *m->edits : (sl_req_edits){0};
        for (size_t i = 0; i < base; i++) {
            hk[i] = m->edits->hdr_set.k[i];
            hv[i] = m->edits->hdr_set.v[i];
        }
    }
    size_t nset = base;
    for (size_t i = 0; i < rw->n; i++) {
        const rw_name *nm = &rw->names[i];
        size_t len;
        const char *res;
        if (!strcmp(nm->name, "_uri")) {
            const char *t = m->target ? m->target : m->rq->target;
            size_t tl = m->target ? m->target_len : m->rq->target_len;
            if ((res = apply(nm, c, md, t, tl, &len))) {
                m->target = res;
                m->target_len = len;
                m->request_uri = res;
            }
        } else if (!strcmp(nm->name, "_docroot")) {
            if ((res = apply(nm, c, md, m->docroot, strlen(m->docroot), &len))) m->docroot = res;
        } else if (!strcmp(nm->name, "_pathinfo")) {
            if ((res = apply(nm, c, md, c->path, c->path_len, &len))) m->path_info = res;
        } else if (!strcmp(nm->name, "_scriptname")) {
            if ((res = apply(nm, c, md, c->path, c->path_len, &len))) m->script_name = res;
        } else {
            char val[4096] = "";
            const sl_http_header *h = sl_http_find_header(m->rq, nm->name);
            size_t vl = h ? sl_http_field_join(h, ", ", val, sizeof val) : 0;
            if (vl >= sizeof val) continue; /* too long to be a value a rule was written for */
            if ((res = apply(nm, c, md, val, vl, &len))) {
                hk[nset] = nm->name;
                hv[nset++] = res;
            }
        }
    }
    if (nset > base) {
        ed->hdr_set = (sl_kvlist){hk, hv, nset};
        m->edits = ed;
    }
    return 0;
}

const char *sl_proxy_rewrite_response(const sl_proxy_rewrites *rw, sl_conn *c,
                                      pcre2_match_data *md, const char *name, size_t name_len,
                                      const char *value, size_t value_len, size_t *outlen)
{
    for (size_t i = 0; rw && i < rw->n; i++) {
        const rw_name *nm = &rw->names[i];
        if (strlen(nm->name) != name_len || strncasecmp(nm->name, name, name_len)) continue;
        char subject[4096];
        if (value_len >= sizeof subject) return NULL;
        memcpy(subject, value, value_len); /* the back end's bytes are not NUL-terminated */
        subject[value_len] = 0;
        return apply(nm, c, md, subject, value_len, outlen);
    }
    return NULL;
}
