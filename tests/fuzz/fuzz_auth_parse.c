/* libFuzzer target for the Authorization parsers of mod_auth (modules/auth_parse.c).
 *
 * The input is a field value. Both parsers run on it with a buffer of exactly len + 1 bytes
 * (what mod_auth gives them, and what the header promises always suffices) and with a random
 * smaller one (which may only make them answer -E2BIG). Invariants: the results are in the
 * documented set; what they return lies inside the buffer, is NUL-terminated and holds no control
 * character; Basic's user holds no ':'; and a result never depends on the buffer being larger
 * than needed. The same bytes also go through the username* ext-value decoder.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_parse.h"

#define FUZZ_NAME "fuzz_auth_parse"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void in_buf(const char *s, const char *buf, size_t cap)
{
    if (!s) return;
    check(s >= buf && s < buf + cap, "a value inside the buffer");
    size_t n = strnlen(s, (size_t)(buf + cap - s));
    check(s + n < buf + cap, "a value NUL-terminated inside the buffer");
    for (size_t i = 0; i < n; i++)
        check((unsigned char)s[i] >= 0x20 || s[i] == '\t', "no control character in a value");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    size_t cap = size + 1;
    char *buf = malloc(cap), *small = malloc(cap);
    if (!buf || !small) abort();
    uint32_t seed = (uint32_t)size * 2654435761u;
    for (size_t i = 0; i < size && i < 16; i++) seed = seed * 31 + data[i];
    size_t scap = cap > 1 ? rng_next(&seed) % cap : 0;

    const char *user = NULL, *pw = NULL;
    size_t ulen = 0, pwlen = 0;
    int r = sl_auth_basic_parse(v, size, buf, cap, &user, &ulen, &pw, &pwlen);
    check(r == 0 || r == -ENOENT || r == -EINVAL, "basic: result (a full buffer never E2BIG)");
    if (r == 0) {
        in_buf(user, buf, cap);
        in_buf(pw, buf, cap);
        check(strlen(user) == ulen && strlen(pw) == pwlen, "basic: lengths");
        check(!memchr(user, ':', ulen), "basic: no ':' in the user");
    }
    const char *u2, *p2;
    size_t ul2, pl2;
    int r2 = sl_auth_basic_parse(v, size, small, scap, &u2, &ul2, &p2, &pl2);
    check(r2 == r || (r2 == -E2BIG && r != -ENOENT), "basic: a smaller buffer only E2BIG");
    if (r2 == 0) check(ul2 == ulen && pl2 == pwlen && !memcmp(u2, user, ulen), "basic: same");

    sl_digest_params p, p2d;
    r = sl_auth_digest_parse(v, size, buf, cap, &p);
    check(r == 0 || r == -ENOENT || r == -EINVAL, "digest: result (a full buffer never E2BIG)");
    if (r == 0) {
        const char *const *f = (const char *const *)&p;
        for (size_t i = 0; i < sizeof p / sizeof *f; i++) in_buf(f[i], buf, cap);
    }
    r2 = sl_auth_digest_parse(v, size, small, scap, &p2d);
    check(r2 == r || (r2 == -E2BIG && r != -ENOENT), "digest: a smaller buffer only E2BIG");
    if (r2 == 0 && r == 0 && p.username)
        check(p2d.username && !strcmp(p.username, p2d.username), "digest: same username");
    /* username*: the input as a NUL-terminated ext-value */
    memcpy(small, v, size);
    small[size] = 0;
    long e = sl_auth_ext_value_decode(small, buf, cap);
    check(e == -EINVAL || (e >= 0 && (size_t)e < cap), "ext-value: result");
    if (e >= 0) {
        check(buf[e] == 0 && strlen(buf) == (size_t)e, "ext-value: NUL-terminated, no NUL inside");
        in_buf(buf, buf, cap);
    }
    free(buf);
    free(small);
    return 0;
}
