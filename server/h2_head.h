/* HTTP/2 request heads as HTTP/1.1 text, and the session settings: the parts of HTTP/2 that touch
 * no connection (server/h2.c uses them; the fuzz target fuzz_h2_recv drives them through a real
 * nghttp2 session without a socket).
 *
 * A stream's HEADERS are written as an HTTP/1.1 request head ("METHOD path HTTP/1.1", Host from
 * :authority, then the fields as they came) into a buffer the size of the HTTP/1.1 head limit, so
 * that the HTTP/1.1 parser, the conditions and every module see one kind of request. nghttp2 has
 * validated the fields by then (RFC 9113 §8.2: names lowercase tokens, no CR, LF or NUL in values,
 * pseudo-header fields first, once, and only the request ones), so the text cannot carry a line
 * the client did not send as a field.
 */
#ifndef SL_H2_HEAD_H
#define SL_H2_HEAD_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SETTINGS_MAX_CONCURRENT_STREAMS, as lighttpd and nginx. */
#define SL_H2_MAX_STREAMS 100
/* SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream buffers before its reader takes them. */
#define SL_H2_STREAM_WINDOW (64 * 1024)

/* One request head being written. Zero it, then set buf and cap. */
typedef struct sl_h2_head {
    char *buf;                 /* the HTTP/1.1 head (the caller's, cap bytes) */
    size_t len, cap;
    char *method, *path, *authority; /* the pseudo-header fields (malloc), NULL when absent */
    size_t method_len, path_len, authority_len;
    char *cookie;              /* the cookie fields joined with "; " (malloc), NULL: none */
    size_t cookie_len;
    bool line_done;            /* the request line is in buf */
    bool too_big;              /* it did not fit: 431 */
    bool has_length;           /* the client sent content-length */
    bool chunked;              /* sl_h2_head_end added Transfer-Encoding: chunked */
} sl_h2_head;

/* One field of the HEADERS as nghttp2 delivered it. 0, or -ENOMEM. */
int sl_h2_head_field(sl_h2_head *h, const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen);
/* The HEADERS ended; body: the client sends a body (no END_STREAM on them). The cookie fields,
 * which HTTP/2 clients may split (RFC 9113 §8.2.3), go out as one Cookie line. A body without
 * content-length is announced as chunked (the caller gives it to readers in that coding). Ends
 * the head with its empty line. Returns 0 (buf[0..len) is the head), 400 (no :method or :path)
 * or 431 (over cap). */
int sl_h2_head_end(sl_h2_head *h, bool body);
/* Free the pseudo-header and cookie copies. */
void sl_h2_head_free(sl_h2_head *h);

/* A server session with seekless's options and SETTINGS submitted (max_header_list: the HTTP/1.1
 * head limit). Flow-control credit is given back by the caller (nghttp2_session_consume) as
 * request bodies are read. 0 or an nghttp2 error code. */
int sl_h2_session_new(nghttp2_session **ng, const nghttp2_session_callbacks *cb, void *ud,
                      uint32_t max_header_list);

#endif
