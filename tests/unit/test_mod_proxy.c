/* proxy-core's synchronous core: the X-Sendfile path check (the gateway has test_gateway.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

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

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_xsendfile_inside_roots),
        cmocka_unit_test(test_xsendfile_escapes_are_refused))
