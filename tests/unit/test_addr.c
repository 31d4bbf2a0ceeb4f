/* Unit tests for server/addr.c's sl_addr_str: the numeric host of a socket address, its own
 * IPv4 formatting cross-checked against inet_ntop on every value of each octet and on random
 * addresses, IPv6, other families, short buffers, and the port. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h>

#include "addr.h"

static void expect_v4(uint32_t host_order, int port)
{
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    s4.sin_addr.s_addr = htonl(host_order);
    s4.sin_port = htons((uint16_t)port);
    char want[INET_ADDRSTRLEN], got[64];
    inet_ntop(AF_INET, &s4.sin_addr, want, sizeof want);
    memset(got, 'x', sizeof got);
    int p = -1;
    sl_addr_str((const struct sockaddr *)&s4, got, sizeof got, &p);
    if (strcmp(got, want)) fail_msg("%08x: \"%s\", want \"%s\"", host_order, got, want);
    assert_int_equal(p, port);
}

static void ipv4_matches_inet_ntop(void **state)
{
    (void)state;
    /* Every value in every octet position (one, two and three digits, 0 and 255). */
    for (unsigned v = 0; v < 256; v++)
        for (int pos = 0; pos < 4; pos++)
            expect_v4((uint32_t)v << (8 * pos) | (pos ? 0x7f : 0), (int)v * 257);
    expect_v4(0, 0);
    expect_v4(0xffffffffu, 65535);
    expect_v4(0x7f000001u, 80);
    srandom(4242);
    for (int i = 0; i < 100000; i++)
        expect_v4((uint32_t)random() ^ ((uint32_t)random() << 16), i % 65536);
}

static void ipv4_short_buffer_as_inet_ntop(void **state)
{
    (void)state;
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    s4.sin_addr.s_addr = htonl(0xc0a80101u); /* 192.168.1.1: 11 characters */
    char buf[8];
    sl_addr_str((const struct sockaddr *)&s4, buf, sizeof buf, NULL);
    /* inet_ntop refuses a buffer too small and leaves the "-" written first. */
    assert_string_equal(buf, "-");
    char fits[12];
    sl_addr_str((const struct sockaddr *)&s4, fits, sizeof fits, NULL);
    assert_string_equal(fits, "192.168.1.1");
}

static void ipv6_and_other_families(void **state)
{
    (void)state;
    struct sockaddr_in6 s6;
    memset(&s6, 0, sizeof s6);
    s6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
    s6.sin6_port = htons(8443);
    char buf[64];
    int port = 0;
    sl_addr_str((const struct sockaddr *)&s6, buf, sizeof buf, &port);
    assert_string_equal(buf, "2001:db8::1");
    assert_int_equal(port, 8443);
    inet_pton(AF_INET6, "::ffff:192.0.2.9", &s6.sin6_addr);
    sl_addr_str((const struct sockaddr *)&s6, buf, sizeof buf, NULL);
    assert_string_equal(buf, "::ffff:192.0.2.9");

    struct sockaddr_un un;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    port = 7;
    sl_addr_str((const struct sockaddr *)&un, buf, sizeof buf, &port);
    assert_string_equal(buf, "-");
    assert_int_equal(port, 0);
    char one[1] = {'x'};
    sl_addr_str((const struct sockaddr *)&un, one, sizeof one, NULL);
    assert_int_equal(one[0], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ipv4_matches_inet_ntop),
        cmocka_unit_test(ipv4_short_buffer_as_inet_ntop),
        cmocka_unit_test(ipv6_and_other_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
