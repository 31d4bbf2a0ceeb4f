/* FastCGI as a proxy-core protocol (proto.h).
 *
 * A request is one FastCGI request (id 1) in the responder role: BEGIN_REQUEST (asking the
 * application to keep the connection when the pool may reuse it), the CGI/1.1 variables as
 * PARAMS (RFC 3875 §4.1, plus what PHP and lighttpd's applications expect: REQUEST_URI,
 * SCRIPT_FILENAME, DOCUMENT_ROOT, REDIRECT_STATUS), then the body as STDIN records and an empty
 * STDIN record at its end. The answer's STDOUT stream is a CGI response (a head with Status:,
 * then the body, which runs to END_REQUEST); STDERR goes to the error log. The record codec is
 * fcgi_proto.c; this file only decides what goes in the records.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto.h"
#include "sl_version.h"

#define FCGI_ID 1

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && !strncasecmp(name, want, len);
}

/* Is hd the first line of its field? */
static bool is_first_line(const sl_http_request *rq, const sl_http_header *hd)
{
    for (const sl_http_header *h = rq->headers; h < hd; h++)
        if (h->next == hd) return false;
    return true;
}

/* Every header field as HTTP_NAME, one variable per field. */
/* HTTP_NAME for a field name: upper case, '-' as '_'. False when it does not fit. */
static bool cgi_name(const char *n, size_t len, char *out, size_t cap)
{
    if (len + 6 > cap) return false;
    memcpy(out, "HTTP_", 5);
    for (size_t k = 0; k < len; k++)
        out[5 + k] = n[k] == '-' ? '_' : (char)toupper((unsigned char)n[k]);
    out[5 + len] = 0;
    return true;
}

static bool in_list(const sl_kvlist *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_is(name, len, l->k[i])) return true;
    return false;
}

/* The config's request fields (setenv.set-request-header, whose empty values only removed the
 * client's, then -add-) and variables (setenv.add-environment, then -set- last so they win). */
static int edit_params(sl_fcgi_params_writer *w, const sl_req_edits *e)
{
    int r = 0;
    char name[300];
    for (size_t i = 0; i < e->hdr_set.n && !r; i++)
        if (e->hdr_set.v[i][0] && cgi_name(e->hdr_set.k[i], strlen(e->hdr_set.k[i]), name, sizeof name))
            r = sl_fcgi_params_add(w, name, strlen(name), e->hdr_set.v[i], strlen(e->hdr_set.v[i]));
    for (size_t i = 0; i < e->hdr_add.n && !r; i++)
        if (cgi_name(e->hdr_add.k[i], strlen(e->hdr_add.k[i]), name, sizeof name))
            r = sl_fcgi_params_add(w, name, strlen(name), e->hdr_add.v[i], strlen(e->hdr_add.v[i]));
    for (size_t i = 0; i < e->env_add.n && !r; i++)
        r = sl_fcgi_params_add(w, e->env_add.k[i], strlen(e->env_add.k[i]), e->env_add.v[i],
                               strlen(e->env_add.v[i]));
    for (size_t i = 0; i < e->env_set.n && !r; i++)
        r = sl_fcgi_params_add(w, e->env_set.k[i], strlen(e->env_set.k[i]), e->env_set.v[i],
                               strlen(e->env_set.v[i]));
    return r;
}

static int header_params(sl_fcgi_params_writer *w, const sl_http_request *rq,
                         const sl_req_edits *e)
{
    for (size_t i = 0; i < rq->n_headers; i++) {
        const sl_http_header *hd = &rq->headers[i];
        /* Covered by CONTENT_*; and "Proxy" must never become HTTP_PROXY (httpoxy). */
        if (name_is(hd->name, hd->name_len, "Content-Length") ||
            name_is(hd->name, hd->name_len, "Content-Type") ||
            name_is(hd->name, hd->name_len, "Proxy"))
            continue;
        if (e && in_list(&e->hdr_set, hd->name, hd->name_len)) continue; /* replaced */
        /* A field on several lines is one variable with the combined value (RFC 9110 §5.3; CGI
         * has one variable per name), written at its first line. */
        if (!is_first_line(rq, hd)) continue;
        char name[300];
        if (!cgi_name(hd->name, hd->name_len, name, sizeof name)) continue;
        int r;
        if (!hd->next) {
            r = sl_fcgi_params_add(w, name, strlen(name), hd->value, hd->value_len);
        } else {
            /* Cookie lines join with "; " (RFC 6265 §5.4, as HTTP/2 recipients do). */
            const char *sep = name_is(hd->name, hd->name_len, "Cookie") ? "; " : ", ";
            size_t n = sl_http_field_join(hd, sep, NULL, 0);
            char *v = malloc(n ? n : 1);
            if (!v) return -ENOMEM;
            sl_http_field_join(hd, sep, v, n);
            r = sl_fcgi_params_add(w, name, strlen(name), v, n);
            free(v);
        }
        if (r < 0) return r;
    }
    return 0;
}

/* a then b into buf (cut at cap - 1 bytes, as snprintf would); its length. Copied, not printed:
 * these run for every request. */
static size_t cat2(char *buf, size_t cap, const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);
    if (al > cap - 1) al = cap - 1;
    if (bl > cap - 1 - al) bl = cap - 1 - al;
    memcpy(buf, a, al);
    memcpy(buf + al, b, bl);
    buf[al + bl] = 0;
    return al + bl;
}

/* v in decimal into buf (at least 21 bytes); its length. */
static size_t dec(char *buf, long long v)
{
    char t[20];
    size_t n = 0, k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        t[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) buf[k++] = '-';
    while (n) buf[k++] = t[--n];
    buf[k] = 0;
    return k;
}

static int fcgi_head(const sl_proxy_msg *m, sl_buf *b)
{
    const sl_http_request *rq = m->rq;
    int r = sl_fcgi_begin_request(b, FCGI_ID, SL_FCGI_RESPONDER, m->keep);
    sl_fcgi_params_writer w;
    sl_fcgi_params_init(&w, b, FCGI_ID);
    char buf[4200];
#define PN(n, v, l) (r = r ? r : sl_fcgi_params_add(&w, n, strlen(n), v, l))
#define P(n, v) PN(n, v, strlen(v))
    if (m->script_filename) {
        P("SCRIPT_FILENAME", m->script_filename);
    } else {
        PN("SCRIPT_FILENAME", buf, cat2(buf, sizeof buf, m->docroot, m->path));
    }
    P("SCRIPT_NAME", m->script_name ? m->script_name : m->path);
    if (!m->path_info)
        P("PATH_INFO", "");
    else if (m->path_info[0])
        P("PATH_INFO", m->path_info); /* lighttpd leaves an empty one out */
    if (m->path_info) {
        /* RFC 3875 §4.1.6: the path info mapped like a URL path under the document root
         * (lighttpd sends it also for an empty one: the document root). */
        PN("PATH_TRANSLATED", buf, cat2(buf, sizeof buf, m->docroot, m->path_info));
    }
    P("DOCUMENT_ROOT", m->docroot);
    if (m->request_uri)
        P("REQUEST_URI", m->request_uri);
    else
        PN("REQUEST_URI", rq->target, rq->target_len);
    if (m->target && (m->target_len != rq->target_len || memcmp(m->target, rq->target, m->target_len)))
        PN("REDIRECT_URI", m->target, m->target_len);
    P("QUERY_STRING", m->query);
    PN("REQUEST_METHOD", rq->method_str, rq->method_len);
    P("SERVER_PROTOCOL", rq->version == 10 ? "HTTP/1.0" : rq->version == 20 ? "HTTP/2.0" : "HTTP/1.1");
    P("SERVER_SOFTWARE", "seekless/" SL_VERSION);
    P("GATEWAY_INTERFACE", "CGI/1.1");
    /* php-cgi's cgi.force_redirect wants it; an error handler learns the error from it. */
    PN("REDIRECT_STATUS", buf, dec(buf, m->redirect_status ? m->redirect_status : 200));
    const char *h = m->server_name ? m->server_name : m->host;
    size_t hl = strcspn(h, ":");
    if (h[0] == '[') hl = strcspn(h, "]") + 1;
    PN("SERVER_NAME", h, hl);
    P("REMOTE_ADDR", m->remote_addr);
    /* lighttpd's: the scheme, and HTTPS=on when it is https. */
    P("REQUEST_SCHEME", m->scheme ? m->scheme : "http");
    if (m->scheme && !strcmp(m->scheme, "https")) P("HTTPS", "on");
    for (size_t i = 0; m->tls_env && i < m->tls_env->n; i++) P(m->tls_env->k[i], m->tls_env->v[i]);
    PN("REMOTE_PORT", buf, dec(buf, m->remote_port));
    if (m->server_addr) {
        P("SERVER_ADDR", m->server_addr);
        P("SERVER_PORT", m->server_port);
    }
    if (m->body_length >= 0) {
        PN("CONTENT_LENGTH", buf, dec(buf, m->body_length));
    }
    if (rq->content_type) PN("CONTENT_TYPE", rq->content_type->value, rq->content_type->value_len);
    if (m->remote_user) { /* RFC 3875 §4.1.11, §4.1.1: who mod_auth let in, and how */
        P("REMOTE_USER", m->remote_user);
        P("AUTH_TYPE", m->auth_type ? m->auth_type : "Basic");
    }
#undef P
#undef PN
    if (!r) r = header_params(&w, rq, m->edits);
    if (!r && m->edits) r = edit_params(&w, m->edits);
    if (!r) r = sl_fcgi_params_end(&w);
    return r;
}

static int fcgi_body(const sl_proxy_msg *m, sl_buf *b, const char *p, size_t n)
{
    (void)m;
    return n ? sl_fcgi_write_stream(b, SL_FCGI_STDIN, FCGI_ID, p, n) : 0;
}

static int fcgi_end(const sl_proxy_msg *m, sl_buf *b)
{
    (void)m;
    return sl_fcgi_end_stream(b, SL_FCGI_STDIN, FCGI_ID);
}

static void fcgi_decode_init(void *st)
{
    sl_fcgi_decoder_init(st, FCGI_ID);
}

static int fcgi_decode(void *st, const char *d, size_t n, size_t *used, sl_proxy_piece *p)
{
    size_t off = 0;
    while (off < n) {
        size_t k;
        sl_fcgi_event ev;
        int t = sl_fcgi_decode(st, d + off, n - off, &k, &ev);
        if (t < 0) return t;
        off += k;
        *used = off;
        p->data = ev.data;
        p->len = ev.len;
        switch (t) {
        case SL_FCGI_EV_STDOUT: return SL_PP_DATA;
        case SL_FCGI_EV_STDERR: return SL_PP_LOG;
        case SL_FCGI_EV_END_REQUEST: return SL_PP_END;
        case SL_FCGI_EV_NONE: return SL_PP_NEED;
        default: break; /* the end of a stream: END_REQUEST says more */
        }
    }
    *used = off;
    return SL_PP_NEED;
}

static int fcgi_parse_head(char *buf, size_t *len, const sl_upstream_limits *lim,
                           sl_upstream_head *h)
{
    return sl_upstream_parse_cgi(buf, *len, lim, h);
}

/* The body runs to END_REQUEST, whatever its head says but Content-Length (checked). */
static sl_body_framing fcgi_framing(const sl_upstream_head *h, bool head_request, bool *keep)
{
    (void)keep;
    if (head_request || h->status == 204 || h->status == 304) return SL_BODY_NONE;
    return h->content_length >= 0 ? SL_BODY_LENGTH : SL_BODY_UNTIL_CLOSE;
}

static bool fcgi_hop(const sl_upstream_head *h, const sl_upstream_field *f)
{
    (void)h;
    return sl_hop_by_hop(f->name, f->name_len, NULL, 0);
}

const sl_proxy_proto sl_proxy_fastcgi = {
    .name = "fastcgi",
    .holds_worker = true,
    .collect_chunked = true,
    .ends_with_body = false,
    .state_size = sizeof(sl_fcgi_decoder),
    .encode_head = fcgi_head,
    .encode_body = fcgi_body,
    .encode_end = fcgi_end,
    .decode_init = fcgi_decode_init,
    .decode = fcgi_decode,
    .parse_head = fcgi_parse_head,
    .framing = fcgi_framing,
    .hop = fcgi_hop,
};
