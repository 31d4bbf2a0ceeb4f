/* mod_redirect: url.redirect answers requests whose target matches a regular expression with a
 * redirect to a URL built from the match, as lighttpd's mod_redirect does:
 *   url.redirect = ( "^/old/(.*)$" => "/new/$1" )   url.redirect-code = 301
 *
 * The patterns are compiled (PCRE2) once at load. In the uri_raw phase the request-target (still
 * %-encoded, with its query, normalized as lighttpd's default http-parseopts do: escapes of
 * unreserved characters decoded, other hex upper-cased) is tried against each pattern in order; the
 * first that matches answers with url.redirect-code (301, 302, 303, 307 or 308) and a Location made
 * from the template, where $0..$9 are the match's groups and ${url.path} / ${url.query} / ${qsa}
 * the target's path, query and "?query" (or "" without one). A match whose template is empty
 * stops the search without redirecting (lighttpd's way to exempt URLs). The answer carries no
 * body, like lighttpd's.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "connection.h"
#include "loop.h"
#include "module.h"
#include "path.h"

typedef struct redirect_rule {
    pcre2_code *re;
    char *pattern, *tmpl;
} redirect_rule;

typedef struct redirect_rules {
    size_t n;
    redirect_rule r[];
} redirect_rules;

typedef struct sl_redirect_conf {
    const redirect_rules *rules; /* url.redirect; NULL: none */
    long code;                   /* url.redirect-code */
} sl_redirect_conf;

sl_module sl_mod_redirect;

static void rules_release(void *p)
{
    redirect_rules *rs = p;
    if (!rs) return;
    for (size_t i = 0; i < rs->n; i++) {
        pcre2_code_free(rs->r[i].re);
        free(rs->r[i].pattern);
        free(rs->r[i].tmpl);
    }
    free(rs);
}

static int prep_rules(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    bool ok = v->type == SL_CV_ARRAY;
    for (size_t i = 0; ok && i < v->n_items; i++)
        ok = v->items[i].key && v->items[i].val->type == SL_CV_STRING;
    if (!ok) {
        snprintf(ctx->err, ctx->errlen, "url.redirect must be an array of \"regex\" => \"url\" pairs");
        return -1;
    }
    redirect_rules *rs = calloc(1, sizeof *rs + v->n_items * sizeof rs->r[0]);
    if (!rs) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        redirect_rule *r = &rs->r[rs->n++];
        r->pattern = strdup(v->items[i].key);
        r->tmpl = strdup(v->items[i].val->str);
        if (!r->pattern || !r->tmpl) {
            snprintf(ctx->err, ctx->errlen, "out of memory");
            goto bad;
        }
        int code;
        PCRE2_SIZE at;
        r->re = pcre2_compile((PCRE2_SPTR)r->pattern, PCRE2_ZERO_TERMINATED, 0, &code, &at, NULL);
        if (!r->re) {
            char msg[160];
            pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
            snprintf(ctx->err, ctx->errlen, "url.redirect \"%s\": %s at offset %zu", r->pattern, msg,
                     (size_t)at);
            goto bad;
        }
        /* "$3" where the pattern has two groups is a mistake, not an empty string. */
        uint32_t groups = 0;
        pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &groups);
        for (const char *t = r->tmpl; *t; t++) {
            if (t[0] == '%' && t[1] >= '0' && t[1] <= '9') {
                /* lighttpd reads %N as the enclosing condition's group N (so "%20" is one too). */
                snprintf(ctx->err, ctx->errlen, "url.redirect \"%s\" => \"%s\": %%%c (a group of "
                         "the enclosing condition) is not supported", r->pattern, r->tmpl, t[1]);
                goto bad;
            }
            if (t[0] == '$' && t[1] >= '0' && t[1] <= '9' && (uint32_t)(t[1] - '0') > groups) {
                snprintf(ctx->err, ctx->errlen, "url.redirect \"%s\" => \"%s\": $%c but the pattern "
                         "has %u group(s)", r->pattern, r->tmpl, t[1], groups);
                goto bad;
            }
        }
    }
    *out = rs;
    return 0;
bad:
    rules_release(rs);
    return -1;
}

static int prep_code(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->num == 301 || v->num == 302 || v->num == 303 || v->num == 307 || v->num == 308) return 0;
    snprintf(ctx->err, ctx->errlen, "url.redirect-code must be 301, 302, 303, 307 or 308, not %lld",
             v->num);
    return -1;
}

/* Append s[0..n) to the growing Location; false when it would not fit. */
static bool put(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n >= cap) return false;
    memcpy(buf + *len, s, n);
    *len += n;
    return true;
}

static sl_hresult redirect_uri_raw(sl_conn *c)
{
    const sl_redirect_conf *rc = SL_MODCONF(c->conf, sl_mod_redirect, sl_redirect_conf);
    if (!rc->rules || !c->target) return SL_GO_ON;
    /* The target as lighttpd's rules see it (url-normalize-unreserved/-required). */
    char norm[8192];
    ssize_t nl = sl_target_normalize(c->target, c->target_len, norm, sizeof norm);
    if (nl < 0) return SL_GO_ON; /* longer than any head seekless reads: nothing to match */
    const char *t = norm;
    size_t tl = (size_t)nl;
    const char *q = memchr(t, '?', tl);
    size_t pl = q ? (size_t)(q - t) : tl;
    /* The loop's own match data: one request at a time runs on a loop, so no allocation per
     * request. */
    pcre2_match_data *md = c->loop->mod[sl_mod_redirect.index];
    sl_hresult res = SL_GO_ON;
    for (size_t i = 0; i < rc->rules->n; i++) {
        const redirect_rule *r = &rc->rules->r[i];
        int n = pcre2_match(r->re, (PCRE2_SPTR)t, tl, 0, 0, md, NULL);
        if (n < 0) continue;
        if (!r->tmpl[0]) break; /* matched, exempt from the rules after it */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char loc[4096];
        size_t len = 0;
        bool fits = true;
        for (const char *s = r->tmpl; *s && fits; s++) {
            if (s[0] == '$' && s[1] >= '0' && s[1] <= '9') {
                int g = s[1] - '0';
                if (g < n && ov[2 * g] != PCRE2_UNSET)
                    fits = put(loc, sizeof loc, &len, t + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
                s++;
            } else if (!strncmp(s, "${url.path}", 11)) {
                fits = put(loc, sizeof loc, &len, t, pl);
                s += 10;
            } else if (!strncmp(s, "${url.query}", 12)) {
                if (q) fits = put(loc, sizeof loc, &len, q + 1, tl - pl - 1);
                s += 11;
            } else if (!strncmp(s, "${qsa}", 6)) {
                if (q) fits = put(loc, sizeof loc, &len, q, tl - pl);
                s += 5;
            } else {
                fits = put(loc, sizeof loc, &len, s, 1);
            }
        }
        if (!fits) {
            c->status = 500; /* a Location of 4 KiB or more is a broken rule, not a redirect */
            res = SL_ERROR;
            break;
        }
        loc[len] = 0;
        c->status = (int)rc->code;
        sl_resp_begin(c, (int)rc->code);
        sl_resp_header(c, "Location", loc);
        sl_resp_end_headers(c, 0);
        res = SL_FINISHED;
        break;
    }
    return res;
}

/* Groups $0..$9 at most: room for ten. */
static int redirect_loop_init(sl_loop *loop, char *err, size_t errlen)
{
    pcre2_match_data *md = pcre2_match_data_create(10, NULL);
    if (!md) return snprintf(err, errlen, "out of memory"), -1;
    loop->mod[sl_mod_redirect.index] = md;
    return 0;
}

static void redirect_loop_fini(sl_loop *loop)
{
    pcre2_match_data_free(loop->mod[sl_mod_redirect.index]);
    loop->mod[sl_mod_redirect.index] = NULL;
}

static void redirect_defaults(void *p)
{
    sl_redirect_conf *rc = p;
    rc->code = 301;
}

#define OFF(f) offsetof(sl_redirect_conf, f)
static const sl_key redirect_keys[] = {
    {"url.redirect", SL_KEY_VALUE, 0, OFF(rules), prep_rules, rules_release},
    {"url.redirect-code", SL_KEY_INT, 0, OFF(code), prep_code, NULL},
    {NULL},
};

static const char *const redirect_aliases[] = {"mod_redirect", NULL};

sl_module sl_mod_redirect = {
    .name = "redirect",
    .aliases = redirect_aliases,
    .keys = redirect_keys,
    .conf_size = sizeof(sl_redirect_conf),
    .defaults = redirect_defaults,
    .loop_init = redirect_loop_init,
    .loop_fini = redirect_loop_fini,
    .uri_raw = redirect_uri_raw,
};
