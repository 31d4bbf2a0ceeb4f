/* Static files: policy for GET/HEAD of files under the document root. */
#ifndef SL_MOD_STATIC_H
#define SL_MOD_STATIC_H

#include <stdbool.h>
#include <sys/stat.h>

#include "http_parse.h"
#include "module.h"
#include "precond.h"
#include "range.h"
#include "settings.h"

#define SL_STATIC_MAX_RANGES 32

/* What the static handler decided for a request. */
typedef struct sl_static_result {
    int status;              /* 200, 206, 301, 304, 403, 404, 405, 412, 416, 500, 501, 503 ... */
    int err;                 /* negative errno behind an error status, 0 otherwise */
    int fd;                  /* open file for 200/206 (caller closes), else -1 */
    struct stat st;          /* of the file (200, 206, 304, 412, 416) */
    const char *content_type;
    char etag[SL_ETAG_MAX];  /* "" when static-file.etags is disabled */
    bool accept_ranges;      /* server.range-requests is on: 200/206 say Accept-Ranges: bytes */
    sl_byte_range ranges[SL_STATIC_MAX_RANGES];
    size_t n_ranges;         /* 206: one or more ranges */
} sl_static_result;

/* The synchronous core of the static handler: open path (normalized, starting with '/') beneath
 * s->docroot_fd following s's policy, and decide the response from the request's method,
 * conditional and Range headers. Never reads file data. Returns 0; the decision is in *out. */
int sl_static_resolve(const sl_settings *s, const sl_http_request *req, const char *path,
                      size_t path_len, sl_static_result *out);

/* Flags for sl_static_resolve_ex. */
#define SL_RESOLVE_CACHED 1u    /* answer only from the dentry/inode caches; else err -EAGAIN */
#define SL_RESOLVE_FILE_ONLY 4u /* a directory is 403, never an index file (X-Sendfile) */
#define SL_RESOLVE_FROM_BACKEND 8u /* X-Sendfile: log refusals; errors other than 403/404 -> 502 */
#define SL_RESOLVE_PREOPENED 2u /* the path was opened already (io_uring): prefd is the fd or a
                                 * negative errno; -EPERM with O_NOATIME asks for a retry */

/* sl_static_resolve with flags. With SL_RESOLVE_CACHED a lookup that would have to read the
 * disk stops with status 0 and err -EAGAIN, having blocked on nothing (openat2 RESOLVE_CACHED);
 * the caller then resolves again without the flag on a stat thread. */
int sl_static_resolve_ex(const sl_settings *s, const sl_http_request *req, const char *path,
                         size_t path_len, unsigned flags, int prefd, sl_static_result *out);

/* The status for a failure on a path a backend named (X-Sendfile), from the one a client's path
 * would get: 403, 404 and 503 stand, anything else is the backend's fault, 502. */
int sl_static_backend_status(int status);

/* The open(2) flags and the openat2 resolve rules the static handler opens files with. */
int sl_static_open_flags(const sl_settings *s);
struct open_how;
void sl_static_open_how(const sl_settings *s, struct open_how *how);

/* sl_open_beneath, optionally (cached) only from the dentry cache: -EAGAIN when a component
 * is not cached or the kernel cannot tell. O_NOATIME in flags is dropped when the kernel
 * refuses it (EPERM: not the file's owner). */
int sl_open_beneath_ex(int dirfd, const char *rel, int flags, bool follow, bool cached);

/* Open rel (relative, no leading '/') beneath dirfd without ever leaving it; symlinks inside are
 * followed only when follow is true. Returns an fd or a negative errno (-EXDEV for an escape,
 * -ELOOP for a symlink that may not be followed). */
int sl_open_beneath(int dirfd, const char *rel, int flags, bool follow);

struct sl_conn;
/* Turn a decision into the response on c (headers queued, body as file chunks; c->file_fd takes
 * r->fd). Used by the static handler and by proxy-core for X-Sendfile. */
sl_hresult sl_static_respond(struct sl_conn *c, const sl_static_result *r);

/* Serve path (normalized, starting with '/') opened beneath s->docroot_fd with s's policy:
 * answered at once when the dentry and inode caches hold the lookup, otherwise on the ring
 * (io-uring) or a stat thread, so the loop never waits for the disk. SL_WAIT means the
 * response follows through sl_conn_handled. flags: SL_RESOLVE_FILE_ONLY. */
sl_hresult sl_static_serve(struct sl_conn *c, const sl_settings *s, const char *path, size_t len,
                           unsigned flags);

/* The module table. */
extern const sl_module sl_mod_static;

#endif
