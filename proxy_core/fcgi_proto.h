/* FastCGI 1.0 records (the FastCGI Specification, Open Market 1996), client side: encoders for
 * what a web server sends to an application and a streaming decoder for what comes back.
 * Pure code: no I/O, no event loop. Encoders append to a caller-owned growable byte buffer
 * (sl_buf); the decoder reads caller-supplied fragments of any size and reports events that point
 * into those fragments. */
#ifndef SL_FCGI_PROTO_H
#define SL_FCGI_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Protocol version carried in every record header. */
#define SL_FCGI_VERSION 1
/* Size of a record header, and of the BEGIN_REQUEST and END_REQUEST bodies. */
#define SL_FCGI_HEADER_LEN 8
/* Largest contentLength a record can carry. */
#define SL_FCGI_MAX_CONTENT 65535
/* Largest name or value length a name-value pair can encode (31-bit length). */
#define SL_FCGI_MAX_NV_LEN 0x7fffffffu

/* Record types. */
enum {
    SL_FCGI_BEGIN_REQUEST = 1,
    SL_FCGI_ABORT_REQUEST = 2,
    SL_FCGI_END_REQUEST = 3,
    SL_FCGI_PARAMS = 4,
    SL_FCGI_STDIN = 5,
    SL_FCGI_STDOUT = 6,
    SL_FCGI_STDERR = 7,
    SL_FCGI_DATA = 8,
    SL_FCGI_GET_VALUES = 9,
    SL_FCGI_GET_VALUES_RESULT = 10,
    SL_FCGI_UNKNOWN_TYPE = 11
};

/* Roles in BEGIN_REQUEST. */
enum { SL_FCGI_RESPONDER = 1, SL_FCGI_AUTHORIZER = 2, SL_FCGI_FILTER = 3 };

/* BEGIN_REQUEST flag: the application keeps the connection open after the request. */
#define SL_FCGI_KEEP_CONN 1

/* protocolStatus values in END_REQUEST. */
enum {
    SL_FCGI_REQUEST_COMPLETE = 0,
    SL_FCGI_CANT_MPX_CONN = 1,
    SL_FCGI_OVERLOADED = 2,
    SL_FCGI_UNKNOWN_ROLE = 3
};

/* A growable byte buffer owned by the caller: bytes p[0..len), allocated capacity cap. A zeroed
 * struct ({NULL, 0, 0}) is a valid empty buffer. Encoders only append; on failure they leave len
 * as it was (a partly written record is never left behind). */
typedef struct sl_buf {
    char *p;
    size_t len, cap;
} sl_buf;

/* Make room for n more bytes (cap >= len + n). 0, -ENOMEM, or -EOVERFLOW if len + n overflows. */
int sl_buf_reserve(sl_buf *b, size_t n);

/* Append n bytes from data (data may be NULL when n is 0). 0, -ENOMEM or -EOVERFLOW. */
int sl_buf_append(sl_buf *b, const void *data, size_t n);

/* Free the storage and reset b to the empty buffer. */
void sl_buf_free(sl_buf *b);

/* Append one record: header, content[0..len) and 0-7 padding bytes so that the record length is
 * a multiple of 8. Any type is accepted (tests and management records use this directly).
 * 0, -EINVAL if len > SL_FCGI_MAX_CONTENT, -ENOMEM or -EOVERFLOW. */
int sl_fcgi_record(sl_buf *out, uint8_t type, uint16_t request_id, const void *content,
                   size_t len);

/* Append BEGIN_REQUEST for request_id with the given role (normally SL_FCGI_RESPONDER), with
 * SL_FCGI_KEEP_CONN set when keep_conn. 0, -EINVAL if request_id is 0 (reserved for management
 * records), -ENOMEM or -EOVERFLOW. */
int sl_fcgi_begin_request(sl_buf *out, uint16_t request_id, uint16_t role, bool keep_conn);

/* Append ABORT_REQUEST for request_id. 0, -EINVAL if request_id is 0, -ENOMEM or -EOVERFLOW. */
int sl_fcgi_abort_request(sl_buf *out, uint16_t request_id);

/* Append END_REQUEST (what an application sends; for tests and test backends).
 * 0, -ENOMEM or -EOVERFLOW. */
int sl_fcgi_end_request(sl_buf *out, uint16_t request_id, uint32_t app_status,
                        uint8_t protocol_status);

/* Append data[0..len) to a stream of the given type (SL_FCGI_PARAMS, STDIN, STDOUT, STDERR or
 * DATA) as records of at most SL_FCGI_MAX_CONTENT bytes each, padded to multiples of 8. Writes
 * nothing when len is 0: a stream is ended only by sl_fcgi_end_stream. Note that PARAMS written
 * this way may split a name-value pair across records, which some applications (php-fpm) reject;
 * use sl_fcgi_params_writer for PARAMS. 0, -EINVAL for another type or request_id 0, -ENOMEM or
 * -EOVERFLOW. */
int sl_fcgi_write_stream(sl_buf *out, uint8_t type, uint16_t request_id, const void *data,
                         size_t len);

/* Append the empty record that ends a stream of the given type (same types as
 * sl_fcgi_write_stream). 0, -EINVAL, -ENOMEM or -EOVERFLOW. */
int sl_fcgi_end_stream(sl_buf *out, uint8_t type, uint16_t request_id);

/* Append one raw name-value pair (1-byte length when < 128, else 4-byte length with the high bit
 * set; name length first, then value length, name bytes, value bytes) with no record framing:
 * the content of PARAMS, GET_VALUES and GET_VALUES_RESULT records. 0, -EOVERFLOW if a length
 * exceeds SL_FCGI_MAX_NV_LEN, -ENOMEM. */
int sl_fcgi_nv_append(sl_buf *out, const char *name, size_t name_len, const char *value,
                      size_t value_len);

/* Decode the name-value pair at buf[*pos..len). Returns 1 with *name and *value pointing into
 * buf and *pos advanced past the pair, 0 when *pos == len (no more pairs), or -EPROTO when the
 * bytes left do not hold a complete pair (truncated length or data, or *pos > len); *pos is only
 * changed on success. */
int sl_fcgi_nv_next(const void *buf, size_t len, size_t *pos, const char **name,
                    size_t *name_len, const char **value, size_t *value_len);

/* Writes the PARAMS stream of one request, packing whole name-value pairs into records of at most
 * SL_FCGI_MAX_CONTENT bytes: a pair is split across records only when it does not fit in one
 * record by itself. The open record lives at the end of out, so between sl_fcgi_params_init and
 * sl_fcgi_params_end nothing else may be appended to out. */
typedef struct sl_fcgi_params_writer {
    sl_buf *out;
    uint16_t request_id;
    size_t rec; /* offset in out of the open record's header; SIZE_MAX when none is open */
} sl_fcgi_params_writer;

/* Start a PARAMS stream for request_id, appending to out. Writes nothing yet. */
void sl_fcgi_params_init(sl_fcgi_params_writer *w, sl_buf *out, uint16_t request_id);

/* Add one parameter. 0, -EINVAL for request_id 0, -EOVERFLOW for a length above
 * SL_FCGI_MAX_NV_LEN, -ENOMEM; on error the stream written so far stays valid. */
int sl_fcgi_params_add(sl_fcgi_params_writer *w, const char *name, size_t name_len,
                       const char *value, size_t value_len);

/* Pad the open record and append the empty PARAMS record that ends the stream.
 * 0, -EINVAL for request_id 0, -ENOMEM or -EOVERFLOW. */
int sl_fcgi_params_end(sl_fcgi_params_writer *w);

/* What sl_fcgi_decode reports. */
typedef enum {
    SL_FCGI_EV_NONE = 0,     /* all input consumed, nothing to report */
    SL_FCGI_EV_STDOUT,       /* data/len: a piece of the STDOUT stream */
    SL_FCGI_EV_STDERR,       /* data/len: a piece of the STDERR stream */
    SL_FCGI_EV_STDOUT_END,   /* the empty STDOUT record (end of stream) was consumed */
    SL_FCGI_EV_STDERR_END,   /* the empty STDERR record was consumed */
    SL_FCGI_EV_END_REQUEST   /* END_REQUEST consumed: app_status, protocol_status */
} sl_fcgi_event_type;

/* One decoder event. data points into the buffer passed to sl_fcgi_decode. */
typedef struct sl_fcgi_event {
    sl_fcgi_event_type type;
    const char *data;
    size_t len;
    uint32_t app_status;
    uint8_t protocol_status;
} sl_fcgi_event;

/* Streaming decoder for the records an application sends about one request. Initialise with
 * sl_fcgi_decoder_init; the fields are private. */
typedef struct sl_fcgi_decoder {
    uint16_t request_id;
    uint8_t state;
    uint8_t type;       /* type of the record being read */
    uint8_t done_event; /* event to report once the record, padding included, is consumed */
    uint8_t protocol_status;
    uint32_t app_status;
    uint8_t hdr[SL_FCGI_HEADER_LEN]; /* record header, then END_REQUEST body, being collected */
    size_t have;                     /* bytes of hdr collected */
    size_t content_left, padding_left;
    bool stdout_ended, stderr_ended;
    int error; /* sticky negative errno once an error was reported */
} sl_fcgi_decoder;

/* Prepare d to decode the reply to request request_id. */
void sl_fcgi_decoder_init(sl_fcgi_decoder *d, uint16_t request_id);

/* Decode from buf[0..len), which continues the bytes given to earlier calls; fragments may be of
 * any size, down to one byte, and the events do not depend on how the input is cut (except that
 * STDOUT/STDERR data arrive in as many pieces as the cuts and record boundaries make).
 * Stops at the first event: returns its type (> 0) with *ev filled in and *consumed set to the
 * bytes used, up to and including the event's data; call again with the rest. Returns
 * SL_FCGI_EV_NONE (0) when all of buf was consumed without an event (*consumed == len).
 * Data events always carry len > 0. An END_REQUEST event is reported once its record, padding
 * included, is consumed; any byte after it is an error.
 * Errors (negative, sticky: every later call returns the same value, *consumed is 0):
 *   -EPROTO a version other than 1; a record type other than STDOUT, STDERR or END_REQUEST;
 *           a request id other than d's; an END_REQUEST whose contentLength is not 8;
 *           data in a stream after its empty record; any byte after END_REQUEST.
 * d, consumed and ev must not be NULL; buf may be NULL when len is 0. */
int sl_fcgi_decode(sl_fcgi_decoder *d, const void *buf, size_t len, size_t *consumed,
                   sl_fcgi_event *ev);

/* True once END_REQUEST has been consumed (and no error occurred). */
bool sl_fcgi_decoder_done(const sl_fcgi_decoder *d);

/* True when the decoder stands at a record boundary (no partial record pending): after the end of
 * input this tells a clean close from a truncated record. */
bool sl_fcgi_decoder_at_boundary(const sl_fcgi_decoder *d);

#endif
