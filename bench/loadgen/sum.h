/* Streaming 64-bit body checksum for loadgen -checksum. */
#ifndef SL_LG_SUM_H
#define SL_LG_SUM_H

#include <stddef.h>
#include <stdint.h>

/* Running state of one checksum. The result depends only on the byte sequence fed, never on how it
 * was split into pieces (a body arrives in arbitrary read(2) sizes). Not cryptographic, not crc32:
 * an xxh64-style single-lane word hash, chosen because it costs under a cycle per byte. */
struct sl_lg_sum {
    uint64_t acc;     /* accumulator over whole 8-byte words */
    uint64_t total;   /* bytes fed so far */
    uint8_t carry[8]; /* bytes of an incomplete word */
    unsigned carry_len;
};

/* Reset s to the checksum of the empty sequence. */
void sl_lg_sum_init(struct sl_lg_sum *s);
/* Append len bytes at p (len may be 0). */
void sl_lg_sum_update(struct sl_lg_sum *s, const void *p, size_t len);
/* The checksum of everything fed so far; s stays usable (more bytes may follow). */
uint64_t sl_lg_sum_final(const struct sl_lg_sum *s);

#endif
