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

static void assert_norm(const char *in, const char *want)
{
    char out[SL_ACCEL_PATH_MAX];
    int r = sl_accel_normalize(in, out, sizeof out);
    assert_int_equal(r, (int)strlen(want));
    assert_string_equal(out, want);
}

static void test_normalize_plain(void **state)
{
    assert_norm("/", "/");
    assert_norm("/a", "/a");
    assert_norm("/a/b/c.txt", "/a/b/c.txt");
    assert_norm("/a/b/", "/a/b");
}

static void test_normalize_collapses(void **state)
{
    assert_norm("//a///b//", "/a/b");
    assert_norm("/./a/./b/.", "/a/b");
    assert_norm("/a/b/../c", "/a/c");
    assert_norm("/a/b/../../c", "/c");
    assert_norm("/a/..", "/");
    assert_norm("/a/...", "/a/...");
    assert_norm("/a/..b/.c", "/a/..b/.c");
}

static void test_normalize_refuses_climb_above_slash(void **state)
{
    char out[64];
    assert_int_equal(sl_accel_normalize("/..", out, sizeof out), -EPERM);
    assert_int_equal(sl_accel_normalize("/a/../../etc", out, sizeof out), -EPERM);
    assert_int_equal(sl_accel_normalize("/./../x", out, sizeof out), -EPERM);
}

static void test_normalize_refuses_relative(void **state)
{
    char out[64];
    assert_int_equal(sl_accel_normalize("a/b", out, sizeof out), -EINVAL);
    assert_int_equal(sl_accel_normalize("", out, sizeof out), -EINVAL);
    assert_int_equal(sl_accel_normalize(NULL, out, sizeof out), -EINVAL);
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
    assert_true(sl_accel_under_root("/srv/www", "/srv/www"));
    assert_true(sl_accel_under_root("/srv/www", "/srv/www/x"));
    assert_true(sl_accel_under_root("/srv/www", "/srv/www/a/b"));
    assert_false(sl_accel_under_root("/srv/www", "/srv/www2/x"));
    assert_false(sl_accel_under_root("/srv/www", "/srv/www2"));
    assert_false(sl_accel_under_root("/srv/www", "/srv/ww"));
    assert_false(sl_accel_under_root("/srv/www", "/srv"));
    assert_false(sl_accel_under_root("/srv/www", "/etc/passwd"));
    assert_true(sl_accel_under_root("/", "/etc/passwd"));
    assert_true(sl_accel_under_root("/", "/"));
}

/* ---- sl_accel_resolve on a real tree ---- */

struct tree {
    char base[32];      /* mkdtemp directory */
    char root[96];      /* base/www: the document root */
    int rootfd;
};

static void mkfile(const char *dir, const char *name, const char *data)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

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
    mkdir(t->root, 0755);
    snprintf(p, sizeof p, "%s/www2", t->base);
    mkdir(p, 0755);
    mkfile(p, "secret.txt", "secret");
    mkfile(t->base, "outside.txt", "outside");
    mkfile(t->root, "a.txt", "hello");
    mkfile(t->root, "index.php", "<?php");
    snprintf(p, sizeof p, "%s/sub", t->root);
    mkdir(p, 0755);
    mkfile(p, "b.txt", "bee");
    snprintf(p, sizeof p, "%s/fifo", t->root);
    mkfifo(p, 0644);
    snprintf(p, sizeof p, "%s/link_in", t->root);
    symlink("sub/b.txt", p);
    snprintf(p, sizeof p, "%s/link_dir_in", t->root);
    symlink("sub", p);
    snprintf(p, sizeof p, "%s/link_out", t->root);
    symlink("../outside.txt", p);
    snprintf(p, sizeof p, "%s/link_abs", t->root);
    symlink("/etc/passwd", p);
    snprintf(p, sizeof p, "%s/link_dir_out", t->root);
    symlink("../www2", p);
    snprintf(p, sizeof p, "%s/link_loop", t->root);
    symlink("link_loop", p);
    snprintf(p, sizeof p, "%s/link_proc", t->root);
    symlink("/proc/self/root", p);
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
static int resolve(struct tree *t, const char *rel, const char *path_info, sl_accel_answer *a)
{
    static char script[24000];
    snprintf(script, sizeof script, "%s%s", t->root, rel);
    return sl_accel_resolve(t->rootfd, t->root, script, path_info, SL_ACCEL_READAHEAD_DEFAULT, a);
}

static void expect(struct tree *t, const char *rel, const char *path_info, int status)
{
    sl_accel_answer a;
    int r = resolve(t, rel, path_info, &a);
    if (r != status)
        fail_msg("%s%s: got %d (%s), want %d", rel, path_info ? path_info : "", r, a.reason, status);
    assert_int_equal(a.status, status);
    assert_non_null(a.reason);
}

static void test_regular_file_ok(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve(t, "/a.txt", NULL, &a), 200);
    char want[256];
    snprintf(want, sizeof want, "%s/a.txt", t->root);
    assert_string_equal(a.path, want);
    assert_int_equal(a.error, 0);
    // The path is reported normalized.
    assert_int_equal(resolve(t, "//sub/./../a.txt", NULL, &a), 200);
    assert_string_equal(a.path, want);
}

static void test_readahead_zero_still_checks(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    char script[256];
    snprintf(script, sizeof script, "%s/a.txt", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, NULL, 0, &a), 200);
    snprintf(script, sizeof script, "%s/nope", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, NULL, 0, &a), 404);
}

static void test_missing_is_404(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve(t, "/missing.txt", NULL, &a), 404);
    assert_int_equal(a.error, -ENOENT);
    expect(t, "/nodir/x", NULL, 404);
}

static void test_file_as_directory_is_404(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve(t, "/a.txt/x", NULL, &a), 404);
    assert_int_equal(a.error, -ENOTDIR);
}

static void test_directory_is_403(void **state)
{
    struct tree *t = *state;
    expect(t, "/sub", NULL, 403);
    expect(t, "/sub/", NULL, 403);
    expect(t, "", NULL, 403);
    expect(t, "/", NULL, 403);
}

static void test_fifo_is_403_without_blocking(void **state)
{
    struct tree *t = *state;
    // No writer exists: a blocking open would hang the test here.
    expect(t, "/fifo", NULL, 403);
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
    expect(t, "/sock", NULL, 403);
    close(s);
    unlink(sun.sun_path);
}

static void test_dotdot_escapes_are_403(void **state)
{
    struct tree *t = *state;
    expect(t, "/../outside.txt", NULL, 403);
    expect(t, "/sub/../../outside.txt", NULL, 403);
    expect(t, "/../www2/secret.txt", NULL, 403);
    expect(t, "/..", NULL, 403);
    expect(t, "/../../../../../../../../../../../etc/passwd", NULL, 403);
    // A '..' that stays inside is fine.
    expect(t, "/sub/../a.txt", NULL, 200);
    expect(t, "/../www/a.txt", NULL, 200);
}

static void test_absolute_outside_is_403(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, "/etc/passwd", NULL, 0, &a), 403);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, "/", NULL, 0, &a), 403);
    char p[256];
    snprintf(p, sizeof p, "%s/outside.txt", t->base);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, p, NULL, 0, &a), 403);
}

static void test_sibling_prefix_is_403(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    char p[256];
    // Root ".../www" must not contain ".../www2/secret.txt", though the bytes share a prefix.
    snprintf(p, sizeof p, "%s2/secret.txt", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, p, NULL, 0, &a), 403);
    assert_int_equal(a.error, -EXDEV);
}

static void test_relative_and_empty_script_refused(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, "a.txt", NULL, 0, &a), 403);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, "", NULL, 0, &a), 500);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, NULL, NULL, 0, &a), 500);
    assert_int_equal(sl_accel_resolve(t->rootfd, "relative", "/x", NULL, 0, &a), 500);
}

static void test_symlink_inside_ok(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve(t, "/link_in", NULL, &a), 200);
    char want[256];
    // X-Sendfile names the link itself: the server opens it with the same result.
    snprintf(want, sizeof want, "%s/link_in", t->root);
    assert_string_equal(a.path, want);
    expect(t, "/link_dir_in/b.txt", NULL, 200);
}

static void test_symlink_leaving_is_403(void **state)
{
    struct tree *t = *state;
    sl_accel_answer a;
    assert_int_equal(resolve(t, "/link_out", NULL, &a), 403);
    assert_int_equal(a.error, -EXDEV);
    expect(t, "/link_abs", NULL, 403);
    expect(t, "/link_dir_out/secret.txt", NULL, 403);
    expect(t, "/link_proc/etc/passwd", NULL, 403);
    expect(t, "/link_loop", NULL, 403);
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
    char script[256], want[256];
    snprintf(script, sizeof script, "%s/sub", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, "/b.txt", 0, &a), 200);
    snprintf(want, sizeof want, "%s/sub/b.txt", t->root);
    assert_string_equal(a.path, want);
    // An empty PATH_INFO means SCRIPT_FILENAME alone.
    snprintf(script, sizeof script, "%s/a.txt", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, "", 0, &a), 200);
    // PATH_INFO past a regular file names nothing.
    snprintf(script, sizeof script, "%s/index.php", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, "/extra", 0, &a), 404);
    // PATH_INFO cannot be used to climb out.
    snprintf(script, sizeof script, "%s/sub", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, "/../../outside.txt", 0, &a), 403);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, "/../a.txt", 0, &a), 200);
    // It is appended literally, with no separator added.
    snprintf(script, sizeof script, "%s/a", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, script, ".txt", 0, &a), 200);
}

static void test_control_bytes_refused(void **state)
{
    struct tree *t = *state;
    char p[256];
    mkfile(t->root, "n\nl", "x");
    sl_accel_answer a;
    // Even an existing file: its name would split the X-Sendfile header.
    snprintf(p, sizeof p, "%s/n\nl", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, p, NULL, 0, &a), 403);
    snprintf(p, sizeof p, "%s/a.txt", t->root);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, p, "\r\nX-Evil: 1", 0, &a), 403);
    assert_int_equal(sl_accel_resolve(t->rootfd, t->root, p, "\x7f", 0, &a), 403);
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

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_normalize_plain),
        cmocka_unit_test(test_normalize_collapses),
        cmocka_unit_test(test_normalize_refuses_climb_above_slash),
        cmocka_unit_test(test_normalize_refuses_relative),
        cmocka_unit_test(test_normalize_capacity),
        cmocka_unit_test(test_under_root_prefix_includes_slash),
        cmocka_unit_test_setup_teardown(test_regular_file_ok, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_readahead_zero_still_checks, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_missing_is_404, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_file_as_directory_is_404, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_directory_is_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_fifo_is_403_without_blocking, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_socket_is_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_dotdot_escapes_are_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_absolute_outside_is_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_sibling_prefix_is_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_relative_and_empty_script_refused, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_symlink_inside_ok, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_symlink_leaving_is_403, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_long_component_is_404, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_long_path_is_404, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_path_info_join, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_control_bytes_refused, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_root_slash, setup_tree, teardown_tree),
        cmocka_unit_test(test_root_open_errors),
        cmocka_unit_test(test_format_ok),
        cmocka_unit_test(test_format_errors_never_contain_path),
        cmocka_unit_test(test_escape))
