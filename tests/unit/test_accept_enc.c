/* Unit tests for server/accept_enc.c: reading Accept-Encoding (RFC 9110 §12.5.3) and ordering a
 * server's codings by the client's q-values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "accept_enc.h"

static const sl_encoding offer[] = {SL_ENC_ZSTD, SL_ENC_BR, SL_ENC_GZIP, SL_ENC_DEFLATE};

/* The codings chosen for value v, as "zstd,br,..." */
static const char *order(const char *v, char *buf, size_t cap)
{
    sl_ae_prefs p;
    sl_ae_parse_value(v, strlen(v), &p);
    sl_encoding out[SL_ENC_N];
    size_t n = sl_ae_order(&p, offer, SL_ENC_N, out);
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) strncat(buf, ",", cap - strlen(buf) - 1);
        strncat(buf, sl_encoding_name(out[i]), cap - strlen(buf) - 1);
    }
    return buf;
}

/* Accept-Encoding values and the codings each must choose, in order. */
static const struct tu_strs orders[] = {
    /* A plain list: the server's order of what the client takes. */
    {"gzip, deflate, br", "br,gzip,deflate"},
    {"gzip,deflate,br,zstd", "zstd,br,gzip,deflate"},
    {"", ""},
    {"identity", ""},
    /* q-values order the codings; q=0 refuses one; x-gzip is gzip. */
    {"br;q=0.5, gzip;q=0.8", "gzip,br"},
    {"gzip;q=0, br", "br"},
    {"GZIP ; Q=1.000", "gzip"},
    {"gzip;q=0.001, br;q=0.01", "br,gzip"},
    {"x-gzip", "gzip"},
    /* "*" stands for every coding not named. */
    {"*", "zstd,br,gzip,deflate"},
    {"*;q=0.5, gzip", "gzip,zstd,br,deflate"},
    {"*;q=0, gzip;q=0.1", "gzip"},
    {"br;q=0, *", "zstd,gzip,deflate"},
    /* Malformed elements are skipped. */
    {",,, ,", ""},
    {"gzip;q=", ""},
    {"gzip;q=1.001", ""},
    {"gzip;q=1.", "gzip"},
    /* A coding named twice keeps the lower q-value. */
    {"gzip, gzip;q=0", ""},
    {"gzip;q=0.2, br;q=0.3, gzip;q=0.9", "br,gzip"},
};

static void test_orders(void **state)
{
    (void)state;
    char b[64];
    TU_EACH(c, orders)
        if (strcmp(order(c->in, b, sizeof b), c->want))
            fail_msg("Accept-Encoding \"%s\": chose \"%s\", want \"%s\"", c->in, b, c->want);
}

static void test_malformed_elements_skipped(void **state)
{
    (void)state;
    sl_ae_prefs p;
    const char *v = "gzip;q=2, br;q=0.5x, ;;, zstd;level=3, deflate;q=0.1234, \"x\", br";
    size_t n = sl_ae_parse_value(v, strlen(v), &p);
    assert_int_equal(n, 1); /* only the last "br" */
    assert_int_equal(p.bad, 6);
    assert_int_equal(sl_ae_quality(&p, SL_ENC_BR), 1000);
    assert_int_equal(sl_ae_quality(&p, SL_ENC_GZIP), 0);
}

static void test_several_lines(void **state)
{
    (void)state;
    sl_http_header h2 = {.name = "Accept-Encoding", .name_len = 15, .value = "br;q=0",
                         .value_len = 6};
    sl_http_header h1 = {.name = "Accept-Encoding", .name_len = 15, .value = "gzip, br",
                         .value_len = 8, .next = &h2};
    sl_ae_prefs p;
    assert_int_equal(sl_ae_parse(&h1, &p), 3);
    assert_int_equal(sl_ae_quality(&p, SL_ENC_BR), 0);
    assert_int_equal(sl_ae_quality(&p, SL_ENC_GZIP), 1000);
    assert_int_equal(sl_ae_parse(NULL, &p), 0);
    assert_int_equal(sl_ae_quality(&p, SL_ENC_GZIP), 0);
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(sl_encoding_from_name("Br", 2), SL_ENC_BR);
    assert_int_equal(sl_encoding_from_name("zstd", 4), SL_ENC_ZSTD);
    assert_int_equal(sl_encoding_from_name("compress", 8), -1);
    assert_null(sl_encoding_name(SL_ENC_N));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_orders),
        cmocka_unit_test(test_malformed_elements_skipped),
        cmocka_unit_test(test_several_lines),
        cmocka_unit_test(test_names))
