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

static int tmp_file(const char *data, size_t n)
{
    char path[] = "/tmp/sl_chunk_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    return fd;
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
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    int f = tmp_file("0123456789", 10);
    sl_chunkq q = {0};
    assert_int_equal(sl_chunkq_append_mem(&q, "head:", 5), 0);
    assert_int_equal(sl_chunkq_append_file(&q, f, 2, 5), 0);
    assert_int_equal(sl_chunkq_printf(&q, ":%d", 42), 0);
    assert_int_equal(sl_chunkq_length(&q), 5 + 5 + 3);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&q, sv[0], 1 << 20, &sent), 0);
    assert_int_equal(sent, 13);
    assert_null(q.head);
    char buf[64] = {0};
    assert_int_equal(drain(sv[1], buf, sizeof buf), 13);
    assert_string_equal(buf, "head:23456:42");
    close(f);
    close(sv[0]);
    close(sv[1]);
}

static void test_zero_length_file_chunk_is_skipped(void **state)
{
    sl_chunkq q = {0};
    assert_int_equal(sl_chunkq_append_file(&q, 0, 0, 0), 0);
    assert_null(q.head);
}

static void test_budget_stops_early(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    static char data[8192];
    memset(data, 'x', sizeof data);
    int f = tmp_file(data, sizeof data);
    sl_chunkq q = {0};
    sl_chunkq_append_file(&q, f, 0, sizeof data);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&q, sv[0], 1000, &sent), 1);
    assert_int_equal(sent, 1000);
    assert_int_equal(sl_chunkq_length(&q), sizeof data - 1000);
    sl_chunkq_clear(&q);
    close(f);
    close(sv[0]);
    close(sv[1]);
}

static void test_truncated_file_reports_enodata(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    int f = tmp_file("abcdef", 6);
    sl_chunkq q = {0};
    sl_chunkq_append_file(&q, f, 0, 6);
    assert_int_equal(ftruncate(f, 3), 0);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&q, sv[0], 1 << 20, &sent), -ENODATA);
    assert_int_equal(sent, 3);
    sl_chunkq_clear(&q);
    close(f);
    close(sv[0]);
    close(sv[1]);
}

static void test_would_block_returns_one(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t big = 4 << 20;
    char *data = calloc(1, big);
    assert_non_null(data);
    sl_chunkq q = {0};
    assert_int_equal(sl_chunkq_append_mem(&q, data, big), 0);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&q, sv[0], big, &sent), 1);
    assert_true(sent < big);
    assert_int_equal(sl_chunkq_length(&q), big - sent);
    sl_chunkq_clear(&q);
    free(data);
    close(sv[0]);
    close(sv[1]);
}

static void test_peer_closed_is_an_error(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    close(sv[1]);
    sl_chunkq q = {0};
    sl_chunkq_append_mem(&q, "x", 1);
    uint64_t sent = 0;
    assert_int_equal(sl_chunkq_write(&q, sv[0], 100, &sent), -EPIPE);
    sl_chunkq_clear(&q);
    close(sv[0]);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_mem_and_file_in_order),
        cmocka_unit_test(test_zero_length_file_chunk_is_skipped),
        cmocka_unit_test(test_budget_stops_early),
        cmocka_unit_test(test_truncated_file_reports_enodata),
        cmocka_unit_test(test_would_block_returns_one),
        cmocka_unit_test(test_peer_closed_is_an_error))
