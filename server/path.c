/* Request-target splitting and path normalization.
 *
 * sl_uri_split only finds the boundaries of the three request-target forms and rejects bytes that
 * no form allows; it never decodes anything, so its outputs can point into the caller's buffer.
 *
 * sl_path_normalize decodes and removes dot segments in a single pass, segment by segment: each
 * segment is first decoded only to learn its length and whether it is "." or "..", then, if it is
 * an ordinary segment, decoded a second time straight into the output. Deciding on the decoded
 * form is what makes "%2e%2e" climb like "..", and treating a decoded '/' as a separator is what
 * makes "..%2f" harmless. The output buffer always holds "/seg/seg..." with no trailing slash, so a
 * ".." is just a cut at the last '/'. Segments that do not fit are not written but counted
 * (`over`); they sit on top of the segment stack, so a later ".." cancels them first, and the
 * length error is decided only at the end, on the final result. The whole input is always
 * validated, so a bad escape is reported even if the output would also be too long.
 *
 * sl_host_normalize gives each host one spelling, so a condition written for "example.com" cannot
 * be dodged with "Example.COM.:80"; an IPv6 literal goes through inet_pton/inet_ntop, which
 * already know every way to write one.
 */
#include "path.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_unreserved(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool is_sub_delim(unsigned char c)
{
    return c != '\0' && strchr("!$&'()*+,;=", c) != NULL;
}

static bool ascii_ieq(const char *a, const char *b, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        unsigned char x = (unsigned char)a[k], y = (unsigned char)b[k];
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

bool sl_uri_port(const char *s, size_t len)
{
    if (len == 0) return true;
    if (s[0] != ':') return false;
    for (size_t k = 1; k < len; k++)
        if (!is_digit((unsigned char)s[k])) return false;
    return true;
}

ssize_t sl_uri_reg_name(const char *s, size_t len)
{
    size_t k = 0;
    while (k < len && s[k] != ':') {
        unsigned char c = (unsigned char)s[k];
        if (c == '%') {
            if (len - k < 3 || hexval((unsigned char)s[k + 1]) < 0 || hexval((unsigned char)s[k + 2]) < 0)
                return -1;
            k += 3;
        } else if (is_unreserved(c) || is_sub_delim(c)) {
            k++;
        } else {
            return -1;
        }
    }
    return (ssize_t)k;
}

/* RFC 3986 authority without userinfo: IP-literal or reg-name, then an optional port. The host
 * must not be empty (RFC 9110 §4.2.1). */
static bool valid_authority(const char *a, size_t len)
{
    size_t k = 0;
    if (len == 0) return false;
    if (a[0] == '[') {
        /* IPv6address / IPvFuture: checked only for its alphabet; the resolver never sees it. */
        for (k = 1; k < len && a[k] != ']'; k++) {
            unsigned char c = (unsigned char)a[k];
            if (!is_unreserved(c) && !is_sub_delim(c) && c != ':') return false;
        }
        if (k == len || k == 1) return false;
        k++;
    } else {
        ssize_t r = sl_uri_reg_name(a, len);
        if (r <= 0) return false;
        k = (size_t)r;
    }
    return sl_uri_port(a + k, len - k);
}

int sl_uri_split(const char *target, size_t len, const char **path, size_t *path_len, const char **query,
                 size_t *query_len, const char **auth, size_t *auth_len)
{
    size_t k, p0, q;

    if (len == 0) return -EINVAL;
    for (k = 0; k < len; k++) {
        unsigned char c = (unsigned char)target[k];
        if (c <= 0x20 || c == 0x7f || c == '#') return -EINVAL;
    }

    *query = NULL;
    *query_len = 0;
    *auth = NULL;
    *auth_len = 0;

    if (len == 1 && target[0] == '*') {
        *path = target;
        *path_len = 1;
        return 0;
    }

    if (target[0] == '/') {
        p0 = 0;
    } else {
        /* absolute-form: only http and https name a resource this server can have. */
        size_t slen;
        if (len > 7 && ascii_ieq(target, "http://", 7)) {
            slen = 4;
        } else if (len > 8 && ascii_ieq(target, "https://", 8)) {
            slen = 5;
        } else {
            return -EINVAL;
        }
        size_t a0 = slen + 3, a1 = a0;
        while (a1 < len && target[a1] != '/' && target[a1] != '?') a1++;
        if (!valid_authority(target + a0, a1 - a0)) return -EINVAL;
        *auth = target + a0;
        *auth_len = a1 - a0;
        p0 = a1;
    }

    for (q = p0; q < len && target[q] != '?'; q++)
        ;
    *path = target + p0;
    *path_len = q - p0;
    if (q < len) {
        *query = target + q + 1;
        *query_len = len - q - 1;
    }
    return 0;
}

/* Decodes the byte at p[*i] (a literal or a %XX escape) and advances *i past it.
 * Returns the byte, or -EINVAL for a malformed escape or a NUL / control byte. */
static int next_byte(const char *p, size_t len, size_t *i)
{
    unsigned char c = (unsigned char)p[*i];
    if (c == '%') {
        if (len - *i < 3) return -EINVAL;
        int hi = hexval((unsigned char)p[*i + 1]), lo = hexval((unsigned char)p[*i + 2]);
        if (hi < 0 || lo < 0) return -EINVAL;
        c = (unsigned char)(hi << 4 | lo);
        *i += 3;
    } else {
        *i += 1;
    }
    if (c < 0x20 || c == 0x7f) return -EINVAL;
    return c;
}

/* The common case: nothing to decode, merge or remove (no '%', no control byte, no "//", no
 * segment that starts with '.'), so path[0..len) is its own normal form. One pass over the
 * bytes instead of two through next_byte: every request's path and X-Sendfile value comes here. */
static bool already_normal(const char *p, size_t len)
{
    unsigned char prev = '/';
    for (size_t i = 1; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '%') return false;
        if (prev == '/' && (c == '/' || c == '.')) return false;
        prev = c;
    }
    return true;
}

ssize_t sl_path_normalize(const char *path, size_t len, char *out, size_t outcap)
{
    size_t pos = 0, over = 0, i = 1;
    bool trailing = false;

    if (len == 0 || path[0] != '/') return -EINVAL;
    if (len < outcap && already_normal(path, len)) {
        memcpy(out, path, len);
        out[len] = '\0';
        return (ssize_t)len;
    }

    for (;;) {
        size_t start = i, seg_end = len, seglen = 0;
        unsigned char d0 = 0, d1 = 0;
        bool sep = false;

        while (i < len) {
            size_t before = i;
            int c = next_byte(path, len, &i);
            if (c < 0) return c;
            if (c == '/') {
                seg_end = before;
                sep = true;
                break;
            }
            if (seglen == 0) d0 = (unsigned char)c;
            else if (seglen == 1) d1 = (unsigned char)c;
            seglen++;
        }

        if (seglen == 0 || (seglen == 1 && d0 == '.')) {
            /* Empty segments merge into one slash; "." stays where it is. Either one, as the last
             * segment, means the target named a directory. */
            trailing = true;
        } else if (seglen == 2 && d0 == '.' && d1 == '.') {
            if (over > 0) {
                over--;
            } else if (pos > 0) {
                while (out[--pos] != '/')
                    ;
            }
            trailing = true;
        } else {
            trailing = false;
            /* Room for "/" + segment + the NUL; a trailing '/' is checked at the end. pos < outcap
             * holds whenever pos > 0, and pos == 0 otherwise, so outcap - pos cannot wrap. */
            if (over > 0 || seglen + 2 > outcap - pos) {
                over++;
            } else {
                out[pos++] = '/';
                for (size_t r = start; r < seg_end;) out[pos++] = (char)next_byte(path, len, &r);
            }
        }
        if (!sep) break;
    }

    if (over > 0) return -ENAMETOOLONG;
    if (pos == 0 || trailing) {
        if (outcap < 2 || pos > outcap - 2) return -ENAMETOOLONG;
        out[pos++] = '/';
    }
    out[pos] = '\0';
    return (ssize_t)pos;
}

static bool keep_literal(unsigned char c)
{
    return is_unreserved(c) || is_sub_delim(c) || c == ':' || c == '@' || c == '/';
}

ssize_t sl_path_encode(const char *path, size_t len, char *out, size_t outcap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t pos = 0;
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)path[k];
        size_t need = keep_literal(c) ? 1 : 3;
        /* need + the NUL must still fit. */
        if (outcap - pos <= need) return -ENAMETOOLONG;
        if (need == 1) {
            out[pos++] = (char)c;
        } else {
            out[pos++] = '%';
            out[pos++] = hex[c >> 4];
            out[pos++] = hex[c & 15];
        }
    }
    if (outcap == 0) return -ENAMETOOLONG;
    out[pos] = '\0';
    return (ssize_t)pos;
}

bool sl_ipv4_literal(const char *s, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0 && (i >= n || s[i++] != '.')) return false;
        size_t st = i;
        unsigned v = 0;
        while (i < n && i - st < 3 && is_digit((unsigned char)s[i]))
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == st || v > 255 || (i - st > 1 && s[st] == '0')) return false;
    }
    return i == n;
}

/* A name: labels of letters, digits and '-', none empty or starting with '-'; written to out
 * lower-cased. A last label of digits only makes it an IPv4 address, which must be one. */
static bool host_name(const char *s, size_t n, char *out)
{
    size_t label = 0;
    bool digits = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0) return false;
            label = 0;
            digits = true;
        } else if (is_alpha(c) || is_digit(c) || (c == '-' && label > 0)) {
            label++;
            digits = digits && is_digit(c);
        } else {
            return false;
        }
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (label == 0) return false;
    return !digits || sl_ipv4_literal(s, n);
}

ssize_t sl_host_normalize(const char *h, size_t len, unsigned default_port, char *out,
                          size_t outcap)
{
    char host[256]; /* longer than any name DNS can hold (253) and any IPv6 literal */
    size_t hl, i;
    if (len == 0) return -EINVAL;
    if (h[0] == '[') {
        const char *e = memchr(h, ']', len);
        char lit[INET6_ADDRSTRLEN];
        struct in6_addr a;
        size_t n = e ? (size_t)(e - h) - 1 : 0;
        if (!e || n == 0 || n >= sizeof lit) return -EINVAL;
        memcpy(lit, h + 1, n);
        lit[n] = 0;
        if (inet_pton(AF_INET6, lit, &a) != 1 || !inet_ntop(AF_INET6, &a, lit, sizeof lit))
            return -EINVAL;
        hl = (size_t)snprintf(host, sizeof host, "[%s]", lit);
        i = n + 2;
    } else {
        for (i = 0; i < len && h[i] != ':'; i++)
            ;
        hl = i && h[i - 1] == '.' ? i - 1 : i; /* one trailing dot: the same name */
        if (hl >= sizeof host) return -ENAMETOOLONG;
        if (!host_name(h, hl, host)) return -EINVAL;
    }
    unsigned long port = 0;
    size_t pl = 0;
    if (i < len) {
        if (h[i] != ':') return -EINVAL;
        const char *p = h + i + 1;
        pl = len - i - 1;
        if (pl > 5 || (pl > 0 && p[0] == '0')) return -EINVAL;
        for (size_t k = 0; k < pl; k++) {
            if (!is_digit((unsigned char)p[k])) return -EINVAL;
            port = port * 10 + (unsigned long)(p[k] - '0');
        }
        if (port > 65535) return -EINVAL;
        if (port == default_port) pl = 0;
    }
    if (hl + (pl ? pl + 1 : 0) + 1 > outcap) return -ENAMETOOLONG;
    memcpy(out, host, hl);
    if (pl) {
        out[hl] = ':';
        memcpy(out + hl + 1, h + len - pl, pl);
        hl += pl + 1;
    }
    out[hl] = 0;
    return (ssize_t)hl;
}

/* The path part of a normalized target (up to '?') as lighttpd's default url-path-2f-decode
 * and url-path-dotseg-remove leave it: "%2F" is a '/', "." and ".." segments are resolved and
 * empty ones dropped ("/a//./b/../c" is "/a/c"; a trailing '/' stays, as after "." or "..").
 * In place; only ever shortens. Returns the new length. */
static ssize_t target_path_simplify(char *s, size_t n)
{
    if (!n || s[0] != '/') return (ssize_t)n; /* absolute-form: left as it came */
    size_t pl = 0;
    while (pl < n && s[pl] != '?') pl++;
    size_t w = 0;
    for (size_t r = 0; r < pl; r++, w++) { /* %2F -> '/' (hex already upper-case) */
        if (s[r] == '%' && r + 2 < pl && s[r + 1] == '2' && s[r + 2] == 'F') {
            s[w] = '/';
            r += 2;
        } else {
            s[w] = s[r];
        }
    }
    size_t o = 0; /* output length; s[0] stays '/' */
    size_t r = 0;
    bool slash_end = false;
    while (r < w) {
        while (r < w && s[r] == '/') r++;
        size_t b = r;
        while (r < w && s[r] != '/') r++;
        size_t len = r - b;
        slash_end = r < w || (len == 0);
        if (len == 0) break;
        if (len == 1 && s[b] == '.') {
            slash_end = true;
            continue;
        }
        if (len == 2 && s[b] == '.' && s[b + 1] == '.') {
            while (o > 0 && s[o - 1] != '/') o--; /* drop the last segment */
            if (o > 0) o--;                         /* and its '/' */
            slash_end = true;
            continue;
        }
        s[o++] = '/';
        memmove(s + o, s + b, len);
        o += len;
    }
    if (o == 0 || slash_end) s[o++] = '/';
    size_t ql = n - pl; /* the query with its '?' */
    memmove(s + o, s + pl, ql);
    o += ql;
    s[o] = 0;
    return (ssize_t)o;
}

ssize_t sl_target_normalize(const char *t, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch == '%' && i + 2 < n && hexval((unsigned char)t[i + 1]) >= 0 &&
            hexval((unsigned char)t[i + 2]) >= 0) {
            int v = (hexval((unsigned char)t[i + 1]) << 4) | hexval((unsigned char)t[i + 2]);
            bool unreserved = (v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') ||
                              (v >= '0' && v <= '9') || v == '-' || v == '.' || v == '_' || v == '~';
            if (unreserved) {
                if (o + 1 >= cap) return -1;
                out[o++] = (char)v;
            } else {
                if (o + 3 >= cap) return -1;
                out[o++] = '%';
                out[o++] = hex[v >> 4];
                out[o++] = hex[v & 15];
            }
            i += 2;
        } else if (ch > 0x7e) {
            if (o + 3 >= cap) return -1;
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        } else {
            if (o + 1 >= cap) return -1;
            out[o++] = (char)ch;
        }
    }
    out[o] = 0;
    return target_path_simplify(out, o);
}
