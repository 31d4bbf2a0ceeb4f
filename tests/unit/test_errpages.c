/* Unit tests for server/errpages.c: which <prefix>NNN.html files a prefix finds, and the mistakes
 * that make server.errorfile-prefix a start-up error (no such directory, no page at all, a page
 * too big, a directory where a page should be). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "errpages.h"

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/sl_errpages_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    return tu_rmtree(dir);
}

static void test_found_pages_and_fallback(void **state)
{
    (void)state;
    tu_write(dir, "e-404.html", "nf", 2);
    tu_write(dir, "e-503.html", "", 0);
    tu_write(dir, "e-200.html", "ok", 2); /* not an error status: never looked for */
    char prefix[128], err[256] = "";
    snprintf(prefix, sizeof prefix, "%s/e-", dir);
    sl_errpages *e = NULL;
    assert_int_equal(sl_errpages_load(prefix, &e, err, sizeof err), 0);
    assert_int_equal(e->n, 2);
    size_t n = 99;
    const char *b = sl_errpages_get(e, 404, &n);
    assert_non_null(b);
    assert_int_equal(n, 2);
    assert_memory_equal(b, "nf", 2);
    assert_non_null(sl_errpages_get(e, 503, &n)); /* an empty page is a page */
    assert_int_equal(n, 0);
    assert_null(sl_errpages_get(e, 403, &n));
    assert_null(sl_errpages_get(e, 200, &n));
    assert_null(sl_errpages_get(e, 600, &n));
    assert_null(sl_errpages_get(NULL, 404, &n));
    sl_errpages_free(e);
}

static void test_mistakes(void **state)
{
    (void)state;
    char prefix[128], err[256];
    sl_errpages *e = NULL;
    snprintf(prefix, sizeof prefix, "%s/none/e-", dir);
    assert_int_equal(sl_errpages_load(prefix, &e, err, sizeof err), -ENOTDIR);
    assert_non_null(strstr(err, "is not a directory"));
    snprintf(prefix, sizeof prefix, "%s/nothing-", dir);
    assert_int_equal(sl_errpages_load(prefix, &e, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "no file"));
    size_t big = SL_ERRPAGE_MAX_BYTES + 1;
    char *b = calloc(1, big);
    assert_non_null(b);
    tu_write(dir, "big-500.html", b, big);
    free(b);
    snprintf(prefix, sizeof prefix, "%s/big-", dir);
    assert_int_equal(sl_errpages_load(prefix, &e, err, sizeof err), -EFBIG);
    assert_non_null(strstr(err, "big-500.html"));
    char p[256];
    snprintf(p, sizeof p, "%s/d-404.html", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(prefix, sizeof prefix, "%s/d-", dir);
    assert_int_equal(sl_errpages_load(prefix, &e, err, sizeof err), -EISDIR);
}

TU_MAIN(make_dir, remove_dir,
        cmocka_unit_test(test_found_pages_and_fallback),
        cmocka_unit_test(test_mistakes))
