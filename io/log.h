/* Error log: one file (or stderr) shared by the whole process. */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <stdarg.h>
#include <sys/types.h>

/* Open path (O_APPEND, created 0644) as the error log; NULL or "" keeps stderr.
 * Returns 0 or a negative errno. */
int sl_log_open(const char *path);
/* Reopen the error log by the same path (SIGHUP, for logrotate). Returns 0 or a negative errno;
 * on failure the old file stays open. */
int sl_log_reopen(void);
/* Open path (append, create 0644) again over the descriptor fd, atomically for other threads
 * writing to fd (dup3): for log files reopened after logrotate. 0 or a negative errno (fd is
 * unchanged then). */
int sl_reopen_fd(int fd, const char *path);
/* Files the process opened as the starting user (the logs, the pid file), kept by path: a
 * graceful restart's new server runs as server.username and may not open them any more, so it
 * takes the old server's descriptors over (SL_KEPT_ENV across the exec).
 *
 * Open path with flags (O_CLOEXEC and mode 0644 added), or take the descriptor the old server
 * passed for that path; either way it is kept. A descriptor or a negative errno. */
int sl_kept_open(const char *path, int flags);
/* A piped logger: `/bin/sh -c command` started now (as the user starting the server, its
 * stdin a pipe) or the one the old server passed; either way the pipe's write end is kept by
 * the name "|command", so a graceful restart's new server writes to the same logger. The
 * write end (blocking, close-on-exec) or a negative errno; *pid gets the logger's pid when it
 * was started here, 0 when it was passed. */
int sl_kept_spawn(const char *command, pid_t *pid);
/* Whether path is a kept file, open here or passed by the old server: the config check accepts
 * it although the user now running could not open it. */
int sl_kept_has(const char *path);
/* Close a kept descriptor (and forget it). */
void sl_kept_close(int fd);
/* In the child about to exec the new server: let the kept descriptors pass the exec and name
 * them in SL_KEPT_ENV. */
void sl_kept_pass(void);
/* After the chroot: the kept files' paths name other files now, so SIGHUP does not reopen
 * them (sl_reopen_fd logs that once per file and keeps writing). */
void sl_kept_chrooted(void);
/* After start-up: close what the old server passed and this config does not use. */
void sl_kept_done(void);
#define SL_KEPT_ENV "SEEKLESS_KEPT_FDS"

/* Close the log file and fall back to stderr. */
void sl_log_close(void);
/* The error log's file descriptor (for dup2 over stderr when daemonizing). */
int sl_log_fd(void);
/* Write one timestamped line "YYYY-MM-DD HH:MM:SS: (file.line) message". Never blocks the caller
 * on anything but the write itself; a failed write is dropped (a full disk must not stop serving). */
void sl_log_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define sl_log(...) sl_log_at(__FILE__, __LINE__, __VA_ARGS__)

#endif
