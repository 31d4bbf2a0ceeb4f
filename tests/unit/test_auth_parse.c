/* Unit tests for modules/auth_parse.c: base64, Basic credentials and Digest auth-params. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "auth_parse.h"

static long b64(const char *s, char *out, size_t cap)
{
    long n = sl_base64_decode(s, strlen(s), (unsigned char *)out, cap);
    if (n >= 0 && (size_t)n < cap) out[n] = 0;
    return n;
}

static void test_base64(void **state)
{
    static const struct {
        const char *in;
        long want;       /* bytes, or a negative errno */
        const char *out; /* what they decode to (NULL: not checked) */
    } cases[] = {
        {"YWxpY2U6cHcx", 9, "alice:pw1"},
        {"YQ==", 1, "a"},
        {"YWI=", 2, "ab"},
        {"YWI", 2, "ab"}, /* padding left out */
        {"", 0, ""},
        {"Y", -EINVAL, NULL},
        {"YW=I", -EINVAL, NULL},
        {"YWI==", -EINVAL, NULL},
        {"YW I", -EINVAL, NULL},
        {"YR==", -EINVAL, NULL}, /* bits left over */
    };
    char out[64];
    TU_EACH(c, cases) {
        assert_int_equal(b64(c->in, out, sizeof out), c->want);
        if (c->out) assert_string_equal(out, c->out);
    }
    assert_int_equal(b64("YWxpY2U6cHcx", out, 8), -E2BIG);
}

static int basic(const char *v, char *buf, size_t cap, const char **u, const char **p)
{
    size_t ul, pl;
    int r = sl_auth_basic_parse(v, strlen(v), buf, cap, u, &ul, p, &pl);
    if (r == 0) {
        assert_int_equal(ul, strlen(*u));
        assert_int_equal(pl, strlen(*p));
    }
    return r;
}

static void test_basic(void **state)
{
    char buf[128];
    const char *u, *p;
    assert_int_equal(basic("Basic YWxpY2U6cHcx", buf, sizeof buf, &u, &p), 0);
    assert_string_equal(u, "alice");
    assert_string_equal(p, "pw1");
    assert_int_equal(basic("basic   YWxpY2U6cHcx  ", buf, sizeof buf, &u, &p), 0);
    /* "a:b:c": the password keeps its colons (RFC 7617 §2) */
    assert_int_equal(basic("Basic YTpiOmM=", buf, sizeof buf, &u, &p), 0);
    assert_string_equal(u, "a");
    assert_string_equal(p, "b:c");
    /* empty user and password */
    assert_int_equal(basic("Basic Og==", buf, sizeof buf, &u, &p), 0);
    assert_string_equal(u, "");
    assert_string_equal(p, "");
    assert_int_equal(basic("Digest x=y", buf, sizeof buf, &u, &p), -ENOENT);
    assert_int_equal(basic("Basic", buf, sizeof buf, &u, &p), -ENOENT);
    assert_int_equal(basic("BasicYWxpY2U6cHcx", buf, sizeof buf, &u, &p), -ENOENT);
    assert_int_equal(basic("Basic ", buf, sizeof buf, &u, &p), -EINVAL);
    assert_int_equal(basic("Basic !!!!", buf, sizeof buf, &u, &p), -EINVAL);
    assert_int_equal(basic("Basic YWxpY2U=", buf, sizeof buf, &u, &p), -EINVAL); /* no ':' */
    assert_int_equal(basic("Basic YQphOmI=", buf, sizeof buf, &u, &p), -EINVAL); /* "a\na:b" */
    assert_int_equal(basic("Basic YWxpY2U6cHcx", buf, 5, &u, &p), -E2BIG);
}

static int digest(const char *v, sl_digest_params *p)
{
    static char buf[1024];
    return sl_auth_digest_parse(v, strlen(v), buf, strlen(v) + 1, p);
}

static void test_digest(void **state)
{
    sl_digest_params p;
    assert_int_equal(digest("Digest username=\"alice\", realm=\"r\", nonce=\"n:1\", "
                            "uri=\"/a?b=c\", algorithm=SHA-256, response=\"00ff\", qop=auth, "
                            "nc=00000001, cnonce=\"c n\", other=\"x\"", &p), 0);
    assert_string_equal(p.username, "alice");
    assert_string_equal(p.realm, "r");
    assert_string_equal(p.nonce, "n:1");
    assert_string_equal(p.uri, "/a?b=c");
    assert_string_equal(p.algorithm, "SHA-256");
    assert_string_equal(p.response, "00ff");
    assert_string_equal(p.qop, "auth");
    assert_string_equal(p.nc, "00000001");
    assert_string_equal(p.cnonce, "c n");
    assert_null(p.opaque);
    /* escapes undone, BWS around '=', names in any case, empty elements */
    assert_int_equal(digest("DIGEST ,USERNAME = \"a\\\"b\\\\\" ,, realm=\"\"", &p), 0);
    assert_string_equal(p.username, "a\"b\\");
    assert_string_equal(p.realm, "");
    assert_int_equal(digest("Basic YQ==", &p), -ENOENT);
    assert_int_equal(digest("Digest username=\"a\", username=\"b\"", &p), -EINVAL);
    assert_int_equal(digest("Digest username=\"a", &p), -EINVAL);
    assert_int_equal(digest("Digest username", &p), -EINVAL);
    assert_int_equal(digest("Digest username=a realm=b", &p), -EINVAL);
    assert_int_equal(digest("Digest =a", &p), -EINVAL);
    assert_int_equal(digest("Digest username=\"a\rb\"", &p), -EINVAL);
    char small[8];
    const char *v = "Digest username=\"abcdefghij\"";
    assert_int_equal(sl_auth_digest_parse(v, strlen(v), small, sizeof small, &p), -E2BIG);
}

static void test_ext_value(void **state)
{
    char out[64];
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''J%C3%A4s%C3%B8n%20Doe", out, sizeof out), 11);
    assert_string_equal(out, "J\xc3\xa4s\xc3\xb8n Doe");
    assert_int_equal(sl_auth_ext_value_decode("utf-8'en'abc", out, sizeof out), 3);
    assert_int_equal(sl_auth_ext_value_decode("ISO-8859-1''%E4", out, sizeof out), 1);
    assert_int_equal((unsigned char)out[0], 0xe4);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''%E4", out, sizeof out), -EINVAL); /* not UTF-8 */
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''%C0%80", out, sizeof out), -EINVAL); /* overlong */
    assert_int_equal(sl_auth_ext_value_decode("UTF-16''a", out, sizeof out), -EINVAL);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8'a", out, sizeof out), -EINVAL);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''a%0Ab", out, sizeof out), -EINVAL);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''a%4", out, sizeof out), -EINVAL);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''a b", out, sizeof out), -EINVAL);
    assert_int_equal(sl_auth_ext_value_decode("UTF-8''abcdef", out, 4), -E2BIG);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_ext_value))
