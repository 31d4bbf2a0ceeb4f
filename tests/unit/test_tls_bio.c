/* The gathering write BIO (server/tls_bio.c) on a real non-blocking socket pair: writes wait in
 * the buffer until it overflows or its owner sends (OpenSSL's BIO_flush sends nothing), an
 * overflow sends the buffer and the new bytes in
 * one call, a full socket keeps what it can and asks for a retry, and nothing is lost or
 * reordered on the way. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "tls_bio.h"

typedef struct pair {
    int w, r; /* the BIO writes on w; the test reads on r */
    BIO *b;
} pair;

static int setup(void **state)
{
    pair *p = calloc(1, sizeof *p);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    p->w = sv[0];
    p->r = sv[1];
    /* A small send buffer, so the socket fills before a few records have gone. */
    int sz = 4096;
    assert_int_equal(setsockopt(p->w, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz), 0);
    fcntl(p->w, F_SETFL, O_NONBLOCK);
    fcntl(p->r, F_SETFL, O_NONBLOCK);
    p->b = sl_tls_gather_bio(p->w);
    assert_non_null(p->b);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair *p = *state;
    BIO_free(p->b);
    close(p->w);
    close(p->r);
    free(p);
    return 0;
}

/* Bytes waiting on the reading side (all of them, up to cap), -1 if none. */
static ssize_t drain(pair *p, unsigned char *out, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(p->r, out + got, cap - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    return got ? (ssize_t)got : -1;
}

/* A pattern byte for stream position i, so order and loss both show. */
static unsigned char pat(size_t i)
{
    return (unsigned char)(i * 7 + i / 251);
}

static void fill(unsigned char *buf, size_t from, size_t n)
{
    for (size_t i = 0; i < n; i++) buf[i] = pat(from + i);
}

static void test_small_writes_wait_until_the_owner_sends(void **state)
{
    pair *p = *state;
    unsigned char in[1000], out[4096];
    fill(in, 0, sizeof in);
    assert_int_equal(BIO_write(p->b, in, 600), 600);
    assert_int_equal(BIO_write(p->b, in + 600, 400), 400);
    assert_int_equal(BIO_wpending(p->b), 1000);
    assert_int_equal(drain(p, out, sizeof out), -1); /* nothing sent yet */
    /* OpenSSL flushes after each handshake flight and ticket: that sends nothing. */
    assert_int_equal(BIO_flush(p->b), 1);
    assert_int_equal(BIO_wpending(p->b), 1000);
    assert_int_equal(drain(p, out, sizeof out), -1);
    assert_int_equal(sl_tls_gather_send(p->b), 1);
    assert_int_equal(BIO_wpending(p->b), 0);
    assert_int_equal(drain(p, out, sizeof out), 1000);
    assert_memory_equal(out, in, 1000);
}

static void test_an_overflow_and_a_full_socket_lose_nothing(void **state)
{
    pair *p = *state;
    enum { REC = 16406, TOTAL = 40 * REC };
    unsigned char *in = malloc(TOTAL), *out = malloc(TOTAL);
    fill(in, 0, TOTAL);
    size_t put = 0, got = 0;
    int retries = 0;
    /* Records written as OpenSSL would (a retry passes the rest of the same record), the
     * reader draining only when the writer is told to retry: the socket is full each time. */
    while (put < TOTAL) {
        size_t n = TOTAL - put < REC ? TOTAL - put : REC;
        int w = BIO_write(p->b, in + put, (int)n);
        if (w > 0) {
            put += (size_t)w;
            continue;
        }
        assert_true(BIO_should_retry(p->b));
        assert_true(BIO_should_write(p->b));
        retries++;
        ssize_t d = drain(p, out + got, TOTAL - got);
        assert_true(d > 0);
        got += (size_t)d;
    }
    assert_true(retries > 0);
    /* The buffer never holds more than its size. */
    assert_true(BIO_wpending(p->b) <= SL_TLS_GATHER_CAP);
    while (sl_tls_gather_send(p->b) <= 0) {
        assert_true(BIO_should_retry(p->b));
        ssize_t d = drain(p, out + got, TOTAL - got);
        assert_true(d > 0);
        got += (size_t)d;
    }
    ssize_t d = drain(p, out + got, TOTAL - got);
    if (d > 0) got += (size_t)d;
    assert_int_equal(got, TOTAL);
    assert_memory_equal(out, in, TOTAL);
    free(in);
    free(out);
}

static void test_one_overflow_sends_buffer_and_record_together(void **state)
{
    pair *p = *state;
    /* A roomy socket for this one: the overflowing write must empty the buffer in one go. */
    int sz = 1 << 20;
    assert_int_equal(setsockopt(p->w, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz), 0);
    enum { REC = 16406 };
    unsigned char *in = malloc(5 * REC), *out = malloc(5 * REC);
    fill(in, 0, 5 * REC);
    for (int i = 0; i < 3; i++) assert_int_equal(BIO_write(p->b, in + i * REC, REC), REC);
    assert_int_equal(BIO_wpending(p->b), 3 * REC);
    assert_int_equal(drain(p, out, 5 * REC), -1);
    /* The fourth does not fit: all four leave now, nothing stays behind. */
    assert_int_equal(BIO_write(p->b, in + 3 * REC, REC), REC);
    assert_int_equal(BIO_wpending(p->b), 0);
    assert_int_equal(drain(p, out, 5 * REC), 4 * REC);
    assert_memory_equal(out, in, 4 * REC);
    free(in);
    free(out);
}

static void test_a_closed_peer_is_an_error_not_a_retry(void **state)
{
    pair *p = *state;
    unsigned char in[100] = {0};
    assert_int_equal(BIO_write(p->b, in, sizeof in), (int)sizeof in);
    close(p->r);
    p->r = open("/dev/null", O_RDONLY); /* teardown closes it */
    errno = 0;
    assert_true(sl_tls_gather_send(p->b) <= 0);
    assert_false(BIO_should_retry(p->b));
    assert_int_equal(errno, EPIPE);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test_setup_teardown(test_small_writes_wait_until_the_owner_sends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_overflow_and_a_full_socket_lose_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_one_overflow_sends_buffer_and_record_together, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_closed_peer_is_an_error_not_a_retry, setup,
                                        teardown))
