/* Defaults of every seekless SSL_CTX.
 *
 * Safe without configuration: only TLS 1.2 and 1.3 (OpenSSL 3's security level 1 would still
 * allow 1.0 and 1.1 if asked); Mozilla's "intermediate" cipher list (v5.7) for 1.2, forward
 * secret AEAD ciphers only, and its key exchange groups (X25519, P-256, P-384); renegotiation refused (SSL_OP_NO_RENEGOTIATION: a client asking gets
 * a no_renegotiation alert, and a TLS 1.2 ClientHello in the middle of a connection fails it);
 * compression off (CRIME). Session tickets stay on with OpenSSL's keys, made when the context
 * is. The modes make SSL_write behave like send() on a non-blocking socket: it returns after
 * each record written (partial writes), and a retry after WANT_WRITE may pass the same bytes
 * from a buffer that moved.
 */
#include "tls_ctx.h"

#include <stdio.h>
#include <string.h>

#define INTERMEDIATE_CIPHERS                                                                   \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"   \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"

#define INTERMEDIATE_GROUPS "X25519:prime256v1:secp384r1"

bool sl_tls_kernel_ktls(void)
{
#ifdef OPENSSL_NO_KTLS
    return false;
#else
    static int known = -1; /* a benign race at start-up: every caller finds the same */
    if (known >= 0) return known;
    char buf[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    bool yes = false;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
        if (!strcmp(t, "tls")) yes = true;
    known = yes;
    return yes;
#endif
}

SSL_CTX *sl_tls_ctx_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* Only when the kernel has it: otherwise OpenSSL would try setsockopt(TCP_ULP) on every
     * handshake and fail. */
    if (sl_tls_kernel_ktls()) SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
    /* 10,000 idle keep-alive connections stay cheap: their buffers go back while idle. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    /* Read as much as the socket has into OpenSSL's buffer, not a 5-byte record header and then
     * its body: half the read() calls. The connection never infers "drained" from a short read
     * over TLS (only WANT_READ clears rd_ready), so bytes OpenSSL holds are never forgotten. */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* Sessions resume by ticket only (TLS 1.2 and 1.3; the ticket keys are the context's, so any
     * loop resumes any session), as lighttpd does by default: no server-side session cache that
     * every loop's full handshake would lock, insert into and periodically sweep. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF | SSL_SESS_CACHE_NO_AUTO_CLEAR |
                                            SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_set_dh_auto(ctx, 1);
    /* Mozilla's intermediate curves; OpenSSL would also offer X448 and secp521r1. */
    if (!SSL_CTX_set1_groups_list(ctx, INTERMEDIATE_GROUPS) ||
        !SSL_CTX_set_cipher_list(ctx, INTERMEDIATE_CIPHERS)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}
