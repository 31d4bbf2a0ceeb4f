/* The defaults every seekless SSL_CTX starts from, apart from the config (tls.c adds the
 * certificate and the ssl.* keys' settings over them). A file of its own so that the TLS fuzz
 * target (tests/fuzz/fuzz_tls_record.c) runs the very settings the server does. */
#ifndef SL_TLS_CTX_H
#define SL_TLS_CTX_H

#include <stdbool.h>

#include <openssl/ssl.h>

/* A server SSL_CTX with seekless's defaults: TLS 1.2 and 1.3 only, Mozilla's "intermediate"
 * TLS 1.2 ciphers (TLS 1.3's suites are OpenSSL's defaults, the same list), no renegotiation,
 * no compression, partial writes with a moving buffer, buffers released while idle, automatic
 * DHE parameters, kTLS asked for when the kernel offers it. NULL when OpenSSL fails (its error
 * queue says why). */
SSL_CTX *sl_tls_ctx_new(void);

/* Whether the kernel offers TLS to sockets (tcp_available_ulp lists "tls") and OpenSSL was
 * built with kTLS: files can then go out with SSL_sendfile. Read once. */
bool sl_tls_kernel_ktls(void);

#endif
