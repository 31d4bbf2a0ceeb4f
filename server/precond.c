/* Conditional request evaluation (RFC 9110 §8.8.3, §13).
 *
 * Everything rests on one entity-tag scanner that recognises [W/]"opaque" at a position and reports
 * whether it is weak and where the quoted opaque part lies; list matching, If-Range and the
 * server's own tag all go through it, so "what is a tag" has a single definition. Comparison is on
 * the quoted opaque part, byte for byte. Lists are validated completely before a match counts, so
 * the answer never depends on where in a malformed list the matching tag happened to stand.
 * sl_precond_eval is the RFC 9110 §13.2.2 decision list written out step by step.
 */
#include "precond.h"

#include <stdint.h>
#include <string.h>

/* A parsed entity-tag: the opaque part includes its double quotes. */
struct etag_ref {
    bool weak;
    const char *opaque;
    size_t opaque_len;
};

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* etagc = %x21 / %x23-7E / obs-text */
static bool is_etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

/* Scans one entity-tag at s[*i]; on success advances *i past it. */
static bool scan_etag(const char *s, size_t len, size_t *i, struct etag_ref *t)
{
    size_t p = *i;
    t->weak = false;
    /* The weak prefix is case-sensitive: weak = %s"W/". */
    if (len - p >= 2 && s[p] == 'W' && s[p + 1] == '/') {
        t->weak = true;
        p += 2;
    }
    if (p >= len || s[p] != '"') return false;
    size_t start = p++;
    while (p < len && is_etagc((unsigned char)s[p])) p++;
    if (p >= len || s[p] != '"') return false;
    p++;
    t->opaque = s + start;
    t->opaque_len = p - start;
    *i = p;
    return true;
}

/* Parses a whole string as exactly one entity-tag, with optional OWS around it. */
static bool parse_single_etag(const char *s, size_t len, struct etag_ref *t)
{
    size_t i = 0;
    while (i < len && is_ows(s[i])) i++;
    if (!scan_etag(s, len, &i, t)) return false;
    while (i < len && is_ows(s[i])) i++;
    return i == len;
}

static bool etag_equal(const struct etag_ref *a, const struct etag_ref *b, bool weak)
{
    if (!weak && (a->weak || b->weak)) return false;
    return a->opaque_len == b->opaque_len && memcmp(a->opaque, b->opaque, a->opaque_len) == 0;
}

/* Is the field value "*" (with optional OWS)? */
static bool is_star(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && is_ows(s[i])) i++;
    if (i >= len || s[i] != '*') return false;
    i++;
    while (i < len && is_ows(s[i])) i++;
    return i == len;
}

/* Walks an entity-tag list; with mine, reports whether it matched. False on any syntax error. */
static bool scan_list(const char *list, size_t len, const struct etag_ref *mine, bool weak,
                      bool *matched)
{
    struct etag_ref theirs;
    size_t i = 0;
    *matched = false;
    for (;;) {
        /* Empty list elements are legal (RFC 9110 §5.6.1.2). */
        while (i < len && (is_ows(list[i]) || list[i] == ',')) i++;
        if (i == len) return true;
        if (!scan_etag(list, len, &i, &theirs)) return false;
        if (mine && etag_equal(mine, &theirs, weak)) *matched = true;
        while (i < len && is_ows(list[i])) i++;
        if (i < len && list[i] != ',') return false;
    }
}

static bool etag_list_valid(const char *list, size_t len)
{
    bool m;
    return scan_list(list, len, NULL, false, &m);
}

bool sl_etag_list_match(const char *list, size_t len, const char *etag, bool weak)
{
    struct etag_ref mine;
    bool matched;
    if (!etag || !parse_single_etag(etag, strlen(etag), &mine)) return false;
    return scan_list(list, len, &mine, weak, &matched) && matched;
}

/* Is a field's whole (combined) value "*"? Only a single line can be. */
static bool field_is_star(const sl_http_header *h)
{
    return !h->next && is_star(h->value, h->value_len);
}

/* The entity-tag list of every line of a field, as one list (RFC 9110 §5.3). Every line is
 * validated before a match counts, as within one line, so a match in the first line does not hide
 * garbage in the second. */
static bool field_etag_match(const sl_http_header *h, const char *etag, bool weak)
{
    bool matched = false;
    for (; h; h = h->next) {
        if (sl_etag_list_match(h->value, h->value_len, etag, weak))
            matched = true;
        else if (!etag_list_valid(h->value, h->value_len))
            return false;
    }
    return matched;
}

sl_precond_result sl_precond_eval(const sl_precond_input *in, const char *etag, time_t mtime)
{
    /* Step 1, or step 2 when If-Match is absent. */
    if (in->if_match) {
        if (!field_is_star(in->if_match) && !field_etag_match(in->if_match, etag, false))
            return SL_PRECOND_FAILED;
    } else if (in->has_if_unmodified_since) {
        if (mtime > in->if_unmodified_since) return SL_PRECOND_FAILED;
    }

    /* Step 3, or step 4 when If-None-Match is absent. */
    if (in->if_none_match) {
        if (field_is_star(in->if_none_match) || field_etag_match(in->if_none_match, etag, true))
            return in->get_or_head ? SL_PRECOND_NOT_MODIFIED : SL_PRECOND_FAILED;
    } else if (in->get_or_head && in->has_if_modified_since) {
        if (mtime <= in->if_modified_since) return SL_PRECOND_NOT_MODIFIED;
    }
    return SL_PRECOND_PASS;
}

bool sl_if_range_ok(const char *value, size_t len, bool has_date, time_t date, const char *etag, time_t mtime)
{
    size_t i = 0;
    while (i < len && is_ows(value[i])) i++;
    if (i == len) return false;

    /* An HTTP-date never starts with '"' or "W/" (day names start "Wed", not "W/"), so the first
     * bytes decide which kind of validator this is. */
    if (value[i] == '"' || (len - i >= 2 && value[i] == 'W' && value[i + 1] == '/')) {
        struct etag_ref theirs, mine;
        if (!parse_single_etag(value, len, &theirs)) return false;
        if (!etag || !parse_single_etag(etag, strlen(etag), &mine)) return false;
        return etag_equal(&mine, &theirs, false);
    }
    return has_date && date == mtime;
}

/* Appends x in lower-case hex without leading zeros. */
static size_t put_hex(char *p, uint64_t x)
{
    static const char hex[] = "0123456789abcdef";
    /* The digit count first, then the digits from the last: one pass, no reversal. */
    size_t n = x ? (size_t)(64 - __builtin_clzll(x) + 3) / 4 : 1;
    for (size_t k = n; k-- > 0; x >>= 4) p[k] = hex[x & 15];
    return n;
}

size_t sl_etag_make(char *buf, unsigned long long ino, unsigned long long size, long long mtime_sec,
                    long mtime_nsec)
{
    /* Unsigned arithmetic: wraps instead of overflowing for any input. */
    uint64_t mt = (uint64_t)mtime_sec * 1000000000u + (uint64_t)(int64_t)mtime_nsec;
    size_t n = 0;
    buf[n++] = '"';
    n += put_hex(buf + n, ino);
    buf[n++] = '-';
    n += put_hex(buf + n, size);
    buf[n++] = '-';
    n += put_hex(buf + n, mt);
    buf[n++] = '"';
    buf[n] = '\0';
    return n;
}
