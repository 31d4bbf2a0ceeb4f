/* libFuzzer target for the request-target functions of path.c: sl_uri_split, sl_path_normalize,
 * sl_path_encode, sl_host_normalize, sl_uri_reg_name, sl_uri_port and sl_ipv4_literal. Each of
 * them reads bytes a client sent before anything else looks at them.
 *
 * Input layout: byte 0 picks the default port for sl_host_normalize (its low bit: 80 or 443) and
 * a tight output size (the rest), the remaining bytes are the string every function gets. The
 * invariants are the ones path.h promises:
 *   - split: every output lies inside the input;
 *   - normalize: the result starts with '/', holds no "//", "/./", "/../", control byte or NUL,
 *     never ends in "/." or "/..", fits exactly in its length plus the NUL and is a fixed point
 *     (normalizing it again changes nothing, unless it holds a '%', which a second pass would
 *     decode); encoding it for a Location header and normalizing that gives it back;
 *   - host: the result is lower-case and a fixed point;
 *   - an IPv4 literal is also a reg-name to its end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path.h"

#define FUZZ_NAME "fuzz_path"
#include "fuzz_util.h"

#define CAP 8192

static void check_split(const char *s, size_t len)
{
    const char *path, *query, *auth;
    size_t plen, qlen, alen;
    if (sl_uri_split(s, len, &path, &plen, &query, &qlen, &auth, &alen) != 0) return;
    check(path && path >= s && (size_t)(path - s) + plen <= len, "split: path inside the target");
    check(!query ? qlen == 0 : inside(query, qlen, s, len), "split: query inside the target");
    check(alen == 0 || inside(auth, alen, s, len), "split: authority inside the target");
    for (size_t i = 0; i < plen; i++)
        check((unsigned char)path[i] > 0x20 && path[i] != 0x7f && path[i] != '#',
              "split: no control byte, space or '#' in the path");
}

static void check_normalize(const char *s, size_t len, size_t tight)
{
    static char out[CAP], again[CAP], enc[3 * CAP];
    ssize_t n = sl_path_normalize(s, len, out, sizeof out);
    if (n < 0) {
        check(n == -EINVAL || n == -ENAMETOOLONG, "normalize: only EINVAL or ENAMETOOLONG");
        return;
    }
    check((size_t)n < sizeof out && strlen(out) == (size_t)n, "normalize: length and NUL");
    check(out[0] == '/', "normalize: starts with '/'");
    check(!strstr(out, "//") && !strstr(out, "/./") && !strstr(out, "/../"),
          "normalize: no empty, '.' or '..' segment inside");
    check(!(n >= 2 && !strcmp(out + n - 2, "/.")) && !(n >= 3 && !strcmp(out + n - 3, "/..")),
          "normalize: no '.' or '..' segment at the end");
    for (ssize_t i = 0; i < n; i++)
        check((unsigned char)out[i] >= 0x20 && out[i] != 0x7f, "normalize: no control byte");

    /* Exactly its length plus the NUL is enough; one byte less is not. */
    static char fit[CAP];
    check(sl_path_normalize(s, len, fit, (size_t)n + 1) == n && !strcmp(fit, out),
          "normalize: the same result in a buffer of exactly its size");
    check(sl_path_normalize(s, len, fit, (size_t)n) == -ENAMETOOLONG,
          "normalize: ENAMETOOLONG one byte short");
    if (tight <= (size_t)n)
        check(sl_path_normalize(s, len, fit, tight) == -ENAMETOOLONG,
              "normalize: ENAMETOOLONG in any smaller buffer");

    if (!memchr(out, '%', (size_t)n)) {
        check(sl_path_normalize(out, (size_t)n, again, sizeof again) == n && !strcmp(again, out),
              "normalize: a fixed point");
    }
    ssize_t e = sl_path_encode(out, (size_t)n, enc, sizeof enc);
    check(e >= n && strlen(enc) == (size_t)e, "encode: fits in 3x and is NUL-terminated");
    for (ssize_t i = 0; i < e; i++)
        check((unsigned char)enc[i] > 0x20 && (unsigned char)enc[i] < 0x7f,
              "encode: printable ASCII only");
    check(sl_path_normalize(enc, (size_t)e, again, sizeof again) == n && !strcmp(again, out),
          "encode then normalize gives the path back");
}

static void check_host(const char *s, size_t len, unsigned port)
{
    static char out[CAP], again[CAP];
    ssize_t n = sl_host_normalize(s, len, port, out, sizeof out);
    if (n < 0) {
        check(n == -EINVAL || n == -ENAMETOOLONG, "host: only EINVAL or ENAMETOOLONG");
        return;
    }
    check(n > 0 && strlen(out) == (size_t)n, "host: non-empty, length and NUL");
    for (ssize_t i = 0; i < n; i++) check(!(out[i] >= 'A' && out[i] <= 'Z'), "host: lower-case");
    check(sl_host_normalize(out, (size_t)n, port, again, sizeof again) == n && !strcmp(again, out),
          "host: a fixed point");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > CAP) return 0;
    unsigned port = data[0] & 1 ? 443 : 80;
    size_t tight = data[0] >> 1;
    const char *s = (const char *)data + 1;
    size_t len = size - 1;

    check_split(s, len);
    check_normalize(s, len, tight);
    check_host(s, len, port);

    ssize_t r = sl_uri_reg_name(s, len);
    check(r >= -1 && r <= (ssize_t)len, "reg-name: -1 or a length within the input");
    if (r >= 0 && (size_t)r < len) check(s[r] == ':', "reg-name: stops only at ':'");
    if (sl_ipv4_literal(s, len)) check(r == (ssize_t)len, "an IPv4 literal is a reg-name");
    if (sl_uri_port(s, len) && len) {
        check(s[0] == ':', "port: starts with ':'");
        for (size_t i = 1; i < len; i++) check(s[i] >= '0' && s[i] <= '9', "port: digits");
    }
    return 0;
}
