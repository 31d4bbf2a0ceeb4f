/* fcgi-stat-accel request logic (no libfcgi, no global state).
 *
 * The web server asks us to look a file up so that its own later open()/stat() finds the dentry,
 * the inode and (with readahead) the first data in the kernel caches, and to tell it by X-Sendfile
 * that the file may be sent. We must never become a way to reach or name files outside the
 * document root, so the path is checked twice: lexically (the normalized path must equal the root
 * or start with root + "/") and by the kernel (openat2 beneath the root directory handle with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, which refuses with EXDEV any symlink leaving the root
 * while symlinks that stay inside keep working). The file is opened O_NONBLOCK so that a FIFO in
 * the tree cannot block a worker, and O_NOATIME where permitted so a lookup writes no inode.
 * Paths containing control bytes are refused outright: they would otherwise be able to split the
 * X-Sendfile header.
 */
#include "accel.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int sl_accel_normalize(const char *in, char *out, size_t cap)
{
    if (!in || in[0] != '/')
        return -EINVAL;
    if (cap < 2)
        return -ENAMETOOLONG;
    size_t olen = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || (n == 1 && s[0] == '.'))
            continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            // Climbing above "/" is only ever an escape attempt: refuse instead of clamping.
            if (olen == 0)
                return -EPERM;
            while (olen > 0 && out[olen - 1] != '/')
                olen--;
            olen--;
            continue;
        }
        if (olen + 1 + n + 1 > cap)
            return -ENAMETOOLONG;
        out[olen++] = '/';
        memcpy(out + olen, s, n);
        olen += n;
    }
    if (olen == 0)
        out[olen++] = '/';
    out[olen] = '\0';
    return (int)olen;
}

bool sl_accel_under_root(const char *root, const char *path)
{
    size_t rl = strlen(root);
    // "/" is the only normalized root that already ends in the separator.
    if (rl == 1 && root[0] == '/')
        return path[0] == '/';
    if (strncmp(root, path, rl) != 0)
        return false;
    return path[rl] == '\0' || path[rl] == '/';
}

int sl_accel_root_open(const char *root, char *norm, size_t cap)
{
    int r = sl_accel_normalize(root, norm, cap);
    if (r < 0)
        return r == -EPERM ? -EINVAL : r;
    int fd = open(norm, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int open_beneath(int rootfd, const char *rel, uint64_t flags)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        // EAGAIN means a concurrent rename made the ".." check unsafe and the kernel asks for a
        // retry; EINTR is a signal. Both are transient, but bound the loop anyway.
        if ((errno == EAGAIN || errno == EINTR) && tries < 8)
            continue;
        return -errno;
    }
}

static int refuse(sl_accel_answer *out, int status, int err, const char *reason)
{
    out->status = status;
    out->error = err;
    out->reason = reason;
    return status;
}

static int refuse_errno(sl_accel_answer *out, int err)
{
    switch (err) {
    case -ENOENT:
        return refuse(out, 404, err, "not found");
    case -ENOTDIR:
        return refuse(out, 404, err, "not found (a component is not a directory)");
    case -EXDEV:
        return refuse(out, 403, err, "symlink leaves the root");
    case -ELOOP:
        return refuse(out, 403, err, "symlink loop or magic link");
    case -EACCES:
    case -EPERM:
        return refuse(out, 403, err, "permission denied");
    case -ENXIO:
        // open(2) on a socket file, or a device without a driver: not a regular file.
        return refuse(out, 403, err, "not a regular file");
    case -ENAMETOOLONG:
        // A name the file system cannot hold names no file: 404, as for the web server's own
        // lookups (the client's URI was not too long; its server would have said 414).
        return refuse(out, 404, err, "name too long");
    default:
        return refuse(out, 500, err, "open failed");
    }
}

static bool has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

int sl_accel_resolve(int rootfd, const char *root, const char *script_filename, const char *path_info,
                     size_t readahead, sl_accel_answer *out)
{
    out->path[0] = '\0';
    out->error = 0;
    if (!script_filename || !script_filename[0])
        return refuse(out, 500, 0, "no SCRIPT_FILENAME");
    if (!root || root[0] != '/')
        return refuse(out, 500, 0, "unusable document root");

    char joined[2 * SL_ACCEL_PATH_MAX];
    size_t sl = strlen(script_filename);
    size_t pl = path_info ? strlen(path_info) : 0;
    if (sl + pl >= sizeof joined)
        return refuse(out, 404, -ENAMETOOLONG, "name too long");
    memcpy(joined, script_filename, sl);
    memcpy(joined + sl, path_info ? path_info : "", pl);
    joined[sl + pl] = '\0';

    if (joined[0] != '/')
        return refuse(out, 403, -EINVAL, "path not absolute");
    if (has_ctl(joined))
        return refuse(out, 403, -EINVAL, "control byte in path");
    int r = sl_accel_normalize(joined, out->path, sizeof out->path);
    if (r == -ENAMETOOLONG) {
        out->path[0] = '\0';
        return refuse(out, 404, r, "name too long");
    }
    if (r < 0) {
        out->path[0] = '\0';
        return refuse(out, 403, r, "path climbs above /");
    }
    if (!sl_accel_under_root(root, out->path))
        return refuse(out, 403, -EXDEV, "outside the root");

    size_t rl = strlen(root);
    const char *rel;
    if (rl == 1)
        rel = out->path[1] ? out->path + 1 : ".";
    else
        rel = out->path[rl] ? out->path + rl + 1 : ".";

    const uint64_t flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    int fd = open_beneath(rootfd, rel, flags | O_NOATIME);
    // O_NOATIME needs file ownership (or CAP_FOWNER); without it the read-only open still works.
    if (fd == -EPERM)
        fd = open_beneath(rootfd, rel, flags);
    if (fd < 0)
        return refuse_errno(out, fd);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return refuse_errno(out, e);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return refuse(out, 403, -EISDIR, "directory");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(out, 403, -EINVAL, "not a regular file");
    }
    if (readahead > 0) {
        off_t len = (uintmax_t)readahead > (uintmax_t)INT64_MAX ? (off_t)INT64_MAX : (off_t)readahead;
        // Advice is best effort: a failure costs only the prefetch, not the answer.
        (void)posix_fadvise(fd, 0, len, POSIX_FADV_WILLNEED);
    }
    close(fd);
    out->status = 200;
    out->reason = "ok";
    return 200;
}

const char *sl_accel_status_line(int status)
{
    switch (status) {
    case 200:
        return "200 OK";
    case 403:
        return "403 Forbidden";
    case 404:
        return "404 Not Found";
    default:
        return "500 Internal Server Error";
    }
}

int sl_accel_format(const sl_accel_answer *a, bool lighttpd_header, char *buf, size_t cap)
{
    int n;
    if (a->status == 200) {
        // The path is known to be free of control bytes, so it cannot split the header.
        n = snprintf(buf, cap,
                     "Status: 200 OK\r\nX-Sendfile: %s\r\n%s%s%s"
                     "Content-Type: application/octet-stream\r\nContent-Length: 0\r\n\r\n",
                     a->path, lighttpd_header ? "X-LIGHTTPD-send-file: " : "",
                     lighttpd_header ? a->path : "", lighttpd_header ? "\r\n" : "");
    } else {
        const char *line = sl_accel_status_line(a->status);
        // The body is the reason phrase alone: never the path, which may be a probe's echo.
        const char *text = strchr(line, ' ') + 1;
        n = snprintf(buf, cap,
                     "Status: %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s\n",
                     line, strlen(text) + 1, text);
    }
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    return n;
}

size_t sl_accel_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 1 >= cap)
                break;
            out[o++] = (char)c;
        } else {
            if (o + 4 >= cap)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}
