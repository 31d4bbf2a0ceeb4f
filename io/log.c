/* The error log.
 *
 * A single fd, written with one write(2) per line so concurrent writers (every loop, worker
 * threads) never interleave inside a line. The path is remembered so SIGHUP can reopen it after
 * logrotate moved the file. Reopening never changes the descriptor number: the new file is opened
 * and dup2()ed over the old descriptor, which the kernel does atomically, so a thread writing at
 * that moment writes whole to one file or the other and never to a closed or reused descriptor;
 * a failed open (say, after dropping privileges) keeps logging to the old file.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = STDERR_FILENO;
static char *log_path;

int sl_log_open(const char *path)
{
    if (!path || !*path) return 0;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    char *copy = strdup(path);
    if (!copy) {
        close(fd);
        return -ENOMEM;
    }
    sl_log_close();
    log_fd = fd;
    log_path = copy;
    return 0;
}

int sl_reopen_fd(int fd, const char *path)
{
    int nfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (nfd < 0) return -errno;
    int r = dup3(nfd, fd, O_CLOEXEC) < 0 ? -errno : 0;
    close(nfd);
    return r;
}

int sl_log_reopen(void)
{
    if (!log_path || log_fd == STDERR_FILENO) return 0;
    return sl_reopen_fd(log_fd, log_path);
}

void sl_log_close(void)
{
    if (log_fd != STDERR_FILENO) close(log_fd);
    log_fd = STDERR_FILENO;
    free(log_path);
    log_path = NULL;
}

int sl_log_fd(void)
{
    return log_fd;
}

void sl_log_at(const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    int k = snprintf(buf + n, sizeof buf - n, ": (%s.%d) ", base, line);
    if (k > 0) n += (size_t)k;
    va_list ap;
    va_start(ap, fmt);
    k = vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    if (k > 0) n += (size_t)k < sizeof buf - n ? (size_t)k : sizeof buf - n - 1;
    if (n >= sizeof buf - 1) n = sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, n);
    (void)w; /* a full disk must not stop the server; the line is lost */
}
