/* The Authorization header of HTTP authentication (RFC 9110 §11.6.2): the credentials of the Basic
 * scheme (RFC 7617) and the auth-params of the Digest scheme (RFC 7616), parsed into a buffer of
 * the caller's. Pure code: no I/O, no allocation (a fuzz target runs it on any bytes).
 */
#ifndef SL_AUTH_PARSE_H
#define SL_AUTH_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* Decode standard base64 (RFC 4648 §4; the padding may be left out, nothing else may be: no
 * white space, no other alphabet) of in[0..len) into out (cap bytes). Returns the decoded length,
 * or -EINVAL (not base64), or -E2BIG (does not fit into cap). */
long sl_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap);

/* Basic credentials: v[0..len) is the Authorization field value. The user-id and the password
 * are decoded into buf (cap bytes) and NUL-terminated there: *user (ulen bytes before the first
 * ':') and *pw (pwlen bytes after it). Returns 0; -ENOENT when the value is not of the Basic
 * scheme (the scheme name is case-insensitive and must be followed by a space); -EINVAL when it is
 * but the credentials are not base64 or hold no ':' or a NUL or control character; -E2BIG when
 * they do not fit into buf. */
int sl_auth_basic_parse(const char *v, size_t len, char *buf, size_t cap, const char **user,
                        size_t *ulen, const char **pw, size_t *pwlen);

/* The Digest parameters seekless uses, each NUL-terminated in the caller's buffer with its
 * quoted-string escapes undone, or NULL when absent. */
typedef struct sl_digest_params {
    const char *username, *username_star, *realm, *nonce, *uri, *algorithm, *qop, *cnonce, *nc,
        *response, *userhash, *opaque;
} sl_digest_params;

/* Digest credentials: v[0..len) is the Authorization field value, "Digest" then a list of
 * auth-params (token BWS "=" BWS (token / quoted-string), separated by commas with OWS). Known
 * parameters are copied into buf (cap bytes) and pointed at from *p; unknown ones are skipped.
 * Returns 0; -ENOENT when the value is not of the Digest scheme; -EINVAL on a syntax error, a
 * parameter given twice, or a NUL or control character in a value; -E2BIG when the values do not
 * fit into buf (a buffer of len + 1 bytes always suffices). */
int sl_auth_digest_parse(const char *v, size_t len, char *buf, size_t cap, sl_digest_params *p);

/* An RFC 8187 ext-value (charset "'" [language] "'" value-chars), as Digest's username* carries
 * a user name that is not ASCII (RFC 7616 §3.4.4): charset UTF-8 or ISO-8859-1 (any case), the
 * percent-encoding undone into out (cap bytes, NUL-terminated), bytes kept as they are (no
 * conversion between charsets, as lighttpd). Returns the length, or -EINVAL (another charset, a
 * bad escape, a character that may not appear unencoded, invalid UTF-8, or a control character
 * after decoding), or -E2BIG. */
long sl_auth_ext_value_decode(const char *in, char *out, size_t cap);

#endif
