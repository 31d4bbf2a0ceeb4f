/* Unit tests for proxy_core/fcgi_proto.c: record encoders (exact bytes, padding, splitting at
 * 65535, PARAMS packing, 1- and 4-byte name-value lengths), the name-value decoder, and the
 * streaming record decoder, fed whole, byte by byte and in every fixed fragment size, with every
 * fragment copied into an exactly-sized heap buffer so that AddressSanitizer sees reads past it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "fcgi_proto.h"

/* ---- helpers ---- */

typedef struct rec {
    uint8_t version, type;
    uint16_t id;
    size_t clen, pad;
    const unsigned char *content;
} rec;

/* Splits an encoded buffer into records; fails the test if it is not a whole number of records
 * or if padding bytes are not zero. Returns the record count. */
static size_t split_records(const sl_buf *b, rec *out, size_t max)
{
    const unsigned char *p = (const unsigned char *)b->p;
    size_t off = 0, n = 0;
    while (off < b->len) {
        assert_true(b->len - off >= 8);
        assert_true(n < max);
        rec *r = &out[n++];
        r->version = p[off];
        r->type = p[off + 1];
        r->id = (uint16_t)(p[off + 2] << 8 | p[off + 3]);
        r->clen = (size_t)p[off + 4] << 8 | p[off + 5];
        r->pad = p[off + 6];
        assert_int_equal(p[off + 7], 0);
        off += 8;
        assert_true(b->len - off >= r->clen + r->pad);
        r->content = p + off;
        off += r->clen;
        for (size_t i = 0; i < r->pad; i++)
            assert_int_equal(p[off + i], 0);
        off += r->pad;
    }
    return n;
}

static void fill_pattern(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)((i * 31 + seed * 7 + (i >> 8)) & 0xff);
}

/* The record has clen content bytes and pad bytes of padding. */
static void expect_rec(const rec *r, size_t clen, size_t pad)
{
    if (r->clen != clen || r->pad != pad)
        fail_msg("a record of %zu + %zu bytes, want %zu + %zu", r->clen, r->pad, clen, pad);
}

/* b holds exactly the n bytes want. */
static void expect_bytes(const sl_buf *b, const void *want, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->p, want, n);
}

/* n bytes of the pattern seed gives, on the heap (the caller frees them). */
static char *patterned(size_t n, unsigned seed)
{
    char *p = malloc(n);
    assert_non_null(p);
    fill_pattern(p, n, seed);
    return p;
}

/* Everything a decoder reported for one input. */
typedef struct result {
    sl_buf out, err;
    char order[64]; /* event letters: o = stdout end, e = stderr end, E = end request */
    size_t n_order;
    int end_requests;
    uint32_t app_status;
    uint8_t protocol_status;
    int rc;         /* 0, or the error */
    bool done, boundary;
} result;

static void result_free(result *r)
{
    sl_buf_free(&r->out);
    sl_buf_free(&r->err);
}

static void note(result *r, char c)
{
    if (r->n_order < sizeof r->order - 1) r->order[r->n_order++] = c;
}

/* Decodes buf[0..len) in fragments of frag bytes (0: all at once). */
static void decode_all(const void *buf, size_t len, size_t frag, uint16_t id, result *r)
{
    memset(r, 0, sizeof *r);
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, id);
    const char *p = buf;
    size_t off = 0;
    do {
        size_t n = frag && frag < len - off ? frag : len - off;
        char *copy = tu_copy(p + off, n);
        size_t used = 0;
        while (used < n || n == 0) {
            sl_fcgi_event ev;
            size_t c;
            int rc = sl_fcgi_decode(&d, copy + used, n - used, &c, &ev);
            if (rc < 0) {
                assert_int_equal(c, 0);
                r->rc = rc;
                free(copy);
                return;
            }
            assert_true(c <= n - used);
            assert_int_equal(rc, (int)ev.type);
            used += c;
            switch (ev.type) {
            case SL_FCGI_EV_NONE:
                assert_int_equal(used, n);
                break;
            case SL_FCGI_EV_STDOUT:
            case SL_FCGI_EV_STDERR:
                assert_true(ev.len > 0);
                assert_true(ev.data >= copy && ev.data + ev.len == copy + used);
                assert_int_equal(sl_buf_append(ev.type == SL_FCGI_EV_STDOUT ? &r->out : &r->err,
                                               ev.data, ev.len),
                                 0);
                break;
            case SL_FCGI_EV_STDOUT_END:
                note(r, 'o');
                break;
            case SL_FCGI_EV_STDERR_END:
                note(r, 'e');
                break;
            case SL_FCGI_EV_END_REQUEST:
                note(r, 'E');
                r->end_requests++;
                r->app_status = ev.app_status;
                r->protocol_status = ev.protocol_status;
                break;
            }
            if (ev.type == SL_FCGI_EV_NONE) break;
        }
        free(copy);
        off += n;
    } while (off < len);
    r->done = sl_fcgi_decoder_done(&d);
    r->boundary = sl_fcgi_decoder_at_boundary(&d);
}

/* Decodes buf whole, byte by byte and in fragment sizes 2..17, and checks that all give the same
 * result; returns the whole-input result in *r. */
static void decode_every_way(const void *buf, size_t len, uint16_t id, result *r)
{
    decode_all(buf, len, 0, id, r);
    size_t frags[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 4096};
    for (size_t i = 0; i < sizeof frags / sizeof frags[0]; i++) {
        result o;
        decode_all(buf, len, frags[i], id, &o);
        assert_int_equal(o.rc, r->rc);
        assert_int_equal(o.out.len, r->out.len);
        if (o.out.len) assert_memory_equal(o.out.p, r->out.p, o.out.len);
        assert_int_equal(o.err.len, r->err.len);
        if (o.err.len) assert_memory_equal(o.err.p, r->err.p, o.err.len);
        assert_int_equal(o.n_order, r->n_order);
        assert_memory_equal(o.order, r->order, sizeof o.order);
        assert_int_equal(o.app_status, r->app_status);
        assert_int_equal(o.protocol_status, r->protocol_status);
        assert_int_equal(o.done, r->done);
        assert_int_equal(o.boundary, r->boundary);
        result_free(&o);
    }
}

static void expect_proto_error(const void *buf, size_t len, uint16_t id)
{
    result r;
    decode_every_way(buf, len, id, &r);
    assert_int_equal(r.rc, -EPROTO);
    result_free(&r);
}

/* Appends a raw record with an explicit padding length. */
static void raw_record(sl_buf *b, uint8_t version, uint8_t type, uint16_t id, const void *content,
                       size_t clen, size_t pad)
{
    unsigned char h[8] = {version,
                          type,
                          (unsigned char)(id >> 8),
                          (unsigned char)id,
                          (unsigned char)(clen >> 8),
                          (unsigned char)clen,
                          (unsigned char)pad,
                          0};
    assert_int_equal(sl_buf_append(b, h, 8), 0);
    assert_int_equal(sl_buf_append(b, content, clen), 0);
    static const char zeros[256];
    assert_int_equal(sl_buf_append(b, zeros, pad), 0);
}

/* ---- sl_buf ---- */

static void test_buf_append_and_free(void **state)
{
    sl_buf b = {NULL, 0, 0};
    char chunk[1000];
    fill_pattern(chunk, sizeof chunk, 1);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sl_buf_append(&b, chunk, sizeof chunk), 0);
    assert_int_equal(b.len, 100000);
    assert_true(b.cap >= b.len);
    for (int i = 0; i < 100; i++)
        assert_memory_equal(b.p + i * 1000, chunk, 1000);
    assert_int_equal(sl_buf_append(&b, NULL, 0), 0);
    assert_int_equal(b.len, 100000);
    sl_buf_free(&b);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
}

static void test_buf_reserve_overflow(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_buf_append(&b, "abc", 3), 0);
    assert_int_equal(sl_buf_reserve(&b, SIZE_MAX), -EOVERFLOW);
    assert_int_equal(sl_buf_reserve(&b, SIZE_MAX - 2), -EOVERFLOW);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.p, "abc", 3);
    sl_buf_free(&b);
}

/* ---- encoders ---- */

static void test_record_padding(void **state)
{
    char content[40];
    fill_pattern(content, sizeof content, 2);
    for (size_t n = 0; n <= 33; n++) {
        sl_buf b = {NULL, 0, 0};
        assert_int_equal(sl_fcgi_record(&b, SL_FCGI_STDIN, 0x1234, content, n), 0);
        assert_int_equal(b.len % 8, 0);
        assert_int_equal(b.len, 8 + n + (8 - n % 8) % 8);
        rec r[2];
        assert_int_equal(split_records(&b, r, 2), 1);
        assert_int_equal(r[0].version, 1);
        assert_int_equal(r[0].type, SL_FCGI_STDIN);
        assert_int_equal(r[0].id, 0x1234);
        assert_int_equal(r[0].clen, n);
        assert_int_equal(r[0].pad, (8 - n % 8) % 8);
        if (n) assert_memory_equal(r[0].content, content, n);
        sl_buf_free(&b);
    }
}

static void test_record_too_long(void **state)
{
    sl_buf b = {NULL, 0, 0};
    char *big = calloc(1, 65536);
    assert_non_null(big);
    assert_int_equal(sl_fcgi_record(&b, SL_FCGI_STDIN, 1, big, 65536), -EINVAL);
    assert_int_equal(b.len, 0);
    assert_int_equal(sl_fcgi_record(&b, SL_FCGI_STDIN, 1, big, 65535), 0);
    assert_int_equal(b.len, 8 + 65535 + 1);
    assert_int_equal((unsigned char)b.p[4], 0xff);
    assert_int_equal((unsigned char)b.p[5], 0xff);
    assert_int_equal((unsigned char)b.p[6], 1);
    free(big);
    sl_buf_free(&b);
}

static void test_begin_request_bytes(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_begin_request(&b, 1, SL_FCGI_RESPONDER, false), 0);
    assert_int_equal(sl_fcgi_begin_request(&b, 0x0102, SL_FCGI_RESPONDER, true), 0);
    static const unsigned char want[] = {1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                                         1, 1, 1, 2, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    expect_bytes(&b, want, sizeof want);
    assert_int_equal(sl_fcgi_begin_request(&b, 0, SL_FCGI_RESPONDER, false), -EINVAL);
    assert_int_equal(b.len, sizeof want);
    sl_buf_free(&b);
}

static void test_abort_and_end_request_bytes(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_abort_request(&b, 0xfffe), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 7, 0xdeadbeef, SL_FCGI_OVERLOADED), 0);
    static const unsigned char want[] = {1,    2,    0xff, 0xfe, 0,    0, 0, 0, 1, 3, 0, 7,
                                         0,    8,    0,    0,    0xde, 0xad, 0xbe, 0xef,
                                         2,    0,    0,    0};
    expect_bytes(&b, want, sizeof want);
    assert_int_equal(sl_fcgi_abort_request(&b, 0), -EINVAL);
    assert_int_equal(b.len, sizeof want);
    sl_buf_free(&b);
}

static void test_stream_split_over_64k(void **state)
{
    size_t len = 2 * 65535 + 10;
    char *data = patterned(len, 3);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDIN, 9, data, len), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDIN, 9), 0);
    rec r[8];
    assert_int_equal(split_records(&b, r, 8), 4);
    expect_rec(&r[0], 65535, 1);
    expect_rec(&r[1], 65535, 1);
    expect_rec(&r[2], 10, 6);
    expect_rec(&r[3], 0, 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[i].type, SL_FCGI_STDIN);
        assert_int_equal(r[i].id, 9);
    }
    assert_memory_equal(r[0].content, data, 65535);
    assert_memory_equal(r[1].content, data + 65535, 65535);
    assert_memory_equal(r[2].content, data + 2 * 65535, 10);
    assert_int_equal(b.len % 8, 0);
    free(data);
    sl_buf_free(&b);
}

static void test_stream_exact_multiple(void **state)
{
    size_t len = 65535;
    char *data = patterned(len, 4);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_DATA, 2, data, len), 0);
    rec r[4];
    assert_int_equal(split_records(&b, r, 4), 1);
    assert_int_equal(r[0].clen, 65535);
    assert_int_equal(r[0].type, SL_FCGI_DATA);
    free(data);
    sl_buf_free(&b);
}

static void test_stream_invalid_arguments(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDIN, 1, NULL, 0), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_BEGIN_REQUEST, 1, "x", 1), -EINVAL);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_END_REQUEST, 1, "x", 1), -EINVAL);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_GET_VALUES, 1, "x", 1), -EINVAL);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDIN, 0, "x", 1), -EINVAL);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_ABORT_REQUEST, 1), -EINVAL);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDIN, 0), -EINVAL);
    assert_int_equal(b.len, 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDIN, 1), 0);
    static const unsigned char want[] = {1, 5, 0, 1, 0, 0, 0, 0};
    expect_bytes(&b, want, 8);
    sl_buf_free(&b);
}

/* ---- name-value pairs ---- */

static void test_nv_one_byte_lengths(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_nv_append(&b, "SCRIPT_NAME", 11, "/x.php", 6), 0);
    static const char want[] = "\x0b\x06SCRIPT_NAME/x.php";
    expect_bytes(&b, want, sizeof want - 1);
    sl_buf_free(&b);

    char v[127];
    memset(v, 'v', sizeof v);
    assert_int_equal(sl_fcgi_nv_append(&b, "", 0, v, 127), 0);
    assert_int_equal(b.len, 2 + 127);
    assert_int_equal((unsigned char)b.p[0], 0);
    assert_int_equal((unsigned char)b.p[1], 127);
    sl_buf_free(&b);
}

static void test_nv_four_byte_lengths(void **state)
{
    char v[300];
    memset(v, 'v', sizeof v);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_nv_append(&b, "N", 1, v, 128), 0);
    static const unsigned char want1[] = {1, 0x80, 0, 0, 128, 'N'};
    assert_memory_equal(b.p, want1, sizeof want1);
    assert_int_equal(b.len, sizeof want1 + 128);
    sl_buf_free(&b);

    assert_int_equal(sl_fcgi_nv_append(&b, v, 300, "", 0), 0);
    static const unsigned char want2[] = {0x80, 0, 1, 44, 0};
    assert_memory_equal(b.p, want2, sizeof want2);
    assert_int_equal(b.len, sizeof want2 + 300);
    sl_buf_free(&b);
}

static void test_nv_roundtrip_sizes(void **state)
{
    size_t sizes[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 70000};
    size_t ns = sizeof sizes / sizeof sizes[0];
    char *v = patterned(70000, 5);
    sl_buf b = {NULL, 0, 0};
    for (size_t i = 0; i < ns; i++)
        for (size_t j = 0; j < ns; j += 2)
            assert_int_equal(sl_fcgi_nv_append(&b, v, sizes[i], v + 1, sizes[j] - (sizes[j] > 0)),
                             0);
    size_t pos = 0;
    for (size_t i = 0; i < ns; i++) {
        for (size_t j = 0; j < ns; j += 2) {
            const char *n, *val;
            size_t nl, vl;
            assert_int_equal(sl_fcgi_nv_next(b.p, b.len, &pos, &n, &nl, &val, &vl), 1);
            assert_int_equal(nl, sizes[i]);
            assert_int_equal(vl, sizes[j] - (sizes[j] > 0));
            assert_memory_equal(n, v, nl);
            assert_memory_equal(val, v + 1, vl);
        }
    }
    const char *n, *val;
    size_t nl, vl;
    assert_int_equal(pos, b.len);
    assert_int_equal(sl_fcgi_nv_next(b.p, b.len, &pos, &n, &nl, &val, &vl), 0);
    free(v);
    sl_buf_free(&b);
}

static void test_nv_truncated(void **state)
{
    char v[200];
    memset(v, 'x', sizeof v);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_nv_append(&b, "NAME", 4, v, 200), 0);
    for (size_t k = 1; k < b.len; k++) {
        char *copy = tu_copy(b.p, k);
        size_t pos = 0;
        const char *n, *val;
        size_t nl, vl;
        assert_int_equal(sl_fcgi_nv_next(copy, k, &pos, &n, &nl, &val, &vl), -EPROTO);
        assert_int_equal(pos, 0);
        free(copy);
    }
    size_t pos = b.len + 1;
    const char *n, *val;
    size_t nl, vl;
    assert_int_equal(sl_fcgi_nv_next(b.p, b.len, &pos, &n, &nl, &val, &vl), -EPROTO);
    sl_buf_free(&b);
}

static void test_nv_huge_declared_length(void **state)
{
    /* 4-byte lengths of 0x7fffffff each: must not wrap around and must not read anything. */
    static const unsigned char p[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'a'};
    size_t pos = 0;
    const char *n, *val;
    size_t nl, vl;
    assert_int_equal(sl_fcgi_nv_next(p, sizeof p, &pos, &n, &nl, &val, &vl), -EPROTO);
    static const unsigned char q[] = {0x01, 0xff, 0xff, 0xff, 0xff, 'a'};
    assert_int_equal(sl_fcgi_nv_next(q, sizeof q, &pos, &n, &nl, &val, &vl), -EPROTO);
}

static void test_nv_length_overflow(void **state)
{
    sl_buf b = {NULL, 0, 0};
    /* The lengths are refused before any byte is read, so the pointers need not be that big. */
    assert_int_equal(sl_fcgi_nv_append(&b, "n", (size_t)0x80000000u, "v", 1), -EOVERFLOW);
    assert_int_equal(sl_fcgi_nv_append(&b, "n", 1, "v", (size_t)0x80000000u), -EOVERFLOW);
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 1);
    assert_int_equal(sl_fcgi_params_add(&w, "n", 1, "v", (size_t)0x80000000u), -EOVERFLOW);
    assert_int_equal(b.len, 0);
    sl_buf_free(&b);
}

/* ---- PARAMS writer ---- */

/* Checks a PARAMS stream: all records PARAMS for id, only the last one empty, and (when
 * whole_pairs) every record's content a whole number of pairs. Returns the concatenated content
 * in *all. */
static void check_params_stream(const sl_buf *b, uint16_t id, bool whole_pairs, sl_buf *all,
                                size_t *n_records)
{
    static rec r[64];
    size_t n = split_records(b, r, 64);
    assert_true(n >= 1);
    *n_records = n;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r[i].type, SL_FCGI_PARAMS);
        assert_int_equal(r[i].id, id);
        assert_int_equal(r[i].pad, (8 - r[i].clen % 8) % 8);
        if (i + 1 < n) assert_true(r[i].clen > 0);
        if (whole_pairs) {
            size_t pos = 0;
            const char *nm, *v;
            size_t nl, vl;
            int rc;
            while ((rc = sl_fcgi_nv_next(r[i].content, r[i].clen, &pos, &nm, &nl, &v, &vl)) == 1)
                ;
            assert_int_equal(rc, 0);
        }
        assert_int_equal(sl_buf_append(all, r[i].content, r[i].clen), 0);
    }
    assert_int_equal(r[n - 1].clen, 0);
}

static void test_params_empty_stream(void **state)
{
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 3);
    assert_int_equal(sl_fcgi_params_end(&w), 0);
    static const unsigned char want[] = {1, 4, 0, 3, 0, 0, 0, 0};
    expect_bytes(&b, want, 8);
    sl_buf_free(&b);
}

static void test_params_packs_whole_pairs(void **state)
{
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 42);
    char name[32], value[400];
    /* About 3000 pairs of ~ 300-400 bytes: several records, pairs never cut. */
    for (int i = 0; i < 3000; i++) {
        int nl = snprintf(name, sizeof name, "HTTP_X_%d", i);
        size_t vl = 100 + (size_t)(i * 37) % 300;
        fill_pattern(value, vl, (unsigned)i);
        assert_int_equal(sl_fcgi_params_add(&w, name, (size_t)nl, value, vl), 0);
    }
    assert_int_equal(sl_fcgi_params_end(&w), 0);
    sl_buf all = {NULL, 0, 0};
    size_t nrec;
    check_params_stream(&b, 42, true, &all, &nrec);
    assert_true(nrec > 10);
    size_t pos = 0;
    for (int i = 0; i < 3000; i++) {
        const char *nm, *v;
        size_t nl, vl;
        assert_int_equal(sl_fcgi_nv_next(all.p, all.len, &pos, &nm, &nl, &v, &vl), 1);
        int want_nl = snprintf(name, sizeof name, "HTTP_X_%d", i);
        assert_int_equal(nl, (size_t)want_nl);
        assert_memory_equal(nm, name, nl);
        size_t want_vl = 100 + (size_t)(i * 37) % 300;
        fill_pattern(value, want_vl, (unsigned)i);
        assert_int_equal(vl, want_vl);
        assert_memory_equal(v, value, vl);
    }
    assert_int_equal(pos, all.len);
    sl_buf_free(&all);
    sl_buf_free(&b);
}

static void test_params_exact_fit(void **state)
{
    /* Two pairs of exactly 65535/2 rounded so that together they fill one record to the byte:
     * pair size = 1 + 4 + 1 + vl. */
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 1);
    size_t v1 = 30000, v2 = 65535 - (6 + v1) - 6;
    char *v = calloc(1, 65535);
    assert_non_null(v);
    assert_int_equal(sl_fcgi_params_add(&w, "A", 1, v, v1), 0);
    assert_int_equal(sl_fcgi_params_add(&w, "B", 1, v, v2), 0);
    assert_int_equal(sl_fcgi_params_add(&w, "C", 1, "c", 1), 0);
    assert_int_equal(sl_fcgi_params_end(&w), 0);
    rec r[8];
    assert_int_equal(split_records(&b, r, 8), 3);
    expect_rec(&r[0], 65535, 1);
    expect_rec(&r[1], 4, 4);
    assert_memory_equal(r[1].content, "\x01\x01" "Cc", 4);
    assert_int_equal(r[2].clen, 0);
    free(v);
    sl_buf_free(&b);
}

static void test_params_pair_larger_than_record(void **state)
{
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 5);
    size_t big = 150000;
    char *v = patterned(big, 9);
    assert_int_equal(sl_fcgi_params_add(&w, "SMALL1", 6, "one", 3), 0);
    assert_int_equal(sl_fcgi_params_add(&w, "HTTP_COOKIE", 11, v, big), 0);
    assert_int_equal(sl_fcgi_params_add(&w, "SMALL2", 6, "two", 3), 0);
    assert_int_equal(sl_fcgi_params_end(&w), 0);
    sl_buf all = {NULL, 0, 0};
    size_t nrec;
    check_params_stream(&b, 5, false, &all, &nrec);
    /* small1 | big split in 3 | small2 | end */
    assert_int_equal(nrec, 6);
    size_t pos = 0;
    const char *nm, *val;
    size_t nl, vl;
    assert_int_equal(sl_fcgi_nv_next(all.p, all.len, &pos, &nm, &nl, &val, &vl), 1);
    assert_memory_equal(nm, "SMALL1", 6);
    assert_int_equal(sl_fcgi_nv_next(all.p, all.len, &pos, &nm, &nl, &val, &vl), 1);
    assert_int_equal(nl, 11);
    assert_int_equal(vl, big);
    assert_memory_equal(val, v, big);
    assert_int_equal(sl_fcgi_nv_next(all.p, all.len, &pos, &nm, &nl, &val, &vl), 1);
    assert_memory_equal(val, "two", 3);
    assert_int_equal(sl_fcgi_nv_next(all.p, all.len, &pos, &nm, &nl, &val, &vl), 0);
    free(v);
    sl_buf_free(&all);
    sl_buf_free(&b);
}

static void test_params_request_id_zero(void **state)
{
    sl_buf b = {NULL, 0, 0};
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 0);
    assert_int_equal(sl_fcgi_params_add(&w, "A", 1, "b", 1), -EINVAL);
    assert_int_equal(sl_fcgi_params_end(&w), -EINVAL);
    assert_int_equal(b.len, 0);
    sl_buf_free(&b);
}

/* A whole request as a server writes it is a valid record sequence. */
static void test_full_request_encoding(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_begin_request(&b, 1, SL_FCGI_RESPONDER, true), 0);
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, &b, 1);
    assert_int_equal(sl_fcgi_params_add(&w, "REQUEST_METHOD", 14, "POST", 4), 0);
    assert_int_equal(sl_fcgi_params_add(&w, "CONTENT_LENGTH", 14, "5", 1), 0);
    assert_int_equal(sl_fcgi_params_end(&w), 0);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDIN, 1, "hello", 5), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDIN, 1), 0);
    rec r[8];
    assert_int_equal(split_records(&b, r, 8), 5);
    static const uint8_t types[] = {SL_FCGI_BEGIN_REQUEST, SL_FCGI_PARAMS, SL_FCGI_PARAMS,
                                    SL_FCGI_STDIN, SL_FCGI_STDIN};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r[i].type, types[i]);
        assert_int_equal(r[i].id, 1);
        assert_int_equal(r[i].version, 1);
    }
    assert_int_equal(r[1].clen, 2 + 14 + 4 + 2 + 14 + 1);
    assert_int_equal(b.len % 8, 0);
    sl_buf_free(&b);
}

/* ---- decoder ---- */

static void test_decode_simple_response(void **state)
{
    sl_buf b = {NULL, 0, 0};
    const char *body = "Content-Type: text/plain\r\n\r\nhello";
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, body, strlen(body)), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, SL_FCGI_REQUEST_COMPLETE), 0);
    result r;
    decode_every_way(b.p, b.len, 1, &r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.out.len, strlen(body));
    assert_memory_equal(r.out.p, body, r.out.len);
    assert_int_equal(r.err.len, 0);
    assert_string_equal(r.order, "oE");
    assert_int_equal(r.end_requests, 1);
    assert_int_equal(r.app_status, 0);
    assert_int_equal(r.protocol_status, SL_FCGI_REQUEST_COMPLETE);
    assert_true(r.done);
    assert_true(r.boundary);
    result_free(&r);
    sl_buf_free(&b);
}

static void test_decode_interleaved_stdout_stderr(void **state)
{
    sl_buf b = {NULL, 0, 0};
    for (int i = 0; i < 20; i++) {
        char piece[64];
        int n = snprintf(piece, sizeof piece, "line %d of output\n", i);
        assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 77, piece, (size_t)n), 0);
        if (i % 3 == 0) {
            n = snprintf(piece, sizeof piece, "warning %d", i);
            assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDERR, 77, piece, (size_t)n), 0);
        }
    }
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDERR, 77), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 77), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 77, 0xdeadbeef, SL_FCGI_OVERLOADED), 0);
    result r;
    decode_every_way(b.p, b.len, 77, &r);
    assert_int_equal(r.rc, 0);
    assert_true(r.out.len > 0);
    assert_memory_equal(r.out.p, "line 0 of output\nline 1 of output\n", 34);
    assert_memory_equal(r.err.p, "warning 0warning 3", 18);
    assert_string_equal(r.order, "eoE");
    assert_int_equal(r.app_status, 0xdeadbeef);
    assert_int_equal(r.protocol_status, SL_FCGI_OVERLOADED);
    result_free(&r);
    sl_buf_free(&b);
}

static void test_decode_records_over_64k(void **state)
{
    size_t len = 200000;
    char *data = patterned(len, 11);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 3, data, len), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 3, 1, 0), 0);
    result r;
    for (size_t frag = 0; frag <= 70001; frag += 70001) {
        decode_all(b.p, b.len, frag, 3, &r);
        assert_int_equal(r.rc, 0);
        assert_int_equal(r.out.len, len);
        assert_memory_equal(r.out.p, data, len);
        assert_string_equal(r.order, "E"); /* no empty STDOUT: END_REQUEST alone is fine */
        assert_int_equal(r.app_status, 1);
        result_free(&r);
    }
    free(data);
    sl_buf_free(&b);
}

static void test_decode_max_padding(void **state)
{
    /* Padding up to 255 bytes is legal even though encoders never need more than 7. */
    sl_buf b = {NULL, 0, 0};
    raw_record(&b, 1, SL_FCGI_STDOUT, 1, "abc", 3, 255);
    raw_record(&b, 1, SL_FCGI_STDOUT, 1, NULL, 0, 13);
    unsigned char endb[8] = {0, 0, 0, 9, 0};
    raw_record(&b, 1, SL_FCGI_END_REQUEST, 1, endb, 8, 200);
    result r;
    decode_every_way(b.p, b.len, 1, &r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.out.len, 3);
    assert_memory_equal(r.out.p, "abc", 3);
    assert_string_equal(r.order, "oE");
    assert_int_equal(r.app_status, 9);
    assert_true(r.done);
    result_free(&r);
    sl_buf_free(&b);
}

static void test_decode_event_before_padding(void **state)
{
    /* Data is reported as soon as it arrives; the record is only over after its padding. */
    sl_buf b = {NULL, 0, 0};
    raw_record(&b, 1, SL_FCGI_STDOUT, 1, "xy", 2, 6);
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    sl_fcgi_event ev;
    size_t c;
    assert_true(sl_fcgi_decoder_at_boundary(&d));
    assert_int_equal(sl_fcgi_decode(&d, b.p, 10, &c, &ev), SL_FCGI_EV_STDOUT);
    assert_int_equal(c, 10);
    assert_int_equal(ev.len, 2);
    assert_ptr_equal(ev.data, b.p + 8);
    assert_false(sl_fcgi_decoder_at_boundary(&d));
    assert_int_equal(sl_fcgi_decode(&d, b.p + 10, 5, &c, &ev), SL_FCGI_EV_NONE);
    assert_int_equal(c, 5);
    assert_false(sl_fcgi_decoder_at_boundary(&d));
    assert_int_equal(sl_fcgi_decode(&d, b.p + 15, 1, &c, &ev), SL_FCGI_EV_NONE);
    assert_true(sl_fcgi_decoder_at_boundary(&d));
    assert_false(sl_fcgi_decoder_done(&d));
    sl_buf_free(&b);
}

static void test_decode_end_event_without_more_input(void **state)
{
    /* The empty STDOUT record is reported by the call that delivers its last header byte. */
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    sl_fcgi_event ev;
    size_t c;
    assert_int_equal(sl_fcgi_decode(&d, b.p, 7, &c, &ev), SL_FCGI_EV_NONE);
    assert_int_equal(c, 7);
    assert_int_equal(sl_fcgi_decode(&d, b.p + 7, 1, &c, &ev), SL_FCGI_EV_STDOUT_END);
    assert_int_equal(c, 1);
    assert_int_equal(sl_fcgi_decode(&d, b.p + 8, 16, &c, &ev), SL_FCGI_EV_END_REQUEST);
    assert_int_equal(c, 16);
    assert_true(sl_fcgi_decoder_done(&d));
    /* Nothing more to consume is not an error. */
    assert_int_equal(sl_fcgi_decode(&d, NULL, 0, &c, &ev), SL_FCGI_EV_NONE);
    assert_int_equal(c, 0);
    sl_buf_free(&b);
}

static void test_decode_stops_at_each_event(void **state)
{
    /* One buffer, several events: each call returns one, the rest is left for the next call. */
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "aa", 2), 0);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDERR, 1, "bbb", 3), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    sl_fcgi_event ev;
    size_t c, off = 0;
    assert_int_equal(sl_fcgi_decode(&d, b.p + off, b.len - off, &c, &ev), SL_FCGI_EV_STDOUT);
    assert_int_equal(c, 10);
    off += c;
    assert_int_equal(sl_fcgi_decode(&d, b.p + off, b.len - off, &c, &ev), SL_FCGI_EV_STDERR);
    assert_int_equal(c, 6 + 11);
    assert_memory_equal(ev.data, "bbb", 3);
    off += c;
    assert_int_equal(sl_fcgi_decode(&d, b.p + off, b.len - off, &c, &ev), SL_FCGI_EV_STDOUT_END);
    assert_int_equal(c, 5 + 8);
    off += c;
    assert_int_equal(sl_fcgi_decode(&d, b.p + off, b.len - off, &c, &ev),
                     SL_FCGI_EV_END_REQUEST);
    off += c;
    assert_int_equal(off, b.len);
    sl_buf_free(&b);
}

static void test_decode_repeated_stream_end(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "x", 1), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    result r;
    decode_every_way(b.p, b.len, 1, &r);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.order, "oE");
    result_free(&r);
    sl_buf_free(&b);
}

static void test_decode_truncated_is_not_boundary(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "hello", 5), 0);
    for (size_t k = 1; k < b.len; k++) {
        result r;
        decode_all(b.p, k, 0, 1, &r);
        assert_int_equal(r.rc, 0);
        assert_false(r.boundary);
        assert_false(r.done);
        result_free(&r);
    }
    result r;
    decode_all(b.p, b.len, 0, 1, &r);
    assert_true(r.boundary);
    assert_false(r.done);
    result_free(&r);
    sl_buf_free(&b);
}

static void test_error_wrong_version(void **state)
{
    for (int v = 0; v < 256; v += (v < 3 ? 1 : 51)) {
        if (v == 1) continue;
        sl_buf b = {NULL, 0, 0};
        raw_record(&b, (uint8_t)v, SL_FCGI_STDOUT, 1, "abc", 3, 5);
        expect_proto_error(b.p, b.len, 1);
        sl_buf_free(&b);
    }
}

static void test_error_unexpected_types(void **state)
{
    static const uint8_t bad[] = {0,
                                  SL_FCGI_BEGIN_REQUEST,
                                  SL_FCGI_ABORT_REQUEST,
                                  SL_FCGI_PARAMS,
                                  SL_FCGI_STDIN,
                                  SL_FCGI_DATA,
                                  SL_FCGI_GET_VALUES,
                                  SL_FCGI_GET_VALUES_RESULT,
                                  SL_FCGI_UNKNOWN_TYPE,
                                  12,
                                  200,
                                  255};
    for (size_t i = 0; i < sizeof bad; i++) {
        sl_buf b = {NULL, 0, 0};
        assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "ok", 2), 0);
        raw_record(&b, 1, bad[i], 1, "12345678", 8, 0);
        result r;
        decode_every_way(b.p, b.len, 1, &r);
        assert_int_equal(r.rc, -EPROTO);
        assert_int_equal(r.out.len, 2); /* what came before the bad record was delivered */
        result_free(&r);
        sl_buf_free(&b);
    }
}

static void test_error_wrong_request_id(void **state)
{
    uint16_t ids[] = {0, 2, 0x100, 0xffff};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        sl_buf b = {NULL, 0, 0};
        raw_record(&b, 1, SL_FCGI_STDOUT, ids[i], "abc", 3, 5);
        expect_proto_error(b.p, b.len, 1);
        sl_buf_free(&b);
        unsigned char endb[8] = {0};
        raw_record(&b, 1, SL_FCGI_END_REQUEST, ids[i], endb, 8, 0);
        expect_proto_error(b.p, b.len, 1);
        sl_buf_free(&b);
    }
    /* Management records (id 0) are not accepted on a request's connection either. */
    sl_buf b = {NULL, 0, 0};
    raw_record(&b, 1, SL_FCGI_GET_VALUES_RESULT, 0, "", 0, 0);
    expect_proto_error(b.p, b.len, 1);
    sl_buf_free(&b);
}

static void test_error_end_request_length(void **state)
{
    size_t lens[] = {0, 1, 7, 9, 16, 65535};
    char *body = calloc(1, 65535);
    assert_non_null(body);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        sl_buf b = {NULL, 0, 0};
        raw_record(&b, 1, SL_FCGI_END_REQUEST, 1, body, lens[i], 0);
        expect_proto_error(b.p, b.len, 1);
        sl_buf_free(&b);
    }
    free(body);
}

static void test_error_data_after_stream_end(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "a", 1), 0);
    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "b", 1), 0);
    result r;
    decode_every_way(b.p, b.len, 1, &r);
    assert_int_equal(r.rc, -EPROTO);
    assert_int_equal(r.out.len, 1);
    assert_string_equal(r.order, "o");
    result_free(&r);
    sl_buf_free(&b);

    assert_int_equal(sl_fcgi_end_stream(&b, SL_FCGI_STDERR, 1), 0);
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDERR, 1, "b", 1), 0);
    expect_proto_error(b.p, b.len, 1);
    sl_buf_free(&b);
}

static void test_error_bytes_after_end_request(void **state)
{
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    assert_int_equal(sl_buf_append(&b, "\x01", 1), 0);
    result r;
    decode_every_way(b.p, b.len, 1, &r);
    assert_int_equal(r.rc, -EPROTO);
    assert_string_equal(r.order, "E");
    result_free(&r);
    sl_buf_free(&b);

    /* A second END_REQUEST too. */
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    assert_int_equal(sl_fcgi_end_request(&b, 1, 0, 0), 0);
    expect_proto_error(b.p, b.len, 1);
    sl_buf_free(&b);
}

static void test_error_is_sticky(void **state)
{
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    sl_fcgi_event ev;
    size_t c;
    static const unsigned char bad[8] = {2, 6, 0, 1, 0, 0, 0, 0};
    assert_int_equal(sl_fcgi_decode(&d, bad, 8, &c, &ev), -EPROTO);
    assert_int_equal(c, 0);
    sl_buf b = {NULL, 0, 0};
    assert_int_equal(sl_fcgi_write_stream(&b, SL_FCGI_STDOUT, 1, "ok", 2), 0);
    assert_int_equal(sl_fcgi_decode(&d, b.p, b.len, &c, &ev), -EPROTO);
    assert_int_equal(c, 0);
    assert_int_equal(sl_fcgi_decode(&d, NULL, 0, &c, &ev), -EPROTO);
    assert_false(sl_fcgi_decoder_done(&d));
    assert_false(sl_fcgi_decoder_at_boundary(&d));
    sl_buf_free(&b);
}

static void test_decode_empty_input(void **state)
{
    sl_fcgi_decoder d;
    sl_fcgi_decoder_init(&d, 1);
    sl_fcgi_event ev;
    size_t c = 99;
    assert_int_equal(sl_fcgi_decode(&d, NULL, 0, &c, &ev), SL_FCGI_EV_NONE);
    assert_int_equal(c, 0);
    assert_int_equal(ev.type, SL_FCGI_EV_NONE);
    assert_true(sl_fcgi_decoder_at_boundary(&d));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_buf_append_and_free),
        cmocka_unit_test(test_buf_reserve_overflow),
        cmocka_unit_test(test_record_padding),
        cmocka_unit_test(test_record_too_long),
        cmocka_unit_test(test_begin_request_bytes),
        cmocka_unit_test(test_abort_and_end_request_bytes),
        cmocka_unit_test(test_stream_split_over_64k),
        cmocka_unit_test(test_stream_exact_multiple),
        cmocka_unit_test(test_stream_invalid_arguments),
        cmocka_unit_test(test_nv_one_byte_lengths),
        cmocka_unit_test(test_nv_four_byte_lengths),
        cmocka_unit_test(test_nv_roundtrip_sizes),
        cmocka_unit_test(test_nv_truncated),
        cmocka_unit_test(test_nv_huge_declared_length),
        cmocka_unit_test(test_nv_length_overflow),
        cmocka_unit_test(test_params_empty_stream),
        cmocka_unit_test(test_params_packs_whole_pairs),
        cmocka_unit_test(test_params_exact_fit),
        cmocka_unit_test(test_params_pair_larger_than_record),
        cmocka_unit_test(test_params_request_id_zero),
        cmocka_unit_test(test_full_request_encoding),
        cmocka_unit_test(test_decode_simple_response),
        cmocka_unit_test(test_decode_interleaved_stdout_stderr),
        cmocka_unit_test(test_decode_records_over_64k),
        cmocka_unit_test(test_decode_max_padding),
        cmocka_unit_test(test_decode_event_before_padding),
        cmocka_unit_test(test_decode_end_event_without_more_input),
        cmocka_unit_test(test_decode_stops_at_each_event),
        cmocka_unit_test(test_decode_repeated_stream_end),
        cmocka_unit_test(test_decode_truncated_is_not_boundary),
        cmocka_unit_test(test_error_wrong_version),
        cmocka_unit_test(test_error_unexpected_types),
        cmocka_unit_test(test_error_wrong_request_id),
        cmocka_unit_test(test_error_end_request_length),
        cmocka_unit_test(test_error_data_after_stream_end),
        cmocka_unit_test(test_error_bytes_after_end_request),
        cmocka_unit_test(test_error_is_sticky),
        cmocka_unit_test(test_decode_empty_input))
