/* HTTP/2 request heads as HTTP/1.1 text, and the session settings (see h2_head.h). */
#include "h2_head.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Append to the head; too much makes it a 431 (room is kept for the final CRLF). */
static void put(sl_h2_head *h, const void *p, size_t n)
{
    if (h->too_big || h->len + n + 2 > h->cap) {
        h->too_big = true;
        return;
    }
    memcpy(h->buf + h->len, p, n);
    h->len += n;
}

/* The request line and Host, from the pseudo-header fields (once, before the first field). */
static void line(sl_h2_head *h)
{
    if (h->line_done) return;
    h->line_done = true;
    bool connect = h->method_len == 7 && !memcmp(h->method, "CONNECT", 7);
    if (!h->method || (!h->path && !connect)) return; /* sl_h2_head_end answers 400 */
    put(h, h->method, h->method_len);
    put(h, " ", 1);
    if (connect)
        put(h, h->authority ? h->authority : "", h->authority_len);
    else
        put(h, h->path, h->path_len);
    put(h, " HTTP/1.1\r\n", 11);
    if (h->authority) {
        put(h, "Host: ", 6);
        put(h, h->authority, h->authority_len);
        put(h, "\r\n", 2);
    }
}

static int keep(char **dst, size_t *dlen, const uint8_t *v, size_t n)
{
    free(*dst);
    *dst = malloc(n + 1);
    if (!*dst) return -ENOMEM;
    memcpy(*dst, v, n);
    (*dst)[n] = 0;
    *dlen = n;
    return 0;
}

int sl_h2_head_field(sl_h2_head *h, const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen)
{
    const char *n = (const char *)name;
    if (namelen && n[0] == ':') {
        if (h->line_done) return 0; /* nghttp2 refuses these; never after the line */
        if (namelen == 7 && !memcmp(n, ":method", 7))
            return keep(&h->method, &h->method_len, value, valuelen);
        if (namelen == 5 && !memcmp(n, ":path", 5))
            return keep(&h->path, &h->path_len, value, valuelen);
        if (namelen == 10 && !memcmp(n, ":authority", 10))
            return keep(&h->authority, &h->authority_len, value, valuelen);
        return 0; /* :scheme, :protocol */
    }
    line(h);
    if (namelen == 4 && !memcmp(n, "host", 4) && h->authority) return 0; /* :authority rules */
    if (namelen == 14 && !memcmp(n, "content-length", 14)) h->has_length = true;
    if (namelen == 6 && !memcmp(n, "cookie", 6)) {
        if (h->too_big || h->cookie_len + valuelen + 2 > h->cap) { /* it could never fit */
            h->too_big = true;
            return 0;
        }
        char *c = realloc(h->cookie, h->cookie_len + valuelen + 3);
        if (!c) return -ENOMEM;
        if (h->cookie_len) {
            memcpy(c + h->cookie_len, "; ", 2);
            h->cookie_len += 2;
        }
        memcpy(c + h->cookie_len, value, valuelen);
        h->cookie_len += valuelen;
        h->cookie = c;
        return 0;
    }
    put(h, name, namelen);
    put(h, ": ", 2);
    put(h, value, valuelen);
    put(h, "\r\n", 2);
    return 0;
}

int sl_h2_head_end(sl_h2_head *h, bool body)
{
    line(h);
    if (!h->method || (!h->path && !(h->method_len == 7 && !memcmp(h->method, "CONNECT", 7))))
        return 400;
    if (h->cookie) {
        put(h, "Cookie: ", 8);
        put(h, h->cookie, h->cookie_len);
        put(h, "\r\n", 2);
    }
    if (body && !h->has_length) {
        put(h, "Transfer-Encoding: chunked\r\n", 28);
        h->chunked = true;
    }
    if (h->too_big) return 431;
    memcpy(h->buf + h->len, "\r\n", 2); /* put() kept room for it */
    h->len += 2;
    return 0;
}

void sl_h2_head_free(sl_h2_head *h)
{
    free(h->method);
    free(h->path);
    free(h->authority);
    free(h->cookie);
    h->method = h->path = h->authority = h->cookie = NULL;
    h->cookie_len = 0;
}

int sl_h2_session_new(nghttp2_session **ng, const nghttp2_session_callbacks *cb, void *ud,
                      uint32_t max_header_list)
{
    nghttp2_option *opt;
    int e = nghttp2_option_new(&opt);
    if (e) return e;
    /* Body bytes are credited when a module reads them, not when they arrive. */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    e = nghttp2_session_server_new2(ng, cb, ud, opt);
    nghttp2_option_del(opt);
    if (e) return e;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SL_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, SL_H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, max_header_list},
    };
    e = nghttp2_submit_settings(*ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    if (e) {
        nghttp2_session_del(*ng);
        *ng = NULL;
    }
    return e;
}
