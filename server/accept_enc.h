/* Accept-Encoding (RFC 9110 §12.5.3): which content codings a client takes, with their
 * q-values, and the order a server should try its own codings in. */
#ifndef SL_ACCEPT_ENC_H
#define SL_ACCEPT_ENC_H

#include <stddef.h>

#include "http_parse.h"

/* The content codings seekless can produce or find precompressed. */
typedef enum {
    SL_ENC_BR,
    SL_ENC_ZSTD,
    SL_ENC_GZIP,
    SL_ENC_DEFLATE,
    SL_ENC_N,
} sl_encoding;

/* What a client's Accept-Encoding says. q-values are in thousandths (0..1000); -1 means the
 * coding was not named. */
typedef struct sl_ae_prefs {
    short q[SL_ENC_N]; /* br, zstd, gzip (also "x-gzip"), deflate */
    short identity;    /* "identity" */
    short star;        /* "*": every coding not named otherwise */
    unsigned bad;      /* elements skipped as malformed (bad token or q-value) */
} sl_ae_prefs;

/* The token of a coding ("br", "zstd", "gzip", "deflate"); NULL for SL_ENC_N or beyond. */
const char *sl_encoding_name(sl_encoding e);
/* The coding a token names (case-insensitive; "x-gzip" is gzip), or -1. */
int sl_encoding_from_name(const char *s, size_t len);

/* Read every line of an Accept-Encoding field (h: its first line, NULL when absent) into *p.
 * A malformed element is skipped and counted in p->bad; the rest still count. A coding named
 * twice keeps the lower q-value (the cautious reading of a contradiction). Returns the number
 * of elements understood. */
size_t sl_ae_parse(const sl_http_header *h, sl_ae_prefs *p);
/* The same for one value (the fuzz target and the unit tests). */
size_t sl_ae_parse_value(const char *v, size_t len, sl_ae_prefs *p);

/* The q-value a client gives coding e (thousandths; 0: not acceptable). */
int sl_ae_quality(const sl_ae_prefs *p, sl_encoding e);

/* Order the codings `offer` (the server's, in its order of preference, n of them) by the
 * client's preference: q-value first, the server's order among equals; codings the client does
 * not accept (q=0, or neither named nor covered by "*") are left out. Writes them to out
 * (room for n) and returns how many. */
size_t sl_ae_order(const sl_ae_prefs *p, const sl_encoding *offer, size_t n, sl_encoding *out);

#endif
