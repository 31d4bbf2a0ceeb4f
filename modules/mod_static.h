/* Static files: policy for GET/HEAD of files under the document root (lighttpd's
 * mod_staticfile, mod_indexfile and the suffix lists of mod_access). */
#ifndef SL_MOD_STATIC_H
#define SL_MOD_STATIC_H

#include <stdbool.h>
#include <sys/stat.h>

#include "conf.h"
#include "http_parse.h"
#include "module.h"
#include "precond.h"
#include "range.h"

#define SL_STATIC_MAX_RANGES 32

/* The module's settings. */
typedef struct sl_static_conf {
    sl_strlist index_files;        /* index-file.names */
    bool etags;                    /* static-file.etags */
    sl_strlist exclude_extensions; /* static-file.exclude-extensions */
    sl_strlist access_deny;        /* url.access-deny */
    bool disable_pathinfo;         /* static-file.disable-pathinfo: only "enable" is accepted */
} sl_static_conf;

/* What the static handler decided for a request. */
typedef struct sl_static_result {
    int status;              /* 200, 206, 301, 304, 403, 404, 405, 412, 416, 500, 501, 503 ... */
    int err;                 /* negative errno behind an error status, 0 otherwise */
    int fd;                  /* open file for 200/206 (caller closes), else -1 */
    struct stat st;          /* of the file (200, 206, 304, 412, 416) */
    const char *content_type;
    char etag[SL_ETAG_MAX];  /* "" when static-file.etags is disabled */
    bool accept_ranges;      /* server.range-requests is on: 200/206 say Accept-Ranges: bytes */
    const char *index_name;  /* the index file a directory path was answered with, or NULL */
    sl_byte_range ranges[SL_STATIC_MAX_RANGES];
    size_t n_ranges;         /* 206: one or more ranges */
    const char *encoding;    /* Content-Encoding of what fd holds (a variant the variant hook
                              * chose: "gzip"...), NULL: the file itself */
    bool vary;               /* the answer depends on Accept-Encoding: Vary: Accept-Encoding */
    bool no_links;           /* fd was opened with no symlink on its path (for the open-file
                              * cache, which then need not look at the path again) */
} sl_static_result;

/* Flags for sl_static_resolve. */
#define SL_RESOLVE_CACHED 1u    /* answer only from the dentry/inode caches; else err -EAGAIN */
#define SL_RESOLVE_PREOPENED 2u /* the path was opened already (io_uring): prefd is the fd or a
                                 * negative errno; -EPERM with O_NOATIME asks for a retry */
#define SL_RESOLVE_FILE_ONLY 4u /* a directory is 403, never an index file (X-Sendfile) */
#define SL_RESOLVE_FROM_BACKEND 8u /* X-Sendfile: log refusals; errors other than 403/404 -> 502 */
#define SL_RESOLVE_URL_NO_SLASH 16u /* the URL lacks the trailing '/' a directory needs, whatever
                                     * the path says (an alias of "/js" to a directory is "/") */
#define SL_RESOLVE_WORKER 32u    /* runs on a stat thread: the variant hook may block (look up
                                  * siblings, compress) */
#define SL_RESOLVE_NO_WORKER 64u /* runs on the loop and no thread follows: the variant hook does
                                  * what it can without blocking, else answers the file itself */

/* Another representation of a file (mod_deflate's precompressed or compressed copies). */
typedef struct sl_static_variant {
    int fd;              /* its file, handed to the caller; -1: no body is needed (the client
                          * holds it: the validators alone decide, a 304 or 412 follows) */
    struct stat st;      /* its stat; st_mtim is what Last-Modified says */
    struct stat tag;     /* the ETag is made from tag's inode, size and mtime, then -encoding */
    const char *encoding; /* its Content-Encoding token (static storage) */
} sl_static_variant;

/* The variant hook, called by sl_static_resolve for a regular file it is about to answer
 * (never for X-Sendfile paths). name is the file's path beneath dirfd ("/a.css", the index file
 * for a directory), fd and st the file (fd may be the open-file cache's: never closed by the
 * hook), content_type its type. Sets *vary when the answer depends on Accept-Encoding. Returns
 * 1 with *v filled when a variant is to be sent, 0 for the file itself, or -EAGAIN when it
 * would have to block and flags have neither SL_RESOLVE_WORKER nor SL_RESOLVE_NO_WORKER (the
 * caller resolves again on a stat thread). */
typedef int (*sl_static_variant_fn)(const sl_conf *conf, int dirfd, const sl_http_request *req,
                                    const char *name, size_t name_len, int fd,
                                    const struct stat *st, const char *content_type,
                                    unsigned flags, sl_static_variant *v, bool *vary);

/* Install the variant hook (NULL: none). Main thread, before the loops start (module init). */
void sl_static_set_variant_hook(sl_static_variant_fn fn);

/* The synchronous core of the static handler: open path (normalized, starting with '/') beneath
 * dirfd following conf's policy, and decide the response from the request's method,
 * conditional and Range headers. Never reads file data. With SL_RESOLVE_CACHED a lookup that
 * would have to read the disk stops with status 0 and err -EAGAIN, having blocked on nothing
 * (openat2 RESOLVE_CACHED); the caller then resolves again without the flag on a stat thread.
 * Returns 0; the decision is in *out. */
int sl_static_resolve(const sl_conf *conf, int dirfd, const sl_http_request *req,
                      const char *path, size_t path_len, unsigned flags, int prefd,
                      sl_static_result *out);

/* The status for a failure on a path a backend named (X-Sendfile), from the one a client's path
 * would get: 403, 404 and 503 stand, anything else is the backend's fault, 502. */
int sl_static_backend_status(int status);

/* The open(2) flags and the openat2 resolve rules the static handler opens files with. */
int sl_static_open_flags(const sl_conf *conf);
struct open_how;
void sl_static_open_how(const sl_conf *conf, struct open_how *how);

struct sl_conn;
/* Turn a decision into the response on c (headers, body as file chunks; the file is closed when
 * the request ends). Used by the static handler and by proxy-core for X-Sendfile. */
sl_hresult sl_static_respond(struct sl_conn *c, const sl_static_result *r);

/* Answer 301 to the request's path with a '/' added (the query kept): a directory asked for
 * without its slash. */
void sl_static_redirect_dir(struct sl_conn *c);

/* Serve path (normalized, starting with '/') opened beneath dirfd (whose absolute path is
 * dirpath) with the request's policy; a file kept open by the open-file cache is answered with
 * no system call:
 * answered at once when the dentry and inode caches hold the lookup, otherwise on the ring
 * (io-uring) or a stat thread, so the loop never waits for the disk. SL_WAIT means the response
 * follows through sl_conn_handled. flags: SL_RESOLVE_FILE_ONLY, SL_RESOLVE_FROM_BACKEND. */
sl_hresult sl_static_serve(struct sl_conn *c, int dirfd, const char *dirpath, const char *path,
                           size_t len, unsigned flags);

/* The module table. */
extern sl_module sl_mod_static;

#endif
