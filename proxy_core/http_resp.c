/* Response heads from backends, the chunked transfer coding, and hop-by-hop fields.
 *
 * The head parsers work like the request parser in server/http_parse.c: stateless, handed all
 * the bytes received so far, and checking them strictly left to right one byte at a time. Every
 * decision about byte p depends only on bytes up to p, and running out of input always yields
 * "need more"; that is what gives the incremental contract (a prefix gives 0 or the same result
 * as the whole) and lets the size limit be enforced at the first byte past it. Checks that need
 * the whole head (Content-Length agreement, Transfer-Encoding, CGI Status/Location) run once the
 * empty line has been found. The proxy re-frames every body it forwards, so a backend's framing
 * only has to be unambiguous to us; still, whatever RFC 9112 calls a smuggling risk
 * (Transfer-Encoding with Content-Length, conflicting lengths, codings we cannot undo) is refused
 * rather than guessed at, as nginx does with its upstreams.
 *
 * The chunked decoder is the streaming counterpart: a byte-level state machine with no buffer of
 * its own, handing out spans of the caller's fragments. Extensions and trailers are validated
 * (lenient parsing of those is where request smuggling through chunked bodies comes from) and
 * then dropped.
 *
 * Content-Length and comma-separated lists are read by the request parser's functions
 * (sl_http_content_length, sl_http_list_next in server/http_parse.h), so requests and responses
 * agree on them; the small character-class helpers stay here.
 */
#include "http_resp.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "http_parse.h"

/* ---- character classes ---- */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 9110 §5.6.2 tchar. */
/* tchar (RFC 9110 §5.6.2) by table: every byte of every field name comes here. */
#define TC_ALNUM(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= 'a' && (c) <= 'z'))
#define TC_SYM(c)                                                                                  \
    ((c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' ||          \
     (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' ||           \
     (c) == '`' || (c) == '|' || (c) == '~')
#define TC(c) (TC_ALNUM(c) || TC_SYM(c))
#define TC4(c) TC(c), TC((c) + 1), TC((c) + 2), TC((c) + 3)
#define TC16(c) TC4(c), TC4((c) + 4), TC4((c) + 8), TC4((c) + 12)
#define TC64(c) TC16(c), TC16((c) + 16), TC16((c) + 32), TC16((c) + 48)
static const bool tchar_table[256] = {TC64(0), TC64(64), TC64(128), TC64(192)};

static bool is_tchar(unsigned char c)
{
    return tchar_table[c];
}

/* Bytes allowed inside a field value or reason phrase: SP, HTAB, VCHAR, obs-text (0x80-0xff). */
#define TX(c) ((c) == ' ' || (c) == '\t' || ((c) >= 0x21 && (c) != 0x7f))
#define TX4(c) TX(c), TX((c) + 1), TX((c) + 2), TX((c) + 3)
#define TX16(c) TX4(c), TX4((c) + 4), TX4((c) + 8), TX4((c) + 12)
#define TX64(c) TX16(c), TX16((c) + 16), TX16((c) + 32), TX16((c) + 48)
static const bool text_table[256] = {TX64(0), TX64(64), TX64(128), TX64(192)};

static bool is_text(unsigned char c)
{
    return text_table[c];
}

static int hex_value(unsigned char c)
{
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static bool eq_ci_n(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn) return false;
    for (size_t i = 0; i < an; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i])) return false;
    return true;
}

static bool eq_ci(const char *s, size_t n, const char *lit)
{
    return eq_ci_n(s, n, lit, strlen(lit));
}

/* The same against a string literal, whose length is known at compile time. */
#define EQ_CI_LIT(s, n, lit) eq_ci_n((s), (n), ("" lit), sizeof(lit) - 1)

static void trim(const char **v, size_t *n)
{
    while (*n && is_ows((unsigned char)(*v)[0])) {
        (*v)++;
        (*n)--;
    }
    while (*n && is_ows((unsigned char)(*v)[*n - 1]))
        (*n)--;
}

/* ---- heads ---- */

typedef struct scanner {
    const char *buf;
    size_t len;
    size_t max_head;
    size_t max_fields;
    size_t stop; /* min(len, max_head) */
    sl_upstream_head *h;
} scanner;

/* The byte at p: 1 with *c set, 0 when the input ends before p, -E2BIG when p lies beyond the
 * head size limit. Running out wins over the limit so that a prefix never reports more than the
 * whole input does. */
static int peek(const scanner *s, size_t p, unsigned char *c)
{
    if (p >= s->len) return 0;
    if (p >= s->max_head) return -E2BIG;
    *c = (unsigned char)s->buf[p];
    return 1;
}

/* The fast scans run to the first byte they cannot take or to s->stop (the end of the input or
 * the size limit, whichever comes first); there, the same answer peek() would give. */
static int stopped(const scanner *s, size_t p)
{
    return p >= s->len ? 0 : -E2BIG;
}

#define NEXT(s, p, c)                                                                              \
    do {                                                                                           \
        int r_ = peek((s), (p), &(c));                                                             \
        if (r_ <= 0) return r_;                                                                    \
    } while (0)

/* c, at p, is CR or LF: the line ends there. Sets *next past the terminator; a CR must be
 * followed by LF. */
static int line_end(const scanner *s, size_t p, unsigned char c, size_t *next)
{
    if (c == '\n') {
        *next = p + 1;
        return 1;
    }
    unsigned char d;
    NEXT(s, p + 1, d);
    if (d != '\n') return -EPROTO;
    *next = p + 2;
    return 1;
}

/* "HTTP/" DIGIT "." DIGIT SP 3DIGIT [ SP reason ] line-end. A missing SP before an empty reason
 * is tolerated: servers send "HTTP/1.1 200\r\n" and nothing is ambiguous about it. */
static int status_line(const scanner *s, size_t *pp)
{
    sl_upstream_head *h = s->h;
    static const char name[] = "HTTP/";
    size_t p = 0;
    unsigned char c;
    int rc;
    for (size_t i = 0; i < sizeof name - 1; i++, p++) {
        NEXT(s, p, c);
        if (c != (unsigned char)name[i]) return -EPROTO;
    }
    NEXT(s, p, c);
    if (c != '1') return -EPROTO; /* also a well-formed HTTP/2.0: not a version we talk */
    p++;
    NEXT(s, p, c);
    if (c != '.') return -EPROTO;
    p++;
    NEXT(s, p, c);
    if (!is_digit(c)) return -EPROTO;
    h->version = c == '0' ? 10 : 11;
    p++;
    NEXT(s, p, c);
    if (c != ' ') return -EPROTO;
    p++;
    int status = 0;
    for (int i = 0; i < 3; i++, p++) {
        NEXT(s, p, c);
        if (!is_digit(c)) return -EPROTO;
        status = status * 10 + (c - '0');
    }
    if (status < 100 || status > 599) return -EPROTO;
    h->status = status;
    NEXT(s, p, c);
    size_t start = p;
    if (c == ' ') {
        start = ++p;
        while (p < s->stop && is_text((unsigned char)s->buf[p]))
            p++;
        if (p >= s->stop) return stopped(s, p);
        c = (unsigned char)s->buf[p];
        if (c != '\r' && c != '\n') return -EPROTO;
    } else if (c != '\r' && c != '\n') {
        return -EPROTO;
    }
    h->reason = s->buf + start;
    h->reason_len = p - start;
    trim(&h->reason, &h->reason_len);
    if ((rc = line_end(s, p, c, pp)) <= 0) return rc;
    return 1;
}

/* Field lines from p up to and including the empty line; sets h->head_len. */
static int field_lines(const scanner *s, size_t p)
{
    sl_upstream_head *h = s->h;
    unsigned char c;
    int rc;
    for (;;) {
        NEXT(s, p, c);
        if (c == '\r' || c == '\n') {
            size_t end;
            if ((rc = line_end(s, p, c, &end)) <= 0) return rc;
            h->head_len = end;
            return 1;
        }
        /* Either obs-fold or whitespace between the status line and the first field; both are
         * to be rejected by a recipient that does not unfold (RFC 9112 §2.2, §5.2). */
        if (is_ows(c)) return -EPROTO;
        if (h->n_fields == s->max_fields) return -E2BIG;
        const unsigned char *b = (const unsigned char *)s->buf;
        size_t name = p;
        while (p < s->stop && is_tchar(b[p]))
            p++;
        if (p >= s->stop) return stopped(s, p);
        /* Not a tchar: the colon, or whitespace before it or any other byte. */
        if (b[p] != ':' || p == name) return -EPROTO;
        size_t name_len = p - name;
        size_t value = ++p;
        while (p < s->stop && is_text(b[p]))
            p++;
        if (p >= s->stop) return stopped(s, p);
        c = b[p];
        if (c != '\r' && c != '\n') return -EPROTO;
        sl_upstream_field *f = &h->fields[h->n_fields++];
        f->name = s->buf + name;
        f->name_len = name_len;
        f->value = s->buf + value;
        f->value_len = p - value;
        trim(&f->value, &f->value_len);
        size_t next;
        if ((rc = line_end(s, p, c, &next)) <= 0) return rc;
        p = next;
    }
}

static void connection_tokens(sl_upstream_head *h, const sl_upstream_field *f)
{
    size_t pos = 0, n;
    const char *e;
    while (sl_http_list_next(f->value, f->value_len, &pos, &e, &n)) {
        if (EQ_CI_LIT(e, n, "close")) h->conn_close = true;
        if (EQ_CI_LIT(e, n, "keep-alive")) h->conn_keep_alive = true;
        if (EQ_CI_LIT(e, n, "upgrade")) h->conn_upgrade = true;
    }
}

/* "SSS" or "SSS reason" (RFC 3875 §6.3.3); a 1xx makes no sense as a CGI response. */
static int cgi_status(sl_upstream_head *h, const sl_upstream_field *f)
{
    const char *v = f->value;
    size_t n = f->value_len;
    if (n < 3 || !is_digit((unsigned char)v[0]) || !is_digit((unsigned char)v[1]) ||
        !is_digit((unsigned char)v[2]))
        return -EPROTO;
    if (n > 3 && !is_ows((unsigned char)v[3])) return -EPROTO;
    int status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
    if (status < 200 || status > 599) return -EPROTO;
    h->status = status;
    h->reason = v + 3;
    h->reason_len = n - 3;
    trim(&h->reason, &h->reason_len);
    return 0;
}

/* Whole-head checks once the empty line is known. */
static int semantics(sl_upstream_head *h, bool cgi)
{
    size_t te_fields = 0, te_elems = 0, te_chunked = 0;
    for (size_t i = 0; i < h->n_fields; i++) {
        const sl_upstream_field *f = &h->fields[i];
        if (EQ_CI_LIT(f->name, f->name_len, "content-length")) {
            if (sl_http_content_length(f->value, f->value_len, &h->content_length) < 0)
                return -EPROTO;
        } else if (EQ_CI_LIT(f->name, f->name_len, "connection")) {
            connection_tokens(h, f);
        } else if (EQ_CI_LIT(f->name, f->name_len, "location")) {
            if (h->location && cgi) return -EPROTO;
            if (!h->location) h->location = f;
        } else if (cgi && EQ_CI_LIT(f->name, f->name_len, "status")) {
            if (h->status_field) return -EPROTO;
            h->status_field = f;
            if (cgi_status(h, f) < 0) return -EPROTO;
        } else if (!cgi && EQ_CI_LIT(f->name, f->name_len, "transfer-encoding")) {
            te_fields++;
            size_t pos = 0, n;
            const char *e;
            while (sl_http_list_next(f->value, f->value_len, &pos, &e, &n)) {
                te_elems++;
                if (EQ_CI_LIT(e, n, "chunked")) te_chunked++;
            }
        }
    }
    if (cgi) {
        if (h->n_fields == 0) return -EPROTO;
        if (!h->status_field && h->location) {
            h->status = 302;
            const char *l = h->location->value;
            size_t n = h->location->value_len;
            /* "//host/..." is a network-path reference, not a local path. */
            h->local_redirect = n >= 1 && l[0] == '/' && !(n >= 2 && l[1] == '/');
        }
        return 0;
    }
    if (te_fields) {
        /* Only chunked, exactly once: any other coding we would have to undo ourselves. */
        if (te_elems != 1 || te_chunked != 1) return -EPROTO;
        if (h->version == 10 || h->content_length >= 0) return -EPROTO;
        h->chunked = true;
    }
    return 0;
}

static int parse_head(const char *buf, size_t len, const sl_upstream_limits *lim,
                      sl_upstream_head *h, bool cgi)
{
    /* Everything but fields[] (3 KiB, of which only the first n_fields are ever read). */
    _Static_assert(offsetof(sl_upstream_head, n_fields) ==
                       offsetof(sl_upstream_head, fields) + sizeof h->fields,
                   "n_fields follows fields[]");
    memset(h, 0, offsetof(sl_upstream_head, fields));
    memset(&h->n_fields, 0, sizeof *h - offsetof(sl_upstream_head, n_fields));
    h->content_length = -1;
    h->status = cgi ? 200 : 0;
    scanner s = {buf, len, lim->max_head, lim->max_headers, 0, h};
    /* The result is an int. */
    if (s.max_head > INT_MAX) s.max_head = INT_MAX;
    if (s.max_fields > SL_UPSTREAM_MAX_HEADERS) s.max_fields = SL_UPSTREAM_MAX_HEADERS;
    s.stop = len < s.max_head ? len : s.max_head;
    size_t p = 0;
    int rc;
    if (!cgi && (rc = status_line(&s, &p)) <= 0) return rc;
    if ((rc = field_lines(&s, p)) <= 0) return rc;
    if ((rc = semantics(h, cgi)) < 0) return rc;
    return (int)h->head_len;
}

int sl_upstream_parse_http(const char *buf, size_t len, const sl_upstream_limits *lim,
                           sl_upstream_head *h)
{
    return parse_head(buf, len, lim, h, false);
}

int sl_upstream_parse_cgi(const char *buf, size_t len, const sl_upstream_limits *lim,
                          sl_upstream_head *h)
{
    return parse_head(buf, len, lim, h, true);
}

const sl_upstream_field *sl_upstream_find(const sl_upstream_head *h, const char *name)
{
    for (size_t i = 0; i < h->n_fields; i++)
        if (eq_ci(h->fields[i].name, h->fields[i].name_len, name)) return &h->fields[i];
    return NULL;
}

bool sl_upstream_interim(const sl_upstream_head *h)
{
    return h->status >= 100 && h->status < 200 && h->status != 101;
}

sl_body_framing sl_upstream_framing(const sl_upstream_head *h, bool head_request)
{
    if (head_request || (h->status >= 100 && h->status < 200) || h->status == 204 ||
        h->status == 304)
        return SL_BODY_NONE;
    if (h->chunked) return SL_BODY_CHUNKED;
    if (h->content_length >= 0) return SL_BODY_LENGTH;
    return SL_BODY_UNTIL_CLOSE;
}

bool sl_upstream_keep_alive(const sl_upstream_head *h, bool head_request)
{
    if (h->status == 101 || h->conn_close) return false;
    if (h->version == 10 && !h->conn_keep_alive) return false;
    return sl_upstream_framing(h, head_request) != SL_BODY_UNTIL_CLOSE;
}

bool sl_hop_by_hop(const char *name, size_t len, const char *connection_value, size_t conn_len)
{
    static const char *const fixed[] = {"connection", "keep-alive",        "proxy-connection",
                                        "te",         "trailer",           "transfer-encoding",
                                        "upgrade"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (eq_ci(name, len, fixed[i])) return true;
    size_t pos = 0, n;
    const char *e;
    while (connection_value && sl_http_list_next(connection_value, conn_len, &pos, &e, &n))
        if (eq_ci_n(e, n, name, len)) return true;
    return false;
}

bool sl_upstream_hop_by_hop(const sl_upstream_head *h, const sl_upstream_field *f)
{
    if (sl_hop_by_hop(f->name, f->name_len, NULL, 0)) return true;
    for (size_t i = 0; i < h->n_fields; i++) {
        const sl_upstream_field *c = &h->fields[i];
        if (EQ_CI_LIT(c->name, c->name_len, "connection") &&
            sl_hop_by_hop(f->name, f->name_len, c->value, c->value_len))
            return true;
    }
    return false;
}

/* ---- chunked ---- */

enum {
    C_SIZE,       /* chunk-size digits */
    C_EXT_WS,     /* after the size or an extension: OWS, then ';' or CR */
    C_NAME_WS,    /* after ';': OWS, then an extension name */
    C_NAME,       /* extension name */
    C_AFTER_NAME, /* OWS after a name, then '=', ';' or CR */
    C_VAL_WS,     /* after '=': OWS, then a token or a quoted-string */
    C_VAL_TOKEN,
    C_VAL_Q,  /* inside a quoted-string */
    C_VAL_QP, /* after a backslash in a quoted-string */
    C_SIZE_LF,
    C_DATA,
    C_DATA_CR,
    C_DATA_LF,
    C_TLINE,  /* start of a trailer line, or the final CRLF */
    C_TNAME,
    C_TVALUE,
    C_TLF,
    C_FINAL_LF,
    C_DONE
};

void sl_chunked_init(sl_chunked_decoder *c, size_t max_trailer)
{
    memset(c, 0, sizeof *c);
    c->state = C_SIZE;
    c->max_trailer = max_trailer;
}

/* The byte after the chunk size or an extension's value, or in the white space after one: more
 * white space, ';' (an extension follows) or the CR that ends the line. */
static int after_value(sl_chunked_decoder *c, unsigned char b)
{
    if (is_ows(b)) c->state = C_EXT_WS;
    else if (b == ';') c->state = C_NAME_WS;
    else if (b == '\r') c->state = C_SIZE_LF;
    else return -EPROTO;
    return 0;
}

/* One byte of the chunk-size line (everything up to and including its CRLF). */
static int size_line_byte(sl_chunked_decoder *c, unsigned char b)
{
    if (++c->line > SL_CHUNKED_MAX_LINE) return -E2BIG;
    switch (c->state) {
    case C_SIZE: {
        int d = hex_value(b);
        if (d >= 0) {
            if (c->left > (uint64_t)(INT64_MAX - d) / 16) return -EPROTO;
            c->left = c->left * 16 + (uint64_t)d;
            c->digits = true;
            return 0;
        }
        if (!c->digits) return -EPROTO;
        return after_value(c, b);
    }
    case C_EXT_WS:
        return after_value(c, b);
    case C_NAME_WS:
        if (is_ows(b)) return 0;
        if (!is_tchar(b)) return -EPROTO;
        c->state = C_NAME;
        return 0;
    case C_NAME:
    case C_AFTER_NAME:
        if (c->state == C_NAME && is_tchar(b)) return 0;
        if (is_ows(b)) c->state = C_AFTER_NAME;
        else if (b == '=') c->state = C_VAL_WS;
        else return after_value(c, b);
        return 0;
    case C_VAL_WS:
        if (is_ows(b)) return 0;
        if (is_tchar(b)) c->state = C_VAL_TOKEN;
        else if (b == '"') c->state = C_VAL_Q;
        else return -EPROTO;
        return 0;
    case C_VAL_TOKEN:
        if (is_tchar(b)) return 0;
        return after_value(c, b);
    case C_VAL_Q:
        if (b == '"') c->state = C_EXT_WS;
        else if (b == '\\') c->state = C_VAL_QP;
        else if (!is_text(b)) return -EPROTO; /* qdtext: everything in text but '"' and '\' */
        return 0;
    case C_VAL_QP:
        if (!is_text(b)) return -EPROTO;
        c->state = C_VAL_Q;
        return 0;
    default: /* C_SIZE_LF */
        if (b != '\n') return -EPROTO;
        c->line = 0;
        c->digits = false;
        c->state = c->left ? C_DATA : C_TLINE;
        return 0;
    }
}

/* One byte of the trailer section. */
static int trailer_byte(sl_chunked_decoder *c, unsigned char b)
{
    if (c->state == C_TLINE && b == '\r') {
        c->state = C_FINAL_LF;
        return 0;
    }
    if (c->state == C_FINAL_LF) {
        if (b != '\n') return -EPROTO;
        c->state = C_DONE;
        return 0;
    }
    if (++c->trailer > c->max_trailer) return -E2BIG;
    switch (c->state) {
    case C_TLINE:
        if (!is_tchar(b)) return -EPROTO;
        c->state = C_TNAME;
        return 0;
    case C_TNAME:
        if (b == ':') c->state = C_TVALUE;
        else if (!is_tchar(b)) return -EPROTO;
        return 0;
    case C_TVALUE:
        if (b == '\r') c->state = C_TLF;
        else if (!is_text(b)) return -EPROTO;
        return 0;
    default: /* C_TLF */
        if (b != '\n') return -EPROTO;
        c->state = C_TLINE;
        return 0;
    }
}

int sl_chunked_decode(sl_chunked_decoder *c, const char *buf, size_t len, size_t *consumed,
                      const char **data, size_t *data_len)
{
    *consumed = 0;
    if (c->error) return c->error;
    if (c->state == C_DONE) return SL_CHUNKED_END;
    size_t i = 0;
    while (i < len) {
        unsigned char b = (unsigned char)buf[i];
        int rc;
        switch (c->state) {
        case C_DATA: {
            size_t n = len - i;
            if ((uint64_t)n > c->left) n = (size_t)c->left;
            *data = buf + i;
            *data_len = n;
            c->left -= n;
            if (c->left == 0) c->state = C_DATA_CR;
            *consumed = i + n;
            return SL_CHUNKED_DATA;
        }
        case C_DATA_CR:
            rc = b == '\r' ? 0 : -EPROTO;
            c->state = C_DATA_LF;
            break;
        case C_DATA_LF:
            rc = b == '\n' ? 0 : -EPROTO;
            c->state = C_SIZE;
            break;
        case C_TLINE:
        case C_TNAME:
        case C_TVALUE:
        case C_TLF:
        case C_FINAL_LF:
            rc = trailer_byte(c, b);
            break;
        default:
            rc = size_line_byte(c, b);
            break;
        }
        if (rc < 0) {
            c->error = rc;
            return rc;
        }
        i++;
        if (c->state == C_DONE) {
            *consumed = i;
            return SL_CHUNKED_END;
        }
    }
    *consumed = i;
    return SL_CHUNKED_NEED;
}

bool sl_chunked_done(const sl_chunked_decoder *c)
{
    return !c->error && c->state == C_DONE;
}
