/* The client address in a proxy's forwarding header (mod_extforward): X-Forwarded-For lists and
 * RFC 7239 Forwarded elements. Pure code: no I/O, no allocation (a fuzz target runs it on any
 * bytes). Which addresses are trusted proxies is the caller's: it passes a test.
 */
#ifndef SL_XF_PARSE_H
#define SL_XF_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Is sa a trusted proxy? arg is the caller's. */
typedef bool (*sl_xf_trusted)(const void *arg, const struct sockaddr *sa);

/* An address as proxies write it ("v4", "v4:port", "[v6]", "[v6]:port", "v6") into *out (port
 * 0): 0, or a negative value (not a numeric address: "unknown", an obfuscated "_name", junk). */
int sl_xf_node_addr(const char *v, size_t n, struct sockaddr_storage *out);

/* The client in the X-Forwarded-For list v[0..len): the rightmost address that is not a trusted
 * proxy's, elements split at ',' with SP/HTAB around them and empty ones skipped. 0 with *out
 * set, or -1 (none, or an element on the way that is not a numeric address). */
int sl_xf_client(const char *v, size_t len, sl_xf_trusted trusted, const void *arg,
                 struct sockaddr_storage *out);

/* The client in the RFC 7239 Forwarded field value v[0..len): its elements (',' outside quoted
 * strings) from the right, the first whose for= is not a trusted proxy's; its proto= ("http" or
 * "https", case-insensitive) sets *scheme to that static string, anything else leaves *scheme
 * alone. 0 with *out set, or -1: none, an element on the way without a numeric for= (an
 * obfuscated or "unknown" node ends the search), a quoted string left open, or more than 64
 * elements. */
int sl_xf_forwarded_client(const char *v, size_t len, sl_xf_trusted trusted, const void *arg,
                           struct sockaddr_storage *out, const char **scheme);

#endif
