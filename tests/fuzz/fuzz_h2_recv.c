/* libFuzzer target for the HTTP/2 input path: a server nghttp2 session made as server/h2.c makes
 * it (sl_h2_session_new: the same options and SETTINGS) receives the input, and its HEADERS become
 * HTTP/1.1 request heads through the same code (h2_head.c) that the HTTP/1.1 parser then reads.
 *
 * The input (after its first byte, which seeds the piece sizes and says whether the client preface
 * is put in front, so the fuzzer need not find it) is fed to nghttp2_session_mem_recv in pieces
 * an xorshift stream cuts, and after each piece the session's output is drained, with a response
 * submitted for every request that completed (so the send side, flow control and stream closes
 * run too). Invariants: a head sl_h2_head_end accepts parses whole as one HTTP/1.1 request (the
 * parser takes exactly its bytes: no field smuggles a line), never longer than its buffer; every
 * stream object is freed when nghttp2 closes the stream or the session ends (ASan's leak check).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "h2_head.h"
#include "http_parse.h"

#define FUZZ_NAME "fuzz_h2_recv"
#include "fuzz_util.h"

#define HEAD_CAP 2048

typedef struct fz_stream {
    sl_h2_head head;
    char buf[HEAD_CAP];
    struct fz_stream *next;
    bool done;
} fz_stream;

static fz_stream *all; /* every stream made in this input, freed at its end */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    fz_stream *s = calloc(1, sizeof *s);
    check(s != NULL, "calloc");
    s->head.buf = s->buf;
    s->head.cap = sizeof s->buf;
    s->next = all;
    all = s;
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    fz_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!s || s->done) return 0;
    return sl_h2_head_field(&s->head, name, nl, value, vl) < 0
               ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
               : 0;
}

static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    size_t n = len < 100 ? len : 100;
    memset(buf, 'b', n);
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    fz_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!s || s->done) return 0;
    s->done = true;
    int st = sl_h2_head_end(&s->head, !(f->hd.flags & NGHTTP2_FLAG_END_STREAM));
    sl_h2_head_free(&s->head);
    check(s->head.len <= HEAD_CAP, "head longer than its buffer");
    check(st == 0 || st == 400 || st == 431, "status");
    if (st == 0) {
        sl_http_limits lim = {.max_head = HEAD_CAP, .max_line = HEAD_CAP,
                              .max_headers = SL_HTTP_MAX_HEADERS};
        static sl_http_request rq;
        int r = sl_http_parse_request(s->buf, s->head.len, &lim, &rq);
        check(r != 0, "a complete head was taken for a partial one");
        if (r > 0) check((size_t)r == s->head.len, "the head parsed as more than one request");
    }
    nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.read_callback = body_read};
    nghttp2_submit_response(ng, f->hd.stream_id, &nv, 1, st ? NULL : &prd);
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    /* Credit at once, as a module reading the body would. */
    if (nghttp2_session_consume(ng, id, len) != 0) nghttp2_session_consume_connection(ng, len);
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static nghttp2_session_callbacks *cb;
    if (!cb) {
        check(nghttp2_session_callbacks_new(&cb) == 0, "callbacks");
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    }
    if (size < 1) return 0;
    uint32_t rng = data[0] | 1u;
    bool preface = !(data[0] & 0x80);
    data++;
    size--;
    nghttp2_session *ng;
    check(sl_h2_session_new(&ng, cb, NULL, HEAD_CAP) == 0, "sl_h2_session_new");
    if (preface) {
        static const char p[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        check(nghttp2_session_mem_recv(ng, (const uint8_t *)p, 24) == 24, "preface");
    }
    size_t pos = 0;
    bool dead = false;
    while (pos < size && !dead) {
        size_t piece = 1 + rng_next(&rng) % 700;
        if (piece > size - pos) piece = size - pos;
        ssize_t r = nghttp2_session_mem_recv(ng, data + pos, piece);
        pos += piece;
        if (r < 0) {
            dead = true; /* a fatal error: the connection would send GOAWAY and close */
            break;
        }
        check((size_t)r == piece, "mem_recv took less than given");
        const uint8_t *out;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(ng, &out)) > 0)
            ;
        if (n < 0 || (!nghttp2_session_want_read(ng) && !nghttp2_session_want_write(ng)))
            dead = true;
    }
    nghttp2_session_del(ng);
    while (all) {
        fz_stream *s = all;
        all = s->next;
        sl_h2_head_free(&s->head);
        free(s);
    }
    return 0;
}
