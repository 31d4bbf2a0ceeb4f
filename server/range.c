/* Range header parsing (RFC 9110 §14.1).
 *
 * One left-to-right pass over the value: each range-spec is validated, resolved against the
 * representation's size and, when satisfiable, stored directly into the caller's array. Nothing is
 * allocated, so the caller's `max` is also the bound on memory and on the sort that follows. After
 * the pass the stored ranges are sorted with qsort and merged in place, so the caller can emit them
 * as multipart parts in file order without ever sending a byte twice.
 *
 * Every number is parsed with an explicit overflow check; any doubt about the syntax yields
 * SL_RANGE_IGNORE, because serving the whole representation is always a correct answer.
 */
#include "range.h"

#include <stdbool.h>
#include <stdlib.h>

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

static int cmp_range(const void *a, const void *b)
{
    const sl_byte_range *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->last != y->last) return x->last < y->last ? -1 : 1;
    return 0;
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
    size_t cnt = 0, i = 0;
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
            if (cnt == max) return SL_RANGE_IGNORE;
            out[cnt].first = first;
            out[cnt].last = last;
            cnt++;
        }

        /* After a range-spec only OWS and then a comma or the end may follow. */
        while (i < len && is_ows(v[i])) i++;
        if (i < len && v[i] != ',') return SL_RANGE_IGNORE;
    }

    if (!any_spec) return SL_RANGE_IGNORE;
    if (!satisfiable) return SL_RANGE_UNSATISFIABLE;
    if (cnt == 0) return SL_RANGE_IGNORE;

    if (cnt > 1) qsort(out, cnt, sizeof *out, cmp_range);
    size_t w = 0;
    for (size_t r = 1; r < cnt; r++) {
        /* last < size <= UINT64_MAX, so last + 1 cannot wrap. */
        if (out[r].first <= out[w].last + 1) {
            if (out[r].last > out[w].last) out[w].last = out[r].last;
        } else {
            out[++w] = out[r];
        }
    }
    *n = w + 1;
    return SL_RANGE_OK;
}
