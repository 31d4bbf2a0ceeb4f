/* Accept-Encoding negotiation.
 *
 * The field is a comma-separated list of `coding [ OWS ";" OWS "q=" qvalue ]` over any number
 * of lines (RFC 9110 §12.5.3, §12.4.2). Clients send it on every request and it is attacker
 * input, so the reader is a single forward scan with no allocation that never fails as a whole:
 * a malformed element (a bad token, a q-value that is not 0..1 with at most three decimals, an
 * unknown parameter) is skipped and counted, and the other elements still count, because
 * answering the well-formed part is closer to what the client meant than ignoring it all. The
 * codings seekless does not know are dropped at once; only br, zstd, gzip/x-gzip, deflate,
 * identity and "*" are kept.
 */
#include "accept_enc.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static const char *const names[SL_ENC_N] = {"br", "zstd", "gzip", "deflate"};

const char *sl_encoding_name(sl_encoding e)
{
    return (unsigned)e < SL_ENC_N ? names[e] : NULL;
}

int sl_encoding_from_name(const char *s, size_t len)
{
    for (int i = 0; i < SL_ENC_N; i++)
        if (strlen(names[i]) == len && strncasecmp(s, names[i], len) == 0) return i;
    if (len == 6 && strncasecmp(s, "x-gzip", 6) == 0) return SL_ENC_GZIP;
    return -1;
}

static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths, or -1. */
static int parse_q(const char *s, size_t len)
{
    if (len == 0 || (s[0] != '0' && s[0] != '1')) return -1;
    int q = (s[0] - '0') * 1000;
    if (len == 1) return q;
    if (s[1] != '.' || len > 5) return -1;
    int scale = 100;
    for (size_t i = 2; i < len; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9') return -1;
        q += (s[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

static void keep(short *slot, int q)
{
    if (*slot < 0 || q < *slot) *slot = (short)q;
}

/* One element [s, e): 1 understood (known or not), 0 malformed. */
static int element(const char *s, const char *e, sl_ae_prefs *p)
{
    const char *t = s;
    while (t < e && is_tchar((unsigned char)*t)) t++;
    if (t == s) return 0;
    size_t tlen = (size_t)(t - s);
    int q = 1000;
    const char *r = t;
    while (r < e && is_ows(*r)) r++;
    if (r < e) {
        if (*r != ';') return 0;
        r++;
        while (r < e && is_ows(*r)) r++;
        if (e - r < 2 || (r[0] != 'q' && r[0] != 'Q') || r[1] != '=') return 0;
        r += 2;
        const char *v = r;
        while (r < e && !is_ows(*r)) r++;
        q = parse_q(v, (size_t)(r - v));
        while (r < e && is_ows(*r)) r++;
        if (q < 0 || r != e) return 0;
    }
    if (tlen == 1 && *s == '*')
        keep(&p->star, q);
    else if (tlen == 8 && strncasecmp(s, "identity", 8) == 0)
        keep(&p->identity, q);
    else {
        int enc = sl_encoding_from_name(s, tlen);
        if (enc >= 0) keep(&p->q[enc], q);
    }
    return 1;
}

static size_t parse_into(const char *v, size_t len, sl_ae_prefs *p)
{
    size_t n = 0;
    const char *end = v + len;
    while (v < end) {
        while (v < end && (is_ows(*v) || *v == ',')) v++;
        if (v >= end) break;
        const char *e = memchr(v, ',', (size_t)(end - v));
        if (!e) e = end;
        const char *last = e;
        while (last > v && is_ows(last[-1])) last--;
        if (element(v, last, p))
            n++;
        else
            p->bad++;
        v = e;
    }
    return n;
}

static void prefs_init(sl_ae_prefs *p)
{
    for (int i = 0; i < SL_ENC_N; i++) p->q[i] = -1;
    p->identity = p->star = -1;
    p->bad = 0;
}

size_t sl_ae_parse_value(const char *v, size_t len, sl_ae_prefs *p)
{
    prefs_init(p);
    return parse_into(v, len, p);
}

size_t sl_ae_parse(const sl_http_header *h, sl_ae_prefs *p)
{
    prefs_init(p);
    size_t n = 0;
    for (; h; h = h->next) n += parse_into(h->value, h->value_len, p);
    return n;
}

int sl_ae_quality(const sl_ae_prefs *p, sl_encoding e)
{
    if ((unsigned)e >= SL_ENC_N) return 0;
    if (p->q[e] >= 0) return p->q[e];
    return p->star > 0 ? p->star : 0;
}

size_t sl_ae_order(const sl_ae_prefs *p, const sl_encoding *offer, size_t n, sl_encoding *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int q = sl_ae_quality(p, offer[i]);
        if (q <= 0) continue;
        /* Insertion keeps the server's order among equal q-values (stable). */
        size_t j = k;
        while (j > 0 && sl_ae_quality(p, out[j - 1]) < q) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = offer[i];
        k++;
    }
    return k;
}
