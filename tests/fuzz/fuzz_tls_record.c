/* libFuzzer target for the TLS record path: a server SSL with seekless's defaults (the very
 * SSL_CTX settings of server/tls_ctx.c, with an ECDSA P-256 certificate made once at start)
 * reads the input through a memory BIO, as a client's bytes would arrive on the socket.
 *
 * The input is cut into reads at offsets an xorshift stream seeded by its first byte chooses,
 * so records and handshake messages arrive split in every way a slow network splits them.
 * After each piece the server reads as the connection does (SSL_read until WANT_READ) and
 * answers what it must into a memory BIO that is drained. Invariants: SSL_read never returns
 * more than asked; once it fails for good (not WANT_READ) it keeps failing and no application
 * data is ever returned before the handshake completes; no error is left queued for the next
 * connection (the loop's thread shares one error queue, which a leftover would poison).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_ctx.h"

#define FUZZ_NAME "fuzz_tls_record"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static SSL_CTX *ctx;

/* A self-signed P-256 certificate for the server, made in memory. */
static void setup(void)
{
    ctx = sl_tls_ctx_new();
    check(ctx != NULL, "sl_tls_ctx_new");
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    check(key && x, "key and certificate");
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz", -1, -1, 0);
    X509_set_issuer_name(x, n);
    check(X509_sign(x, key, EVP_sha256()) > 0, "X509_sign");
    check(SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_use_PrivateKey(ctx, key) == 1,
          "use certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) setup();
    if (size < 1) return 0;
    uint32_t rng = data[0] | 1u;
    data++;
    size--;
    SSL *ssl = SSL_new(ctx);
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    check(ssl && in && out, "SSL_new");
    BIO_set_mem_eof_return(in, -1); /* empty: "try again", as a non-blocking socket says */
    SSL_set_bio(ssl, in, out);
    SSL_set_accept_state(ssl);
    char buf[4096], sink[4096];
    bool failed = false;
    size_t pos = 0;
    while (pos < size && !failed) {
        size_t piece = 1 + rng_next(&rng) % 600;
        if (piece > size - pos) piece = size - pos;
        check(BIO_write(in, data + pos, (int)piece) == (int)piece, "BIO_write");
        pos += piece;
        for (;;) {
            int want = 1 + (int)(rng_next(&rng) % sizeof buf);
            int n = SSL_read(ssl, buf, want);
            if (n > 0) {
                check(n <= want, "SSL_read returned more than asked");
                check(SSL_is_init_finished(ssl), "application data before the handshake");
                continue;
            }
            int e = SSL_get_error(ssl, n);
            if (e == SSL_ERROR_WANT_READ) break;
            check(e != SSL_ERROR_WANT_WRITE, "memory BIO cannot be full");
            failed = true;
            break;
        }
        while (BIO_read(out, sink, sizeof sink) > 0) {
        }
    }
    if (failed) {
        ERR_clear_error(); /* as tls.c does after a failure */
        check(SSL_read(ssl, buf, sizeof buf) <= 0, "a failed connection returned data");
        ERR_clear_error();
    } else if (SSL_is_init_finished(ssl)) {
        SSL_shutdown(ssl);
        ERR_clear_error();
    }
    check(ERR_peek_error() == 0, "an error left in the queue");
    SSL_free(ssl);
    return 0;
}
