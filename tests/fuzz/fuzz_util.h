/* What the libFuzzer targets share: the entry point's prototype, the invariant check, the span
 * and white-space tests the parsers' invariants are written with, and the PRNG that picks
 * fragment sizes. A target defines FUZZ_NAME (its name, a string literal) before including this
 * header. */
#ifndef SL_FUZZ_UTIL_H
#define SL_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Unless ok, say which invariant broke and abort, which libFuzzer reports as a crash. */
static inline void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, FUZZ_NAME ": invariant violated: %s\n", what);
        abort();
    }
}

/* p[0..n) lies within buf[0..len) (and p is set). */
static inline int inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p && p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

/* HTTP's optional white space: SP or HTAB. */
static inline int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* xorshift32: the next number from the state *s (a zero state starts from a fixed seed). */
static inline uint32_t rng_next(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *s = x;
    return x;
}

#endif
