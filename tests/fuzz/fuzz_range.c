/* libFuzzer target for sl_range_parse.
 *
 * Input layout: byte 0 picks max (0..31), bytes 1..8 are the representation size (little-endian,
 * folded so that small sizes, which exercise clipping and suffixes, are common), the rest is the
 * header value. Every OK result must be pairwise disjoint and non-adjacent (in request order, so
 * not sorted) and inside size; a non-OK
 * result must report no ranges; and raising max must never change an OK answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "range.h"

#define FUZZ_NAME "fuzz_range"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9) return 0;
    size_t max = data[0] & 31;
    uint64_t rsize = 0;
    for (int k = 0; k < 8; k++) rsize |= (uint64_t)data[1 + k] << (8 * k);
    /* Half of the inputs get a size below 256, the rest any 64-bit value. */
    if (data[0] & 0x80) rsize &= 0xff;
    const char *v = (const char *)data + 9;
    size_t len = size - 9;

    sl_byte_range out[32], out2[64];
    size_t n = 12345, n2 = 12345;
    sl_range_result r = sl_range_parse(v, len, rsize, max ? out : NULL, max, &n);
    check(r == SL_RANGE_OK || r == SL_RANGE_IGNORE || r == SL_RANGE_UNSATISFIABLE, "result value");
    if (r != SL_RANGE_OK) {
        check(n == 0, "n == 0 when not OK");
    } else {
        check(n >= 1 && n <= max, "1 <= n <= max");
        for (size_t k = 0; k < n; k++) {
            check(out[k].first <= out[k].last, "first <= last");
            check(out[k].last < rsize, "last < size");
            for (size_t j = 0; j < k; j++)
                check(out[j].last + 1 < out[k].first || out[k].last + 1 < out[j].first,
                      "pairwise disjoint, not adjacent");
        }
    }

    sl_range_result r2 = sl_range_parse(v, len, rsize, out2, 64, &n2);
    if (r == SL_RANGE_OK) {
        check(r2 == SL_RANGE_OK && n2 == n, "a larger max keeps an OK answer");
        check(memcmp(out, out2, n * sizeof *out) == 0, "a larger max gives the same ranges");
    } else if (r == SL_RANGE_UNSATISFIABLE) {
        check(r2 == SL_RANGE_UNSATISFIABLE, "max does not change unsatisfiability");
    }
    return 0;
}
