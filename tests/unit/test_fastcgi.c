/* fastcgi.c: the FastCGI protocol of proxy-core, without a server. A request is encoded, then
 * its records are decoded with fcgi_proto.c's own reader and checked; answers are decoded. */
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

/* The params and stdin of an encoded request. */
typedef struct decoded {
    char params[64][2][512];
    size_t n;
    char stdin_[4096];
    size_t stdin_len;
    bool stdin_end;
    bool keep;
} decoded;

static void decode_request(const sl_buf *b, decoded *d)
{
    memset(d, 0, sizeof *d);
    const unsigned char *p = (const unsigned char *)b->p;
    size_t off = 0;
    sl_buf params = {0};
    while (off + 8 <= b->len) {
        unsigned type = p[off + 1];
        size_t clen = (size_t)p[off + 4] << 8 | p[off + 5], pad = p[off + 6];
        assert_int_equal(p[off + 2] << 8 | p[off + 3], 1); /* request id */
        const unsigned char *c = p + off + 8;
        if (type == SL_FCGI_BEGIN_REQUEST) d->keep = c[2] & SL_FCGI_KEEP_CONN;
        if (type == SL_FCGI_PARAMS) assert_int_equal(sl_buf_append(&params, c, clen), 0);
        if (type == SL_FCGI_STDIN && clen) {
            memcpy(d->stdin_ + d->stdin_len, c, clen);
            d->stdin_len += clen;
        }
        if (type == SL_FCGI_STDIN && !clen) d->stdin_end = true;
        off += 8 + clen + pad;
    }
    assert_int_equal(off, b->len);
    size_t pos = 0;
    const char *n, *v;
    size_t nl, vl;
    while (sl_fcgi_nv_next(params.p, params.len, &pos, &n, &nl, &v, &vl) > 0) {
        snprintf(d->params[d->n][0], 512, "%.*s", (int)nl, n);
        snprintf(d->params[d->n][1], 512, "%.*s", (int)vl, v);
        d->n++;
    }
    sl_buf_free(&params);
}

static const char *param(const decoded *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->params[i][0], name)) return d->params[i][1];
    return NULL;
}

static sl_proxy_msg msg_for(sl_http_request *rq, const char *head, char *copy)
{
    strcpy(copy, head);
    assert_true(sl_http_parse_request(copy, strlen(copy), &lim, rq) > 0);
    sl_proxy_msg m = {.rq = rq, .docroot = "/srv/www", .path = "/a/b.php", .query = "x=1",
                      .host = "example.org:8080", .remote_addr = "127.0.0.9", .remote_port = 4242,
                      .server_addr = "127.0.0.1", .server_port = "8080", .body_length = -1,
                      .keep = true};
    return m;
}

static void test_cgi_variables(void **state)
{
    sl_http_request rq;
    char copy[1024];
    sl_proxy_msg m = msg_for(&rq, "GET /a/b.php?x=1 HTTP/1.1\r\nHost: example.org:8080\r\n"
                                  "Cookie: a=1\r\nCookie: b=2\r\nProxy: evil\r\n"
                                  "X-Long-Name: v\r\n\r\n", copy);
    sl_buf b = {0};
    assert_int_equal(sl_proxy_fastcgi.encode_head(&m, &b), 0);
    assert_int_equal(sl_proxy_fastcgi.encode_body(&m, &b, NULL, 0), 0);
    assert_int_equal(sl_proxy_fastcgi.encode_end(&m, &b), 0);
    decoded d;
    decode_request(&b, &d);
    assert_true(d.keep);
    assert_true(d.stdin_end);
    assert_string_equal(param(&d, "SCRIPT_FILENAME"), "/srv/www/a/b.php");
    assert_string_equal(param(&d, "SCRIPT_NAME"), "/a/b.php");
    assert_string_equal(param(&d, "PATH_INFO"), "");
    assert_null(param(&d, "PATH_TRANSLATED"));
    assert_string_equal(param(&d, "REQUEST_URI"), "/a/b.php?x=1");
    assert_string_equal(param(&d, "QUERY_STRING"), "x=1");
    assert_string_equal(param(&d, "REQUEST_METHOD"), "GET");
    assert_string_equal(param(&d, "SERVER_NAME"), "example.org");
    assert_string_equal(param(&d, "SERVER_PORT"), "8080");
    assert_string_equal(param(&d, "REMOTE_ADDR"), "127.0.0.9");
    assert_string_equal(param(&d, "REMOTE_PORT"), "4242");
    assert_string_equal(param(&d, "HTTP_COOKIE"), "a=1; b=2"); /* one variable, joined */
    assert_string_equal(param(&d, "HTTP_X_LONG_NAME"), "v");
    assert_null(param(&d, "HTTP_PROXY"));                     /* httpoxy */
    assert_null(param(&d, "CONTENT_LENGTH"));
    sl_buf_free(&b);
}

static void test_script_name_and_path_info_overrides(void **state)
{
    sl_http_request rq;
    char copy[1024];
    sl_proxy_msg m = msg_for(&rq, "GET /app/x/y HTTP/1.1\r\nHost: h\r\n\r\n", copy);
    m.script_name = "/app";
    m.path_info = "/x/y";
    m.script_filename = "/srv/app.fcgi";
    m.request_uri = "/app/x/y";
    sl_buf b = {0};
    assert_int_equal(sl_proxy_fastcgi.encode_head(&m, &b), 0);
    assert_int_equal(sl_proxy_fastcgi.encode_end(&m, &b), 0);
    decoded d;
    decode_request(&b, &d);
    assert_string_equal(param(&d, "SCRIPT_NAME"), "/app");
    assert_string_equal(param(&d, "PATH_INFO"), "/x/y");
    assert_string_equal(param(&d, "PATH_TRANSLATED"), "/srv/www/x/y");
    assert_string_equal(param(&d, "SCRIPT_FILENAME"), "/srv/app.fcgi");
    sl_buf_free(&b);
}

static void test_body_as_stdin_records(void **state)
{
    sl_http_request rq;
    char copy[1024];
    sl_proxy_msg m = msg_for(&rq, "POST /a/b.php HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n"
                                  "Content-Type: text/plain\r\n\r\n", copy);
    m.body_length = 11;
    m.keep = false;
    sl_buf b = {0};
    assert_int_equal(sl_proxy_fastcgi.encode_head(&m, &b), 0);
    assert_int_equal(sl_proxy_fastcgi.encode_body(&m, &b, "hello ", 6), 0);
    assert_int_equal(sl_proxy_fastcgi.encode_body(&m, &b, "world", 5), 0);
    decoded d;
    decode_request(&b, &d);
    assert_false(d.stdin_end); /* not yet */
    assert_int_equal(sl_proxy_fastcgi.encode_end(&m, &b), 0);
    decode_request(&b, &d);
    assert_false(d.keep);
    assert_true(d.stdin_end);
    assert_int_equal(d.stdin_len, 11);
    assert_memory_equal(d.stdin_, "hello world", 11);
    assert_string_equal(param(&d, "CONTENT_LENGTH"), "11");
    assert_string_equal(param(&d, "CONTENT_TYPE"), "text/plain");
    assert_null(param(&d, "HTTP_CONTENT_LENGTH"));
    sl_buf_free(&b);
}

/* An answer: stdout pieces, a stderr line, then END_REQUEST; cut into single bytes, the pieces
 * still add up to the same stdout. */
static void test_decode_answer(void **state)
{
    sl_buf a = {0};
    assert_int_equal(sl_fcgi_write_stream(&a, SL_FCGI_STDOUT, 1, "Status: 200\r\n\r\nhi", 17), 0);
    assert_int_equal(sl_fcgi_write_stream(&a, SL_FCGI_STDERR, 1, "oops\n", 5), 0);
    assert_int_equal(sl_fcgi_end_stream(&a, SL_FCGI_STDOUT, 1), 0);
    assert_int_equal(sl_fcgi_end_request(&a, 1, 0, 0), 0);
    for (size_t step = 1; step <= a.len; step += a.len - 1) {
        _Alignas(max_align_t) unsigned char st[SL_PROXY_STATE_MAX];
        assert_true(sl_proxy_fastcgi.state_size <= sizeof st);
        sl_proxy_fastcgi.decode_init(st);
        char out[64] = "", log[16] = "";
        bool end = false;
        for (size_t off = 0; off < a.len;) {
            size_t n = a.len - off < step ? a.len - off : step, used = 0;
            while (n) {
                sl_proxy_piece p;
                int t = sl_proxy_fastcgi.decode(st, a.p + off, n, &used, &p);
                assert_true(t >= 0);
                if (t == SL_PP_DATA) strncat(out, p.data, p.len);
                if (t == SL_PP_LOG) strncat(log, p.data, p.len);
                if (t == SL_PP_END) end = true;
                off += used;
                n -= used;
            }
        }
        assert_string_equal(out, "Status: 200\r\n\r\nhi");
        assert_string_equal(log, "oops\n");
        assert_true(end);
    }
    /* A record of another request is refused. */
    sl_buf bad = {0};
    assert_int_equal(sl_fcgi_write_stream(&bad, SL_FCGI_STDOUT, 2, "x", 1), 0);
    _Alignas(max_align_t) unsigned char st[SL_PROXY_STATE_MAX];
    sl_proxy_fastcgi.decode_init(st);
    size_t used;
    sl_proxy_piece p;
    assert_int_equal(sl_proxy_fastcgi.decode(st, bad.p, bad.len, &used, &p), -EPROTO);
    sl_buf_free(&bad);
    sl_buf_free(&a);
}

static void test_head_and_framing(void **state)
{
    char head[] = "Status: 404 Not Found\r\nContent-Type: text/plain\r\nConnection: x\r\n\r\nbody";
    size_t len = strlen(head);
    sl_upstream_limits ul = {4096, SL_UPSTREAM_MAX_HEADERS};
    sl_upstream_head h;
    int r = sl_proxy_fastcgi.parse_head(head, &len, &ul, &h);
    assert_int_equal(r, (int)strlen(head) - 4);
    assert_int_equal(h.status, 404);
    bool keep = true;
    assert_int_equal(sl_proxy_fastcgi.framing(&h, false, &keep), SL_BODY_UNTIL_CLOSE);
    assert_true(keep);
    assert_int_equal(sl_proxy_fastcgi.framing(&h, true, &keep), SL_BODY_NONE);
    for (size_t i = 0; i < h.n_fields; i++) {
        bool conn = h.fields[i].name_len == 10 && !memcmp(h.fields[i].name, "Connection", 10);
        assert_int_equal(sl_proxy_fastcgi.hop(&h, &h.fields[i]), conn);
    }
    assert_ptr_equal(sl_proxy_proto_find("fastcgi"), &sl_proxy_fastcgi);
    assert_null(sl_proxy_proto_find("scgi"));
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_cgi_variables),
        cmocka_unit_test(test_script_name_and_path_info_overrides),
        cmocka_unit_test(test_body_as_stdin_records),
        cmocka_unit_test(test_decode_answer),
        cmocka_unit_test(test_head_and_framing))
