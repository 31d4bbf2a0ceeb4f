/* Parsers of the Authorization field for mod_auth: Basic's base64 token68 and Digest's list of
 * auth-params.
 *
 * They face whatever a client sends before it is authenticated, so they are strict and small:
 * every value lands in a buffer the caller sized from the field (nothing is allocated, nothing
 * is written past cap), a value with a control character or NUL is refused (a user name goes
 * to the access log and to back ends as REMOTE_USER), and a Digest parameter given twice is a
 * syntax error rather than "the last one wins", so two parts of a chain cannot read different
 * values from one header. Unknown Digest parameters are skipped, as RFC 7616 §3.4 asks.
 * tests/fuzz/fuzz_auth_parse.c runs both on arbitrary bytes.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "auth_parse.h"

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

long sl_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap)
{
    /* Up to two '=' at the end, and only where they complete a group of four. */
    size_t pad = 0;
    while (pad < 2 && len > pad && in[len - 1 - pad] == '=') pad++;
    if (pad && len % 4) return -EINVAL;
    size_t n = len - pad;
    if (n % 4 == 1) return -EINVAL; /* one character holds 6 bits: no byte */
    size_t outlen = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (outlen > cap) return -E2BIG;
    unsigned acc = 0, bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i]);
        if (v < 0) return -EINVAL;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* The bits left over must be zero (a canonical encoding). */
    if (acc) return -EINVAL;
    return (long)o;
}

/* Does v start with the scheme name (any case) and a space? Sets *rest past the spaces. */
static bool scheme_is(const char *v, size_t len, const char *scheme, size_t *rest)
{
    size_t sl = strlen(scheme);
    if (len <= sl || strncasecmp(v, scheme, sl) || v[sl] != ' ') return false;
    size_t i = sl;
    while (i < len && v[i] == ' ') i++;
    *rest = i;
    return true;
}

int sl_auth_basic_parse(const char *v, size_t len, char *buf, size_t cap, const char **user,
                        size_t *ulen, const char **pw, size_t *pwlen)
{
    size_t i;
    if (!scheme_is(v, len, "Basic", &i)) return -ENOENT;
    size_t end = len;
    while (end > i && (v[end - 1] == ' ' || v[end - 1] == '\t')) end--;
    if (end == i || cap == 0) return end == i ? -EINVAL : -E2BIG;
    long n = sl_base64_decode(v + i, end - i, (unsigned char *)buf, cap - 1);
    if (n < 0) return (int)n;
    buf[n] = 0;
    char *colon = memchr(buf, ':', (size_t)n);
    if (!colon) return -EINVAL;
    for (long k = 0; k < n; k++)
        if ((unsigned char)buf[k] < 0x20 || buf[k] == 0x7f) return -EINVAL;
    *colon = 0;
    *user = buf;
    *ulen = (size_t)(colon - buf);
    *pw = colon + 1;
    *pwlen = (size_t)(buf + n - (colon + 1));
    return 0;
}

static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

int sl_auth_digest_parse(const char *v, size_t len, char *buf, size_t cap, sl_digest_params *p)
{
    static const struct { const char *name; size_t off; } known[] = {
#define K(n, f) {n, offsetof(sl_digest_params, f)}
        K("username", username), K("username*", username_star), K("realm", realm),
        K("nonce", nonce),       K("uri", uri),                 K("algorithm", algorithm),
        K("qop", qop),           K("cnonce", cnonce),           K("nc", nc),
        K("response", response), K("userhash", userhash),       K("opaque", opaque),
#undef K
    };
    size_t i, o = 0;
    memset(p, 0, sizeof *p);
    if (!scheme_is(v, len, "Digest", &i)) return -ENOENT;
    bool first = true;
    for (;;) {
        /* OWS, and the commas of empty list elements (RFC 9110 §5.6.1.2). */
        bool comma = false;
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) comma |= v[i++] == ',';
        if (i == len) break;
        if (!first && !comma) return -EINVAL;
        first = false;
        size_t ns = i;
        while (i < len && is_tchar((unsigned char)v[i])) i++;
        size_t nl = i - ns;
        if (!nl) return -EINVAL;
        while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
        if (i == len || v[i] != '=') return -EINVAL;
        i++;
        while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
        const char **slot = NULL;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !slot; k++)
            if (strlen(known[k].name) == nl && !strncasecmp(v + ns, known[k].name, nl))
                slot = (const char **)((char *)p + known[k].off);
        if (slot && *slot) return -EINVAL; /* given twice */
        char *val = buf + o;
        size_t vl = 0;
        if (i < len && v[i] == '"') {
            /* quoted-string: qdtext or quoted-pair, up to the closing quote. */
            i++;
            for (;;) {
                if (i == len) return -EINVAL;
                unsigned char ch = (unsigned char)v[i++];
                if (ch == '"') break;
                if (ch == '\\') {
                    if (i == len) return -EINVAL;
                    ch = (unsigned char)v[i++];
                }
                if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return -EINVAL;
                if (slot) {
                    if (o + vl + 1 >= cap) return -E2BIG;
                    val[vl] = (char)ch;
                }
                vl++;
            }
        } else {
            size_t vs = i;
            while (i < len && is_tchar((unsigned char)v[i])) i++;
            if (i == vs) return -EINVAL;
            vl = i - vs;
            if (slot) {
                if (o + vl + 1 > cap) return -E2BIG;
                memcpy(val, v + vs, vl);
            }
        }
        if (slot) {
            if (o + vl + 1 > cap) return -E2BIG; /* an empty "" */
            val[vl] = 0;
            o += vl + 1;
            *slot = val;
        }
        /* Only OWS may come before the next comma. */
        while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
        if (i < len && v[i] != ',') return -EINVAL;
    }
    return 0;
}

static int hexdig(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0'
         : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : -1;
}

/* Is s[0..n) well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF)? */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || i + len > n) return false;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

long sl_auth_ext_value_decode(const char *in, char *out, size_t cap)
{
    bool utf8;
    if (!strncasecmp(in, "UTF-8'", 6)) {
        utf8 = true;
        in += 6;
    } else if (!strncasecmp(in, "ISO-8859-1'", 11)) {
        utf8 = false;
        in += 11;
    } else {
        return -EINVAL;
    }
    const char *q = strchr(in, '\''); /* the end of the language tag */
    if (!q) return -EINVAL;
    in = q + 1;
    size_t o = 0;
    for (; *in; in++) {
        unsigned char ch = (unsigned char)*in;
        if (ch == '%') {
            int hi = hexdig(in[1]), lo = hi < 0 ? -1 : hexdig(in[2]);
            if (lo < 0) return -EINVAL;
            ch = (unsigned char)(hi << 4 | lo);
            in += 2;
        } else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("!#$&+-.^_`|~", ch))) {
            return -EINVAL; /* attr-char only (RFC 8187 §3.2.1) */
        }
        if (ch < 0x20 || ch == 0x7f) return -EINVAL;
        if (o + 1 >= cap) return -E2BIG;
        out[o++] = (char)ch;
    }
    if (utf8 && !utf8_ok((const unsigned char *)out, o)) return -EINVAL;
    out[o] = 0;
    return (long)o;
}
