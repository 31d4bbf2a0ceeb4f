/* Digest nonces: stateless to hand out, a bounded shared table to refuse replays.
 *
 * Handing a nonce out costs no memory: its MAC proves it is ours and its time says whether it
 * is fresh, so a flood of unauthenticated requests (each gets a challenge) fills nothing. Only
 * a nonce that passed a password check enters the replay table, with the nonce-count it came
 * with; a later request must count higher (RFC 7616 §3.4: nc counts requests on one nonce). The
 * table is shared by the workers of server.max-worker (an anonymous MAP_SHARED mapping made
 * before they fork), since a client's next request may reach any of them; its lock is robust, so
 * a worker dying while it holds it cannot stop the others (entries are written whole under it).
 * A nonce's slot is one of REPLAY_PROBE after its hash; when all hold live nonces the oldest is
 * dropped and the watermark rises to its time: a nonce not in the table and not newer than the
 * watermark is refused (the client gets stale=true and retries with a new nonce), so dropping
 * never lets a replay through, it only costs a busy server's clients an extra round trip.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "auth_nonce.h"

#define REPLAY_PROBE 8

typedef struct replay_entry {
    int64_t ts;      /* 0: free */
    uint32_t rnd;
    unsigned char mac[8];
    uint64_t nc;     /* the highest nonce-count accepted */
} replay_entry;

typedef struct replay_table {
    pthread_mutex_t lock; /* robust, process-shared */
    int64_t watermark;    /* nonces made at or before it and not in the table are refused */
    size_t slots;
    size_t map_len;
    replay_entry e[];
} replay_table;

static unsigned char secret[32];
static replay_table *table;

int sl_nonce_init(size_t slots)
{
    if (table) return 0; /* a reload keeps the secret and the table */
    if (!slots) slots = SL_NONCE_SLOTS;
    if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) return -errno;
    size_t len = sizeof(replay_table) + slots * sizeof(replay_entry);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -errno;
    replay_table *t = m; /* zeroed by the kernel: every slot free */
    t->slots = slots;
    t->map_len = len;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int r = pthread_mutex_init(&t->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (r) {
        munmap(m, len);
        return -r;
    }
    table = t;
    return 0;
}

void sl_nonce_fini(void)
{
    if (!table) return;
    pthread_mutex_destroy(&table->lock);
    munmap(table, table->map_len);
    table = NULL;
    OPENSSL_cleanse(secret, sizeof secret);
}

/* HMAC-SHA-256(key, ts rnd realm), its first 16 bytes. false when the library fails. */
static bool mac_of(const char *realm, const char *key, int64_t ts, uint32_t rnd,
                   unsigned char *mac16)
{
    unsigned char msg[12], md[32];
    for (int i = 0; i < 8; i++) msg[i] = (unsigned char)((uint64_t)ts >> (8 * i));
    for (int i = 0; i < 4; i++) msg[8 + i] = (unsigned char)(rnd >> (8 * i));
    const void *k = key ? (const void *)key : secret;
    size_t kl = key ? strlen(key) : sizeof secret;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
                           OSSL_PARAM_construct_end()};
    size_t out = 0;
    bool ok = ctx && EVP_MAC_init(ctx, k, kl, params) && EVP_MAC_update(ctx, msg, sizeof msg) &&
              EVP_MAC_update(ctx, (const unsigned char *)realm, strlen(realm)) &&
              EVP_MAC_final(ctx, md, &out, sizeof md) && out == sizeof md;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    memcpy(mac16, ok ? md : (unsigned char[32]){0}, 16);
    return ok;
}

void sl_nonce_make(const char *realm, const char *key, int64_t now, char *out)
{
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)random(); /* only uniqueness rests on it, not secrecy */
    unsigned char mac[16];
    mac_of(realm, key, now, rnd, mac);
    int n = snprintf(out, SL_NONCE_MAX, "%llx:%08x:", (unsigned long long)now, rnd);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[n + 2 * i] = hex[mac[i] >> 4];
        out[n + 2 * i + 1] = hex[mac[i] & 15];
    }
    out[n + 32] = 0;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int sl_nonce_check(const char *nonce, const char *realm, const char *key, int64_t now,
                   sl_nonce *out)
{
    /* Exactly what sl_nonce_make writes: 1-16 hex digits, ':', 8, ':', 32. */
    const char *p = nonce;
    uint64_t ts = 0;
    int n = 0, v;
    for (; (v = hexval(*p)) >= 0; p++, n++) ts = (ts << 4) | (uint64_t)v;
    if (n < 1 || n > 16 || *p++ != ':') return -EINVAL;
    uint32_t rnd = 0;
    for (n = 0; (v = hexval(*p)) >= 0; p++, n++) rnd = (rnd << 4) | (uint32_t)v;
    if (n != 8 || *p++ != ':') return -EINVAL;
    unsigned char got[16], want[16];
    for (n = 0; n < 32; n++) {
        if ((v = hexval(p[n])) < 0) return -EINVAL;
        got[n / 2] = (unsigned char)(n & 1 ? got[n / 2] | v : v << 4);
    }
    if (p[32]) return -EINVAL;
    /* A library failure refuses the nonce (fail closed). */
    if (!mac_of(realm, key, (int64_t)ts, rnd, want) || CRYPTO_memcmp(want, got, sizeof want))
        return -EINVAL;
    out->ts = (int64_t)ts;
    out->rnd = rnd;
    memcpy(out->mac, got, sizeof out->mac);
    if ((int64_t)ts > now + 1 || now - (int64_t)ts > SL_NONCE_LIFE) return -ESTALE;
    return 0;
}

bool sl_nonce_use(const sl_nonce *nn, uint64_t nc, int64_t now)
{
    replay_table *t = table;
    if (!t) return true;
    uint32_t h = (nn->rnd ^ (uint32_t)nn->ts ^ ((uint32_t)nn->mac[0] << 24)) * 2654435761u;
    size_t base = (h >> 8) % t->slots;
    bool ok = false;
    if (pthread_mutex_lock(&t->lock) == EOWNERDEAD) pthread_mutex_consistent(&t->lock);
    replay_entry *free_slot = NULL, *oldest = NULL;
    size_t probe = t->slots < REPLAY_PROBE ? t->slots : REPLAY_PROBE;
    for (size_t k = 0; k < probe; k++) {
        replay_entry *e = &t->e[(base + k) % t->slots];
        if (e->ts && e->ts == nn->ts && e->rnd == nn->rnd && !memcmp(e->mac, nn->mac, sizeof e->mac)) {
            ok = nc > e->nc;
            if (ok) e->nc = nc;
            goto out;
        }
        if (!e->ts || e->ts + SL_NONCE_LIFE < now) {
            if (!free_slot) free_slot = e;
        } else if (!oldest || e->ts < oldest->ts) {
            oldest = e;
        }
    }
    if (nn->ts <= t->watermark) goto out; /* dropped, or as old as something dropped */
    if (!free_slot) {
        if (oldest->ts > t->watermark) t->watermark = oldest->ts;
        free_slot = oldest;
        if (nn->ts <= t->watermark) goto out;
    }
    *free_slot = (replay_entry){.ts = nn->ts, .rnd = nn->rnd, .nc = nc};
    memcpy(free_slot->mac, nn->mac, sizeof free_slot->mac);
    ok = true;
out:
    pthread_mutex_unlock(&t->lock);
    return ok;
}
