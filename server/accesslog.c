/* Access log formats.
 *
 * A format string is compiled at start-up into an array of items (literal text, or a directive
 * letter with its optional {argument}), so an unknown directive is a start-up error and
 * rendering is a single walk over the array with no parsing. Rendering writes into the caller's
 * buffer through one bounded writer: every escape sequence and every number is written whole or
 * not at all, and once something does not fit nothing more is written, so a truncated line is
 * a clean prefix of the full line followed by '\n'. What a client controls is escaped the way
 * Apache's ap_escape_logitem does, so a request can neither start a new line nor close a quoted
 * field. The default %t is built by hand rather than with strftime so the month names stay
 * English whatever the locale.
 */
#include "accesslog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SL_AL_STR(x) #x
#define SL_AL_XSTR(x) SL_AL_STR(x)

/* How a %{...}t renders its argument. */
enum sl_tkind { T_CLF, T_STRFTIME, T_SEC, T_MSEC, T_USEC, T_MSEC_FRAC, T_USEC_FRAC };

/* One compiled piece of a format: literal text (letter 0) or a directive. */
typedef struct sl_al_item {
    char letter;      /* 0: literal text; else the directive letter */
    enum sl_tkind tk; /* for 't' */
    char *text;       /* the literal, or the {argument}; NUL-terminated, NULL when none */
    size_t len;
} sl_al_item;

struct sl_accesslog_fmt {
    sl_al_item *items;
    size_t n;
};

void sl_accesslog_fmt_free(sl_accesslog_fmt *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->items[i].text);
    free(f->items);
    free(f);
}

static int add_item(sl_accesslog_fmt *f, char letter, const char *text, size_t len, bool has_text)
{
    sl_al_item *ni = realloc(f->items, (f->n + 1) * sizeof *ni);
    if (!ni) return -ENOMEM;
    f->items = ni;
    sl_al_item *it = &f->items[f->n];
    memset(it, 0, sizeof *it);
    it->letter = letter;
    it->len = len;
    if (has_text) {
        if (!(it->text = malloc(len + 1))) return -ENOMEM;
        memcpy(it->text, text, len);
        it->text[len] = 0;
    }
    f->n++;
    return 0;
}

/* Adjacent literals (text, "%%") merge so rendering copies them in one go. */
static int add_literal(sl_accesslog_fmt *f, const char *text, size_t len)
{
    if (f->n && f->items[f->n - 1].letter == 0) {
        sl_al_item *it = &f->items[f->n - 1];
        char *nt = realloc(it->text, it->len + len + 1);
        if (!nt) return -ENOMEM;
        memcpy(nt + it->len, text, len);
        it->len += len;
        nt[it->len] = 0;
        it->text = nt;
        return 0;
    }
    return add_item(f, 0, text, len, true);
}

static enum sl_tkind time_kind(const char *arg)
{
    static const struct { const char *name; enum sl_tkind k; } named[] = {
        {"sec", T_SEC}, {"msec", T_MSEC}, {"usec", T_USEC},
        {"msec_frac", T_MSEC_FRAC}, {"usec_frac", T_USEC_FRAC},
    };
    if (!arg) return T_CLF;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(arg, named[i].name)) return named[i].k;
    return T_STRFTIME;
}

static void set_err(char *err, size_t errlen, const char *fmt, size_t at, const char *what)
{
    if (!err || !errlen) return;
    snprintf(err, errlen, "access log format: %s at offset %zu of \"%s\"", what, at, fmt);
}

int sl_accesslog_compile(const char *fmt, sl_accesslog_fmt **out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = 0;
    if (!fmt || !out) return -EINVAL;
    sl_accesslog_fmt *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    const char *p = fmt;
    int r = 0;
    while (*p && !r) {
        if (*p != '%') {
            size_t n = strcspn(p, "%");
            r = add_literal(f, p, n);
            p += n;
            continue;
        }
        const char *start = p++;
        size_t at = (size_t)(start - fmt);
        const char *arg = NULL;
        size_t alen = 0;
        if (*p == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                set_err(err, errlen, fmt, at, "unterminated %{");
                r = -EINVAL;
                break;
            }
            arg = p + 1;
            alen = (size_t)(e - arg);
            p = e + 1;
        }
        /* Apache's original/final request modifiers: seekless has no internal redirects, so
         * the first and the last status are the same; no other letter takes them. */
        bool modifier = *p == '>' || *p == '<';
        if (modifier) p++;
        char d = *p;
        char what[SL_ACCESSLOG_ARG_MAX + 512];
        /* The directive as written, for the message: at most the argument limit plus a few. */
        int shown = (int)((d ? p + 1 : p) - start);
        if (shown > SL_ACCESSLOG_ARG_MAX + 8) shown = SL_ACCESSLOG_ARG_MAX + 8;
        if (!d) {
            snprintf(what, sizeof what, "\"%.*s\" lacks a directive letter", shown, start);
            set_err(err, errlen, fmt, at, what);
            r = -EINVAL;
            break;
        }
        const char *with_arg = "tio", *plain = "%halutrmUqHsbBODTvVpfk";
        const char *why = NULL;
        if (arg && !strchr(with_arg, d))
            why = strchr(plain, d) ? "takes no {argument}" : "is not supported";
        else if (!arg && !strchr(plain, d))
            why = strchr(with_arg, d) && d != 't' ? "needs a {Name}" : "is not supported";
        else if (modifier && d != 's')
            why = "is not supported (only %>s and %<s take a '>' or '<')";
        else if (arg && alen == 0)
            why = "has an empty {argument}";
        else if (arg && alen > SL_ACCESSLOG_ARG_MAX)
            why = "has a {argument} longer than " SL_AL_XSTR(SL_ACCESSLOG_ARG_MAX) " bytes";
        if (why) {
            snprintf(what, sizeof what, "%.*s %s (known: %%h %%a %%l %%u %%t %%{format}t %%r %%m "
                     "%%U %%q %%H %%s %%>s %%b %%B %%O %%D %%T %%{Name}i %%{Name}o %%v %%V %%p "
                     "%%f %%k %%%%)", shown, start, why);
            set_err(err, errlen, fmt, at, what);
            r = -EINVAL;
            break;
        }
        if (d == '%') {
            r = add_literal(f, "%", 1);
        } else {
            r = add_item(f, d, arg, alen, arg != NULL);
            if (!r && d == 't') f->items[f->n - 1].tk = time_kind(f->items[f->n - 1].text);
        }
        p++;
    }
    if (r) {
        if (r == -ENOMEM && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
        sl_accesslog_fmt_free(f);
        return r;
    }
    *out = f;
    return 0;
}

/* The bounded writer: cap excludes the byte kept for the final '\n'. */
typedef struct sl_al_out {
    char *b;
    size_t n, cap;
    bool full; /* something did not fit: write nothing more */
} sl_al_out;

/* Write s whole or, when it does not fit, nothing and stop the line. */
static void put_whole(sl_al_out *o, const char *s, size_t n)
{
    if (o->full) return;
    if (n > o->cap - o->n) {
        o->full = true;
        return;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

/* Write as much of s as fits (literal text, which the operator wrote and cannot mislead). */
static void put_prefix(sl_al_out *o, const char *s, size_t n)
{
    if (o->full) return;
    size_t room = o->cap - o->n;
    if (n > room) {
        n = room;
        o->full = true;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

static void put_str(sl_al_out *o, const char *s)
{
    put_whole(o, s, strlen(s));
}

static void put_esc(sl_al_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n && !o->full; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put_whole(o, e, 2);
        } else if (c < 0x20 || c > 0x7e) {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            put_whole(o, e, 4);
        } else {
            put_whole(o, (const char *)&c, 1);
        }
    }
}

/* s (n bytes, or NUL-terminated when n is SIZE_MAX) escaped, or "-" when absent or empty. */
static void put_field(sl_al_out *o, const char *s, size_t n)
{
    if (s && n == SIZE_MAX) n = strlen(s);
    if (s && n)
        put_esc(o, s, n);
    else
        put_whole(o, "-", 1);
}

static void put_u64(sl_al_out *o, uint64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRIu64, v);
    put_whole(o, b, (size_t)n);
}

static void put_i64(sl_al_out *o, int64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%" PRId64, v);
    put_whole(o, b, (size_t)n);
}

/* [10/Oct/2000:13:55:36 -0700]: local time with its UTC offset, English month names. */
static void put_clf_time(sl_al_out *o, const struct tm *tm)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    long off = tm->tm_gmtoff / 60;
    char sign = off < 0 ? '-' : '+';
    if (off < 0) off = -off;
    char b[64];
    int n = snprintf(b, sizeof b, "[%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld]", tm->tm_mday,
                     months[(unsigned)tm->tm_mon % 12], tm->tm_year + 1900, tm->tm_hour,
                     tm->tm_min, tm->tm_sec, sign, off / 60, off % 60);
    if (n > 0) put_whole(o, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
}

static void put_time(sl_al_out *o, const sl_al_item *it, const struct timespec *ts)
{
    int64_t sec = ts->tv_sec;
    int64_t nsec = ts->tv_nsec;
    switch (it->tk) {
    case T_SEC: put_i64(o, sec); return;
    case T_MSEC: put_i64(o, sec * 1000 + nsec / 1000000); return;
    case T_USEC: put_i64(o, sec * 1000000 + nsec / 1000); return;
    case T_MSEC_FRAC: {
        char b[8];
        snprintf(b, sizeof b, "%03ld", (long)(nsec / 1000000) % 1000);
        put_str(o, b);
        return;
    }
    case T_USEC_FRAC: {
        char b[8];
        snprintf(b, sizeof b, "%06ld", (long)(nsec / 1000) % 1000000);
        put_str(o, b);
        return;
    }
    case T_CLF:
    case T_STRFTIME: break;
    }
    struct tm tm;
    time_t t = (time_t)sec;
    if (!localtime_r(&t, &tm)) {
        put_whole(o, "-", 1);
        return;
    }
    if (it->tk == T_CLF) {
        put_clf_time(o, &tm);
        return;
    }
    /* strftime returns 0 both for "did not fit" and for an empty result: either way there is
     * nothing trustworthy to write. The buffer is generous for a 128-byte format. */
    char b[1024];
    size_t n = strftime(b, sizeof b, it->text, &tm);
    put_whole(o, b, n);
}

static void put_header(sl_al_out *o, sl_accesslog_header_fn fn, void *ud, const char *name)
{
    size_t n = 0;
    const char *v = fn ? fn(ud, name, &n) : NULL;
    put_field(o, v, v ? n : 0);
}

size_t sl_accesslog_render(const sl_accesslog_fmt *f, const sl_accesslog_rec *r, char *buf,
                           size_t cap)
{
    if (cap == 0 || !buf) return 0;
    sl_al_out o = {buf, 0, cap - 1, false};
    for (size_t i = 0; f && r && i < f->n && !o.full; i++) {
        const sl_al_item *it = &f->items[i];
        switch (it->letter) {
        case 0: put_prefix(&o, it->text, it->len); break;
        case 'h':
        case 'a': put_field(&o, r->remote_addr, SIZE_MAX); break;
        case 'l': put_whole(&o, "-", 1); break;
        case 'u': put_field(&o, r->remote_user, SIZE_MAX); break;
        case 't': put_time(&o, it, &r->when); break;
        case 'r':
            /* A request that never parsed has no line to show. */
            if (!r->method && !r->target) {
                put_whole(&o, "-", 1);
                break;
            }
            put_field(&o, r->method, r->method ? r->method_len : 0);
            put_whole(&o, " ", 1);
            put_field(&o, r->target, r->target ? r->target_len : 0);
            if (r->protocol) {
                put_whole(&o, " ", 1);
                put_field(&o, r->protocol, r->protocol_len ? r->protocol_len : SIZE_MAX);
            }
            break;
        case 'm': put_field(&o, r->method, r->method ? r->method_len : 0); break;
        case 'U': put_field(&o, r->path, SIZE_MAX); break;
        case 'q':
            if (r->query && *r->query) {
                put_whole(&o, "?", 1);
                put_esc(&o, r->query, strlen(r->query));
            }
            break;
        case 'H': put_field(&o, r->protocol, r->protocol_len ? r->protocol_len : SIZE_MAX); break;
        case 's': put_i64(&o, r->status); break;
        case 'b':
            /* Apache's CLF convention: no body is "-", not 0. */
            if (r->body_bytes)
                put_u64(&o, r->body_bytes);
            else
                put_whole(&o, "-", 1);
            break;
        case 'B': put_u64(&o, r->body_bytes); break;
        case 'O': put_u64(&o, r->total_bytes); break;
        case 'D': put_u64(&o, r->duration_us); break;
        case 'T': put_u64(&o, r->duration_us / 1000000); break;
        case 'v': put_field(&o, r->server_name, SIZE_MAX); break;
        case 'V':
            /* Apache's UseCanonicalName Off: the client's Host, else the server's own name. */
            put_field(&o, r->host && *r->host ? r->host : r->server_name, SIZE_MAX);
            break;
        case 'p': put_i64(&o, r->port); break;
        case 'f': put_field(&o, r->filename, SIZE_MAX); break;
        case 'k': put_u64(&o, r->keepalive_requests); break;
        case 'i': put_header(&o, r->header, r->ud, it->text); break;
        case 'o': put_header(&o, r->resp_header, r->resp_ud, it->text); break;
        }
    }
    buf[o.n++] = '\n';
    return o.n;
}
