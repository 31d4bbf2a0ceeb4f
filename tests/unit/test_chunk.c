/* Unit tests for the output chunk queue: memory gathering, file ranges, budget, truncation. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "chunk.h"

/* A connected, non-blocking socket pair (sv[0] is written to), a file (file, or -1) and a queue,
 * made before each test and closed and cleared after it. */
struct fx {
    int sv[2];
    int file;
    sl_chunkq q;
};

static int fx_open(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f->sv) != 0)
        return -1;
    f->file = -1;
    *state = f;
    return 0;
}

static int fx_close(void **state)
{
    struct fx *f = *state;
    sl_chunkq_clear(&f->q);
    if (f->file >= 0) close(f->file);
    for (int i = 0; i < 2; i++)
        if (f->sv[i] >= 0) close(f->sv[i]);
    free(f);
    return 0;
}

/* The fixture's file, holding data[0..n). */
static int tmp_file(struct fx *f, const char *data, size_t n)
{
    char path[] = "/tmp/sl_chunk_XXXXXX";
    f->file = mkstemp(path);
    assert_true(f->file >= 0);
    unlink(path);
    assert_int_equal(write(f->file, data, n), (ssize_t)n);
    return f->file;
}

static size_t drain(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    ssize_t n;
    while (got < cap && (n = recv(fd, buf + got, cap - got, MSG_DONTWAIT)) > 0) got += (size_t)n;
    return got;
}

static void test_mem_and_file_in_order(void **state)
{
    struct fx *f = *state;
    int fd = tmp_file(f, "0123456789", 10);
    assert_int_equal(sl_chunkq_append_mem(&f->q, "head:", 5), 0);
    assert_int_equal(sl_chunkq_append_file(&f->q, fd, 2, 5), 0);
    assert_int_equal(sl_chunkq_printf(&f->q, ":%d", 42), 0);
    assert_int_equal(sl_chunkq_length(&f->q), 5 + 5 + 3);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&f->q, f->sv[0], 1 << 20, &sent), 0);
    assert_int_equal(sent, 13);
    assert_null(f->q.head);
    char buf[64] = {0};
    assert_int_equal(drain(f->sv[1], buf, sizeof buf), 13);
    assert_string_equal(buf, "head:23456:42");
}

static void test_zero_length_file_chunk_is_skipped(void **state)
{
    sl_chunkq q = {0};
    assert_int_equal(sl_chunkq_append_file(&q, 0, 0, 0), 0);
    assert_null(q.head);
}

static void test_budget_stops_early(void **state)
{
    struct fx *f = *state;
    static char data[8192];
    memset(data, 'x', sizeof data);
    sl_chunkq_append_file(&f->q, tmp_file(f, data, sizeof data), 0, sizeof data);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&f->q, f->sv[0], 1000, &sent), 1);
    assert_int_equal(sent, 1000);
    assert_int_equal(sl_chunkq_length(&f->q), sizeof data - 1000);
}

static void test_truncated_file_reports_enodata(void **state)
{
    struct fx *f = *state;
    sl_chunkq_append_file(&f->q, tmp_file(f, "abcdef", 6), 0, 6);
    assert_int_equal(ftruncate(f->file, 3), 0);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&f->q, f->sv[0], 1 << 20, &sent), -ENODATA);
    assert_int_equal(sent, 3);
}

static void test_would_block_returns_one(void **state)
{
    struct fx *f = *state;
    int small = 4096;
    setsockopt(f->sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t big = 4 << 20;
    char *data = calloc(1, big);
    assert_non_null(data);
    assert_int_equal(sl_chunkq_append_mem(&f->q, data, big), 0);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&f->q, f->sv[0], big, &sent), 1);
    assert_true(sent < big);
    assert_int_equal(sl_chunkq_length(&f->q), big - sent);
    free(data);
}

static void test_peer_closed_is_an_error(void **state)
{
    struct fx *f = *state;
    close(f->sv[1]);
    f->sv[1] = -1;
    sl_chunkq_append_mem(&f->q, "x", 1);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&f->q, f->sv[0], 100, &sent), -EPIPE);
}

/* A head and the first bytes of the file chunk behind it (read into a buffer by the caller) leave
 * in one sendmsg: the head is popped, the file chunk stays for the caller to advance, and a
 * budget or a queue with no file chunk next cuts the tail. */
static void test_head_and_file_bytes_leave_together(void **state)
{
    struct fx *f = *state;
    sl_chunkq_append_mem(&f->q, "HEAD\r\n", 6);
    sl_chunkq_append_mem(&f->q, "\r\n", 2);
    sl_chunkq_append_file(&f->q, tmp_file(f, "bodybytes", 9), 0, 9);
    uint64_t sent = 0;
    size_t done = 0, went = 99;
    assert_int_equal(sl_chunkq_write_mem_tail(&f->q, f->sv[0], 1 << 20, &sent, &done, "bodyby", 6,
                                              true, &went),
                     0);
    assert_int_equal(went, 6);
    assert_int_equal(sent, 14);
    assert_int_equal(done, 14);
    assert_true(f->q.head && f->q.head->fd == f->file); /* the file chunk, untouched */
    assert_int_equal(f->q.head->off, 0);
    char got[64];
    assert_int_equal(drain(f->sv[1], got, sizeof got), 14);
    assert_memory_equal(got, "HEAD\r\n\r\nbodyby", 14);

    /* A budget that ends inside the tail. */
    sl_chunkq_clear(&f->q);
    sl_chunkq_append_mem(&f->q, "HEAD", 4);
    sl_chunkq_append_file(&f->q, f->file, 0, 9);
    sent = done = 0;
    assert_int_equal(sl_chunkq_write_mem_tail(&f->q, f->sv[0], 6, &sent, &done, "bodyby", 6, true,
                                              &went),
                     0);
    assert_int_equal(went, 2);
    assert_int_equal(sent, 6);
    assert_int_equal(drain(f->sv[1], got, sizeof got), 6);
    assert_memory_equal(got, "HEADbo", 6);

    /* Memory only (no file chunk next): the tail is not the queue's and stays. */
    sl_chunkq_clear(&f->q);
    sl_chunkq_append_mem(&f->q, "ONLY", 4);
    sent = done = 0;
    assert_int_equal(sl_chunkq_write_mem_tail(&f->q, f->sv[0], 1 << 20, &sent, &done, "xx", 2,
                                              false, &went),
                     0);
    assert_int_equal(went, 0);
    assert_int_equal(sent, 4);
    assert_null(f->q.head);
    assert_int_equal(drain(f->sv[1], got, sizeof got), 4);
}

/* A test given a fresh fixture as its state. */
#define FX_TEST(test) cmocka_unit_test_setup_teardown(test, fx_open, fx_close)

TU_MAIN(NULL, NULL,
        FX_TEST(test_mem_and_file_in_order),
        cmocka_unit_test(test_zero_length_file_chunk_is_skipped),
        FX_TEST(test_budget_stops_early),
        FX_TEST(test_truncated_file_reports_enodata),
        FX_TEST(test_would_block_returns_one),
        FX_TEST(test_peer_closed_is_an_error),
        FX_TEST(test_head_and_file_bytes_leave_together))
