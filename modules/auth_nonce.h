/* Digest nonces for mod_auth (RFC 7616 §3.3): made without state, checked by their MAC and
 * age, and a table of the nonce-counts used so that a request cannot be replayed.
 *
 * A nonce is "<time>:<random>:<MAC>" in lower-case hex: the time it was made (seconds), 32
 * random bits, and the first 16 bytes of HMAC-SHA-256(secret, time (8 bytes LE) random (4 bytes
 * LE) realm). The secret is a rule's nonce_secret, or the process's: 32 random bytes drawn by
 * sl_nonce_init, before server.max-worker forks, so every worker checks every worker's nonces.
 */
#ifndef SL_AUTH_NONCE_H
#define SL_AUTH_NONCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds a nonce is good for; after it a request with it is answered stale=true. */
#define SL_NONCE_LIFE 600
/* Room for a nonce and its NUL. */
#define SL_NONCE_MAX 64
/* Slots of the replay table sl_nonce_init makes when asked for 0. */
#define SL_NONCE_SLOTS 8192

/* A nonce taken apart. */
typedef struct sl_nonce {
    int64_t ts;
    uint32_t rnd;
    unsigned char mac[16];
} sl_nonce;

/* Draw the process's secret and make the replay table (`slots` entries, 0: SL_NONCE_SLOTS) in
 * memory shared with the processes forked later, behind a robust process-shared lock. Main
 * thread, once; a second call keeps both. 0, or a negative errno. */
int sl_nonce_init(size_t slots);

/* Free the table and wipe the secret. */
void sl_nonce_fini(void);

/* A new nonce for realm into out (SL_NONCE_MAX bytes), made at `now`. secret: a rule's
 * nonce_secret, NULL for the process's. */
void sl_nonce_make(const char *realm, const char *secret, int64_t now, char *out);

/* Take a nonce from a client apart and check it: 0 when it is ours and fresh; -ESTALE when it
 * is ours but older than SL_NONCE_LIFE (or from the future); -EINVAL when it is not ours
 * (another form, another secret or realm). *out is filled for 0 and -ESTALE. */
int sl_nonce_check(const char *nonce, const char *realm, const char *secret, int64_t now,
                   sl_nonce *out);

/* A request with a good nonce and nonce-count nc: may it pass? true the first time a nonce is
 * used and whenever nc is higher than every count it passed with before (recorded); false for a
 * replay, and for a nonce the table had to drop to make room (the table drops the oldest nonce
 * and from then on refuses every nonce as old or older, so nothing dropped can be replayed).
 * Any thread, any process forked after sl_nonce_init. Without a table (no init) always true. */
bool sl_nonce_use(const sl_nonce *n, uint64_t nc, int64_t now);

#endif
