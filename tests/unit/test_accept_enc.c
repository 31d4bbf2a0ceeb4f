/* Unit tests for server/accept_enc.c: reading Accept-Encoding (RFC 9110 §12.5.3) and ordering a
 * server's codings by the client's q-values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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

static void test_plain_list_server_order(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(order("gzip, deflate, br", b, sizeof b), "br,gzip,deflate");
    assert_string_equal(order("gzip,deflate,br,zstd", b, sizeof b), "zstd,br,gzip,deflate");
    assert_string_equal(order("", b, sizeof b), "");
    assert_string_equal(order("identity", b, sizeof b), "");
}

static void test_qvalues(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(order("br;q=0.5, gzip;q=0.8", b, sizeof b), "gzip,br");
    assert_string_equal(order("gzip;q=0, br", b, sizeof b), "br");
    assert_string_equal(order("GZIP ; Q=1.000", b, sizeof b), "gzip");
    assert_string_equal(order("gzip;q=0.001, br;q=0.01", b, sizeof b), "br,gzip");
    assert_string_equal(order("x-gzip", b, sizeof b), "gzip");
}

static void test_star(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(order("*", b, sizeof b), "zstd,br,gzip,deflate");
    assert_string_equal(order("*;q=0.5, gzip", b, sizeof b), "gzip,zstd,br,deflate");
    assert_string_equal(order("*;q=0, gzip;q=0.1", b, sizeof b), "gzip");
    assert_string_equal(order("br;q=0, *", b, sizeof b), "zstd,gzip,deflate");
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
    char b[64];
    assert_string_equal(order(",,, ,", b, sizeof b), "");
    assert_string_equal(order("gzip;q=", b, sizeof b), "");
    assert_string_equal(order("gzip;q=1.001", b, sizeof b), "");
    assert_string_equal(order("gzip;q=1.", b, sizeof b), "gzip");
}

static void test_contradiction_keeps_lower(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(order("gzip, gzip;q=0", b, sizeof b), "");
    assert_string_equal(order("gzip;q=0.2, br;q=0.3, gzip;q=0.9", b, sizeof b), "br,gzip");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_list_server_order),
        cmocka_unit_test(test_qvalues),
        cmocka_unit_test(test_star),
        cmocka_unit_test(test_malformed_elements_skipped),
        cmocka_unit_test(test_contradiction_keeps_lower),
        cmocka_unit_test(test_several_lines),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
