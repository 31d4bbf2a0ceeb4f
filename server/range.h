/* Byte ranges (RFC 9110 §14): parsing a Range header against a representation's length. Pure. */
#ifndef SL_RANGE_H
#define SL_RANGE_H

#include <stddef.h>
#include <stdint.h>

/* One byte range, both ends inclusive, always first <= last < size of the representation. */
typedef struct sl_byte_range {
    uint64_t first, last;
} sl_byte_range;

/* Outcome of sl_range_parse; tells the caller which status to send. */
typedef enum {
    SL_RANGE_OK = 0,            /* 206 with out[0..*n) */
    SL_RANGE_IGNORE = 1,        /* 200 with the whole representation */
    SL_RANGE_UNSATISFIABLE = 2, /* 416 with "Content-Range: bytes * /size" (no space before '/') */
} sl_range_result;

/* Parse the Range header value v[0..len) against a representation of `size` bytes.
 *
 * SL_RANGE_OK: out[0..*n) holds the satisfiable ranges clipped to size, in the order the request
 *   lists them (RFC 9110 §14.6), with overlapping or adjacent ranges coalesced into one that stands
 *   where the earliest of them stood (so any two ranges have a gap of at least one byte);
 *   1 <= *n <= max.
 * SL_RANGE_IGNORE: the unit is not "bytes" (case-insensitive), the value is syntactically invalid,
 *   a range has last-pos < first-pos, a number overflows uint64_t, the list has no range-spec at all,
 *   more than `max` satisfiable range-specs are listed (counted before coalescing, so a client cannot
 *   make the server merge an unbounded list; RFC 9110 §15.3.7 lets a server ignore a request for
 *   many ranges), or the set is satisfiable but covers no byte (size 0 with a non-zero
 *   suffix-length: RFC 9110 calls that satisfiable, so 416 would be wrong, yet no 206 can describe
 *   an empty range; 200 with the empty body is the answer).
 * SL_RANGE_UNSATISFIABLE: valid, but no range-spec has first-pos < size and no suffix-range has a
 *   non-zero suffix-length (RFC 9110 §14.1.2).
 *
 * Syntax accepted: "bytes=" then a comma-separated list; OWS is allowed around commas and around the
 * whole value (not inside a range-spec, nor around "="), and empty list elements are skipped
 * (RFC 9110 §5.6.1.2). Unsatisfiable range-specs next to satisfiable ones are dropped silently.
 * A suffix longer than size selects the whole representation. On anything but SL_RANGE_OK, *n is 0.
 * out may be NULL only when max is 0. */
sl_range_result sl_range_parse(const char *v, size_t len, uint64_t size, sl_byte_range *out, size_t max,
                               size_t *n);

#endif
