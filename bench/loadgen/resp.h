/* Incremental HTTP/1.x response parser for loadgen: framing only, bodies are never stored. */
#ifndef SL_LG_RESP_H
#define SL_LG_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest header line kept for inspection. Longer lines are fine unless they are one of the
 * headers the parser needs (Content-Length, Transfer-Encoding, Connection): those are refused. */
#define SL_LG_RESP_LINE_MAX 512
/* Upper bound on the status line plus all header lines (and on all interim 1xx responses). */
#define SL_LG_RESP_HEADERS_MAX 65536
/* Upper bound on one chunk-size line including extensions, and on the chunked trailer section. */
#define SL_LG_RESP_CHUNK_LINE_MAX 4096

/* Called with each piece of body payload (after de-chunking) as it is parsed; may be NULL. */
typedef void sl_lg_body_fn(void *arg, const char *p, size_t len);

/* One response being parsed. Fields above the marker are results; the rest is private state. */
struct sl_lg_resp {
    int status;             /* status code 100..999, valid once the headers are done */
    int version_minor;      /* x of HTTP/1.x */
    int64_t content_length; /* -1 when there was no Content-Length (or Transfer-Encoding won) */
    bool chunked;           /* Transfer-Encoding ends in chunked */
    bool conn_close;        /* a Connection header carried "close" */
    bool conn_keep_alive;   /* a Connection header carried "keep-alive" */
    uint64_t body_bytes;    /* payload bytes parsed so far */
    size_t header_bytes;    /* bytes of status line and headers, interim responses included */
    /* --- private --- */
    int state;
    int chunk_state;
    bool te_seen;
    bool no_reuse; /* framing forbids reusing the connection (read-to-close, TE + CL) */
    int last_hdr;  /* which interesting header the previous line was, for obs-fold */
    uint64_t remaining;
    unsigned hex_digits;
    size_t chunk_line;
    size_t line_len;
    bool line_overflow;
    char line[SL_LG_RESP_LINE_MAX];
};

/* Prepare r for a new response to a GET request. */
void sl_lg_resp_init(struct sl_lg_resp *r);

/* Parse up to len bytes. Returns the number of bytes consumed (consumption stops right after the
 * end of the message, so a return below len with sl_lg_resp_done() true means surplus bytes
 * followed the message), -EBADMSG for a malformed response, or -EMSGSIZE when the header section
 * or a chunk-size line exceeds its limit. After an error r must not be fed again. Body payload is
 * passed to on_body(arg, ...) when on_body is not NULL. */
ssize_t sl_lg_resp_feed(struct sl_lg_resp *r, const char *buf, size_t len, sl_lg_body_fn *on_body,
                        void *arg);

/* Tell the parser the peer closed the connection. Returns 0 when the message is complete (it was
 * already, or its body is delimited by the close), -EPROTO when the close came before the end of
 * the headers, -EPIPE when it came inside a body framed by Content-Length or chunked encoding. */
int sl_lg_resp_eof(struct sl_lg_resp *r);

/* True once the status line and all headers of the final (non-1xx) response have been parsed. */
bool sl_lg_resp_headers_done(const struct sl_lg_resp *r);

/* True once the whole message, body included, has been parsed. */
bool sl_lg_resp_done(const struct sl_lg_resp *r);

/* How many body bytes may be consumed next without being looked at: the rest of a body framed by
 * Content-Length, the rest of the current chunk's payload, UINT64_MAX for a body delimited by the
 * close of the connection, and 0 whenever the parser needs to see the next bytes (status line,
 * headers, chunk-size lines, trailer) or the message is done. A caller that discards bytes without
 * reading them (recv with MSG_TRUNC) takes at most this many, so it can never swallow framing.
 * *ends_message is set to true when those bytes are the last of the message (Content-Length). */
uint64_t sl_lg_resp_skippable(const struct sl_lg_resp *r, bool *ends_message);

/* Count n body bytes (0 < n <= sl_lg_resp_skippable(r)) that were discarded unseen, exactly as if
 * they had been fed: body_bytes grows by n and the message completes when its body does. */
void sl_lg_resp_skip(struct sl_lg_resp *r, uint64_t n);

/* True when a completed message leaves the connection reusable: HTTP/1.1 without "close" or
 * HTTP/1.0 with "keep-alive", and a body framed by length, chunks, or a bodiless status. */
bool sl_lg_resp_reusable(const struct sl_lg_resp *r);

#endif
