/* Unit tests for fcgi_stat_accel/accel.c: lexical normalization, the root prefix rule, and
 * sl_accel_resolve against a real temporary tree (regular file, missing, directory, FIFO, socket,
 * '..' escapes, absolute paths outside, /srv/www vs /srv/www2, symlinks staying inside or leaving,
 * over-long names, PATH_INFO joining, control bytes), plus answer formatting and log escaping. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "accel.h"

/* ---- sl_accel_normalize ---- */

/* An input and its normalized form, or the error (then want is NULL). */
static const struct {
    const char *in, *want;
    int err;
} norm_cases[] = {
    /* Plain. */
    {"/", "/", 0},
    {"/a", "/a", 0},
    {"/a/b/c.txt", "/a/b/c.txt", 0},
    {"/a/b/", "/a/b", 0},
    /* Collapses. */
    {"//a///b//", "/a/b", 0},
    {"/./a/./b/.", "/a/b", 0},
    {"/a/b/../c", "/a/c", 0},
    {"/a/b/../../c", "/c", 0},
    {"/a/..", "/", 0},
    {"/a/...", "/a/...", 0},
    {"/a/..b/.c", "/a/..b/.c", 0},
    /* Refuses a climb above '/'. */
    {"/..", NULL, -EPERM},
    {"/a/../../etc", NULL, -EPERM},
    {"/./../x", NULL, -EPERM},
    /* Refuses relative paths. */
    {"a/b", NULL, -EINVAL},
    {"", NULL, -EINVAL},
    {NULL, NULL, -EINVAL},
};

static void test_normalize(void **state)
{
    TU_EACH(c, norm_cases) {
        const char *in = c->in, *want = c->want;
        char out[SL_ACCEL_PATH_MAX];
        int r = sl_accel_normalize(in, out, sizeof out);
        if (want ? r != (int)strlen(want) || strcmp(out, want) : r != c->err)
            fail_msg("normalize(%s) = %d \"%s\", want %d \"%s\"", in ? in : "NULL", r,
                     r >= 0 ? out : "", want ? (int)strlen(want) : c->err,
                     want ? want : "");
    }
}

static void test_normalize_capacity(void **state)
{
    char out[6];
    assert_int_equal(sl_accel_normalize("/abcd", out, sizeof out), 5);
    assert_int_equal(sl_accel_normalize("/abcde", out, sizeof out), -ENAMETOOLONG);
    // A component removed by '..' before the capacity is reached does not count against it.
    assert_int_equal(sl_accel_normalize("/ab/../ab", out, sizeof out), 3);
    assert_int_equal(sl_accel_normalize("/", out, 1), -ENAMETOOLONG);
}

/* ---- sl_accel_under_root ---- */

static void test_under_root_prefix_includes_slash(void **state)
{
    static const struct {
        const char *root, *path;
        bool under;
    } cases[] = {
        {"/srv/www", "/srv/www", true},      {"/srv/www", "/srv/www/x", true},
        {"/srv/www", "/srv/www/a/b", true},  {"/srv/www", "/srv/www2/x", false},
        {"/srv/www", "/srv/www2", false},    {"/srv/www", "/srv/ww", false},
        {"/srv/www", "/srv", false},         {"/srv/www", "/etc/passwd", false},
        {"/", "/etc/passwd", true},          {"/", "/", true},
    };
    TU_EACH(c, cases)
        if (sl_accel_under_root(c->root, c->path) != c->under)
            fail_msg("under_root(\"%s\", \"%s\") is not %d", c->root, c->path, c->under);
}

/* ---- sl_accel_resolve on a real tree ---- */

struct tree {
    char base[32];      /* mkdtemp directory */
    char root[96];      /* base/www: the document root */
    int rootfd;
};

static int setup_tree(void **state)
{
    struct tree *t = calloc(1, sizeof *t);
    char p[512];
    if (!t)
        return -1;
    snprintf(t->base, sizeof t->base, "/tmp/sl_accel_XXXXXX");
    if (!mkdtemp(t->base))
        return -1;
    snprintf(t->root, sizeof t->root, "%s/www", t->base);
    tu_mkdir(t->base, "www", 0755);
    tu_mkdir(t->base, "www2", 0755);
    tu_put(t->base, "www2/secret.txt", "secret");
    tu_put(t->base, "outside.txt", "outside");
    tu_put(t->root, "a.txt", "hello");
    tu_put(t->root, "index.php", "<?php");
    tu_mkdir(t->root, "sub", 0755);
    tu_put(t->root, "sub/b.txt", "bee");
    snprintf(p, sizeof p, "%s/fifo", t->root);
    mkfifo(p, 0644);
    tu_symlink(t->root, "link_in", "sub/b.txt");
    tu_symlink(t->root, "link_dir_in", "sub");
    tu_symlink(t->root, "link_out", "../outside.txt");
    tu_symlink(t->root, "link_abs", "/etc/passwd");
    tu_symlink(t->root, "link_dir_out", "../www2");
    tu_symlink(t->root, "link_loop", "link_loop");
    tu_symlink(t->root, "link_proc", "/proc/self/root");
    char norm[SL_ACCEL_PATH_MAX];
    t->rootfd = sl_accel_root_open(t->root, norm, sizeof norm);
    if (t->rootfd < 0 || strcmp(norm, t->root) != 0)
        return -1;
    *state = t;
    return 0;
}

static int teardown_tree(void **state)
{
    struct tree *t = *state;
    close(t->rootfd);
    int r = tu_rmtree(t->base);
    free(t);
    return r;
}

/* Resolve root + rel (rel appended literally) with an optional PATH_INFO. */
static int resolve_ra(struct tree *t, const char *rel, const char *path_info, size_t readahead,
                      sl_accel_answer *a)
{
    static char script[24000];
    snprintf(script, sizeof script, "%s%s", t->root, rel);
    return sl_accel_resolve(t->rootfd, t->root, script, path_info, readahead, a);
}

static int resolve(struct tree *t, const char *rel, const char *path_info, sl_accel_answer *a)
{
    return resolve_ra(t, rel, path_info, SL_ACCEL_READAHEAD_DEFAULT, a);
}

/* Resolve SCRIPT_FILENAME script as it is given, with no readahead. */
static int resolve_abs(struct tree *t, const char *script, const char *path_info,
                       sl_accel_answer *a)
{
    return sl_accel_resolve(t->rootfd, t->root, script, path_info, 0, a);
}

/* The status of root + rel + path_info must be status, and its error the one given (0: any). */
static void expect(struct tree *t, const char *rel, const char *path_info, int status, int error)
{
    sl_accel_answer a;
    int r = resolve(t, rel, path_info, &a);
    if (r != status || (error && a.error != error))
        fail_msg("%s%s: got %d (%s, error %d), want %d (error %d)", rel,
                 path_info ? path_info : "", r, a.reason, a.error, status, error);
    assert_int_equal(a.status, status);
    assert_non_null(a.reason);
}

/* root + rel is answered 200, with no error, naming root + sent. */
static void expect_sent(struct tree *t, const char *rel, const char *sent)
{
    sl_accel_answer a;
    char want[256];
    snprintf(want, sizeof want, "%s%s", t->root, sent);
    int r = resolve(t, rel, NULL, &a);
    if (r != 200 || a.error || strcmp(a.path, want))
        fail_msg("%s: got %d (error %d) \"%s\", want 200 \"%s\"", rel, r, a.error, a.path, want);
}

static void test_regular_file_ok(void **state)
{
    expect_sent(*state, "/a.txt", "/a.txt");
    // The path is reported normalized.
    expect_sent(*state, "//sub/./../a.txt", "/a.txt");
}

static void test_readahead_zero_still_checks(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve_ra(t, "/a.txt", NULL, 0, &a), 200);
    assert_int_equal(resolve_ra(t, "/nope", NULL, 0, &a), 404);
}

/* Paths below the root, with the status each must get (and the error, where one is given). */
static const struct {
    const char *rel;
    int status, error;
} statuses[] = {
    /* Missing: 404. */
    {"/missing.txt", 404, -ENOENT},
    {"/nodir/x", 404, 0},
    {"/a.txt/x", 404, -ENOTDIR},
    /* A directory is 403. */
    {"/sub", 403, 0},
    {"/sub/", 403, 0},
    {"", 403, 0},
    {"/", 403, 0},
    /* A FIFO is 403, without blocking: no writer exists, a blocking open would hang here. */
    {"/fifo", 403, 0},
    /* '..' may not leave the root... */
    {"/../outside.txt", 403, 0},
    {"/sub/../../outside.txt", 403, 0},
    {"/../www2/secret.txt", 403, 0},
    {"/..", 403, 0},
    {"/../../../../../../../../../../../etc/passwd", 403, 0},
    /* ...but one that stays inside is fine. */
    {"/sub/../a.txt", 200, 0},
    {"/../www/a.txt", 200, 0},
    /* Nor may a symbolic link (one inside is fine). */
    {"/link_dir_in/b.txt", 200, 0},
    {"/link_out", 403, -EXDEV},
    {"/link_abs", 403, 0},
    {"/link_dir_out/secret.txt", 403, 0},
    {"/link_proc/etc/passwd", 403, 0},
    {"/link_loop", 403, 0},
};

static void test_statuses(void **state)
{
    TU_EACH(c, statuses)
        expect(*state, c->rel, NULL, c->status, c->error);
}

static void test_socket_is_403(void **state)
{
    struct tree *t = *state;
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s/sock", t->root);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sun, sizeof sun), 0);
    expect(t, "/sock", NULL, 403, 0);
    close(s);
    unlink(sun.sun_path);
}

static void test_absolute_outside_is_403(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve_abs(t, "/etc/passwd", NULL, &a), 403);
    assert_int_equal(resolve_abs(t, "/", NULL, &a), 403);
    char p[256];
    snprintf(p, sizeof p, "%s/outside.txt", t->base);
    assert_int_equal(resolve_abs(t, p, NULL, &a), 403);
}

static void test_sibling_prefix_is_403(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    char p[256];
    // Root ".../www" must not contain ".../www2/secret.txt", though the bytes share a prefix.
    snprintf(p, sizeof p, "%s2/secret.txt", t->root);
    assert_int_equal(resolve_abs(t, p, NULL, &a), 403);
    assert_int_equal(a.error, -EXDEV);
}

static void test_relative_and_empty_script_refused(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve_abs(t, "a.txt", NULL, &a), 403);
    assert_int_equal(resolve_abs(t, "", NULL, &a), 500);
    assert_int_equal(resolve_abs(t, NULL, NULL, &a), 500);
    assert_int_equal(sl_accel_resolve(t->rootfd, "relative", "/x", NULL, 0, &a), 500);
}

static void test_symlink_inside_ok(void **state)
{
    // X-Sendfile names the link itself: the server opens it with the same result.
    expect_sent(*state, "/link_in", "/link_in");
}

static void test_long_component_is_404(void **state)
{
    struct tree *t = *state;
    char name[400];
    name[0] = '/';
    memset(name + 1, 'n', 300);
    name[301] = '\0';
    sl_accel_answer a;
    assert_int_equal(resolve(t, name, NULL, &a), 404);
    assert_int_equal(a.error, -ENAMETOOLONG);
}

static void test_long_path_is_404(void **state)
{
    struct tree *t = *state;
    static char rel[6000];
    size_t n = 0;
    while (n + 10 < sizeof rel - 1) {
        memcpy(rel + n, "/abcdefghi", 10);
        n += 10;
    }
    rel[n] = '\0';
    sl_accel_answer a;
    assert_int_equal(resolve(t, rel, NULL, &a), 404);
    assert_string_equal(a.path, "");
    // Too long before the '..' take it back under PATH_MAX: the left-to-right walk refuses it
    // anyway, which is also what the kernel would do with the raw path.
    static char back[12000];
    snprintf(back, sizeof back, "%s", rel);
    for (size_t i = 0; i < n / 10; i++)
        strcat(back, "/..");
    strcat(back, "/a.txt");
    assert_int_equal(resolve(t, back, NULL, &a), 404);
    // Longer than the join buffer itself.
    static char huge[20000];
    memset(huge, 'x', sizeof huge - 1);
    huge[0] = '/';
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(resolve(t, huge, NULL, &a), 404);
}

static void test_path_info_join(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    char want[256];
    assert_int_equal(resolve_ra(t, "/sub", "/b.txt", 0, &a), 200);
    snprintf(want, sizeof want, "%s/sub/b.txt", t->root);
    assert_string_equal(a.path, want);
    // An empty PATH_INFO means SCRIPT_FILENAME alone.
    assert_int_equal(resolve_ra(t, "/a.txt", "", 0, &a), 200);
    // PATH_INFO past a regular file names nothing.
    assert_int_equal(resolve_ra(t, "/index.php", "/extra", 0, &a), 404);
    // PATH_INFO cannot be used to climb out.
    assert_int_equal(resolve_ra(t, "/sub", "/../../outside.txt", 0, &a), 403);
    assert_int_equal(resolve_ra(t, "/sub", "/../a.txt", 0, &a), 200);
    // It is appended literally, with no separator added.
    assert_int_equal(resolve_ra(t, "/a", ".txt", 0, &a), 200);
}

static void test_control_bytes_refused(void **state)
{
    struct tree *t = *state;
    tu_put(t->root, "n\nl", "x");
    sl_accel_answer a;
    // Even an existing file: its name would split the X-Sendfile header.
    assert_int_equal(resolve_ra(t, "/n\nl", NULL, 0, &a), 403);
    assert_int_equal(resolve_ra(t, "/a.txt", "\r\nX-Evil: 1", 0, &a), 403);
    assert_int_equal(resolve_ra(t, "/a.txt", "\x7f", 0, &a), 403);
}

static void test_root_slash(void **state)
{
    struct tree *t = *state;
    char norm[SL_ACCEL_PATH_MAX], p[256];
    int fd = sl_accel_root_open("/", norm, sizeof norm);
    assert_true(fd >= 0);
    assert_string_equal(norm, "/");
    sl_accel_answer a;
    snprintf(p, sizeof p, "%s/a.txt", t->root);
    assert_int_equal(sl_accel_resolve(fd, norm, p, NULL, 0, &a), 200);
    assert_int_equal(sl_accel_resolve(fd, norm, "/", NULL, 0, &a), 403);
    close(fd);
}

static void test_root_open_errors(void **state)
{
    char norm[64];
    assert_int_equal(sl_accel_root_open("relative", norm, sizeof norm), -EINVAL);
    assert_int_equal(sl_accel_root_open("/..", norm, sizeof norm), -EINVAL);
    assert_int_equal(sl_accel_root_open("/nonexistent-sl-accel-dir", norm, sizeof norm), -ENOENT);
    assert_int_equal(sl_accel_root_open("/etc/passwd", norm, sizeof norm), -ENOTDIR);
    int fd = sl_accel_root_open("/tmp/./", norm, sizeof norm);
    assert_true(fd >= 0);
    assert_string_equal(norm, "/tmp");
    close(fd);
}

/* ---- formatting and escaping ---- */

static void test_format_ok(void **state)
{
    sl_accel_answer a = {.status = 200, .reason = "ok"};
    strcpy(a.path, "/srv/www/a b.txt");
    char buf[512];
    int n = sl_accel_format(&a, false, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(buf, "Status: 200 OK\r\nX-Sendfile: /srv/www/a b.txt\r\n"
                             "Content-Type: application/octet-stream\r\nContent-Length: 0\r\n\r\n");
    n = sl_accel_format(&a, true, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_non_null(strstr(buf, "\r\nX-LIGHTTPD-send-file: /srv/www/a b.txt\r\n"));
    assert_int_equal(sl_accel_format(&a, false, buf, 20), -ENOSPC);
}

static void test_format_errors_never_contain_path(void **state)
{
    static const int st[] = {403, 404, 500, 0, 414, 999};
    static const char *want[] = {"Forbidden\n", "Not Found\n", "Internal Server Error\n",
                                 "Internal Server Error\n", "Internal Server Error\n",
                                 "Internal Server Error\n"};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        sl_accel_answer a = {.status = st[i], .reason = "x"};
        strcpy(a.path, "/secret/path");
        char buf[512];
        int n = sl_accel_format(&a, true, buf, sizeof buf);
        assert_true(n > 0);
        assert_null(strstr(buf, "/secret"));
        assert_null(strstr(buf, "X-Sendfile"));
        char *body = strstr(buf, "\r\n\r\n");
        assert_non_null(body);
        assert_string_equal(body + 4, want[i]);
        char cl[64];
        snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(want[i]));
        assert_non_null(strstr(buf, cl));
    }
}

static void test_escape(void **state)
{
    char out[64];
    assert_int_equal(sl_accel_escape("/a b", out, sizeof out), 4);
    assert_string_equal(out, "/a b");
    sl_accel_escape("a\nb\\c\xff", out, sizeof out);
    assert_string_equal(out, "a\\x0ab\\x5cc\\xff");
    // Truncation never splits an escape and always terminates.
    assert_int_equal(sl_accel_escape("ab\n", out, 5), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(sl_accel_escape("abc", out, 1), 0);
    assert_string_equal(out, "");
    assert_int_equal(sl_accel_escape("abc", out, 0), 0);
}

/* A test given a fresh tree as its state. */
#define TREE_TEST(test) cmocka_unit_test_setup_teardown(test, setup_tree, teardown_tree)

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_normalize_capacity),
        cmocka_unit_test(test_under_root_prefix_includes_slash),
        TREE_TEST(test_regular_file_ok),
        TREE_TEST(test_readahead_zero_still_checks),
        TREE_TEST(test_statuses),
        TREE_TEST(test_socket_is_403),
        TREE_TEST(test_absolute_outside_is_403),
        TREE_TEST(test_sibling_prefix_is_403),
        TREE_TEST(test_relative_and_empty_script_refused),
        TREE_TEST(test_symlink_inside_ok),
        TREE_TEST(test_long_component_is_404),
        TREE_TEST(test_long_path_is_404),
        TREE_TEST(test_path_info_join),
        TREE_TEST(test_control_bytes_refused),
        TREE_TEST(test_root_slash),
        cmocka_unit_test(test_root_open_errors),
        cmocka_unit_test(test_format_ok),
        cmocka_unit_test(test_format_errors_never_contain_path),
        cmocka_unit_test(test_escape))
