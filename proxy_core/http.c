/* HTTP/1.1 as a proxy-core protocol (proto.h).
 *
 * The request goes on in origin-form whatever form the client used, with its header fields
 * minus the hop-by-hop ones (RFC 9110 §7.6.1: the fixed list and every name a Connection line
 * lists), with X-Forwarded-For (the client's list, then its address), X-Forwarded-Proto and
 * X-Forwarded-Host set by us (a client's own are dropped: they would be believed), and with
 * our own framing: Content-Length, or a chunked body passed on chunked as it arrives. The answer
 * is an HTTP/1.1 response parsed by http_resp.c; interim 1xx heads are skipped, and the body's
 * own framing (length, chunked, or the close) ends the answer and says whether the connection
 * may be kept.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "path.h"
#include "proto.h"

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && !strncasecmp(name, want, len);
}

/* Whether name is one of the list's keys (case-insensitive: a field name). */
static bool in_list(const sl_kvlist *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_is(name, len, l->k[i])) return true;
    return false;
}

static int http_head(const sl_proxy_msg *m, sl_buf *b)
{
    const sl_http_request *rq = m->rq;
    const sl_http_header *conn_h = sl_http_find_header(rq, "Connection");
    int r = 0;
#define A(p, n) (r = r ? r : sl_buf_append(b, p, n))
#define S(s) A(s, strlen(s))
    A(rq->method_str, rq->method_len);
    S(" ");
    const char *p, *q, *auth;
    size_t plen, qlen, alen;
    const char *t = m->target ? m->target : rq->target;
    size_t tl = m->target ? m->target_len : rq->target_len;
    if (m->request_uri) {
        S(m->request_uri);
    } else if (sl_uri_split(t, tl, &p, &plen, &q, &qlen, &auth, &alen) == 0 && plen) {
        A(p, plen);
        if (q) {
            S("?");
            A(q, qlen);
        }
    } else {
        S("/");
    }
    S(" HTTP/1.1\r\n");
    const sl_http_header *xff = NULL;
    for (size_t i = 0; i < rq->n_headers; i++) {
        const sl_http_header *hd = &rq->headers[i];
        /* Other lines of a field go on as they came, in order, which keeps its combined value;
         * the names listed in any Connection line are hop-by-hop. */
        bool hop = sl_hop_by_hop(hd->name, hd->name_len, NULL, 0);
        for (const sl_http_header *ch = conn_h; ch && !hop; ch = ch->next)
            hop = sl_hop_by_hop(hd->name, hd->name_len, ch->value, ch->value_len);
        if (hop || name_is(hd->name, hd->name_len, "Content-Length") ||
            name_is(hd->name, hd->name_len, "X-Forwarded-Proto") ||
            name_is(hd->name, hd->name_len, "X-Forwarded-Host"))
            continue;
        if (name_is(hd->name, hd->name_len, "X-Forwarded-For")) {
            if (!xff) xff = hd; /* its first line: the others follow through next */
            continue;
        }
        if (m->host_header && name_is(hd->name, hd->name_len, "Host")) continue;
        if (m->edits && in_list(&m->edits->hdr_set, hd->name, hd->name_len)) continue;
        A(hd->name, hd->name_len);
        S(": ");
        A(hd->value, hd->value_len);
        S("\r\n");
    }
    if (m->host_header) {
        S("Host: ");
        S(m->host_header);
        S("\r\n");
    }
    /* setenv.set-request-header (an empty value only removed the client's), then -add-. */
    for (size_t i = 0; m->edits && i < m->edits->hdr_set.n + m->edits->hdr_add.n; i++) {
        bool set = i < m->edits->hdr_set.n;
        const sl_kvlist *l = set ? &m->edits->hdr_set : &m->edits->hdr_add;
        size_t k = set ? i : i - m->edits->hdr_set.n;
        if (set && !l->v[k][0]) continue;
        S(l->k[k]);
        S(": ");
        S(l->v[k]);
        S("\r\n");
    }
    char line[512];
    /* The client's X-Forwarded-For, every line of it, then its address. */
    S("X-Forwarded-For: ");
    for (const sl_http_header *h = xff; h; h = h->next) {
        if (!h->value_len) continue;
        A(h->value, h->value_len);
        S(", ");
    }
    S(m->remote_addr);
    S("\r\n");
    S(m->https ? "X-Forwarded-Proto: https\r\n" : "X-Forwarded-Proto: http\r\n");
    if (m->host[0]) {
        snprintf(line, sizeof line, "X-Forwarded-Host: %s\r\n", m->host);
        S(line);
    }
    if (m->body_chunked) {
        S("Transfer-Encoding: chunked\r\n");
    } else if (m->body_length >= 0) {
        snprintf(line, sizeof line, "Content-Length: %lld\r\n", m->body_length);
        S(line);
    }
    S(m->keep ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
#undef A
#undef S
    return r;
}

/* Body bytes: as they are, or as one chunk (the sender's chunk boundaries are not ours to
 * keep). */
static int http_body(const sl_proxy_msg *m, sl_buf *b, const char *p, size_t n)
{
    if (!n) return 0;
    if (!m->body_chunked) return sl_buf_append(b, p, n);
    char line[24];
    int ll = snprintf(line, sizeof line, "%zx\r\n", n);
    int e = sl_buf_append(b, line, (size_t)ll);
    if (!e) e = sl_buf_append(b, p, n);
    if (!e) e = sl_buf_append(b, "\r\n", 2);
    return e;
}

static int http_end(const sl_proxy_msg *m, sl_buf *b)
{
    return m->body_chunked ? sl_buf_append(b, "0\r\n\r\n", 5) : 0;
}

static void http_decode_init(void *st)
{
    (void)st;
}

/* The stream is the response itself. */
static int http_decode(void *st, const char *d, size_t n, size_t *used, sl_proxy_piece *p)
{
    (void)st;
    *used = n;
    p->data = d;
    p->len = n;
    return n ? SL_PP_DATA : SL_PP_NEED;
}

static int http_parse_head(char *buf, size_t *len, const sl_upstream_limits *lim,
                           sl_upstream_head *h)
{
    for (;;) {
        int r = sl_upstream_parse_http(buf, *len, lim, h);
        if (r <= 0 || !sl_upstream_interim(h)) return r;
        memmove(buf, buf + r, *len - (size_t)r); /* skip 100 Continue and the like */
        *len -= (size_t)r;
    }
}

static sl_body_framing http_framing(const sl_upstream_head *h, bool head_request, bool *keep)
{
    if (!sl_upstream_keep_alive(h, head_request)) *keep = false;
    return sl_upstream_framing(h, head_request);
}

const sl_proxy_proto sl_proxy_http = {
    .name = "http",
    .holds_worker = false,
    .collect_chunked = false,
    .ends_with_body = true,
    .state_size = 0,
    .encode_head = http_head,
    .encode_body = http_body,
    .encode_end = http_end,
    .decode_init = http_decode_init,
    .decode = http_decode,
    .parse_head = http_parse_head,
    .framing = http_framing,
    .hop = sl_upstream_hop_by_hop,
};
