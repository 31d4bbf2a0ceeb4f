/* HTTP/1.1 request-head parsing (RFC 9112).
 *
 * The parser keeps no state between calls: the connection code appends bytes to its buffer and
 * calls it again, and every call scans from the first byte. A head is bounded by max_head, so the
 * rescans cost little, and being stateless removes a whole class of resumption bugs. The scan is a
 * single left-to-right pass in which every byte is validated the moment it is reached and every
 * field line is interpreted the moment its line ends; only the checks that need the whole head
 * (missing Host, the final transfer coding) wait for the empty line. That ordering is what makes
 * the result monotone in the input length: a prefix either already shows the first error of the
 * whole input or reports 0, so garbage and oversized heads are refused after the first read that
 * shows them instead of after the buffer fills.
 *
 * A field sent on several lines stays several lines, each linked to the next of its name, so a
 * reader sees the whole field (RFC 9110 §5.3) without the parser copying anything; Connection and
 * Transfer-Encoding, which the parser interprets itself, are read over all their lines here.
 *
 * Strictness is deliberate, since request smuggling relies on two parsers disagreeing about where
 * a message ends: bare CR, obs-fold, whitespace before the colon, Content-Length lists with
 * different values, Transfer-Encoding next to Content-Length, and any Transfer-Encoding not ending
 * in exactly one chunked are all refused rather than repaired.
 */
#include "http_parse.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "path.h"

/* RFC 9112 §2.2 asks servers to skip "at least one" empty line before the request line; a few
 * cover sloppy clients, more is not a client we need to serve. */
#define MAX_LEADING_EMPTY 8

/* head_len is returned as int; the leading empty lines come on top of max_head. */
#define MAX_HEAD_CAP ((size_t)INT_MAX - 2 * MAX_LEADING_EMPTY)

typedef struct parser {
    const char *b;
    size_t len;
    size_t start; /* offset of the request line: where max_head and max_line are counted from */
    size_t max_head, max_line, max_headers;
    size_t head_lim, line_lim; /* first offsets past max_head, and past the request line's limit */
    sl_http_request *req;
    /* Transfer-Encoding as one combined list over all its field lines (RFC 9110 §5.3). */
    bool te_seen, te_last_chunked;
    unsigned te_chunked, te_other;
} parser;

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* Byte classes, looked up once per byte on the hot path instead of a chain of comparisons. */
enum { C_TCHAR = 1, C_OWS = 2, C_EOL = 4, C_BAD_VALUE = 8 };
static const unsigned char cls[256] = {
    /* tchar, RFC 9110 §5.6.2 */
    ['0' ... '9'] = C_TCHAR, ['a' ... 'z'] = C_TCHAR, ['A' ... 'Z'] = C_TCHAR,
    ['!'] = C_TCHAR, ['#'] = C_TCHAR, ['$'] = C_TCHAR, ['%'] = C_TCHAR, ['&'] = C_TCHAR,
    ['\''] = C_TCHAR, ['*'] = C_TCHAR, ['+'] = C_TCHAR, ['-'] = C_TCHAR, ['.'] = C_TCHAR,
    ['^'] = C_TCHAR, ['_'] = C_TCHAR, ['`'] = C_TCHAR, ['|'] = C_TCHAR, ['~'] = C_TCHAR,
    /* in a field value: CTLs other than HTAB are refused (CR and LF end the line) */
    [0x00 ... 0x08] = C_BAD_VALUE, [0x0b ... 0x0c] = C_BAD_VALUE, [0x0e ... 0x1f] = C_BAD_VALUE,
    [0x7f] = C_BAD_VALUE,
    [' '] = C_OWS, ['\t'] = C_OWS,
    ['\r'] = C_EOL | C_BAD_VALUE, ['\n'] = C_EOL | C_BAD_VALUE,
};

/* tchar, RFC 9110 §5.6.2. */
static bool is_tchar(unsigned char c)
{
    return cls[c] & C_TCHAR;
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* s[0..n) equals the lower-case NUL-terminated lit, ignoring case. */
static bool eq_ci(const char *s, size_t n, const char *lit)
{
    size_t k = 0;
    for (; k < n; k++) {
        if (lit[k] == 0 || lower((unsigned char)s[k]) != (unsigned char)lit[k]) return false;
    }
    return lit[k] == 0;
}

/* A byte at p is about to be examined; refuse it if the head would exceed max_head. Content bytes
 * of the request line are blamed on the line (414) even when it is max_head they overrun. */
static int check_limit(const parser *ps, size_t p, bool request_line)
{
    if (request_line && p >= ps->line_lim) return -414;
    if (p >= ps->head_lim) return -431;
    return 0;
}

/* The fast scans run to the first byte they cannot take or to stop, the end of the input or the
 * first offset past a limit, whichever comes first, so that a byte's class costs one look-up. */
static size_t scan_stop(const parser *ps, bool request_line)
{
    size_t s = ps->len < ps->head_lim ? ps->len : ps->head_lim;
    if (request_line && ps->line_lim < s) s = ps->line_lim;
    return s;
}

/* A scan reached stop at p without a byte that decides: "need more" when the input ended there
 * (running out wins over a limit, as in the byte-by-byte order), else the limit's error. */
static int stopped(const parser *ps, size_t p, bool request_line)
{
    if (p >= ps->len) return 0;
    return check_limit(ps, p, request_line);
}

/* b[p] is CR or LF. Returns 1 and sets *next past the terminator, 0 when the LF after a CR has not
 * arrived yet, or an error. */
static int line_end(const parser *ps, size_t p, size_t *next)
{
    int r = check_limit(ps, p, false);
    if (r) return r;
    if (ps->b[p] == '\n') {
        *next = p + 1;
        return 1;
    }
    if (p + 1 >= ps->len) return 0;
    if ((r = check_limit(ps, p + 1, false))) return r;
    if (ps->b[p + 1] != '\n') return -400; /* bare CR: RFC 9112 §2.2 */
    *next = p + 2;
    return 1;
}

static sl_method method_of(const char *m, size_t n)
{
    static const struct {
        const char *name;
        sl_method m;
    } known[] = {
        {"GET", SL_METHOD_GET},         {"HEAD", SL_METHOD_HEAD},
        {"POST", SL_METHOD_POST},       {"PUT", SL_METHOD_PUT},
        {"DELETE", SL_METHOD_DELETE},   {"OPTIONS", SL_METHOD_OPTIONS},
        {"CONNECT", SL_METHOD_CONNECT}, {"TRACE", SL_METHOD_TRACE},
        {"PATCH", SL_METHOD_PATCH},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strlen(known[i].name) == n && memcmp(known[i].name, m, n) == 0) return known[i].m;
    }
    return SL_METHOD_OTHER;
}

int sl_method_refused_status(sl_method m)
{
    return m == SL_METHOD_OTHER ? 501 : 405;
}

const char *sl_method_name(sl_method m)
{
    switch (m) {
    case SL_METHOD_GET:
        return "GET";
    case SL_METHOD_HEAD:
        return "HEAD";
    case SL_METHOD_POST:
        return "POST";
    case SL_METHOD_PUT:
        return "PUT";
    case SL_METHOD_DELETE:
        return "DELETE";
    case SL_METHOD_OPTIONS:
        return "OPTIONS";
    case SL_METHOD_CONNECT:
        return "CONNECT";
    case SL_METHOD_TRACE:
        return "TRACE";
    case SL_METHOD_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

/* request-line = method SP request-target SP HTTP-version CRLF (RFC 9112 §3). */
static int parse_request_line(parser *ps, size_t *pp)
{
    const char *b = ps->b;
    sl_http_request *req = ps->req;
    size_t p = ps->start;
    int r;

    const size_t stop = scan_stop(ps, true);
    while (p < stop && is_tchar((unsigned char)b[p]))
        p++;
    if (p >= stop) return stopped(ps, p, true);
    if (b[p] != ' ') return -400;
    if (p == ps->start) return -400;
    req->method_str = b + ps->start;
    req->method_len = p - ps->start;
    req->method = method_of(req->method_str, req->method_len);

    /* Any visible ASCII: the form of the target is the caller's business, but SP, CTLs and
     * non-ASCII bytes never belong in it, and a second SP or a line end here is HTTP/0.9 or junk.
     */
    size_t t = ++p;
    while (p < stop && (unsigned char)b[p] - 0x21u < 0x5eu) /* 0x21 ..= 0x7e */
        p++;
    if (p >= stop) return stopped(ps, p, true);
    if (b[p] != ' ') return -400;
    if (p == t) return -400;
    req->target = b + t;
    req->target_len = p - t;

    static const char proto[] = "HTTP/";
    size_t v = ++p;
    for (;; p++) {
        if (p >= ps->len) return 0;
        size_t k = p - v;
        unsigned char c = (unsigned char)b[p];
        if (k == 8) {
            if (c != '\r' && c != '\n') return -400;
            break;
        }
        if ((r = check_limit(ps, p, true))) return r;
        bool ok = k < 5 ? c == (unsigned char)proto[k] : k == 6 ? c == '.' : is_digit(c);
        if (!ok) return -400;
    }
    if ((r = line_end(ps, p, &p)) <= 0) return r;
    /* Only a well-formed version earns 505; "HTTP/2.0" is one, "HTTP/11" is not. */
    if (b[v + 5] != '1') return -505;
    req->version = b[v + 7] == '0' ? 10 : 11;
    *pp = p;
    return 1;
}

static bool is_unreserved(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool is_sub_delim(unsigned char c)
{
    return c != 0 && strchr("!$&'()*+,;=", c) != NULL;
}

/* IPv6address, RFC 3986 §3.2.2: eight 16-bit groups, or fewer with one "::", the last two groups
 * optionally written as an IPv4 address. */
static bool valid_ipv6(const char *s, size_t n)
{
    size_t i = 0;
    unsigned groups = 0;
    bool dcolon = false;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        dcolon = true;
        i = 2;
        if (i == n) return true;
    }
    for (;;) {
        size_t st = i;
        while (i < n && i - st < 4 && is_hex((unsigned char)s[i]))
            i++;
        if (i < n && s[i] == '.') {
            if (!sl_ipv4_literal(s + st, n - st)) return false;
            groups += 2;
            break;
        }
        if (i == st) return false;
        groups++;
        if (i == n) break;
        if (s[i] != ':') return false;
        if (++i == n) return false; /* a single trailing colon */
        if (s[i] == ':') {
            if (dcolon) return false;
            dcolon = true;
            if (++i == n) break;
        }
    }
    return dcolon ? groups <= 7 : groups == 8;
}

/* IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ), RFC 3986 §3.2.2. */
static bool valid_ipvfuture(const char *s, size_t n)
{
    size_t i = 1;
    if (n < 4 || (s[0] != 'v' && s[0] != 'V')) return false;
    while (i < n && is_hex((unsigned char)s[i]))
        i++;
    if (i == 1 || i >= n || s[i] != '.') return false;
    if (++i == n) return false;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_unreserved(c) && !is_sub_delim(c) && c != ':') return false;
    }
    return true;
}

/* Host = uri-host [ ":" port ] (RFC 9110 §7.2). An empty value is legal (RFC 9112 §3.2: sent when
 * the target has no authority); an empty host in front of a port is not something we accept. */
static bool valid_host(const char *h, size_t n)
{
    size_t i = 0;
    if (n == 0) return true;
    if (h[0] == '[') {
        const char *e = memchr(h, ']', n);
        if (!e) return false;
        size_t in = (size_t)(e - h) - 1;
        if (!valid_ipv6(h + 1, in) && !valid_ipvfuture(h + 1, in)) return false;
        i = in + 2;
    } else {
        /* reg-name also covers IPv4address. */
        ssize_t r = sl_uri_reg_name(h, n);
        if (r <= 0) return false;
        i = (size_t)r;
    }
    return sl_uri_port(h + i, n - i);
}

int sl_http_content_length(const char *v, size_t n, long long *cl)
{
    size_t i = 0;
    for (;;) {
        while (i < n && is_ows((unsigned char)v[i]))
            i++;
        size_t st = i;
        long long x = 0;
        for (; i < n && is_digit((unsigned char)v[i]); i++) {
            int d = v[i] - '0';
            if (x > (LLONG_MAX - d) / 10) return -EOVERFLOW;
            x = x * 10 + d;
        }
        if (i == st) return -EINVAL; /* empty element or not a digit */
        if (*cl >= 0 && x != *cl) return -EINVAL;
        *cl = x;
        while (i < n && is_ows((unsigned char)v[i]))
            i++;
        if (i == n) return 0;
        if (v[i] != ',') return -EINVAL;
        i++;
    }
}

bool sl_http_list_next(const char *v, size_t n, size_t *pos, const char **e, size_t *elen)
{
    size_t i = *pos;
    for (;;) {
        while (i < n && (is_ows((unsigned char)v[i]) || v[i] == ','))
            i++;
        if (i >= n) {
            *pos = i;
            return false;
        }
        size_t st = i, end = i;
        for (; i < n && v[i] != ','; i++) {
            if (!is_ows((unsigned char)v[i])) end = i + 1;
        }
        *e = v + st;
        *elen = end - st;
        *pos = i;
        return true;
    }
}

bool sl_http_list_has_token(const char *v, size_t len, const char *token)
{
    size_t pos = 0, elen, tlen = strlen(token);
    const char *e;
    while (sl_http_list_next(v, len, &pos, &e, &elen)) {
        if (elen != tlen) continue;
        size_t k = 0;
        while (k < tlen && lower((unsigned char)e[k]) == lower((unsigned char)token[k]))
            k++;
        if (k == tlen) return true;
    }
    return false;
}

/* One Transfer-Encoding field line: transfer-coding = token *( OWS ";" OWS transfer-parameter ).
 * The codings join the list kept in ps; what the list means is decided once the head is complete.
 * Parameters are not parsed: chunked has none, and every other coding is refused anyway. */
static int transfer_encoding(parser *ps, const char *v, size_t n)
{
    size_t pos = 0, elen;
    const char *e;
    while (sl_http_list_next(v, n, &pos, &e, &elen)) {
        size_t k = 0;
        while (k < elen && is_tchar((unsigned char)e[k]))
            k++;
        if (k == 0) return -400;
        size_t rest = k;
        while (rest < elen && is_ows((unsigned char)e[rest]))
            rest++;
        if (rest < elen && e[rest] != ';') return -400;
        bool chunked = eq_ci(e, k, "chunked");
        if (chunked && rest < elen) return -400;
        if (chunked)
            ps->te_chunked++;
        else
            ps->te_other++;
        ps->te_last_chunked = chunked;
    }
    return 0;
}

/* Interpret one complete field line as soon as it ends, so its errors surface early. */
static int field_line(parser *ps, const sl_http_header *h)
{
    sl_http_request *req = ps->req;
    const char *n = h->name;
    size_t nl = h->name_len;

    /* Names are compared only where the length matches: most lines are one comparison. */
    if (nl == 4 && eq_ci(n, nl, "host")) {
        if (req->host || !valid_host(h->value, h->value_len)) return -400;
        req->host = h;
    } else if (nl == 14 && eq_ci(n, nl, "content-length")) {
        if (ps->te_seen || sl_http_content_length(h->value, h->value_len, &req->content_length) < 0)
            return -400;
    } else if (nl == 17 && eq_ci(n, nl, "transfer-encoding")) {
        /* RFC 9112 §6.1: TE in 1.0 may come from a broken 1.1 proxy chain, and TE beside
         * Content-Length is the classic smuggling pattern; both are refused outright. */
        if (req->version == 10 || req->content_length >= 0) return -400;
        ps->te_seen = true;
        int r = transfer_encoding(ps, h->value, h->value_len);
        if (r) return r;
    } else if (nl == 10 && eq_ci(n, nl, "connection")) {
        /* One pass over the list for the three options a server acts on. */
        size_t pos = 0, elen;
        const char *e;
        while (sl_http_list_next(h->value, h->value_len, &pos, &e, &elen)) {
            if (eq_ci(e, elen, "close"))
                req->conn_close = true;
            else if (eq_ci(e, elen, "keep-alive"))
                req->conn_keep_alive = true;
            else if (eq_ci(e, elen, "upgrade"))
                req->conn_upgrade = true;
        }
    } else {
#define KNOWN(s, f) {s, sizeof s - 1, offsetof(sl_http_request, f)}
        static const struct {
            const char *name;
            size_t len, off;
        } known[] = {
            KNOWN("range", range),
            KNOWN("if-range", if_range),
            KNOWN("if-match", if_match),
            KNOWN("if-none-match", if_none_match),
            KNOWN("if-modified-since", if_modified_since),
            KNOWN("if-unmodified-since", if_unmodified_since),
            KNOWN("expect", expect),
            KNOWN("content-type", content_type),
            KNOWN("user-agent", user_agent),
            KNOWN("referer", referer),
        };
#undef KNOWN
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (known[i].len == nl && eq_ci(n, nl, known[i].name)) {
                const sl_http_header **slot =
                    (const sl_http_header **)(void *)((char *)req + known[i].off);
                if (!*slot) *slot = h;
                break;
            }
        }
    }
    return 0;
}

static bool same_name(const sl_http_header *a, const sl_http_header *b)
{
    if (a->name_len != b->name_len) return false;
    for (size_t k = 0; k < a->name_len; k++) {
        if (lower((unsigned char)a->name[k]) != lower((unsigned char)b->name[k])) return false;
    }
    return true;
}

/* Hang h, the newest line, behind the latest earlier line of its field. A backward scan: heads
 * are at most SL_HTTP_MAX_HEADERS lines and most names differ in length, so this stays a few
 * hundred length comparisons for a large head. */
static void link_line(sl_http_request *req, sl_http_header *h)
{
    for (size_t i = req->n_headers - 1; i-- > 0;) {
        if (same_name(&req->headers[i], h)) {
            req->headers[i].next = h;
            return;
        }
    }
}

/* field-line = field-name ":" OWS field-value OWS, up to and including the empty line. */
static int parse_fields(parser *ps, size_t *pp)
{
    const char *b = ps->b;
    sl_http_request *req = ps->req;
    size_t p = *pp;
    int r;

    const size_t stop = scan_stop(ps, false);
    for (;;) {
        if (p >= stop) return stopped(ps, p, false);
        unsigned char c = (unsigned char)b[p];
        if (c == '\r' || c == '\n') {
            if ((r = line_end(ps, p, &p)) <= 0) return r;
            *pp = p;
            return 1;
        }
        if (is_ows(c)) return -400; /* obs-fold, or whitespace after the request line */
        if (req->n_headers >= ps->max_headers) return -431;

        size_t name = p;
        while (p < stop && is_tchar((unsigned char)b[p]))
            p++;
        if (p >= stop) return stopped(ps, p, false);
        /* Also catches whitespace before the colon (RFC 9112 §5.1) and a line without one. */
        if (b[p] != ':' || p == name) return -400;
        size_t name_len = p - name;
        p++;

        while (p < stop && is_ows((unsigned char)b[p]))
            p++;
        size_t val = p, val_end = p;
        for (;;) {
            /* The usual bytes: one look-up each, and the value runs at least to the last. */
            size_t q = p;
            while (p < stop && !(cls[(unsigned char)b[p]] & (C_OWS | C_BAD_VALUE)))
                p++;
            if (p > q) val_end = p;
            if (p >= stop) return stopped(ps, p, false);
            unsigned char k = cls[(unsigned char)b[p]];
            if (k & C_EOL) break;
            /* CTLs (NUL, DEL...) are refused; obs-text (0x80-0xff) is allowed. */
            if (!(k & C_OWS)) return -400;
            p++;
        }
        if ((r = line_end(ps, p, &p)) <= 0) return r;

        sl_http_header *h = &req->headers[req->n_headers++];
        h->name = b + name;
        h->name_len = name_len;
        h->value = b + val;
        h->value_len = val_end - val;
        h->next = NULL;
        link_line(req, h);
        if ((r = field_line(ps, h))) return r;
    }
}

/* The checks that need the whole head. */
static int finish(parser *ps)
{
    sl_http_request *req = ps->req;
    if (req->version == 11 && !req->host) return -400; /* RFC 9112 §3.2 */
    if (ps->te_seen) {
        /* RFC 9112 §6.3: a final coding other than chunked leaves the length unknowable for a
         * request, and chunked twice is forbidden (§7); other codings we do not implement. */
        if (!ps->te_last_chunked || ps->te_chunked != 1) return -400;
        if (ps->te_other) return -501;
        req->chunked = true;
    }
    return 0;
}

int sl_http_parse_request(const char *buf, size_t len, const sl_http_limits *lim,
                          sl_http_request *req)
{
    req->method = SL_METHOD_OTHER;
    req->method_str = req->target = NULL;
    req->method_len = req->target_len = 0;
    req->version = 0;
    req->n_headers = 0;
    req->host = req->range = req->if_range = req->if_match = req->if_none_match = NULL;
    req->if_modified_since = req->if_unmodified_since = req->expect = req->content_type = NULL;
    req->user_agent = req->referer = NULL;
    req->content_length = -1;
    req->chunked = req->conn_close = req->conn_keep_alive = req->conn_upgrade = false;
    req->head_len = 0;

    parser ps = {
        .b = buf,
        .len = len,
        .max_head = lim->max_head < MAX_HEAD_CAP ? lim->max_head : MAX_HEAD_CAP,
        .max_line = lim->max_line,
        .max_headers =
            lim->max_headers < SL_HTTP_MAX_HEADERS ? lim->max_headers : SL_HTTP_MAX_HEADERS,
        .req = req,
    };

    size_t p = 0;
    for (int n = 0;; n++) {
        if (p >= len) return 0;
        if (buf[p] != '\r' && buf[p] != '\n') break;
        if (n == MAX_LEADING_EMPTY) return -400;
        if (buf[p] == '\n') {
            p++;
        } else {
            if (p + 1 >= len) return 0;
            if (buf[p + 1] != '\n') return -400;
            p += 2;
        }
    }
    ps.start = p;
    /* Offsets past the limits, saturating: max_head is capped well below SIZE_MAX, max_line may
     * not be. */
    ps.head_lim = p + ps.max_head;
    ps.line_lim = ps.max_line < ps.max_head ? p + ps.max_line : ps.head_lim;

    int r = parse_request_line(&ps, &p);
    if (r <= 0) return r;
    if ((r = parse_fields(&ps, &p)) <= 0) return r;
    if ((r = finish(&ps))) return r;
    req->head_len = p;
    return (int)p;
}

const sl_http_header *sl_http_single(const sl_http_header *h)
{
    return h && !h->next ? h : NULL;
}

size_t sl_http_field_join(const sl_http_header *h, const char *sep, char *buf, size_t cap)
{
    size_t n = 0, sl = strlen(sep);
    for (; h; h = h->next) {
        if (n) {
            for (size_t k = 0; k < sl; k++, n++)
                if (n < cap) buf[n] = sep[k];
        }
        for (size_t k = 0; k < h->value_len; k++, n++)
            if (n < cap) buf[n] = h->value[k];
    }
    return n;
}

const sl_http_header *sl_http_find_header(const sl_http_request *req, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < req->n_headers; i++) {
        const sl_http_header *h = &req->headers[i];
        if (h->name_len != nl) continue;
        size_t k = 0;
        while (k < nl && lower((unsigned char)h->name[k]) == lower((unsigned char)name[k]))
            k++;
        if (k == nl) return h;
    }
    return NULL;
}
