/* libFuzzer target for proxy_core/http_resp.c.
 *
 * Input: the first byte seeds the fragment sizes (together with a hash of the rest); the rest is
 * read four ways:
 *   - as an HTTP/1.x response head and as a CGI head: results within the documented set, a parsed
 *     head internally consistent (everything inside buf[0..head_len), values trimmed and free of
 *     CR/LF/NUL, framing fields coherent), the incremental contract on several prefixes (each
 *     copied into an exactly-sized buffer), and tight limits only ever adding -E2BIG; after an
 *     HTTP head with chunked framing the bytes that follow go through the chunked decoder;
 *   - as a chunked body, once whole and once in random fragments: same data, same result, same
 *     bytes consumed, every span inside its fragment;
 *   - as a payload: encoded into chunks of random sizes with extensions and a trailer, it must
 *     decode back to itself;
 *   - split in two, as a field name and a Connection value for sl_hop_by_hop.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_resp.h"

#define FUZZ_NAME "fuzz_http_resp"
#include "fuzz_util.h"

typedef int (*parse_fn)(const char *, size_t, const sl_upstream_limits *, sl_upstream_head *);

static sl_upstream_head head, head2;

static void check_head(const sl_upstream_head *h, const char *buf, size_t len, int rc, bool cgi,
                       size_t max_headers)
{
    check(rc > 0 && (size_t)rc <= len && h->head_len == (size_t)rc, "0 < head_len <= len");
    size_t n = (size_t)rc;
    check(h->n_fields <= max_headers && h->n_fields <= SL_UPSTREAM_MAX_HEADERS, "n_fields");
    check(cgi ? h->version == 0 : (h->version == 10 || h->version == 11), "version");
    check(cgi ? h->status >= 200 && h->status <= 599 : h->status >= 100 && h->status <= 599,
          "status range");
    if (h->reason_len) check(inside(h->reason, h->reason_len, buf, n), "reason inside");
    for (size_t i = 0; i < h->n_fields; i++) {
        const sl_upstream_field *f = &h->fields[i];
        check(inside(f->name, f->name_len, buf, n) && f->name_len > 0, "name inside");
        check(inside(f->value, f->value_len, buf, n), "value inside");
        for (size_t k = 0; k < f->name_len; k++)
            check(f->name[k] > 0x20 && f->name[k] < 0x7f && f->name[k] != ':', "name is a token");
        if (f->value_len)
            check(!is_ows(f->value[0]) && !is_ows(f->value[f->value_len - 1]), "value trimmed");
        for (size_t k = 0; k < f->value_len; k++)
            check(f->value[k] != '\r' && f->value[k] != '\n' && f->value[k] != 0, "value text");
        if (f->name_len < 64) {
            char name[64];
            memcpy(name, f->name, f->name_len);
            name[f->name_len] = 0;
            const sl_upstream_field *g = sl_upstream_find(h, name);
            check(g && g <= f && g->name_len == f->name_len, "find returns the first match");
        }
        sl_upstream_hop_by_hop(h, f);
    }
    check(h->content_length >= -1, "content_length >= -1");
    check(!(h->chunked && h->content_length >= 0), "never chunked and Content-Length");
    check(!(h->chunked && (cgi || h->version == 10)), "chunked only on HTTP/1.1");
    if (h->location)
        check(h->location >= h->fields && h->location < h->fields + h->n_fields, "location");
    if (h->status_field)
        check(cgi && h->status_field >= h->fields && h->status_field < h->fields + h->n_fields,
              "status_field");
    check(!h->local_redirect || (cgi && h->location && !h->status_field && h->status == 302),
          "local_redirect only for a CGI Location without Status");
    if (!cgi) {
        sl_body_framing fr = sl_upstream_framing(h, false);
        check(fr != SL_BODY_CHUNKED || h->chunked, "chunked framing needs chunked");
        check(fr != SL_BODY_LENGTH || h->content_length >= 0, "length framing needs a length");
        check(sl_upstream_framing(h, true) == SL_BODY_NONE, "HEAD has no body");
        if (sl_upstream_keep_alive(h, false)) check(fr != SL_BODY_UNTIL_CLOSE, "keep-alive");
        if (sl_upstream_interim(h)) check(fr == SL_BODY_NONE, "1xx has no body");
    }
}

/* Parses an exact heap copy of buf[0..k). */
static int parse_copy(parse_fn fn, const char *buf, size_t k, const sl_upstream_limits *lim,
                      sl_upstream_head *h)
{
    char *copy = malloc(k ? k : 1);
    check(copy != NULL, "malloc");
    if (k) memcpy(copy, buf, k);
    int rc = fn(copy, k, lim, h);
    free(copy);
    return rc;
}

static void check_prefix(parse_fn fn, const char *buf, size_t k, const sl_upstream_limits *lim,
                         int rc)
{
    int pr = parse_copy(fn, buf, k, lim, &head2);
    if (rc > 0)
        check(pr == (k < (size_t)rc ? 0 : rc), "prefix of a good head gives 0 or head_len");
    else
        check(pr == 0 || pr == rc, "prefix of a bad head gives 0 or the same error");
}

/* Decodes buf[0..len) whole (seed NULL) or in random fragments; returns the result and fills
 * the decoded bytes and the bytes consumed. */
static int dechunk(const char *buf, size_t len, uint32_t *seed, size_t max_trailer, char *out,
                   size_t *out_len, size_t *consumed)
{
    sl_chunked_decoder c;
    sl_chunked_init(&c, max_trailer);
    size_t off = 0;
    *out_len = 0;
    *consumed = 0;
    int result = SL_CHUNKED_NEED;
    while (off < len) {
        size_t n = len - off;
        if (seed) {
            uint32_t r = rng_next(seed);
            size_t want = (r & 7) == 0 ? 1 + (r >> 8) % 5000 : 1 + (r >> 8) % 9;
            if (want < n) n = want;
        }
        char *frag = malloc(n);
        check(frag != NULL, "malloc");
        memcpy(frag, buf + off, n);
        size_t used = 0;
        for (;;) {
            const char *d = NULL;
            size_t dl = 0, cons = (size_t)-1;
            int rc = sl_chunked_decode(&c, frag + used, n - used, &cons, &d, &dl);
            check(rc == SL_CHUNKED_NEED || rc == SL_CHUNKED_DATA || rc == SL_CHUNKED_END ||
                      rc == -EPROTO || rc == -E2BIG,
                  "chunked result in the documented set");
            if (rc < 0) {
                check(cons == 0, "consumed 0 on error");
                size_t c2;
                check(sl_chunked_decode(&c, frag, n, &c2, &d, &dl) == rc && c2 == 0,
                      "sticky error");
                free(frag);
                return rc;
            }
            check(cons <= n - used, "consumed <= length");
            used += cons;
            *consumed += cons;
            if (rc == SL_CHUNKED_DATA) {
                check(dl > 0 && d >= frag && d + dl == frag + used,
                      "span inside, ends at consumed");
                memcpy(out + *out_len, d, dl);
                *out_len += dl;
                continue;
            }
            if (rc == SL_CHUNKED_END) {
                check(sl_chunked_done(&c), "done after END");
                size_t c2;
                check(sl_chunked_decode(&c, frag, n, &c2, &d, &dl) == SL_CHUNKED_END && c2 == 0,
                      "END again consumes nothing");
                free(frag);
                return rc;
            }
            check(used == n, "NEED consumes everything");
            break;
        }
        free(frag);
        off += n;
    }
    return result;
}

static void check_chunked(const char *buf, size_t len, uint32_t seed, size_t max_trailer)
{
    char *a = malloc(len + 1), *b = malloc(len + 1);
    check(a && b, "malloc");
    size_t al, bl, ac, bc;
    int ra = dechunk(buf, len, NULL, max_trailer, a, &al, &ac);
    int rb = dechunk(buf, len, &seed, max_trailer, b, &bl, &bc);
    check(ra == rb, "chunked: same result whole and fragmented");
    check(al == bl && !memcmp(a, b, al), "chunked: same data whole and fragmented");
    if (ra == SL_CHUNKED_END) check(ac == bc, "chunked: same length consumed");
    check(al <= len && ac <= len, "chunked: no more out than in");
    free(a);
    free(b);
}

/* Encodes payload as a chunked body and decodes it back. */
static void check_chunked_roundtrip(const char *p, size_t len, uint32_t seed)
{
    size_t cap = len * 2 + 64 * (len + 2) + 256;
    char *enc = malloc(cap), *out = malloc(len + 1);
    check(enc && out, "malloc");
    size_t off = 0, at = 0;
    static const char *const exts[] = {"", ";a", ";name=value", " ; q=\"x\\\"y\" ", ";a;b=c"};
    while (at < len) {
        size_t n = 1 + rng_next(&seed) % 700;
        if (n > len - at) n = len - at;
        off += (size_t)snprintf(enc + off, cap - off, "%zX%s\r\n", n,
                                exts[rng_next(&seed) % 5]);
        memcpy(enc + off, p + at, n);
        off += n;
        at += n;
        memcpy(enc + off, "\r\n", 2);
        off += 2;
    }
    off += (size_t)snprintf(enc + off, cap - off, "0%s\r\nX-Trailer: %u\r\n\r\n",
                            exts[rng_next(&seed) % 5], seed % 1000);
    size_t ol, cons;
    int rc = dechunk(enc, off, &seed, 64, out, &ol, &cons);
    check(rc == SL_CHUNKED_END && cons == off, "encoded body decodes to the end");
    check(ol == len && !memcmp(out, p, len), "encoded body decodes to the payload");
    free(enc);
    free(out);
}

static void check_head_mode(parse_fn fn, bool cgi, const char *buf, size_t len, uint32_t hash,
                            uint32_t *seed)
{
    static const sl_upstream_limits lim = {8192, SL_UPSTREAM_MAX_HEADERS};
    int rc = fn(buf, len, &lim, &head);
    check(rc == -EPROTO || rc == -E2BIG || (rc >= 0 && (size_t)rc <= len), "head result");
    if (rc > 0) check_head(&head, buf, len, rc, cgi, lim.max_headers);

    if (len > 0) {
        check_prefix(fn, buf, len - 1, &lim, rc);
        check_prefix(fn, buf, hash % len, &lim, rc);
    }
    if (rc > 0) {
        check_prefix(fn, buf, (size_t)rc - 1, &lim, rc);
        check_prefix(fn, buf, (size_t)rc, &lim, rc);
    }

    sl_upstream_limits tight = {hash % 160, (hash >> 8) % 8};
    int tr = fn(buf, len, &tight, &head2);
    check(tr == rc || tr == -E2BIG, "tight limits only add -E2BIG");
    if (tr > 0) check_head(&head2, buf, len, tr, cgi, tight.max_headers);

    /* The body after a chunked head, as the proxy would read it. */
    if (rc > 0 && !cgi && sl_upstream_framing(&head, false) == SL_BODY_CHUNKED)
        check_chunked(buf + rc, len - (size_t)rc, rng_next(seed), 256);
}

static void check_hop(const char *p, size_t len, uint32_t hash)
{
    size_t cut = len ? hash % (len + 1) : 0;
    const char *name = p, *conn = p + cut;
    size_t nl = cut, cl = len - cut;
    sl_hop_by_hop(name, nl, conn, cl);
    sl_hop_by_hop(name, nl, NULL, 0);
    /* A name that is a clean list element is hop-by-hop when listed. */
    bool clean = nl > 0 && !is_ows(name[0]) && !is_ows(name[nl - 1]) && !memchr(name, ',', nl);
    if (clean) check(sl_hop_by_hop(name, nl, name, nl), "a name listed in Connection");
    check(sl_hop_by_hop("Transfer-Encoding", 17, conn, cl), "fixed names always");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ (uint8_t)buf[i]) * 16777619u;
    uint32_t seed = hash ^ ((uint32_t)data[0] * 0x01000193u) ^ data[0];

    check_head_mode(sl_upstream_parse_http, false, buf, len, hash, &seed);
    check_head_mode(sl_upstream_parse_cgi, true, buf, len, hash >> 3, &seed);
    check_chunked(buf, len, rng_next(&seed), data[0] % 2 ? 1024 : 0);
    check_chunked_roundtrip(buf, len, rng_next(&seed));
    check_hop(buf, len, hash);
    return 0;
}
