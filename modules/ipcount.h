/* Counts per client address, shared by every event loop (mod_evasive's requests in progress). */
#ifndef SL_IPCOUNT_H
#define SL_IPCOUNT_H

#include <stdint.h>
#include <sys/socket.h>

/* A client address as a key: 16 bytes, an IPv4 address as its IPv4-mapped IPv6 form, so a
 * client counts the same on an IPv4 and a dual-stack listener. */
typedef struct sl_ipkey {
    uint8_t b[16];
} sl_ipkey;

typedef struct sl_ipcount sl_ipcount;

/* The key of a peer address (AF_INET or AF_INET6; anything else, such as a unix socket, is all
 * zeros: one shared count). */
sl_ipkey sl_ipkey_of(const struct sockaddr *sa);

/* A new, empty table, or NULL (out of memory). Thread-safe after this. */
sl_ipcount *sl_ipcount_new(void);

/* One more for key: the count after it, or -ENOMEM (nothing counted). */
long sl_ipcount_inc(sl_ipcount *t, const sl_ipkey *key);

/* One less for key (after a successful sl_ipcount_inc); an address at zero is forgotten. */
void sl_ipcount_dec(sl_ipcount *t, const sl_ipkey *key);

/* The count of key now (0: none). */
long sl_ipcount_get(sl_ipcount *t, const sl_ipkey *key);

/* Addresses with a count now (for the status page and tests). */
unsigned long sl_ipcount_size(sl_ipcount *t);

/* Frees the table (no thread may use it any more; NULL is fine). */
void sl_ipcount_free(sl_ipcount *t);

#endif
