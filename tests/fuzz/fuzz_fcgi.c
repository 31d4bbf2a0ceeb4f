/* libFuzzer target for proxy_core/fcgi_proto.c.
 *
 * Input: the first 4 bytes seed a small PRNG that picks fragment sizes; the rest is a byte stream
 * an application sent for request id 1. The stream is decoded once whole and once cut into random
 * fragments (each copied into an exactly-sized heap buffer, so ASan sees any read past a fragment)
 * and both runs must produce the same trace: the STDOUT/STDERR bytes in order (adjacent pieces of
 * one stream merged), the end-of-stream and END_REQUEST events with their values, and the final
 * error. Every event is checked against the contract (consumed <= length, data inside the fragment
 * and ending at consumed, non-empty data, sticky errors).
 * The same bytes are also read as name-value pairs (pointers inside, progress, and a re-encoding
 * that decodes to the same pairs), and used as payload for the encoders: STDOUT written with
 * sl_fcgi_write_stream and PARAMS written with sl_fcgi_params_writer must decode back to it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcgi_proto.h"

#define FUZZ_NAME "fuzz_fcgi"
#include "fuzz_util.h"

/* Mostly small fragments, sometimes large ones. */
static size_t frag_size(uint32_t *s)
{
    uint32_t r = rng_next(s);
    return (r & 7) == 0 ? 1 + (r >> 8) % 70000 : 1 + (r >> 8) % 17;
}

/* A trace: segments of [type][u64 length][bytes]; `last` is the offset of the last segment. */
typedef struct trace {
    sl_buf b;
    size_t last;
    int last_type;
    int rc;
    int done, boundary;
} trace;

static void add(trace *t, int type, const void *p, size_t n)
{
    bool data = type == SL_FCGI_EV_STDOUT || type == SL_FCGI_EV_STDERR;
    if (t->b.len && t->last_type == type && data) {
        uint64_t old;
        memcpy(&old, t->b.p + t->last + 1, 8);
        old += n;
        memcpy(t->b.p + t->last + 1, &old, 8);
        check(sl_buf_append(&t->b, p, n) == 0, "trace append");
        return;
    }
    t->last = t->b.len;
    t->last_type = type;
    unsigned char tag = (unsigned char)type;
    uint64_t len = n;
    check(sl_buf_append(&t->b, &tag, 1) == 0 && sl_buf_append(&t->b, &len, 8) == 0 &&
              sl_buf_append(&t->b, p, n) == 0,
          "trace append");
}

static void run(const uint8_t *in, size_t len, uint32_t *seed, trace *t)
{
    memset(t, 0, sizeof *t);
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    size_t off = 0;
    while (off < len && !t->rc) {
        size_t n = seed ? frag_size(seed) : len;
        if (n > len - off) n = len - off;
        char *frag = malloc(n);
        check(frag != NULL, "malloc");
        memcpy(frag, in + off, n);
        size_t used = 0;
        for (;;) {
            sl_fcgi_event ev;
            size_t c = (size_t)-1;
            int rc = sl_fcgi_decode(&d, frag + used, n - used, &c, &ev);
            if (rc < 0) {
                check(rc == -EPROTO, "only -EPROTO");
                check(c == 0, "consumed 0 on error");
                size_t c2;
                check(sl_fcgi_decode(&d, frag, n, &c2, &ev) == rc && c2 == 0, "sticky error");
                t->rc = rc;
                break;
            }
            check(c <= n - used, "consumed <= length");
            check(rc == (int)ev.type, "result is the event type");
            used += c;
            if (rc == SL_FCGI_EV_NONE) {
                check(used == n, "NONE consumes everything");
                break;
            }
            if (rc == SL_FCGI_EV_STDOUT || rc == SL_FCGI_EV_STDERR) {
                check(ev.len > 0, "data events are not empty");
                check(ev.data >= frag && ev.data + ev.len == frag + used,
                      "data inside the fragment, ending at consumed");
                add(t, rc, ev.data, ev.len);
            } else {
                unsigned char v[5] = {(unsigned char)(ev.app_status >> 24),
                                      (unsigned char)(ev.app_status >> 16),
                                      (unsigned char)(ev.app_status >> 8),
                                      (unsigned char)ev.app_status, ev.protocol_status};
                add(t, rc, v, rc == SL_FCGI_EV_END_REQUEST ? 5 : 0);
                if (rc == SL_FCGI_EV_END_REQUEST) check(sl_fcgi_decoder_done(&d), "done");
            }
        }
        free(frag);
        off += n;
    }
    t->done = sl_fcgi_decoder_done(&d);
    t->boundary = sl_fcgi_decoder_at_boundary(&d);
}

static void check_nv(const uint8_t *in, size_t len)
{
    sl_buf re = {NULL, 0, 0};
    size_t pos = 0, pairs = 0;
    const char *n, *v;
    size_t nl, vl;
    int rc;
    while ((rc = sl_fcgi_nv_next(in, len, &pos, &n, &nl, &v, &vl)) == 1) {
        check(pos <= len, "pos within the buffer");
        check(n >= (const char *)in && n + nl <= (const char *)in + pos, "name inside");
        check(v == n + nl && v + vl == (const char *)in + pos, "value follows the name");
        check(sl_fcgi_nv_append(&re, n, nl, v, vl) == 0, "re-encode");
        pairs++;
    }
    check(rc == 0 || rc == -EPROTO, "nv result");
    check(rc != 0 || pos == len, "0 only at the end");
    /* The re-encoding (shortest lengths) decodes to the same pairs. */
    size_t a = 0, b = 0;
    for (size_t i = 0; i < pairs; i++) {
        const char *n1, *v1, *n2, *v2;
        size_t nl1, vl1, nl2, vl2;
        check(sl_fcgi_nv_next(in, len, &a, &n1, &nl1, &v1, &vl1) == 1, "first pass again");
        check(sl_fcgi_nv_next(re.p, re.len, &b, &n2, &nl2, &v2, &vl2) == 1, "re-encoded pair");
        check(nl1 == nl2 && vl1 == vl2 && !memcmp(n1, n2, nl1) && !memcmp(v1, v2, vl1),
              "re-encoded pair equal");
    }
    check(b == re.len, "re-encoding fully consumed");
    sl_buf_free(&re);
}

/* STDOUT written by the encoder decodes back to the payload, fragmented. */
static void check_stream_roundtrip(const uint8_t *in, size_t len, uint32_t seed)
{
    sl_buf b = {NULL, 0, 0};
    check(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, in, len) == 0, "write_stream");
    check(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1) == 0, "end_stream");
    check(sl_fcgi_end_request(&b, 1, 7, 0) == 0, "end_request");
    check(b.len % 8 == 0, "records padded to 8");
    trace t;
    run((const uint8_t *)b.p, b.len, &seed, &t);
    check(t.rc == 0 && t.done && t.boundary, "encoded stream decodes cleanly");
    size_t off = 0;
    if (len) {
        uint64_t n;
        check(t.b.p[0] == SL_FCGI_EV_STDOUT, "stdout first");
        memcpy(&n, t.b.p + 1, 8);
        check(n == len && !memcmp(t.b.p + 9, in, len), "stdout equals the payload");
        off = 9 + len;
    }
    check(t.b.len == off + 9 + 9 + 5 && t.b.p[off] == SL_FCGI_EV_STDOUT_END &&
              t.b.p[off + 9] == SL_FCGI_EV_END_REQUEST,
          "stdout end and end request follow");
    sl_buf_free(&t.b);
    sl_buf_free(&b);
}

/* PARAMS: the payload cut into pairs at bytes picked by the seed; every record but those of a
 * pair too big for one record holds whole pairs, and the concatenation decodes to the pairs. */
static void check_params_roundtrip(const uint8_t *in, size_t len, uint32_t seed)
{
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 1);
    size_t cuts[64][4], np = 0, off = 0;
    while (off < len && np < 64) {
        size_t nl = rng_next(&seed) % 40, vl = rng_next(&seed) % 300;
        if (rng_next(&seed) % 16 == 0) vl *= 300;
        if (nl > len - off) nl = len - off;
        if (vl > len - off - nl) vl = len - off - nl;
        cuts[np][0] = off;
        cuts[np][1] = nl;
        cuts[np][2] = off + nl;
        cuts[np][3] = vl;
        check(sl_fcgi_params_add(&w, (const char *)in + off, nl, (const char *)in + off + nl,
                                 vl) == 0,
              "params_add");
        np++;
        off += nl + vl;
        if (nl + vl == 0) break;
    }
    check(sl_fcgi_params_end(&w) == 0, "params_end");
    sl_buf all = {NULL, 0, 0};
    const unsigned char *p = (const unsigned char *)b.p;
    size_t at = 0;
    int saw_end = 0;
    while (at < b.len) {
        check(b.len - at >= 8 && p[at] == 1 && p[at + 1] == SL_FCGI_PARAMS && p[at + 3] == 1,
              "PARAMS record header");
        size_t clen = (size_t)p[at + 4] << 8 | p[at + 5], pad = p[at + 6];
        check(pad == (8 - clen % 8) % 8 && b.len - at - 8 >= clen + pad, "record size");
        check(!saw_end, "nothing after the empty record");
        if (clen == 0) saw_end = 1;
        check(sl_buf_append(&all, b.p + at + 8, clen) == 0, "append");
        at += 8 + clen + pad;
    }
    check(saw_end, "stream ended");
    size_t pos = 0;
    for (size_t i = 0; i < np; i++) {
        const char *n, *v;
        size_t nl, vl;
        check(sl_fcgi_nv_next(all.p, all.len, &pos, &n, &nl, &v, &vl) == 1, "pair decodes");
        check(nl == cuts[i][1] && vl == cuts[i][3] &&
                  !memcmp(n, in + cuts[i][0], nl) && !memcmp(v, in + cuts[i][2], vl),
              "pair equal");
    }
    check(pos == all.len, "no extra pairs");
    sl_buf_free(&all);
    sl_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    uint32_t seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)data[3] << 24;
    const uint8_t *in = data + 4;
    size_t len = size - 4;

    trace whole, frag;
    uint32_t s = seed;
    run(in, len, NULL, &whole);
    run(in, len, &s, &frag);
    check(whole.rc == frag.rc, "same error whole and fragmented");
    check(whole.b.len == frag.b.len && (!whole.b.len || !memcmp(whole.b.p, frag.b.p, whole.b.len)),
          "same events whole and fragmented");
    check(whole.done == frag.done && whole.boundary == frag.boundary, "same final state");
    sl_buf_free(&whole.b);
    sl_buf_free(&frag.b);

    check_nv(in, len);
    check_stream_roundtrip(in, len, seed);
    check_params_roundtrip(in, len, seed);
    return 0;
}
