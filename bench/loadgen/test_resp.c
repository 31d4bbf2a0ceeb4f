/* cmocka tests for the loadgen response parser (resp.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "resp.h"
#include "sum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* malloc that cannot return NULL, so the compiler (and the reader) need not consider it. */
static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) abort();
    return p;
}

/* Collects what the parser reported as body payload. */
struct body {
    char buf[1 << 16];
    size_t len;
};

static void collect(void *arg, const char *p, size_t len)
{
    struct body *b = arg;
    assert_true(b->len + len <= sizeof b->buf);
    memcpy(b->buf + b->len, p, len);
    b->len += len;
}

/* Feed msg in pieces of `step` bytes (0: all at once). Returns the total consumed or the first
 * error; stops feeding once the parser reports completion. */
static ssize_t feed_steps(struct sl_lg_resp *r, const char *msg, size_t len, size_t step,
                          struct body *b)
{
    size_t off = 0;
    if (!step) step = len ? len : 1;
    while (off < len && !sl_lg_resp_done(r)) {
        size_t n = len - off < step ? len - off : step;
        ssize_t used = sl_lg_resp_feed(r, msg + off, n, b ? collect : NULL, b);
        if (used < 0) return used;
        off += (size_t)used;
        if ((size_t)used < n) break;
    }
    return (ssize_t)off;
}

static ssize_t parse_all(struct sl_lg_resp *r, const char *msg, struct body *b)
{
    sl_lg_resp_init(r);
    return feed_steps(r, msg, strlen(msg), 0, b);
}

/* msg parses into r to its last byte (the body into b, if given). */
static void parse_whole(struct sl_lg_resp *r, const char *msg, struct body *b)
{
    ssize_t n = parse_all(r, msg, b);
    if (n != (ssize_t)strlen(msg)) fail_msg("\"%s\": %zd of %zu bytes", msg, n, strlen(msg));
}

/* msg parses into the whole response r. */
static void expect_complete(struct sl_lg_resp *r, const char *msg)
{
    if (parse_all(r, msg, NULL) <= 0 || !sl_lg_resp_done(r))
        fail_msg("\"%s\": not parsed to its end", msg);
}

/* head, then n bytes of fill, then tail, in a string on the heap (the caller frees it). */
static char *padded(const char *head, char fill, size_t n, const char *tail)
{
    size_t h = strlen(head);
    char *m = xmalloc(h + n + strlen(tail) + 1);
    memcpy(m, head, h);
    memset(m + h, fill, n);
    strcpy(m + h + n, tail);
    return m;
}

static void test_content_length_single_read(void **state)
{
    struct sl_lg_resp r;
    struct body b = {.len = 0};
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
    parse_whole(&r, m, &b);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.version_minor, 1);
    assert_int_equal(r.content_length, 5);
    assert_int_equal(r.body_bytes, 5);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.buf, "hello", 5);
    assert_true(sl_lg_resp_reusable(&r));
    assert_int_equal(sl_lg_resp_eof(&r), 0);
}

/* Every split of every message must parse exactly like the whole message. */
static void test_every_split_point_is_equivalent(void **state)
{
    const char *msgs[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n"
         "0\r\nX-Trailer: 1\r\n\r\n"),
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.0 200 OK\nContent-Length: 2\nConnection: keep-alive\n\nhi",
    };
    for (size_t m = 0; m < sizeof msgs / sizeof msgs[0]; m++) {
        struct sl_lg_resp whole;
        struct body bw = {.len = 0};
        size_t len = strlen(msgs[m]);
        assert_int_equal(parse_all(&whole, msgs[m], &bw), (ssize_t)len);
        assert_true(sl_lg_resp_done(&whole));
        for (size_t step = 1; step <= len; step++) {
            struct sl_lg_resp r;
            struct body b = {.len = 0};
            sl_lg_resp_init(&r);
            assert_int_equal(feed_steps(&r, msgs[m], len, step, &b), (ssize_t)len);
            assert_true(sl_lg_resp_done(&r));
            assert_int_equal(r.status, whole.status);
            assert_int_equal(r.body_bytes, whole.body_bytes);
            assert_int_equal(b.len, bw.len);
            assert_memory_equal(b.buf, bw.buf, b.len);
            assert_int_equal(sl_lg_resp_reusable(&r), sl_lg_resp_reusable(&whole));
        }
    }
}

static void test_http10_needs_keep_alive_to_be_reusable(void **state)
{
    struct sl_lg_resp r;
    expect_complete(&r, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert_false(sl_lg_resp_reusable(&r));
    assert_true(parse_all(&r,
                          "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                          NULL) > 0);
    assert_true(sl_lg_resp_reusable(&r));
}

static void test_connection_close_is_not_reusable(void **state)
{
    struct sl_lg_resp r;
    assert_true(parse_all(&r,
                          "HTTP/1.1 200 OK\r\nConnection: foo, CLOSE\r\nContent-Length: 0\r\n\r\n",
                          NULL) > 0);
    assert_true(r.conn_close);
    assert_false(sl_lg_resp_reusable(&r));
}

static void test_read_until_close(void **state)
{
    struct sl_lg_resp r;
    struct body b = {.len = 0};
    const char *m = "HTTP/1.1 200 OK\r\n\r\nsome body bytes";
    parse_whole(&r, m, &b);
    assert_true(sl_lg_resp_headers_done(&r));
    assert_false(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 15);
    assert_int_equal(sl_lg_resp_eof(&r), 0);
    assert_true(sl_lg_resp_done(&r));
    assert_false(sl_lg_resp_reusable(&r));
}

static void test_chunked_body_and_surplus(void **state)
{
    struct sl_lg_resp r;
    struct body b = {.len = 0};
    const char *m = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "A\r\n0123456789\r\n1 ; a=b\r\nX\r\n0\r\n\r\nGARBAGE";
    ssize_t used = parse_all(&r, m, &b);
    assert_int_equal(used, (ssize_t)strlen(m) - 7);
    assert_true(sl_lg_resp_done(&r));
    assert_true(r.chunked);
    assert_int_equal(r.body_bytes, 11);
    assert_memory_equal(b.buf, "0123456789X", 11);
    assert_true(sl_lg_resp_reusable(&r));
}

static void test_chunked_bare_lf(void **state)
{
    struct sl_lg_resp r;
    struct body b = {.len = 0};
    const char *m = "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n";
    parse_whole(&r, m, &b);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 3);
}

static void sum_body(void *arg, const char *p, size_t len)
{
    sl_lg_sum_update(arg, p, len);
}

static void test_chunked_checksum_matches_payload(void **state)
{
    struct sl_lg_resp r;
    struct sl_lg_sum in_parser, direct;
    sl_lg_sum_init(&in_parser);
    sl_lg_sum_init(&direct);
    sl_lg_resp_init(&r);
    const char *m = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "7\r\nabcdefg\r\n9\r\nhijklmnop\r\n0\r\n\r\n";
    for (size_t i = 0; i < strlen(m); i++) {
        ssize_t used = sl_lg_resp_feed(&r, m + i, 1, sum_body, &in_parser);
        assert_int_equal(used, 1);
    }
    sl_lg_sum_update(&direct, "abcdefghijklmnop", 16);
    assert_true(sl_lg_resp_done(&r));
    assert_true(sl_lg_sum_final(&in_parser) == sl_lg_sum_final(&direct));
}

static void expect_error(const char *m, ssize_t err)
{
    struct sl_lg_resp r;
    assert_int_equal(parse_all(&r, m, NULL), err);
    /* After an error the parser stays failed. */
    assert_int_equal(sl_lg_resp_feed(&r, "x", 1, NULL, NULL), -EBADMSG);
}

/* Responses the parser must refuse, with the error. */
static const struct {
    const char *msg;
    ssize_t err;
} refused[] = {
    /* Status lines. */
    {"HTTP/2.0 200 OK\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 20 OK\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 2000 OK\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 099 Low\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200OK\r\n\r\n", -EBADMSG},
    {"ICY 200 OK\r\n\r\n", -EBADMSG},
    {"http/1.1 200 OK\r\n\r\n", -EBADMSG},
    {"\r\nHTTP/1.1 200 OK\r\n\r\n", -EBADMSG},
    {"HTTP/1.x 200 OK\r\n\r\n", -EBADMSG},
    /* Field syntax. */
    {"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nBad\"Name: x\r\n\r\n", -EBADMSG},
    /* A folded line (obs-fold) of a field the framing depends on. */
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 2\r\n\r\n", -EBADMSG},
    /* Content-Length values. */
    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\r\n\r\n", -EBADMSG},
    /* chunked must be the last transfer coding, once. */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n", -EBADMSG},
    /* 101 is no interim response loadgen can go on after. */
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", -EBADMSG},
    /* A chunk size that overflows. */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n", -EBADMSG},
    /* Chunk framing. */
    /* no digits */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n", -EBADMSG},
    /* junk after the size */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 x\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3g\r\n", -EBADMSG},
    /* CR not followed by LF */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\rabc", -EBADMSG},
    /* payload not followed by CRLF */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", -EBADMSG},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX", -EBADMSG},
    /* last-chunk's final CR without LF */
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rX", -EBADMSG},
};

static void test_refused(void **state)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct sl_lg_resp r;
        ssize_t got = parse_all(&r, refused[i].msg, NULL);
        if (got != refused[i].err)
            fail_msg("\"%s\": %zd, want %zd", refused[i].msg, got, refused[i].err);
        /* After an error the parser stays failed. */
        assert_int_equal(sl_lg_resp_feed(&r, "x", 1, NULL, NULL), -EBADMSG);
    }
}

static void test_chunk_size_leading_zeros_ok(void **state)
{
    struct sl_lg_resp r;
    const char *m = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "00000000000000000000003\r\nabc\r\n0\r\n\r\n";
    parse_whole(&r, m, NULL);
    assert_int_equal(r.body_bytes, 3);
}

static void test_chunk_extension_too_long(void **state)
{
    char *m = padded("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;", 'e',
                     SL_LG_RESP_CHUNK_LINE_MAX + 100, "");
    expect_error(m, -EMSGSIZE);
    free(m);
}

static void test_trailer_too_long(void **state)
{
    char *m = padded("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: ", 't',
                     SL_LG_RESP_CHUNK_LINE_MAX + 100, "");
    expect_error(m, -EMSGSIZE);
    free(m);
}

static void test_transfer_encoding_beats_content_length(void **state)
{
    struct sl_lg_resp r;
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2\r\nab\r\n0\r\n\r\n";
    parse_whole(&r, m, NULL);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 2);
    assert_int_equal(r.content_length, -1);
    /* a message that carried both is not trusted with another request */
    assert_false(sl_lg_resp_reusable(&r));
}

static void test_transfer_encoding_not_chunked_reads_to_close(void **state)
{
    struct sl_lg_resp r;
    assert_true(parse_all(&r, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz", NULL) > 0);
    assert_false(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 3);
    assert_int_equal(sl_lg_resp_eof(&r), 0);
    assert_false(sl_lg_resp_reusable(&r));
}

static void test_transfer_encoding_list_across_headers(void **state)
{
    struct sl_lg_resp r;
    const char *m =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: ,CHUNKED;q=1\r\n\r\n"
        "1\r\nz\r\n0\r\n\r\n";
    parse_whole(&r, m, NULL);
    assert_true(r.chunked);
    assert_int_equal(r.body_bytes, 1);
}

static void test_content_length_values(void **state)
{
    struct sl_lg_resp r;
    expect_complete(&r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab");
    expect_complete(&r, "HTTP/1.1 200 OK\r\nContent-Length: 2 , 2\r\n\r\nab");
    expect_complete(&r, "HTTP/1.1 200 OK\r\nContent-Length:\t0\t\r\n\r\n");
}

static void test_obs_fold(void **state)
{
    struct sl_lg_resp r;
    expect_complete(&r, "HTTP/1.1 200 OK\r\nX-A: 1\r\n continued\r\nContent-Length: 0\r\n\r\n");
}

static void test_long_lines(void **state)
{
    size_t n = SL_LG_RESP_LINE_MAX * 3;
    struct sl_lg_resp r;
    /* a long header we ignore is fine */
    char *m = padded("HTTP/1.1 200 OK\r\nX-Long: ", 'a', n, "\r\nContent-Length: 1\r\n\r\nz");
    parse_whole(&r, m, NULL);
    assert_true(sl_lg_resp_done(&r));
    free(m);
    /* a long name we ignore, even without a colon in the kept prefix */
    m = padded("HTTP/1.1 200 OK\r\n", 'N', n, ": v\r\nContent-Length: 0\r\n\r\n");
    parse_whole(&r, m, NULL);
    assert_true(sl_lg_resp_done(&r));
    free(m);
    /* but a header the framing depends on must fit */
    m = padded("HTTP/1.1 200 OK\r\nConnection: ", 'c', n, "\r\n\r\n");
    expect_error(m, -EMSGSIZE);
    free(m);
    /* a long reason phrase is fine */
    m = padded("HTTP/1.1 404 ", 'r', n, "\r\nContent-Length: 0\r\n\r\n");
    parse_whole(&r, m, NULL);
    assert_int_equal(r.status, 404);
    free(m);
}

static void test_header_section_limit(void **state)
{
    size_t n = SL_LG_RESP_HEADERS_MAX + 10;
    char *m = xmalloc(n + 64);
    strcpy(m, "HTTP/1.1 200 OK\r\n");
    size_t o = strlen(m);
    while (o < n) {
        memcpy(m + o, "X-Pad: 0123456789\r\n", 19);
        o += 19;
    }
    m[o] = '\0';
    expect_error(m, -EMSGSIZE);
    free(m);
}

static void test_status_without_reason(void **state)
{
    struct sl_lg_resp r;
    expect_complete(&r, "HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n");
    assert_int_equal(r.status, 503);
}

static void test_interim_responses(void **state)
{
    struct sl_lg_resp r;
    const char *m = "HTTP/1.1 100 Continue\r\nContent-Length: 99\r\n\r\n"
                    "HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nq";
    parse_whole(&r, m, NULL);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_bytes, 1);
}

static void test_bodiless_statuses(void **state)
{
    struct sl_lg_resp r;
    const char *m = "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\nHTTP/1.1";
    assert_int_equal(parse_all(&r, m, NULL), (ssize_t)strlen(m) - 8);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 0);
    assert_true(sl_lg_resp_reusable(&r));
    expect_complete(&r, "HTTP/1.1 204 No Content\r\n\r\n");
    expect_complete(&r, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

static void test_eof_results(void **state)
{
    struct sl_lg_resp r;
    sl_lg_resp_init(&r);
    assert_int_equal(sl_lg_resp_eof(&r), -EPROTO);
    assert_true(parse_all(&r, "HTTP/1.1 200 OK\r\nContent-Le", NULL) > 0);
    assert_int_equal(sl_lg_resp_eof(&r), -EPROTO);
    assert_true(parse_all(&r, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", NULL) > 0);
    assert_true(sl_lg_resp_headers_done(&r));
    assert_int_equal(r.body_bytes, 3);
    assert_int_equal(sl_lg_resp_eof(&r), -EPIPE);
    assert_true(
        parse_all(&r, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", NULL) > 0);
    assert_int_equal(sl_lg_resp_eof(&r), -EPIPE);
    /* cut between the last chunk and the end of the trailer section */
    assert_true(parse_all(&r, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", NULL) >
                0);
    assert_int_equal(sl_lg_resp_eof(&r), -EPIPE);
}

static void test_feed_after_done_consumes_nothing(void **state)
{
    struct sl_lg_resp r;
    assert_true(parse_all(&r, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", NULL) > 0);
    assert_int_equal(sl_lg_resp_feed(&r, "HTTP/1.1 200", 12, NULL, NULL), 0);
}

static void test_header_bytes_counted(void **state)
{
    struct sl_lg_resp r;
    const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
    char m[128];
    snprintf(m, sizeof m, "%sab", head);
    parse_whole(&r, m, NULL);
    assert_int_equal(r.header_bytes, strlen(head));
}

static void test_skip_content_length(void **state)
{
    struct sl_lg_resp r;
    bool last = false;
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nabc";
    sl_lg_resp_init(&r);
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 0); /* status line first */
    assert_int_equal(sl_lg_resp_feed(&r, m, strlen(m), NULL, NULL), (ssize_t)strlen(m));
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 100000 - 3);
    assert_true(last);
    sl_lg_resp_skip(&r, 50000);
    assert_false(sl_lg_resp_done(&r));
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 100000 - 3 - 50000);
    sl_lg_resp_skip(&r, 100000 - 3 - 50000);
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 100000);
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 0);
    assert_false(last);
    assert_true(sl_lg_resp_reusable(&r));
    /* nothing more is part of the message */
    assert_int_equal(sl_lg_resp_feed(&r, "x", 1, NULL, NULL), 0);
}

static void test_skip_chunked_payload_only(void **state)
{
    struct sl_lg_resp r;
    bool last = true;
    const char *h = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r";
    sl_lg_resp_init(&r);
    assert_int_equal(sl_lg_resp_feed(&r, h, strlen(h), NULL, NULL), (ssize_t)strlen(h));
    /* inside the size line: the parser must see the LF */
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 0);
    assert_int_equal(sl_lg_resp_feed(&r, "\n", 1, NULL, NULL), 1);
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 0x1000);
    assert_false(last); /* CRLF and more chunks follow */
    sl_lg_resp_skip(&r, 0x1000);
    assert_int_equal(sl_lg_resp_skippable(&r, &last), 0);
    const char *t = "\r\n3\r\nxyz\r\n0\r\n\r\n";
    assert_int_equal(sl_lg_resp_feed(&r, t, strlen(t), NULL, NULL), (ssize_t)strlen(t));
    assert_true(sl_lg_resp_done(&r));
    assert_int_equal(r.body_bytes, 0x1000 + 3);
}

static void test_skip_until_close(void **state)
{
    struct sl_lg_resp r;
    bool last = true;
    const char *m = "HTTP/1.0 200 OK\r\n\r\n";
    sl_lg_resp_init(&r);
    assert_int_equal(sl_lg_resp_feed(&r, m, strlen(m), NULL, NULL), (ssize_t)strlen(m));
    assert_int_equal(sl_lg_resp_skippable(&r, &last), UINT64_MAX);
    assert_false(last);
    sl_lg_resp_skip(&r, 12345);
    assert_int_equal(sl_lg_resp_skippable(&r, &last), UINT64_MAX);
    assert_false(sl_lg_resp_done(&r));
    assert_int_equal(sl_lg_resp_eof(&r), 0);
    assert_int_equal(r.body_bytes, 12345);
    assert_false(sl_lg_resp_reusable(&r));
}

/* Skipping whatever may be skipped and feeding the rest, at every split point, counts exactly
 * what feeding everything counts. */
static void test_skip_and_feed_agree(void **state)
{
    const char *msgs[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n0123456789012345678901234567890123456789",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "a;x=y\r\n0123456789\r\n14\r\n01234567890123456789\r\n0\r\nT: 1\r\n\r\n",
    };
    for (size_t k = 0; k < sizeof msgs / sizeof msgs[0]; k++) {
        const char *m = msgs[k];
        size_t len = strlen(m);
        struct sl_lg_resp whole;
        assert_int_equal(parse_all(&whole, m, NULL), (ssize_t)len);
        for (size_t step = 1; step <= len; step++) {
            struct sl_lg_resp r;
            sl_lg_resp_init(&r);
            size_t off = 0;
            while (off < len && !sl_lg_resp_done(&r)) {
                bool last;
                uint64_t skip = sl_lg_resp_skippable(&r, &last);
                size_t n = len - off < step ? len - off : step;
                if (skip) {
                    if (n > skip) n = (size_t)skip;
                    sl_lg_resp_skip(&r, n);
                    off += n;
                    continue;
                }
                ssize_t used = sl_lg_resp_feed(&r, m + off, n, NULL, NULL);
                assert_true(used > 0);
                off += (size_t)used;
            }
            assert_int_equal(off, len);
            assert_true(sl_lg_resp_done(&r));
            assert_int_equal(r.body_bytes, whole.body_bytes);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length_single_read),
        cmocka_unit_test(test_every_split_point_is_equivalent),
        cmocka_unit_test(test_http10_needs_keep_alive_to_be_reusable),
        cmocka_unit_test(test_connection_close_is_not_reusable),
        cmocka_unit_test(test_read_until_close),
        cmocka_unit_test(test_chunked_body_and_surplus),
        cmocka_unit_test(test_chunked_bare_lf),
        cmocka_unit_test(test_chunked_checksum_matches_payload),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_chunk_size_leading_zeros_ok),
        cmocka_unit_test(test_chunk_extension_too_long),
        cmocka_unit_test(test_trailer_too_long),
        cmocka_unit_test(test_transfer_encoding_beats_content_length),
        cmocka_unit_test(test_transfer_encoding_not_chunked_reads_to_close),
        cmocka_unit_test(test_transfer_encoding_list_across_headers),
        cmocka_unit_test(test_content_length_values),
        cmocka_unit_test(test_obs_fold),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_header_section_limit),
        cmocka_unit_test(test_status_without_reason),
        cmocka_unit_test(test_interim_responses),
        cmocka_unit_test(test_bodiless_statuses),
        cmocka_unit_test(test_eof_results),
        cmocka_unit_test(test_feed_after_done_consumes_nothing),
        cmocka_unit_test(test_header_bytes_counted),
        cmocka_unit_test(test_skip_content_length),
        cmocka_unit_test(test_skip_chunked_payload_only),
        cmocka_unit_test(test_skip_until_close),
        cmocka_unit_test(test_skip_and_feed_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
