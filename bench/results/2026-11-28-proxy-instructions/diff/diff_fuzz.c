/* Differential fuzzer (scratch, not part of the build): the head parsers of an older commit (old_*,
 * renamed by objcopy in build.sh) against the working tree's. Byte 0 picks the parser, bytes 1-3 the
 * limits; every input is also fed as a chain of shorter prefixes. Any difference in the result or
 * in any parsed field aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http_parse.h"
#include "http_resp.h"
int old_sl_http_parse_request(const char *, size_t, const sl_http_limits *, sl_http_request *);
int old_sl_upstream_parse_http(const char *, size_t, const sl_upstream_limits *, sl_upstream_head *);
int old_sl_upstream_parse_cgi(const char *, size_t, const sl_upstream_limits *, sl_upstream_head *);
#define OFF(p, b) ((p) ? (long)((const char *)(p) - (b)) : -1L)
static void die(const char *w) { fprintf(stderr, "DIFF %s\n", w); abort(); }
static sl_http_request ra, rb;
static sl_upstream_head ha, hb;
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 4) return 0;
    size_t l1 = d[1] % 8 == 0 ? 100000 : d[1] % 200, l2 = d[2] % 8 == 0 ? 100000 : d[2] % 200, l3 = d[3] % 40;
    const char *b = (const char *)d + 4;
    size_t len = n - 4;
    /* Feed prefixes too. */
    for (size_t k = len; ; k = k * 3 / 4) {
        if (d[0] & 1) {
            sl_http_limits lim = {l1, l2, l3};
            int x = old_sl_http_parse_request(b, k, &lim, &ra), y = sl_http_parse_request(b, k, &lim, &rb);
            if (x != y) { fprintf(stderr, "%d vs %d\n", x, y); die("req rc"); }
            if (x > 0) {
                if (ra.method != rb.method || ra.method_len != rb.method_len || OFF(ra.method_str, b) != OFF(rb.method_str, b) ||
                    ra.target_len != rb.target_len || OFF(ra.target, b) != OFF(rb.target, b) || ra.version != rb.version ||
                    ra.n_headers != rb.n_headers || ra.content_length != rb.content_length || ra.chunked != rb.chunked ||
                    ra.conn_close != rb.conn_close || ra.conn_keep_alive != rb.conn_keep_alive || ra.conn_upgrade != rb.conn_upgrade ||
                    ra.head_len != rb.head_len)
                    die("req fields");
                for (size_t i = 0; i < ra.n_headers; i++) {
                    const sl_http_header *p = &ra.headers[i], *q = &rb.headers[i];
                    if (OFF(p->name, b) != OFF(q->name, b) || p->name_len != q->name_len || OFF(p->value, b) != OFF(q->value, b) ||
                        p->value_len != q->value_len || (p->next ? p->next - ra.headers : -1) != (q->next ? q->next - rb.headers : -1))
                        die("req header");
                }
#define W(f) if ((ra.f ? ra.f - ra.headers : -1) != (rb.f ? rb.f - rb.headers : -1)) die("req " #f);
                W(host) W(range) W(if_range) W(if_match) W(if_none_match) W(if_modified_since) W(if_unmodified_since) W(expect) W(content_type) W(user_agent) W(referer)
            } else if (x < 0 && (ra.method != rb.method || ra.method_len != rb.method_len)) die("req method on error");
        } else {
            sl_upstream_limits lim = {l1, l3};
            int cgi = d[0] & 2;
            int x = cgi ? old_sl_upstream_parse_cgi(b, k, &lim, &ha) : old_sl_upstream_parse_http(b, k, &lim, &ha);
            int y = cgi ? sl_upstream_parse_cgi(b, k, &lim, &hb) : sl_upstream_parse_http(b, k, &lim, &hb);
            if (x != y) { fprintf(stderr, "%d vs %d\n", x, y); die("resp rc"); }
            if (x > 0) {
                if (ha.version != hb.version || ha.status != hb.status || OFF(ha.reason, b) != OFF(hb.reason, b) || ha.reason_len != hb.reason_len ||
                    ha.n_fields != hb.n_fields || ha.content_length != hb.content_length || ha.chunked != hb.chunked ||
                    ha.conn_close != hb.conn_close || ha.conn_keep_alive != hb.conn_keep_alive || ha.conn_upgrade != hb.conn_upgrade ||
                    ha.local_redirect != hb.local_redirect || ha.head_len != hb.head_len ||
                    (ha.location ? ha.location - ha.fields : -1) != (hb.location ? hb.location - hb.fields : -1) ||
                    (ha.status_field ? ha.status_field - ha.fields : -1) != (hb.status_field ? hb.status_field - hb.fields : -1))
                    die("resp fields");
                for (size_t i = 0; i < ha.n_fields; i++) {
                    const sl_upstream_field *p = &ha.fields[i], *q = &hb.fields[i];
                    if (OFF(p->name, b) != OFF(q->name, b) || p->name_len != q->name_len || OFF(p->value, b) != OFF(q->value, b) || p->value_len != q->value_len)
                        die("resp field");
                }
            }
        }
        if (k == 0) break;
    }
    return 0;
}
