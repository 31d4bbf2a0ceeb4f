/* proxy-core's synchronous cores: the X-Sendfile path check and the gateway's balancers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway.h"
#include "mod_proxy.h"

static const char *const roots[] = {"/srv/www", "/var/media"};

static int locate(const char *v, char *out, const char **rel)
{
    return sl_xsendfile_locate(v, strlen(v), roots, 2, out, 512, rel);
}

static void test_xsendfile_inside_roots(void **state)
{
    char out[512];
    const char *rel;
    assert_int_equal(locate("/srv/www/a/b.txt", out, &rel), 0);
    assert_string_equal(rel, "a/b.txt");
    assert_int_equal(locate("/var/media/x%20y.mp4", out, &rel), 1);
    assert_string_equal(out, "/var/media/x y.mp4");
    assert_string_equal(rel, "x y.mp4");
    /* Dot segments that stay inside are fine. */
    assert_int_equal(locate("/srv/www/a/../c", out, &rel), 0);
    assert_string_equal(rel, "c");
}

static void test_xsendfile_escapes_are_refused(void **state)
{
    char out[512];
    const char *rel;
    assert_int_equal(locate("/srv/www/../../etc/passwd", out, &rel), -EACCES);
    assert_int_equal(locate("/srv/www/%2e%2e/secret", out, &rel), -EACCES);
    assert_int_equal(locate("/srv/www2/x", out, &rel), -EACCES); /* prefix without the slash */
    assert_int_equal(locate("/srv/www", out, &rel), -EACCES);    /* the root itself */
    assert_int_equal(locate("/srv/www/", out, &rel), -EACCES);
    assert_int_equal(locate("srv/www/x", out, &rel), -EACCES);   /* relative */
    assert_int_equal(locate("", out, &rel), -EACCES);
    assert_int_equal(locate("/etc/passwd", out, &rel), -EACCES);
    assert_int_equal(locate("/srv/www/a%00b", out, &rel), -EINVAL); /* NUL */
    assert_int_equal(locate("/srv/www/a%zz", out, &rel), -EINVAL);
    char small[8];
    assert_int_equal(sl_xsendfile_locate("/srv/www/long-name", 18, roots, 2, small, sizeof small,
                                         &rel),
                     -ENAMETOOLONG);
}

static sl_gw_group *group3(const char *const *names)
{
    sl_strlist l = {names, 3};
    return sl_gw_group_get(NULL, &l);
}

static void test_balancers(void **state)
{
    static const char *const names[] = {"127.0.0.1:1", "127.0.0.1:2", "unix:/tmp/x.sock", NULL};
    sl_gw_group *g = group3(names);
    assert_non_null(g);
    assert_ptr_equal(group3(names), g); /* one group per list */
    /* static: the first healthy one; failover skips disabled and tried ones. */
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 0), &g->b[0]);
    g->b[0].disabled_until = 200;
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 0), &g->b[1]);
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 1u << 1), &g->b[2]);
    assert_null(sl_gw_pick(g, "static", "/", 1, 100, (1u << 1) | (1u << 2)));
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 200, 0), &g->b[0]); /* re-enabled */
    g->b[0].disabled_until = 0;
    /* round-robin visits each in turn. */
    sl_gw_backend *a = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    sl_gw_backend *b = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    sl_gw_backend *c = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    assert_true(a != b && b != c && a != c);
    assert_ptr_equal(sl_gw_pick(g, "round-robin", "/", 1, 1, 0), a);
    /* sqf: fewest in flight. */
    g->b[0].inflight = 5;
    g->b[1].inflight = 1;
    g->b[2].inflight = 3;
    for (int i = 0; i < 5; i++) assert_ptr_equal(sl_gw_pick(g, "sqf", "/", 1, 1, 0), &g->b[1]);
    g->b[0].inflight = g->b[1].inflight = g->b[2].inflight = 0;
    /* carp: a URL sticks to a backend; URLs spread; a disabled backend moves only its URLs. */
    int hits[3] = {0};
    sl_gw_backend *first[64];
    for (int i = 0; i < 64; i++) {
        char url[32];
        int n = snprintf(url, sizeof url, "/file-%d", i);
        first[i] = sl_gw_pick(g, "carp", url, (size_t)n, 1, 0);
        assert_ptr_equal(sl_gw_pick(g, "carp", url, (size_t)n, 1, 0), first[i]);
        hits[first[i] - g->b]++;
    }
    assert_true(hits[0] > 5 && hits[1] > 5 && hits[2] > 5);
    g->b[2].disabled_until = 10;
    for (int i = 0; i < 64; i++) {
        char url[32];
        int n = snprintf(url, sizeof url, "/file-%d", i);
        sl_gw_backend *now = sl_gw_pick(g, "carp", url, (size_t)n, 1, 0);
        assert_true(now != &g->b[2]);
        if (first[i] != &g->b[2]) assert_ptr_equal(now, first[i]);
    }
    sl_gw_shutdown();
}

static void test_wait_queue_is_bounded_fifo(void **state)
{
    static const char *const names[] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", NULL};
    sl_gw_group *g = group3(names);
    sl_gw_wait w[3] = {{0}};
    assert_int_equal(sl_gw_wait_add(g, &w[0], 2), 0);
    assert_int_equal(sl_gw_wait_add(g, &w[1], 2), 0);
    assert_int_equal(sl_gw_wait_add(g, &w[2], 2), -EAGAIN);
    sl_gw_wait_remove(g, &w[0]);
    assert_false(w[0].queued);
    assert_int_equal(g->n_waiting, 1);
    assert_ptr_equal(g->wait_head, &w[1]);
    sl_gw_wait_remove(g, &w[1]);
    assert_null(g->wait_head);
    assert_null(g->wait_tail);
    sl_gw_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xsendfile_inside_roots),
        cmocka_unit_test(test_xsendfile_escapes_are_refused),
        cmocka_unit_test(test_balancers),
        cmocka_unit_test(test_wait_queue_is_bounded_fifo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
