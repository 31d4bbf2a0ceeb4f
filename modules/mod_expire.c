/* mod_expire: cache lifetimes for answers by URL prefix or content type (lighttpd's expire.*):
 *   expire.url       = ( "/images/" => "access plus 1 months" )
 *   expire.mimetypes = ( "image/" => "modification plus 2 weeks", "" => "access 1 hours" )
 *
 * The lifetimes are parsed at load ("<access|now|modification> [plus] {<n> <unit>}*", units
 * years (360 days, as lighttpd counts), months (30 days), weeks, days, hours, minutes, seconds);
 * a request pays a prefix comparison per entry in a response_start hook. As in lighttpd only
 * 200, 204 and 206 answers to GET and HEAD that carry no Cache-Control of their own get one:
 * "Cache-Control: max-age=N" for HTTP/1.1, "Expires" for HTTP/1.0. A "modification" lifetime
 * counts from the answer's Last-Modified (none: nothing is added), and never lies in the past.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf.h"
#include "connection.h"
#include "http_date.h"
#include "loop.h"
#include "module.h"

/* One "prefix" => "lifetime" entry, parsed. */
typedef struct expire_rule {
    const char *prefix;
    size_t len;
    bool from_modification;
    long long secs;
} expire_rule;

typedef struct expire_rules {
    size_t n;
    expire_rule r[];
} expire_rules;

typedef struct expire_conf {
    const expire_rules *url;       /* expire.url */
    const expire_rules *mimetypes; /* expire.mimetypes */
} expire_conf;

#define SL_KEY_CONF expire_conf

sl_module sl_mod_expire;

#define XCONF(c) SL_MODCONF((c)->conf, sl_mod_expire, expire_conf)

/* "access plus 1 days 2 hours" -> from_modification, seconds. 0, or -1 with why. */
static int parse_lifetime(const char *s, bool *from_mod, long long *secs, char *why, size_t wl)
{
    static const struct { const char *unit; long long secs; } units[] = {
        {"year", 60LL * 60 * 24 * 30 * 12}, {"month", 60LL * 60 * 24 * 30},
        {"week", 60LL * 60 * 24 * 7},       {"day", 60LL * 60 * 24},
        {"hour", 60LL * 60},                {"minute", 60}, {"second", 1},
    };
    size_t n;
    if (!strncmp(s, "access ", n = 7) || !strncmp(s, "now ", n = 4))
        *from_mod = false;
    else if (!strncmp(s, "modification ", n = 13))
        *from_mod = true;
    else
        return snprintf(why, wl, "must start with access, now or modification"), -1;
    s += n;
    if (!strncmp(s, "plus ", 5)) s += 5;
    *secs = 0;
    do {
        char *end;
        long long num = strtoll(s, &end, 10);
        if (end == s || *end != ' ' || num < 0)
            return snprintf(why, wl, "wants <number> <unit> at \"%s\"", s), -1;
        s = end + 1;
        size_t ul = strcspn(s, " ");
        size_t base = ul && s[ul - 1] == 's' ? ul - 1 : ul; /* plural */
        size_t k = 0;
        while (k < sizeof units / sizeof units[0] &&
               !(strlen(units[k].unit) == base && !strncmp(s, units[k].unit, base)))
            k++;
        if (k == sizeof units / sizeof units[0])
            return snprintf(why, wl, "unknown unit \"%.*s\"", (int)ul, s), -1;
        if (num > (1LL << 40) / units[k].secs) return snprintf(why, wl, "too far ahead"), -1;
        *secs += num * units[k].secs;
        s += ul;
        while (*s == ' ') s++;
    } while (*s);
    return 0;
}

static int prep_rules(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (!sl_cval_strings(v, true))
        return sl_key_fail(ctx, "%s must be an array of \"prefix\" => \"lifetime\" pairs",
                           ctx->assign->key);
    expire_rules *rs = calloc(1, sizeof *rs + v->n_items * sizeof rs->r[0]);
    if (!rs) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        expire_rule *r = &rs->r[rs->n++];
        r->prefix = v->items[i].key; /* lives as long as the config */
        r->len = strlen(r->prefix);
        char why[160];
        if (parse_lifetime(v->items[i].val->str, &r->from_modification, &r->secs, why,
                           sizeof why) < 0) {
            snprintf(ctx->err, ctx->errlen, "%s \"%s\" => \"%s\": %s", ctx->assign->key,
                     r->prefix, v->items[i].val->str, why);
            free(rs);
            return -1;
        }
    }
    *out = rs;
    return 0;
}

/* The first entry whose prefix s starts with (lighttpd's array_match_key_prefix), or for
 * content types also the "" entry. */
static const expire_rule *match(const expire_rules *rs, const char *s, size_t len)
{
    for (size_t i = 0; rs && i < rs->n; i++)
        if (rs->r[i].len && rs->r[i].len <= len && !memcmp(s, rs->r[i].prefix, rs->r[i].len))
            return &rs->r[i];
    for (size_t i = 0; rs && i < rs->n; i++)
        if (!rs->r[i].len) return &rs->r[i];
    return NULL;
}

static void expire_response_start(sl_conn *c)
{
    const expire_conf *xc = XCONF(c);
    int st = c->resp.status;
    if ((!xc->url && !xc->mimetypes) || (st != 200 && st != 204 && st != 206) ||
        (c->req.method != SL_METHOD_GET && c->req.method != SL_METHOD_HEAD) ||
        sl_resp_find(c, "Cache-Control") || !c->path)
        return;
    const expire_rule *r = NULL;
    /* expire.url first: the first entry the path starts with; then expire.mimetypes. */
    for (size_t i = 0; xc->url && i < xc->url->n && !r; i++)
        if (xc->url->r[i].len <= c->path_len &&
            !memcmp(c->path, xc->url->r[i].prefix, xc->url->r[i].len))
            r = &xc->url->r[i];
    if (!r && xc->mimetypes) {
        const sl_resp_field *ct = sl_resp_find(c, "Content-Type");
        r = ct ? match(xc->mimetypes, ct->value, ct->value_len) : match(xc->mimetypes, "", 0);
    }
    if (!r) return;
    time_t now = time(NULL), expires = now + (time_t)r->secs;
    if (r->from_modification) {
        const sl_resp_field *lm = sl_resp_find(c, "Last-Modified");
        time_t mtime;
        if (!lm || sl_http_date_parse(lm->value, lm->value_len, &mtime) < 0) return;
        expires = mtime + (time_t)r->secs;
    }
    if (expires < now) expires = now;
    if (c->req.version >= 11) {
        char v[48];
        snprintf(v, sizeof v, "max-age=%lld", (long long)(expires - now));
        sl_resp_header(c, "Cache-Control", v);
    } else {
        char d[SL_HTTP_DATE_LEN + 1];
        sl_http_date_format(expires, d);
        sl_resp_header(c, "Expires", d);
    }
}

sl_module sl_mod_expire = {
    SL_MODULE_HEAD("expire", expire_conf, "mod_expire"),
    .keys = SL_KEYS(
        SL_KEY_PREP("expire.url", SL_KEY_VALUE, url, prep_rules, free),
        SL_KEY_PREP("expire.mimetypes", SL_KEY_VALUE, mimetypes, prep_rules, free)),
    .response_start = expire_response_start,
};
