/* fcgi-stat-accel: the pure request logic, usable without libfcgi.
 *
 * A request names a file (SCRIPT_FILENAME [+ PATH_INFO]); the accelerator checks lexically that it
 * lies under the document root, opens it beneath an already-open root directory with openat2
 * (RESOLVE_BENEATH, so symlinks may not leave the root), checks that it is a regular file, asks the
 * kernel to start reading it ahead, and answers with an X-Sendfile header so the web server sends
 * the body itself. */
#ifndef SL_ACCEL_H
#define SL_ACCEL_H

#include <stdbool.h>
#include <stddef.h>

/* Capacity of a normalized path, terminating NUL included (PATH_MAX). */
#define SL_ACCEL_PATH_MAX 4096

/* Default number of bytes to ask the kernel to read ahead of the web server. */
#define SL_ACCEL_READAHEAD_DEFAULT ((size_t)1 << 20)

/* The answer to one request.
 * status: HTTP status (200, 403, 404 or 500).
 * path:   the normalized absolute path of the file; only meaningful (and only safe to send in a
 *         header) when status is 200. On refusals it holds what could be computed, for logging.
 * reason: a static, path-free, human-readable phrase saying why the status was chosen.
 * error:  the negative errno behind the status, or 0 when none (lexical refusal or success). */
typedef struct sl_accel_answer {
    int status;
    char path[SL_ACCEL_PATH_MAX];
    const char *reason;
    int error;
} sl_accel_answer;

/* Lexically normalize the absolute path `in` into out (capacity cap): collapse repeated '/', drop
 * '.' components, let '..' remove the previous component, drop a trailing '/' (except for "/").
 * Returns the length written (NUL not counted), -EINVAL if `in` is not absolute, -EPERM if '..'
 * climbs above "/", -ENAMETOOLONG if the path does not fit in cap at any point of the left-to-right walk (a long
 * prefix later undone by '..' is refused too). */
int sl_accel_normalize(const char *in, char *out, size_t cap);

/* Whether the normalized path `path` lies at or under the normalized root `root`, by prefix match
 * that includes the separator: "/srv/www" contains "/srv/www" and "/srv/www/x", not "/srv/www2". */
bool sl_accel_under_root(const char *root, const char *path);

/* Normalize the document root `root` into norm (capacity cap) and open it as a directory handle
 * (O_PATH|O_DIRECTORY|O_CLOEXEC) for sl_accel_resolve. Returns the descriptor, or -EINVAL (root not
 * absolute), -ENAMETOOLONG, or the negative errno of open(2). */
int sl_accel_root_open(const char *root, char *norm, size_t cap);

/* Resolve one request. rootfd is a directory handle for the normalized root path `root` (see
 * sl_accel_root_open); script_filename must be non-NULL; path_info is appended to it literally when
 * non-NULL and non-empty. The file is opened beneath rootfd without following symlinks that leave
 * it or magic links; for a regular file, readahead bytes (0 = none) are prefetched with
 * posix_fadvise(WILLNEED) before it is closed. Fills out and returns out->status. */
int sl_accel_resolve(int rootfd, const char *root, const char *script_filename, const char *path_info,
                     size_t readahead, sl_accel_answer *out);

/* The status line text for status ("404 Not Found"); "500 Internal Server Error" for unknown codes. */
const char *sl_accel_status_line(int status);

/* Format the complete CGI response for answer a into buf (capacity cap, NUL-terminated): a 200 gets
 * Status, X-Sendfile (and X-LIGHTTPD-send-file when lighttpd_header), Content-Type and a zero
 * Content-Length; any other status gets a text/plain head and a short fixed body that never contains
 * the path. Returns the length written, or -ENOSPC if it does not fit. */
int sl_accel_format(const sl_accel_answer *a, bool lighttpd_header, char *buf, size_t cap);

/* Copy s into out (capacity cap, always NUL-terminated when cap > 0) with every byte outside
 * printable ASCII and every backslash written as \xHH, for one-line log records; truncates what does
 * not fit. Returns the length written. */
size_t sl_accel_escape(const char *s, char *out, size_t cap);

#endif
