/* libFuzzer target for the forwarding headers mod_extforward reads (modules/xf_parse.c):
 * X-Forwarded-For lists and RFC 7239 Forwarded elements, which any client can send (only a
 * trusted proxy's are believed, but every one is parsed to find out).
 *
 * Input layout: byte 0 picks the trusted proxies (none, loopback addresses, everyone), the rest
 * is the field value. The invariants:
 *   - an answer is an IPv4 or IPv6 address that is not trusted; with everyone trusted there is
 *     never one; a scheme is NULL, "http" or "https";
 *   - with nobody trusted, an X-Forwarded-For answer is exactly the rightmost non-empty element
 *     (its SP/HTAB trimmed) read as an address, and there is one exactly when that element is a
 *     numeric address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xf_parse.h"

#define FUZZ_NAME "fuzz_xf"
#include "fuzz_util.h"

static bool trust_loopback(const void *arg, const struct sockaddr *sa)
{
    (void)arg;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    return sa->sa_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static bool trust_none(const void *arg, const struct sockaddr *sa)
{
    (void)arg;
    (void)sa;
    return false;
}

static bool trust_all(const void *arg, const struct sockaddr *sa)
{
    (void)arg;
    (void)sa;
    return true;
}

static void check_answer(int r, const struct sockaddr_storage *out, sl_xf_trusted t)
{
    if (r != 0) return;
    check(out->ss_family == AF_INET || out->ss_family == AF_INET6, "answer: an IP address");
    check(!t(NULL, (const struct sockaddr *)out), "answer: not a trusted proxy");
    check(t != trust_all, "answer: none when everyone is trusted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const sl_xf_trusted tests[] = {trust_none, trust_loopback, trust_all};
    sl_xf_trusted t = tests[data[0] % 3];
    const char *v = (const char *)data + 1;
    size_t len = size - 1;

    struct sockaddr_storage out, want;
    int r = sl_xf_client(v, len, t, NULL, &out);
    check(r == 0 || r == -1, "X-Forwarded-For: 0 or -1");
    check_answer(r, &out, t);
    if (t == trust_none) {
        /* The rightmost non-empty element, found independently. */
        size_t end = len;
        for (;;) {
            size_t start = end;
            while (start > 0 && v[start - 1] != ',') start--;
            size_t a = start, b = end;
            while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
            while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
            if (a < b) {
                int w = sl_xf_node_addr(v + a, b - a, &want);
                check((w == 0) == (r == 0), "X-Forwarded-For: the rightmost element decides");
                if (w == 0) check(!memcmp(&want, &out, sizeof want), "X-Forwarded-For: its address");
                break;
            }
            if (start == 0) {
                check(r == -1, "X-Forwarded-For: no element, no answer");
                break;
            }
            end = start - 1;
        }
    }

    const char *scheme = NULL;
    r = sl_xf_forwarded_client(v, len, t, NULL, &out, &scheme);
    check(r == 0 || r == -1, "Forwarded: 0 or -1");
    check_answer(r, &out, t);
    check(!scheme || !strcmp(scheme, "http") || !strcmp(scheme, "https"),
          "Forwarded: scheme http, https or none");
    if (r != 0) check(!scheme, "Forwarded: no scheme without a client");
    return 0;
}
