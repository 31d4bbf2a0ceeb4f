/* libFuzzer target for sl_http_parse_request.
 *
 * The input is raw bytes read as a sequence of pipelined requests: parse, move on by head_len,
 * repeat while heads come out. Each parsed head is checked for internal consistency (length within
 * the input, every pointer inside its head, well-known pointers inside headers[], the documented
 * field invariants). For each head the incremental contract is checked too: a prefix gives 0 below
 * head_len and head_len from there on, or, for an error, 0 or that same error. Finally tight limits
 * derived from the input may only turn a result into -414 or -431, never into anything else.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"

#define FUZZ_NAME "fuzz_http_request"
#include "fuzz_util.h"

static void check_head(const sl_http_request *r, const char *buf, size_t len, int rc,
                       size_t max_headers)
{
    check(rc > 0 && (size_t)rc <= len, "0 < head_len <= len");
    check(r->head_len == (size_t)rc, "head_len equals the result");
    size_t n = (size_t)rc;
    check(inside(r->method_str, r->method_len, buf, n) && r->method_len > 0,
          "method inside the head");
    check(inside(r->target, r->target_len, buf, n) && r->target_len > 0, "target inside the head");
    for (size_t i = 0; i < r->target_len; i++)
        check(r->target[i] > 0x20 && r->target[i] < 0x7f, "target is visible ASCII");
    if (r->method != SL_METHOD_OTHER) {
        const char *name = sl_method_name(r->method);
        check(strlen(name) == r->method_len && memcmp(name, r->method_str, r->method_len) == 0,
              "method enum matches its text");
    }
    check(r->version == 10 || r->version == 11, "version is 10 or 11");
    check(r->n_headers <= max_headers && r->n_headers <= SL_HTTP_MAX_HEADERS, "n_headers <= max");
    for (size_t i = 0; i < r->n_headers; i++) {
        const sl_http_header *h = &r->headers[i];
        check(inside(h->name, h->name_len, buf, n) && h->name_len > 0, "name inside the head");
        check(inside(h->value, h->value_len, buf, n), "value inside the head");
        if (h->value_len > 0)
            check(!is_ows(h->value[0]) && !is_ows(h->value[h->value_len - 1]), "value trimmed");
        for (size_t k = 0; k < h->value_len; k++)
            check(h->value[k] != '\r' && h->value[k] != '\n' && h->value[k] != 0,
                  "no CR/LF/NUL in value");
        /* next: the first later line of the same name, compared without case. */
        const sl_http_header *want = NULL;
        for (size_t j = i + 1; j < r->n_headers && !want; j++)
            if (r->headers[j].name_len == h->name_len &&
                strncasecmp(r->headers[j].name, h->name, h->name_len) == 0)
                want = &r->headers[j];
        check(h->next == want, "next links the following line of the same field");
    }
    const sl_http_header *known[] = {r->host,
                                     r->range,
                                     r->if_range,
                                     r->if_match,
                                     r->if_none_match,
                                     r->if_modified_since,
                                     r->if_unmodified_since,
                                     r->expect,
                                     r->content_type,
                                     r->user_agent,
                                     r->referer};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (!known[i]) continue;
        check(known[i] >= r->headers && known[i] < r->headers + r->n_headers,
              "well-known header inside headers[]");
    }
    if (r->version == 11) check(r->host != NULL, "HTTP/1.1 has Host");
    check(r->content_length >= -1, "content_length >= -1");
    check(!(r->chunked && r->content_length >= 0), "never both chunked and Content-Length");
    check(!(r->chunked && r->version == 10), "never chunked on HTTP/1.0");
    if (r->host) check(sl_http_find_header(r, "HOST") == r->host, "find_header finds Host");
}

/* The result for a prefix of length k must agree with the result rc for the whole buffer. */
static void check_prefix(const char *buf, size_t k, const sl_http_limits *lim, int rc)
{
    sl_http_request r;
    int pr = sl_http_parse_request(buf, k, lim, &r);
    if (rc > 0)
        check(pr == (k < (size_t)rc ? 0 : rc), "prefix of a good head gives 0 or head_len");
    else
        check(pr == 0 || pr == rc, "prefix of a bad head gives 0 or the same error");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    static const sl_http_limits lim = {4096, 2048, SL_HTTP_MAX_HEADERS};
    /* Tight limits from a cheap hash of the input, so the boundaries get exercised too. */
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * 16777619u;
    sl_http_limits tight = {hash % 128, (hash >> 7) % 64, (hash >> 13) % 8};

    static sl_http_request req, req2;
    size_t off = 0;
    for (int round = 0; off <= size; round++) {
        const char *b = buf + off;
        size_t len = size - off;
        int rc = sl_http_parse_request(b, len, &lim, &req);
        check(rc >= -505 && rc <= (int)len, "result within range");
        check(rc >= 0 || rc == -400 || rc == -414 || rc == -431 || rc == -501 || rc == -505,
              "negative results are the documented statuses");
        if (rc > 0) check_head(&req, b, len, rc, lim.max_headers);

        /* Prefixes: both ends of the head and one picked by the hash. */
        if (len > 0) {
            check_prefix(b, len - 1, &lim, rc);
            check_prefix(b, (hash >> (round % 16)) % len, &lim, rc);
            if (rc > 0) {
                check_prefix(b, (size_t)rc - 1, &lim, rc);
                check_prefix(b, (size_t)rc, &lim, rc);
            }
        }

        int tr = sl_http_parse_request(b, len, &tight, &req2);
        check(tr == rc || tr == -414 || tr == -431, "tight limits only add -414/-431");
        if (tr > 0) check_head(&req2, b, len, tr, tight.max_headers);

        if (rc <= 0) break;
        off += (size_t)rc;
    }
    return 0;
}
