/* libFuzzer target for conditional requests: sl_http_date_parse (If-Modified-Since,
 * If-Unmodified-Since, If-Range dates), sl_etag_list_match (If-Match, If-None-Match),
 * sl_if_range_ok and sl_precond_eval, all of which read header values a client sent.
 *
 * Input layout: byte 0 holds flags (GET/HEAD or not, which fields are present, weak or strong
 * comparison), bytes 1..4 the file's mtime (little-endian), the rest is split at '\n' into up to
 * six values: If-Match lines, If-None-Match lines and one date. The invariants:
 *   - a parsed date formats to an IMF-fixdate that parses back to the same time;
 *   - a strong match is also a weak one; the file's own ETag matches itself, and a list that
 *     matches still matches with the ETag appended;
 *   - If-Range with the file's own ETag is honoured;
 *   - the evaluation gives 0, 304 or 412; 304 only for GET/HEAD; nothing present passes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_date.h"
#include "precond.h"

#define FUZZ_NAME "fuzz_precond"
#include "fuzz_util.h"

#define MAXV 6

static void check_date(const char *s, size_t len)
{
    time_t t;
    if (sl_http_date_parse(s, len, &t) != 0) return;
    char buf[SL_HTTP_DATE_LEN + 1];
    check(sl_http_date_format(t, buf) == SL_HTTP_DATE_LEN && strlen(buf) == SL_HTTP_DATE_LEN,
          "date: formats to 29 bytes");
    time_t t2;
    check(sl_http_date_parse(buf, SL_HTTP_DATE_LEN, &t2) == 0 && t2 == t,
          "date: its IMF-fixdate parses back to the same time");
}

static void check_list(const char *s, size_t len, const char *etag)
{
    bool strong = sl_etag_list_match(s, len, etag, false);
    bool weak = sl_etag_list_match(s, len, etag, true);
    check(!strong || weak, "etag: a strong match is a weak match");
    if (!weak || len > 4000) return;
    /* A valid list that matches still does with one more element. */
    static char more[4200];
    size_t el = strlen(etag);
    memcpy(more, s, len);
    memcpy(more + len, ", ", 2);
    memcpy(more + len + 2, etag, el);
    check(sl_etag_list_match(more, len + 2 + el, etag, true), "etag: appending keeps a match");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    uint8_t fl = data[0];
    time_t mtime = (time_t)((uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
                            (uint32_t)data[4] << 24);
    const char *s = (const char *)data + 5;
    size_t len = size - 5;

    /* Values: the rest split at '\n'. */
    const char *v[MAXV];
    size_t vl[MAXV];
    int nv = 0;
    for (size_t a = 0; nv < MAXV;) {
        const char *nl = memchr(s + a, '\n', len - a);
        size_t e = nl ? (size_t)(nl - s) : len;
        v[nv] = s + a;
        vl[nv++] = e - a;
        if (!nl) break;
        a = e + 1;
    }

    char etag[SL_ETAG_MAX];
    size_t el = sl_etag_make(etag, (unsigned long long)mtime * 7, (unsigned long long)len,
                             (long long)mtime, (long)(fl & 0x7f) * 1000);
    check(el == strlen(etag) && el <= 52, "etag_make: length");
    check(sl_etag_list_match(etag, el, etag, false), "etag: its own ETag matches strongly");
    check(sl_if_range_ok(etag, el, false, 0, etag, mtime), "If-Range: its own ETag");

    for (int i = 0; i < nv; i++) {
        check_date(v[i], vl[i]);
        check_list(v[i], vl[i], etag);
        check_list(v[i], vl[i], "W/\"x\"");
        time_t d;
        bool has = sl_http_date_parse(v[i], vl[i], &d) == 0;
        (void)sl_if_range_ok(v[i], vl[i], has, has ? d : 0, fl & 1 ? etag : NULL, mtime);
    }

    /* The fields: lines 0-1 If-Match, 2-3 If-None-Match, 4 a date for both date fields. */
    sl_http_header im[2], inm[2];
    memset(im, 0, sizeof im);
    memset(inm, 0, sizeof inm);
    for (int i = 0; i < 2; i++) {
        if (i < nv) im[i] = (sl_http_header){"If-Match", 8, v[i], vl[i], NULL};
        if (2 + i < nv) inm[i] = (sl_http_header){"If-None-Match", 13, v[2 + i], vl[2 + i], NULL};
    }
    if (fl & 0x10 && nv > 1) im[0].next = &im[1];
    if (fl & 0x20 && nv > 3) inm[0].next = &inm[1];
    sl_precond_input in = {.get_or_head = fl & 2};
    if (fl & 4 && nv > 0) in.if_match = &im[0];
    if (fl & 8 && nv > 2) in.if_none_match = &inm[0];
    time_t d = 0;
    bool has_d = nv > 4 && sl_http_date_parse(v[4], vl[4], &d) == 0;
    in.has_if_modified_since = has_d && fl & 0x40;
    in.if_modified_since = d;
    in.has_if_unmodified_since = has_d && fl & 0x80;
    in.if_unmodified_since = d;
    sl_precond_result r = sl_precond_eval(&in, fl & 1 ? etag : NULL, mtime);
    check(r == SL_PRECOND_PASS || r == SL_PRECOND_NOT_MODIFIED || r == SL_PRECOND_FAILED,
          "eval: 0, 304 or 412");
    if (r == SL_PRECOND_NOT_MODIFIED) check(in.get_or_head, "eval: 304 only for GET or HEAD");
    if (!in.if_match && !in.if_none_match && !in.has_if_modified_since &&
        !in.has_if_unmodified_since)
        check(r == SL_PRECOND_PASS, "eval: no condition passes");
    return 0;
}
