/* mod_deflate: compressed answers for static files (lighttpd 1.4's mod_deflate keys, its older
 * compress.* names, and precompressed siblings).
 *
 * The module owns no handler: it gives the static module a variant hook (mod_static.h), which
 * sl_static_resolve calls for every regular file it is about to answer, on the loop from the
 * caches or on a stat thread, the same way it resolved the file. The hook reads the client's
 * Accept-Encoding (accept_enc.h) and puts another file in the place of the original: a sibling
 * foo.css.br / .zst / .gz (deflate.precompressed, seekless's own key: lighttpd has none) that is
 * a regular file not older than foo.css, or a copy compressed by this module. From there the
 * static module goes on as for any file: preconditions against the variant's ETag ("<etag>-gzip",
 * lighttpd's form), Range on the encoded bytes, sendfile.
 *
 * Nothing blocks the loop: on the loop the hook only opens what the dentry cache holds
 * (RESOLVE_CACHED) and asks for a stat thread (-EAGAIN) for anything else. On the thread it
 * compresses: into deflate.cache-dir when set (a temporary file renamed into place, named by
 * path and ETag, so a file that changed gets a new name and a stale copy is never found), else
 * into an anonymous memory file (memfd) for this one answer. Either way the result is a file
 * and is sent with sendfile like any other. At most half the stat threads compress at once so
 * lookups always find a thread; beyond that, and whenever compressing fails (a full disk, no
 * memory), the answer is the file itself, which is always right, with a log line.
 */
#include <brotli/encode.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "accept_enc.h"
#include "conf.h"
#include "connection.h"
#include "core_conf.h"
#include "log.h"
#include "mod_static.h"
#include "module.h"
#include "openat.h"
#include "precond.h"
#include "server.h"
#include "status.h"
#include "threadpool.h"

/* deflate.mimetypes: prefixes of Content-Type ('*' at the end dropped, as lighttpd does). */
typedef struct df_mimes {
    size_t n;
    char *v[];
} df_mimes;

/* deflate.allowed-encodings: the server's order of preference. */
typedef struct df_encs {
    size_t n;
    sl_encoding e[SL_ENC_N];
} df_encs;

typedef struct df_conf {
    const df_mimes *mimetypes;   /* NULL or empty: compress nothing on the fly (lighttpd's
                                  * default) */
    const df_encs *allowed;      /* NULL: zstd, br, gzip, deflate (lighttpd's default order) */
    long max_size_kb;            /* deflate.max-compress-size (KB, 0: no limit) */
    long min_size;               /* deflate.min-compress-size (bytes: compress above it) */
    const long *level;           /* deflate.compression-level 1..9 (NULL or -1: each coder's) */
    long output_buffer_size;     /* deflate.output-buffer-size: bytes of the coder's output
                                  * buffer (0: DF_OUT_BLOCK) */
    long work_block_size;        /* deflate.work-block-size: KiB read and fed to the coder at a
                                  * time (0: DF_IN_BLOCK) */
    const double *max_loadavg;   /* deflate.max-loadavg (NULL or 0: no limit) */
    const char *cache_dir;       /* deflate.cache-dir (absolute, no trailing '/'; NULL or "":
                                  * none) */
    bool precompressed;          /* deflate.precompressed: look for foo.br, .zst, .gz */
} df_conf;

#define SL_KEY_CONF df_conf

sl_module sl_mod_deflate;

#define DCONF(conf) SL_MODCONF(conf, sl_mod_deflate, df_conf)

static const df_encs default_encs = {4, {SL_ENC_ZSTD, SL_ENC_BR, SL_ENC_GZIP, SL_ENC_DEFLATE}};
/* The extension of a precompressed sibling per coding ("": none is looked for). */
static const char *const sibling_ext[SL_ENC_N] = {".br", ".zst", ".gz", ""};

/* Counters for the status page (any thread). */
static _Atomic uint64_t n_precompressed, n_cache_hits, n_compressed, n_busy, n_failed,
    n_not_modified, bytes_in, bytes_out;
static sl_tlimit compressing = SL_TLIMIT_INIT(0); /* half the stat threads; none waits */
static unsigned stat_threads = 1;    /* server.max-stat-threads (set at init) */
static _Atomic long last_bad_log;    /* rate limits of the malformed Accept-Encoding line */
static _Atomic long last_fail_log;   /* and of the "sent uncompressed" line (a full disk fails
                                      * every request: one line a second says it) */

/* ---- keys ---- */

static void mimes_release(void *p)
{
    df_mimes *m = p;
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free(m->v[i]);
    free(m);
}

static int prep_mimetypes(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_ARRAY || !sl_cval_strings(v, false))
        return sl_key_fail(ctx, "%s must be a list of MIME types (\"text/\", \"\" for all)",
                           ctx->assign->key);
    /* ( ) makes an empty list: compress nothing. (A prepare that made nothing would leave the
     * raw value in the field, so "none" is always a made object.) */
    df_mimes *m = calloc(1, sizeof *m + v->n_items * sizeof m->v[0]);
    if (!m) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        char *s = strdup(v->items[i].val->str);
        if (!s) {
            mimes_release(m);
            return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
        }
        size_t n = strlen(s);
        if (n > 2 && s[n - 1] == '*') s[n - 1] = 0; /* "text/..*" is the prefix "text/" */
        m->v[m->n++] = s;
    }
    *out = m;
    return 0;
}

static int prep_encodings(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_ARRAY || !sl_cval_strings(v, false))
        return sl_key_fail(ctx, "%s must be a list of \"br\", \"zstd\", \"gzip\", \"deflate\"",
                           ctx->assign->key);
    df_encs *e = calloc(1, sizeof *e);
    if (!e) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    for (size_t i = 0; i < v->n_items; i++) {
        const char *s = v->items[i].val->str;
        int enc = !strcmp(s, "brotli") ? SL_ENC_BR : sl_encoding_from_name(s, strlen(s));
        if (enc < 0) {
            snprintf(ctx->err, ctx->errlen, "%s \"%s\": %s", ctx->assign->key, s,
                     strstr(s, "bzip2") ? "seekless has no bzip2 coder (browsers do not take it); "
                                          "use \"br\", \"zstd\", \"gzip\" or \"deflate\""
                                        : "unknown coding; use \"br\", \"zstd\", \"gzip\" or \"deflate\"");
            free(e);
            return -1;
        }
        bool dup = false;
        for (size_t k = 0; k < e->n; k++) dup |= e->e[k] == (sl_encoding)enc;
        if (!dup) e->e[e->n++] = (sl_encoding)enc;
    }
    *out = e;
    return 0;
}

static int prep_level(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    if (v->type != SL_CV_INT || ((v->num < 1 || v->num > 9) && v->num != -1))
        return sl_key_fail(ctx, "deflate.compression-level must be between 1 and 9");
    long *l = malloc(sizeof *l);
    if (!l) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *l = (long)v->num; /* -1: lighttpd's "each coder's default" */
    *out = l;
    return 0;
}

/* lighttpd stores both as a short: 0..65535, 0 for the default. An output buffer below 1 KiB
 * would cost a write per few hundred bytes of output. */
static int prep_outbuf(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->num == 0 || (v->num >= 1024 && v->num <= 65535)) return 0;
    snprintf(ctx->err, ctx->errlen, "%s must be 0 (the default, 128 KiB) or 1024..65535 bytes",
             ctx->assign->key);
    return -1;
}

static int prep_workblock(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (v->num >= 0 && v->num <= 65535) return 0;
    snprintf(ctx->err, ctx->errlen, "%s must be 0 (the default, 128 KiB) or 1..65535 (KiB)",
             ctx->assign->key);
    return -1;
}

static int prep_loadavg(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    double d = 0;
    if (v->type == SL_CV_INT) {
        d = (double)v->num;
    } else if (v->type == SL_CV_STRING) {
        char *end;
        d = v->str[0] ? strtod(v->str, &end) : 0;
        if (v->str[0] && (*end || d < 0))
            return sl_key_fail(ctx, "%s \"%s\" is not a load average (\"3.5\")", ctx->assign->key,
                               v->str);
    } else {
        snprintf(ctx->err, ctx->errlen, "%s must be a string (\"3.5\")", ctx->assign->key);
        return -1;
    }
    double *p = malloc(sizeof *p); /* 0: no limit */
    if (!p) return snprintf(ctx->err, ctx->errlen, "out of memory"), -1;
    *p = d;
    *out = p;
    return 0;
}

/* mkdir -p, mode 0700 as lighttpd makes its cache directories; what it makes is given to uid and
 * gid unless uid is (uid_t)-1 (start-up as root: the server's user must write there). 0 or
 * -errno. */
static int mkdirs_owned(const char *path, uid_t uid, gid_t gid)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0700) == 0) {
            if (uid != (uid_t)-1 && chown(buf, uid, gid) < 0) return -errno;
        } else if (errno != EEXIST) {
            return -errno;
        }
        if (!(*p = c)) return 0;
    }
}

static int mkdirs(const char *path)
{
    return mkdirs_owned(path, (uid_t)-1, (gid_t)-1);
}

/* Who the server will run as, when start-up (as root) switches to server.username/groupname:
 * the owner of the cache directories it makes. 0, or -1 when it does not switch. */
static int server_user(const sl_key_ctx *ctx, uid_t *uid, gid_t *gid)
{
    const char *u = sl_key_top_string(ctx, "server.username");
    const char *g = sl_key_top_string(ctx, "server.groupname");
    if (geteuid() != 0 || (!u && !g)) return -1;
    struct passwd *pw = u ? getpwnam(u) : NULL;
    struct group *gr = g ? getgrnam(g) : NULL;
    if ((u && !pw) || (g && !gr)) return -1; /* the core reports it */
    *uid = pw ? pw->pw_uid : 0;
    *gid = gr ? gr->gr_gid : pw ? pw->pw_gid : 0;
    return 0;
}

static int prep_cache_dir(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    char *p;
    if (sl_key_dir(v, ctx, &p) < 0) return -1;
    if (!p) { /* "": none, as lighttpd */
        if (!(p = strdup(""))) return sl_key_fail(ctx, "out of memory");
        *out = p;
        return 0;
    }
    if (ctx->check_system) {
        /* lighttpd makes it at start-up too; a name that cannot be a directory is an error now,
         * not a log line per request. */
        struct stat st;
        uid_t uid = (uid_t)-1;
        gid_t gid = (gid_t)-1;
        server_user(ctx, &uid, &gid);
        char *at = sl_key_root_path(ctx, p); /* inside server.chroot */
        int r = !at ? -ENOMEM
                : stat(at, &st) == 0 ? (S_ISDIR(st.st_mode) ? 0 : -ENOTDIR)
                                     : mkdirs_owned(at, uid, gid);
        free(at);
        if (r < 0) {
            snprintf(ctx->err, ctx->errlen, "%s \"%s\": %s", ctx->assign->key, p, strerror(-r));
            free(p);
            return -1;
        }
    }
    *out = p;
    return 0;
}

static int prep_params(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)v;
    (void)out;
    snprintf(ctx->err, ctx->errlen,
             "deflate.params is not supported: seekless tunes its coders with "
             "deflate.compression-level only (window sizes and strategies keep each library's "
             "defaults)");
    return -1;
}

/* ---- negotiation ---- */

static bool mime_ok(const df_mimes *m, const char *ctype)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strncmp(ctype, m->v[i], strlen(m->v[i]))) return true;
    return false;
}

/* Above deflate.max-loadavg? The load is read at most once a second (/proc/loadavg costs no
 * disk, but there is no need to read it per request). */
static bool too_loaded(const df_conf *d)
{
    static _Atomic long when;
    static _Atomic double load;
    if (!d->max_loadavg || *d->max_loadavg <= 0) return false;
    long now = (long)time(NULL);
    if (atomic_load_explicit(&when, memory_order_relaxed) != now) {
        double l[1];
        if (getloadavg(l, 1) == 1) atomic_store_explicit(&load, l[0], memory_order_relaxed);
        atomic_store_explicit(&when, now, memory_order_relaxed);
    }
    return atomic_load_explicit(&load, memory_order_relaxed) > *d->max_loadavg;
}

/* At most once a second per kind of line: true when this caller may log. */
static bool log_turn(_Atomic long *last_log)
{
    long now = (long)time(NULL);
    long last = atomic_load_explicit(last_log, memory_order_relaxed);
    return last != now && atomic_compare_exchange_strong(last_log, &last, now);
}

static void log_bad(const sl_http_header *h, unsigned bad)
{
    if (!log_turn(&last_bad_log)) return;
    sl_log("Accept-Encoding \"%.*s\": %u malformed element(s) ignored (logged once a second)",
           (int)(h->value_len > 200 ? 200 : h->value_len), h->value, bad);
}

/* ---- compression (stat threads only) ---- */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Buffer sizes when the keys are unset: large enough that a file costs few preads and writes,
 * small enough that the threads compressing at once hold little memory. */
#define DF_IN_BLOCK (128 * 1024)
#define DF_OUT_BLOCK (128 * 1024)

/* Compress size bytes of in (read with pread: the fd may be shared) into out with coding e,
 * in_block bytes read at a time, out_block bytes of coder output written at a time.
 * 0 or a negative errno (-ENOSPC for a full disk, -ENODATA when the file shrank). */
static int compress_file(int in, off_t size, int out, sl_encoding e, const long *level,
                         size_t in_block, size_t out_block)
{
    unsigned char *ib = malloc(in_block), *ob = malloc(out_block);
    int rc = 0;
    z_stream z;
    BrotliEncoderState *br = NULL;
    ZSTD_CCtx *zs = NULL;
    bool zinit = false;
    if (!ib || !ob) {
        rc = -ENOMEM;
        goto out;
    }
    if (e == SL_ENC_GZIP || e == SL_ENC_DEFLATE) {
        memset(&z, 0, sizeof z);
        /* gzip: the gzip wrapper (windowBits + 16); deflate: the zlib format RFC 9110 §8.4.1.2
         * names (lighttpd sends raw deflate; clients take both). */
        if (deflateInit2(&z, level ? (int)*level : Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                         e == SL_ENC_GZIP ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            rc = -ENOMEM;
            goto out;
        }
        zinit = true;
    } else if (e == SL_ENC_BR) {
        br = BrotliEncoderCreateInstance(NULL, NULL, NULL);
        if (!br) {
            rc = -ENOMEM;
            goto out;
        }
        /* Quality 11 (the library's default) is for offline use; 5 compresses better than
         * gzip -6 at a similar speed. */
        BrotliEncoderSetParameter(br, BROTLI_PARAM_QUALITY, level ? (uint32_t)*level : 5);
        BrotliEncoderSetParameter(br, BROTLI_PARAM_SIZE_HINT,
                                  size > (1 << 30) ? 1u << 30 : (uint32_t)size);
    } else {
        zs = ZSTD_createCCtx();
        if (!zs) {
            rc = -ENOMEM;
            goto out;
        }
        ZSTD_CCtx_setParameter(zs, ZSTD_c_compressionLevel, level ? (int)*level : 3);
        ZSTD_CCtx_setPledgedSrcSize(zs, (unsigned long long)size);
    }
    off_t at = 0;
    for (;;) {
        size_t want = (uint64_t)(size - at) > in_block ? in_block : (size_t)(size - at);
        ssize_t got = 0;
        if (want) {
            got = pread(in, ib, want, at);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                rc = -errno;
                goto out;
            }
            if (got == 0) {
                rc = -ENODATA; /* truncated while we read */
                goto out;
            }
            at += got;
        }
        bool last = at == size;
        if (zinit) {
            z.next_in = ib;
            z.avail_in = (uInt)got;
            int zr;
            do {
                z.next_out = ob;
                z.avail_out = out_block;
                zr = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
                if (zr == Z_STREAM_ERROR) {
                    rc = -EIO;
                    goto out;
                }
                if ((rc = write_all(out, ob, out_block - z.avail_out)) < 0) goto out;
            } while (z.avail_out == 0 || (last && zr != Z_STREAM_END));
        } else if (br) {
            size_t avail_in = (size_t)got;
            const uint8_t *next_in = ib;
            do {
                size_t avail_out = out_block;
                uint8_t *next_out = ob;
                if (!BrotliEncoderCompressStream(br, last ? BROTLI_OPERATION_FINISH
                                                          : BROTLI_OPERATION_PROCESS,
                                                 &avail_in, &next_in, &avail_out, &next_out,
                                                 NULL)) {
                    rc = -EIO;
                    goto out;
                }
                if ((rc = write_all(out, ob, out_block - avail_out)) < 0) goto out;
            } while (avail_in || BrotliEncoderHasMoreOutput(br) ||
                     (last && !BrotliEncoderIsFinished(br)));
        } else {
            ZSTD_inBuffer zin = {ib, (size_t)got, 0};
            size_t left;
            do {
                ZSTD_outBuffer zout = {ob, out_block, 0};
                left = ZSTD_compressStream2(zs, &zout, &zin, last ? ZSTD_e_end : ZSTD_e_continue);
                if (ZSTD_isError(left)) {
                    rc = -EIO;
                    goto out;
                }
                if ((rc = write_all(out, ob, zout.pos)) < 0) goto out;
            } while (zin.pos < zin.size || (last && left));
        }
        if (last) break;
    }
out:
    if (zinit) deflateEnd(&z);
    if (br) BrotliEncoderDestroyInstance(br);
    if (zs) ZSTD_freeCCtx(zs);
    free(ib);
    free(ob);
    return rc;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Compress the file into a new file: cache_name's directory (renamed into place) or, with no
 * cache, an anonymous memory file. The fd of the result (read from offset 0), or -errno. */
static int make_copy(int fd, const struct stat *st, sl_encoding e, const df_conf *d,
                     const char *cache_name)
{
    int out;
    char tmp[4200];
    if (cache_name) {
        char *slash = strrchr(cache_name, '/');
        size_t dl = (size_t)(slash - cache_name);
        memcpy(tmp, cache_name, dl);
        tmp[dl] = 0;
        int r = mkdirs(tmp);
        if (r < 0) return r;
        if (snprintf(tmp, sizeof tmp, "%.4190s.XXXXXX", cache_name) >= (int)sizeof tmp)
            return -ENAMETOOLONG;
        out = mkostemp(tmp, O_CLOEXEC);
    } else {
        out = memfd_create("seekless-deflate", MFD_CLOEXEC);
    }
    if (out < 0) return -errno;
    int r = compress_file(fd, st->st_size, out, e, d->level && *d->level > 0 ? d->level : NULL,
                          d->work_block_size > 0 ? (size_t)d->work_block_size * 1024 : DF_IN_BLOCK,
                          d->output_buffer_size > 0 ? (size_t)d->output_buffer_size : DF_OUT_BLOCK);
    struct stat now;
    if (r == 0 && (fstat(fd, &now) < 0 || !same_file(st, &now)))
        r = -ESTALE; /* changed while we read it: this copy belongs to no version */
    if (r == 0 && cache_name && rename(tmp, cache_name) < 0) r = -errno;
    if (r < 0) {
        if (cache_name) unlink(tmp);
        close(out);
        return r;
    }
    return out;
}

/* ---- the variant hook ---- */

static int variant(const sl_conf *conf, int dirfd, const sl_http_request *req, const char *name,
                   size_t name_len, int fd, const struct stat *st, const char *ctype,
                   unsigned flags, sl_static_variant *v, bool *vary)
{
    const df_conf *d = DCONF(conf);
    const bool worker = flags & SL_RESOLVE_WORKER;
    const bool may_wait = !worker && !(flags & SL_RESOLVE_NO_WORKER); /* -EAGAIN allowed */
    bool fly = d->mimetypes && d->mimetypes->n && mime_ok(d->mimetypes, ctype) && st->st_size > d->min_size &&
               (!d->max_size_kb || st->st_size <= (off_t)d->max_size_kb * 1024);
    if (!d->precompressed && !fly) return 0;
    *vary = true; /* a variant could exist: caches must key on Accept-Encoding */
    const sl_http_header *ae = sl_http_find_header(req, "Accept-Encoding");
    if (!ae) return 0; /* identity is what a client that says nothing surely takes */
    sl_ae_prefs pref;
    sl_ae_parse(ae, &pref);
    if (pref.bad) log_bad(ae, pref.bad);
    const df_encs *allowed = d->allowed ? d->allowed : &default_encs;
    sl_encoding order[SL_ENC_N];
    size_t n = sl_ae_order(&pref, allowed->e, allowed->n, order);
    const sl_core_conf *core = sl_core(conf);
    const int oflags = sl_static_open_flags(conf);

    if (d->precompressed) {
        for (size_t i = 0; i < n; i++) {
            const char *ext = sibling_ext[order[i]];
            char rel[4200];
            if (!*ext) continue;
            int k = snprintf(rel, sizeof rel, "%.*s%s", (int)name_len - 1, name + 1, ext);
            if (k < 0 || (size_t)k >= sizeof rel) continue;
            int f = sl_open_beneath_ex(dirfd, rel, oflags, core->follow_symlink, !worker);
            if (f == -EAGAIN) {
                if (may_wait) return -EAGAIN;
                continue; /* no thread to be had: only what the caches know */
            }
            if (f < 0) continue;
            struct stat s2;
            if (fstat(f, &s2) < 0 || !S_ISREG(s2.st_mode) || s2.st_mtim.tv_sec < st->st_mtim.tv_sec ||
                (s2.st_mtim.tv_sec == st->st_mtim.tv_sec && s2.st_mtim.tv_nsec < st->st_mtim.tv_nsec)) {
                close(f); /* older than the file: made from another version of it */
                continue;
            }
            v->fd = f;
            v->st = s2;
            v->tag = s2;
            v->encoding = sl_encoding_name(order[i]);
            atomic_fetch_add_explicit(&n_precompressed, 1, memory_order_relaxed);
            return 1;
        }
    }
    if (!fly || n == 0 || too_loaded(d)) return 0;
    sl_encoding e = order[0];
    v->encoding = sl_encoding_name(e);
    v->tag = *st;
    char etag[SL_ETAG_MAX + 16];
    size_t el = sl_etag_make(etag, (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
                             (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    snprintf(etag + el - 1, sizeof etag - (el - 1), "-%s\"", v->encoding);
    /* The client holds this variant already: the validators decide without the bytes, so a 304
     * costs no compression (the static module checks that they do not pass). */
    const sl_static_conf *sc = SL_MODCONF(conf, sl_mod_static, sl_static_conf);
    if (sc->etags && req->if_none_match) {
        for (const sl_http_header *h = req->if_none_match; h; h = h->next) {
            if (sl_etag_list_match(h->value, h->value_len, etag, true)) {
                v->fd = -1;
                atomic_fetch_add_explicit(&n_not_modified, 1, memory_order_relaxed);
                return 1;
            }
        }
    }
    char cname[4200];
    const char *cache_name = NULL;
    if (d->cache_dir && *d->cache_dir) {
        /* Named by the document root (its inode: roots are not known by name here), the path
         * and the ETag with the coding, as lighttpd names its copies by path and ETag. */
        struct stat rs;
        if (fstat(dirfd, &rs) < 0) return 0;
        int k = snprintf(cname, sizeof cname, "%s/%llx-%llx%.*s-%.*s", d->cache_dir,
                         (unsigned long long)rs.st_dev, (unsigned long long)rs.st_ino,
                         (int)name_len, name, (int)strlen(etag) - 2, etag + 1);
        if (k < 0 || (size_t)k >= sizeof cname) return 0;
        cache_name = cname;
        struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
                               .resolve = worker ? 0 : RESOLVE_CACHED};
        int f = (int)syscall(SYS_openat2, AT_FDCWD, cname, &how, sizeof how);
        if (f < 0 && errno == EAGAIN) {
            if (may_wait) return -EAGAIN;
            return 0;
        }
        if (f >= 0) {
            struct stat s2;
            if (fstat(f, &s2) == 0 && S_ISREG(s2.st_mode)) {
                v->fd = f;
                v->st = s2;
                v->st.st_mtim = st->st_mtim; /* Last-Modified: the file's */
                atomic_fetch_add_explicit(&n_cache_hits, 1, memory_order_relaxed);
                return 1;
            }
            close(f);
        }
    }
    if (!worker) return may_wait ? -EAGAIN : 0;
    /* Never more than half the stat threads compress: lookups keep finding a thread. */
    if (!sl_tlimit_enter(&compressing, stat_threads)) {
        atomic_fetch_add_explicit(&n_busy, 1, memory_order_relaxed);
        return 0;
    }
    int f = make_copy(fd, st, e, d, cache_name);
    sl_tlimit_leave(&compressing);
    if (f < 0) {
        uint64_t failed = atomic_fetch_add_explicit(&n_failed, 1, memory_order_relaxed) + 1;
        if (log_turn(&last_fail_log))
            sl_log("deflate %.*s (%s): %s; sent uncompressed (%llu so far, logged once a second)",
                   (int)name_len, name, v->encoding, strerror(-f), (unsigned long long)failed);
        return 0;
    }
    struct stat s2;
    if (fstat(f, &s2) < 0) {
        close(f);
        return 0;
    }
    atomic_fetch_add_explicit(&n_compressed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_in, (uint64_t)st->st_size, memory_order_relaxed);
    atomic_fetch_add_explicit(&bytes_out, (uint64_t)s2.st_size, memory_order_relaxed);
    v->fd = f;
    v->st = s2;
    v->st.st_mtim = st->st_mtim;
    return 1;
}

/* ---- module ---- */

static int deflate_init(sl_server *srv, const void *conf, char *err, size_t errlen)
{
    (void)conf;
    (void)err;
    (void)errlen;
    /* (The pool starts later; its size is the config's.) */
    long t = srv->global->max_stat_threads;
    stat_threads = t > 0 ? (unsigned)t : 1;
    sl_static_set_variant_hook(variant);
    return 0;
}

static void deflate_fini(sl_server *srv)
{
    (void)srv;
    sl_static_set_variant_hook(NULL);
}

static void deflate_status(sl_server *srv, sl_status_out *o)
{
    (void)srv;
#define L(x) atomic_load_explicit(&(x), memory_order_relaxed)
    sl_status_list(o, "deflate", "what");
    sl_status_item(o, "answers");
    sl_status_num(o, "precompressed", L(n_precompressed), true);
    sl_status_num(o, "cache_hits", L(n_cache_hits), true);
    sl_status_num(o, "compressed", L(n_compressed), true);
    sl_status_num(o, "not_modified", L(n_not_modified), true);
    sl_status_num(o, "busy_uncompressed", L(n_busy), true);
    sl_status_num(o, "failed_uncompressed", L(n_failed), true);
    sl_status_num(o, "bytes_in", L(bytes_in), true);
    sl_status_num(o, "bytes_out", L(bytes_out), true);
    unsigned running;
    sl_tlimit_get(&compressing, &running, NULL, NULL);
    sl_status_num(o, "running", running, false);
    sl_status_item_end(o);
    sl_status_list_end(o);
#undef L
}

static void deflate_defaults(void *p)
{
    df_conf *d = p;
    d->max_size_kb = 128 * 1024; /* 128 MB, lighttpd's */
    d->min_size = 256;
}

sl_module sl_mod_deflate = {
    SL_MODULE_HEAD("deflate", df_conf, "mod_deflate", "mod_compress"),
    .keys = SL_KEYS(
        SL_KEY_PREP("deflate.mimetypes", SL_KEY_VALUE, mimetypes, prep_mimetypes, mimes_release),
        SL_KEY_PREP("deflate.allowed-encodings", SL_KEY_VALUE, allowed, prep_encodings, free),
        SL_KEY_AT("deflate.max-compress-size", SL_KEY_INT, max_size_kb),
        SL_KEY_AT("deflate.min-compress-size", SL_KEY_INT, min_size),
        SL_KEY_PREP("deflate.compression-level", SL_KEY_VALUE, level, prep_level, free),
        SL_KEY_PREP("deflate.output-buffer-size", SL_KEY_INT, output_buffer_size, prep_outbuf,
                    NULL),
        SL_KEY_PREP("deflate.work-block-size", SL_KEY_INT, work_block_size, prep_workblock, NULL),
        SL_KEY_PREP("deflate.max-loadavg", SL_KEY_VALUE, max_loadavg, prep_loadavg, free),
        SL_KEY_PREP("deflate.cache-dir", SL_KEY_VALUE, cache_dir, prep_cache_dir, free),
        {"deflate.params", SL_KEY_VALUE, 0, 0, prep_params, NULL},
        SL_KEY_AT("deflate.precompressed", SL_KEY_BOOL, precompressed),
        /* lighttpd's mod_compress names, which lighttpd 1.4 maps onto these. */
        SL_KEY_PREP("compress.filetype", SL_KEY_VALUE, mimetypes, prep_mimetypes, mimes_release),
        SL_KEY_PREP("compress.allowed-encodings", SL_KEY_VALUE, allowed, prep_encodings, free),
        SL_KEY_PREP("compress.cache-dir", SL_KEY_VALUE, cache_dir, prep_cache_dir, free),
        SL_KEY_AT("compress.max-filesize", SL_KEY_INT, max_size_kb),
        SL_KEY_PREP("compress.max-loadavg", SL_KEY_VALUE, max_loadavg, prep_loadavg, free)),
    .defaults = deflate_defaults,
    .init = deflate_init,
    .fini = deflate_fini,
    .status = deflate_status,
};
