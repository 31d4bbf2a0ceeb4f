/* Unit tests for modules/ipcount.c: keys of IPv4 and IPv6 peers, counts that come and go, and
 * several threads counting the same and different addresses at once. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "ipcount.h"

static sl_ipkey key4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return sl_ipkey_of((struct sockaddr *)&a);
}

static sl_ipkey key6(const char *ip)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return sl_ipkey_of((struct sockaddr *)&a);
}

static void test_keys(void **state)
{
    (void)state;
    sl_ipkey a = key4("192.0.2.1"), b = key6("::ffff:192.0.2.1"), c = key4("192.0.2.2");
    assert_memory_equal(&a, &b, sizeof a); /* mapped: the same client */
    assert_memory_not_equal(&a, &c, sizeof a);
    struct sockaddr un = {.sa_family = AF_UNIX};
    sl_ipkey z = sl_ipkey_of(&un), zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&z, &zero, sizeof z);
}

static void test_counts_come_and_go(void **state)
{
    (void)state;
    sl_ipcount *t = sl_ipcount_new();
    assert_non_null(t);
    sl_ipkey a = key4("10.0.0.1"), b = key6("2001:db8::1");
    assert_int_equal(sl_ipcount_inc(t, &a), 1);
    assert_int_equal(sl_ipcount_inc(t, &a), 2);
    assert_int_equal(sl_ipcount_inc(t, &b), 1);
    assert_int_equal(sl_ipcount_get(t, &a), 2);
    assert_int_equal(sl_ipcount_size(t), 2);
    sl_ipcount_dec(t, &a);
    sl_ipcount_dec(t, &a);
    assert_int_equal(sl_ipcount_get(t, &a), 0);
    assert_int_equal(sl_ipcount_size(t), 1); /* forgotten at zero */
    sl_ipcount_dec(t, &a);                   /* unknown: nothing happens */
    assert_int_equal(sl_ipcount_get(t, &b), 1);
    /* Many addresses: the buckets grow and give back. */
    for (int i = 0; i < 5000; i++) {
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000u + i)};
        sl_ipkey k = sl_ipkey_of((struct sockaddr *)&s);
        assert_int_equal(sl_ipcount_inc(t, &k), 1); /* 10.0.0.1 (a) was forgotten */
    }
    assert_int_equal(sl_ipcount_size(t), 5001);
    for (int i = 0; i < 5000; i++) {
        struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000000u + i)};
        sl_ipkey k = sl_ipkey_of((struct sockaddr *)&s);
        sl_ipcount_dec(t, &k);
    }
    assert_int_equal(sl_ipcount_size(t), 1);
    sl_ipcount_free(t);
}

static sl_ipcount *shared;

static void *worker(void *arg)
{
    sl_ipkey own = key4(arg), common = key4("203.0.113.9");
    for (int i = 0; i < 20000; i++) {
        sl_ipcount_inc(shared, &common);
        sl_ipcount_inc(shared, &own);
        sl_ipcount_dec(shared, &own);
        sl_ipcount_dec(shared, &common);
    }
    sl_ipcount_inc(shared, &common);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    shared = sl_ipcount_new();
    static const char *ips[] = {"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)ips[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    sl_ipkey common = key4("203.0.113.9");
    assert_int_equal(sl_ipcount_get(shared, &common), 4);
    assert_int_equal(sl_ipcount_size(shared), 1);
    sl_ipcount_free(shared);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_counts_come_and_go),
        cmocka_unit_test(test_threads))
