/* Bandwidth limits: connection.kbytes-per-second and server.kbytes-per-second (lighttpd 1.4's
 * keys), as a token bucket that bounds how many bytes each send of a connection may carry and a
 * timer that resumes the connection when its budget is back. Files still go out by sendfile() or
 * the asynchronous backends: the limiter never touches the bytes.
 *
 * The bucket (sl_bucket) is the synchronous core, with time passed in (CLOCK_MONOTONIC ns), so
 * that tests drive it without sleeping. It is a GCRA ("generic cell rate algorithm") bucket: its
 * whole state is one number, the time at which it is full again (tat), so loops share a bucket
 * with one compare-and-swap per grant and no lock.
 */
#ifndef SL_BWLIMIT_H
#define SL_BWLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_conn;

/* A token bucket of `rate` bytes per second that holds at most `burst` bytes. */
typedef struct sl_bucket {
    uint64_t rate;     /* bytes per second (> 0) */
    uint64_t burst;    /* bytes a full bucket holds: what may go at once after a pause */
    uint64_t quantum;  /* the smallest grant worth a send: a connection waits for this much */
    uint64_t tat;      /* ns at which the bucket is full again (atomic; 0: full) */
} sl_bucket;

/* Set the rate (bytes per second, > 0) and the burst and quantum derived from it: a quantum of
 * 1/32 s of traffic (at least 512 bytes, at most 256 KiB) and a burst of 1/8 s (at least one
 * quantum). Keeps tat: changing the rate of a bucket in use gives no new burst. */
void sl_bucket_set_rate(sl_bucket *b, uint64_t rate);

/* Bytes the bucket holds at `now` (0 when it is in debt). */
uint64_t sl_bucket_avail(const sl_bucket *b, uint64_t now);

/* Nanoseconds from `now` until the bucket holds `n` bytes (0: it does now). n is at most the
 * burst (more never fits). */
uint64_t sl_bucket_wait(const sl_bucket *b, uint64_t now, uint64_t n);

/* Take n bytes that went out at `now`, also more than the bucket held (the send overshot):
 * the debt delays the next grant. */
void sl_bucket_charge(sl_bucket *b, uint64_t now, uint64_t n);

/* Reserve `want` bytes (> 0) at `now`: the bucket is charged at once, in order, so that callers
 * waiting for one shared bucket are served first come, first served, across threads. Sets *at
 * to the time the bytes may be sent (<= now: at once). */
void sl_bucket_reserve(sl_bucket *b, uint64_t now, uint64_t want, uint64_t *at);

/* Give back n reserved bytes that were not sent. */
void sl_bucket_refund(sl_bucket *b, uint64_t n);

/* For connection.c. */

/* How many bytes the connection's next send may carry, at most max: max when no limit applies,
 * 0 when it must wait for its budget (a timer resumes it through sl_conn_resume). */
size_t sl_bw_budget(struct sl_conn *c, size_t max);

/* n bytes went out after sl_bw_budget granted some: take them from the buckets. */
void sl_bw_sent(struct sl_conn *c, uint64_t n);

/* The connection waits only for its budget (its write timeout must not run meanwhile). */
bool sl_bw_waiting(const struct sl_conn *c);

/* The loop is stopping: limits are lifted (lighttpd's graceful stop), a waiting connection is
 * resumed at once so that it finishes within server.graceful-shutdown-timeout. */
void sl_bw_stop(struct sl_conn *c);

#endif
