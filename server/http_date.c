/* HTTP-date parsing and formatting (RFC 9110 §5.6.7).
 *
 * Each of the three formats has a fixed layout, so parsing is a positional match against it, by
 * hand rather than with strptime, whose month and day names follow the locale. Calendar arithmetic
 * is done here too, on a proleptic Gregorian day count from 0000-01-01, instead of through
 * timegm/gmtime_r: it needs no time zone state, cannot fail for years 0000-9999, and makes
 * formatting and parsing exact inverses of each other, which the unit tests check.
 */
#include "http_date.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define SECS_PER_DAY 86400LL

static const char *const wkday[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const weekday[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                       "Thursday", "Friday", "Saturday"};
static const char *const month_name[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
/* Days before the first of each month in a common year. */
static const int month_start[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};

static bool is_leap(long long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(long long y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 1 && is_leap(y) ? 29 : dim[m];
}

/* Days from 0000-01-01 to y-01-01, for 0 <= y <= 10000. Year 0 is a leap year (proleptic). */
static long long days_before_year(long long y)
{
    if (y <= 0) return 0;
    long long p = y - 1;
    return 365 * y + 1 + p / 4 - p / 100 + p / 400;
}

static long long epoch_days(void)
{
    return days_before_year(1970);
}

/* The last second an HTTP-date can spell, 9999-12-31 23:59:59, in seconds since the epoch. */
static long long last_second(void)
{
    return (days_before_year(10000) - epoch_days()) * SECS_PER_DAY - 1;
}

/* Seconds since the epoch of a validated date and time; month 0-11. */
static long long to_epoch(long long y, int mon, int day, int h, int mi, int s)
{
    long long days = days_before_year(y) + month_start[mon] + (mon > 1 && is_leap(y)) + day - 1;
    return (days - epoch_days()) * SECS_PER_DAY + h * 3600LL + mi * 60LL + s;
}

/* The year containing day number d (counted from 0000-01-01, 0 <= d < days_before_year(10000)). */
static long long year_of(long long d)
{
    /* 146097 days per 400 years gives an estimate off by at most one either way. */
    long long y = d * 400 / 146097;
    while (y > 0 && days_before_year(y) > d)
        y--;
    while (days_before_year(y + 1) <= d)
        y++;
    return y;
}

/* n decimal digits at s, or -1 if any is not a digit. */
static int digits(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int find_name(const char *s, size_t n, const char *const *names, int count)
{
    for (int i = 0; i < count; i++) {
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) return i;
    }
    return -1;
}

/* "HH:MM:SS" at s. */
static bool parse_time(const char *s, int *h, int *mi, int *sec)
{
    if (s[2] != ':' || s[5] != ':') return false;
    *h = digits(s, 2);
    *mi = digits(s + 3, 2);
    *sec = digits(s + 6, 2);
    return *h >= 0 && *h <= 23 && *mi >= 0 && *mi <= 59 && *sec >= 0 && *sec <= 60;
}

/* RFC 9110 §5.6.7: a two-digit year more than 50 years in the future means the most recent past
 * year with those digits, so it is read in the 100-year window ending 50 years from now. */
static long long expand_year(int yy)
{
    long long now_days = (long long)time(NULL) / SECS_PER_DAY + epoch_days();
    if (now_days < 0) now_days = 0;
    if (now_days >= days_before_year(10000)) now_days = days_before_year(10000) - 1;
    long long cur = year_of(now_days);
    /* The one year in [cur - 49, cur + 50] that ends in yy. */
    long long base = cur - 49;
    return base + ((yy - base % 100) % 100 + 100) % 100;
}

int sl_http_date_parse(const char *s, size_t len, time_t *out)
{
    long long year;
    int mon, day, h, mi, sec;

    if (len < 4) return -EINVAL;
    if (s[3] == ',') {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (len != 29 || find_name(s, 3, wkday, 7) < 0 || s[4] != ' ' || s[7] != ' ' ||
            s[11] != ' ' || s[16] != ' ' || s[25] != ' ' || memcmp(s + 26, "GMT", 3) != 0)
            return -EINVAL;
        day = digits(s + 5, 2);
        mon = find_name(s + 8, 3, month_name, 12);
        year = digits(s + 12, 4);
        if (!parse_time(s + 17, &h, &mi, &sec)) return -EINVAL;
    } else if (s[3] == ' ') {
        /* asctime-date: "Sun Nov  6 08:49:37 1994" */
        if (len != 24 || find_name(s, 3, wkday, 7) < 0 || s[7] != ' ' || s[10] != ' ' ||
            s[19] != ' ')
            return -EINVAL;
        mon = find_name(s + 4, 3, month_name, 12);
        day = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
        year = digits(s + 20, 4);
        if (!parse_time(s + 11, &h, &mi, &sec)) return -EINVAL;
    } else {
        /* rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT" */
        const char *comma = memchr(s, ',', len);
        if (!comma) return -EINVAL;
        size_t nl = (size_t)(comma - s);
        if (find_name(s, nl, weekday, 7) < 0 || len - nl != 24) return -EINVAL;
        const char *r = comma;
        if (r[1] != ' ' || r[4] != '-' || r[8] != '-' || r[11] != ' ' || r[20] != ' ' ||
            memcmp(r + 21, "GMT", 3) != 0)
            return -EINVAL;
        day = digits(r + 2, 2);
        mon = find_name(r + 5, 3, month_name, 12);
        int yy = digits(r + 9, 2);
        if (yy < 0) return -EINVAL;
        year = expand_year(yy);
        if (!parse_time(r + 12, &h, &mi, &sec)) return -EINVAL;
    }
    if (mon < 0 || year < 0 || day < 1 || day > days_in_month(year, mon)) return -EINVAL;
    long long t = to_epoch(year, mon, day, h, mi, sec);
    /* A leap second on 9999-12-31 reads as 10000-01-01, which no HTTP-date can spell: refuse it,
     * so that every time this accepts formats back to itself (fuzz_precond's round trip). */
    if (t > last_second()) return -EINVAL;
    *out = (time_t)t;
    return 0;
}

static void put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

size_t sl_http_date_format(time_t t, char *buf)
{
    long long min = -epoch_days() * SECS_PER_DAY;
    long long max = last_second();
    long long x = (long long)t;
    if (x < min) x = min;
    if (x > max) x = max;

    /* Shift to the 0000-01-01 origin so that every division below is on a non-negative number. */
    long long since0 = x - min;
    long long d = since0 / SECS_PER_DAY;
    int secs = (int)(since0 % SECS_PER_DAY);
    long long y = year_of(d);
    int doy = (int)(d - days_before_year(y));
    int mon = 11;
    while (month_start[mon] + (mon > 1 && is_leap(y)) > doy)
        mon--;
    int mday = doy - month_start[mon] - (mon > 1 && is_leap(y)) + 1;
    /* 0000-01-01 was a Saturday in the proleptic Gregorian calendar. */
    int wd = (int)((d + 6) % 7);

    memcpy(buf, wkday[wd], 3);
    memcpy(buf + 3, ", ", 2);
    put2(buf + 5, mday);
    buf[7] = ' ';
    memcpy(buf + 8, month_name[mon], 3);
    buf[11] = ' ';
    put2(buf + 12, (int)(y / 100));
    put2(buf + 14, (int)(y % 100));
    buf[16] = ' ';
    put2(buf + 17, secs / 3600);
    buf[19] = ':';
    put2(buf + 20, secs / 60 % 60);
    buf[22] = ':';
    put2(buf + 23, secs % 60);
    memcpy(buf + 25, " GMT", 4);
    buf[SL_HTTP_DATE_LEN] = 0;
    return SL_HTTP_DATE_LEN;
}
