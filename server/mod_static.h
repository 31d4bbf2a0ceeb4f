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
    int status;              /* 200, 206, 301, 304, 403, 404, 405, 412, 416, 500, 503 ... */
    int err;                 /* negative errno behind an error status, 0 otherwise */
    int fd;                  /* open file for 200/206 (caller closes), else -1 */
    struct stat st;          /* of the file (200, 206, 304, 412, 416) */
    const char *content_type;
    char etag[SL_ETAG_MAX];  /* "" when static-file.etags is disabled */
    sl_byte_range ranges[SL_STATIC_MAX_RANGES];
    size_t n_ranges;         /* 206: one or more ranges */
} sl_static_result;

/* The synchronous core of the static handler: open path (normalized, starting with '/') beneath
 * s->docroot_fd following s's policy, and decide the response from the request's method,
 * conditional and Range headers. Never reads file data. Returns 0; the decision is in *out. */
int sl_static_resolve(const sl_settings *s, const sl_http_request *req, const char *path,
                      size_t path_len, sl_static_result *out);

/* Open rel (relative, no leading '/') beneath dirfd without ever leaving it; symlinks inside are
 * followed only when follow is true. Returns an fd or a negative errno (-EXDEV for an escape,
 * -ELOOP for a symlink that may not be followed). */
int sl_open_beneath(int dirfd, const char *rel, int flags, bool follow);

/* The module table. */
extern const sl_module sl_mod_static;

#endif
