/* Regex => template rules (see urlrules.h for the language).
 *
 * Load time does the work: each pattern is compiled (and JIT-compiled when PCRE2 can), each
 * template cut into parts (literal runs, group references, request parts, each with its
 * encoding flags) and checked, so that a mistake is a start-up message, not a wrong URL later.
 * A request then runs the patterns in order and, for the first that matches, writes the parts
 * into the caller's buffer: no allocation, no parsing of the template.
 */
#include "urlrules.h"

#include "conf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a part writes. */
enum {
    P_LIT,          /* template bytes [off, off+len) */
    P_GROUP,        /* group n of the match */
    P_CGROUP,       /* group n of the enclosing block's condition (%N) */
    P_SCHEME,
    P_AUTHORITY,
    P_AUTH_NOPORT,  /* the authority without ":port" */
    P_PORT,
    P_PATH,         /* the target up to '?' */
    P_QUERY,        /* after '?' */
    P_QSA,          /* "?query" or "&query" */
};

/* How a part's bytes are written (lighttpd's burl flags; 0 copies them as they are). */
enum {
    F_ENC_ALL = 1,   /* %-encode all but unreserved, '%' too */
    F_ENC_NDE = 2,   /* the same, an existing %XX kept (decoded when unreserved) */
    F_ENC_PSNDE = 4, /* as F_ENC_NDE, '/' kept */
    F_ENC_NONE = 8,  /* as they are */
    F_LOWER = 16,
    F_UPPER = 32,
};

typedef struct part {
    unsigned char kind, flags;
    unsigned short n; /* P_GROUP */
    size_t off, len;  /* P_LIT */
} part;

typedef struct rule {
    pcre2_code *re;
    char *pattern, *tmpl;
    part *parts;
    size_t n_parts;
    bool empty;       /* the template is "": an exemption */
} rule;

struct sl_urlrules {
    size_t n, cap;
    rule *r;
    bool uses_cond; /* some template has a %N */
    int cap_slot;   /* where requests keep the enclosing condition's groups, or -1 */
};

static void rule_free(rule *r)
{
    pcre2_code_free(r->re);
    free(r->pattern);
    free(r->tmpl);
    free(r->parts);
}

void sl_urlrules_free(void *p)
{
    sl_urlrules *rs = p;
    if (!rs) return;
    for (size_t i = 0; i < rs->n; i++) rule_free(&rs->r[i]);
    free(rs->r);
    free(rs);
}

size_t sl_urlrules_count(const sl_urlrules *rs)
{
    return rs ? rs->n : 0;
}

pcre2_match_data *sl_urlrules_match_data(void)
{
    return pcre2_match_data_create(SL_URLRULES_MAX_GROUP + 1, NULL);
}

int sl_urlrules_loop_init(void **slot, char *err, size_t errlen)
{
    pcre2_match_data *md = sl_urlrules_match_data();
    if (!md) return snprintf(err, errlen, "out of memory"), -1;
    *slot = md;
    return 0;
}

void sl_urlrules_loop_fini(void **slot)
{
    pcre2_match_data_free(*slot);
    *slot = NULL;
}

static bool add_part(rule *r, size_t *cap, part p)
{
    if (r->n_parts == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        part *np = realloc(r->parts, nc * sizeof *np);
        if (!np) return false;
        r->parts = np;
        *cap = nc;
    }
    /* Adjacent literal runs become one. */
    if (p.kind == P_LIT && r->n_parts && r->parts[r->n_parts - 1].kind == P_LIT &&
        r->parts[r->n_parts - 1].off + r->parts[r->n_parts - 1].len == p.off) {
        r->parts[r->n_parts - 1].len += p.len;
        return true;
    }
    r->parts[r->n_parts++] = p;
    return true;
}

static bool prefix(const char **s, const char *word)
{
    size_t n = strlen(word);
    if (strncmp(*s, word, n)) return false;
    *s += n;
    return true;
}

/* Can a %N name group g of the enclosing condition, which has cond_groups (-1: no =~)? */
static int cond_check(unsigned g, int cond_groups, char *why, size_t whylen)
{
    if (cond_groups < 0)
        snprintf(why, whylen,
                 "%%%u names a group of the =~ condition of the block this key is set in, and "
                 "that block has no =~ condition",
                 g);
    else if (g > (unsigned)cond_groups)
        snprintf(why, whylen, "%%%u but the block's condition has %d group(s)", g, cond_groups);
    else if (g >= SL_COND_MAX_CAPTURE)
        snprintf(why, whylen, "%%{%u}: a condition's groups go up to %%9", g);
    else
        return 0;
    return -1;
}

/* Parse "${...}" (or "%{...}": cond, whose numbers name groups of the enclosing condition,
 * which has cond_groups) starting after the '{' at *s; on success *s is past the '}'. */
static int parse_ext(const char **s, part *p, uint32_t groups, bool cond, int cond_groups,
                     char *why, size_t whylen)
{
    static const struct { const char *word; unsigned char flag; } flags[] = {
        {"escape:", F_ENC_ALL}, {"escnde:", F_ENC_NDE}, {"escpsnde:", F_ENC_PSNDE},
        {"esc:", F_ENC_ALL},    {"noescape:", F_ENC_NONE}, {"noesc:", F_ENC_NONE},
        {"tolower:", F_LOWER},  {"toupper:", F_UPPER},
    };
    static const struct { const char *word; unsigned char kind; } names[] = {
        {"url.scheme}", P_SCHEME}, {"url.authority.noport}", P_AUTH_NOPORT},
        {"url.authority}", P_AUTHORITY}, {"url.port}", P_PORT}, {"url.path}", P_PATH},
        {"url.query}", P_QUERY}, {"qsa}", P_QSA},
    };
    const char *t = *s;
    unsigned char f = 0;
    for (bool more = true; more;) {
        more = false;
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            if (prefix(&t, flags[i].word)) {
                f |= flags[i].flag;
                more = true;
                break;
            }
    }
    if (!strncmp(t, "encb64u:", 8) || !strncmp(t, "decb64u:", 8)) {
        snprintf(why, whylen, "base64 flags (encb64u:, decb64u:) are not supported");
        return -1;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (prefix(&t, names[i].word)) {
            *p = (part){.kind = names[i].kind, .flags = f};
            *s = t;
            return 0;
        }
    if (t[0] >= '0' && t[0] <= '9') {
        unsigned g = (unsigned)(t[0] - '0');
        t++;
        if (t[0] >= '0' && t[0] <= '9') g = g * 10 + (unsigned)(*t++ - '0');
        if (t[0] == '}') {
            if (cond && cond_check(g, cond_groups, why, whylen) < 0) return -1;
            if (!cond && g > groups) {
                snprintf(why, whylen, "${%u} but the pattern has %u group(s)", g, groups);
                return -1;
            }
            /* ${N} without flags encodes like escpsnde: (lighttpd's default). */
            *p = (part){.kind = cond ? P_CGROUP : P_GROUP, .n = (unsigned short)g,
                        .flags = f ? f : F_ENC_PSNDE};
            *s = t + 1;
            return 0;
        }
    }
    const char *end = strchr(*s, '}');
    snprintf(why, whylen, "unknown substitution \"%c{%.*s\"", cond ? '%' : '$',
             end ? (int)(end - *s + 1) : 20, *s);
    return -1;
}

/* Cut r->tmpl into parts. */
static int compile_template(rule *r, uint32_t groups, int cond_groups, char *why, size_t whylen)
{
    size_t cap = 0;
    const char *t = r->tmpl, *s = t;
    r->empty = !t[0];
    while (*s) {
        part p;
        if (s[0] == '%' && s[1] >= '0' && s[1] <= '9') {
            /* One digit, as lighttpd reads it: "%20" is group 2 and a "0". */
            unsigned g = (unsigned)(s[1] - '0');
            if (cond_check(g, cond_groups, why, whylen) < 0) return -1;
            p = (part){.kind = P_CGROUP, .n = (unsigned short)g};
            s += 2;
        } else if (s[0] == '%' && s[1] == '{') {
            s += 2;
            if (parse_ext(&s, &p, groups, true, cond_groups, why, whylen) < 0) return -1;
        } else if ((s[0] == '$' || s[0] == '%') && s[1] == s[0]) {
            p = (part){.kind = P_LIT, .off = (size_t)(s - t), .len = 1}; /* "$$" -> "$" */
            s += 2;
        } else if (s[0] == '$' && s[1] >= '0' && s[1] <= '9') {
            uint32_t g = (uint32_t)(s[1] - '0');
            if (g > groups) {
                snprintf(why, whylen, "$%u but the pattern has %u group(s)", g, groups);
                return -1;
            }
            p = (part){.kind = P_GROUP, .n = (unsigned short)g};
            s += 2;
        } else if (s[0] == '$' && s[1] == '{') {
            s += 2;
            if (parse_ext(&s, &p, groups, false, -1, why, whylen) < 0) return -1;
        } else {
            p = (part){.kind = P_LIT, .off = (size_t)(s - t), .len = 1};
            s++;
        }
        if (!add_part(r, &cap, p)) return snprintf(why, whylen, "out of memory"), -1;
    }
    return 0;
}

static bool uses_cond(const rule *r)
{
    for (size_t i = 0; i < r->n_parts; i++)
        if (r->parts[i].kind == P_CGROUP) return true;
    return false;
}

int sl_urlrules_compile(sl_urlrules **rsp, const sl_cval *v, const char *key, int cond_groups,
                        char *err, size_t errlen)
{
    if (!sl_cval_strings(v, true)) {
        snprintf(err, errlen, "%s must be an array of \"regex\" => \"url\" pairs", key);
        return -1;
    }
    sl_urlrules *rs = *rsp;
    bool made = !rs;
    if (made && !(rs = calloc(1, sizeof *rs))) return snprintf(err, errlen, "out of memory"), -1;
    if (made) rs->cap_slot = -1;
    size_t first = rs->n;
    if (rs->n + v->n_items > rs->cap) {
        size_t nc = rs->n + v->n_items;
        rule *nr = realloc(rs->r, nc * sizeof *nr);
        if (!nr) {
            snprintf(err, errlen, "out of memory");
            goto bad;
        }
        rs->r = nr;
        rs->cap = nc;
    }
    for (size_t i = 0; i < v->n_items; i++) {
        rule *r = &rs->r[rs->n++];
        memset(r, 0, sizeof *r);
        r->pattern = strdup(v->items[i].key);
        r->tmpl = strdup(v->items[i].val->str);
        if (!r->pattern || !r->tmpl) {
            snprintf(err, errlen, "out of memory");
            goto bad;
        }
        int code;
        PCRE2_SIZE at;
        r->re = pcre2_compile((PCRE2_SPTR)r->pattern, PCRE2_ZERO_TERMINATED, 0, &code, &at, NULL);
        if (!r->re) {
            char msg[160];
            pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
            snprintf(err, errlen, "%s \"%s\": %s at offset %zu", key, r->pattern, msg, (size_t)at);
            goto bad;
        }
        /* Faster matching where PCRE2 was built with its JIT; the interpreter otherwise. */
        (void)pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE);
        uint32_t groups = 0;
        pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &groups);
        char why[200];
        if (compile_template(r, groups, cond_groups, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s \"%s\" => \"%s\": %s", key, r->pattern, r->tmpl, why);
            goto bad;
        }
    }
    for (size_t i = first; i < rs->n; i++) rs->uses_cond |= uses_cond(&rs->r[i]);
    *rsp = rs;
    return 0;
bad:
    while (rs->n > first) rule_free(&rs->r[--rs->n]);
    if (made) sl_urlrules_free(rs);
    return -1;
}

int sl_urlrules_prepare(sl_urlrules **rs, const sl_cval *v, const sl_key_ctx *ctx)
{
    if (sl_urlrules_compile(rs, v, ctx->assign->key, sl_cond_groups(ctx->cond), ctx->err,
                            ctx->errlen) < 0)
        return -1;
    /* Only a list that uses %N makes its block keep its groups per request. */
    if ((*rs)->uses_cond) (*rs)->cap_slot = sl_key_keep_captures(ctx);
    return 0;
}

bool sl_urlrules_uses_cond(const sl_urlrules *rs)
{
    return rs && rs->uses_cond;
}

void sl_urlrules_set_slot(sl_urlrules *rs, int slot)
{
    rs->cap_slot = slot;
}

static bool unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

static int hexval(unsigned char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

/* The output being written. */
typedef struct out {
    char *b;
    size_t cap, len;
    bool over;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->over || o->len + n >= o->cap) {
        o->over = true;
        return;
    }
    memcpy(o->b + o->len, s, n);
    o->len += n;
}

static void put_enc(out *o, unsigned char ch)
{
    static const char hex[] = "0123456789ABCDEF";
    char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
    put(o, e, 3);
}

/* Write s[0..n) as flags say. */
static void emit(out *o, const char *s, size_t n, unsigned flags)
{
    size_t from = o->len;
    if (!(flags & (F_ENC_ALL | F_ENC_NDE | F_ENC_PSNDE)) || (flags & F_ENC_NONE)) {
        put(o, s, n);
    } else if (flags & F_ENC_ALL) {
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (unreserved(ch)) put(o, s + i, 1);
            else put_enc(o, ch);
        }
    } else {
        bool slash = !(flags & F_ENC_NDE); /* escpsnde: keeps '/' */
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            int h1, h2;
            if (ch == '%' && i + 2 < n &&
                (h1 = hexval((unsigned char)s[i + 1])) >= 0 &&
                (h2 = hexval((unsigned char)s[i + 2])) >= 0) {
                /* Not encoded twice; an escaped unreserved character is decoded. */
                unsigned char x = (unsigned char)(h1 << 4 | h2);
                if (unreserved(x)) put(o, (const char *)&x, 1);
                else put(o, s + i, 3);
                i += 2;
            } else if (unreserved(ch) || (slash && ch == '/')) {
                put(o, s + i, 1);
            } else {
                put_enc(o, ch);
            }
        }
    }
    if (o->over || !(flags & (F_LOWER | F_UPPER))) return;
    /* Case changes skip %XX escapes. */
    for (size_t i = from; i < o->len; i++) {
        char *p = o->b + i;
        if (*p == '%' && i + 2 < o->len && hexval((unsigned char)p[1]) >= 0 &&
            hexval((unsigned char)p[2]) >= 0)
            i += 2;
        else if ((flags & F_LOWER) && *p >= 'A' && *p <= 'Z')
            *p = (char)(*p | 0x20);
        else if (!(flags & F_LOWER) && *p >= 'a' && *p <= 'z')
            *p = (char)(*p & ~0x20);
    }
}

int sl_urlrules_apply(const sl_urlrules *rs, pcre2_match_data *md, const char *subject,
                      size_t len, const sl_url_env *env, char *buf, size_t cap, size_t *outlen,
                      size_t *idx)
{
    size_t n_rules = sl_urlrules_count(rs);
    for (size_t i = 0; i < n_rules; i++) {
        const rule *r = &rs->r[i];
        int n = pcre2_match(r->re, (PCRE2_SPTR)subject, len, 0, 0, md, NULL);
        if (n == PCRE2_ERROR_NOMATCH) continue;
        if (n < 0) return -EIO;
        *idx = i;
        if (r->empty) return SL_URL_EXEMPT;
        if (n == 0) n = (int)pcre2_get_ovector_count(md); /* more groups than room: all set */
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        const char *q = memchr(subject, '?', len);
        size_t pl = q ? (size_t)(q - subject) : len;
        /* The enclosing condition's groups: set when its block matched this request, which it
         * did whenever these rules apply (they are its key's). */
        const sl_cond_capture *cc = rs->cap_slot >= 0 && env->caps ? &env->caps[rs->cap_slot]
                                                                    : NULL;
        if (cc && !cc->set) cc = NULL;
        out o = {.b = buf, .cap = cap};
        for (size_t k = 0; k < r->n_parts; k++) {
            const part *p = &r->parts[k];
            switch (p->kind) {
            case P_LIT: put(&o, r->tmpl + p->off, p->len); break;
            case P_GROUP:
                if (p->n < (unsigned)n && ov[2 * p->n] != PCRE2_UNSET)
                    emit(&o, subject + ov[2 * p->n], ov[2 * p->n + 1] - ov[2 * p->n], p->flags);
                break;
            case P_CGROUP:
                if (cc && p->n < cc->n && cc->ov[2 * p->n] != SIZE_MAX)
                    emit(&o, cc->subject + cc->ov[2 * p->n],
                         cc->ov[2 * p->n + 1] - cc->ov[2 * p->n], p->flags);
                break;
            case P_SCHEME: emit(&o, env->scheme, strlen(env->scheme), p->flags); break;
            case P_AUTHORITY: emit(&o, env->authority, strlen(env->authority), p->flags); break;
            case P_AUTH_NOPORT: {
                const char *a = env->authority, *colon = strrchr(a, ':');
                size_t al = strlen(a);
                if (colon && al && a[al - 1] != ']') al = (size_t)(colon - a); /* not [v6] */
                emit(&o, a, al, p->flags);
                break;
            }
            case P_PORT: {
                char pb[12];
                int pn = snprintf(pb, sizeof pb, "%u", env->port);
                put(&o, pb, (size_t)pn);
                break;
            }
            case P_PATH: emit(&o, subject, pl, p->flags); break;
            case P_QUERY:
                if (q) emit(&o, q + 1, len - pl - 1, p->flags);
                break;
            case P_QSA:
                if (!q) break;
                if (o.len && memchr(o.b, '?', o.len)) {
                    if (len - pl > 1) put(&o, "&", 1);
                } else {
                    put(&o, "?", 1);
                }
                emit(&o, q + 1, len - pl - 1, p->flags);
                break;
            }
        }
        if (o.over) return -ENAMETOOLONG;
        buf[o.len] = 0;
        *outlen = o.len;
        return SL_URL_MATCHED;
    }
    return SL_URL_NOMATCH;
}
