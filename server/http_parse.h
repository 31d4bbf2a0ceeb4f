/* HTTP/1.1 request heads (RFC 9112 §2-§3, §5-§7; RFC 9110 §5, §7.2, §8.6): a strict, pure parser.
 * No I/O and no allocation: every pointer in a parsed request points into the caller's buffer. */
#ifndef SL_HTTP_PARSE_H
#define SL_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* Capacity of sl_http_request.headers; sl_http_limits.max_headers is clamped to it. */
#define SL_HTTP_MAX_HEADERS 64

/* Request methods. Method names are case-sensitive (RFC 9110 §9.1), so "get" is SL_METHOD_OTHER. */
typedef enum {
    SL_METHOD_GET,
    SL_METHOD_HEAD,
    SL_METHOD_POST,
    SL_METHOD_PUT,
    SL_METHOD_DELETE,
    SL_METHOD_OPTIONS,
    SL_METHOD_CONNECT,
    SL_METHOD_TRACE,
    SL_METHOD_PATCH,
    SL_METHOD_OTHER /* any other valid token; see sl_http_request.method_str */
} sl_method;

/* One field line. name is the field name as sent (a token, no colon); value has the leading and
 * trailing OWS removed and may be empty. Neither is NUL-terminated.
 *
 * A field may arrive on several lines; RFC 9110 §5.3 makes them one field whose value is the
 * lines' values joined with ", " in order. The parser does not copy them together: each line
 * links to the next line of the same name (compared case-insensitively), so whoever reads a
 * field starts at its first line (sl_http_find_header, or a well-known pointer of
 * sl_http_request) and follows next. A list field (If-Match, If-None-Match, Connection, Expect,
 * Accept-Encoding, Cache-Control, TE...) is read as the list of all its lines' elements; a
 * singleton field (If-Modified-Since, Range, If-Range...) on several lines is invalid, which
 * sl_http_single tells. */
typedef struct sl_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
    const struct sl_http_header *next; /* the next line of this field, NULL on its last */
} sl_http_header;

/* Size limits for one request head. Sizes count bytes as received, line terminators included; the
 * up to 8 empty lines a client may send before the request line (RFC 9112 §2.2) are not counted. */
typedef struct sl_http_limits {
    size_t max_head;    /* request line + all field lines + the final empty line; exceeding -> -431,
                           or -414 when it is the request line itself that runs past the limit */
    size_t max_line;    /* request line alone, without its CRLF; exceeding -> -414 */
    size_t max_headers; /* field line count, clamped to SL_HTTP_MAX_HEADERS; exceeding -> -431 */
} sl_http_limits;

/* A parsed request head. The well-known header pointers and the headers' next links point into
 * headers[], so the struct must not be copied by value and used afterwards (the copy's pointers
 * would still refer to the original). */
typedef struct sl_http_request {
    sl_method method;
    const char *method_str; /* the method token as sent */
    size_t method_len;
    const char *target; /* raw request-target (origin-, absolute-, authority- or asterisk-form) */
    size_t target_len;
    int version; /* 10 or 11 (HTTP/1.x with x > 1 is treated as 11) */
    sl_http_header headers[SL_HTTP_MAX_HEADERS]; /* in the order received */
    size_t n_headers;
    /* Well-known headers: the field's first line (follow next for the others; Host can occur only
     * once); NULL when absent. */
    const sl_http_header *host, *range, *if_range, *if_match, *if_none_match, *if_modified_since,
        *if_unmodified_since, *expect, *content_type, *user_agent, *referer;
    long long content_length; /* -1 when absent */
    bool chunked;             /* Transfer-Encoding is present and is exactly "chunked" */
    bool conn_close, conn_keep_alive, conn_upgrade; /* tokens found in Connection */
    /* Bytes consumed: leading empty lines + request line + field lines + final empty line. */
    size_t head_len;
} sl_http_request;

/* Parse one request head from buf[0..len).
 *
 * Returns head_len (> 0) when a complete head was parsed, 0 when more bytes are needed and nothing
 * wrong has been seen so far, or a negative HTTP status:
 *   -400 malformed: bad method, target or version syntax, bare CR, obs-fold, whitespace before a
 *        colon, a CTL in a field value, more than 8 leading empty lines, Host missing (HTTP/1.1),
 *        repeated or invalid, Content-Length invalid or conflicting, Transfer-Encoding together
 *        with Content-Length or on HTTP/1.0, or whose final coding is not chunked, or that applies
 *        chunked twice;
 *   -414 request line longer than lim->max_line (or running past lim->max_head);
 *   -431 head longer than lim->max_head, or more than lim->max_headers field lines;
 *   -501 Transfer-Encoding ending in chunked with another coding before it ("gzip, chunked");
 *   -505 well-formed HTTP-version whose major version is not 1.
 * The bytes are checked left to right and the first problem found is reported, also on incomplete
 * input: if a prefix of some input gives an error, the whole input gives that same error, and if
 * the whole input parses to head_len n, every prefix shorter than n gives 0 and every longer one
 * gives n. So the caller can parse again after each read and sees limits enforced as soon as they
 * are exceeded. CRLF ends lines; a bare LF is accepted too (RFC 9112 §2.2). Bytes after head_len
 * are never looked at. req is (re)initialised on every call; after a negative result its fields
 * are unspecified, except that method, method_str and method_len hold the method once its token
 * has been read whole (SL_METHOD_OTHER and NULL before), so that the error answer to a HEAD
 * carries no body, and version is 10 or 11 once an HTTP/1.x version has been read and 0
 * otherwise. lim must not be NULL. */
int sl_http_parse_request(const char *buf, size_t len, const sl_http_limits *lim,
                          sl_http_request *req);

/* Case-insensitive lookup of a header by name (a NUL-terminated string) in a parsed request.
 * Returns the field's first line (the others follow through next), or NULL if absent. */
const sl_http_header *sl_http_find_header(const sl_http_request *req, const char *name);

/* A singleton field's only line: h when the field is one line, NULL when it is absent (h NULL)
 * or was sent on several lines, which makes it invalid (RFC 9110 §5.3 allows several lines only
 * for list fields): the caller then treats it as an invalid value of that field. */
const sl_http_header *sl_http_single(const sl_http_header *h);

/* Write the combined value of the field whose first line is h: every line's value, in order,
 * joined with sep (", " for a list field, RFC 9110 §5.3; "; " for Cookie). Writes at most cap
 * bytes (no NUL) and returns the combined length, so a call with cap 0 sizes the buffer; 0 when
 * h is NULL. */
size_t sl_http_field_join(const sl_http_header *h, const char *sep, char *buf, size_t cap);

/* One Content-Length field line's value v[0..n): 1*DIGIT, or a comma-separated list of identical
 * values, OWS allowed around each (RFC 9110 §8.6). The value must also agree with *cl, the value
 * of the field's earlier lines (-1 before the first), so that calling this for every line of the
 * field checks the whole field. Returns 0 with *cl set; -EINVAL for an empty element, a
 * non-digit or a value different from the others (the message is then invalid, RFC 9112 §6.3);
 * -EOVERFLOW for a value above LLONG_MAX. *cl is unspecified after an error. */
int sl_http_content_length(const char *v, size_t n, long long *cl);

/* The next non-empty element of the comma-separated list v[0..len), trimmed of OWS: start with
 * *pos = 0; true with *e, *elen set and *pos advanced, false when none is left. Empty elements
 * are skipped (RFC 9110 §5.6.1.2). Quoted strings are not special: a list whose elements may
 * hold commas (entity-tags) needs its own scanner. */
bool sl_http_list_next(const char *v, size_t len, size_t *pos, const char **e, size_t *elen);

/* Does the comma-separated list v[0..len) contain an element equal to token (NUL-terminated),
 * compared case-insensitively? OWS around elements and empty elements are ignored; an element with
 * anything more than the token (e.g. parameters) does not match. */
bool sl_http_list_has_token(const char *v, size_t len, const char *token);

/* The status for a method a resource does not serve: 405 (Method Not Allowed, sent with Allow) for
 * a method HTTP defines, 501 (Not Implemented) for SL_METHOD_OTHER, a method this server does not
 * know for any resource (RFC 9110 §15.5.6, §15.6.2). */
int sl_method_refused_status(sl_method m);

/* Canonical method name for a method enum value ("GET", "HEAD", ...); "OTHER" for SL_METHOD_OTHER
 * and for values outside the enum. */
const char *sl_method_name(sl_method m);

#endif
