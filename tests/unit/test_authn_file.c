/* Unit tests for modules/authn_file.c: every htpasswd hash form against hashes made by other
 * tools (openssl passwd, Python's crypt), user files of the three backends as lighttpd reads
 * them, and the Digest HA1. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "authn_file.h"

static int verify(const char *hash, const char *pw)
{
    return sl_authn_htpasswd_verify(hash, strlen(hash), pw, strlen(pw));
}

static void test_hash_forms(void **state)
{
    /* openssl passwd -apr1 / -1 / -5 / -6 -salt abcdefgh pw1 */
    assert_int_equal(verify("$apr1$abcdefgh$VDRNIfeXktYVAN7OPI/sv.", "pw1"), 0);
    assert_int_equal(verify("$apr1$abcdefgh$VDRNIfeXktYVAN7OPI/sv.", "pw2"), -EACCES);
    assert_int_equal(verify("$apr1$abc$77rKqJqY.58.YAtshgYSi1", "a much longer password than sixteen"), 0);
    assert_int_equal(verify("$1$abcdefgh$CSewKYDMd6dmHkTqkKYk60", "pw1"), 0);
    assert_int_equal(verify("$1$abcdefgh$CSewKYDMd6dmHkTqkKYk60", "pw1 "), -EACCES);
    assert_int_equal(verify("$5$abcdefgh$039Hv/0gWTexVhFwOZ16ap1QTskv.omwfoTWcF1l/O9", "pw1"), 0);
    assert_int_equal(verify("$6$abcdefgh$BOw/nV5aU2HJ8o7otKMCN5S.MoSoxPoAUYewKjq5oSqs8UMghGB3x4G4"
                            "HaPK7NZqL54npGT9hs/qRSokU.4Qt/", "pw1"), 0);
    /* Python crypt, bcrypt cost 4; $2y$ is the same hash under PHP's name (htpasswd -B) */
    assert_int_equal(verify("$2b$04$abcdefghijklmnopqrstuuSobTDCMkZHnWLmZeKa3Bxa0pIPYZhv6", "pw3"), 0);
    assert_int_equal(verify("$2y$04$abcdefghijklmnopqrstuuSobTDCMkZHnWLmZeKa3Bxa0pIPYZhv6", "pw3"), 0);
    assert_int_equal(verify("$2y$04$abcdefghijklmnopqrstuuSobTDCMkZHnWLmZeKa3Bxa0pIPYZhv6", "pw4"), -EACCES);
    /* {SHA}: base64 of SHA-1 */
    assert_int_equal(verify("{SHA}qxNml/j2V32C481Qd+/9XSOxmfo=", "pw4"), 0);
    assert_int_equal(verify("{SHA}qxNml/j2V32C481Qd+/9XSOxmfo=", "pw3"), -EACCES);
    assert_int_equal(verify("{SHA}qxNml", "pw4"), -EINVAL);
    /* nothing that could match */
    assert_int_equal(verify("short", "short"), -EINVAL);
    assert_int_equal(verify("$9$not-a-method-libcrypt-has", "x"), -EINVAL);
}

/* The apr1 code (composed here from EVP MD5) against Apache's format as `openssl passwd -apr1
 * -salt Zx9.z/Q1` makes it: passwords around the 16-byte blocks of the algorithm, and UTF-8. */
static void test_apr1_vectors(void **state)
{
    static const char *const v[][2] = {
        {"a", "$apr1$Zx9.z/Q1$MLszW4Qcy0cR3qA026EG9."},
        {"abcdefghijklmnop", "$apr1$Zx9.z/Q1$Q1/0HQHCZyohYAds5sCn7/"},
        {"abcdefghijklmnopq", "$apr1$Zx9.z/Q1$7czYNTVILNJyDvf5PUCrU1"},
        {"p\xc3\xa4ssw\xc3\xb6rd", "$apr1$Zx9.z/Q1$NVFQjsbzZ7xfTKkDVVknp0"},
        {"0123456789012345678901234567890123456789x", "$apr1$Zx9.z/Q1$9mZd8OKqrVd9FnGPuzbPY0"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_int_equal(verify(v[i][1], v[i][0]), 0);
        assert_int_equal(verify(v[i][1], "b"), -EACCES);
    }
}

static char dir[] = "/tmp/sl_authn_XXXXXX";

static const char *file_with(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_put(dir, name, text);
    return path;
}

static int basic(sl_authn_backend b, const char *file, const char *user, const char *realm,
                 int algo, const char *pw)
{
    sl_authn_query q = {.backend = b, .file = file, .user = user, .ulen = strlen(user),
                        .realm = realm, .algo = algo};
    return sl_authn_basic(&q, pw, strlen(pw));
}

static void test_plain_and_htpasswd_files(void **state)
{
    char long_line[2000];
    memset(long_line, 'x', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = 0;
    char text[4096];
    snprintf(text, sizeof text, "# comment\n\nalice:pw1\r\n%s:y\nbob:pw:with:colons\nalice:second\ncarol:", long_line);
    const char *f = file_with("plain", text);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "alice", "r", SL_DIGEST_MD5, "pw1"), 0);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "alice", "r", SL_DIGEST_MD5, "second"), -EACCES);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "bob", "r", SL_DIGEST_MD5, "pw:with:colons"), 0);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "carol", "r", SL_DIGEST_MD5, ""), 0); /* last line, no LF */
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "# comment", "r", SL_DIGEST_MD5, ""), -ENOKEY);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "eve", "r", SL_DIGEST_MD5, "pw1"), -ENOKEY);
    assert_int_equal(basic(SL_AUTHN_PLAIN, f, "ali", "r", SL_DIGEST_MD5, "pw1"), -ENOKEY);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none", dir);
    assert_int_equal(basic(SL_AUTHN_PLAIN, missing, "alice", "r", SL_DIGEST_MD5, "pw1"), -ENOENT);
    assert_int_equal(basic(SL_AUTHN_NONE, f, "alice", "r", SL_DIGEST_MD5, "pw1"), -EPERM);

    f = file_with("htpasswd", "alice:$apr1$abcdefgh$VDRNIfeXktYVAN7OPI/sv.\n"
                              "dave:{SHA}qxNml/j2V32C481Qd+/9XSOxmfo=\r\n"
                              "odd:not a hash\n");
    assert_int_equal(basic(SL_AUTHN_HTPASSWD, f, "alice", "r", 0, "pw1"), 0);
    assert_int_equal(basic(SL_AUTHN_HTPASSWD, f, "alice", "r", 0, "pw2"), -EACCES);
    assert_int_equal(basic(SL_AUTHN_HTPASSWD, f, "dave", "r", 0, "pw4"), 0);
    assert_int_equal(basic(SL_AUTHN_HTPASSWD, f, "odd", "r", 0, "not a hash"), -EACCES);
    /* htpasswd keeps no digest */
    unsigned char ha1[SL_DIGEST_MAX];
    sl_authn_query q = {.backend = SL_AUTHN_HTPASSWD, .file = f, .user = "alice", .ulen = 5,
                        .realm = "r", .algo = SL_DIGEST_MD5};
    assert_int_equal(sl_authn_digest_ha1(&q, ha1), -EPERM);
}

static void hexof(int algo, const char *s, char *out)
{
    unsigned char d[SL_DIGEST_MAX];
    const char *parts[1] = {s};
    size_t lens[1] = {strlen(s)};
    assert_int_equal(sl_digest_hash(algo, d, parts, lens, 1), 0);
    sl_hex(d, sl_digest_len(algo), out);
}

static void test_htdigest_and_ha1(void **state)
{
    char md5[65], sha[65], text[512];
    hexof(SL_DIGEST_MD5, "alice:r:pw1", md5);
    hexof(SL_DIGEST_SHA256, "alice:r:pw1", sha);
    /* the MD5 of "alice:r:pw1" as md5sum prints it: sl_digest_hash joins with ':' itself */
    char joined[65];
    unsigned char d[SL_DIGEST_MAX];
    const char *parts[3] = {"alice", "r", "pw1"};
    size_t lens[3] = {5, 1, 3};
    sl_digest_hash(SL_DIGEST_MD5, d, parts, lens, 3);
    sl_hex(d, 16, joined);
    assert_string_equal(joined, md5);
    snprintf(text, sizeof text, "alice:other:%s\nalice:r:%s\nalice:r:%s:userhash\n", md5, md5, sha);
    const char *f = file_with("htdigest", text);
    assert_int_equal(basic(SL_AUTHN_HTDIGEST, f, "alice", "r", SL_DIGEST_MD5, "pw1"), 0);
    assert_int_equal(basic(SL_AUTHN_HTDIGEST, f, "alice", "r", SL_DIGEST_SHA256, "pw1"), 0);
    assert_int_equal(basic(SL_AUTHN_HTDIGEST, f, "alice", "r", SL_DIGEST_MD5, "pw2"), -EACCES);
    assert_int_equal(basic(SL_AUTHN_HTDIGEST, f, "alice", "nope", SL_DIGEST_MD5, "pw1"), -ENOKEY);
    unsigned char ha1[SL_DIGEST_MAX];
    char hex[65];
    sl_authn_query q = {.backend = SL_AUTHN_HTDIGEST, .file = f, .user = "alice", .ulen = 5,
                        .realm = "r", .algo = SL_DIGEST_SHA256};
    assert_int_equal(sl_authn_digest_ha1(&q, ha1), 0);
    sl_hex(ha1, 32, hex);
    assert_string_equal(hex, sha);
    /* plain: computed from the password */
    f = file_with("plain2", "alice:pw1\n");
    q = (sl_authn_query){.backend = SL_AUTHN_PLAIN, .file = f, .user = "alice", .ulen = 5,
                         .realm = "r", .algo = SL_DIGEST_MD5};
    assert_int_equal(sl_authn_digest_ha1(&q, ha1), 0);
    sl_hex(ha1, 16, hex);
    assert_string_equal(hex, md5);
    q.user = "bob";
    q.ulen = 3;
    assert_int_equal(sl_authn_digest_ha1(&q, ha1), -ENOKEY);
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    return tu_rmtree(dir);
}

TU_MAIN(setup, teardown,
        cmocka_unit_test(test_hash_forms),
        cmocka_unit_test(test_apr1_vectors),
        cmocka_unit_test(test_plain_and_htpasswd_files),
        cmocka_unit_test(test_htdigest_and_ha1))
