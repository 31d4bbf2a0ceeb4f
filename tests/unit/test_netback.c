/* Network backends: the synchronous core every asynchronous backend shares (block reads), the
 * page-cache probe the hybrid backend decides with, and the backend registry. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "netback.h"

static char path[] = "/var/tmp/sl_test_netback_XXXXXX";
static int fd = -1;
enum { SIZE = 3 * 65536 + 123 };
static unsigned char data[SIZE];

static int setup(void **state)
{
    for (size_t i = 0; i < SIZE; i++) data[i] = (unsigned char)(i * 7 + i / 251);
    fd = mkstemp(path);
    if (fd < 0) return -1;
    if (write(fd, data, SIZE) != SIZE) return -1;
    fsync(fd);
    return 0;
}

static int teardown(void **state)
{
    close(fd);
    unlink(path);
    return 0;
}

static void test_sync_read_whole_block(void **state)
{
    char buf[8192];
    sl_fileread rd = {.fd = fd, .off = 100, .len = 5000, .buf = buf, .cap = sizeof buf};
    sl_fileread_sync(&rd);
    assert_int_equal(rd.res, 5000);
    assert_memory_equal(buf, data + 100, 5000);
}

static void test_sync_read_stops_at_eof(void **state)
{
    char buf[8192];
    sl_fileread rd = {.fd = fd, .off = SIZE - 10, .len = 4096, .buf = buf, .cap = sizeof buf};
    sl_fileread_sync(&rd);
    assert_int_equal(rd.res, 10);
    assert_memory_equal(buf, data + SIZE - 10, 10);
    rd.off = SIZE;
    sl_fileread_sync(&rd);
    assert_int_equal(rd.res, 0); /* the driver turns this into -ENODATA: the file shrank */
}

static void test_sync_read_honours_skip(void **state)
{
    char buf[8192];
    sl_fileread rd = {.fd = fd, .off = 7, .len = 100, .buf = buf, .cap = sizeof buf, .skip = 7};
    sl_fileread_sync(&rd);
    assert_int_equal(rd.res, 100);
    assert_memory_equal(buf + 7, data + 7, 100);
}

static void test_sync_read_reports_errno(void **state)
{
    char buf[64];
    int wfd = open("/dev/null", O_WRONLY);
    sl_fileread rd = {.fd = wfd, .off = 0, .len = 10, .buf = buf, .cap = sizeof buf};
    sl_fileread_sync(&rd);
    assert_int_equal(rd.res, -EBADF);
    close(wfd);
}

static void test_page_cache_probe(void **state)
{
    int r = sl_page_cache_resident(fd, 0, SIZE);
    if (r == -ENOSYS) skip(); /* kernel before 6.5: the hybrid backend uses RWF_NOWAIT */
    /* Evict: written back above, so DONTNEED drops the pages. */
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    assert_int_equal(sl_page_cache_resident(fd, 0, SIZE), 0);
    char buf[4096];
    assert_int_equal(pread(fd, buf, sizeof buf, 65536), (ssize_t)sizeof buf);
    /* Readahead may have brought more in, but the first page is still out... */
    assert_int_equal(sl_page_cache_resident(fd, 0, 4096), 0);
    /* ...and what was read is in. An unaligned range counts every page it touches. */
    assert_int_equal(sl_page_cache_resident(fd, 65536 + 10, 4000), 1);
    assert_int_equal(sl_page_cache_resident(fd, 0, 0), 1);
}

static void test_registry(void **state)
{
    assert_non_null(sl_netbackends[0]);
    assert_string_equal(sl_netbackends[0]->name, SL_NETBACK_DEFAULT);
    const char *must[] = {"hybrid", "linux-sendfile", "writev", "gthread-aio", "posix-aio"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        const sl_netbackend *b = sl_netback_find(must[i]);
        assert_non_null(b);
        assert_string_equal(b->name, must[i]);
        if (b->kind == SL_NB_ASYNC || b->kind == SL_NB_HYBRID) assert_non_null(b->submit);
    }
    assert_null(sl_netback_find("linux-sendfile2"));
    assert_null(sl_netback_find(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_read_whole_block),
        cmocka_unit_test(test_sync_read_stops_at_eof),
        cmocka_unit_test(test_sync_read_honours_skip),
        cmocka_unit_test(test_sync_read_reports_errno),
        cmocka_unit_test(test_page_cache_probe),
        cmocka_unit_test(test_registry),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
