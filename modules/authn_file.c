/* User files and password checks (lighttpd's mod_authn_file), run on a stat thread.
 *
 * A check reads the user file whole, each time: lighttpd does the same, so a changed htpasswd
 * file counts from the next request on, without a restart and without a cache that could hold
 * a removed user. The files are small (a line per user), reading one costs far less than the
 * bcrypt it is checked against, and the thread is off the event loop. The file is opened with
 * O_NOFOLLOW off (admins link user files) but must be a regular file of at most 64 MB; its
 * copy in memory is wiped before it is freed. Lines as lighttpd reads them: '#' comments and
 * blank lines skipped, lines over 1024 bytes skipped, a CR before the LF dropped, the first line
 * of the user (and realm) wins.
 *
 * The hashes come from libraries, none is written here: OpenSSL's EVP for MD5, SHA-1 and
 * SHA-256, libcrypt's crypt_r for crypt(3) hashes (bcrypt, SHA-crypt, MD5-crypt, DES). Only
 * Apache's $apr1$ is composed here, from EVP MD5: it is MD5-crypt with another magic string,
 * which libcrypt refuses, and the library that has it (libaprutil) would be a dependency of its
 * own for one format. Every comparison of a secret is constant time (CRYPTO_memcmp).
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth_parse.h"
#include "authn_file.h"

size_t sl_digest_len(int algo)
{
    return (algo & SL_DIGEST_SHA256) ? 32 : 16;
}

static const EVP_MD *md_of(int algo)
{
    return (algo & SL_DIGEST_SHA256) ? EVP_sha256() : EVP_md5();
}

int sl_digest_hash(int algo, unsigned char *out, const char *const *parts, const size_t *lens,
                   size_t n)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, md_of(algo), NULL);
    for (size_t i = 0; ok && i < n; i++)
        ok = (!i || EVP_DigestUpdate(ctx, ":", 1)) && EVP_DigestUpdate(ctx, parts[i], lens[i]);
    ok = ok && EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -ENOMEM;
}

void sl_hex(const unsigned char *in, size_t n, char *out)
{
    static const char h[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = h[in[i] >> 4];
        out[2 * i + 1] = h[in[i] & 15];
    }
    out[2 * n] = 0;
}

static int unhex(const char *s, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0'
              : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : -1;
        if (v < 0) return -EINVAL;
        if (i & 1)
            out[i / 2] |= (unsigned char)v;
        else
            out[i / 2] = (unsigned char)(v << 4);
    }
    return 0;
}

/* ---- htpasswd hashes ---- */

/* Apache's MD5-crypt ($apr1$salt$hash): the FreeBSD md5crypt algorithm with the magic
 * "$apr1$", over EVP MD5. out gets "$apr1$<salt>$<22 characters>" (at most 37 bytes + NUL).
 * 0, or -EINVAL for a bad salt, -ENOMEM when the library fails. */
static int apr1(const char *pw, size_t pwlen, const char *setting, size_t slen, char *out,
                size_t cap)
{
    static const char magic[] = "$apr1$";
    static const char itoa64[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const size_t ml = sizeof magic - 1;
    if (slen < ml || memcmp(setting, magic, ml)) return -EINVAL;
    const char *salt = setting + ml;
    size_t saltlen = 0;
    while (saltlen < 8 && ml + saltlen < slen && salt[saltlen] != '$') saltlen++;
    if (cap < ml + saltlen + 1 + 22 + 1) return -EINVAL;
    unsigned char fin[16];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new(), *alt = EVP_MD_CTX_new();
    const EVP_MD *md5 = EVP_md5();
    int ok = ctx && alt;
    /* alternate sum: MD5(pw salt pw) */
    ok = ok && EVP_DigestInit_ex(alt, md5, NULL) && EVP_DigestUpdate(alt, pw, pwlen) &&
         EVP_DigestUpdate(alt, salt, saltlen) && EVP_DigestUpdate(alt, pw, pwlen) &&
         EVP_DigestFinal_ex(alt, fin, NULL);
    ok = ok && EVP_DigestInit_ex(ctx, md5, NULL) && EVP_DigestUpdate(ctx, pw, pwlen) &&
         EVP_DigestUpdate(ctx, magic, ml) && EVP_DigestUpdate(ctx, salt, saltlen);
    for (size_t pl = pwlen; ok && pl > 0; pl -= pl > 16 ? 16 : pl)
        ok = EVP_DigestUpdate(ctx, fin, pl > 16 ? 16 : pl);
    for (size_t i = pwlen; ok && i; i >>= 1)
        ok = (i & 1) ? EVP_DigestUpdate(ctx, "", 1) : EVP_DigestUpdate(ctx, pw, 1);
    ok = ok && EVP_DigestFinal_ex(ctx, fin, NULL);
    /* 1000 rounds to slow a search down. */
    for (int i = 0; ok && i < 1000; i++) {
        ok = EVP_DigestInit_ex(ctx, md5, NULL) &&
             ((i & 1) ? EVP_DigestUpdate(ctx, pw, pwlen) : EVP_DigestUpdate(ctx, fin, 16)) &&
             (!(i % 3) || EVP_DigestUpdate(ctx, salt, saltlen)) &&
             (!(i % 7) || EVP_DigestUpdate(ctx, pw, pwlen)) &&
             ((i & 1) ? EVP_DigestUpdate(ctx, fin, 16) : EVP_DigestUpdate(ctx, pw, pwlen)) &&
             EVP_DigestFinal_ex(ctx, fin, NULL);
    }
    EVP_MD_CTX_free(ctx);
    EVP_MD_CTX_free(alt);
    if (!ok) return -ENOMEM;
    char *p = out;
    memcpy(p, magic, ml);
    p += ml;
    memcpy(p, salt, saltlen);
    p += saltlen;
    *p++ = '$';
    static const int idx[5][3] = {{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}};
    for (int k = 0; k < 5; k++) {
        unsigned long l = ((unsigned long)fin[idx[k][0]] << 16) |
                          ((unsigned long)fin[idx[k][1]] << 8) | fin[idx[k][2]];
        for (int j = 0; j < 4; j++, l >>= 6) *p++ = itoa64[l & 0x3f];
    }
    unsigned long l = fin[11];
    for (int j = 0; j < 2; j++, l >>= 6) *p++ = itoa64[l & 0x3f];
    *p = 0;
    OPENSSL_cleanse(fin, sizeof fin);
    return 0;
}

/* Same length and same bytes, in time that depends on the length only. */
static bool same(const void *a, size_t al, const void *b, size_t bl)
{
    return al == bl && CRYPTO_memcmp(a, b, al) == 0;
}

int sl_authn_htpasswd_verify(const char *hash, size_t hlen, const char *pw, size_t pwlen)
{
    if (hlen >= 5 && !memcmp(hash, "{SHA}", 5)) {
        unsigned char want[24], got[20];
        long n = sl_base64_decode(hash + 5, hlen - 5, want, sizeof want);
        if (n != 20) return -EINVAL;
        if (!EVP_Digest(pw, pwlen, got, NULL, EVP_sha1(), NULL)) return -ENOMEM;
        int r = same(got, 20, want, 20) ? 0 : -EACCES;
        OPENSSL_cleanse(got, sizeof got);
        return r;
    }
    if (hlen >= 6 && !memcmp(hash, "$apr1$", 6)) {
        char got[64];
        int r = apr1(pw, pwlen, hash, hlen, got, sizeof got);
        if (r == 0) r = same(got, strlen(got), hash, hlen) ? 0 : -EACCES;
        OPENSSL_cleanse(got, sizeof got);
        return r;
    }
    /* crypt(3): DES is 13 characters, everything else longer (lighttpd's rule too). crypt_r
     * wants NUL-terminated strings; a password with a NUL cannot match. */
    if (hlen < 13 || memchr(pw, 0, pwlen)) return hlen < 13 ? -EINVAL : -EACCES;
    char *setting = strndup(hash, hlen), *key = strndup(pw, pwlen);
    struct crypt_data *cd = calloc(1, sizeof *cd); /* 32 KB: not on a thread's stack */
    int r = -ENOMEM;
    if (setting && key && cd) {
        const char *got = crypt_r(key, setting, cd);
        /* A failure is NULL or a string starting with '*' (libxcrypt), never the hash. */
        if (!got || got[0] == '*')
            r = -EINVAL;
        else
            r = same(got, strlen(got), hash, hlen) ? 0 : -EACCES;
    }
    if (cd) OPENSSL_cleanse(cd, sizeof *cd);
    if (key) OPENSSL_cleanse(key, pwlen);
    free(cd);
    free(key);
    free(setting);
    return r;
}

/* ---- user files ---- */

/* The whole file, NUL-terminated, in *out (len in *n). 0 or a negative errno. */
static int load(const char *path, char **out, size_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > SL_AUTHN_FILE_MAX) {
        close(fd);
        return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return -ENOMEM;
    }
    /* Read to the end even if the file grew since fstat (up to cap). */
    for (;;) {
        ssize_t r = read(fd, b + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = -errno;
            OPENSSL_cleanse(b, len);
            free(b);
            close(fd);
            return e;
        }
        if (r == 0 || (len += (size_t)r) == cap) break;
    }
    close(fd);
    b[len] = 0;
    *out = b;
    *n = len;
    return 0;
}

/* Find the line of user (and realm, for htdigest: fields == 3) in the file: sets *val to its last
 * field (the password or hash, without CR) and *vlen. 0, -ENOKEY, or the errno of the read.
 * The caller wipes and frees *data (drop), also on failure. For htdigest the hash must also be
 * hex of the query's algorithm's length (lighttpd keeps looking otherwise: a file may hold MD5
 * and SHA-256 lines). */
static int find(const sl_authn_query *q, char **data, size_t *dlen, const char **val,
                size_t *vlen)
{
    bool htdigest = q->backend == SL_AUTHN_HTDIGEST;
    size_t want_len = 2 * sl_digest_len(q->algo);
    *data = NULL;
    *dlen = 0;
    int r = load(q->file, data, dlen);
    if (r < 0) return r;
    size_t rlen = q->realm ? strlen(q->realm) : 0;
    for (const char *line = *data, *end; *line; line = *end ? end + 1 : end) {
        end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        size_t ll = (size_t)(end - line);
        if (ll && line[ll - 1] == '\r') ll--;
        if (!ll || line[0] == '#' || ll > 1024) continue;
        const char *c1 = memchr(line, ':', ll);
        if (!c1 || (size_t)(c1 - line) != q->ulen || memcmp(line, q->user, q->ulen)) continue;
        const char *f = c1 + 1;
        size_t fl = ll - (size_t)(f - line);
        if (htdigest) {
            const char *c2 = memchr(f, ':', fl);
            if (!c2 || (size_t)(c2 - f) != rlen || memcmp(f, q->realm, rlen)) continue;
            fl -= (size_t)(c2 + 1 - f);
            f = c2 + 1;
            /* An optional 4th field (the userhash) follows. */
            const char *c3 = memchr(f, ':', fl);
            if (c3) fl = (size_t)(c3 - f);
            if (fl != want_len) continue;
        }
        *val = f;
        *vlen = fl;
        return 0;
    }
    return -ENOKEY;
}

static void drop(char *data, size_t dlen)
{
    if (!data) return;
    OPENSSL_cleanse(data, dlen);
    free(data);
}

int sl_authn_basic(const sl_authn_query *q, const char *pw, size_t pwlen)
{
    if (q->backend == SL_AUTHN_NONE || !q->file) return -EPERM;
    char *data;
    size_t dlen, vlen, dl = sl_digest_len(q->algo);
    const char *val;
    int r = find(q, &data, &dlen, &val, &vlen);
    if (r < 0) {
        drop(data, dlen);
        return r;
    }
    if (q->backend == SL_AUTHN_PLAIN) {
        r = same(val, vlen, pw, pwlen) ? 0 : -EACCES;
    } else if (q->backend == SL_AUTHN_HTPASSWD) {
        r = sl_authn_htpasswd_verify(val, vlen, pw, pwlen);
        if (r == -EINVAL) r = -EACCES; /* a hash of no known form matches nothing */
    } else {
        unsigned char want[SL_DIGEST_MAX], got[SL_DIGEST_MAX];
        const char *parts[3] = {q->user, q->realm, pw};
        size_t lens[3] = {q->ulen, strlen(q->realm), pwlen};
        r = unhex(val, vlen, want) < 0 ? -EACCES
          : sl_digest_hash(q->algo, got, parts, lens, 3) < 0 ? -ENOMEM
          : same(want, dl, got, dl) ? 0 : -EACCES;
        OPENSSL_cleanse(want, sizeof want);
        OPENSSL_cleanse(got, sizeof got);
    }
    drop(data, dlen);
    return r;
}

int sl_authn_digest_ha1(const sl_authn_query *q, unsigned char *ha1)
{
    if ((q->backend != SL_AUTHN_PLAIN && q->backend != SL_AUTHN_HTDIGEST) || !q->file)
        return -EPERM;
    char *data;
    size_t dlen, vlen;
    const char *val;
    int r = find(q, &data, &dlen, &val, &vlen);
    if (r == 0) {
        if (q->backend == SL_AUTHN_HTDIGEST) {
            r = unhex(val, vlen, ha1) < 0 ? -ENOKEY : 0;
        } else {
            const char *parts[3] = {q->user, q->realm, val};
            size_t lens[3] = {q->ulen, strlen(q->realm), vlen};
            r = sl_digest_hash(q->algo, ha1, parts, lens, 3);
        }
    }
    drop(data, dlen);
    return r;
}
