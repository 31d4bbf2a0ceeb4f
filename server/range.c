/* Range header parsing (RFC 9110 §14.1).
 *
 * One left-to-right pass over the value: each range-spec is validated, resolved against the
 * representation's size and, when satisfiable, merged into the caller's array at once. The array
 * keeps the order the client asked for (RFC 9110 §14.6: parts go out in the order of the request,
 * less what was coalesced): a new range that overlaps or touches stored ones is folded into the
 * earliest of them, so the array stays pairwise apart and never sends a byte twice, and each entry
 * stands where its first range-spec stood. Nothing is allocated; the caller's `max` bounds the
 * memory and the quadratic merging (32 ranges for the static handler).
 *
 * Every number is parsed with an explicit overflow check; any doubt about the syntax yields
 * SL_RANGE_IGNORE, because serving the whole representation is always a correct answer.
 */
#include "range.h"

#include <stdbool.h>

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parses 1*DIGIT at v[*i]. Returns 1 on success, 0 when there is no digit, -1 on uint64 overflow.
 * Leading zeros are legal and never count as overflow. */
static int parse_num(const char *v, size_t len, size_t *i, uint64_t *out)
{
    size_t p = *i;
    uint64_t x = 0;
    if (p >= len || !is_digit(v[p])) return 0;
    for (; p < len && is_digit(v[p]); p++) {
        unsigned d = (unsigned)(v[p] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *i = p;
    *out = x;
    return 1;
}

/* Do a and b overlap or touch (no byte between them)? last < size <= UINT64_MAX, so last + 1
 * cannot wrap. */
static bool touch(const sl_byte_range *a, const sl_byte_range *b)
{
    return a->first <= b->last + 1 && b->first <= a->last + 1;
}

/* Add x to out[0..*cnt), whose ranges are pairwise apart, keeping them so: every stored range x
 * touches is folded into the first of them (the one the client asked for earliest). Folding can
 * never make that range touch another stored one, since those were apart from x and from each
 * other, so one pass suffices. */
static void merge(sl_byte_range *out, size_t *cnt, sl_byte_range x)
{
    size_t into = SIZE_MAX, w = 0;
    for (size_t r = 0; r < *cnt; r++) {
        if (!touch(&out[r], &x)) {
            out[w++] = out[r];
            continue;
        }
        if (into == SIZE_MAX) {
            into = w;
            out[w++] = out[r];
        }
        if (out[r].first < out[into].first) out[into].first = out[r].first;
        if (out[r].last > out[into].last) out[into].last = out[r].last;
    }
    if (into == SIZE_MAX) {
        out[w++] = x;
    } else {
        if (x.first < out[into].first) out[into].first = x.first;
        if (x.last > out[into].last) out[into].last = x.last;
    }
    *cnt = w;
}

static bool unit_is_bytes(const char *v, size_t len, size_t i)
{
    static const char unit[] = "bytes=";
    if (len - i < sizeof unit - 1) return false;
    for (size_t k = 0; k < sizeof unit - 1; k++) {
        char c = v[i + k];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != unit[k]) return false;
    }
    return true;
}

sl_range_result sl_range_parse(const char *v, size_t len, uint64_t size, sl_byte_range *out, size_t max,
                               size_t *n)
{
    size_t cnt = 0, specs = 0, i = 0;
    bool any_spec = false, satisfiable = false;

    *n = 0;
    while (i < len && is_ows(v[i])) i++;
    if (!unit_is_bytes(v, len, i)) return SL_RANGE_IGNORE;
    i += 6;

    for (;;) {
        /* Empty list elements (",,", a leading or trailing ",") must be tolerated (RFC 9110 §5.6.1.2). */
        while (i < len && (is_ows(v[i]) || v[i] == ',')) i++;
        if (i == len) break;

        uint64_t first, last;
        bool store = false;
        if (v[i] == '-') {
            uint64_t suffix;
            i++;
            if (parse_num(v, len, &i, &suffix) != 1) return SL_RANGE_IGNORE;
            if (suffix > 0) {
                satisfiable = true;
                /* With size 0 the set is satisfiable yet selects nothing; see the header. */
                if (size > 0) {
                    first = suffix >= size ? 0 : size - suffix;
                    last = size - 1;
                    store = true;
                }
            }
        } else {
            bool has_last;
            if (parse_num(v, len, &i, &first) != 1) return SL_RANGE_IGNORE;
            if (i == len || v[i] != '-') return SL_RANGE_IGNORE;
            i++;
            int r = parse_num(v, len, &i, &last);
            if (r < 0) return SL_RANGE_IGNORE;
            has_last = r == 1;
            /* RFC 9110 §14.1.1 calls last < first invalid, which makes the whole header invalid. */
            if (has_last && last < first) return SL_RANGE_IGNORE;
            if (first < size) {
                satisfiable = true;
                if (!has_last || last >= size) last = size - 1;
                store = true;
            }
        }
        any_spec = true;
        if (store) {
            /* Counted before coalescing: a client cannot make us merge an unbounded list. */
            if (specs++ == max) return SL_RANGE_IGNORE;
            merge(out, &cnt, (sl_byte_range){first, last});
        }

        /* After a range-spec only OWS and then a comma or the end may follow. */
        while (i < len && is_ows(v[i])) i++;
        if (i < len && v[i] != ',') return SL_RANGE_IGNORE;
    }

    if (!any_spec) return SL_RANGE_IGNORE;
    if (!satisfiable) return SL_RANGE_UNSATISFIABLE;
    if (cnt == 0) return SL_RANGE_IGNORE;
    *n = cnt;
    return SL_RANGE_OK;
}
