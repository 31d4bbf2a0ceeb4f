/* The inline-lookup policy (see lookup.h): an exponentially weighted average and a hold-off;
 * and where a lookup off the loop goes: the last 64 files' sizes, one bit each.
 * Integer arithmetic only, so that it is the same on every machine and testable without a
 * clock; the caller measures (sl_lookup_sleeps is the one system call here). */
#include "lookup.h"

#include <sys/resource.h>

bool sl_lookup_inline(const sl_lookup_policy *p, uint64_t now)
{
    return p->samples >= SL_LOOKUP_MIN_SAMPLES && p->avg_ns < SL_LOOKUP_FAST_NS &&
           now >= p->hold_until;
}

void sl_lookup_note_size(sl_lookup_policy *p, bool small)
{
    p->small_bits = p->small_bits << 1 | (small ? 1u : 0u);
}

bool sl_lookup_prefer_ring(const sl_lookup_policy *p)
{
    return __builtin_popcountll(p->small_bits) >= 32;
}

long sl_lookup_sleeps(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) < 0) return 0;
    return ru.ru_nvcsw;
}

void sl_lookup_sample(sl_lookup_policy *p, uint64_t ns, bool slept, bool on_loop, uint64_t now)
{
    if (slept && ns < SL_LOOKUP_SLOW_NS) ns = SL_LOOKUP_SLOW_NS;
    if (!slept && ns > SL_LOOKUP_CPU_CAP_NS) ns = SL_LOOKUP_CPU_CAP_NS;
    if (p->samples == 0)
        p->avg_ns = ns;
    else
        p->avg_ns = p->avg_ns - p->avg_ns / 8 + ns / 8;
    if (p->samples < SL_LOOKUP_MIN_SAMPLES) p->samples++;
    if (!on_loop) return;
    /* One writer (the loop); the status page reads the counters from other threads. */
    __atomic_store_n(&p->inline_count, p->inline_count + 1, __ATOMIC_RELAXED);
    if (slept) {
        /* It waited for the disk, on the loop: no more of that for a while, whatever the
         * average says. The threads' timings decide after the hold. */
        __atomic_store_n(&p->slow_inline, p->slow_inline + 1, __ATOMIC_RELAXED);
        p->hold_until = now + SL_LOOKUP_HOLD_NS;
    }
}
