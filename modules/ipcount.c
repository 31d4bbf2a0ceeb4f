/* Per-address counts shared by the event loops.
 *
 * Entries come and go with the clients (an address whose count drops to zero is removed, so the
 * table holds only addresses with a request in progress and cannot be grown by a scan of many
 * addresses beyond the connections the server has). That makes lock-free counters in a fixed
 * array a poor fit: a slot would have to be claimed and given back without a lock, or shared by
 * colliding addresses, which would turn away innocent clients. Instead the table is 256 buckets,
 * each a small array behind its own mutex: an increment or decrement holds one bucket's lock for
 * a scan of a few entries, and loops collide only when two requests hash to the same bucket at
 * the same moment. The hash is seeded per table so clients cannot aim at one bucket.
 */
#include "ipcount.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_BUCKETS 256

typedef struct entry {
    sl_ipkey key;
    long count;
} entry;

typedef struct bucket {
    pthread_mutex_t lock;
    entry *v;
    unsigned n, cap;
} bucket;

struct sl_ipcount {
    uint64_t seed;
    bucket b[N_BUCKETS];
};

sl_ipkey sl_ipkey_of(const struct sockaddr *sa)
{
    sl_ipkey k;
    memset(&k, 0, sizeof k);
    if (sa->sa_family == AF_INET) {
        k.b[10] = k.b[11] = 0xff;
        memcpy(k.b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(k.b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    return k;
}

static bucket *bucket_of(sl_ipcount *t, const sl_ipkey *key)
{
    uint64_t h = t->seed ^ 0xcbf29ce484222325ull; /* FNV-1a, seeded */
    for (int i = 0; i < 16; i++) h = (h ^ key->b[i]) * 0x100000001b3ull;
    return &t->b[(h ^ (h >> 32)) % N_BUCKETS];
}

sl_ipcount *sl_ipcount_new(void)
{
    sl_ipcount *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^
              (uint64_t)(uintptr_t)t;
    for (int i = 0; i < N_BUCKETS; i++) pthread_mutex_init(&t->b[i].lock, NULL);
    return t;
}

static entry *find(bucket *b, const sl_ipkey *key)
{
    for (unsigned i = 0; i < b->n; i++)
        if (!memcmp(&b->v[i].key, key, sizeof *key)) return &b->v[i];
    return NULL;
}

long sl_ipcount_inc(sl_ipcount *t, const sl_ipkey *key)
{
    bucket *b = bucket_of(t, key);
    long r;
    pthread_mutex_lock(&b->lock);
    entry *e = find(b, key);
    if (!e && b->n == b->cap) {
        unsigned cap = b->cap ? 2 * b->cap : 4;
        entry *v = realloc(b->v, cap * sizeof *v);
        if (v) {
            b->v = v;
            b->cap = cap;
        }
    }
    if (!e && b->n < b->cap) {
        e = &b->v[b->n++];
        e->key = *key;
        e->count = 0;
    }
    r = e ? ++e->count : -ENOMEM;
    pthread_mutex_unlock(&b->lock);
    return r;
}

void sl_ipcount_dec(sl_ipcount *t, const sl_ipkey *key)
{
    bucket *b = bucket_of(t, key);
    pthread_mutex_lock(&b->lock);
    entry *e = find(b, key);
    if (e && --e->count <= 0) *e = b->v[--b->n]; /* forget it: the last entry takes its place */
    pthread_mutex_unlock(&b->lock);
}

long sl_ipcount_get(sl_ipcount *t, const sl_ipkey *key)
{
    bucket *b = bucket_of(t, key);
    pthread_mutex_lock(&b->lock);
    entry *e = find(b, key);
    long r = e ? e->count : 0;
    pthread_mutex_unlock(&b->lock);
    return r;
}

unsigned long sl_ipcount_size(sl_ipcount *t)
{
    unsigned long n = 0;
    for (int i = 0; i < N_BUCKETS; i++) {
        pthread_mutex_lock(&t->b[i].lock);
        n += t->b[i].n;
        pthread_mutex_unlock(&t->b[i].lock);
    }
    return n;
}

void sl_ipcount_free(sl_ipcount *t)
{
    if (!t) return;
    for (int i = 0; i < N_BUCKETS; i++) {
        pthread_mutex_destroy(&t->b[i].lock);
        free(t->b[i].v);
    }
    free(t);
}
