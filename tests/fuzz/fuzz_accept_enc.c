/* libFuzzer target for the Accept-Encoding reader (server/accept_enc.c).
 *
 * The input is one field value. Checked: every q-value kept is -1 or 0..1000, the elements
 * understood plus the malformed ones never exceed the commas + 1, and sl_ae_order returns only
 * codings offered, each once, with a q-value above 0, in non-increasing q-value order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept_enc.h"

#define FUZZ_NAME "fuzz_accept_enc"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    sl_ae_prefs p;
    size_t n = sl_ae_parse_value(v, size, &p);
    size_t commas = 0;
    for (size_t i = 0; i < size; i++) commas += v[i] == ',';
    check(n + p.bad <= commas + 1, "elements <= commas + 1");
    for (int e = 0; e < SL_ENC_N; e++) check(p.q[e] >= -1 && p.q[e] <= 1000, "q range");
    check(p.identity >= -1 && p.identity <= 1000 && p.star >= -1 && p.star <= 1000, "q range");
    const sl_encoding offer[SL_ENC_N] = {SL_ENC_ZSTD, SL_ENC_BR, SL_ENC_GZIP, SL_ENC_DEFLATE};
    sl_encoding out[SL_ENC_N];
    size_t k = sl_ae_order(&p, offer, SL_ENC_N, out);
    check(k <= SL_ENC_N, "k <= offered");
    for (size_t i = 0; i < k; i++) {
        check(sl_ae_quality(&p, out[i]) > 0, "only acceptable codings");
        if (i) check(sl_ae_quality(&p, out[i - 1]) >= sl_ae_quality(&p, out[i]), "q order");
        for (size_t j = 0; j < i; j++) check(out[j] != out[i], "each once");
    }
    /* The field's lines read together equal the joined value's reading. */
    sl_http_header h = {.name = "Accept-Encoding", .name_len = 15, .value = v, .value_len = size};
    sl_ae_prefs p2;
    check(sl_ae_parse(&h, &p2) == n && memcmp(&p, &p2, sizeof p) == 0, "one line == value");
    return 0;
}
