/* http.c: the HTTP/1.1 protocol of proxy-core, without a server: the request head and body
 * framing it writes, and how it reads an answer's head. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "proto.h"

static const sl_http_limits lim = {8192, 8192, SL_HTTP_MAX_HEADERS};

static sl_proxy_msg msg_for(sl_http_request *rq, const char *head, char *copy)
{
    strcpy(copy, head);
    assert_true(sl_http_parse_request(copy, strlen(copy), &lim, rq) > 0);
    sl_proxy_msg m = {.rq = rq, .docroot = "/srv/www", .path = "/p", .query = "",
                      .host = "example.org", .remote_addr = "10.0.0.7", .remote_port = 4242,
                      .body_length = -1, .keep = true};
    return m;
}

static char *encoded(const sl_proxy_msg *m, sl_buf *b)
{
    assert_int_equal(sl_proxy_http.encode_head(m, b), 0);
    assert_int_equal(sl_buf_append(b, "", 1), 0);
    b->len--;
    return b->p;
}

static void test_request_head(void **state)
{
    sl_http_request rq;
    char copy[1024];
    sl_proxy_msg m = msg_for(&rq, "GET http://example.org/p?q=1 HTTP/1.1\r\nHost: example.org\r\n"
                                  "Connection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\n"
                                  "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\n"
                                  "X-Forwarded-Host: evil\r\nAccept: a\r\nAccept: b\r\n\r\n",
                             copy);
    sl_buf b = {0};
    const char *s = encoded(&m, &b);
    assert_string_equal(s, "GET /p?q=1 HTTP/1.1\r\n" /* origin-form */
                           "Host: example.org\r\n"
                           "Accept: a\r\nAccept: b\r\n"
                           "X-Forwarded-For: 1.2.3.4, 10.0.0.7\r\n"
                           "X-Forwarded-Proto: http\r\n"
                           "X-Forwarded-Host: example.org\r\n"
                           "Connection: keep-alive\r\n\r\n");
    sl_buf_free(&b);
    m.request_uri = "/rewritten?x";
    m.keep = false;
    s = encoded(&m, &b);
    assert_non_null(strstr(s, "GET /rewritten?x HTTP/1.1\r\n"));
    assert_non_null(strstr(s, "Connection: close\r\n\r\n"));
    sl_buf_free(&b);
}

static void test_body_framing(void **state)
{
    sl_http_request rq;
    char copy[1024];
    sl_proxy_msg m = msg_for(&rq, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n", copy);
    m.body_length = 3;
    sl_buf b = {0};
    const char *s = encoded(&m, &b);
    assert_non_null(strstr(s, "\r\nContent-Length: 3\r\n"));
    assert_null(strstr(s, "Content-Length: 3\r\nContent-Length"));
    size_t at = b.len;
    assert_int_equal(sl_proxy_http.encode_body(&m, &b, "abc", 3), 0);
    assert_int_equal(sl_proxy_http.encode_end(&m, &b), 0);
    assert_int_equal(b.len - at, 3);
    assert_memory_equal(b.p + at, "abc", 3);
    sl_buf_free(&b);

    /* A chunked body goes on chunked, one chunk per piece, then the last chunk. */
    m = msg_for(&rq, "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", copy);
    m.body_chunked = true;
    m.body_length = 0;
    s = encoded(&m, &b);
    assert_non_null(strstr(s, "Transfer-Encoding: chunked\r\n"));
    assert_null(strstr(s, "Content-Length"));
    at = b.len;
    assert_int_equal(sl_proxy_http.encode_body(&m, &b, "hello world!", 12), 0);
    assert_int_equal(sl_proxy_http.encode_body(&m, &b, NULL, 0), 0); /* nothing */
    assert_int_equal(sl_proxy_http.encode_end(&m, &b), 0);
    assert_int_equal(b.len - at, strlen("c\r\nhello world!\r\n0\r\n\r\n"));
    assert_memory_equal(b.p + at, "c\r\nhello world!\r\n0\r\n\r\n", b.len - at);
    sl_buf_free(&b);
}

/* Interim 1xx heads are dropped from the buffer; the final head is what is parsed. */
static void test_head_skips_interim(void **state)
{
    char buf[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n"
                 "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: X-A\r\nX-A: 1\r\n\r\nok";
    size_t len = strlen(buf);
    sl_upstream_limits ul = {4096, SL_UPSTREAM_MAX_HEADERS};
    sl_upstream_head h;
    int r = sl_proxy_http.parse_head(buf, &len, &ul, &h);
    assert_true(r > 0);
    assert_int_equal(len - (size_t)r, 2);
    assert_memory_equal(buf + r, "ok", 2);
    assert_int_equal(h.status, 200);
    bool keep = true;
    assert_int_equal(sl_proxy_http.framing(&h, false, &keep), SL_BODY_LENGTH);
    assert_false(keep); /* HTTP/1.0 without keep-alive */
    assert_true(sl_proxy_http.hop(&h, &h.fields[2]));  /* X-A, listed in Connection */
    assert_false(sl_proxy_http.hop(&h, &h.fields[0])); /* Content-Length is ours to judge */
    /* Incomplete: 0, nothing dropped yet beyond whole interim heads. */
    char part[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200";
    len = strlen(part);
    assert_int_equal(sl_proxy_http.parse_head(part, &len, &ul, &h), 0);
    assert_int_equal(len, strlen("HTTP/1.1 200"));
    /* The stream is the answer itself. */
    size_t used;
    sl_proxy_piece p;
    assert_int_equal(sl_proxy_http.decode(NULL, "abc", 3, &used, &p), SL_PP_DATA);
    assert_int_equal(used, 3);
    assert_int_equal(p.len, 3);
    assert_ptr_equal(sl_proxy_proto_find("http"), &sl_proxy_http);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_request_head),
        cmocka_unit_test(test_body_framing),
        cmocka_unit_test(test_head_skips_interim))
