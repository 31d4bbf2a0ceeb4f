/* Unit tests for modules/xf_parse.c: the client address in X-Forwarded-For and RFC 7239
 * Forwarded values, with trusted proxies decided by a test of the caller's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "xf_parse.h"

/* Trusted: 10.0.0.0/8 and ::1. */
static bool trust_tens(const void *arg, const struct sockaddr *sa)
{
    (void)arg;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 10;
    return sa->sa_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* The address in out as text ("" when none). */
static const char *str(const struct sockaddr_storage *out)
{
    static char buf[INET6_ADDRSTRLEN];
    const void *a = out->ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)out)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)out)->sin6_addr;
    if (!inet_ntop(out->ss_family, a, buf, sizeof buf)) buf[0] = 0;
    return buf;
}

static const char *xff(const char *v)
{
    struct sockaddr_storage out;
    if (sl_xf_client(v, strlen(v), trust_tens, NULL, &out) != 0) return NULL;
    return str(&out);
}

static const char *fwd(const char *v, const char **scheme)
{
    struct sockaddr_storage out;
    *scheme = NULL;
    if (sl_xf_forwarded_client(v, strlen(v), trust_tens, NULL, &out, scheme) != 0) return NULL;
    return str(&out);
}

static void test_node_addr(void **state)
{
    (void)state;
    struct sockaddr_storage out;
    assert_int_equal(sl_xf_node_addr("192.0.2.1", 9, &out), 0);
    assert_string_equal(str(&out), "192.0.2.1");
    assert_int_equal(sl_xf_node_addr("192.0.2.1:8080", 14, &out), 0);
    assert_string_equal(str(&out), "192.0.2.1");
    assert_int_equal(sl_xf_node_addr("[2001:db8::1]:443", 17, &out), 0);
    assert_string_equal(str(&out), "2001:db8::1");
    assert_int_equal(sl_xf_node_addr("2001:db8::1", 11, &out), 0);
    assert_true(sl_xf_node_addr("[2001:db8::1", 12, &out) < 0);
    assert_true(sl_xf_node_addr("unknown", 7, &out) < 0);
    assert_true(sl_xf_node_addr("_hidden", 7, &out) < 0);
    assert_true(sl_xf_node_addr("", 0, &out) < 0);
    assert_true(sl_xf_node_addr("example.com", 11, &out) < 0);
}

static void test_x_forwarded_for(void **state)
{
    (void)state;
    assert_string_equal(xff("192.0.2.1"), "192.0.2.1");
    /* From the right: trusted proxies are passed over, the first other address is the client. */
    assert_string_equal(xff("198.51.100.9, 192.0.2.1, 10.0.0.2, 10.1.1.1"), "192.0.2.1");
    /* What the client wrote left of it is not believed. */
    assert_string_equal(xff("127.0.0.1, 192.0.2.1"), "192.0.2.1");
    assert_string_equal(xff(" \t,192.0.2.1 ,, \t"), "192.0.2.1");
    assert_string_equal(xff("2001:db8::7,::1"), "2001:db8::7");
    assert_null(xff("10.0.0.1, 10.0.0.2"));        /* all trusted */
    assert_null(xff("192.0.2.1, unknown, 10.0.0.2")); /* not an address on the way: stop */
    assert_null(xff(""));
    assert_null(xff(" , ,"));
}

static void test_forwarded(void **state)
{
    (void)state;
    const char *scheme;
    assert_string_equal(fwd("for=192.0.2.43", &scheme), "192.0.2.43");
    assert_null(scheme);
    assert_string_equal(fwd("for=192.0.2.43;proto=https, for=10.0.0.3;proto=http", &scheme),
                        "192.0.2.43");
    assert_string_equal(scheme, "https");
    assert_string_equal(fwd("For=\"[2001:db8:cafe::17]:4711\";Proto=HTTP", &scheme),
                        "2001:db8:cafe::17");
    assert_string_equal(scheme, "http");
    /* Commas inside quoted strings do not split elements; escapes are undone. */
    assert_string_equal(fwd("for=192.0.2.5;by=\"a,b\\\"c\", for=10.9.9.9", &scheme),
                        "192.0.2.5");
    assert_null(scheme);
    assert_string_equal(fwd("for=192.0.2.5;proto=ftp", &scheme), "192.0.2.5");
    assert_null(scheme);
    assert_null(fwd("for=unknown, for=10.0.0.1", &scheme));
    assert_null(fwd("for=\"_hidden\"", &scheme));
    assert_null(fwd("by=192.0.2.1", &scheme)); /* no for= */
    assert_null(fwd("for=10.0.0.1;proto=https", &scheme)); /* only trusted */
    assert_null(scheme);
    assert_null(fwd("for=\"192.0.2.1", &scheme)); /* an unterminated quote */
    /* A quoted string a client left open would swallow what its proxy appended. */
    assert_null(fwd("for=192.0.2.1;x=\", for=198.51.100.7", &scheme));
    /* 64 elements are read, 65 are refused. */
    char many[2048] = "for=192.0.2.9";
    for (int i = 0; i < 63; i++) strcat(many, ", for=10.0.0.1");
    assert_string_equal(fwd(many, &scheme), "192.0.2.9");
    strcat(many, ", for=10.0.0.1");
    assert_null(fwd(many, &scheme));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_node_addr),
        cmocka_unit_test(test_x_forwarded_for),
        cmocka_unit_test(test_forwarded))
