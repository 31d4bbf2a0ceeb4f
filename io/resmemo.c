/* The residency memo (see resmemo.h): an array of slots in sets of WAYS, each slot holding one
 * file's inode, a tag of its device, size and change time, and the time its pages were last all
 * found in the page cache. A set is chosen by a mix of device and inode and a file may sit in any
 * of its slots (a newcomer takes an empty one, else the one found resident longest ago); the tag
 * is compared on a hit, so a rewritten file does not inherit the trust its former contents
 * earned. Sets, not one slot per file: with one, two files of the same slot evict each other, and
 * a pool of 100,000 files in 131,072 slots kept only 70% of them (cachestat for half the requests
 * on the whole hot 100 KiB pool, bench/results/2026-11-29-file-watches-pools); four ways keep all
 * but about 2% at that load, at one or two cache lines a look-up. Times are the caller's (the
 * loop's millisecond clock), which keeps the memo deterministic for tests.
 *
 * The audit: every SL_RESMEMO_AUDIT_EVERY-th trusted answer is turned into "ask the kernel",
 * and the file is remembered as under audit; the note that follows for it settles the audit.
 */
#include "resmemo.h"

#include <stdlib.h>
#include <sys/mman.h>

#define WAYS 4

struct slot {
    uint64_t ino;
    uint64_t tag;     /* device, size and change time, mixed */
    uint64_t seen_ms; /* the loop clock when found resident; 0: empty */
};

struct sl_resmemo {
    size_t bytes;          /* of the mapping */
    uint64_t mask;
    uint32_t trust_ms;
    unsigned since_audit;  /* trusted answers since the last audit */
    unsigned clean_audits; /* audits in a row that found every page */
    bool auditing;         /* the last trusted answer was withheld for an audit of: */
    uint64_t audit_ino, audit_tag;
    sl_resmemo_stats st;   /* trusted, audits, misses (trust_ms filled on reading) */
    struct slot slots[];
};

sl_resmemo *sl_resmemo_new(unsigned bits)
{
    if (bits < 2) bits = 2; /* one set */
    if (bits > 24) bits = 24;
    size_t n = (size_t)1 << bits;
    size_t bytes = sizeof(sl_resmemo) + n * sizeof(struct slot);
    /* Its pages made now (MAP_POPULATE), not by the requests that first write each: a page's
     * first touch is a fault, and in a virtual machine whose host has not backed that memory yet
     * it cost 14 us (2 us once backed). Filled at random by the files served, the memo's 6 MiB
     * took 1,500 such faults in the first 50,000 requests of a fresh server, 0.4-0.6 us a request
     * (bench/results/2026-11-29-cheaper-insert). */
    sl_resmemo *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    m->bytes = bytes;
    m->mask = n / WAYS - 1; /* of the sets */
    m->trust_ms = SL_RESMEMO_TRUST_MS;
    return m;
}

void sl_resmemo_free(sl_resmemo *m)
{
    if (m) munmap(m, m->bytes);
}

void sl_file_id_of(sl_file_id *id, const struct stat *st)
{
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = (int64_t)st->st_size;
    id->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h;
}

static uint64_t tag_of(const sl_file_id *id)
{
    return mix(id->dev * 0x9e3779b97f4a7c15ULL ^ mix((uint64_t)id->size) ^
               mix((uint64_t)id->ctime_ns + 0x632be59bd9b4e019ULL));
}

/* The first slot of the file's set. Inodes of one directory are often consecutive: the mix
 * spreads them over the sets instead of letting the low bits alone decide. */
static struct slot *set_of(sl_resmemo *m, const sl_file_id *id)
{
    return &m->slots[(mix(id->ino ^ (id->dev * 0x9e3779b97f4a7c15ULL)) & m->mask) * WAYS];
}

/* The file's slot in its set, or NULL. */
static struct slot *find(sl_resmemo *m, const sl_file_id *id, uint64_t tag)
{
    struct slot *s = set_of(m, id);
    for (int w = 0; w < WAYS; w++)
        if (s[w].seen_ms && s[w].ino == id->ino && s[w].tag == tag) return &s[w];
    return NULL;
}

void sl_resmemo_prefetch(const sl_resmemo *m, const sl_file_id *id)
{
    if (!m || !id->ino) return;
    const char *s = (const char *)set_of((sl_resmemo *)m, id);
    __builtin_prefetch(s);
    __builtin_prefetch(s + WAYS * sizeof(struct slot) - 1); /* a set may span two lines */
}

/* A slot's time is never 0 (0 means empty). */
static uint64_t stamp(uint64_t now_ms)
{
    return now_ms ? now_ms : 1;
}

/* Single writer (the loop); the status page reads the counters from another thread. */
static void count(uint64_t *c)
{
    __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

bool sl_resmemo_trust(sl_resmemo *m, const sl_file_id *id, uint64_t now_ms)
{
    if (!m || !id->ino) return false;
    const struct slot *s = find(m, id, tag_of(id));
    if (!s || stamp(now_ms) - s->seen_ms >= m->trust_ms) return false;
    uint64_t tag = s->tag;
    if (++m->since_audit >= SL_RESMEMO_AUDIT_EVERY) {
        m->since_audit = 0;
        m->auditing = true;
        m->audit_ino = id->ino;
        m->audit_tag = tag;
        return false;
    }
    count(&m->st.trusted);
    return true;
}

void sl_resmemo_note(sl_resmemo *m, const sl_file_id *id, uint64_t now_ms, bool whole,
                     bool resident)
{
    if (!m || !id->ino) return;
    uint64_t tag = tag_of(id);
    struct slot *s = find(m, id, tag);
    if (m->auditing && m->audit_ino == id->ino && m->audit_tag == tag) {
        m->auditing = false;
        count(&m->st.audits);
        if (!resident) {
            count(&m->st.misses);
            m->clean_audits = 0;
            uint32_t t = m->trust_ms / 2;
            __atomic_store_n(&m->trust_ms, t < SL_RESMEMO_TRUST_MIN_MS ? SL_RESMEMO_TRUST_MIN_MS : t,
                             __ATOMIC_RELAXED);
        } else if (++m->clean_audits >= SL_RESMEMO_AUDITS_TO_GROW) {
            m->clean_audits = 0;
            uint32_t t = m->trust_ms * 2;
            __atomic_store_n(&m->trust_ms, t > SL_RESMEMO_TRUST_MAX_MS ? SL_RESMEMO_TRUST_MAX_MS : t,
                             __ATOMIC_RELAXED);
        }
    }
    if (resident && whole) {
        if (!s) {
            /* An empty slot of the set, else the one found resident longest ago. */
            struct slot *set = set_of(m, id);
            s = &set[0];
            for (int w = 0; w < WAYS && s->seen_ms; w++)
                if (!set[w].seen_ms || set[w].seen_ms < s->seen_ms) s = &set[w];
            s->ino = id->ino;
            s->tag = tag;
        }
        s->seen_ms = stamp(now_ms);
    } else if (!resident && s) {
        s->seen_ms = 0;
    }
}

void sl_resmemo_get_stats(const sl_resmemo *m, sl_resmemo_stats *st)
{
    if (!m) {
        *st = (sl_resmemo_stats){0};
        return;
    }
    st->trusted = __atomic_load_n(&m->st.trusted, __ATOMIC_RELAXED);
    st->audits = __atomic_load_n(&m->st.audits, __ATOMIC_RELAXED);
    st->misses = __atomic_load_n(&m->st.misses, __ATOMIC_RELAXED);
    st->trust_ms = __atomic_load_n(&m->trust_ms, __ATOMIC_RELAXED);
}
