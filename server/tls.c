/* HTTPS with OpenSSL 3: certificates and contexts at start-up, a non-blocking TLS transport
 * under the connection, and lighttpd's ssl.* keys.
 *
 * Keys. ssl.pemfile is loaded when the config is (start-up and -t, as the starting user, before
 * privileges are dropped): the certificate, the chain behind it in the same file and the private
 * key (from ssl.privkey of the same block, else from the pemfile), checked to belong together.
 * ssl.openssl.ssl-conf-cmd is tried on a scratch SSL_CTX at load, so a misspelt command or value
 * is a -t error, not a surprise at the first handshake. The lighttpd ssl.* keys seekless does not
 * implement are declared here too and refused with a reason, never ignored.
 *
 * Contexts. sl_tls_setup makes one SSL_CTX per TLS listener, from that listener's block: safe
 * defaults first (TLS 1.2 and 1.3 only, Mozilla's "intermediate" TLS 1.2 ciphers, no
 * renegotiation, no compression), then the ssl-conf-cmd commands over them. The SSL_CTX is shared
 * by every loop (OpenSSL locks what it must); so are its session ticket keys, which OpenSSL makes
 * at random when the context is made: a ticket issued by one loop resumes on any other, and a
 * graceful restart (a new process) makes new keys, so resumption across it falls back to a full
 * handshake. SNI: where $HTTP["host"] blocks set their own ssl.pemfile, the servername callback
 * evaluates the conditions for the name the client sent (as a request for that host on that
 * listener would) and puts that block's certificate and key on the connection's SSL.
 *
 * Client certificates (ssl.verifyclient.*, ssl.ca-dn-file, ssl.ca-crl-file) are settings of the
 * listener's SSL_CTX, as lighttpd sets them: a verify store of its own (ssl.ca-file's CAs and the
 * CRLs; the context's store, which completes the server's chain, stays free of CRL checks), the
 * CA names of the CertificateRequest, the verify mode and depth, and a callback for lighttpd's
 * extra checks (depth, the issuer among ssl.ca-dn-file's names, enforce). Right after the
 * handshake the connection's SSL_CLIENT_* variables are made once (sl_tls_client_env) from the
 * verify result and the peer's certificate, which a resumed session keeps; every request on
 * the connection hands them to FastCGI and takes the user from them (uri_raw). Being made once
 * per connection is why these keys are refused below a $SERVER["socket"] block: a host block
 * (SNI) or a request's condition cannot change them.
 *
 * Transport. The connection's socket stays registered edge-triggered for both directions; what
 * OpenSSL wants (SSL_ERROR_WANT_READ / WANT_WRITE) becomes the connection's rd_ready / wr_ready
 * going false, and a read that must write first (a handshake message, a session ticket) waits
 * for writability instead (and the opposite for writes). The handshake is driven by the first
 * SSL_read of the request head, so its deadline is the read-idle timeout. Garbage, a failed
 * handshake or a renegotiation attempt fails that SSL_read: the connection closes, nothing else.
 * Writes behave like send() on a non-blocking socket (partial writes, one record each); a small
 * write that something follows (a response head) is staged in a 16 KiB buffer of the connection
 * and leaves in one record with the first bytes of the body; reads use read-ahead.
 * File bodies go through the network backend with a sink (netback.h): with kTLS the kernel
 * encrypts and SSL_sendfile sends hot files from the page cache; without it (this kernel's
 * case when tcp_available_ulp has no "tls") file bytes are read into the xfer's buffers (hot ones
 * on the loop, cold ones by the backend off the loop) and SSL_write'n.
 */
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "addr.h"
#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "loop.h"
#include "path.h"
#include "server.h"
#include "status.h"
#include "tls_bio.h"
#include "tls_ctx.h"

/* A certificate with its chain and key, loaded from ssl.pemfile (and ssl.privkey). */
typedef struct tls_cert {
    X509 *cert;
    EVP_PKEY *key;
    STACK_OF(X509) *chain;
} tls_cert;

/* An OCSP response to staple (ssl.stapling-file), DER. */
typedef struct tls_staple {
    unsigned char *der;
    long len;
} tls_staple;

/* The module's part of a conf block. */
typedef struct tls_conf {
    bool engine;                /* ssl.engine */
    const tls_cert *pemfile;    /* ssl.pemfile, loaded with its key */
    const char *privkey;        /* ssl.privkey (read by ssl.pemfile's prepare) */
    const char *ca_file;        /* ssl.ca-file: CAs to complete the certificate's chain with,
                                 * and the ones client certificates are verified against */
    sl_kvlist conf_cmd;         /* ssl.openssl.ssl-conf-cmd */
    const tls_staple *staple;   /* ssl.stapling-file */
    bool verify;                /* ssl.verifyclient.activate: ask for a client certificate */
    bool enforce;               /* ssl.verifyclient.enforce (default on): none, or a bad one,
                                 * fails the handshake */
    long depth;                 /* ssl.verifyclient.depth (default 9): CAs above the client's */
    const char *username;       /* ssl.verifyclient.username: the variable REMOTE_USER takes */
    bool exportcert;            /* ssl.verifyclient.exportcert: SSL_CLIENT_CERT */
    const STACK_OF(X509_NAME) *ca_dn; /* ssl.ca-dn-file: the CA names asked for */
    const STACK_OF(X509_CRL) *crls;   /* ssl.ca-crl-file */
    const void *refused;        /* the keys refused at load store nothing */
} tls_conf;
#define SL_KEY_CONF tls_conf

/* What a listener that asks for client certificates does with them (copied from its block). */
typedef struct tls_verify {
    bool on, enforce, exportcert;
    int depth;
    const char *username;
    const STACK_OF(X509_NAME) *ca_dn; /* NULL: any issuer ssl.ca-file trusts */
} tls_verify;

/* The client certificate's variables of a connection, made once after its handshake. */
typedef struct tls_env {
    sl_kvlist kv;       /* kv.k / kv.v are k / v */
    char **k, **v;
    size_t cap;
    const char *user;   /* ssl.verifyclient.username's value (one of v), or NULL */
} tls_env;

/* A TLS connection's state (one per connection on a TLS listener). */
typedef struct sl_tls_conn {
    SSL *ssl;
    tls_env *env;       /* on a listener that asks for client certificates, once up */
    bool up;            /* the handshake completed */
    bool dead;          /* a fatal error: no close_notify, no more calls but SSL_free */
    bool shut;          /* close_notify was sent */
    bool rd_wants_wr;   /* the last SSL_read wanted to write (WANT_WRITE) */
    bool wr_wants_rd;   /* the last SSL_write wanted to read (WANT_READ) */
    bool gathered;      /* writes go to the gathering BIO (no kTLS) */
    unsigned char tickets; /* TLS 1.3 session tickets owed: sent with the first response */
    /* Small writes gathered into one record: a response head waits here for the first bytes
     * of its body, so a small file leaves in one record and one write() instead of two. Ours,
     * so a retry after WANT_WRITE passes the same bytes as OpenSSL requires. */
    char *stage;        /* STAGE_CAP bytes while anything is staged, else NULL */
    size_t staged;
    bool stage_sealed;  /* being written: nothing more may be added until it is out */
} sl_tls_conn;

/* One TLS record's worth of plaintext. */
#define STAGE_CAP 16384

/* The process's TLS state (srv->tls). */
typedef struct sl_tls {
    SSL_CTX *ctx[SL_MAX_LISTENERS]; /* NULL: the listener is plain */
    const tls_cert *cert[SL_MAX_LISTENERS]; /* the listener's default certificate */
    bool sni[SL_MAX_LISTENERS];     /* host blocks may pick another certificate */
    tls_verify vfy[SL_MAX_LISTENERS];
} sl_tls;

/* Counters for the status page, summed over loops (relaxed atomics: one add per handshake). */
static atomic_ulong n_handshakes, n_failed, n_ktls, n_buffered, n_sni;

extern sl_module sl_mod_tls;

static const tls_conf *tls_of(const sl_conf *b)
{
    return SL_MODCONF(b, sl_mod_tls, tls_conf);
}

/* OpenSSL's first queued error as text (and the queue emptied), for messages. */
static const char *ssl_err(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        snprintf(buf, len, "unknown error");
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

/* ---- keys ---- */

static void cert_free(void *p)
{
    tls_cert *c = p;
    if (!c) return;
    X509_free(c->cert);
    EVP_PKEY_free(c->key);
    sk_X509_pop_free(c->chain, X509_free);
    free(c);
}

/* A readable file, or -1 with "key path: reason" in ctx->err. */
static BIO *open_file(const char *key, const char *path, const sl_key_ctx *ctx)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(ctx->err, ctx->errlen, "%s %s: %s", key, path, strerror(errno));
        return NULL;
    }
    BIO *b = BIO_new_fp(f, BIO_CLOSE);
    if (!b) {
        fclose(f);
        snprintf(ctx->err, ctx->errlen, "%s %s: out of memory", key, path);
    }
    return b;
}

/* The first private key in path, or NULL (a message in ctx->err unless quiet). */
static EVP_PKEY *read_key(const char *key, const char *path, const sl_key_ctx *ctx, bool quiet)
{
    BIO *b = open_file(key, path, ctx);
    if (!b) return NULL;
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    if (!k && !quiet) {
        char e[256];
        snprintf(ctx->err, ctx->errlen, "%s %s: no PEM private key (%s)", key, path,
                 ssl_err(e, sizeof e));
    }
    ERR_clear_error();
    return k;
}

/* The absolute path of the same block's `key` (a string), or NULL when the block sets none. */
static char *block_path(const sl_key_ctx *ctx, const char *key)
{
    const sl_cblock *b = ctx->cond;
    for (size_t i = 0; b && i < b->n_assigns; i++)
        if (!strcmp(b->assigns[i].key, key) && b->assigns[i].val->type == SL_CV_STRING)
            return sl_key_abs_path(ctx, b->assigns[i].val->str);
    return NULL;
}

static int prep_pemfile(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_STRING) {
        snprintf(ctx->err, ctx->errlen, "'ssl.pemfile' must be a string");
        return -1;
    }
    char *path = sl_key_abs_path(ctx, v->str);
    char *kpath = block_path(ctx, "ssl.privkey");
    tls_cert *c = calloc(1, sizeof *c);
    int r = -1;
    if (!path || !c) {
        snprintf(ctx->err, ctx->errlen, "out of memory");
        goto out;
    }
    BIO *b = open_file("ssl.pemfile", path, ctx);
    if (!b) goto out;
    c->cert = PEM_read_bio_X509_AUX(b, NULL, NULL, NULL);
    if (!c->cert) {
        char e[256];
        snprintf(ctx->err, ctx->errlen, "ssl.pemfile %s: no PEM certificate (%s)", path,
                 ssl_err(e, sizeof e));
        BIO_free(b);
        goto out;
    }
    /* The chain: every further certificate in the file, in order. */
    c->chain = sk_X509_new_null();
    X509 *x;
    while (c->chain && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        if (!sk_X509_push(c->chain, x)) X509_free(x);
    ERR_clear_error(); /* the end of the file ends the loop with an error queued */
    BIO_free(b);
    c->key = read_key(kpath ? "ssl.privkey" : "ssl.pemfile", kpath ? kpath : path, ctx, false);
    if (!c->key) {
        if (!kpath)
            snprintf(ctx->err, ctx->errlen,
                     "ssl.pemfile %s holds no private key, and the block sets no ssl.privkey",
                     path);
        goto out;
    }
    if (X509_check_private_key(c->cert, c->key) != 1) {
        ERR_clear_error();
        snprintf(ctx->err, ctx->errlen, "ssl.privkey %s does not match the certificate in "
                 "ssl.pemfile %s", kpath ? kpath : path, path);
        goto out;
    }
    *out = c;
    c = NULL;
    r = 0;
out:
    cert_free(c);
    free(path);
    free(kpath);
    return r;
}

/* The file a key names (v, relative to the config file): opened, with its absolute path in *path
 * (the caller frees both), or NULL with a message. */
static BIO *key_file(const sl_cval *v, const sl_key_ctx *ctx, char **path)
{
    if (!(*path = sl_key_abs_path(ctx, v->str))) {
        snprintf(ctx->err, ctx->errlen, "out of memory");
        return NULL;
    }
    return open_file(ctx->assign->key, *path, ctx);
}

/* ssl.privkey is read with ssl.pemfile (whose prepare needs both); here only its own faults. */
static int prep_privkey(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    char *path = sl_key_abs_path(ctx, v->str);
    EVP_PKEY *k = path ? read_key("ssl.privkey", path, ctx, false) : NULL;
    int r = k ? 0 : -1;
    if (!path) snprintf(ctx->err, ctx->errlen, "out of memory");
    EVP_PKEY_free(k);
    free(path);
    char *pem = r == 0 ? block_path(ctx, "ssl.pemfile") : NULL;
    if (r == 0 && !pem) {
        snprintf(ctx->err, ctx->errlen, "ssl.privkey is set without ssl.pemfile in the same "
                 "block");
        r = -1;
    }
    free(pem);
    return r;
}

static int prep_ca_file(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    char *path;
    BIO *b = key_file(v, ctx, &path);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    int r = x ? 0 : -1;
    if (b && !x) snprintf(ctx->err, ctx->errlen, "ssl.ca-file %s: no PEM certificate", path);
    X509_free(x);
    BIO_free(b);
    ERR_clear_error();
    free(path);
    return r;
}

/* The protocol keys belong to a listener (one SSL_CTX each): the top level or $SERVER["socket"].
 * So do the client certificate keys: lighttpd also takes them in $HTTP["host"] blocks (SNI) and
 * even in per-request conditions (username, exportcert), where seekless refuses them: the
 * variables are made once per connection, from the settings its handshake ran with. */
static int listener_level(const char *key, const sl_key_ctx *ctx)
{
    bool client = !strncmp(key, "ssl.verifyclient.", 17) || !strcmp(key, "ssl.ca-dn-file") ||
                  !strcmp(key, "ssl.ca-crl-file");
    for (const sl_cblock *b = ctx->cond; b; b = b->parent) {
        if (b->field != SL_COND_NONE && b->field != SL_COND_SOCKET) {
            snprintf(ctx->err, ctx->errlen,
                     "%s belongs to a listener: set it at the top level or in a "
                     "$SERVER[\"socket\"] block, not inside other conditions (only ssl.pemfile "
                     "and ssl.privkey may differ per $HTTP[\"host\"], through SNI)%s",
                     key, client ? "; seekless asks for and verifies client certificates per "
                                   "listener, not per host name or request" : "");
            return -1;
        }
    }
    return 0;
}

/* ssl.engine and the flags of client verification: where they are set is all to check. */
static int prep_listener(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    return listener_level(ctx->assign->key, ctx);
}

static int prep_depth(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->type != SL_CV_INT || v->num > 100) {
        snprintf(ctx->err, ctx->errlen, "'ssl.verifyclient.depth' must be a number from 0 to 100 "
                 "(the CAs allowed above the client's certificate)");
        return -1;
    }
    return listener_level("ssl.verifyclient.depth", ctx);
}

/* A listener's key naming a file (ssl.ca-dn-file, ssl.ca-crl-file, ssl.stapling-file): the file
 * opened and its absolute path in *path (the caller frees both), or NULL with a message. */
static BIO *listener_file(const sl_cval *v, const sl_key_ctx *ctx, char **path)
{
    const char *key = ctx->assign->key;
    *path = NULL;
    if (v->type != SL_CV_STRING) {
        snprintf(ctx->err, ctx->errlen, "'%s' must be a string", key);
        return NULL;
    }
    if (listener_level(key, ctx) < 0) return NULL;
    return key_file(v, ctx, path);
}

static void names_free(void *p)
{
    sk_X509_NAME_pop_free(p, X509_NAME_free);
}

/* ssl.ca-dn-file: the subject names of the CAs in it, sent in the CertificateRequest. */
static int prep_ca_dn(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *path;
    BIO *b = listener_file(v, ctx, &path); /* opened for the reason SSL_load_client_CA_file hides */
    STACK_OF(X509_NAME) *n = b ? SSL_load_client_CA_file(path) : NULL;
    BIO_free(b);
    ERR_clear_error();
    if (b && !n) snprintf(ctx->err, ctx->errlen, "ssl.ca-dn-file %s: no PEM certificate", path);
    free(path);
    *out = n;
    return n ? 0 : -1;
}

static void crls_free(void *p)
{
    sk_X509_CRL_pop_free(p, X509_CRL_free);
}

/* ssl.ca-crl-file: every PEM CRL in the file, checked for the whole client chain. */
static int prep_crl(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *path;
    BIO *b = listener_file(v, ctx, &path);
    STACK_OF(X509_CRL) *l = b ? sk_X509_CRL_new_null() : NULL;
    X509_CRL *x;
    while (l && (x = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL)))
        if (!sk_X509_CRL_push(l, x)) X509_CRL_free(x);
    ERR_clear_error(); /* the end of the file ends the loop with an error queued */
    BIO_free(b);
    int r = l && sk_X509_CRL_num(l) > 0 ? 0 : -1;
    if (b && r < 0)
        snprintf(ctx->err, ctx->errlen, "ssl.ca-crl-file %s: no PEM CRL (X509 CRL)", path);
    if (r < 0) crls_free(l);
    else *out = l;
    free(path);
    return r;
}

/* Apply ssl.openssl.ssl-conf-cmd to ctx. 0, or -1 with a message in err. */
static int apply_conf_cmd(SSL_CTX *ctx, const sl_kvlist *l, char *err, size_t errlen)
{
    if (!l->n) return 0;
    SSL_CONF_CTX *cc = SSL_CONF_CTX_new();
    if (!cc) return snprintf(err, errlen, "out of memory"), -1;
    SSL_CONF_CTX_set_flags(cc, SSL_CONF_FLAG_FILE | SSL_CONF_FLAG_SERVER |
                                   SSL_CONF_FLAG_SHOW_ERRORS);
    SSL_CONF_CTX_set_ssl_ctx(cc, ctx);
    int r = 0;
    for (size_t i = 0; i < l->n && r == 0; i++) {
        int k = SSL_CONF_cmd(cc, l->k[i], l->v[i]);
        if (k == -2) {
            snprintf(err, errlen, "ssl.openssl.ssl-conf-cmd: unknown command \"%s\" (OpenSSL's "
                     "SSL_CONF_cmd names: MinProtocol, MaxProtocol, CipherString, "
                     "Ciphersuites, Options, Groups, ...)", l->k[i]);
            r = -1;
        } else if (k <= 0) {
            char e[256];
            snprintf(err, errlen, "ssl.openssl.ssl-conf-cmd: \"%s\" => \"%s\": %s", l->k[i],
                     l->v[i], ssl_err(e, sizeof e));
            r = -1;
        }
    }
    if (r == 0 && !SSL_CONF_CTX_finish(cc)) {
        char e[256];
        snprintf(err, errlen, "ssl.openssl.ssl-conf-cmd: %s", ssl_err(e, sizeof e));
        r = -1;
    }
    SSL_CONF_CTX_free(cc);
    ERR_clear_error();
    return r;
}

static int prep_conf_cmd(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (listener_level("ssl.openssl.ssl-conf-cmd", ctx) < 0) return -1;
    /* Tried on a scratch context, so a mistake is a -t error. */
    SSL_CTX *t = SSL_CTX_new(TLS_server_method());
    if (!t) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    const char **k = calloc(v->n_items + 1, sizeof *k), **vv = calloc(v->n_items + 1, sizeof *vv);
    int r = -1;
    if (k && vv) {
        for (size_t i = 0; i < v->n_items; i++) {
            k[i] = v->items[i].key;
            vv[i] = v->items[i].val->str;
        }
        sl_kvlist l = {k, vv, v->n_items};
        r = apply_conf_cmd(t, &l, ctx->err, ctx->errlen);
    }
    free(k);
    free(vv);
    SSL_CTX_free(t);
    return r;
}

static void staple_free(void *p)
{
    tls_staple *s = p;
    if (s) OPENSSL_free(s->der);
    free(s);
}

/* ssl.stapling-file: a DER OCSP response, read at load and sent to clients that ask for it. */
static int prep_stapling(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *path;
    BIO *b = listener_file(v, ctx, &path);
    int r = -1;
    if (b) {
        OCSP_RESPONSE *resp = d2i_OCSP_RESPONSE_bio(b, NULL);
        tls_staple *s = calloc(1, sizeof *s);
        if (!resp) {
            snprintf(ctx->err, ctx->errlen, "ssl.stapling-file %s: not a DER OCSP response",
                     path);
        } else if (s && (s->len = i2d_OCSP_RESPONSE(resp, &s->der)) > 0) {
            *out = s;
            s = NULL;
            r = 0;
        } else {
            snprintf(ctx->err, ctx->errlen, "out of memory");
        }
        staple_free(s);
        OCSP_RESPONSE_free(resp);
        BIO_free(b);
        ERR_clear_error();
    }
    free(path);
    return r;
}

/* lighttpd's ssl.* keys seekless does not implement: refused with what to do instead. */
static const struct {
    const char *key, *why;
} refused_keys[] = {
    {"ssl.cipher-list", "use ssl.openssl.ssl-conf-cmd = (\"CipherString\" => \"...\")"},
    {"ssl.honor-cipher-order", "use ssl.openssl.ssl-conf-cmd = (\"Options\" => "
                               "\"ServerPreference\")"},
    {"ssl.dh-file", "DHE parameters are OpenSSL's built-in ones (RFC 7919 groups)"},
    {"ssl.ec-curve", "use ssl.openssl.ssl-conf-cmd = (\"Groups\" => \"...\")"},
    {"ssl.use-sslv2", "SSLv2 is never offered"},
    {"ssl.use-sslv3", "SSLv3 is never offered"},
    {"ssl.use-compression", "TLS compression is never offered (CRIME)"},
    {"ssl.disable-client-renegotiation", "client renegotiation is always refused"},
    {"ssl.empty-fragments", "TLS 1.0 is never offered"},
    {"ssl.read-ahead", "seekless decides read-ahead itself"},
    {"ssl.stek-file", "session ticket keys are OpenSSL's own, made at start-up"},
    {"ssl.acme-tls-1", "ACME tls-alpn-01 is not implemented"},
    {"ssl.message", "not implemented"},
    {"ssl.openssl.ssl-conf-cmd-file", "not implemented"},
    {NULL, NULL},
};

static int prep_refused(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    const char *key = ctx->assign->key;
    for (size_t i = 0; refused_keys[i].key; i++)
        if (!strcmp(refused_keys[i].key, key))
            snprintf(ctx->err, ctx->errlen, "%s is not supported by seekless: %s", key,
                     refused_keys[i].why);
    return -1;
}

/* ---- contexts ---- */

const char *sl_tls_file_path(void)
{
    return sl_tls_kernel_ktls() ? "ktls-sendfile" : "buffered-ssl-write";
}

void sl_tls_print_features(void)
{
    printf("tls: %s\n", OpenSSL_version(OPENSSL_VERSION));
    printf("tls-file-path: %s (%s)\n", sl_tls_file_path(),
           sl_tls_kernel_ktls()
               ? "kernel TLS: files go out with SSL_sendfile from the page cache"
               : "no kernel TLS (tcp_available_ulp lists no tls): file bytes are read into "
                 "buffers, cold ones off the loop, and SSL_write'n");
}

static int staple_cb(SSL *ssl, void *arg)
{
    const tls_staple *s = arg;
    unsigned char *copy = OPENSSL_memdup(s->der, (size_t)s->len);
    if (!copy) return SSL_TLSEXT_ERR_NOACK;
    if (!SSL_set_tlsext_status_ocsp_resp(ssl, copy, s->len)) {
        OPENSSL_free(copy);
        return SSL_TLSEXT_ERR_NOACK;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* SNI: the certificate the blocks for this host name on this listener choose. */
static int servername_cb(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    sl_conn *c = SSL_get_app_data(ssl);
    sl_server *srv = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!c || !name) return SSL_TLSEXT_ERR_OK;
    char host[256];
    if (sl_host_normalize(name, strlen(name), 443, host, sizeof host) < 0)
        return SSL_TLSEXT_ERR_OK; /* not a name we could match: the listener's certificate */
    const sl_conf_set *cs = srv->cs;
    if (!c->conf_buf && !(c->conf_buf = malloc(cs->block_size))) return SSL_TLSEXT_ERR_OK;
    if (cs->n_captures && !c->caps && !(c->caps = calloc(cs->n_captures, sizeof *c->caps)))
        return SSL_TLSEXT_ERR_OK;
    sl_cond_input in = {.socket = cs->listen[c->listener].literal, .host = host, .url = "/",
                        .scheme = "https", .peer = (const struct sockaddr *)&c->peer};
    const sl_conf *b = sl_conf_for_request(cs, c->listener, &in, c->conf_buf, c->caps);
    const tls_cert *cert = tls_of(b)->pemfile;
    if (cert && cert != srv->tls->cert[c->listener]) {
        if (SSL_use_cert_and_key(ssl, cert->cert, cert->key, cert->chain, 1) != 1) {
            ERR_clear_error();
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        atomic_fetch_add_explicit(&n_sni, 1, memory_order_relaxed);
    }
    return SSL_TLSEXT_ERR_OK;
}

/* A client certificate's chain being verified (lighttpd's checks over OpenSSL's): a chain with
 * more CAs than ssl.verifyclient.depth fails (the context's own limit is one more, so that this
 * sees the certificate past it and names the fault), and with ssl.ca-dn-file the client's
 * certificate must be issued by one of the CAs named there. Without enforce every fault is let
 * through: the handshake completes and SSL_CLIENT_VERIFY says FAILED. */
static int verify_cb(int ok, X509_STORE_CTX *x)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    const sl_conn *c = ssl ? SSL_get_app_data(ssl) : NULL;
    if (!c) return ok;
    const tls_verify *v = &c->loop->srv->tls->vfy[c->listener];
    int depth = X509_STORE_CTX_get_error_depth(x);
    const X509 *cert = X509_STORE_CTX_get_current_cert(x);
    if (depth > v->depth) {
        ok = 0;
        X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_CHAIN_TOO_LONG);
    }
    if (ok && depth == 0 && v->ca_dn && cert) {
        const X509_NAME *issuer = X509_get_issuer_name(cert);
        bool named = false;
        for (int i = 0; i < sk_X509_NAME_num(v->ca_dn) && !named; i++)
            named = !X509_NAME_cmp(sk_X509_NAME_value(v->ca_dn, i), issuer);
        if (!named) {
            ok = 0;
            X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
        }
    }
    if (ok) return 1;
    char who[64] = "-", subject[256] = "-";
    sl_addr_str((const struct sockaddr *)&c->peer, who, sizeof who, NULL);
    if (cert) X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
    int e = X509_STORE_CTX_get_error(x);
    sl_log("TLS client %s: certificate verify error %d (%s) at depth %d, subject %s%s", who, e,
           X509_verify_cert_error_string(e), depth, subject,
           v->enforce ? "" : " (let through: ssl.verifyclient.enforce is disabled)");
    return !v->enforce;
}

/* Ask for and verify client certificates on ctx, as tc says. 0, or -1 (OpenSSL's queue). */
static int client_verify(SSL_CTX *ctx, const tls_conf *tc)
{
    X509_STORE *st = X509_STORE_new();
    bool ok = st && X509_STORE_load_file(st, tc->ca_file);
    for (int i = 0; ok && tc->crls && i < sk_X509_CRL_num(tc->crls); i++)
        ok = X509_STORE_add_crl(st, sk_X509_CRL_value(tc->crls, i));
    /* A revoked certificate fails, and so does one whose CA has no CRL in the file. */
    if (ok && tc->crls) ok = X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK |
                                                          X509_V_FLAG_CRL_CHECK_ALL);
    /* Its own store: ssl.ca-file also completes the server's chain (the context's store),
     * which must not need CRLs. */
    ok = ok && SSL_CTX_set1_verify_cert_store(ctx, st);
    X509_STORE_free(st);
    STACK_OF(X509_NAME) *names =
        !ok ? NULL : tc->ca_dn ? SSL_dup_CA_list(tc->ca_dn) : SSL_load_client_CA_file(tc->ca_file);
    if (!names) return -1;
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (tc->enforce ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                       verify_cb);
    SSL_CTX_set_verify_depth(ctx, (int)tc->depth + 1);
    /* OpenSSL resumes no session without one when it verifies peers (and fails the handshake). */
    static const unsigned char sid_ctx[] = "seekless-client-verify";
    return SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1) ? 0 : -1;
}

/* ALPN (RFC 7301): "h2" when HTTP/2 is on (server.h2proto) and the client offers it, else
 * "http/1.1"; a client offering neither gets no ALPN answer (lighttpd's choice too), not a
 * no_application_protocol alert. arg: non-NULL when h2 may be chosen. */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1", h1[] = "\x08http/1.1";
    const unsigned char *prefs = arg ? both : h1;
    unsigned int plen = arg ? sizeof both - 1 : sizeof h1 - 1;
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, prefs, plen, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

bool sl_tls_alpn_h2(const sl_conn *c)
{
    const unsigned char *p;
    unsigned int n;
    SSL_get0_alpn_selected(c->tls->ssl, &p, &n);
    return n == 2 && !memcmp(p, "h2", 2);
}

/* The SSL_CTX of a listener whose block is tc. NULL with a message in err. */
static SSL_CTX *make_ctx(sl_server *srv, const tls_conf *tc, bool sni, char *err, size_t errlen)
{
    char e[256];
    SSL_CTX *ctx = sl_tls_ctx_new(); /* the defaults (tls_ctx.c), then the config over them */
    if (!ctx) return snprintf(err, errlen, "TLS context: %s", ssl_err(e, sizeof e)), NULL;
    if (SSL_CTX_use_cert_and_key(ctx, tc->pemfile->cert, tc->pemfile->key, tc->pemfile->chain,
                                 1) != 1)
        goto fail;
    if (tc->ca_file && !SSL_CTX_load_verify_locations(ctx, tc->ca_file, NULL)) goto fail;
    if (tc->verify && client_verify(ctx, tc) < 0) goto fail;
    if (apply_conf_cmd(ctx, &tc->conf_cmd, err, errlen) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (tc->staple) {
        SSL_CTX_set_tlsext_status_cb(ctx, staple_cb);
        SSL_CTX_set_tlsext_status_arg(ctx, (void *)tc->staple);
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, sl_core_h2proto(srv->global) ? srv : NULL);
    if (sni) {
        SSL_CTX_set_tlsext_servername_callback(ctx, servername_cb);
        SSL_CTX_set_tlsext_servername_arg(ctx, srv);
    }
    return ctx;
fail:
    snprintf(err, errlen, "TLS context: %s", ssl_err(e, sizeof e));
    SSL_CTX_free(ctx);
    return NULL;
}

/* Does any block below b (not a $SERVER["socket"] one) set ssl.pemfile? Then SNI may pick it. */
static bool host_certs(const sl_cblock *b)
{
    if (b->field != SL_COND_NONE && b->field != SL_COND_SOCKET)
        for (size_t i = 0; i < b->n_assigns; i++)
            if (!strcmp(b->assigns[i].key, "ssl.pemfile")) return true;
    for (size_t i = 0; i < b->n_children; i++)
        for (const sl_cblock *x = b->children[i]; x; x = x->else_next)
            if (host_certs(x)) return true;
    return false;
}

int sl_tls_setup(sl_server *srv, char *err, size_t errlen)
{
    sl_conf_set *cs = srv->cs;
    sl_tls *t = NULL;
    sl_conf *buf = malloc(cs->block_size);
    if (!buf) return snprintf(err, errlen, "out of memory"), -1;
    bool sni = host_certs(cs->tree->root);
    for (size_t l = 0; l < cs->n_listen; l++) {
        /* The listener's block: what a request on it sees before its host is known. */
        sl_cond_input in = {.socket = cs->listen[l].literal, .scheme = "https"};
        const tls_conf *tc = tls_of(sl_conf_for_request(cs, (unsigned)l, &in, buf, NULL));
        if (!tc->engine) continue;
        if (!tc->pemfile) {
            snprintf(err, errlen, "ssl.engine is enabled for %s but no ssl.pemfile is set",
                     cs->listen[l].literal);
            goto fail;
        }
        if (!t && !(t = calloc(1, sizeof *t))) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        t->cert[l] = tc->pemfile;
        t->sni[l] = sni;
        if (tc->verify && !tc->ca_file) {
            snprintf(err, errlen, "ssl.verifyclient.activate is enabled for %s but no ssl.ca-file "
                     "is set (the CAs client certificates are verified against)",
                     cs->listen[l].literal);
            goto fail;
        }
        t->vfy[l] = (tls_verify){.on = tc->verify, .enforce = tc->enforce,
                                 .exportcert = tc->exportcert, .depth = (int)tc->depth,
                                 .username = tc->username, .ca_dn = tc->ca_dn};
        if (!(t->ctx[l] = make_ctx(srv, tc, sni, err, errlen))) goto fail;
    }
    free(buf);
    srv->tls = t;
    return 0;
fail:
    free(buf);
    srv->tls = t;
    sl_tls_free(srv);
    return -1;
}

void sl_tls_free(sl_server *srv)
{
    sl_tls *t = srv->tls;
    if (!t) return;
    for (size_t l = 0; l < SL_MAX_LISTENERS; l++) SSL_CTX_free(t->ctx[l]);
    free(t);
    srv->tls = NULL;
}

bool sl_tls_listener(const sl_server *srv, unsigned listener)
{
    return srv->tls && listener < SL_MAX_LISTENERS && srv->tls->ctx[listener];
}

/* ---- the transport ---- */

static ssize_t sink_write(void *owner, const void *buf, size_t len)
{
    return sl_tls_send(owner, buf, len);
}

#ifndef OPENSSL_NO_KTLS
static ssize_t sink_sendfile(void *owner, int fd, off_t off, size_t len)
{
    sl_conn *c = owner;
    sl_tls_conn *t = c->tls;
    int r = sl_tls_flush(c); /* a staged head goes before the file's bytes */
    if (r < 0) return r;
    ossl_ssize_t n = SSL_sendfile(t->ssl, fd, off, len, 0);
    if (n > 0) return n;
    int e = SSL_get_error(t->ssl, (int)n);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_WRITE) {
        c->wr_ready = false;
        return -EAGAIN;
    }
    t->dead = true;
    return errno ? -errno : -EIO;
}
#endif

static const sl_xfer_sink sink_buffered = {.write = sink_write, .name = "buffered-ssl-write"};
#ifndef OPENSSL_NO_KTLS
static const sl_xfer_sink sink_ktls = {.write = sink_write, .sendfile = sink_sendfile,
                                       .name = "ktls-sendfile"};
#endif

static void env_free(tls_env *e)
{
    if (!e) return;
    for (size_t i = 0; i < e->kv.n; i++) {
        free(e->k[i]);
        free(e->v[i]);
    }
    free(e->k);
    free(e->v);
    free(e);
}

/* Set name to len bytes of val (a later field of the same name wins, as in lighttpd). 0 or
 * -ENOMEM. */
static int env_set(tls_env *e, const char *name, const char *val, size_t len)
{
    char *v = strndup(val, len);
    if (!v) return -ENOMEM;
    for (size_t i = 0; i < e->kv.n; i++)
        if (!strcmp(e->k[i], name)) {
            free(e->v[i]);
            e->v[i] = v;
            return 0;
        }
    if (e->kv.n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        char **k = realloc(e->k, cap * sizeof *k);
        if (k) e->k = k;
        char **vv = k ? realloc(e->v, cap * sizeof *vv) : NULL;
        if (!vv) return free(v), -ENOMEM;
        e->v = vv;
        e->cap = cap;
    }
    if (!(e->k[e->kv.n] = strdup(name))) return free(v), -ENOMEM;
    e->v[e->kv.n++] = v;
    e->kv.k = (const char *const *)e->k;
    e->kv.v = (const char *const *)e->v;
    return 0;
}

/* What a memory BIO holds, as the value of name. */
static int env_bio(tls_env *e, const char *name, BIO *b)
{
    char *p;
    long n = b ? BIO_get_mem_data(b, &p) : -1;
    return n < 0 ? -ENOMEM : env_set(e, name, p, (size_t)n);
}

/* The client certificate's variables, lighttpd's mod_openssl's names and values: the verify
 * result, and for a verified certificate its subject (one line, and each field), its serial
 * number in hex, the user (ssl.verifyclient.username) and the PEM (exportcert). */
static tls_env *client_env(SSL *ssl, const tls_verify *v)
{
    tls_env *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    long vr = SSL_get_verify_result(ssl);
    const X509 *x = SSL_get0_peer_certificate(ssl);
    char why[256] = "FAILED:"; /* lighttpd's text: OpenSSL's error string of the code */
    if (vr != X509_V_OK) ERR_error_string_n((unsigned long)vr, why + 7, sizeof why - 7);
    const char *verdict = vr != X509_V_OK ? why : x ? "SUCCESS" : "NONE";
    int r = env_set(e, "SSL_CLIENT_VERIFY", verdict, strlen(verdict));
    if (r || vr != X509_V_OK || !x) goto out;
    const X509_NAME *xn = X509_get_subject_name(x);
    BIO *b = BIO_new(BIO_s_mem());
    if (!r && b) X509_NAME_print_ex(b, xn, 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
    if (!r) r = env_bio(e, "SSL_CLIENT_S_DN", b);
    for (int i = 0; !r && i < X509_NAME_entry_count(xn); i++) {
        const X509_NAME_ENTRY *ne = X509_NAME_get_entry(xn, i);
        const char *sn = OBJ_nid2sn(OBJ_obj2nid(X509_NAME_ENTRY_get_object(ne)));
        const ASN1_STRING *d = X509_NAME_ENTRY_get_data(ne);
        char key[64];
        if (!sn || (size_t)snprintf(key, sizeof key, "SSL_CLIENT_S_DN_%s", sn) >= sizeof key)
            continue;
        r = env_set(e, key, (const char *)ASN1_STRING_get0_data(d),
                    (size_t)ASN1_STRING_length(d));
    }
    BIGNUM *bn = r ? NULL : ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    if (hex) r = env_set(e, "SSL_CLIENT_M_SERIAL", hex, strlen(hex));
    OPENSSL_free(hex);
    BN_free(bn);
    for (size_t i = 0; !r && v->username && i < e->kv.n; i++)
        if (!strcmp(e->k[i], v->username) && e->v[i][0]) e->user = e->v[i];
    if (!r && v->exportcert) {
        BIO_free(b);
        b = BIO_new(BIO_s_mem());
        r = b && PEM_write_bio_X509(b, x) ? env_bio(e, "SSL_CLIENT_CERT", b) : -ENOMEM;
    }
    BIO_free(b);
out:
    ERR_clear_error();
    if (r < 0) {
        env_free(e);
        return NULL;
    }
    /* Named as CGI variables, as lighttpd sends its environment: the username was looked up by
     * the field's own name (SSL_CLIENT_S_DN_emailAddress), the back end gets
     * SSL_CLIENT_S_DN_EMAILADDRESS (letters upper-cased, anything but digits then '_'). */
    for (size_t i = 0; i < e->kv.n; i++)
        for (char *p = e->k[i]; *p; p++)
            *p = *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : (*p >= 'A' && *p <= 'Z') ||
                                          (*p >= '0' && *p <= '9') ? *p : '_';
    return e;
}

int sl_tls_conn_start(sl_conn *c)
{
    sl_tls *tls = c->loop->srv->tls;
    sl_tls_conn *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->ssl = SSL_new(tls->ctx[c->listener]);
    bool ok = t->ssl != NULL;
    if (ok && sl_tls_kernel_ktls()) {
        ok = SSL_set_fd(t->ssl, c->fd); /* kTLS wants the socket BIO itself for writing */
    } else if (ok) {
        /* Records gathered into few sends (tls_bio.h); reads straight from the socket. */
        BIO *rb = BIO_new_socket(c->fd, BIO_NOCLOSE), *wb = sl_tls_gather_bio(c->fd);
        if (rb && wb) {
            SSL_set_bio(t->ssl, rb, wb);
            t->gathered = true;
            /* TLS 1.3 sends its session tickets after the handshake, each flushed on its own;
             * the client does not wait for them. Issued with the first response instead
             * (established(), ssl_write()): one send for tickets and response, not three. */
            SSL_set_num_tickets(t->ssl, 0);
        } else {
            BIO_free(rb);
            BIO_free(wb);
            ok = false;
        }
    }
    if (!ok) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_accept_state(t->ssl);
    SSL_set_app_data(t->ssl, c);
    c->tls = t;
    c->xfer.sink = &sink_buffered;
    return 0;
}

void sl_tls_conn_free(sl_conn *c)
{
    sl_tls_conn *t = c->tls;
    if (!t) return;
    free(t->stage);
    env_free(t->env);
    SSL_free(t->ssl);
    free(t);
    c->tls = NULL;
}

/* The handshake just completed: count it, make the client certificate's variables and choose
 * how files go out on this connection. */
static void established(sl_conn *c)
{
    sl_tls_conn *t = c->tls;
    t->up = true;
    /* As many as OpenSSL would have sent at once: the context's count (ssl-conf-cmd NumTickets
     * may change it), one after a resumption. */
    if (t->gathered && SSL_version(t->ssl) >= TLS1_3_VERSION) {
        size_t n = SSL_CTX_get_num_tickets(SSL_get_SSL_CTX(t->ssl));
        if (SSL_session_reused(t->ssl) && n > 1) n = 1;
        t->tickets = n > 255 ? 255 : (unsigned char)n;
    }
    const tls_verify *v = &c->loop->srv->tls->vfy[c->listener];
    /* Out of memory: no variables, as if the listener asked for no certificate (the back end
     * sees no SSL_CLIENT_VERIFY, so it cannot take a missing one for a verified one). */
    if (v->on) t->env = client_env(t->ssl, v);
    atomic_fetch_add_explicit(&n_handshakes, 1, memory_order_relaxed);
#ifndef OPENSSL_NO_KTLS
    if (BIO_get_ktls_send(SSL_get_wbio(t->ssl))) {
        c->xfer.sink = &sink_ktls;
        atomic_fetch_add_explicit(&n_ktls, 1, memory_order_relaxed);
        return;
    }
#endif
    atomic_fetch_add_explicit(&n_buffered, 1, memory_order_relaxed);
}

bool sl_tls_can_read(const sl_conn *c)
{
    return c->tls->rd_wants_wr ? c->wr_ready : c->rd_ready;
}

bool sl_tls_can_write(const sl_conn *c)
{
    return c->tls->wr_wants_rd ? c->rd_ready : c->wr_ready;
}

/* Send the records the gathering write BIO holds (none with kTLS: its wbio is the socket's). */
static int push_gathered(sl_conn *c)
{
    sl_tls_conn *t = c->tls;
    BIO *wb = SSL_get_wbio(t->ssl);
    if (t->dead || !t->gathered || BIO_wpending(wb) <= 0) return 0;
    errno = 0;
    if (sl_tls_gather_send(wb) > 0) return 0;
    if (BIO_should_retry(wb)) {
        c->wr_ready = false;
        return -EAGAIN;
    }
    t->dead = true;
    return errno ? -errno : -EIO;
}

/* A failed SSL_read/SSL_write that is not WANT_*: what to tell the caller. */
static ssize_t fatal(sl_conn *c, int e, int ret)
{
    sl_tls_conn *t = c->tls;
    int saved = errno;
    (void)push_gathered(c); /* the alert OpenSSL wrote, if the socket takes it */
    t->dead = true;
    if (!t->up) atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN) {
        t->dead = false; /* the peer's close_notify: ours may still be sent */
        return 0;
    }
    if (e == SSL_ERROR_SYSCALL) return ret == 0 || !saved ? 0 : -saved; /* EOF or reset */
    return -EPROTO; /* a TLS protocol error: garbage, a failed handshake, renegotiation */
}

ssize_t sl_tls_recv(sl_conn *c, void *buf, size_t len)
{
    sl_tls_conn *t = c->tls;
    if (t->dead) return -EPIPE;
    errno = 0;
    int n = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0) {
        t->rd_wants_wr = false;
        if (!t->up) established(c);
        return n;
    }
    int e = SSL_get_error(t->ssl, n);
    switch (e) {
    case SSL_ERROR_WANT_READ: {
        /* Before waiting for the client, what it waits for: a handshake flight, the session
         * tickets (when no response took them along), an alert. A full socket: the next try
         * comes when it is writable, and sends first. */
        int p = push_gathered(c);
        if (p < 0 && p != -EAGAIN) return p;
        t->rd_wants_wr = p == -EAGAIN;
        c->rd_ready = false;
        if (!t->up && SSL_is_init_finished(t->ssl)) established(c);
        return -EAGAIN;
    }
    case SSL_ERROR_WANT_WRITE:
        t->rd_wants_wr = true;
        c->wr_ready = false;
        return -EAGAIN;
    default:
        return fatal(c, e, n);
    }
}

/* SSL_write as the connection wants it (see sl_tls_send). */
static ssize_t ssl_write(sl_conn *c, const void *buf, size_t len)
{
    sl_tls_conn *t = c->tls;
    if (t->dead) return -EPIPE;
    if (len == 0) return 0;
    /* The tickets owed go out in front of the first response's records (same SSL_write). */
    while (t->tickets && SSL_new_session_ticket(t->ssl)) t->tickets--;
    t->tickets = 0; /* a refusal (not TLS 1.3 after all) ends them too */
    errno = 0;
    int n = SSL_write(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0) {
        t->wr_wants_rd = false;
        return n;
    }
    int e = SSL_get_error(t->ssl, n);
    switch (e) {
    case SSL_ERROR_WANT_WRITE:
        t->wr_wants_rd = false;
        c->wr_ready = false;
        return -EAGAIN;
    case SSL_ERROR_WANT_READ: {
        int p = push_gathered(c); /* what the client must see before it answers */
        if (p < 0 && p != -EAGAIN) return p;
        t->wr_wants_rd = true;
        c->rd_ready = false;
        return -EAGAIN;
    }
    default: {
        ssize_t r = fatal(c, e, n);
        return r == 0 ? -EPIPE : r;
    }
    }
}

/* Write what is staged into records (gathered, not yet sent). */
static int write_staged(sl_conn *c)
{
    sl_tls_conn *t = c->tls;
    if (!t->staged) return 0;
    t->stage_sealed = true;
    while (t->staged) {
        ssize_t n = ssl_write(c, t->stage, t->staged);
        if (n < 0) return (int)n;
        /* One record at most: partial writes return whole records, so this is the rest. */
        memmove(t->stage, t->stage + n, t->staged - (size_t)n);
        t->staged -= (size_t)n;
    }
    /* Given back at once: 10,000 idle connections keep no staging buffer. */
    free(t->stage);
    t->stage = NULL;
    t->stage_sealed = false;
    return 0;
}

int sl_tls_flush(sl_conn *c)
{
    int r = write_staged(c);
    return r < 0 ? r : push_gathered(c);
}

/* close_notify written once, when the handshake completed and nothing failed (gathered: it
 * leaves with whatever still waits). False when it was not written now. */
static bool write_close_notify(sl_tls_conn *t)
{
    if (!t->up || t->dead || t->shut) return false;
    t->shut = true;
    SSL_shutdown(t->ssl);
    ERR_clear_error();
    return true;
}

int sl_tls_flush_last(sl_conn *c)
{
    int r = write_staged(c);
    if (r < 0) return r;
    (void)write_close_notify(c->tls); /* behind the response's last record */
    return push_gathered(c);
}

ssize_t sl_tls_stage(sl_conn *c, const void *buf, size_t len)
{
    sl_tls_conn *t = c->tls;
    if (t->dead) return -EPIPE;
    if (t->stage_sealed || t->staged + len > STAGE_CAP) return 0;
    if (!t->stage && !(t->stage = malloc(STAGE_CAP))) return 0; /* then written unstaged */
    memcpy(t->stage + t->staged, buf, len);
    t->staged += len;
    return (ssize_t)len;
}

ssize_t sl_tls_send(sl_conn *c, const void *buf, size_t len)
{
    sl_tls_conn *t = c->tls;
    if (!t->staged) return ssl_write(c, buf, len);
    /* A staged head: complete its record with the first of these bytes, then send it. */
    size_t take = 0;
    if (!t->stage_sealed) {
        take = STAGE_CAP - t->staged < len ? STAGE_CAP - t->staged : len;
        memcpy(t->stage + t->staged, buf, take);
        t->staged += take;
    }
    int r = write_staged(c); /* sealed into records: gathered, sent with what follows */
    if (take) return (ssize_t)take; /* taken, whether or not the record is out yet */
    return r < 0 ? r : ssl_write(c, buf, len);
}

const sl_kvlist *sl_tls_client_env(const sl_conn *c)
{
    return c->tls && c->tls->env ? &c->tls->env->kv : NULL;
}

void sl_tls_close_notify(sl_conn *c)
{
    /* With the response's last records when they still wait. */
    if (c->tls && write_close_notify(c->tls)) (void)push_gathered(c);
}

/* ---- the module ---- */

static void tls_status(struct sl_server *srv, sl_status_out *o)
{
    if (!srv->tls) return; /* no TLS listener: nothing to say */
    sl_status_list(o, "tls", "tls_path");
    sl_status_item(o, sl_tls_file_path());
    sl_status_num(o, "handshakes", atomic_load_explicit(&n_handshakes, memory_order_relaxed), true);
    sl_status_num(o, "handshake_failures", atomic_load_explicit(&n_failed, memory_order_relaxed),
                  true);
    sl_status_num(o, "sni_certificates", atomic_load_explicit(&n_sni, memory_order_relaxed), true);
    sl_status_num(o, "ktls_connections", atomic_load_explicit(&n_ktls, memory_order_relaxed),
                  true);
    sl_status_num(o, "buffered_connections",
                  atomic_load_explicit(&n_buffered, memory_order_relaxed), true);
    sl_status_item_end(o);
    sl_status_list_end(o);
}

/* lighttpd's defaults: a client certificate, once asked for, is required, and may sit below up
 * to 9 CAs. */
static void tls_defaults(void *p)
{
    tls_conf *tc = p;
    tc->enforce = true;
    tc->depth = 9;
}

/* ssl.verifyclient.username: the connection's verified client is the request's user, as
 * lighttpd's mod_openssl sets REMOTE_USER (before mod_auth, which may check it or replace it). */
static sl_hresult tls_uri_raw(sl_conn *c)
{
    const sl_tls_conn *t = c->tls;
    if (t && t->env && t->env->user) {
        c->remote_user = t->env->user;
        c->auth_type = "SSL_CLIENT_VERIFY";
    }
    return SL_GO_ON;
}

/* lighttpd 1.4's keys this build does not implement: refused at start-up (prep_refused). */
#define REFUSED(name) SL_KEY_PREP(name, SL_KEY_VALUE, refused, prep_refused, NULL)

sl_module sl_mod_tls = {
    SL_MODULE_HEAD("openssl", tls_conf, "mod_openssl"),
    .keys = SL_KEYS(
        SL_KEY_PREP("ssl.engine", SL_KEY_BOOL, engine, prep_listener, NULL),
        SL_KEY_PREP("ssl.pemfile", SL_KEY_VALUE, pemfile, prep_pemfile, cert_free),
        SL_KEY_PREP("ssl.privkey", SL_KEY_PATH, privkey, prep_privkey, NULL),
        SL_KEY_PREP("ssl.ca-file", SL_KEY_PATH, ca_file, prep_ca_file, NULL),
        SL_KEY_PREP("ssl.openssl.ssl-conf-cmd", SL_KEY_KVLIST, conf_cmd, prep_conf_cmd, NULL),
        SL_KEY_PREP("ssl.stapling-file", SL_KEY_VALUE, staple, prep_stapling, staple_free),
        SL_KEY_PREP("ssl.verifyclient.activate", SL_KEY_BOOL, verify, prep_listener, NULL),
        SL_KEY_PREP("ssl.verifyclient.enforce", SL_KEY_BOOL, enforce, prep_listener, NULL),
        SL_KEY_PREP("ssl.verifyclient.depth", SL_KEY_INT, depth, prep_depth, NULL),
        SL_KEY_PREP("ssl.verifyclient.username", SL_KEY_STRING, username, prep_listener, NULL),
        SL_KEY_PREP("ssl.verifyclient.exportcert", SL_KEY_BOOL, exportcert, prep_listener, NULL),
        SL_KEY_PREP("ssl.ca-dn-file", SL_KEY_VALUE, ca_dn, prep_ca_dn, names_free),
        SL_KEY_PREP("ssl.ca-crl-file", SL_KEY_VALUE, crls, prep_crl, crls_free),
        REFUSED("ssl.cipher-list"),
        REFUSED("ssl.honor-cipher-order"),
        REFUSED("ssl.dh-file"),
        REFUSED("ssl.ec-curve"),
        REFUSED("ssl.use-sslv2"),
        REFUSED("ssl.use-sslv3"),
        REFUSED("ssl.use-compression"),
        REFUSED("ssl.disable-client-renegotiation"),
        REFUSED("ssl.empty-fragments"),
        REFUSED("ssl.read-ahead"),
        REFUSED("ssl.stek-file"),
        REFUSED("ssl.acme-tls-1"),
        REFUSED("ssl.message"),
        REFUSED("ssl.openssl.ssl-conf-cmd-file")),
    .always = true,
    .defaults = tls_defaults,
    .uri_raw = tls_uri_raw,
    .status = tls_status,
};
