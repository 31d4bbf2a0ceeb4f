/* What the libFuzzer targets share: the invariant check and the PRNG that picks fragment sizes.
 * A target defines FUZZ_NAME (its name, a string literal) before including this header. */
#ifndef SL_FUZZ_UTIL_H
#define SL_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Unless ok, say which invariant broke and abort, which libFuzzer reports as a crash. */
static inline void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, FUZZ_NAME ": invariant violated: %s\n", what);
        abort();
    }
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
