/* Unit tests for server/mime.c: the default table, user tables as from mimetype.assign, longest
 * suffix and case rules, and a randomized cross-check against a brute-force longest-suffix search. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "testutil.h"

#include "mime.h"

static const char *look(const sl_mime_table *t, const char *path)
{
    return sl_mime_lookup(t, path, strlen(path));
}

/* Each path in pairs[i][0] must get the type pairs[i][1] from t. */
static void expect_types(const sl_mime_table *t, const char *const (*pairs)[2], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(look(t, pairs[i][0]), pairs[i][1]))
            fail_msg("\"%s\": %s, want %s", pairs[i][0], look(t, pairs[i][0]), pairs[i][1]);
}

/* The same for a table made of the n suffixes suf[] and their types typ[]. */
static void expect_user_types(const char *const *suf, const char *const *typ, size_t n,
                              const char *const (*pairs)[2], size_t npairs)
{
    sl_mime_table *t = sl_mime_table_new(suf, typ, n);
    assert_non_null(t);
    expect_types(t, pairs, npairs);
    sl_mime_table_free(t);
}

/* Paths and the type the default table gives them. */
static const char *const default_types[][2] = {
    /* Web and text. */
    {"/index.html", "text/html; charset=utf-8"},
    {"/index.htm", "text/html; charset=utf-8"},
    {"/s.css", "text/css; charset=utf-8"},
    {"/a.js", "text/javascript; charset=utf-8"},
    {"/a.mjs", "text/javascript; charset=utf-8"},
    {"/a.json", "application/json"},
    {"/a.xml", "application/xml"},
    {"/a.txt", "text/plain; charset=utf-8"},
    {"/a.csv", "text/csv; charset=utf-8"},
    {"/a.md", "text/markdown; charset=utf-8"},
    {"/a.wasm", "application/wasm"},
    {"/a.pdf", "application/pdf"},
    /* Images and fonts. */
    {"a.png", "image/png"},
    {"a.jpg", "image/jpeg"},
    {"a.jpeg", "image/jpeg"},
    {"a.gif", "image/gif"},
    {"a.webp", "image/webp"},
    {"a.avif", "image/avif"},
    {"a.svg", "image/svg+xml"},
    {"a.ico", "image/x-icon"},
    {"a.bmp", "image/bmp"},
    {"a.tif", "image/tiff"},
    {"a.woff", "font/woff"},
    {"a.woff2", "font/woff2"},
    {"a.ttf", "font/ttf"},
    {"a.otf", "font/otf"},
    /* Audio and video. */
    {"a.mp3", "audio/mpeg"},
    {"a.ogg", "audio/ogg"},
    {"a.oga", "audio/ogg"},
    {"a.opus", "audio/ogg"},
    {"a.wav", "audio/wav"},
    {"a.flac", "audio/flac"},
    {"a.m4a", "audio/mp4"},
    {"a.aac", "audio/aac"},
    {"a.mp4", "video/mp4"},
    {"a.m4v", "video/mp4"},
    {"a.webm", "video/webm"},
    {"a.mkv", "video/x-matroska"},
    {"a.mov", "video/quicktime"},
    {"a.avi", "video/x-msvideo"},
    {"a.flv", "video/x-flv"},
    {"a.ts", "video/mp2t"},
    {"a.m3u8", "application/vnd.apple.mpegurl"},
    {"a.mpd", "application/dash+xml"},
    /* Archives. */
    {"a.zip", "application/zip"},
    {"a.gz", "application/gzip"},
    {"a.tgz", "application/x-gtar"},
    {"a.tar.gz", "application/x-gtar"},
    {"a.tar", "application/x-tar"},
    {"a.bz2", "application/x-bzip2"},
    {"a.xz", "application/x-xz"},
    {"a.zst", "application/zstd"},
    {"a.7z", "application/x-7z-compressed"},
    {"a.rar", "application/vnd.rar"},
    {"a.iso", "application/x-iso9660-image"},
    /* The longest suffix wins. */
    {"/dl/x-1.0.tar.gz", "application/x-gtar"},
    {"/dl/x-1.0.gz", "application/gzip"},
    {"/dl/x.tar.gz.gz", "application/gzip"},
    {"/dl/star.gz", "application/gzip"}, /* "star.gz" ends in "tar.gz" but not ".tar.gz" */
    /* Suffixes match in any case. */
    {"/A/INDEX.HTML", "text/html; charset=utf-8"},
    {"/photo.JpG", "image/jpeg"},
    {"/x.TAR.GZ", "application/x-gtar"},
    /* Unknown: application/octet-stream. */
    {"/file", "application/octet-stream"},
    {"/file.unknownext", "application/octet-stream"},
    {"", "application/octet-stream"},
    {"/dir.html/file", "application/octet-stream"},
    {"/html", "application/octet-stream"},
    {"/a.html.", "application/octet-stream"},
    {"/a.html/", "application/octet-stream"},
    {"/caf\xc3\xa9.\xff", "application/octet-stream"},
};

static void test_default_types(void **state)
{
    expect_types(sl_mime_default(), default_types, TU_LEN(default_types));
}

static void test_default_only_len_bytes_count(void **state)
{
    const sl_mime_table *d = sl_mime_default();
    assert_string_equal(sl_mime_lookup(d, "/index.html.bak", 11), "text/html; charset=utf-8");
    assert_string_equal(sl_mime_lookup(d, "/a.css", 0), "application/octet-stream");
    assert_string_equal(sl_mime_lookup(d, ".js", 3), "text/javascript; charset=utf-8");
}

static void test_null_table_is_default(void **state)
{
    assert_ptr_equal(look(NULL, "/a.png"), look(sl_mime_default(), "/a.png"));
    assert_ptr_equal(sl_mime_default(), sl_mime_default());
}

static void test_default_text_types_carry_charset(void **state)
{
    static const char *files[] = {"a.html", "a.htm", "a.css", "a.js", "a.mjs", "a.txt", "a.csv", "a.md",
                                  "a.tsv", "a.ics", "a.vtt", "a.log", "a.markdown"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *t = look(NULL, files[i]);
        assert_int_equal(strncmp(t, "text/", 5), 0);
        assert_non_null(strstr(t, "; charset=utf-8"));
    }
}

static void test_user_table_basic(void **state)
{
    static const char *const suf[] = {".html", ".gz", ".tar.gz", "README", ""};
    static const char *const typ[] = {"text/html", "application/gzip", "application/x-tgz",
                                      "text/plain", "text/x-fallback"};
    static const char *const want[][2] = {
        {"/a.html", "text/html"}, {"/a.HTML", "text/html"}, {"/a.tar.gz", "application/x-tgz"},
        {"/a.gz", "application/gzip"}, {"/docs/README", "text/plain"},
        {"/docs/readme", "text/plain"}, {"README", "text/plain"}, {"/a.css", "text/x-fallback"},
        {"", "text/x-fallback"},
    };
    expect_user_types(suf, typ, TU_LEN(suf), want, TU_LEN(want));
}

static void test_user_table_suffix_semantics(void **state)
{
    /* A key is a plain suffix: "README" also matches "NOTREADME"; "/README" pins the whole name. */
    static const char *const suf[] = {"README", "/LICENSE"};
    static const char *const typ[] = {"text/a", "text/b"};
    static const char *const want[][2] = {
        {"/x/NOTREADME", "text/a"},
        {"/x/LICENSE", "text/b"},
        {"/x/MYLICENSE", "application/octet-stream"},
        {"LICENSE", "application/octet-stream"},
    };
    expect_user_types(suf, typ, TU_LEN(suf), want, TU_LEN(want));
}

static void test_user_table_without_fallback(void **state)
{
    static const char *const suf[] = {".a"}, *const typ[] = {"x/a"};
    static const char *const want[][2] = {{"/f.b", "application/octet-stream"}};
    expect_user_types(suf, typ, 1, want, 1);
}

static void test_user_table_empty(void **state)
{
    static const char *const want[][2] = {{"/a.html", "application/octet-stream"},
                                          {"", "application/octet-stream"}};
    expect_user_types(NULL, NULL, 0, want, 2);
}

static void test_user_table_only_fallback(void **state)
{
    static const char *const suf[] = {""}, *const typ[] = {"text/plain"};
    static const char *const want[][2] = {{"/a.html", "text/plain"}};
    expect_user_types(suf, typ, 1, want, 1);
}

static void test_user_table_last_duplicate_wins(void **state)
{
    static const char *const suf[] = {".txt", ".TXT", "", ""};
    static const char *const typ[] = {"first", "second", "fb1", "fb2"};
    static const char *const want[][2] = {{"/a.txt", "second"}, {"/a", "fb2"}};
    expect_user_types(suf, typ, TU_LEN(suf), want, TU_LEN(want));
}

static void test_user_table_copies_strings(void **state)
{
    char s0[] = ".Foo", t0[] = "x/foo";
    const char *suf[] = {s0};
    const char *typ[] = {t0};
    sl_mime_table *t = sl_mime_table_new(suf, typ, 1);
    assert_non_null(t);
    memset(s0, 'z', sizeof s0 - 1);
    memset(t0, 'z', sizeof t0 - 1);
    assert_string_equal(look(t, "/a.foo"), "x/foo");
    /* The caller's key was not lower-cased in place. */
    assert_string_equal(s0, "zzzz");
    sl_mime_table_free(t);
}

static void test_user_table_rejects_null_strings(void **state)
{
    const char *suf[] = {".a", NULL};
    const char *typ[] = {"x/a", "x/b"};
    assert_null(sl_mime_table_new(suf, typ, 2));
    const char *suf2[] = {".a", ".b"};
    const char *typ2[] = {"x/a", NULL};
    assert_null(sl_mime_table_new(suf2, typ2, 2));
}

static void test_free_null_and_default(void **state)
{
    sl_mime_table_free(NULL);
    sl_mime_table_free((sl_mime_table *)sl_mime_default());
    assert_string_equal(look(NULL, "/a.gif"), "image/gif");
}

static void test_user_table_large(void **state)
{
    enum { N = 3000 };
    static char keys[N][16], types[N][16];
    static const char *suf[N], *typ[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], ".e%d", i);
        snprintf(types[i], sizeof types[i], "t/%d", i);
        suf[i] = keys[i];
        typ[i] = types[i];
    }
    sl_mime_table *t = sl_mime_table_new(suf, typ, N);
    assert_non_null(t);
    for (int i = 0; i < N; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dir/file.E%d", i);
        assert_string_equal(look(t, path), types[i]);
    }
    assert_string_equal(look(t, "/file.e3000"), "application/octet-stream");
    assert_string_equal(look(t, "/file.e12x"), "application/octet-stream");
    sl_mime_table_free(t);
}

/* Brute-force reference: compare every key against the end of the path. */
static const char *ref_lookup(const char *const *suf, const char *const *typ, size_t n, const char *path)
{
    size_t len = strlen(path), best_len = 0;
    const char *best = NULL, *fb = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(suf[i]);
        if (kl == 0) {
            fb = typ[i];
            continue;
        }
        if (kl <= len && strcasecmp(path + len - kl, suf[i]) == 0 && kl >= best_len) {
            best = typ[i];
            best_len = kl;
        }
    }
    if (best) return best;
    return fb ? fb : "application/octet-stream";
}

static void rand_str(char *s, size_t maxlen, unsigned *seed)
{
    static const char alpha[] = "aB./";
    size_t l = (size_t)rand_r(seed) % (maxlen + 1);
    for (size_t k = 0; k < l; k++) s[k] = alpha[rand_r(seed) % 4];
    s[l] = '\0';
}

static void test_randomized_against_brute_force(void **state)
{
    unsigned seed = 12345;
    for (int round = 0; round < 300; round++) {
        enum { N = 24 };
        char keys[N][8], types[N][8];
        const char *suf[N], *typ[N];
        size_t n = (size_t)rand_r(&seed) % N;
        for (size_t i = 0; i < n; i++) {
            rand_str(keys[i], 5, &seed);
            snprintf(types[i], sizeof types[i], "t%zu", i);
            suf[i] = keys[i];
            typ[i] = types[i];
        }
        sl_mime_table *t = sl_mime_table_new(suf, typ, n);
        assert_non_null(t);
        for (int q = 0; q < 300; q++) {
            char path[16];
            rand_str(path, 9, &seed);
            const char *want = ref_lookup(suf, typ, n, path), *got = look(t, path);
            if (strcmp(want, got) != 0) {
                print_error("round %d path \"%s\": got %s want %s\n", round, path, got, want);
                fail();
            }
        }
        sl_mime_table_free(t);
    }
}

static void *thread_default(void *arg)
{
    (void)arg;
    return (void *)sl_mime_default();
}

static void test_default_first_call_from_threads(void **state)
{
    /* Usually the table is built already by the time this test runs in-process; the check is that
     * concurrent callers all get the same fully usable table. */
    pthread_t th[8];
    void *res[8];
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&th[i], NULL, thread_default, NULL), 0);
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_join(th[i], &res[i]), 0);
    for (int i = 1; i < 8; i++) assert_ptr_equal(res[i], res[0]);
    assert_string_equal(look(res[0], "/a.webp"), "image/webp");
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_default_first_call_from_threads),
        cmocka_unit_test(test_default_types),
        cmocka_unit_test(test_default_only_len_bytes_count),
        cmocka_unit_test(test_null_table_is_default),
        cmocka_unit_test(test_default_text_types_carry_charset),
        cmocka_unit_test(test_user_table_basic),
        cmocka_unit_test(test_user_table_suffix_semantics),
        cmocka_unit_test(test_user_table_without_fallback),
        cmocka_unit_test(test_user_table_empty),
        cmocka_unit_test(test_user_table_only_fallback),
        cmocka_unit_test(test_user_table_last_duplicate_wins),
        cmocka_unit_test(test_user_table_copies_strings),
        cmocka_unit_test(test_user_table_rejects_null_strings),
        cmocka_unit_test(test_free_null_and_default),
        cmocka_unit_test(test_user_table_large),
        cmocka_unit_test(test_randomized_against_brute_force))
