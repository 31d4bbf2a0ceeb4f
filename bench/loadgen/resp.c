/* Incremental HTTP/1.x response parser for loadgen.
 *
 * loadgen reads bodies into one shared scratch buffer and throws them away, or does not read them
 * at all (recv with MSG_TRUNC), so this parser never owns a copy of the message: it is fed whatever
 * read(2) returned and reports how much belonged to the message, and it says how many body bytes
 * may be skipped unseen (sl_lg_resp_skippable), never more than the framing allows. Header lines are the only thing retained, one at a time, in a small fixed buffer;
 * a line longer than that is still parsed past, and only refused when it is one of the three
 * headers the framing depends on. Body bytes are skipped in bulk (Content-Length, read-to-close) or
 * through a byte-level chunk state machine whose data state again moves in bulk, so the per-byte
 * cost is confined to header and chunk-size lines.
 *
 * The parser is strict where a lenient one would hide a server bug (whitespace before a colon,
 * conflicting Content-Length values, chunked not being the final coding, an unsolicited 101) and
 * lenient only where RFC 9112 asks clients to be (bare LF line ends, interim 1xx responses,
 * empty list elements). Limits on header and chunk-line sizes keep a broken server from making it
 * spin on garbage forever.
 */
#include "resp.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

enum { ST_STATUS, ST_HEADERS, ST_LENGTH, ST_CHUNKED, ST_CLOSE, ST_DONE, ST_ERROR };

enum {
    CH_SIZE,          /* hex digits of a chunk size */
    CH_SIZE_WS,       /* blanks after the size */
    CH_EXT,           /* chunk extension, skipped */
    CH_SIZE_LF,       /* LF after the size line's CR */
    CH_DATA,          /* chunk payload */
    CH_DATA_CR,       /* CR after the payload */
    CH_DATA_LF,       /* LF after the payload */
    CH_TRAILER_START, /* first byte of a trailer line (or of the final empty line) */
    CH_TRAILER_LINE,  /* rest of a trailer line */
    CH_TRAILER_LF     /* LF of the final empty line */
};

enum { HDR_OTHER, HDR_CONTENT_LENGTH, HDR_TRANSFER_ENCODING, HDR_CONNECTION };

/* Largest Content-Length or chunk size accepted: far beyond any benchmark file, and small enough
 * that sums of them never overflow. */
#define BODY_MAX (1ULL << 60)

void sl_lg_resp_init(struct sl_lg_resp *r)
{
    memset(r, 0, offsetof(struct sl_lg_resp, line));
    r->content_length = -1;
    r->state = ST_STATUS;
    r->last_hdr = HDR_OTHER;
}

static bool is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static bool token_eq(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(p, word, n) == 0;
}

static int parse_status_line(struct sl_lg_resp *r, const char *l, size_t n)
{
    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0) return -EBADMSG;
    if (l[7] < '0' || l[7] > '9' || l[8] != ' ') return -EBADMSG;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9') return -EBADMSG;
        status = status * 10 + (l[i] - '0');
    }
    if (status < 100) return -EBADMSG;
    /* RFC 9112 wants "SP reason"; the reason itself may be empty or missing entirely. */
    if (n > 12 && l[12] != ' ') return -EBADMSG;
    r->version_minor = l[7] - '0';
    r->status = status;
    return 0;
}

/* Walk the comma-separated elements of a header value, trimming OWS; empty elements are skipped
 * as RFC 9110 section 5.6.1 asks recipients to do. Returns the next element or NULL at the end. */
static const char *next_elem(const char **pos, const char *end, size_t *len)
{
    const char *p = *pos;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *s = p;
        p = comma ? comma + 1 : end;
        while (s < e && is_ows(*s))
            s++;
        while (e > s && is_ows(e[-1]))
            e--;
        if (e > s) {
            *pos = p;
            *len = (size_t)(e - s);
            return s;
        }
    }
    *pos = end;
    return NULL;
}

static int parse_content_length(struct sl_lg_resp *r, const char *v, const char *end)
{
    const char *pos = v, *e;
    size_t n;
    bool any = false;
    while ((e = next_elem(&pos, end, &n)) != NULL) {
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++) {
            if (e[i] < '0' || e[i] > '9') return -EBADMSG;
            x = x * 10 + (uint64_t)(e[i] - '0');
            if (x > BODY_MAX) return -EBADMSG;
        }
        /* Repeated values (in one header or several) are tolerated only when they all agree. */
        if (r->content_length >= 0 && (uint64_t)r->content_length != x) return -EBADMSG;
        r->content_length = (int64_t)x;
        any = true;
    }
    return any ? 0 : -EBADMSG;
}

static int parse_transfer_encoding(struct sl_lg_resp *r, const char *v, const char *end)
{
    const char *pos = v, *e;
    size_t n;
    while ((e = next_elem(&pos, end, &n)) != NULL) {
        /* Only the coding name matters; parameters after ';' are irrelevant for framing. */
        const char *semi = memchr(e, ';', n);
        if (semi) {
            n = (size_t)(semi - e);
            while (n && is_ows(e[n - 1]))
                n--;
        }
        if (n == 0) return -EBADMSG;
        /* chunked must be applied exactly once and last: anything after it is a framing error. */
        if (r->chunked) return -EBADMSG;
        if (token_eq(e, n, "chunked")) r->chunked = true;
        r->te_seen = true;
    }
    return r->te_seen ? 0 : -EBADMSG;
}

static void parse_connection(struct sl_lg_resp *r, const char *v, const char *end)
{
    const char *pos = v, *e;
    size_t n;
    while ((e = next_elem(&pos, end, &n)) != NULL) {
        if (token_eq(e, n, "close")) r->conn_close = true;
        if (token_eq(e, n, "keep-alive")) r->conn_keep_alive = true;
    }
}

static int end_of_headers(struct sl_lg_resp *r)
{
    if (r->status < 200) {
        /* We never ask to switch protocols, so a 101 cannot be followed meaningfully. */
        if (r->status == 101) return -EBADMSG;
        /* Interim response: the real one follows on the same connection. */
        r->content_length = -1;
        r->chunked = r->te_seen = false;
        r->conn_close = r->conn_keep_alive = false;
        r->last_hdr = HDR_OTHER;
        r->state = ST_STATUS;
        return 0;
    }
    if (r->status == 204 || r->status == 304) {
        r->state = ST_DONE;
        return 0;
    }
    if (r->te_seen) {
        /* Transfer-Encoding overrides Content-Length (RFC 9112 6.3); a message carrying both
         * may have been smuggled, so the connection is not trusted for another request. */
        if (r->content_length >= 0) r->no_reuse = true;
        r->content_length = -1;
        if (r->chunked) {
            r->state = ST_CHUNKED;
            r->chunk_state = CH_SIZE;
            r->remaining = 0;
            r->hex_digits = 0;
            r->chunk_line = 0;
        } else {
            r->state = ST_CLOSE;
            r->no_reuse = true;
        }
        return 0;
    }
    if (r->content_length >= 0) {
        r->remaining = (uint64_t)r->content_length;
        r->state = r->remaining ? ST_LENGTH : ST_DONE;
        return 0;
    }
    r->state = ST_CLOSE;
    r->no_reuse = true;
    return 0;
}

static int end_of_line(struct sl_lg_resp *r)
{
    size_t n = r->line_len;
    const char *l = r->line;
    if (!r->line_overflow && n && l[n - 1] == '\r') n--;
    if (r->state == ST_STATUS) return parse_status_line(r, l, n);

    if (n == 0 && !r->line_overflow) return end_of_headers(r);
    if (is_ows(l[0])) {
        /* obs-fold: harmless after a header we ignore, ambiguous after one we rely on. */
        return r->last_hdr == HDR_OTHER ? 0 : -EBADMSG;
    }
    const char *colon = memchr(l, ':', n);
    if (!colon) {
        /* A name longer than the kept prefix cannot be one we care about. */
        if (r->line_overflow) {
            r->last_hdr = HDR_OTHER;
            return 0;
        }
        return -EBADMSG;
    }
    size_t name_len = (size_t)(colon - l);
    if (name_len == 0) return -EBADMSG;
    for (size_t i = 0; i < name_len; i++)
        if (!is_tchar((unsigned char)l[i])) return -EBADMSG;

    int id = HDR_OTHER;
    if (token_eq(l, name_len, "content-length"))
        id = HDR_CONTENT_LENGTH;
    else if (token_eq(l, name_len, "transfer-encoding"))
        id = HDR_TRANSFER_ENCODING;
    else if (token_eq(l, name_len, "connection"))
        id = HDR_CONNECTION;
    r->last_hdr = id;
    if (id == HDR_OTHER) return 0;
    if (r->line_overflow) return -EMSGSIZE;

    const char *v = colon + 1, *end = l + n;
    for (const char *p = v; p < end; p++)
        if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f) return -EBADMSG;
    switch (id) {
    case HDR_CONTENT_LENGTH:
        return parse_content_length(r, v, end);
    case HDR_TRANSFER_ENCODING:
        return parse_transfer_encoding(r, v, end);
    default:
        parse_connection(r, v, end);
        return 0;
    }
}

static ssize_t feed_header_lines(struct sl_lg_resp *r, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (r->state == ST_STATUS || r->state == ST_HEADERS)) {
        const char *lf = memchr(buf + i, '\n', len - i);
        size_t n = lf ? (size_t)(lf - (buf + i)) + 1 : len - i;
        if (n > SL_LG_RESP_HEADERS_MAX - r->header_bytes) return -EMSGSIZE;
        r->header_bytes += n;
        size_t content = lf ? n - 1 : n;
        size_t room = SL_LG_RESP_LINE_MAX - r->line_len;
        if (content > room) {
            content = room;
            r->line_overflow = true;
        }
        memcpy(r->line + r->line_len, buf + i, content);
        r->line_len += content;
        i += n;
        if (lf) {
            int was_status = r->state == ST_STATUS;
            int rc = end_of_line(r);
            if (rc < 0) return rc;
            r->line_len = 0;
            r->line_overflow = false;
            if (was_status && r->state == ST_STATUS) r->state = ST_HEADERS;
        }
    }
    return (ssize_t)i;
}

static bool hex_value(char c, unsigned *v)
{
    if (c >= '0' && c <= '9')
        *v = (unsigned)(c - '0');
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        *v = (unsigned)((c | 0x20) - 'a' + 10);
    else
        return false;
    return true;
}

static void end_of_size_line(struct sl_lg_resp *r)
{
    r->chunk_line = 0;
    r->hex_digits = 0;
    r->chunk_state = r->remaining ? CH_DATA : CH_TRAILER_START;
}

/* The byte after the chunk size's digits, or in the white space after them: white space, ';'
 * (an extension, skipped to the end of the line), or the line's end (CRLF or a bare LF). */
static int after_size(struct sl_lg_resp *r, char c)
{
    if (c == ';')
        r->chunk_state = CH_EXT;
    else if (is_ows(c))
        r->chunk_state = CH_SIZE_WS;
    else if (c == '\r')
        r->chunk_state = CH_SIZE_LF;
    else if (c == '\n')
        end_of_size_line(r);
    else
        return -EBADMSG;
    return 0;
}

static ssize_t feed_chunked(struct sl_lg_resp *r, const char *buf, size_t len,
                            sl_lg_body_fn *on_body, void *arg)
{
    size_t i = 0;
    while (i < len && r->state == ST_CHUNKED) {
        if (r->chunk_state == CH_DATA) {
            size_t take = len - i;
            if (take > r->remaining) take = (size_t)r->remaining;
            if (on_body) on_body(arg, buf + i, take);
            r->body_bytes += take;
            r->remaining -= take;
            i += take;
            if (!r->remaining) r->chunk_state = CH_DATA_CR;
            continue;
        }
        char c = buf[i++];
        /* The trailer shares the line budget: a server must not be able to stream an endless
         * chunk extension or trailer at us. */
        if (++r->chunk_line > SL_LG_RESP_CHUNK_LINE_MAX) return -EMSGSIZE;
        unsigned v;
        switch (r->chunk_state) {
        case CH_SIZE:
            if (hex_value(c, &v)) {
                if (r->remaining >= BODY_MAX / 16) return -EBADMSG;
                r->remaining = r->remaining * 16 + v;
                r->hex_digits++;
                break;
            }
            if (!r->hex_digits) return -EBADMSG;
            if (after_size(r, c) < 0) return -EBADMSG;
            break;
        case CH_SIZE_WS:
            if (after_size(r, c) < 0) return -EBADMSG;
            break;
        case CH_EXT:
            if (c == '\n') end_of_size_line(r);
            break;
        case CH_SIZE_LF:
            if (c != '\n') return -EBADMSG;
            end_of_size_line(r);
            break;
        case CH_DATA_CR:
            r->chunk_line = 0;
            if (c == '\r')
                r->chunk_state = CH_DATA_LF;
            else if (c == '\n')
                r->chunk_state = CH_SIZE;
            else
                return -EBADMSG;
            break;
        case CH_DATA_LF:
            if (c != '\n') return -EBADMSG;
            r->chunk_line = 0;
            r->chunk_state = CH_SIZE;
            break;
        case CH_TRAILER_START:
            if (c == '\r')
                r->chunk_state = CH_TRAILER_LF;
            else if (c == '\n')
                r->state = ST_DONE;
            else
                r->chunk_state = CH_TRAILER_LINE;
            break;
        case CH_TRAILER_LINE:
            if (c == '\n') r->chunk_state = CH_TRAILER_START;
            break;
        case CH_TRAILER_LF:
            if (c != '\n') return -EBADMSG;
            r->state = ST_DONE;
            break;
        default:
            return -EBADMSG;
        }
    }
    return (ssize_t)i;
}

ssize_t sl_lg_resp_feed(struct sl_lg_resp *r, const char *buf, size_t len, sl_lg_body_fn *on_body,
                        void *arg)
{
    size_t i = 0;
    while (i < len) {
        ssize_t n;
        switch (r->state) {
        case ST_STATUS:
        case ST_HEADERS:
            n = feed_header_lines(r, buf + i, len - i);
            break;
        case ST_LENGTH: {
            size_t take = len - i;
            if (take > r->remaining) take = (size_t)r->remaining;
            if (on_body) on_body(arg, buf + i, take);
            r->body_bytes += take;
            r->remaining -= take;
            if (!r->remaining) r->state = ST_DONE;
            n = (ssize_t)take;
            break;
        }
        case ST_CHUNKED:
            n = feed_chunked(r, buf + i, len - i, on_body, arg);
            break;
        case ST_CLOSE:
            if (on_body) on_body(arg, buf + i, len - i);
            r->body_bytes += len - i;
            n = (ssize_t)(len - i);
            break;
        case ST_DONE:
            return (ssize_t)i;
        default:
            return -EBADMSG;
        }
        if (n < 0) {
            r->state = ST_ERROR;
            return n;
        }
        i += (size_t)n;
    }
    return (ssize_t)i;
}

int sl_lg_resp_eof(struct sl_lg_resp *r)
{
    switch (r->state) {
    case ST_DONE:
        return 0;
    case ST_CLOSE:
        r->state = ST_DONE;
        return 0;
    case ST_STATUS:
    case ST_HEADERS:
        return -EPROTO;
    case ST_LENGTH:
    case ST_CHUNKED:
        return -EPIPE;
    default:
        return -EBADMSG;
    }
}

uint64_t sl_lg_resp_skippable(const struct sl_lg_resp *r, bool *ends_message)
{
    *ends_message = r->state == ST_LENGTH;
    switch (r->state) {
    case ST_LENGTH:
        return r->remaining;
    case ST_CHUNKED:
        return r->chunk_state == CH_DATA ? r->remaining : 0;
    case ST_CLOSE:
        return UINT64_MAX;
    default:
        return 0;
    }
}

void sl_lg_resp_skip(struct sl_lg_resp *r, uint64_t n)
{
    /* The same transitions as feeding n payload bytes, minus looking at them. */
    r->body_bytes += n;
    if (r->state == ST_CLOSE) return;
    r->remaining -= n;
    if (r->remaining) return;
    if (r->state == ST_LENGTH)
        r->state = ST_DONE;
    else
        r->chunk_state = CH_DATA_CR;
}

bool sl_lg_resp_headers_done(const struct sl_lg_resp *r)
{
    return r->state >= ST_LENGTH && r->state <= ST_DONE;
}

bool sl_lg_resp_done(const struct sl_lg_resp *r)
{
    return r->state == ST_DONE;
}

bool sl_lg_resp_reusable(const struct sl_lg_resp *r)
{
    if (r->state != ST_DONE || r->no_reuse || r->conn_close) return false;
    return r->version_minor >= 1 || r->conn_keep_alive;
}
