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
#include "http_date.h"
#include "log.h"
#include "path.h"
#include "server.h"
#include "threadpool.h"

/* Without openat2 (kernels before 5.6, or valgrind, which does not know the call): walk the
 * path one component at a time with O_NOFOLLOW, so no component can be a symlink or "..", and
 * the walk cannot leave dirfd. Stricter than RESOLVE_BENEATH: every symlink is refused (-ELOOP),
 * even one that stays inside. */
static int open_beneath_walk(int dirfd, const char *rel, int flags)
{
    char buf[4096];
    size_t n = strlen(rel);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, rel, n + 1);
    int cur = dirfd;
    char *save = NULL;
    char *comp = strtok_r(buf, "/", &save);
    if (!comp) return -EINVAL;
    for (;;) {
        char *next = strtok_r(NULL, "/", &save);
        if (!strcmp(comp, "..")) {
            if (cur != dirfd) close(cur);
            return -EXDEV;
        }
        int fd;
        do {
            fd = next ? openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                      : openat(cur, comp, flags | O_NOFOLLOW);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0 && errno == EPERM && (flags & O_NOATIME) && !next)
            fd = openat(cur, comp, (flags & ~O_NOATIME) | O_NOFOLLOW);
        int err = fd < 0 ? -errno : 0;
        /* O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR; report it as the symlink. */
        struct stat st;
        if (err == -ENOTDIR && next && fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
            err = -ELOOP;
        if (cur != dirfd) close(cur);
        if (err) return err;
        if (!next) return fd;
        cur = fd;
        comp = next;
    }
}

int sl_open_beneath_ex(int dirfd, const char *rel, int flags, bool follow, bool cached)
{
    static bool no_cached;          /* the kernel predates RESOLVE_CACHED (5.12) */
    static atomic_bool no_openat2;  /* read by stat threads too */
    if (cached && (no_cached || no_openat2)) return -EAGAIN;
    if (no_openat2) return open_beneath_walk(dirfd, rel, flags);
    struct open_how how = {
        .flags = (unsigned long long)flags,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (follow ? 0 : RESOLVE_NO_SYMLINKS) |
                   (cached ? RESOLVE_CACHED : 0),
    };
    for (;;) {
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0) return (int)fd;
        if (errno == EPERM && (how.flags & O_NOATIME)) {
            /* O_NOATIME needs the file's owner or CAP_FOWNER: open it the ordinary way. */
            how.flags &= ~(unsigned long long)O_NOATIME;
            continue;
        }
        if (errno == ENOSYS) {
            no_openat2 = true; /* set on the loop thread first: the cached probe runs there */
            sl_log("openat2() is not available: paths are walked component by component and "
                   "symlinks are never followed");
            return cached ? -EAGAIN : open_beneath_walk(dirfd, rel, flags);
        }
        if (cached && errno == EINVAL) {
            no_cached = true;
            return -EAGAIN;
        }
        /* Without RESOLVE_CACHED, EAGAIN means a concurrent rename raced the beneath-check:
         * retry. With it, EAGAIN is the answer "not in the dentry cache". */
        if (errno == EINTR || (errno == EAGAIN && !cached)) continue;
        return -errno;
    }
}

int sl_open_beneath(int dirfd, const char *rel, int flags, bool follow)
{
    return sl_open_beneath_ex(dirfd, rel, flags, follow, false);
}

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

int sl_static_resolve(const sl_settings *s, const sl_http_request *req, const char *path,
                      size_t path_len, sl_static_result *out)
{
    return sl_static_resolve_ex(s, req, path, path_len, 0, -1, out);
}

int sl_static_open_flags(const sl_settings *s)
{
    /* O_NONBLOCK: opening a FIFO must not block. */
    return O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (s->use_noatime ? O_NOATIME : 0);
}

void sl_static_open_how(const sl_settings *s, struct open_how *how)
{
    memset(how, 0, sizeof *how);
    how->flags = (unsigned long long)sl_static_open_flags(s);
    how->resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
                   (s->follow_symlink ? 0 : RESOLVE_NO_SYMLINKS);
}

static int resolve(const sl_settings *s, const sl_http_request *req, const char *path,
                   size_t path_len, unsigned flags, int prefd, sl_static_result *out);

int sl_static_backend_status(int status)
{
    return status == 403 || status == 404 || status == 503 ? status : 502;
}

int sl_static_resolve_ex(const sl_settings *s, const sl_http_request *req, const char *path,
                         size_t path_len, unsigned flags, int prefd, sl_static_result *out)
{
    int r = resolve(s, req, path, path_len, flags, prefd, out);
    if ((flags & SL_RESOLVE_FROM_BACKEND) && out->status >= 400) {
        /* A path a backend named (X-Sendfile): a refusal or a missing file is the answer, any
         * other failure is the backend's (502). Each is logged with the path. */
        out->status = sl_static_backend_status(out->status);
        sl_log("X-Sendfile %s: %s -> %d", path,
               out->err ? strerror(-out->err) : "not a regular file or refused", out->status);
    }
    return r;
}

static int resolve(const sl_settings *s, const sl_http_request *req, const char *path,
                   size_t path_len, unsigned flags, int prefd, sl_static_result *out)
{
    const bool cached = flags & SL_RESOLVE_CACHED;
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
    const int oflags = sl_static_open_flags(s);
    const char *rel = path_len > 1 ? path + 1 : ".";
    int fd = flags & SL_RESOLVE_PREOPENED
                 ? prefd
                 : sl_open_beneath_ex(s->docroot_fd, rel, oflags, s->follow_symlink, cached);
    if (fd < 0) goto fail_errno;
    if (fstat(fd, &out->st) < 0) {
        fd = -errno;
        goto fail_errno;
    }
    /* The name that access-deny, exclude-extensions and the mime table look at. */
    char namebuf[4096];
    const char *name = path;
    size_t name_len = path_len;
    if (S_ISDIR(out->st.st_mode) && (flags & SL_RESOLVE_FILE_ONLY)) {
        close(fd);
        out->status = 403;
        return 0;
    }
    if (S_ISDIR(out->st.st_mode)) {
        close(fd);
        fd = -1;
        if (path[path_len - 1] != '/') {
            out->status = 301;
            return 0;
        }
        for (size_t i = 0; i < s->index_files.n && fd < 0; i++) {
            int n = snprintf(namebuf, sizeof namebuf, "%s%s", path, s->index_files.v[i]);
            if (n < 0 || (size_t)n >= sizeof namebuf) continue;
            int f = sl_open_beneath_ex(s->docroot_fd, namebuf + 1, oflags, s->follow_symlink,
                                       cached);
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
    if (suffix_in(&s->access_deny, name, name_len) ||
        suffix_in(&s->exclude_extensions, name, name_len)) {
        close(fd);
        out->status = 403;
        return 0;
    }
    out->content_type = sl_mime_lookup(s->mime, name, name_len);
    if (s->etags)
        sl_etag_make(out->etag, (unsigned long long)out->st.st_ino,
                     (unsigned long long)out->st.st_size, (long long)out->st.st_mtim.tv_sec,
                     out->st.st_mtim.tv_nsec);
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
        close(fd);
        out->status = (int)pr;
        return 0;
    }
    out->fd = fd;
    out->status = 200;
    out->accept_ranges = s->range_requests;
    /* Range and If-Range are singletons. Range on several lines is an invalid Range, which a
     * server ignores (RFC 9110 §14.2): the whole file. An If-Range on several lines is a
     * condition that cannot hold (neither one entity-tag nor one date), so again the whole file;
     * ignoring it instead would send a part of a representation that may have changed. nginx and
     * lighttpd serve the first Range line; that picks one reading of an ambiguous request. */
    const sl_http_header *range = sl_http_single(req->range);
    if (!s->range_requests || !range || req->method != SL_METHOD_GET) return 0;
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
        close(fd);
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

static void validators(sl_conn *c, const sl_static_result *r)
{
    char date[SL_HTTP_DATE_LEN + 1];
    sl_http_date_format(r->st.st_mtim.tv_sec, date);
    sl_resp_header(c, "Last-Modified", date);
    if (r->etag[0]) sl_resp_header(c, "ETag", r->etag);
}

static void send_redirect(sl_conn *c)
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
    snprintf(boundary, sizeof boundary, "SEEKLESS%016llx", ++c->srv->boundary_seq ^
             ((unsigned long long)c->srv->date_sec << 20));
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
        sl_chunkq_append_file(&c->out, c->file_fd, (off_t)r->ranges[i].first,
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
        c->file_fd = r->fd;
        sl_conn_mark(c, &c->t.open);
        if (r->status == 206 && r->n_ranges > 1) {
            send_multipart(c, r, head);
            return SL_FINISHED;
        }
        sl_resp_begin(c, r->status);
        sl_resp_header(c, "Content-Type", r->content_type);
        /* With ranges off, nothing: as nginx (max_ranges 0) and lighttpd 1.4
         * (server.range-requests = "disable") do. */
        if (r->accept_ranges) sl_resp_header(c, "Accept-Ranges", "bytes");
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
        if (!head) sl_chunkq_append_file(&c->out, r->fd, (off_t)first, (off_t)len);
        return SL_FINISHED;
    case 304:
        sl_resp_begin(c, 304);
        validators(c, r);
        sl_resp_end_headers(c, UINT64_MAX); /* 304 carries no Content-Length of its own */
        return SL_FINISHED;
    case 301:
        send_redirect(c);
        return SL_FINISHED;
    case 416:
        snprintf(buf, sizeof buf, "bytes */%llu", (unsigned long long)r->st.st_size);
        sl_resp_begin(c, 416);
        sl_resp_header(c, "Content-Range", buf);
        sl_resp_end_headers(c, 0);
        return SL_FINISHED;
    default:
        c->error = r->err;
        return SL_ERROR;
    }
}

/* A stat that may wait for the disk, run on a stat thread. */
/* What to resolve, carried by a job: the settings (their docroot_fd is the directory the path
 * is opened beneath) and the path, owned by the job. */
typedef struct target {
    sl_settings conf;
    char *path;
    size_t len;
    unsigned flags;
} target;

static int target_set(target *t, const sl_settings *s, const char *path, size_t len,
                      unsigned flags)
{
    t->conf = *s;
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
    /* The loop does not touch the request while the job is out (the connection is in the
     * HANDLE state with its event removed), so reading it here is safe. */
    sl_static_resolve_ex(&j->t.conf, &c->req, j->t.path, j->t.len, j->t.flags, -1, &j->r);
    const sl_static_result *r = &j->r;
    if (!j->block || (r->status != 200 && r->status != 206) || r->st.st_size == 0) return;
    if (j->readahead) {
        /* Bring the first block into the page cache now, on this thread, without copying it
         * anywhere: sendfile() to /dev/null reads the pages (waiting for the disk) and drops
         * nothing but references. The loop then finds them resident and sends them inline, so
         * a cold small file costs one trip through a thread, not two. */
        off_t at = r->status == 206 ? (off_t)r->ranges[0].first : 0;
        off_t end = r->status == 206 ? (off_t)r->ranges[0].last + 1 : r->st.st_size;
        size_t want = (size_t)(end - at) < j->block ? (size_t)(end - at) : j->block;
        pthread_once(&devnull_once, devnull_open);
        if (devnull < 0 || sendfile(devnull, r->fd, &at, want) < 0)
            posix_fadvise(r->fd, at, (off_t)want, POSIX_FADV_WILLNEED);
        return;
    }
    /* A cold file is read by a thread anyway: reading its first block here, while the inode
     * is hot, saves the request a second trip through the pool (for small files, the only
     * read they need). */
    off_t first = r->status == 206 ? (off_t)r->ranges[0].first : 0;
    off_t end = r->status == 206 ? (off_t)r->ranges[0].last + 1 : r->st.st_size;
    size_t len = (size_t)(end - first) < j->block ? (size_t)(end - first) : j->block;
    void *p;
    /* Sized like the loop's own buffers (netback.c): the read rounded up, plus a page. */
    j->cap = ((len + 4095) & ~(size_t)4095) + 4096;
    if (posix_memalign(&p, 4096, j->cap) != 0) return;
    sl_fileread rd = {.fd = r->fd, .off = first, .len = len, .buf = p};
    sl_fileread_sync(&rd);
    if (rd.res <= 0) {
        free(p); /* the loop's own read will meet the error or the truncation again */
        return;
    }
    j->buf = p;
    j->boff = first;
    j->got = rd.res;
}

static void stat_done(sl_job *job)
{
    stat_job *j = (stat_job *)job;
    sl_conn *c = j->conn;
    c->pending--;
    if (c->srv->timing) {
        c->t.stat_queued = job->t_queued;
        c->t.stat_started = job->t_started;
        c->t.stat_done = job->t_done;
    }
    free(j->t.path);
    if (c->closed) {
        /* The client went away while we waited for the disk. */
        if (j->r.fd >= 0) close(j->r.fd);
        free(j->buf);
        free(j);
        sl_conn_release(c);
        return;
    }
    sl_hresult r = sl_static_respond(c, &j->r);
    if (j->buf)
        sl_fileread_adopt(c->srv, &c->rd, j->r.fd, j->buf, j->cap, j->boff,
                          (size_t)j->got);
    free(j);
    sl_conn_handled(c, r);
}

/* An open submitted to the network backend's ring (io-uring): neither lookup nor open blocks
 * the loop, and no thread is involved. */
typedef struct ring_job {
    sl_openreq op;
    sl_conn *conn;
    target t;
} ring_job;

static int ring_open(sl_conn *c, ring_job *j, bool noatime);

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
    sl_static_resolve_ex(&j->t.conf, &c->req, j->t.path, j->t.len,
                         SL_RESOLVE_PREOPENED | j->t.flags, res, &r);
    if (r.status == 0 && r.err == -EPERM && !retried_flags && ring_open(c, j, false) == 0) return;
    free(j->t.path);
    free(j);
    if (r.status == 0) r.status = sl_errno_to_status(r.err);
    sl_conn_handled(c, sl_static_respond(c, &r));
}

/* Submit j's open to the ring. On failure j stays the caller's. */
static int ring_open(sl_conn *c, ring_job *j, bool noatime)
{
    j->conn = c;
    j->op.dirfd = j->t.conf.docroot_fd;
    j->op.path = j->t.len > 1 ? j->t.path + 1 : ".";
    sl_static_open_how(&j->t.conf, &j->op.how);
    if (!noatime) j->op.how.flags &= ~(unsigned long long)O_NOATIME;
    j->op.done = ring_done;
    sl_conn_mark(c, &c->t.stat_queued);
    int r = c->srv->nb->open_submit(c->srv, &j->op);
    if (r < 0) return r;
    c->pending++;
    return 0;
}

sl_hresult sl_static_serve(sl_conn *c, const sl_settings *s, const char *path, size_t len,
                           unsigned flags)
{
    sl_static_result r;
    sl_tpool *pool = c->srv->stat_pool;
    if (!pool && !c->srv->nb->open_submit) {
        sl_static_resolve_ex(s, &c->req, path, len, flags, -1, &r);
        return sl_static_respond(c, &r);
    }
    /* Whatever the dentry and inode caches already hold is answered now, on the loop; only a
     * lookup that would read the disk goes to the ring or a stat thread. */
    sl_static_resolve_ex(s, &c->req, path, len, flags | SL_RESOLVE_CACHED, -1, &r);
    if (r.err != -EAGAIN) return sl_static_respond(c, &r);
    if (c->srv->nb->open_submit) {
        ring_job *rj = calloc(1, sizeof *rj);
        if (rj && target_set(&rj->t, s, path, len, flags) == 0) {
            if (ring_open(c, rj, true) == 0) return SL_WAIT;
            free(rj->t.path);
        }
        free(rj);
    }
    stat_job *j = pool ? malloc(sizeof *j) : NULL;
    if (j && target_set(&j->t, s, path, len, flags) == 0) {
        j->job.work = stat_work;
        j->job.done = stat_done;
        j->conn = c;
        j->buf = NULL;
        const sl_netbackend *nb = c->srv->nb;
        j->readahead = nb->readahead_on_stat;
        j->block = (nb->read_on_stat || nb->readahead_on_stat) && c->req.method == SL_METHOD_GET
                       ? c->srv->block_size
                       : 0;
        if (sl_tpool_submit(pool, &j->job) == 0) {
            c->pending++;
            return SL_WAIT;
        }
        free(j->t.path);
    }
    free(j);
    /* Queue full or no memory: a slow answer beats none. */
    sl_static_resolve_ex(s, &c->req, path, len, flags, -1, &r);
    return sl_static_respond(c, &r);
}

static sl_hresult static_handle(sl_conn *c)
{
    return sl_static_serve(c, &c->conf, c->path, c->path_len, 0);
}

static void static_request_done(sl_conn *c)
{
    if (c->file_fd >= 0) close(c->file_fd);
    c->file_fd = -1;
}

const sl_module sl_mod_static = {
    .name = "static",
    .handle_request = static_handle,
    .request_done = static_request_done,
};
