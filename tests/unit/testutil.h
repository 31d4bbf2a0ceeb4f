/* What several unit tests share (header-only, so no build change): walking a table of cases and
 * two types of case, a heap copy of a test input with no slack after it, files and directories
 * made and removed under a test's temporary directory, and main(). Include it after <cmocka.h>. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The number of elements of the array a. */
#define TU_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Runs the statement after it with c pointing at each element of the array cases in turn. */
#define TU_EACH(c, cases)                                                                          \
    for (const __typeof__((cases)[0]) *c = (cases); c < (cases) + TU_LEN(cases); c++)

/* A test input of len bytes (a literal's, NULs included) and the result it must give. */
struct tu_case {
    const char *in;
    size_t len;
    int want;
};

#define TU_CASE(lit, want) {lit, sizeof(lit) - 1, want}

/* A test input string and the string it must give (a rendering, an error message, ...). */
struct tu_strs {
    const char *in, *want;
};

/* A heap copy of s[0..len) with nothing after it (no NUL), so a parser reading past len is
 * caught by ASan; the caller frees it. */
static inline char *tu_copy(const char *s, size_t len)
{
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, s, len);
    return copy;
}

/* Writes data[0..n) to dir/rel, replacing what was there. */
static inline void tu_write(const char *dir, const char *rel, const char *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Writes the string data to dir/rel. */
static inline void tu_put(const char *dir, const char *rel, const char *data)
{
    tu_write(dir, rel, data, strlen(data));
}

/* Makes the directory dir/rel. */
static inline void tu_mkdir(const char *dir, const char *rel, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(mkdir(p, mode), 0);
}

/* Makes dir/rel a symbolic link to target. */
static inline void tu_symlink(const char *dir, const char *rel, const char *target)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(symlink(target, p), 0);
}

/* Removes dir and all below it: 0, or -1 if that failed. */
static inline int tu_rmtree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* main(): runs the tests given (cmocka_unit_test(...) entries) as one group, with the group's
 * set-up and tear-down (or NULL). */
#define TU_MAIN(group_setup, group_teardown, ...)                                                  \
    int main(void)                                                                                 \
    {                                                                                              \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, group_setup, group_teardown);                         \
    }

#endif
