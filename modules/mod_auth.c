/* mod_auth: HTTP authentication (lighttpd's mod_auth with mod_authn_file's backends):
 *   auth.backend                  = "htpasswd"     ("plain", "htpasswd", "htdigest")
 *   auth.backend.htpasswd.userfile = "/etc/lighttpd/htpasswd"   (and .plain., .htdigest.)
 *   auth.require = ( "/admin/" => ( "method" => "basic", "realm" => "admins",
 *                                   "require" => "user=alice|user=bob" ) )
 *
 * In uri_clean the first auth.require prefix the path starts with (file order, as lighttpd)
 * decides: Basic (RFC 7617) or Digest (RFC 7616: qop=auth, MD5 and SHA-256, their -sess forms).
 * A missing or foreign Authorization answers 401 with lighttpd's WWW-Authenticate; a malformed
 * one 400; a user the file does not know, a wrong password or a user the rule does not name 401
 * (and the connection closes after it, as lighttpd does). A user who passes is the request's
 * c->remote_user (access log %u, FastCGI REMOTE_USER and AUTH_TYPE).
 *
 * Where the password is checked: a job on the stat threads reads the user file and checks the
 * password (authn_file.c), per request. Reading per request is what lighttpd does: a changed
 * file counts from the next request, without a restart, with no cache to go stale and nothing
 * to watch; user files are small, and a bcrypt check costs far more than reading one. Neither
 * may run on the event loop (a bcrypt hash takes milliseconds, a file may sit on a slow disk),
 * so the hook answers SL_WAIT and the job's done() runs the request on, after checking that the
 * client is still there. With server.max-stat-threads = 0 (everything on the loop by choice)
 * the check runs inline.
 *
 * Digest nonces (auth_nonce.c) are HMACs of time and randomness, so handing one out keeps no
 * state; one older than 10 minutes is stale (401 with stale=true, so the client retries with a
 * new one without asking the user), and a table shared by the workers refuses a nonce-count used
 * before. The checks that need no file (syntax, realm, algorithm, uri, nonce) run on the loop
 * before the job; the response is computed on the loop after it (a few hashes).
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "auth_nonce.h"
#include "auth_parse.h"
#include "authn_file.h"
#include "conf.h"
#include "core_conf.h"
#include "connection.h"
#include "log.h"
#include "loop.h"
#include "module.h"
#include "server.h"
#include "status.h"
#include "threadpool.h"

/* One auth.require entry. Strings point into the config tree (they live as long as it). */
typedef struct auth_rule {
    const char *prefix;
    size_t plen;
    bool digest;              /* "method" => "digest" (else "basic") */
    const char *realm;
    int algos;                /* SL_DIGEST_* offered (Digest), the first one for Basic+htdigest */
    bool valid_user;          /* "require" => "valid-user" */
    size_t n_users;           /* else "user=a|user=b" */
    char **users;
    const char *nonce_secret; /* NULL: the process's secret */
} auth_rule;

typedef struct auth_rules {
    size_t n;
    auth_rule r[];
} auth_rules;

typedef struct auth_conf {
    const int *backend;       /* auth.backend (sl_authn_backend) */
    const char *plain_file;   /* auth.backend.plain.userfile */
    const char *htpasswd_file;
    const char *htdigest_file;
    const auth_rules *require;
    long debug;               /* auth.debug: log why a request was refused */
} auth_conf;

#define SL_KEY_CONF auth_conf

sl_module sl_mod_auth;

#define ACONF(c) SL_MODCONF((c)->conf, sl_mod_auth, auth_conf)

/* Nonces live 10 minutes; within the last minute a success announces the next one. */
#define NONCE_NEXT (SL_NONCE_LIFE - 60)
/* The longest Authorization values looked at: Basic's is lighttpd's bound (1363 base64
 * characters, 1023 decoded bytes); longer ones are refused with a challenge, as lighttpd does. */
#define MAX_BASIC (6 + 1363)
#define MAX_CREDENTIALS 4096

static _Atomic uint64_t n_passed, n_challenged, n_denied, n_malformed, n_stale, n_replayed,
    n_busy, n_errors;

/* ---- keys ---- */

static int prep_backend(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    static const char *const names[] = {"", "plain", "htpasswd", "htdigest"};
    /* lighttpd's other backends: each needs a library and a service seekless does not have. */
    static const char *const elsewhere[] = {"ldap", "mysql", "dbi", "gssapi", "pam", "sasl"};
    if (v->type != SL_CV_STRING) return sl_key_fail(ctx, "auth.backend must be a string");
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(v->str, names[i])) {
            int *b = malloc(sizeof *b); /* the config frees it */
            if (!b) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
            *b = (int)i; /* names[] is in sl_authn_backend's order */
            *out = b;
            return 0;
        }
    for (size_t i = 0; i < sizeof elsewhere / sizeof elsewhere[0]; i++)
        if (!strcmp(v->str, elsewhere[i])) {
            snprintf(ctx->err, ctx->errlen,
                     "auth.backend \"%s\" is not implemented in seekless (it has \"plain\", "
                     "\"htpasswd\" and \"htdigest\")", v->str);
            return -1;
        }
    snprintf(ctx->err, ctx->errlen,
             "auth.backend \"%s\" is not a backend (\"plain\", \"htpasswd\", \"htdigest\")", v->str);
    return -1;
}

static void rules_release(void *p)
{
    auth_rules *rs = p;
    if (!rs) return;
    for (size_t i = 0; i < rs->n; i++) {
        for (size_t k = 0; k < rs->r[i].n_users; k++) free(rs->r[i].users[k]);
        free(rs->r[i].users);
    }
    free(rs);
}

/* "MD5", "SHA-256", "MD5-sess", "SHA-256-sess", joined by '|'. 0 or -1. */
static int parse_algos(const char *s, int *out)
{
    *out = 0;
    if (!*s) {
        *out = SL_DIGEST_MD5;
        return 0;
    }
    while (*s) {
        size_t n = strcspn(s, "|");
        int a = 0;
        if (n >= 5 && !strncasecmp(s + n - 5, "-sess", 5)) {
            a = SL_DIGEST_SESS;
            n -= 5;
        }
        if (n == 3 && !strncasecmp(s, "MD5", 3))
            a |= SL_DIGEST_MD5;
        else if (n == 7 && !strncasecmp(s, "SHA-256", 7))
            a |= SL_DIGEST_SHA256;
        else
            return -1;
        *out |= a;
        s += n + ((a & SL_DIGEST_SESS) ? 5 : 0);
        if (*s == '|') s++;
    }
    return 0;
}

/* "valid-user" or "user=a|user=b". 0, or -1 with why. */
static int parse_require(auth_rule *r, const char *s, char *why, size_t wl)
{
    if (!strcmp(s, "valid-user")) {
        r->valid_user = true;
        return 0;
    }
    size_t n = 1;
    for (const char *p = s; *p; p++) n += *p == '|';
    r->users = calloc(n, sizeof *r->users);
    if (!r->users) return snprintf(why, wl, "out of memory"), -1;
    for (const char *p = s;;) {
        size_t len = strcspn(p, "|");
        if (len > 5 && !strncmp(p, "user=", 5)) {
            if (!(r->users[r->n_users++] = strndup(p + 5, len - 5)))
                return snprintf(why, wl, "out of memory"), -1;
        } else if (!strncmp(p, "group=", 6) || !strncmp(p, "host=", 5)) {
            return snprintf(why, wl,
                            "\"%.*s\": group= and host= are not implemented in seekless (its "
                            "file backends know no groups; use user=a|user=b)", (int)len, p), -1;
        } else if (len == 10 && !strncmp(p, "valid-user", 10)) {
            return snprintf(why, wl, "valid-user can not be combined with other rules"), -1;
        } else {
            return snprintf(why, wl, "\"%.*s\" is not \"valid-user\" or \"user=name\"", (int)len,
                            p), -1;
        }
        if (!p[len]) break;
        p += len + 1;
    }
    return 0;
}

static int prep_require(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    const char *usage = "auth.require = ( \"/path\" => ( \"method\" => \"basic\"|\"digest\", "
                        "\"realm\" => \"...\", \"require\" => \"valid-user\" ) )";
    if (v->type != SL_CV_ARRAY) return sl_key_fail(ctx, "auth.require must be an array: %s", usage);
    auth_rules *rs = calloc(1, sizeof *rs + v->n_items * sizeof rs->r[0]);
    if (!rs) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        const sl_cval_item *it = &v->items[i];
        auth_rule *r = &rs->r[rs->n++];
        const char *method = NULL, *realm = NULL, *require = NULL, *algos = "";
        char why[300] = "";
        if (!it->key || it->val->type != SL_CV_ARRAY || !sl_cval_strings(it->val, true)) {
            snprintf(why, sizeof why, "each entry must be \"/path\" => ( \"option\" => \"value\", ... ): %s",
                     usage);
            goto fail;
        }
        r->prefix = it->key;
        r->plen = strlen(it->key);
        for (size_t k = 0; k < it->val->n_items; k++) {
            const char *o = it->val->items[k].key, *val = it->val->items[k].val->str;
            if (!strcmp(o, "method")) {
                method = val;
            } else if (!strcmp(o, "realm")) {
                realm = val;
            } else if (!strcmp(o, "require")) {
                require = val;
            } else if (!strcmp(o, "algorithm")) {
                algos = val;
            } else if (!strcmp(o, "nonce_secret") || !strcmp(o, "nonce-secret")) {
                r->nonce_secret = val[0] ? val : NULL;
            } else if (!strcmp(o, "userhash")) {
                if (strcmp(val, "disable") && strcmp(val, "false") && strcmp(val, "0")) {
                    snprintf(why, sizeof why, "\"userhash\" is not implemented in seekless");
                    goto fail;
                }
            } else {
                snprintf(why, sizeof why, "unknown option \"%s\" (method, realm, require, "
                         "algorithm, nonce_secret)", o);
                goto fail;
            }
        }
        if (!method || !method[0]) {
            snprintf(why, sizeof why, "\"method\" is missing");
            goto fail;
        }
        if (!strcmp(method, "digest")) {
            r->digest = true;
        } else if (!strcmp(method, "extern")) {
            snprintf(why, sizeof why, "\"method\" => \"extern\" is not implemented in seekless "
                     "(it takes REMOTE_USER from another module; seekless has none that sets it)");
            goto fail;
        } else if (strcmp(method, "basic")) {
            snprintf(why, sizeof why, "unknown method \"%s\" (\"basic\" or \"digest\")", method);
            goto fail;
        }
        if (!realm) {
            snprintf(why, sizeof why, "\"realm\" is missing");
            goto fail;
        }
        if (strpbrk(realm, "\"\\\r\n")) {
            snprintf(why, sizeof why, "the realm may hold no '\"', '\\' or line break");
            goto fail;
        }
        r->realm = realm;
        if (!require || !require[0]) {
            snprintf(why, sizeof why, "\"require\" is missing");
            goto fail;
        }
        if (parse_require(r, require, why, sizeof why) < 0) goto fail;
        if (parse_algos(algos, &r->algos) < 0) {
            snprintf(why, sizeof why, "algorithm \"%s\": seekless has MD5, SHA-256, MD5-sess and "
                     "SHA-256-sess, joined by '|'", algos);
            goto fail;
        }
        continue;
    fail:
        snprintf(ctx->err, ctx->errlen, "auth.require \"%s\": %s", it->key ? it->key : "", why);
        rules_release(rs);
        return -1;
    }
    *out = rs;
    return 0;
}

/* A user file: at start-up (and -t) it must exist as a regular file, so a typo in its name is
 * named then rather than by a 500 on the first login. Its content is read per request. */
static int prep_userfile(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (!ctx->check_system || !v->str[0]) return 0;
    char path[4096];
    if (v->str[0] == '/')
        snprintf(path, sizeof path, "%s", v->str);
    else
        snprintf(path, sizeof path, "%s/%s", ctx->basedir, v->str);
    struct stat st;
    const char *why = stat(path, &st) < 0 ? strerror(errno)
                    : !S_ISREG(st.st_mode) ? "not a regular file" : NULL;
    if (!why) return 0;
    snprintf(ctx->err, ctx->errlen, "%s \"%s\": %s", ctx->assign->key, path, why);
    return -1;
}

static int prep_refused(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    if (!strcmp(ctx->assign->key, "auth.cache"))
        snprintf(ctx->err, ctx->errlen,
                 "auth.cache is not implemented in seekless: every request checks the user file "
                 "on a stat thread, so a changed password counts at once");
    else
        snprintf(ctx->err, ctx->errlen,
                 "%s is not implemented in seekless (no module of seekless sets REMOTE_USER "
                 "before mod_auth)", ctx->assign->key);
    return -1;
}

/* ---- per request ---- */

/* The state of one request's check, in request memory. */
typedef struct auth_ctx {
    const auth_rule *rule;      /* the rule being checked, or that passed */
    bool passed;
    bool stale;                 /* a 401 announces stale=true */
    bool busy;                  /* a 503 for lack of stat threads: Retry-After */
    const char *auth_info;      /* Authentication-Info value for the answer (Digest) */
    /* Digest, while the HA1 job is out */
    sl_digest_params dp;
    int algo;
    sl_nonce nonce;
    uint64_t nc;
} auth_ctx;

/* A password check on a stat thread. */
typedef struct auth_job {
    sl_job job;
    sl_conn *c;
    sl_authn_query q;
    bool digest;
    int result;                 /* 0 or a negative errno (authn_file.h) */
    unsigned char ha1[SL_DIGEST_MAX];
    size_t pwlen;
    char *pw;                   /* Basic: in the strings below */
    char strings[];             /* user, realm, file, pw */
} auth_job;

/* Checks in the process: at most half the stat threads hash passwords at once (a bcrypt hash
 * holds one for milliseconds), so a flood of logins cannot starve the file lookups of every
 * other client; the rest wait in the limiter, oldest first, any loop's, and a check that ends
 * starts the next. Beyond 1024 waiting the answer is 503 with Retry-After. */
static sl_tlimit checks = SL_TLIMIT_INIT(1024);

static auth_ctx *ctx_of(sl_conn *c)
{
    auth_ctx *x = SL_CTX(c, sl_mod_auth);
    if (!x && (x = sl_conn_alloc(c, sizeof *x))) {
        memset(x, 0, sizeof *x);
        SL_CTX(c, sl_mod_auth) = x;
    }
    return x;
}

static const char *backend_file(const auth_conf *ac, sl_authn_backend b)
{
    return b == SL_AUTHN_PLAIN ? ac->plain_file
         : b == SL_AUTHN_HTPASSWD ? ac->htpasswd_file
         : b == SL_AUTHN_HTDIGEST ? ac->htdigest_file : NULL;
}

static void debug_log(const sl_conn *c, const char *what, const char *user)
{
    if (ACONF(c)->debug > 0)
        sl_log("auth: %s %s: %s%s%s", sl_method_name(c->req.method), c->path ? c->path : "-",
               what, user ? ", user " : "", user ? user : "");
}

/* 401: the challenge goes out in response_start (also on a custom error page). A refused
 * password closes the connection after the answer, as lighttpd does. */
static sl_hresult deny(sl_conn *c, bool failed, const char *why, const char *user)
{
    atomic_fetch_add_explicit(failed ? &n_denied : &n_challenged, 1, memory_order_relaxed);
    if (failed) {
        c->keep_alive = c->ka_after_body = false;
        debug_log(c, why, user);
    }
    c->status = 401;
    return SL_ERROR;
}

static sl_hresult bad_request(sl_conn *c, const char *why)
{
    atomic_fetch_add_explicit(&n_malformed, 1, memory_order_relaxed);
    debug_log(c, why, NULL);
    c->status = 400;
    return SL_ERROR;
}

static bool allowed(const auth_rule *r, const char *user, size_t ulen)
{
    if (r->valid_user) return true;
    for (size_t i = 0; i < r->n_users; i++)
        if (strlen(r->users[i]) == ulen && !memcmp(r->users[i], user, ulen)) return true;
    return false;
}

static void passed(sl_conn *c, auth_ctx *x, const char *user, size_t ulen, const char *type)
{
    atomic_fetch_add_explicit(&n_passed, 1, memory_order_relaxed);
    x->passed = true;
    c->remote_user = sl_conn_strdup(c, user, ulen);
    c->auth_type = type;
}

static void job_work(sl_job *job)
{
    auth_job *j = (auth_job *)job;
    j->result = j->digest ? sl_authn_digest_ha1(&j->q, j->ha1)
                          : sl_authn_basic(&j->q, j->pw, j->pwlen);
}

static void job_free(auth_job *j)
{
    OPENSSL_cleanse(j->ha1, sizeof j->ha1);
    if (j->pw) OPENSSL_cleanse(j->pw, j->pwlen);
    free(j);
}

/* Digest: the HA1 is known; check the response, the rule, and the nonce-count. */
static sl_hresult digest_finish(sl_conn *c, auth_ctx *x, const unsigned char *ha1)
{
    const sl_digest_params *dp = &x->dp;
    const auth_rule *r = x->rule;
    size_t dl = sl_digest_len(x->algo);
    char h1[2 * SL_DIGEST_MAX + 1], h2[2 * SL_DIGEST_MAX + 1], want[2 * SL_DIGEST_MAX + 1];
    unsigned char buf[SL_DIGEST_MAX];
    bool hok = true; /* the library may fail (no memory): then nobody passes */
    sl_hex(ha1, dl, h1);
    if (x->algo & SL_DIGEST_SESS) {
        const char *p[3] = {h1, dp->nonce, dp->cnonce};
        size_t l[3] = {2 * dl, strlen(dp->nonce), strlen(dp->cnonce)};
        hok &= sl_digest_hash(x->algo, buf, p, l, 3) == 0;
        sl_hex(buf, dl, h1);
    }
    const char *method = c->req.method_str ? c->req.method_str : "GET";
    size_t mlen = c->req.method_str ? c->req.method_len : 3;
    {
        const char *p[2] = {method, dp->uri};
        size_t l[2] = {mlen, strlen(dp->uri)};
        hok &= sl_digest_hash(x->algo, buf, p, l, 2) == 0;
        sl_hex(buf, dl, h2);
    }
    if (dp->qop) {
        const char *p[6] = {h1, dp->nonce, dp->nc, dp->cnonce, dp->qop, h2};
        size_t l[6] = {2 * dl, strlen(dp->nonce), strlen(dp->nc), strlen(dp->cnonce),
                       strlen(dp->qop), 2 * dl};
        hok &= sl_digest_hash(x->algo, buf, p, l, 6) == 0;
    } else {
        const char *p[3] = {h1, dp->nonce, h2};
        size_t l[3] = {2 * dl, strlen(dp->nonce), 2 * dl};
        hok &= sl_digest_hash(x->algo, buf, p, l, 3) == 0;
    }
    sl_hex(buf, dl, want);
    char got[2 * SL_DIGEST_MAX + 1];
    size_t rl = strlen(dp->response);
    for (size_t i = 0; i < rl && i < sizeof got - 1; i++) got[i] = (char)(dp->response[i] | 0x20);
    got[rl < sizeof got - 1 ? rl : sizeof got - 1] = 0;
    bool ok = rl == 2 * dl && CRYPTO_memcmp(got, want, 2 * dl) == 0;
    OPENSSL_cleanse(h1, sizeof h1);
    OPENSSL_cleanse(buf, sizeof buf);
    if (!hok) {
        atomic_fetch_add_explicit(&n_errors, 1, memory_order_relaxed);
        c->status = 503;
        return SL_ERROR;
    }
    if (!ok) return deny(c, true, "wrong password (digest)", dp->username);
    size_t ulen = strlen(dp->username);
    if (!allowed(r, dp->username, ulen))
        return deny(c, true, "user not allowed by the rule", dp->username);
    int64_t now = time(NULL);
    if (!sl_nonce_use(&x->nonce, x->nc, now)) {
        /* A replayed (or dropped) nonce: the client gets a new one. */
        atomic_fetch_add_explicit(&n_replayed, 1, memory_order_relaxed);
        x->stale = true;
        return deny(c, true, "nonce replayed or dropped", dp->username);
    }
    if (now - x->nonce.ts > NONCE_NEXT) {
        char n[SL_NONCE_MAX], *v = sl_conn_alloc(c, SL_NONCE_MAX + 16);
        sl_nonce_make(r->realm, r->nonce_secret, now, n);
        if (v) snprintf(v, SL_NONCE_MAX + 16, "nextnonce=\"%s\"", n);
        x->auth_info = v;
    }
    passed(c, x, dp->username, ulen, "Digest");
    return SL_GO_ON;
}

/* What the check found, as the hook answers it (on the loop). */
static sl_hresult finish(sl_conn *c, auth_job *j)
{
    auth_ctx *x = SL_CTX(c, sl_mod_auth);
    if (j->result == 0) {
        if (j->digest) return digest_finish(c, x, j->ha1);
        if (!allowed(x->rule, j->q.user, j->q.ulen))
            return deny(c, true, "user not allowed by the rule", j->q.user);
        passed(c, x, j->q.user, j->q.ulen, "Basic");
        return SL_GO_ON;
    }
    if (j->result == -EACCES || j->result == -ENOKEY)
        return deny(c, true, j->result == -EACCES ? "wrong password" : "unknown user",
                    j->q.user);
    if (j->result == -EAGAIN) {
        atomic_fetch_add_explicit(&n_busy, 1, memory_order_relaxed);
        x->busy = true;
        c->status = 503;
        return SL_ERROR;
    }
    /* The file cannot be read, or the backend cannot answer this method: our fault (lighttpd
     * answers 500 for a backend that cannot do the method too). */
    atomic_fetch_add_explicit(&n_errors, 1, memory_order_relaxed);
    sl_log("auth: %s %s: %s: %s", sl_method_name(c->req.method), c->path ? c->path : "-",
           j->q.file ? j->q.file : "no user file",
           j->result == -EPERM ? "auth.backend cannot check this method (or none is set)"
                               : strerror(-j->result));
    c->status = 500;
    return SL_ERROR;
}

static void job_done(sl_job *job)
{
    auth_job *j = (auth_job *)job;
    sl_conn *c = j->c;
    if (!sl_tlimit_done(&checks, job)) j->result = -EAGAIN; /* its turn came to a full pool */
    c->pending--;
    if (c->closed) {
        job_free(j);
        sl_conn_release(c); /* the client left while its password was checked */
        return;
    }
    sl_hresult r = finish(c, j);
    job_free(j);
    sl_conn_handled(c, r);
}

/* Start the password check: on a stat thread, or inline without any. */
static sl_hresult start_job(sl_conn *c, const sl_authn_query *q, bool digest, const char *pw,
                            size_t pwlen)
{
    size_t rl = strlen(q->realm), fl = q->file ? strlen(q->file) : 0;
    auth_job *j = calloc(1, sizeof *j + q->ulen + 1 + rl + 1 + fl + 1 + pwlen + 1);
    if (!j) {
        c->status = 503;
        return SL_ERROR;
    }
    char *s = j->strings;
    j->job = (sl_job){.work = job_work, .done = job_done};
    j->c = c;
    j->digest = digest;
    j->q = *q;
    memcpy(s, q->user, q->ulen);
    j->q.user = s;
    s += q->ulen + 1;
    memcpy(s, q->realm, rl);
    j->q.realm = s;
    s += rl + 1;
    if (q->file) {
        memcpy(s, q->file, fl);
        j->q.file = s;
    }
    s += fl + 1;
    if (pw) memcpy(s, pw, pwlen);
    j->pw = s;
    j->pwlen = pwlen;
    sl_server *srv = c->loop->srv;
    if (!srv->stat_pool) {
        /* No stat threads configured: everything is on the loop by choice, this too. */
        job_work(&j->job);
        sl_hresult r = finish(c, j);
        job_free(j);
        return r;
    }
    if (sl_tlimit_submit(&checks, srv->stat_pool, c->loop->port, &j->job) < 0) {
        job_free(j);
        atomic_fetch_add_explicit(&n_busy, 1, memory_order_relaxed);
        ((auth_ctx *)SL_CTX(c, sl_mod_auth))->busy = true;
        c->status = 503;
        return SL_ERROR;
    }
    c->pending++;
    return SL_WAIT;
}

/* Room in request memory for a copy of the credentials of Authorization field h (at most max
 * bytes), or NULL with *res set: no field or too long (401, challenged again), no memory (503). */
static char *credentials_buf(sl_conn *c, const sl_http_header *h, size_t max, sl_hresult *res)
{
    if (!h) {
        *res = deny(c, false, NULL, NULL);
        return NULL;
    }
    if (h->value_len > max) {
        *res = deny(c, true, "credentials too long", NULL);
        return NULL;
    }
    char *buf = sl_conn_alloc(c, h->value_len + 1);
    if (!buf) {
        c->status = 503;
        *res = SL_ERROR;
    }
    return buf;
}

/* The answer to credentials whose parse failed with e: none of the scheme (401, challenged
 * again) or malformed (400). */
static sl_hresult parse_failed(sl_conn *c, int e, const char *malformed)
{
    return e == -ENOENT ? deny(c, false, NULL, NULL) : bad_request(c, malformed);
}

/* The check of the Basic or Digest credentials of field h, parsed into buf (credentials_buf's
 * room for them, which auth_uri_clean finds before it picks the scheme's check). */
static sl_hresult check_basic(sl_conn *c, const auth_conf *ac, auth_ctx *x,
                              const sl_http_header *h, char *buf)
{
    const auth_rule *r = x->rule;
    const char *user, *pw;
    size_t ulen, pwlen;
    int e = sl_auth_basic_parse(h->value, h->value_len, buf, h->value_len + 1, &user, &ulen, &pw,
                                &pwlen);
    if (e < 0) return parse_failed(c, e, "malformed Basic credentials");
    sl_authn_backend b = ac->backend ? (sl_authn_backend)*ac->backend : SL_AUTHN_NONE;
    sl_authn_query q = {.backend = b, .file = backend_file(ac, b), .user = user, .ulen = ulen,
                        .realm = r->realm, .algo = r->algos & SL_DIGEST_SHA256 && !(r->algos & SL_DIGEST_MD5)
                                                       ? SL_DIGEST_SHA256 : SL_DIGEST_MD5};
    sl_hresult res = start_job(c, &q, false, pw, pwlen);
    OPENSSL_cleanse((void *)pw, pwlen);
    return res;
}

static bool all_hex(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (!n || n > max) return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i])) return false;
    return true;
}

static sl_hresult check_digest(sl_conn *c, const auth_conf *ac, auth_ctx *x,
                               const sl_http_header *h, char *buf)
{
    const auth_rule *r = x->rule;
    sl_digest_params *dp = &x->dp;
    int e = sl_auth_digest_parse(h->value, h->value_len, buf, h->value_len + 1, dp);
    if (e < 0) return parse_failed(c, e, "malformed Digest credentials");
    /* What lighttpd requires: qop needs nc and cnonce, and a user name, either as username or
     * as username* (RFC 8187, for names that are not ASCII). userhash is never offered. */
    if ((dp->qop && (!dp->nc || !dp->cnonce)) || !dp->username == !dp->username_star ||
        !dp->realm || !dp->nonce || !dp->uri || !dp->response)
        return bad_request(c, "digest: missing field");
    if (dp->userhash && !strcasecmp(dp->userhash, "true"))
        return bad_request(c, "digest: userhash is not supported");
    if (dp->username_star) {
        size_t cap = strlen(dp->username_star) + 1;
        char *u = sl_conn_alloc(c, cap);
        if (!u) {
            c->status = 503;
            return SL_ERROR;
        }
        if (sl_auth_ext_value_decode(dp->username_star, u, cap) < 0)
            return bad_request(c, "digest: invalid username*");
        dp->username = u;
    }
    if (strcmp(dp->realm, r->realm)) return deny(c, true, "digest: realm mismatch", dp->username);
    int algo = 0;
    if (parse_algos(dp->algorithm ? dp->algorithm : "", &algo) < 0 || (algo & (algo - 1) & 3) ||
        !(r->algos & algo & (SL_DIGEST_MD5 | SL_DIGEST_SHA256)) ||
        ((algo & SL_DIGEST_SESS) && !(r->algos & SL_DIGEST_SESS)))
        return deny(c, true, "digest: algorithm not offered", dp->username);
    if ((algo & SL_DIGEST_SESS) && !dp->cnonce) return bad_request(c, "digest: -sess without cnonce");
    x->algo = algo;
    if (!all_hex(dp->response, 64) || strlen(dp->response) != 2 * sl_digest_len(algo))
        return bad_request(c, "digest: the response is not a digest");
    if (dp->qop && strcasecmp(dp->qop, "auth")) return bad_request(c, "digest: qop must be auth");
    if (dp->nc && !all_hex(dp->nc, 16)) return bad_request(c, "digest: bad nc");
    x->nc = dp->nc ? strtoull(dp->nc, NULL, 16) : 0;
    /* The response covers the uri: it must be this request's (lighttpd's check too). */
    if (strlen(dp->uri) != c->req.target_len || memcmp(dp->uri, c->req.target, c->req.target_len))
        return bad_request(c, "digest: uri mismatch");
    int n = sl_nonce_check(dp->nonce, r->realm, r->nonce_secret, time(NULL), &x->nonce);
    if (n == -ESTALE) {
        atomic_fetch_add_explicit(&n_stale, 1, memory_order_relaxed);
        x->stale = true;
        return deny(c, false, NULL, NULL);
    }
    if (n < 0) return deny(c, true, "digest: nonce not ours", dp->username);
    sl_authn_backend b = ac->backend ? (sl_authn_backend)*ac->backend : SL_AUTHN_NONE;
    sl_authn_query q = {.backend = b, .file = backend_file(ac, b), .user = dp->username,
                        .ulen = strlen(dp->username), .realm = r->realm, .algo = algo};
    return start_job(c, &q, true, NULL, 0);
}

static sl_hresult auth_uri_clean(sl_conn *c)
{
    const auth_conf *ac = ACONF(c);
    if (!ac->require || !c->path) return SL_GO_ON;
    const auth_rule *r = NULL;
    for (size_t i = 0; i < ac->require->n && !r; i++)
        if (ac->require->r[i].plen <= c->path_len &&
            !memcmp(c->path, ac->require->r[i].prefix, ac->require->r[i].plen))
            r = &ac->require->r[i];
    if (!r) return SL_GO_ON;
    auth_ctx *x = ctx_of(c);
    if (!x) {
        c->status = 503;
        return SL_ERROR;
    }
    /* Back here after a rewrite: a user who passed a rule of the same realm and method needs
     * no second check (a Digest nonce-count cannot be used twice), only the rule's users. */
    if (x->passed && x->rule && x->rule->digest == r->digest && !strcmp(x->rule->realm, r->realm) &&
        c->remote_user) {
        x->rule = r;
        if (allowed(r, c->remote_user, strlen(c->remote_user))) return SL_GO_ON;
        return deny(c, true, "user not allowed by the rule", c->remote_user);
    }
    x->rule = r;
    x->passed = x->stale = x->busy = false;
    x->auth_info = NULL;
    c->remote_user = NULL;
    c->auth_type = NULL;
    const sl_http_header *h = sl_http_find_header(&c->req, "Authorization");
    /* Two Authorization fields cannot both be meant (RFC 9110 §5.3 allows no list here). */
    if (h && h->next) return bad_request(c, "more than one Authorization field");
    sl_hresult res;
    char *buf = credentials_buf(c, h, r->digest ? MAX_CREDENTIALS : MAX_BASIC, &res);
    if (!buf) return res;
    return r->digest ? check_digest(c, ac, x, h, buf) : check_basic(c, ac, x, h, buf);
}

/* The challenge on a 401 of a protected path (every algorithm the rule offers, strongest
 * first, one field each, as lighttpd), and Authentication-Info on a success. */
static void auth_response_start(sl_conn *c)
{
    auth_ctx *x = SL_CTX(c, sl_mod_auth);
    if (!x || !x->rule) return;
    const auth_rule *r = x->rule;
    if (c->resp.status == 401 && !x->passed) {
        char v[512];
        if (!r->digest) {
            snprintf(v, sizeof v, "Basic realm=\"%s\", charset=\"UTF-8\"", r->realm);
            sl_resp_header(c, "WWW-Authenticate", v);
            return;
        }
        static const struct { int a; const char *name; } al[] = {
            {SL_DIGEST_SHA256, "SHA-256"}, {SL_DIGEST_MD5, "MD5"}};
        for (size_t i = 0; i < 2; i++) {
            if (!(r->algos & al[i].a)) continue;
            /* A stale nonce is renewed for the algorithm the client used (as lighttpd). */
            if (x->stale && (x->algo & (SL_DIGEST_MD5 | SL_DIGEST_SHA256)) && !(x->algo & al[i].a))
                continue;
            char n[SL_NONCE_MAX];
            sl_nonce_make(r->realm, r->nonce_secret, time(NULL), n);
            snprintf(v, sizeof v,
                     "Digest realm=\"%s\", charset=\"UTF-8\", algorithm=%s%s, nonce=\"%s\", "
                     "qop=\"auth\"%s", r->realm, al[i].name,
                     (r->algos & SL_DIGEST_SESS) ? "-sess" : "", n, x->stale ? ", stale=true" : "");
            sl_resp_header(c, "WWW-Authenticate", v);
        }
    } else if (c->resp.status == 503 && x->busy) {
        sl_resp_header(c, "Retry-After", "2"); /* the client may come back shortly */
    } else if (x->passed && x->auth_info) {
        sl_resp_header(c, "Authentication-Info", x->auth_info);
    }
}

/* ---- process ---- */

static int auth_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    (void)srv;
    (void)conf;
    int r = sl_nonce_init(0);
    if (r < 0) snprintf(err, errlen, "mod_auth: the Digest nonce secret and table: %s", strerror(-r));
    return r < 0 ? -1 : 0;
}

static void auth_fini(sl_server *srv)
{
    (void)srv;
    sl_nonce_fini();
}

static void auth_status(sl_server *srv, sl_status_out *o)
{
    (void)srv;
#define N(v) atomic_load_explicit(&v, memory_order_relaxed)
    sl_status_list(o, "auth", "what");
    sl_status_item(o, "requests");
    sl_status_num(o, "passed", N(n_passed), true);
    sl_status_num(o, "challenged", N(n_challenged), true);
    sl_status_num(o, "denied", N(n_denied), true);
    sl_status_num(o, "malformed", N(n_malformed), true);
    sl_status_num(o, "stale_nonces", N(n_stale), true);
    sl_status_num(o, "replayed_nonces", N(n_replayed), true);
    sl_status_num(o, "busy", N(n_busy), true);
    unsigned running, waiting;
    sl_tlimit_get(&checks, &running, &waiting, NULL);
    sl_status_num(o, "running", running, false);
    sl_status_num(o, "waiting", waiting, false);
    sl_status_num(o, "errors", N(n_errors), true);
    sl_status_item_end(o);
    sl_status_list_end(o);
#undef N
}

/* lighttpd loads mod_authn_file with mod_auth (its file backends were split off in 1.4.43 and
 * are appended automatically): here they are one module, loaded by either name. */
sl_module sl_mod_auth = {
    SL_MODULE_HEAD("auth", auth_conf, "mod_auth", "mod_authn_file"),
    .keys = SL_KEYS(
        SL_KEY_PREP("auth.backend", SL_KEY_VALUE, backend, prep_backend, NULL),
        SL_KEY_PREP("auth.backend.plain.userfile", SL_KEY_PATH, plain_file, prep_userfile, NULL),
        SL_KEY_PREP("auth.backend.htpasswd.userfile", SL_KEY_PATH, htpasswd_file, prep_userfile,
                    NULL),
        SL_KEY_PREP("auth.backend.htdigest.userfile", SL_KEY_PATH, htdigest_file, prep_userfile,
                    NULL),
        SL_KEY_PREP("auth.require", SL_KEY_VALUE, require, prep_require, rules_release),
        SL_KEY_AT("auth.debug", SL_KEY_INT, debug),
        {"auth.cache", SL_KEY_VALUE, 0, 0, prep_refused, NULL},
        {"auth.extern-authn", SL_KEY_VALUE, 0, 0, prep_refused, NULL}),
    .init = auth_init,
    .fini = auth_fini,
    .uri_clean = auth_uri_clean,
    .response_start = auth_response_start,
    .status = auth_status,
};
