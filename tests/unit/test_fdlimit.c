/* Unit tests for sl_fd_limit_plan (server/core_conf.c): what RLIMIT_NOFILE becomes for
 * server.max-fds, for root and for others. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "testutil.h"

#include "core_conf.h"

static void test_plan(void **state)
{
    (void)state;
    unsigned long long c, m;
    /* Not set: the soft limit goes up to the hard one, for anyone. */
    assert_int_equal(sl_fd_limit_plan(0, 1024, 4096, 0, &c, &m), 0);
    assert_true(c == 4096 && m == 4096);
    /* Below or at the hard limit: the soft limit is it (also lower than before). */
    assert_int_equal(sl_fd_limit_plan(2048, 1024, 4096, 0, &c, &m), 0);
    assert_true(c == 2048 && m == 4096);
    assert_int_equal(sl_fd_limit_plan(512, 1024, 4096, 0, &c, &m), 0);
    assert_true(c == 512 && m == 4096);
    assert_int_equal(sl_fd_limit_plan(4096, 1024, 4096, 0, &c, &m), 0);
    assert_true(c == 4096 && m == 4096);
    /* Above it: only root raises the hard limit; it never lowers it. */
    assert_int_equal(sl_fd_limit_plan(8192, 1024, 4096, 0, &c, &m), -EPERM);
    assert_int_equal(sl_fd_limit_plan(8192, 1024, 4096, 1, &c, &m), 0);
    assert_true(c == 8192 && m == 8192);
    assert_int_equal(sl_fd_limit_plan(100, 1024, 4096, 1, &c, &m), 0);
    assert_true(c == 100 && m == 4096);
}

TU_MAIN(NULL, NULL, cmocka_unit_test(test_plan))
