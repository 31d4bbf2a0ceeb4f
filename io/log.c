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
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- kept files ---- */

typedef struct kept {
    int fd;
    char *path;
} kept;
static kept *kept_v;
static bool chrooted;
static size_t kept_n;

/* The descriptor the old server passed for path ("fd:path" lines of SL_KEPT_ENV), or -1. It is
 * taken once: its line is blanked. */
static int take_passed(const char *path)
{
    char *env = getenv(SL_KEPT_ENV);
    size_t pl = strlen(path);
    for (char *line = env; line && *line;) {
        char *end = strchr(line, '\n');
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        char *colon = memchr(line, ':', ll);
        if (colon && ll - (size_t)(colon + 1 - line) == pl && !memcmp(colon + 1, path, pl)) {
            int fd = atoi(line);
            memset(line, ' ', ll); /* taken */
            if (fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) return fd;
        }
        line = end ? end + 1 : line + ll;
    }
    return -1;
}

int sl_kept_open(const char *path, int flags)
{
    kept *v = realloc(kept_v, (kept_n + 1) * sizeof *v);
    if (!v) return -ENOMEM;
    kept_v = v;
    char *copy = strdup(path);
    if (!copy) return -ENOMEM;
    int fd = take_passed(path);
    if (fd < 0 && (fd = open(path, flags | O_CLOEXEC, 0644)) < 0) {
        int e = errno;
        free(copy);
        return -e;
    }
    kept_v[kept_n++] = (kept){fd, copy};
    return fd;
}

int sl_kept_spawn(const char *command, pid_t *pid)
{
    *pid = 0;
    size_t cl = strlen(command);
    char *name = malloc(cl + 2);
    if (!name) return -ENOMEM;
    name[0] = '|';
    memcpy(name + 1, command, cl + 1);
    kept *v = realloc(kept_v, (kept_n + 1) * sizeof *v);
    if (!v) {
        free(name);
        return -ENOMEM;
    }
    kept_v = v;
    int fd = take_passed(name);
    if (fd < 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
            int e = errno;
            free(name);
            return -e;
        }
        pid_t c = fork();
        if (c == 0) {
            /* The logger: its stdin is the pipe; nothing else of ours stays open (O_CLOEXEC). */
            if (dup2(p[0], STDIN_FILENO) < 0) _exit(127);
            execl("/bin/sh", "sh", "-c", command, (char *)NULL);
            _exit(127);
        }
        int e = errno;
        close(p[0]);
        if (c < 0) {
            close(p[1]);
            free(name);
            return -e;
        }
        *pid = c;
        fd = p[1];
    }
    kept_v[kept_n++] = (kept){fd, name};
    return fd;
}

int sl_kept_has(const char *path)
{
    for (size_t i = 0; i < kept_n; i++)
        if (!strcmp(kept_v[i].path, path)) return 1;
    const char *env = getenv(SL_KEPT_ENV);
    size_t pl = strlen(path);
    for (const char *line = env; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', ll);
        if (colon && ll - (size_t)(colon + 1 - line) == pl && !memcmp(colon + 1, path, pl))
            return 1;
        line = end ? end + 1 : line + ll;
    }
    return 0;
}

void sl_kept_chrooted(void)
{
    chrooted = true;
}

void sl_kept_close(int fd)
{
    for (size_t i = 0; i < kept_n; i++) {
        if (kept_v[i].fd != fd) continue;
        free(kept_v[i].path);
        kept_v[i] = kept_v[--kept_n];
        break;
    }
    close(fd);
}

void sl_kept_pass(void)
{
    size_t len = 1;
    for (size_t i = 0; i < kept_n; i++) len += strlen(kept_v[i].path) + 16;
    char *list = malloc(len), *at = list;
    if (!list) return;
    *at = 0;
    for (size_t i = 0; i < kept_n; i++) {
        if (strchr(kept_v[i].path, '\n') || fcntl(kept_v[i].fd, F_SETFD, 0) < 0) continue;
        at += sprintf(at, "%d:%s\n", kept_v[i].fd, kept_v[i].path);
    }
    setenv(SL_KEPT_ENV, list, 1);
    free(list);
}

void sl_kept_done(void)
{
    const char *env = getenv(SL_KEPT_ENV);
    for (const char *line = env; line && *line;) {
        const char *end = strchr(line, '\n');
        if (*line != ' ') close(atoi(line)); /* not taken: this config does not use it */
        line = end ? end + 1 : line + strlen(line);
    }
    unsetenv(SL_KEPT_ENV);
}

/* ---- the error log ---- */

static int log_fd = STDERR_FILENO;
static char *log_path;

int sl_log_open(const char *path)
{
    if (!path || !*path) return 0;
    int fd = sl_kept_open(path, O_WRONLY | O_APPEND | O_CREAT);
    if (fd < 0) return fd;
    char *copy = strdup(path);
    if (!copy) {
        sl_kept_close(fd);
        return -ENOMEM;
    }
    sl_log_close();
    log_fd = fd;
    log_path = copy;
    return 0;
}

int sl_reopen_fd(int fd, const char *path)
{
    if (chrooted) {
        /* Its path is outside server.chroot: opening it here would make a file inside. */
        static bool said; /* once: every HUP would say it again */
        if (!said) sl_log("%s is outside server.chroot: not reopened (rotate it with "
                          "logrotate's copytruncate)", path);
        said = true;
        return 0;
    }
    /* Not rotated: nothing to do. This also spares a server that dropped privileges a failed
     * open of a file only root may open, on every SIGHUP. */
    struct stat now, open_st;
    if (stat(path, &now) == 0 && fstat(fd, &open_st) == 0 && now.st_dev == open_st.st_dev &&
        now.st_ino == open_st.st_ino)
        return 0;
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
    if (log_fd != STDERR_FILENO) sl_kept_close(log_fd);
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
