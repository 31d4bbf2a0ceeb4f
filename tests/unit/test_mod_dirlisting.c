/* mod_dirlisting: the size column's text matches lighttpd's listing for the same sizes (the
 * comparison with lighttpd itself is in test_lighttpd_gw's dirlisting case; the listing as a
 * whole in tests/integration/test_dirlisting.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "testutil.h"

#include "mod_dirlisting.h"

static void test_size_text(void **state)
{
    (void)state;
    static const struct {
        long long size;
        const char *text;
    } cases[] = {
        {0, "0.0K"},           {1, "0.1K"},          {99, "0.1K"},        {100, "0.1K"},
        {1023, "0.9K"},        {1024, "1.0K"},       {5000, "4.9K"},      {3000, "2.9K"},
        {200000, "195.3K"},    {1023999, "999.9K"},  {1024000, "0.9M"},   {1048576, "1.0M"},
        {1073741824LL, "1.0G"}, {5LL << 40, "5.0T"},  {7LL << 50, "7.0P"},  {3LL << 60, "3.0E"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        sl_dirlist_size_text(out, sizeof out, (off_t)cases[i].size);
        assert_string_equal(out, cases[i].text);
    }
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_size_text))
