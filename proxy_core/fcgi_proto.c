/* FastCGI 1.0 record codec, client side.
 *
 * Encoders append complete records to an sl_buf. Each encoder reserves everything it will write
 * before writing anything, so a failed allocation never leaves half a record in the buffer. Records
 * are padded to a multiple of 8 bytes, as the specification recommends. PARAMS goes through a small
 * writer that packs whole name-value pairs into records, because php-fpm parses every PARAMS record
 * on its own and rejects a pair that continues in the next record.
 *
 * The decoder is a byte-driven state machine (record header, content, padding, END_REQUEST body)
 * that keeps at most 8 bytes of its own; stream content is handed out as pointers into the
 * caller's fragment, so nothing is copied and fragment boundaries only change how data is cut into
 * pieces, never which events or errors come out. As a client that only ever has one request on a
 * connection at a time, anything but STDOUT, STDERR and END_REQUEST for that request is a protocol
 * error: there is no reason for an application to send us anything else.
 */
#include "fcgi_proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ST_HEADER, ST_CONTENT, ST_PADDING, ST_END_BODY, ST_DONE };

int sl_buf_reserve(sl_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len) return -EOVERFLOW;
    size_t need = b->len + n;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int sl_buf_append(sl_buf *b, const void *data, size_t n)
{
    if (n == 0) return 0;
    int rc = sl_buf_reserve(b, n);
    if (rc < 0) return rc;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

void sl_buf_free(sl_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static size_t pad_for(size_t content_len)
{
    return (8 - content_len % 8) % 8;
}

/* Writes a header into reserved space; the caller has checked len <= SL_FCGI_MAX_CONTENT. */
static void put_header(char *h, uint8_t type, uint16_t id, size_t len, size_t pad)
{
    h[0] = SL_FCGI_VERSION;
    h[1] = (char)type;
    h[2] = (char)(id >> 8);
    h[3] = (char)(id & 0xff);
    h[4] = (char)(len >> 8);
    h[5] = (char)(len & 0xff);
    h[6] = (char)pad;
    h[7] = 0;
}

/* Appends one record into space the caller already reserved. */
static void emit_record(sl_buf *out, uint8_t type, uint16_t id, const void *content, size_t len)
{
    size_t pad = pad_for(len);
    put_header(out->p + out->len, type, id, len, pad);
    out->len += SL_FCGI_HEADER_LEN;
    if (len) memcpy(out->p + out->len, content, len);
    out->len += len;
    memset(out->p + out->len, 0, pad);
    out->len += pad;
}

int sl_fcgi_record(sl_buf *out, uint8_t type, uint16_t request_id, const void *content,
                   size_t len)
{
    if (len > SL_FCGI_MAX_CONTENT) return -EINVAL;
    int rc = sl_buf_reserve(out, SL_FCGI_HEADER_LEN + len + pad_for(len));
    if (rc < 0) return rc;
    emit_record(out, type, request_id, content, len);
    return 0;
}

int sl_fcgi_begin_request(sl_buf *out, uint16_t request_id, uint16_t role, bool keep_conn)
{
    if (request_id == 0) return -EINVAL;
    unsigned char body[8] = {(unsigned char)(role >> 8), (unsigned char)(role & 0xff),
                             keep_conn ? SL_FCGI_KEEP_CONN : 0};
    return sl_fcgi_record(out, SL_FCGI_BEGIN_REQUEST, request_id, body, sizeof body);
}

int sl_fcgi_abort_request(sl_buf *out, uint16_t request_id)
{
    if (request_id == 0) return -EINVAL;
    return sl_fcgi_record(out, SL_FCGI_ABORT_REQUEST, request_id, NULL, 0);
}

int sl_fcgi_end_request(sl_buf *out, uint16_t request_id, uint32_t app_status,
                        uint8_t protocol_status)
{
    unsigned char body[8] = {(unsigned char)(app_status >> 24),
                             (unsigned char)(app_status >> 16),
                             (unsigned char)(app_status >> 8),
                             (unsigned char)app_status,
                             protocol_status};
    return sl_fcgi_record(out, SL_FCGI_END_REQUEST, request_id, body, sizeof body);
}

static bool is_stream_type(uint8_t type)
{
    return type == SL_FCGI_PARAMS || type == SL_FCGI_STDIN || type == SL_FCGI_STDOUT ||
           type == SL_FCGI_STDERR || type == SL_FCGI_DATA;
}

int sl_fcgi_write_stream(sl_buf *out, uint8_t type, uint16_t request_id, const void *data,
                         size_t len)
{
    if (!is_stream_type(type) || request_id == 0) return -EINVAL;
    if (len == 0) return 0;
    /* Full records are 65535 + 1 padding = 65536 bytes; only the last one can be shorter. */
    size_t full = len / SL_FCGI_MAX_CONTENT, rest = len % SL_FCGI_MAX_CONTENT;
    size_t per = SL_FCGI_HEADER_LEN + SL_FCGI_MAX_CONTENT + pad_for(SL_FCGI_MAX_CONTENT);
    if (full > SIZE_MAX / per) return -EOVERFLOW;
    size_t total = full * per;
    if (rest) {
        size_t last = SL_FCGI_HEADER_LEN + rest + pad_for(rest);
        if (last > SIZE_MAX - total) return -EOVERFLOW;
        total += last;
    }
    int rc = sl_buf_reserve(out, total);
    if (rc < 0) return rc;
    const char *p = data;
    while (len) {
        size_t n = len < SL_FCGI_MAX_CONTENT ? len : SL_FCGI_MAX_CONTENT;
        emit_record(out, type, request_id, p, n);
        p += n;
        len -= n;
    }
    return 0;
}

int sl_fcgi_end_stream(sl_buf *out, uint8_t type, uint16_t request_id)
{
    if (!is_stream_type(type) || request_id == 0) return -EINVAL;
    return sl_fcgi_record(out, type, request_id, NULL, 0);
}

static size_t nv_len_size(size_t n)
{
    return n < 128 ? 1 : 4;
}

/* Size of the encoded pair; the caller has checked both lengths against SL_FCGI_MAX_NV_LEN, so
 * this cannot overflow. */
static size_t nv_size(size_t name_len, size_t value_len)
{
    return nv_len_size(name_len) + nv_len_size(value_len) + name_len + value_len;
}

static void put_nv_len(char *p, size_t *off, size_t n)
{
    if (n < 128) {
        p[(*off)++] = (char)n;
        return;
    }
    p[(*off)++] = (char)((n >> 24) | 0x80);
    p[(*off)++] = (char)((n >> 16) & 0xff);
    p[(*off)++] = (char)((n >> 8) & 0xff);
    p[(*off)++] = (char)(n & 0xff);
}

/* Appends a pair into reserved space. */
static void emit_nv(sl_buf *out, const char *name, size_t name_len, const char *value,
                    size_t value_len)
{
    size_t off = out->len;
    put_nv_len(out->p, &off, name_len);
    put_nv_len(out->p, &off, value_len);
    if (name_len) memcpy(out->p + off, name, name_len);
    off += name_len;
    if (value_len) memcpy(out->p + off, value, value_len);
    off += value_len;
    out->len = off;
}

int sl_fcgi_nv_append(sl_buf *out, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    if (name_len > SL_FCGI_MAX_NV_LEN || value_len > SL_FCGI_MAX_NV_LEN) return -EOVERFLOW;
    int rc = sl_buf_reserve(out, nv_size(name_len, value_len));
    if (rc < 0) return rc;
    emit_nv(out, name, name_len, value, value_len);
    return 0;
}

/* Reads one pair length at p[*pos..len). */
static int get_nv_len(const unsigned char *p, size_t len, size_t *pos, size_t *n)
{
    if (*pos >= len) return -EPROTO;
    unsigned char b = p[*pos];
    if (!(b & 0x80)) {
        *n = b;
        *pos += 1;
        return 0;
    }
    if (len - *pos < 4) return -EPROTO;
    *n = ((size_t)(b & 0x7f) << 24) | ((size_t)p[*pos + 1] << 16) | ((size_t)p[*pos + 2] << 8) |
         p[*pos + 3];
    *pos += 4;
    return 0;
}

int sl_fcgi_nv_next(const void *buf, size_t len, size_t *pos, const char **name,
                    size_t *name_len, const char **value, size_t *value_len)
{
    const unsigned char *p = buf;
    size_t at = *pos, nl, vl;
    if (at == len) return 0;
    if (at > len) return -EPROTO;
    if (get_nv_len(p, len, &at, &nl) < 0 || get_nv_len(p, len, &at, &vl) < 0) return -EPROTO;
    /* Subtractions only: nl + vl could wrap on a 32-bit size_t. */
    if (nl > len - at || vl > len - at - nl) return -EPROTO;
    *name = (const char *)p + at;
    *name_len = nl;
    *value = (const char *)p + at + nl;
    *value_len = vl;
    *pos = at + nl + vl;
    return 1;
}

void sl_fcgi_params_init(sl_fcgi_params_writer *w, sl_buf *out, uint16_t request_id)
{
    w->out = out;
    w->request_id = request_id;
    w->rec = SIZE_MAX;
}

static size_t open_content_len(const sl_fcgi_params_writer *w)
{
    return w->out->len - w->rec - SL_FCGI_HEADER_LEN;
}

/* Pads the open record and records its final lengths; the caller reserved the padding. */
static void close_open(sl_fcgi_params_writer *w)
{
    if (w->rec == SIZE_MAX) return;
    size_t clen = open_content_len(w), pad = pad_for(clen);
    put_header(w->out->p + w->rec, SL_FCGI_PARAMS, w->request_id, clen, pad);
    memset(w->out->p + w->out->len, 0, pad);
    w->out->len += pad;
    w->rec = SIZE_MAX;
}

int sl_fcgi_params_add(sl_fcgi_params_writer *w, const char *name, size_t name_len,
                       const char *value, size_t value_len)
{
    if (w->request_id == 0) return -EINVAL;
    if (name_len > SL_FCGI_MAX_NV_LEN || value_len > SL_FCGI_MAX_NV_LEN) return -EOVERFLOW;
    size_t sz = nv_size(name_len, value_len);
    sl_buf *out = w->out;
    int rc;

    if (w->rec != SIZE_MAX && sz <= SL_FCGI_MAX_CONTENT - open_content_len(w)) {
        /* The usual case, two dozen times per request: room is there and the open record's
         * header needs only its new length. */
        if (out->cap - out->len < sz && (rc = sl_buf_reserve(out, sz)) < 0) return rc;
        emit_nv(out, name, name_len, value, value_len);
        /* Keep the header true at every moment; padding is settled when the record closes. */
        size_t clen = open_content_len(w);
        out->p[w->rec + 4] = (char)(clen >> 8);
        out->p[w->rec + 5] = (char)(clen & 0xff);
        return 0;
    }

    if (sz <= SL_FCGI_MAX_CONTENT) {
        /* Reserve room for the old record's padding and the new record up front, so a failure
         * changes nothing. */
        size_t old_pad = w->rec != SIZE_MAX ? pad_for(open_content_len(w)) : 0;
        if ((rc = sl_buf_reserve(out, old_pad + SL_FCGI_HEADER_LEN + sz)) < 0) return rc;
        close_open(w);
        w->rec = out->len;
        out->len += SL_FCGI_HEADER_LEN;
        emit_nv(out, name, name_len, value, value_len);
        put_header(out->p + w->rec, SL_FCGI_PARAMS, w->request_id, sz, 0);
        return 0;
    }

    /* A pair too big for any record has to be split whatever we do; stream it on its own. */
    sl_buf tmp = {NULL, 0, 0};
    if ((rc = sl_fcgi_nv_append(&tmp, name, name_len, value, value_len)) < 0) return rc;
    size_t old_pad = w->rec != SIZE_MAX ? pad_for(open_content_len(w)) : 0;
    if ((rc = sl_buf_reserve(out, old_pad)) < 0) {
        sl_buf_free(&tmp);
        return rc;
    }
    size_t saved_len = out->len, saved_rec = w->rec;
    close_open(w);
    rc = sl_fcgi_write_stream(out, SL_FCGI_PARAMS, w->request_id, tmp.p, tmp.len);
    sl_buf_free(&tmp);
    if (rc < 0) {
        /* Undo the padding so the open record can keep growing; its header is still valid. */
        out->len = saved_len;
        w->rec = saved_rec;
        if (saved_rec != SIZE_MAX)
            put_header(out->p + saved_rec, SL_FCGI_PARAMS, w->request_id,
                       open_content_len(w), 0);
    }
    return rc;
}

int sl_fcgi_params_end(sl_fcgi_params_writer *w)
{
    if (w->request_id == 0) return -EINVAL;
    size_t old_pad = w->rec != SIZE_MAX ? pad_for(open_content_len(w)) : 0;
    int rc = sl_buf_reserve(w->out, old_pad + SL_FCGI_HEADER_LEN);
    if (rc < 0) return rc;
    close_open(w);
    emit_record(w->out, SL_FCGI_PARAMS, w->request_id, NULL, 0);
    return 0;
}

/* ---- decoder ---- */

void sl_fcgi_decoder_init(sl_fcgi_decoder *d, uint16_t request_id)
{
    memset(d, 0, sizeof *d);
    d->request_id = request_id;
    d->state = ST_HEADER;
}

static int fail(sl_fcgi_decoder *d, size_t *consumed)
{
    d->error = -EPROTO;
    *consumed = 0;
    return d->error;
}

/* Gathers up to the rest of an 8-byte block (a record header, or an END_REQUEST body) from
 * p[0..len) into d->hdr; returns how many bytes it took. The block is whole when d->have reaches
 * SL_FCGI_HEADER_LEN. */
static size_t gather(sl_fcgi_decoder *d, const char *p, size_t len)
{
    size_t n = SL_FCGI_HEADER_LEN - d->have;
    if (n > len) n = len;
    memcpy(d->hdr + d->have, p, n);
    d->have += n;
    return n;
}

/* Validates a complete record header and sets up the states for its content. */
static int start_record(sl_fcgi_decoder *d)
{
    const uint8_t *h = d->hdr;
    if (h[0] != SL_FCGI_VERSION) return -EPROTO;
    uint8_t type = h[1];
    uint16_t id = (uint16_t)((h[2] << 8) | h[3]);
    size_t clen = ((size_t)h[4] << 8) | h[5];
    if (type != SL_FCGI_STDOUT && type != SL_FCGI_STDERR && type != SL_FCGI_END_REQUEST)
        return -EPROTO;
    if (id != d->request_id) return -EPROTO;
    d->type = type;
    d->padding_left = h[6];
    d->content_left = clen;
    d->done_event = SL_FCGI_EV_NONE;
    d->have = 0;
    if (type == SL_FCGI_END_REQUEST) {
        if (clen != SL_FCGI_HEADER_LEN) return -EPROTO;
        d->state = ST_END_BODY;
        return 0;
    }
    bool out = type == SL_FCGI_STDOUT;
    bool ended = out ? d->stdout_ended : d->stderr_ended;
    if (clen == 0) {
        /* A repeated end-of-stream record says nothing new; report the end only once. */
        if (!ended) d->done_event = out ? SL_FCGI_EV_STDOUT_END : SL_FCGI_EV_STDERR_END;
        d->state = ST_PADDING;
        return 0;
    }
    if (ended) return -EPROTO;
    d->state = ST_CONTENT;
    return 0;
}

int sl_fcgi_decode(sl_fcgi_decoder *d, const void *buf, size_t len, size_t *consumed,
                   sl_fcgi_event *ev)
{
    const char *p = buf;
    size_t i = 0;
    memset(ev, 0, sizeof *ev);
    *consumed = 0;
    if (d->error) return d->error;

    for (;;) {
        /* A record with nothing (left) to read completes without needing another byte, so an
         * end event does not wait for the next fragment. */
        if (d->state == ST_PADDING && d->padding_left == 0) {
            d->state = ST_HEADER;
            int e = d->done_event;
            d->done_event = SL_FCGI_EV_NONE;
            if (e == SL_FCGI_EV_STDOUT_END) d->stdout_ended = true;
            if (e == SL_FCGI_EV_STDERR_END) d->stderr_ended = true;
            if (e == SL_FCGI_EV_END_REQUEST) {
                d->state = ST_DONE;
                ev->app_status = d->app_status;
                ev->protocol_status = d->protocol_status;
            }
            if (e != SL_FCGI_EV_NONE) {
                ev->type = (sl_fcgi_event_type)e;
                *consumed = i;
                return e;
            }
        }
        if (i == len) break;

        switch (d->state) {
        case ST_HEADER:
            i += gather(d, p + i, len - i);
            if (d->have == SL_FCGI_HEADER_LEN && start_record(d) < 0) return fail(d, consumed);
            break;
        case ST_CONTENT: {
            size_t n = d->content_left;
            if (n > len - i) n = len - i;
            ev->type = d->type == SL_FCGI_STDOUT ? SL_FCGI_EV_STDOUT : SL_FCGI_EV_STDERR;
            ev->data = p + i;
            ev->len = n;
            i += n;
            d->content_left -= n;
            /* Data records carry no end event, so a record without padding is simply over. */
            if (d->content_left == 0) d->state = d->padding_left ? ST_PADDING : ST_HEADER;
            *consumed = i;
            return ev->type;
        }
        case ST_END_BODY: {
            i += gather(d, p + i, len - i);
            if (d->have == SL_FCGI_HEADER_LEN) {
                const uint8_t *b = d->hdr;
                d->app_status = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) |
                                ((uint32_t)b[2] << 8) | b[3];
                d->protocol_status = b[4];
                d->have = 0;
                d->done_event = SL_FCGI_EV_END_REQUEST;
                d->state = ST_PADDING;
            }
            break;
        }
        case ST_PADDING: {
            size_t n = d->padding_left;
            if (n > len - i) n = len - i;
            i += n;
            d->padding_left -= n;
            break;
        }
        default: /* ST_DONE: the request is over, the application has nothing more to say */
            return fail(d, consumed);
        }
    }
    *consumed = i;
    return SL_FCGI_EV_NONE;
}

bool sl_fcgi_decoder_done(const sl_fcgi_decoder *d)
{
    return !d->error && d->state == ST_DONE;
}

bool sl_fcgi_decoder_at_boundary(const sl_fcgi_decoder *d)
{
    return !d->error && ((d->state == ST_HEADER && d->have == 0) || d->state == ST_DONE);
}
