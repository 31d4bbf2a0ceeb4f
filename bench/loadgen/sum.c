/* Body checksum for loadgen -checksum.
 *
 * The body is processed as little 8-byte words through one xxh64-style round each
 * (acc = rotl(acc + w * P2, 31) * P1). Every step of a round is a bijection of the accumulator and
 * of the word, so two bodies of the same length that differ in a single word always hash
 * differently; multi-word collisions are as unlikely as for any 64-bit hash. One multiply chain per
 * word keeps the cost near a cycle per byte, far below what the kernel spends copying the bytes to
 * us. Bytes of a word split across two reads wait in a small carry buffer, so the result does not
 * depend on read boundaries. The length is mixed in at the end so bodies that differ only by
 * trailing zero bytes differ too.
 */
#include "sum.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t round64(uint64_t acc, uint64_t w)
{
    return rotl64(acc + w * P2, 31) * P1;
}

static inline uint64_t load64(const uint8_t *p)
{
    /* Little-endian on purpose: the value only has to be stable within one run on one machine,
     * and memcpy lets the compiler emit a single unaligned load. */
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

void sl_lg_sum_init(struct sl_lg_sum *s)
{
    s->acc = P3;
    s->total = 0;
    s->carry_len = 0;
}

void sl_lg_sum_update(struct sl_lg_sum *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->total += len;
    if (s->carry_len) {
        size_t take = 8 - s->carry_len;
        if (take > len) take = len;
        memcpy(s->carry + s->carry_len, p, take);
        s->carry_len += (unsigned)take;
        p += take;
        len -= take;
        if (s->carry_len < 8) return;
        s->acc = round64(s->acc, load64(s->carry));
        s->carry_len = 0;
    }
    uint64_t acc = s->acc;
    while (len >= 8) {
        acc = round64(acc, load64(p));
        p += 8;
        len -= 8;
    }
    s->acc = acc;
    if (len) {
        memcpy(s->carry, p, len);
        s->carry_len = (unsigned)len;
    }
}

uint64_t sl_lg_sum_final(const struct sl_lg_sum *s)
{
    uint64_t acc = s->acc;
    if (s->carry_len) {
        uint8_t last[8] = {0};
        memcpy(last, s->carry, s->carry_len);
        acc = round64(acc, load64(last));
    }
    acc ^= s->total * P3;
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}
