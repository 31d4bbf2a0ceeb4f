/* The response side of the reverse proxy: HTTP/1.1 response heads from HTTP backends (RFC 9112
 * §4-§7, RFC 9110), CGI response heads from FastCGI STDOUT (RFC 3875 §6), the chunked transfer
 * coding (RFC 9112 §7.1), and hop-by-hop field classification (RFC 9110 §7.6.1). Pure code: no
 * I/O and no allocation; parsed heads point into the caller's buffer. */
#ifndef SL_HTTP_RESP_H
#define SL_HTTP_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Capacity of sl_upstream_head.fields; sl_upstream_limits.max_headers is clamped to it. */
#define SL_UPSTREAM_MAX_HEADERS 100

/* One field line. name is a token as sent (no colon); value has leading and trailing OWS removed
 * and may be empty. Neither is NUL-terminated; both point into the parsed buffer. */
typedef struct sl_upstream_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sl_upstream_field;

/* Limits for one response head. */
typedef struct sl_upstream_limits {
    size_t max_head;    /* bytes of the whole head, line terminators and final empty line included;
                           any head byte at offset >= max_head -> -E2BIG (clamped to INT_MAX) */
    size_t max_headers; /* field lines, clamped to SL_UPSTREAM_MAX_HEADERS; one more -> -E2BIG */
} sl_upstream_limits;

/* A parsed response head. location and status_field point into fields[], so the struct must not
 * be copied by value and used afterwards. */
typedef struct sl_upstream_head {
    int version;        /* HTTP: 10 or 11 (HTTP/1.x with x >= 1 is 11); CGI: 0 */
    int status;         /* HTTP: 100-599; CGI: 200-599 */
    const char *reason; /* reason phrase, OWS-trimmed, may be empty (reason_len 0) */
    size_t reason_len;
    sl_upstream_field fields[SL_UPSTREAM_MAX_HEADERS]; /* in the order received */
    size_t n_fields;
    long long content_length; /* -1 when absent */
    bool chunked;             /* HTTP only: Transfer-Encoding is present and is "chunked" */
    bool conn_close, conn_keep_alive, conn_upgrade; /* tokens found in Connection */
    const sl_upstream_field *location;     /* first Location field, or NULL */
    const sl_upstream_field *status_field; /* CGI: the Status field (never to be forwarded) */
    bool local_redirect; /* CGI: no Status, Location is a local path: '/' but not '//' */
    size_t head_len;     /* bytes consumed: status line (HTTP), field lines, final empty line */
} sl_upstream_head;

/* Parse an HTTP/1.x response head from buf[0..len): "HTTP/1.x SSS reason" and field lines.
 *
 * Returns head_len (> 0) for a complete head, 0 when more bytes are needed and nothing is wrong so
 * far, or:
 *   -EPROTO malformed: status line not "HTTP/" DIGIT "." DIGIT SP 3DIGIT [SP reason], major
 *           version not 1, status outside 100-599, a control character in the reason; a field
 *           name that is not a token or empty, whitespace before the colon, obs-fold (a line
 *           starting with SP or HTAB), a bare CR, NUL or another CTL in a value; Content-Length
 *           not a list of equal decimal values (one field or several), or too large; any
 *           Transfer-Encoding other than exactly "chunked" (including "chunked" twice or another
 *           coding before it), Transfer-Encoding in an HTTP/1.0 response, or together with
 *           Content-Length (RFC 9112 §6.3: a possible smuggling attempt, refused);
 *   -E2BIG  the head runs past lim->max_head or has more than lim->max_headers field lines.
 * Lines end in CRLF or a bare LF (RFC 9112 §2.2). No empty lines are skipped before the status
 * line. The bytes are checked left to right and the first problem is reported, so the caller can
 * parse again after each read: every prefix of an input gives 0 or the input's own result, and
 * bytes after head_len are never looked at. A 1xx head is complete at its empty line; see
 * sl_upstream_interim. h is (re)initialised on every call; after an error its fields are
 * unspecified. lim must not be NULL. */
int sl_upstream_parse_http(const char *buf, size_t len, const sl_upstream_limits *lim,
                           sl_upstream_head *h);

/* Parse a CGI response head (RFC 3875 §6.2-§6.3) from buf[0..len): field lines only, up to the
 * empty line; lines end in CRLF or LF. Same results, limits and incremental contract as
 * sl_upstream_parse_http, with these semantics:
 *   - "Status: SSS [reason]" sets status and reason; a status outside 200-599, a value not of
 *     that form, or a second Status field -> -EPROTO;
 *   - without Status the status is 200, or 302 when a Location field is present; a Location that
 *     starts with '/' then also sets local_redirect (the CGI local-redirect response: the server
 *     may instead serve that path internally);
 *   - a second Location field -> -EPROTO;
 *   - Content-Length is checked as for HTTP; Transfer-Encoding is not interpreted (a CGI body
 *     ends with the stream; the field is hop-by-hop and is to be dropped);
 *   - a head without any field line -> -EPROTO (RFC 3875 §6.2: at least one CGI field).
 * version is 0. */
int sl_upstream_parse_cgi(const char *buf, size_t len, const sl_upstream_limits *lim,
                          sl_upstream_head *h);

/* Case-insensitive lookup of a field by name (NUL-terminated); first occurrence or NULL. */
const sl_upstream_field *sl_upstream_find(const sl_upstream_head *h, const char *name);

/* True for an interim (1xx) HTTP response other than 101: the caller discards head_len bytes and
 * parses the next head. */
bool sl_upstream_interim(const sl_upstream_head *h);

/* How the body of an HTTP response is delimited. */
typedef enum {
    SL_BODY_NONE,       /* no body: HEAD request, 1xx, 204, 304 */
    SL_BODY_LENGTH,     /* content_length bytes */
    SL_BODY_CHUNKED,    /* chunked transfer coding; see sl_chunked_decoder */
    SL_BODY_UNTIL_CLOSE /* read until the backend closes the connection */
} sl_body_framing;

/* Body framing of a parsed HTTP response (RFC 9112 §6.3); head_request: the request was HEAD. */
sl_body_framing sl_upstream_framing(const sl_upstream_head *h, bool head_request);

/* May the backend connection be reused after this response's body? False for HTTP/1.0 without
 * "Connection: keep-alive", for "Connection: close", for 101 and for a body read until close. */
bool sl_upstream_keep_alive(const sl_upstream_head *h, bool head_request);

/* Is the field name[0..len) hop-by-hop, i.e. not to be forwarded by a proxy (RFC 9110 §7.6.1)?
 * True for Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade, and
 * for any name listed in the Connection field value connection_value[0..conn_len) (may be NULL
 * when conn_len is 0). Names compare case-insensitively. */
bool sl_hop_by_hop(const char *name, size_t len, const char *connection_value, size_t conn_len);

/* sl_hop_by_hop for field f of h, checking the names listed in every Connection field of h. */
bool sl_upstream_hop_by_hop(const sl_upstream_head *h, const sl_upstream_field *f);

/* Longest chunk-size line (size, extensions, CRLF) sl_chunked_decode accepts; longer -> -E2BIG. */
#define SL_CHUNKED_MAX_LINE 4096

/* Results of sl_chunked_decode besides errors. */
enum {
    SL_CHUNKED_NEED = 0, /* all input consumed, more is needed */
    SL_CHUNKED_DATA = 1, /* *data, *data_len: a span of body bytes */
    SL_CHUNKED_END = 2   /* the last chunk, trailers and final CRLF were consumed */
};

/* Streaming decoder for the chunked transfer coding. Initialise with sl_chunked_init; the fields
 * are private. */
typedef struct sl_chunked_decoder {
    uint8_t state;
    bool digits;          /* a chunk-size digit was seen on this line */
    uint64_t left;        /* chunk-size being read, then data bytes left in the chunk */
    size_t line;          /* bytes of the current chunk-size line */
    size_t trailer;       /* bytes of trailer field lines so far */
    size_t max_trailer;   /* limit for trailer */
    int error;            /* sticky negative errno */
} sl_chunked_decoder;

/* Prepare c for one chunked body; trailer field lines (which are validated and then skipped) may
 * take at most max_trailer bytes in all, CRLFs included (0: no trailer fields allowed). */
void sl_chunked_init(sl_chunked_decoder *c, size_t max_trailer);

/* Decode from buf[0..len), which continues the bytes given to earlier calls; fragments may be of
 * any size down to one byte. Returns:
 *   SL_CHUNKED_DATA with *data pointing into buf and *data_len > 0, *consumed up to the span's end;
 *   SL_CHUNKED_END once the final CRLF is consumed, *consumed up to and including it (bytes after
 *     it belong to whatever follows the body and are not consumed; later calls return
 *     SL_CHUNKED_END with *consumed 0);
 *   SL_CHUNKED_NEED with *consumed == len;
 *   -EPROTO (sticky, *consumed 0) malformed: a chunk-size that is empty, not hex, or above
 *     INT64_MAX; chunk extensions not of the form *(BWS ";" BWS token [BWS "=" BWS (token /
 *     quoted-string)]) (whitespace before the CRLF is tolerated); chunk data not followed by CRLF;
 *     a bad trailer field line (as for heads, but no obs-fold); any line not ended by CRLF;
 *   -E2BIG (sticky) a chunk-size line above SL_CHUNKED_MAX_LINE or trailers above max_trailer.
 * data and data_len are only written for SL_CHUNKED_DATA. c, consumed, data and data_len must not
 * be NULL; buf may be NULL when len is 0. */
int sl_chunked_decode(sl_chunked_decoder *c, const char *buf, size_t len, size_t *consumed,
                      const char **data, size_t *data_len);

/* True once the whole chunked body has been consumed. */
bool sl_chunked_done(const sl_chunked_decoder *c);

#endif
