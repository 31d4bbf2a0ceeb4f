/* Access log formats.
 *
 * A format string is compiled at start-up into a list of items (literal text, or a directive
 * with its optional {argument} and '>' modifier), so an unknown directive is a start-up error
 * and rendering is a walk over the list. Rendering writes into a caller's buffer with a bound
 * check on every byte; what a client sent is escaped, so a request cannot start a new line or
 * close a quoted field.
 */
#include "accesslog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct item {
    char kind;        /* 0: literal; else the directive letter */
    char *text;       /* literal text, or the {argument} */
    size_t len;
} item;

struct sl_accesslog_fmt {
    item *items;
    size_t n;
};

void sl_accesslog_fmt_free(sl_accesslog_fmt *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->items[i].text);
    free(f->items);
    free(f);
}

static int add(sl_accesslog_fmt *f, char kind, const char *text, size_t len)
{
    item *ni = realloc(f->items, (f->n + 1) * sizeof *ni);
    if (!ni) return -ENOMEM;
    f->items = ni;
    item *it = &f->items[f->n];
    it->kind = kind;
    it->len = len;
    it->text = NULL;
    if (text) {
        if (!(it->text = malloc(len + 1))) return -ENOMEM;
        memcpy(it->text, text, len);
        it->text[len] = 0;
    }
    f->n++;
    return 0;
}

int sl_accesslog_compile(const char *fmt, sl_accesslog_fmt **out, char *err, size_t errlen)
{
    sl_accesslog_fmt *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    const char *p = fmt;
    int r = 0;
    while (*p && !r) {
        if (*p != '%') {
            size_t n = strcspn(p, "%");
            r = add(f, 0, p, n);
            p += n;
            continue;
        }
        p++;
        const char *arg = NULL;
        size_t alen = 0;
        if (*p == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                snprintf(err, errlen, "unterminated %%{ in \"%s\"", fmt);
                r = -EINVAL;
                break;
            }
            arg = p + 1;
            alen = (size_t)(e - p - 1);
            p = e + 1;
        }
        if (*p == '>' || *p == '<') p++; /* %>s: the final status, the only one we have */
        char d = *p;
        const char *ok = arg ? "ti" : "%hlutrmUqHsbBODTvVpfka";
        if (!d || !strchr(ok, d)) {
            snprintf(err, errlen, "access log format: %%%s%.*s%s%c is not supported (use %%h %%l "
                     "%%u %%t %%r %%s %%b %%B %%O %%D %%T %%m %%U %%q %%H %%v %%V %%p %%f %%k "
                     "%%{Name}i %%{format}t)", arg ? "{" : "", (int)alen, arg ? arg : "",
                     arg ? "}" : "", d ? d : '?');
            r = -EINVAL;
            break;
        }
        r = d == '%' ? add(f, 0, "%", 1) : add(f, d, arg, alen);
        p++;
    }
    if (r) {
        sl_accesslog_fmt_free(f);
        return r;
    }
    *out = f;
    return 0;
}

typedef struct w {
    char *b;
    size_t n, cap; /* cap excludes the byte kept for the final '\n' */
} w;

static void put(w *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->n < o->cap; i++) o->b[o->n++] = s[i];
}

static void puts_(w *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_esc(w *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (c < 0x20 || c > 0x7e) {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            put(o, e, 4);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
}

static void put_esc_or_dash(w *o, const char *s)
{
    if (s && *s)
        put_esc(o, s, strlen(s));
    else
        puts_(o, "-");
}

static void putf(w *o, const char *fmt, unsigned long long v)
{
    char b[32];
    int n = snprintf(b, sizeof b, fmt, v);
    if (n > 0) put(o, b, (size_t)n);
}

size_t sl_accesslog_render(const sl_accesslog_fmt *f, const sl_accesslog_rec *r, char *buf,
                           size_t cap)
{
    if (cap == 0) return 0;
    w o = {buf, 0, cap - 1};
    for (size_t i = 0; i < f->n; i++) {
        const item *it = &f->items[i];
        switch (it->kind) {
        case 0: put(&o, it->text, it->len); break;
        case 'h':
        case 'a': put_esc_or_dash(&o, r->remote_addr); break;
        case 'l': puts_(&o, "-"); break;
        case 'u': puts_(&o, "-"); break; /* no authentication in seekless */
        case 't': {
            struct tm tm;
            time_t t = r->when.tv_sec;
            localtime_r(&t, &tm);
            char b[128];
            size_t n = strftime(b, sizeof b, it->text ? it->text : "[%d/%b/%Y:%H:%M:%S %z]", &tm);
            put(&o, b, n);
            break;
        }
        case 'r':
            put_esc(&o, r->method ? r->method : "-", r->method ? r->method_len : 1);
            puts_(&o, " ");
            put_esc(&o, r->target ? r->target : "-", r->target ? r->target_len : 1);
            puts_(&o, " ");
            puts_(&o, r->protocol ? r->protocol : "-");
            break;
        case 'm': put_esc(&o, r->method ? r->method : "-", r->method ? r->method_len : 1); break;
        case 'U': put_esc_or_dash(&o, r->path); break;
        case 'q':
            if (r->query && *r->query) {
                puts_(&o, "?");
                put_esc(&o, r->query, strlen(r->query));
            }
            break;
        case 'H': puts_(&o, r->protocol ? r->protocol : "-"); break;
        case 's': putf(&o, "%llu", (unsigned long long)r->status); break;
        case 'b':
            if (r->body_bytes)
                putf(&o, "%llu", r->body_bytes);
            else
                puts_(&o, "-");
            break;
        case 'B': putf(&o, "%llu", r->body_bytes); break;
        case 'O': putf(&o, "%llu", r->total_bytes); break;
        case 'D': putf(&o, "%llu", r->duration_us); break;
        case 'T': putf(&o, "%llu", r->duration_us / 1000000); break;
        case 'v': put_esc_or_dash(&o, r->server_name); break;
        case 'V': put_esc_or_dash(&o, r->host); break;
        case 'p': putf(&o, "%llu", (unsigned long long)r->port); break;
        case 'f': put_esc_or_dash(&o, r->filename); break;
        case 'k': putf(&o, "%llu", r->keepalive_requests); break;
        case 'i': {
            size_t n = 0;
            const char *v = r->header ? r->header(r->ud, it->text, &n) : NULL;
            if (v && n)
                put_esc(&o, v, n);
            else
                puts_(&o, "-");
            break;
        }
        }
    }
    buf[o.n++] = '\n';
    return o.n;
}
