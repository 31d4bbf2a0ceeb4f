/* Conditional requests (RFC 9110 §13): entity-tags, If-Match / If-None-Match / If-Modified-Since /
 * If-Unmodified-Since evaluation, and If-Range. Pure: dates arrive already parsed. */
#ifndef SL_PRECOND_H
#define SL_PRECOND_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "http_parse.h"

/* The request's conditional header fields. if_match and if_none_match are the fields' first lines
 * (NULL when absent; an empty value is present and matches nothing); a field sent on several lines
 * is one list of all their elements (RFC 9110 §5.3), reached through next. The caller parses the
 * dates; has_* is false when the header is absent, sent on more than one line, or its value is not
 * a valid HTTP-date, which makes it ignored (RFC 9110 §13.1.3, §13.1.4: a list of dates is not a
 * valid date). */
typedef struct sl_precond_input {
    bool get_or_head;
    const sl_http_header *if_match;
    const sl_http_header *if_none_match;
    bool has_if_modified_since;
    time_t if_modified_since;
    bool has_if_unmodified_since;
    time_t if_unmodified_since;
} sl_precond_input;

/* What to answer; the values are the status codes. */
typedef enum {
    SL_PRECOND_PASS = 0,           /* go on with the request */
    SL_PRECOND_NOT_MODIFIED = 304, /* 304 Not Modified */
    SL_PRECOND_FAILED = 412,       /* 412 Precondition Failed */
} sl_precond_result;

/* Evaluate the preconditions in RFC 9110 §13.2.2 order against the selected representation, which
 * exists, has the strong entity-tag `etag` (e.g. "\"abc\"", with its quotes; NULL when ETags are
 * disabled, then only "*" can match) and was last modified at mtime:
 *   1. If-Match present: "*" passes; otherwise a strong match in the list passes; else 412.
 *   2. Else If-Unmodified-Since present: mtime > date gives 412.
 *   3. If-None-Match present: "*" or a weak match gives 304 for GET/HEAD, 412 for other methods.
 *   4. Else, GET/HEAD only, If-Modified-Since present: mtime <= date gives 304.
 * A field's list is the elements of all its lines; it matches when any element does, and only if
 * every line is a valid entity-tag list (a syntax error anywhere matches nothing, as in one
 * line). "*" is the field's whole value: a "*" line next to other lines is not a valid value. */
sl_precond_result sl_precond_eval(const sl_precond_input *in, const char *etag, time_t mtime);

/* If-Range (RFC 9110 §13.1.5): true when the Range header is to be honoured. value[0..len) is the
 * If-Range field value (OWS around it is ignored). If it is an entity-tag, it must be strong and
 * equal etag byte for byte (false when etag is NULL). Otherwise it is taken as an HTTP-date, which
 * the caller parsed: has_date/date; it must equal mtime exactly. Neither a valid entity-tag nor a
 * valid date gives false, and so does a value holding more than one entity-tag. */
bool sl_if_range_ok(const char *value, size_t len, bool has_date, time_t date, const char *etag, time_t mtime);

/* Does the comma-separated entity-tag list[0..len) (If-Match / If-None-Match syntax, RFC 9110
 * §8.8.3) contain etag (a NUL-terminated entity-tag such as "\"x\"" or "W/\"x\"")? weak: "W/"
 * prefixes are ignored on both sides (weak comparison); strong: a weak tag on either side never
 * matches. Opaque tags compare byte for byte, so "\"a\"" and "\"A\"" differ. OWS and empty list
 * elements are tolerated; an opaque-tag may contain commas. "*" is not special here (it is not an
 * entity-tag; sl_precond_eval handles it). Any syntax error in the list gives false. */
bool sl_etag_list_match(const char *list, size_t len, const char *etag, bool weak);

/* Buffer size sl_etag_make needs. */
#define SL_ETAG_MAX 64

/* Write the strong ETag "\"<ino>-<size>-<mtime>\"" (lower-case hex, no leading zeros) into buf,
 * where <mtime> is mtime_sec * 10^9 + mtime_nsec in 64-bit arithmetic (wrapping for times before
 * 1970 or after 2554, which keeps it deterministic), so that changes within one second still change
 * the tag. NUL-terminated; returns the length without the NUL (at most 52). buf must hold
 * SL_ETAG_MAX bytes. */
size_t sl_etag_make(char *buf, unsigned long long ino, unsigned long long size, long long mtime_sec,
                    long mtime_nsec);

#endif
