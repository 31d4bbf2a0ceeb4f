/* Static files.
 *
 * The module decides policy; the core sends bytes. sl_static_resolve() is the synchronous core:
 * it opens the file beneath the document root with openat2(RESOLVE_BENEATH), so no path, "..",
 * or symlink can reach outside the root whatever the normalizer missed, applies index files,
 * access-deny lists, RFC 9110 preconditions and Range, and returns a decision. The hook turns
 * that decision into a response: headers in memory, the body as file chunks.
 */
#include "mod_static.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "connection.h"
#include "core_conf.h"
#include "fdcache.h"
#include "http_date.h"
#include "log.h"
#include "lookup.h"
#include "loop.h"
#include "openat.h"
#include "path.h"
#include "server.h"
#include "status.h"
#include "threadpool.h"

#define SL_KEY_CONF sl_static_conf

#define SCONF(conf) SL_MODCONF(conf, sl_mod_static, sl_static_conf)

static bool suffix_in(const sl_strlist *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++) {
        size_t n = strlen(l->v[i]);
        if (n <= len && memcmp(name + len - n, l->v[i], n) == 0) return true;
    }
    return false;
}

static bool header_date(const sl_http_header *h, time_t *t)
{
    return h && sl_http_date_parse(h->value, h->value_len, t) == 0;
}

int sl_static_open_flags(const sl_conf *conf)
{
    /* O_NONBLOCK: opening a FIFO must not block. */
    return O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
           (sl_core(conf)->use_noatime ? O_NOATIME : 0);
}

void sl_static_open_how(const sl_conf *conf, struct open_how *how)
{
    memset(how, 0, sizeof *how);
    how->flags = (unsigned long long)sl_static_open_flags(conf);
    how->resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
                   (sl_core(conf)->follow_symlink ? 0 : RESOLVE_NO_SYMLINKS);
}

static int resolve(const sl_conf *conf, int dirfd, const sl_http_request *req, const char *path,
                   size_t path_len, unsigned flags, int prefd, const sl_fdc_entry *ent,
                   sl_static_result *out);

/* mod_deflate's, when it is loaded: set once before the loops start. */
static sl_static_variant_fn variant_hook;

void sl_static_set_variant_hook(sl_static_variant_fn fn)
{
    __atomic_store_n(&variant_hook, fn, __ATOMIC_RELEASE);
}

int sl_static_backend_status(int status)
{
    return status == 403 || status == 404 || status == 503 ? status : 502;
}

static void report(const char *path, unsigned flags, sl_static_result *out)
{
    if ((flags & SL_RESOLVE_FROM_BACKEND) && out->status >= 400) {
        /* A path a backend named (X-Sendfile): a refusal or a missing file is the answer, any
         * other failure is the backend's (502). Each is logged with the path. */
        out->status = sl_static_backend_status(out->status);
        sl_log("X-Sendfile %s: %s -> %d", path,
               out->err ? strerror(-out->err) : "not a regular file or refused", out->status);
    }
}

int sl_static_resolve(const sl_conf *conf, int dirfd, const sl_http_request *req,
                      const char *path, size_t path_len, unsigned flags, int prefd,
                      sl_static_result *out)
{
    int r = resolve(conf, dirfd, req, path, path_len, flags, prefd, NULL, out);
    report(path, flags, out);
    return r;
}

/* Close fd unless it is borrowed from the open-file cache. */
static void drop(int fd, bool borrowed)
{
    if (fd >= 0 && !borrowed) close(fd);
}

static int resolve(const sl_conf *conf, int dirfd, const sl_http_request *req, const char *path,
                   size_t path_len, unsigned flags, int prefd, const sl_fdc_entry *ent,
                   sl_static_result *out)
{
    const bool cached = flags & SL_RESOLVE_CACHED;
    const bool borrowed = ent != NULL;
    const sl_static_conf *s = SCONF(conf);
    const sl_core_conf *core = sl_core(conf);
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (req->method != SL_METHOD_GET && req->method != SL_METHOD_HEAD) {
        out->status = sl_method_refused_status(req->method);
        return 0;
    }
    /* Deny lists apply to the name asked for, whether or not it exists (as lighttpd's
     * mod_access): a denied name must not be probed for existence. Index names are checked
     * again below. */
    if (suffix_in(&s->access_deny, path, path_len) ||
        suffix_in(&s->exclude_extensions, path, path_len)) {
        out->status = 403;
        return 0;
    }
    const int oflags = sl_static_open_flags(conf);
    const char *rel = path_len > 1 ? path + 1 : ".";
    /* The name that access-deny, exclude-extensions and the mime table look at. */
    char namebuf[4096];
    const char *name = path;
    size_t name_len = path_len;
    int fd;
    if (ent) {
        /* Kept open by the cache, a regular file: its stat and its name are known. */
        fd = ent->fd;
        out->st = ent->st;
        /* Copied, not printed: this is every cache hit. */
        size_t fl = strlen(ent->file);
        if (fl + 2 <= sizeof namebuf) {
            namebuf[0] = '/';
            memcpy(namebuf + 1, ent->file, fl + 1);
            name = namebuf;
            name_len = fl + 1;
        }
        goto regular;
    }
    /* The ring opens with RESOLVE_NO_SYMLINKS exactly when symlinks are not followed. */
    bool linked = flags & SL_RESOLVE_PREOPENED && core->follow_symlink, via;
    fd = flags & SL_RESOLVE_PREOPENED
             ? prefd
             : sl_open_beneath_noting_links(dirfd, rel, oflags, core->follow_symlink, cached,
                                            &linked);
    if (fd < 0) goto fail_errno;
    if (fstat(fd, &out->st) < 0) {
        fd = -errno;
        goto fail_errno;
    }
    if (S_ISDIR(out->st.st_mode) && (flags & SL_RESOLVE_FILE_ONLY)) {
        close(fd);
        out->status = 403;
        return 0;
    }
    if (S_ISDIR(out->st.st_mode)) {
        close(fd);
        fd = -1;
        if (path[path_len - 1] != '/' || (flags & SL_RESOLVE_URL_NO_SLASH)) {
            out->status = 301;
            return 0;
        }
        for (size_t i = 0; i < s->index_files.n && fd < 0; i++) {
            int n = snprintf(namebuf, sizeof namebuf, "%s%s", path, s->index_files.v[i]);
            if (n < 0 || (size_t)n >= sizeof namebuf) continue;
            int f = sl_open_beneath_noting_links(dirfd, namebuf + 1, oflags, core->follow_symlink,
                                                 cached, &via);
            if (f == -ENOENT || f == -ENOTDIR) continue;
            if (f < 0) {
                fd = f;
                goto fail_errno;
            }
            if (fstat(f, &out->st) < 0 || !S_ISREG(out->st.st_mode)) {
                close(f);
                continue;
            }
            fd = f;
            name = namebuf;
            name_len = (size_t)n;
            out->index_name = s->index_files.v[i];
            linked = linked || via;
        }
        if (fd < 0) {
            out->status = 403; /* a directory without an index; no listings */
            return 0;
        }
    } else if (!S_ISREG(out->st.st_mode)) {
        close(fd);
        out->status = 403;
        return 0;
    }
    out->no_links = !linked;
regular:
    if (suffix_in(&s->access_deny, name, name_len) ||
        suffix_in(&s->exclude_extensions, name, name_len)) {
        drop(fd, borrowed);
        out->status = 403;
        return 0;
    }
    out->content_type = sl_mime_lookup(core->mime, name, name_len);
    sl_static_variant_fn hook = __atomic_load_n(&variant_hook, __ATOMIC_ACQUIRE);
    const struct stat *tag = &out->st;
    sl_static_variant v;
    bool no_body = false;
    if (hook && !(flags & SL_RESOLVE_FROM_BACKEND)) {
        int h = hook(conf, dirfd, req, name, name_len, fd, &out->st, out->content_type, flags, &v,
                     &out->vary);
        if (h == -EAGAIN) {
            /* The variant needs a thread; the file is looked at again there. */
            drop(fd, borrowed);
            out->err = -EAGAIN;
            out->vary = false;
            return 0;
        }
        if (h == 1) {
            out->encoding = v.encoding;
            tag = &v.tag;
            if (v.fd >= 0) {
                drop(fd, borrowed);
                fd = v.fd;
                out->st = v.st;
            } else {
                no_body = true; /* the validators decide alone: never the file's bytes as these */
            }
        }
    }
    if (s->etags) {
        size_t n = sl_etag_make(out->etag, (unsigned long long)tag->st_ino,
                                (unsigned long long)tag->st_size, (long long)tag->st_mtim.tv_sec,
                                tag->st_mtim.tv_nsec);
        if (out->encoding) /* lighttpd's form: "<etag>-gzip" */
            snprintf(out->etag + n - 1, SL_ETAG_MAX - (n - 1), "-%s\"", out->encoding);
    }
    const char *etag = s->etags ? out->etag : NULL;
    time_t mtime = out->st.st_mtim.tv_sec;

    /* If-Match and If-None-Match are lists: all their lines count. The dates are singletons: on
     * several lines they are a list of dates, which RFC 9110 §13.1.3/§13.1.4 says to ignore. */
    sl_precond_input pin = {.get_or_head = true,
                            .if_match = req->if_match,
                            .if_none_match = req->if_none_match};
    pin.has_if_modified_since =
        header_date(sl_http_single(req->if_modified_since), &pin.if_modified_since);
    pin.has_if_unmodified_since =
        header_date(sl_http_single(req->if_unmodified_since), &pin.if_unmodified_since);
    sl_precond_result pr = sl_precond_eval(&pin, etag, mtime);
    if (pr != SL_PRECOND_PASS) {
        drop(fd, borrowed);
        out->status = (int)pr;
        return 0;
    }
    if (no_body) {
        /* The hook promised a 304 or 412 and the validators disagree: refuse rather than
         * label the file's own bytes with an encoding. */
        drop(fd, borrowed);
        sl_log("variant of %.*s: validators passed without a body", (int)name_len, name);
        out->status = 503;
        out->err = -EAGAIN;
        return 0;
    }
    out->fd = fd;
    out->status = 200;
    out->accept_ranges = core->range_requests;
    /* Range and If-Range are singletons. Range on several lines is an invalid Range, which a
     * server ignores (RFC 9110 §14.2): the whole file. An If-Range on several lines is a
     * condition that cannot hold (neither one entity-tag nor one date), so again the whole file;
     * ignoring it instead would send a part of a representation that may have changed. nginx and
     * lighttpd serve the first Range line; that picks one reading of an ambiguous request. */
    const sl_http_header *range = sl_http_single(req->range);
    if (!core->range_requests || !range || req->method != SL_METHOD_GET) return 0;
    if (req->if_range) {
        const sl_http_header *ir = sl_http_single(req->if_range);
        if (!ir) return 0;
        time_t d;
        bool has = sl_http_date_parse(ir->value, ir->value_len, &d) == 0;
        if (!sl_if_range_ok(ir->value, ir->value_len, has, d, etag, mtime)) return 0;
    }
    sl_range_result rr = sl_range_parse(range->value, range->value_len,
                                        (uint64_t)out->st.st_size, out->ranges,
                                        SL_STATIC_MAX_RANGES, &out->n_ranges);
    if (rr == SL_RANGE_OK) out->status = 206;
    if (rr == SL_RANGE_UNSATISFIABLE) {
        drop(fd, borrowed);
        out->fd = -1;
        out->status = 416;
    }
    return 0;

fail_errno:
    if (fd >= 0) close(fd);
    out->err = fd;
    if (fd == -EPERM && (flags & SL_RESOLVE_PREOPENED) && (oflags & O_NOATIME)) {
        out->status = 0; /* the ring refused O_NOATIME: open again without it */
        return 0;
    }
    if (fd == -EAGAIN && cached) {
        out->status = 0; /* would wait for the disk: the caller resolves on a stat thread */
        return 0;
    }
    out->status = sl_errno_to_status(fd);
    return 0;
}

/* Last-Modified and ETag. A file kept open by the cache keeps both strings made once. */
static void validators(sl_conn *c, const sl_static_result *r)
{
    sl_fdc_entry *e = c->file_ent;
    if (e && e->fd == r->fd && !r->encoding) {
        if (!e->user_set) {
            /* The entry is the holders' to read; the first holder writes under the same
             * values any other would, before it could be read through user_set. */
            sl_http_date_format(r->st.st_mtim.tv_sec, e->user);
            snprintf(e->user + SL_HTTP_DATE_LEN + 1, SL_FDC_USER - SL_HTTP_DATE_LEN - 1, "%s",
                     r->etag);
            __atomic_store_n(&e->user_set, true, __ATOMIC_RELEASE);
        }
        const char *etag = e->user + SL_HTTP_DATE_LEN + 1;
        sl_resp_header_static(c, "Last-Modified", 13, e->user, SL_HTTP_DATE_LEN);
        if (r->etag[0]) sl_resp_header_static(c, "ETag", 4, etag, strlen(etag));
        return;
    }
    char date[SL_HTTP_DATE_LEN + 1];
    sl_http_date_format(r->st.st_mtim.tv_sec, date);
    sl_resp_header(c, "Last-Modified", date);
    if (r->etag[0]) sl_resp_header(c, "ETag", r->etag);
}

/* Content-Encoding of a variant, Vary when the answer depends on Accept-Encoding (RFC 9110
 * §12.5.5: also on the identity answer, so caches keep the variants apart). */
static void encoding_fields(sl_conn *c, const sl_static_result *r)
{
    if (r->encoding) sl_resp_header_static(c, "Content-Encoding", 16, r->encoding, strlen(r->encoding));
    if (r->vary || r->encoding) sl_resp_header_static(c, "Vary", 4, "Accept-Encoding", 15);
}

void sl_static_redirect_dir(sl_conn *c)
{
    /* The slashed URL, re-encoded from the normalized path, with the query kept. */
    size_t cap = c->path_len * 3 + strlen(c->query) + 8;
    char *loc = malloc(cap);
    if (!loc) {
        sl_resp_error(c, 500);
        return;
    }
    ssize_t n = sl_path_encode(c->path, c->path_len, loc, cap - 1);
    if (n < 0) {
        free(loc);
        sl_resp_error(c, 500);
        return;
    }
    snprintf(loc + n, cap - (size_t)n, "/%s%s", c->query[0] ? "?" : "", c->query);
    c->status = 301;
    sl_resp_begin(c, 301);
    sl_resp_header(c, "Location", loc);
    free(loc);
    sl_resp_header(c, "Content-Type", "text/html");
    static const char body[] = "<!DOCTYPE html>\n<html><body>Moved Permanently</body></html>\n";
    sl_resp_end_headers(c, sizeof body - 1);
    if (c->req.method != SL_METHOD_HEAD) sl_chunkq_append_mem(&c->out, body, sizeof body - 1);
}

static void send_multipart(sl_conn *c, const sl_static_result *r, bool head)
{
    char boundary[40];
    snprintf(boundary, sizeof boundary, "SEEKLESS%016llx", ++c->loop->boundary_seq ^
             ((unsigned long long)c->loop->now << 20) ^ ((unsigned long long)c->loop->id << 56));
    size_t n = r->n_ranges;
    uint64_t total = 0;
    uint64_t size = (uint64_t)r->st.st_size;
    /* Compute the length first: the part headers are short and identical in shape. */
    for (size_t i = 0; i < n; i++) {
        char h[512];
        int k = snprintf(h, sizeof h,
                         "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu"
                         "\r\n\r\n",
                         boundary, r->content_type, (unsigned long long)r->ranges[i].first,
                         (unsigned long long)r->ranges[i].last, (unsigned long long)size);
        total += (uint64_t)k + (r->ranges[i].last - r->ranges[i].first + 1);
    }
    char tail[64];
    int tl = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    total += (uint64_t)tl;
    char ctype[80];
    snprintf(ctype, sizeof ctype, "multipart/byteranges; boundary=%s", boundary);
    sl_resp_begin(c, 206);
    sl_resp_header(c, "Content-Type", ctype);
    encoding_fields(c, r);
    if (r->accept_ranges) sl_resp_header(c, "Accept-Ranges", "bytes");
    validators(c, r);
    sl_resp_end_headers(c, total);
    if (head) return;
    for (size_t i = 0; i < n; i++) {
        sl_chunkq_printf(&c->out,
                         "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu"
                         "\r\n\r\n",
                         boundary, r->content_type, (unsigned long long)r->ranges[i].first,
                         (unsigned long long)r->ranges[i].last, (unsigned long long)size);
        sl_conn_send_file(c, c->file_fd, (off_t)r->ranges[i].first,
                          (off_t)(r->ranges[i].last - r->ranges[i].first + 1));
    }
    sl_chunkq_append_mem(&c->out, tail, (size_t)tl);
}

sl_hresult sl_static_respond(sl_conn *c, const sl_static_result *r)
{
    bool head = c->req.method == SL_METHOD_HEAD;
    char buf[96];
    c->status = r->status;
    switch (r->status) {
    case 200:
    case 206:
        if (c->file_fd >= 0 && c->file_fd != r->fd && !c->file_ent) close(c->file_fd);
        c->file_fd = r->fd; /* closed by the core when the request ends */
        sl_conn_file_is(c, r->fd, &r->st);
        sl_conn_mark(c, &c->t.open);
        if (r->status == 206 && r->n_ranges > 1) {
            send_multipart(c, r, head);
            return SL_FINISHED;
        }
        sl_resp_begin(c, r->status);
        sl_resp_header_static(c, "Content-Type", 12, r->content_type, strlen(r->content_type));
        encoding_fields(c, r);
        /* With ranges off, nothing: as nginx (max_ranges 0) and lighttpd 1.4
         * (server.range-requests = "disable") do. */
        if (r->accept_ranges) sl_resp_header_static(c, "Accept-Ranges", 13, "bytes", 5);
        validators(c, r);
        uint64_t first = 0, len = (uint64_t)r->st.st_size;
        if (r->status == 206) {
            first = r->ranges[0].first;
            len = r->ranges[0].last - first + 1;
            snprintf(buf, sizeof buf, "bytes %llu-%llu/%llu", (unsigned long long)first,
                     (unsigned long long)r->ranges[0].last, (unsigned long long)r->st.st_size);
            sl_resp_header(c, "Content-Range", buf);
        }
        sl_resp_end_headers(c, len);
        if (!head) sl_conn_send_file(c, r->fd, (off_t)first, (off_t)len);
        return SL_FINISHED;
    case 304:
        sl_resp_begin(c, 304);
        encoding_fields(c, r);
        validators(c, r);
        sl_resp_end_headers(c, UINT64_MAX); /* 304 carries no Content-Length of its own */
        return SL_FINISHED;
    case 301:
        sl_static_redirect_dir(c);
        return SL_FINISHED;
    case 416:
        snprintf(buf, sizeof buf, "bytes */%llu", (unsigned long long)r->st.st_size);
        sl_resp_begin(c, 416);
        if (r->vary) sl_resp_header_static(c, "Vary", 4, "Accept-Encoding", 15);
        sl_resp_header(c, "Content-Range", buf);
        sl_resp_end_headers(c, 0);
        return SL_FINISHED;
    default:
        c->error = r->err;
        return SL_ERROR;
    }
}

/* What the open-file cache tells apart: the directory, the open flags and rules, and whether a
 * directory may be answered with an index file (not when it is a 301 for a missing slash). */
static unsigned cache_key(const sl_conf *conf, unsigned flags)
{
    return (unsigned)sl_static_open_flags(conf) ^ (sl_core(conf)->follow_symlink ? 1u << 30 : 0) ^
           (flags & SL_RESOLVE_FILE_ONLY ? 1u << 29 : 0) ^
           (flags & SL_RESOLVE_URL_NO_SLASH ? 1u << 28 : 0);
}

/* Whether the open-file cache may answer for path: its entry for a directory URL holds the
 * index file that the global index-file.names found, so a request whose conditions chose
 * another list resolves its index itself (the cache's key has no room for the list). */
static bool cacheable(const sl_conn *c, const char *path, size_t len)
{
    /* A directory opened for this request alone (virtual hosting, user directories) cannot key
     * the cache. */
    if ((c->phys_root ? c->phys_root : c->docroot)->transient) return false;
    return !len || path[len - 1] != '/' ||
           SCONF(c->conf)->index_files.v == SCONF(c->loop->srv->cs->global)->index_files.v;
}

/* A file just opened for a 200/206: offer it to the open-file cache, which then holds it for
 * the request (the core gives it back when the request ends instead of closing the fd). Not a
 * file reached through a symlink: a change at the link's target would go unseen. */
static void keep_open(sl_conn *c, int dirfd, const char *dirpath, const char *path, size_t len,
                      unsigned flags, const sl_static_result *r)
{
    sl_fdc *fdc = c->loop->srv->fdc;
    if (!fdc || c->file_ent || (r->status != 200 && r->status != 206) || r->fd < 0 ||
        r->encoding || !cacheable(c, path, len))
        return; /* (a variant's fd is not the file the path names) */
    /* From its second request on: what follows costs system calls. */
    if (!sl_fdc_admit(fdc, dirfd, cache_key(c->conf, flags), path, len)) return;
    char file[4200];
    int n = snprintf(file, sizeof file, "%.*s%s", (int)(len > 1 ? len - 1 : 0), path + 1,
                     r->index_name ? r->index_name : "");
    if (n <= 0 || (size_t)n >= sizeof file) return;
    if (!r->no_links && sl_fdc_mode_of(fdc) != SL_FDC_INOTIFY) {
        /* (With inotify, sl_fdc_put looks at the path again without following symlinks, which
         * refuses such a file already.) From the dentry cache (the open just walked it), or
         * walked where the kernel cannot answer that way. */
        int f = sl_open_beneath_ex(dirfd, file, O_PATH | O_CLOEXEC, false, sl_open_cached_works());
        if (f < 0) return;
        close(f);
    }
    /* The mark lets the cache skip its own look at the path only for a file opened with no
     * symlink on the way: that look is also what refuses one reached through a link, whose
     * target's changes no watch would see. */
    sl_fdc_entry *e = sl_fdc_put(fdc, dirfd, dirpath, cache_key(c->conf, flags), path, len, file,
                                 r->fd, &r->st, sl_now_ns() / 1000000,
                                 r->no_links ? c->fdc_mark : 0);
    if (e) c->file_ent = e;
}

/* A stat that may wait for the disk, run on a stat thread. */
/* What to resolve, carried by a job: the request's conf (it outlives the job: the connection is
 * kept while the job is out), the directory the path is opened beneath, and the path, owned by
 * the job. */
typedef struct target {
    const sl_conf *conf;
    int dirfd;
    const char *dirpath;
    char *path;
    size_t len;
    unsigned flags;
} target;

static int target_set(target *t, const sl_conf *conf, int dirfd, const char *dirpath,
                      const char *path, size_t len, unsigned flags)
{
    t->conf = conf;
    t->dirfd = dirfd;
    t->dirpath = dirpath;
    t->len = len;
    t->flags = flags;
    t->path = malloc(len + 1);
    if (!t->path) return -ENOMEM;
    memcpy(t->path, path, len);
    t->path[len] = 0;
    return 0;
}

typedef struct stat_job {
    sl_job job;
    sl_conn *conn;
    target t;
    sl_static_result r;
    size_t block;      /* > 0: also read the first block of the body (thread backends) */
    bool readahead;    /* only start the kernel's readahead of that block */
    char *buf;         /* that block, handed to the connection's reader */
    size_t cap;
    off_t boff;
    ssize_t got;
    bool slept;        /* the lookup slept (lookup.h) */
} stat_job;

static int devnull = -1;
static pthread_once_t devnull_once = PTHREAD_ONCE_INIT;
static void devnull_open(void)
{
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
}

static void stat_work(sl_job *job)
{
    stat_job *j = (stat_job *)job;
    sl_conn *c = j->conn;
    long sleeps = sl_lookup_sleeps();
    /* The loop does not touch the request while the job is out (the connection is in the
     * HANDLE state and ignores socket events), so reading it here is safe. */
    sl_static_resolve(j->t.conf, j->t.dirfd, &c->req, j->t.path, j->t.len,
                      j->t.flags | SL_RESOLVE_WORKER, -1, &j->r);
    j->slept = sl_lookup_sleeps() != sleeps; /* the lookup, not the read below: that is data */
    const sl_static_result *r = &j->r;
    if (!j->block || (r->status != 200 && r->status != 206) || r->st.st_size == 0) return;
    off_t at = r->status == 206 ? (off_t)r->ranges[0].first : 0;
    off_t end = r->status == 206 ? (off_t)r->ranges[0].last + 1 : r->st.st_size;
    size_t want = (size_t)(end - at) < j->block ? (size_t)(end - at) : j->block;
    if (j->readahead) {
        /* Bring the first block into the page cache now, on this thread, without copying it
         * anywhere: sendfile() to /dev/null reads the pages (waiting for the disk) and drops
         * nothing but references. The loop then finds them resident and sends them inline, so
         * a cold small file costs one trip through a thread, not two. */
        pthread_once(&devnull_once, devnull_open);
        if (devnull < 0 || sendfile(devnull, r->fd, &at, want) < 0)
            posix_fadvise(r->fd, at, (off_t)want, POSIX_FADV_WILLNEED);
        return;
    }
    /* A cold file is read by a thread anyway: reading its first block here, while the inode
     * is hot, saves the request a second trip through the pool (for small files, the only
     * read they need). */
    void *p;
    /* Sized like the loop's own buffers (netback.c): the read rounded up, plus a page. */
    j->cap = ((want + 4095) & ~(size_t)4095) + 4096;
    if (posix_memalign(&p, 4096, j->cap) != 0) return;
    ssize_t got = sl_pread_full(r->fd, p, want, at);
    if (got <= 0) {
        free(p); /* the loop's own read will meet the error or the truncation again */
        return;
    }
    j->buf = p;
    j->boff = at;
    j->got = got;
}

/* The loop's inline-lookup policy (lookup.h). */
static sl_lookup_policy *lookup_policy(sl_loop *loop)
{
    return loop->mod[sl_mod_static.index];
}

/* A file looked up off the loop: what sl_lookup_prefer_ring learns from. */
static void note_size(sl_lookup_policy *lp, const sl_static_result *r)
{
    if (lp && (r->status == 200 || r->status == 206))
        sl_lookup_note_size(lp, r->st.st_size <= SL_HYBRID_RING_MAX);
}

static void stat_done(sl_job *job)
{
    stat_job *j = (stat_job *)job;
    sl_conn *c = j->conn;
    c->pending--;
    sl_lookup_policy *lp = lookup_policy(c->loop);
    if (lp && job->t_started && job->t_done >= job->t_started)
        sl_lookup_sample(lp, job->t_done - job->t_started, j->slept, false, job->t_done);
    note_size(lp, &j->r);
    if (sl_conn_timing(c)) {
        c->t.stat_queued = job->t_queued;
        c->t.stat_started = job->t_started;
        c->t.stat_done = job->t_done;
    }
    if (c->closed) {
        /* The client went away while we waited for the disk. */
        if (j->r.fd >= 0) close(j->r.fd);
        free(j->t.path);
        free(j->buf);
        free(j);
        sl_conn_release(c);
        return;
    }
    keep_open(c, j->t.dirfd, j->t.dirpath, j->t.path, j->t.len, j->t.flags, &j->r);
    free(j->t.path);
    sl_hresult r = sl_static_respond(c, &j->r);
    if (j->buf) sl_xfer_adopt(&c->xfer, j->r.fd, j->buf, j->cap, j->boff, (size_t)j->got);
    free(j);
    sl_conn_handled(c, r);
}

/* An open submitted to the loop's ring (the io-uring backend's, or hybrid's when the kernel gives
 * one): neither lookup nor open blocks the loop, and no thread of ours is involved. */
typedef struct ring_job {
    sl_openreq op;
    sl_conn *conn;
    target t;
} ring_job;

static int ring_open(sl_conn *c, ring_job *j, bool noatime);
static sl_hresult to_thread(sl_conn *c, const sl_conf *conf, int dirfd, const char *dirpath,
                            const char *path, size_t len, unsigned flags);

static void ring_done(sl_openreq *op)
{
    ring_job *j = (ring_job *)op;
    sl_conn *c = j->conn;
    int res = op->res;
    bool retried_flags = !(op->how.flags & O_NOATIME);
    c->pending--;
    sl_conn_mark(c, &c->t.stat_done);
    if (c->closed) {
        if (res >= 0) close(res);
        free(j->t.path);
        free(j);
        sl_conn_release(c);
        return;
    }
    sl_static_result r;
    /* The inode is in memory now; fstat and the rest of the decision do not wait. Index files
     * of a directory URL are opened inline (from the caches in the common case). */
    sl_static_resolve(j->t.conf, j->t.dirfd, &c->req, j->t.path, j->t.len,
                      SL_RESOLVE_PREOPENED | j->t.flags, res, &r);
    if (r.status == 0 && r.err == -EPERM && !retried_flags && ring_open(c, j, false) == 0) return;
    if (r.status == 0 && r.err == -EAGAIN) {
        /* The variant hook needs a thread (a sibling lookup or a compression). */
        sl_hresult h = to_thread(c, j->t.conf, j->t.dirfd, j->t.dirpath, j->t.path, j->t.len,
                                 j->t.flags);
        free(j->t.path);
        free(j);
        if (h != SL_WAIT) sl_conn_handled(c, h);
        return;
    }
    if (r.status == 0) r.status = sl_errno_to_status(r.err);
    note_size(lookup_policy(c->loop), &r);
    keep_open(c, j->t.dirfd, j->t.dirpath, j->t.path, j->t.len, j->t.flags, &r);
    free(j->t.path);
    free(j);
    sl_conn_handled(c, sl_static_respond(c, &r));
}

/* Submit j's open to the ring. On failure j stays the caller's. */
static int ring_open(sl_conn *c, ring_job *j, bool noatime)
{
    j->conn = c;
    j->op.dirfd = j->t.dirfd;
    j->op.path = j->t.len > 1 ? j->t.path + 1 : ".";
    sl_static_open_how(j->t.conf, &j->op.how);
    if (!noatime) j->op.how.flags &= ~(unsigned long long)O_NOATIME;
    /* The first open follows the loop's RESOLVE_CACHED miss; the retry without O_NOATIME finds
     * the path cached by the first. */
    j->op.uncached = noatime;
    j->op.done = ring_done;
    sl_conn_mark(c, &c->t.stat_queued);
    int r = sl_io_open_submit(&c->loop->io, &j->op);
    if (r < 0) return r;
    c->pending++;
    sl_lookup_policy *lp = lookup_policy(c->loop);
    if (lp) __atomic_store_n(&lp->ring_count, lp->ring_count + 1, __ATOMIC_RELAXED);
    return 0;
}

/* Resolve on a stat thread (SL_WAIT: the answer follows through sl_conn_handled), or, with no
 * thread to be had (none configured, queue full, no memory), here on the loop: a slow answer
 * beats none. */
static sl_hresult to_thread(sl_conn *c, const sl_conf *conf, int dirfd, const char *dirpath,
                            const char *path, size_t len, unsigned flags)
{
    sl_server *srv = c->loop->srv;
    sl_tpool *pool = srv->stat_pool;
    const sl_netbackend *nb = srv->nb;
    sl_static_result r;
    stat_job *j = pool ? malloc(sizeof *j) : NULL;
    if (j && target_set(&j->t, conf, dirfd, dirpath, path, len, flags) == 0) {
        j->job.work = stat_work;
        j->job.done = stat_done;
        j->conn = c;
        j->buf = NULL;
        j->readahead = nb->readahead_on_stat;
        j->block = (nb->read_on_stat || nb->readahead_on_stat) && c->req.method == SL_METHOD_GET
                       ? (size_t)srv->global->block_size
                       : 0;
        if (sl_tpool_submit(pool, c->loop->port, &j->job) == 0) {
            c->pending++;
            return SL_WAIT;
        }
        free(j->t.path);
    }
    free(j);
    sl_static_resolve(conf, dirfd, &c->req, path, len, flags | SL_RESOLVE_NO_WORKER, -1, &r);
    keep_open(c, dirfd, dirpath, path, len, flags, &r);
    return sl_static_respond(c, &r);
}

sl_hresult sl_static_serve(sl_conn *c, int dirfd, const char *dirpath, const char *path,
                           size_t len, unsigned flags)
{
    sl_static_result r;
    sl_server *srv = c->loop->srv;
    sl_tpool *pool = srv->stat_pool;
    const sl_conf *conf = c->conf;
    /* Kept open from an earlier request: no lookup, no open, no fstat. */
    sl_fdc_entry *e = cacheable(c, path, len) ? sl_fdc_get(srv->fdc, dirfd, cache_key(conf, flags),
                                                           path, len, sl_now_ns() / 1000000)
                                              : NULL;
    /* Before any open below: what sl_fdc_put needs to know whether the path may have changed
     * since (a request's own opens come after this, on the loop, a thread or the ring). */
    c->fdc_mark = e ? 0 : sl_fdc_mark(srv->fdc);
    if (e) {
        resolve(conf, dirfd, &c->req, path, len, flags, -1, e, &r);
        report(path, flags, &r);
        if ((r.status == 200 || r.status == 206) && !r.encoding) {
            c->file_ent = e; /* held until the request ends */
            return sl_static_respond(c, &r);
        }
        sl_fdc_release(srv->fdc, e);
        if (r.status != 0) return sl_static_respond(c, &r);
        /* The variant hook needs what the caches do not hold: the usual way below. */
    }
    if (!pool && !c->loop->io.async_opens) {
        sl_static_resolve(conf, dirfd, &c->req, path, len, flags | SL_RESOLVE_NO_WORKER, -1, &r);
        keep_open(c, dirfd, dirpath, path, len, flags, &r);
        return sl_static_respond(c, &r);
    }
    /* Whatever the dentry and inode caches already hold is answered now, on the loop; only a
     * lookup that would read the disk goes to the ring or a stat thread. */
    sl_static_resolve(conf, dirfd, &c->req, path, len, flags | SL_RESOLVE_CACHED, -1, &r);
    if (r.err != -EAGAIN) {
        keep_open(c, dirfd, dirpath, path, len, flags, &r);
        return sl_static_respond(c, &r);
    }
    sl_lookup_policy *lp = lookup_policy(c->loop);
    uint64_t t0 = lp ? sl_now_ns() : 0;
    if (lp && sl_lookup_inline(lp, t0)) {
        /* The lookups that missed the dentry cache lately found everything else in memory:
         * do this one here, timed, rather than pay two thread hand-offs for microseconds of
         * work (lookup.h bounds what a wrong guess costs). */
        long sleeps = sl_lookup_sleeps();
        sl_static_resolve(conf, dirfd, &c->req, path, len, flags, -1, &r);
        bool slept = sl_lookup_sleeps() != sleeps;
        sl_lookup_sample(lp, sl_now_ns() - t0, slept, true, t0);
        if (!(r.status == 0 && r.err == -EAGAIN)) {
            keep_open(c, dirfd, dirpath, path, len, flags, &r);
            return sl_static_respond(c, &r);
        }
        return to_thread(c, conf, dirfd, dirpath, path, len, flags); /* the variant hook's */
    }
    /* The ring or a stat thread: with no stat thread that reads ahead (the io-uring backend), the
     * ring; with both (hybrid), the ring while the files looked up lately were small. Never
     * where openat2 is refused: one rule for symlinks on every path (openat.h). */
    if (c->loop->io.async_opens && sl_openat2_works() &&
        (!pool || !srv->nb->readahead_on_stat || !lp || sl_lookup_prefer_ring(lp))) {
        ring_job *rj = calloc(1, sizeof *rj);
        if (rj && target_set(&rj->t, conf, dirfd, dirpath, path, len, flags) == 0) {
            if (ring_open(c, rj, true) == 0) return SL_WAIT;
            free(rj->t.path);
        }
        free(rj);
    }
    return to_thread(c, conf, dirfd, dirpath, path, len, flags);
}

static sl_hresult static_handle(sl_conn *c)
{
    /* mod_alias may have placed the file elsewhere in the physical phase. */
    if (c->phys_root) {
        unsigned flags = c->path_len && c->path[c->path_len - 1] != '/' ? SL_RESOLVE_URL_NO_SLASH : 0;
        return sl_static_serve(c, c->phys_root->fd, c->phys_root->path, c->phys_path, c->phys_len,
                               flags);
    }
    const sl_dir *root = c->docroot;
    return sl_static_serve(c, root->fd, root->path, c->path, c->path_len, 0);
}

static int static_loop_init(sl_loop *loop, char *err, size_t errlen)
{
    sl_lookup_policy *lp = calloc(1, sizeof *lp);
    if (!lp) return snprintf(err, errlen, "out of memory"), -1;
    loop->mod[sl_mod_static.index] = lp;
    return 0;
}

static void static_loop_fini(sl_loop *loop)
{
    free(loop->mod[sl_mod_static.index]);
    loop->mod[sl_mod_static.index] = NULL;
}

static void static_status(sl_server *srv, sl_status_out *o)
{
    /* Where lookups that missed the dentry cache ran, per loop. */
    sl_status_list(o, "lookups", "loop");
    for (unsigned i = 0; i < srv->n_loops; i++) {
        const sl_lookup_policy *lp = srv->loops[i] ? lookup_policy(srv->loops[i]) : NULL;
        if (!lp) continue;
        char name[16];
        snprintf(name, sizeof name, "%u", i);
        sl_status_item(o, name);
        sl_status_num(o, "inline", __atomic_load_n(&lp->inline_count, __ATOMIC_RELAXED), true);
        sl_status_num(o, "inline_slow", __atomic_load_n(&lp->slow_inline, __ATOMIC_RELAXED),
                      true);
        sl_status_num(o, "ring", __atomic_load_n(&lp->ring_count, __ATOMIC_RELAXED), true);
        sl_status_item_end(o);
    }
    sl_status_list_end(o);
}

static void static_defaults(void *p)
{
    sl_static_conf *s = p;
    s->etags = true;
}

/* static-file.disable-pathinfo: lighttpd 1.4 serves /file.html/more as file.html unless this is
 * enabled; seekless never does (a path below a file is 404, as nginx answers), so only
 * "enable" says what seekless does. */
static int prep_disable_pathinfo(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    bool off = (v->type == SL_CV_INT && v->num == 0) ||
               (v->type == SL_CV_STRING && (!strcmp(v->str, "disable") || !strcmp(v->str, "false") ||
                                            !strcmp(v->str, "off")));
    if (!off) return 0;
    snprintf(ctx->err, ctx->errlen,
             "static-file.disable-pathinfo \"disable\" is not supported: seekless never serves a "
             "file for a path below it (/file.html/more is 404)");
    return -1;
}

sl_module sl_mod_static = {
    SL_MODULE_HEAD("static", sl_static_conf, "mod_staticfile", "mod_indexfile", "mod_access"),
    .keys = SL_KEYS(
        SL_KEY_AT("index-file.names", SL_KEY_STRLIST, index_files),
        SL_KEY_PREP("static-file.disable-pathinfo", SL_KEY_BOOL, disable_pathinfo,
                    prep_disable_pathinfo, NULL),
        SL_KEY_AT("static-file.etags", SL_KEY_BOOL, etags),
        SL_KEY_AT("static-file.exclude-extensions", SL_KEY_STRLIST, exclude_extensions),
        SL_KEY_AT("url.access-deny", SL_KEY_STRLIST, access_deny)),
    .always = true,
    .fallback = true,
    .defaults = static_defaults,
    .handle = static_handle,
    .loop_init = static_loop_init,
    .loop_fini = static_loop_fini,
    .status = static_status,
};
