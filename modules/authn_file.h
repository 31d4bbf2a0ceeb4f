/* User files and password checks for mod_auth (lighttpd's mod_authn_file): the "plain",
 * "htpasswd" and "htdigest" backends, and the hashes of HTTP Digest (RFC 7616).
 *
 * Every function here may block (it reads the user file, and a bcrypt hash costs milliseconds):
 * mod_auth calls them on a stat thread. They touch nothing but their arguments and are
 * thread-safe. A file that cannot be read is its negative errno (-ENOENT: it does not exist),
 * told apart from a user the file does not have (-ENOKEY).
 */
#ifndef SL_AUTHN_FILE_H
#define SL_AUTHN_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* auth.backend */
typedef enum {
    SL_AUTHN_NONE = 0,
    SL_AUTHN_PLAIN,    /* user:password */
    SL_AUTHN_HTPASSWD, /* user:hash (crypt(3) $1$ $5$ $6$ $2y$..., $apr1$, {SHA}) */
    SL_AUTHN_HTDIGEST, /* user:realm:hex(H(user:realm:password)) */
} sl_authn_backend;

/* Digest algorithms (flags: auth.require's "algorithm" may offer several). */
#define SL_DIGEST_MD5 1
#define SL_DIGEST_SHA256 2
#define SL_DIGEST_SESS 4 /* with one of the above: MD5-sess, SHA-256-sess */

/* The largest digest (SHA-256), in bytes. */
#define SL_DIGEST_MAX 32

/* The biggest user file read (lighttpd's limit too): a larger one is an error (-EFBIG). */
#define SL_AUTHN_FILE_MAX (64L * 1024 * 1024)

/* Bytes of a digest of algo (16 for MD5, 32 for SHA-256; the SESS flag does not count). */
size_t sl_digest_len(int algo);

/* H(parts[0] ":" parts[1] ":" ... parts[n-1]) with algo's hash into out (sl_digest_len bytes).
 * 0, or -ENOMEM when the library fails. */
int sl_digest_hash(int algo, unsigned char *out, const char *const *parts, const size_t *lens,
                   size_t n);

/* Lower-case hex of in[0..n) into out (2n characters and a NUL). */
void sl_hex(const unsigned char *in, size_t n, char *out);

/* Check a password against one htpasswd hash (hash[0..hlen)): {SHA}, $apr1$, else crypt(3)
 * (libcrypt's crypt_r: $1$, $5$, $6$, $2a$/$2b$/$2y$, $y$, DES). Constant time in the
 * comparison. 0 when it matches, -EACCES when not, -EINVAL when the hash is of no form that can
 * match. */
int sl_authn_htpasswd_verify(const char *hash, size_t hlen, const char *pw, size_t pwlen);

/* What one check needs to know. */
typedef struct sl_authn_query {
    sl_authn_backend backend;
    const char *file;    /* the backend's user file */
    const char *user;    /* the user name, ulen bytes */
    size_t ulen;
    const char *realm;   /* the realm of the rule (htdigest lines are per realm) */
    int algo;            /* SL_DIGEST_*: the hash an htdigest line must have (Basic against an
                          * htdigest file: the rule's first algorithm) */
} sl_authn_query;

/* Basic: does pw match the user's entry? 0 yes; -EACCES wrong password; -ENOKEY no such user
 * (for htdigest: no line of this user, realm and hash length); -EPERM the backend cannot check
 * Basic (none); or the negative errno of reading the file. */
int sl_authn_basic(const sl_authn_query *q, const char *pw, size_t pwlen);

/* Digest: the user's H(user:realm:password) for q->algo into ha1 (sl_digest_len bytes): from
 * an htdigest line, or computed from a plain file's password. 0; -ENOKEY no such user; -EPERM
 * the backend keeps no digest (htpasswd, none); or the negative errno of reading the file. */
int sl_authn_digest_ha1(const sl_authn_query *q, unsigned char *ha1);

#endif
