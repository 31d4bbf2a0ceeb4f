/* HTTP-date (RFC 9110 §5.6.7): parsing all three formats and formatting the preferred one.
 * Pure and locale-independent; always UTC. */
#ifndef SL_HTTP_DATE_H
#define SL_HTTP_DATE_H

#include <stddef.h>
#include <time.h>

/* Length of an IMF-fixdate such as "Sun, 06 Nov 1994 08:49:37 GMT", without a terminating NUL. */
#define SL_HTTP_DATE_LEN 29

/* Parse the HTTP-date s[0..len) into *out (seconds since the epoch). Accepted, exactly and
 * case-sensitively as RFC 9110 §5.6.7 spells them, with no surrounding whitespace:
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 *   rfc850-date  "Sunday, 06-Nov-94 08:49:37 GMT"
 *   asctime-date "Sun Nov  6 08:49:37 1994" (day padded with a space or a zero)
 * A two-digit rfc850 year is the one year in [now - 49, now + 50] ending in those digits, so a date
 * more than 50 years in the future means the previous century. The day must exist in its month
 * (leap years included), hour 0-23, minute 0-59, second 0-60 (60 is a leap second and reads as
 * second 0 of the next minute, except at 9999-12-31 23:59, where the next minute is past year
 * 9999). The weekday must be a valid name but is not checked against the date. Returns 0 on
 * success, -EINVAL otherwise (*out untouched). */
int sl_http_date_parse(const char *s, size_t len, time_t *out);

/* Format t as an IMF-fixdate into buf, which must hold at least SL_HTTP_DATE_LEN + 1 bytes; the
 * result is NUL-terminated. Times outside years 0000-9999 are clamped to that range so the length
 * is always the same. Returns SL_HTTP_DATE_LEN. */
size_t sl_http_date_format(time_t t, char *buf);

#endif
