/* Spawning FastCGI applications (spawn.h).
 *
 * What spawn-fcgi does, for each process of each "bin-path" host: a listening socket made here
 * (so it exists before the first request, and the server's user can connect to it), the
 * process started with it as its standard input, all other descriptors closed, signals back to
 * their defaults, privileges dropped when seekless started as root, and only the environment
 * the host names (bin-environment, bin-copy-environment; all of it when no copy list is given,
 * as lighttpd does). The command line is split on spaces. A process that dies is not restarted:
 * its backend fails over and is retried after its disable-time, and the error log says so.
 */
#include "spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static sl_spawn_spec *registry; /* main thread only: load, init, fini */

void sl_spawn_register(sl_spawn_spec *s)
{
    s->next = registry;
    registry = s;
}

void sl_spawn_unregister(sl_spawn_spec *s)
{
    for (sl_spawn_spec **p = &registry; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            return;
        }
}

void sl_spawn_free(sl_spawn_spec *s)
{
    if (!s) return;
    for (size_t i = 0; s->env && s->env[i]; i++) free(s->env[i]);
    free(s->env);
    free(s->bin_path);
    free(s->socket);
    free(s->host);
    free(s->pids);
    free(s);
}

/* The listening socket of process n. */
static int listen_socket(const sl_spawn_spec *s, long n, uid_t uid, gid_t gid, char *err,
                         size_t errlen)
{
    int fd = -1;
    if (s->socket) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        int l = snprintf(un.sun_path, sizeof un.sun_path, "%s-%ld", s->socket, n);
        if (l < 0 || (size_t)l >= sizeof un.sun_path)
            return snprintf(err, errlen, "socket path %s-%ld too long", s->socket, n), -1;
        unlink(un.sun_path); /* a stale one from an earlier run */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&un, sizeof un) < 0) {
            snprintf(err, errlen, "socket %s: %s", un.sun_path, strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        /* The server's user connects to it after dropping privileges. */
        if (uid != (uid_t)-1 && chown(un.sun_path, uid, gid) < 0) {
            snprintf(err, errlen, "socket %s: chown: %s", un.sun_path, strerror(errno));
            close(fd);
            return -1;
        }
    } else {
        char port[16];
        snprintf(port, sizeof port, "%ld", s->port + n);
        struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                                 .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai;
        if (getaddrinfo(s->host, port, &hints, &ai) != 0)
            return snprintf(err, errlen, "%s:%s: not a numeric address", s->host, port), -1;
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            snprintf(err, errlen, "%s:%s: %s", s->host, port, strerror(errno));
            if (fd >= 0) close(fd);
            freeaddrinfo(ai);
            return -1;
        }
        freeaddrinfo(ai);
    }
    if (listen(fd, (int)s->backlog) < 0) {
        snprintf(err, errlen, "listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* In the child: never returns. */
static void exec_app(const sl_spawn_spec *s, int fd, uid_t uid, gid_t gid, const char *user)
{
    if (dup2(fd, 0) < 0) _exit(127);
    for (int i = 3; i < 1024; i++) close(i); /* nothing of the server's leaks in */
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL); /* the server blocks signals on its threads */
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    setsid();
    if (uid != (uid_t)-1 && (setgid(gid) < 0 || initgroups(user, gid) < 0 || setuid(uid) < 0))
        _exit(126);
    char *copy = strdup(s->bin_path);
    char *argv[64];
    int argc = 0;
    for (char *t = copy ? strtok(copy, " ") : NULL; t && argc < 63; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    if (!argc) _exit(127);
    if (s->copy_all_env) {
        for (size_t i = 0; s->env[i]; i++) putenv(s->env[i]);
        execv(argv[0], argv);
    } else {
        execve(argv[0], argv, s->env);
    }
    _exit(127);
}

int sl_spawn_start(const char *user, const char *group, char *err, size_t errlen)
{
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (geteuid() == 0 && user) {
        struct passwd *pw = getpwnam(user);
        if (!pw) return snprintf(err, errlen, "fastcgi.server: user %s does not exist", user), -1;
        uid = pw->pw_uid;
        gid = pw->pw_gid;
        if (group) {
            struct group *gr = getgrnam(group);
            if (!gr) return snprintf(err, errlen, "fastcgi.server: group %s does not exist", group), -1;
            gid = gr->gr_gid;
        }
    }
    for (sl_spawn_spec *s = registry; s; s = s->next) {
        for (long n = 0; n < s->procs; n++) {
            char why[512];
            int fd = listen_socket(s, n, uid, gid, why, sizeof why);
            if (fd < 0) {
                snprintf(err, errlen, "fastcgi.server: cannot start %s: %s", s->bin_path, why);
                sl_spawn_stop();
                return -1;
            }
            pid_t pid = fork();
            if (pid == 0) exec_app(s, fd, uid, gid, user);
            close(fd);
            if (pid < 0) {
                snprintf(err, errlen, "fastcgi.server: cannot start %s: fork: %s", s->bin_path,
                         strerror(errno));
                sl_spawn_stop();
                return -1;
            }
            s->pids[n] = pid;
        }
    }
    return 0;
}

void sl_spawn_stop(void)
{
    bool any = false;
    for (sl_spawn_spec *s = registry; s; s = s->next)
        for (long n = 0; n < s->procs; n++)
            if (s->pids[n] > 0) {
                kill(s->pids[n], s->kill_signal);
                any = true;
            }
    /* Reap them (they are our children unless the server daemonized); the slow ones get
     * SIGKILL after two seconds. */
    for (int round = 0; any && round < 200; round++) {
        any = false;
        for (sl_spawn_spec *s = registry; s; s = s->next)
            for (long n = 0; n < s->procs; n++) {
                if (s->pids[n] <= 0) continue;
                pid_t r = waitpid(s->pids[n], NULL, WNOHANG);
                if (r == s->pids[n] || (r < 0 && errno == ECHILD)) {
                    if (r < 0 && kill(s->pids[n], 0) == 0) { /* not ours: still there */
                        any = true;
                        continue;
                    }
                    s->pids[n] = 0;
                } else {
                    any = true;
                }
            }
        if (any) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    for (sl_spawn_spec *s = registry; s; s = s->next)
        for (long n = 0; n < s->procs; n++) {
            if (s->pids[n] > 0) {
                kill(s->pids[n], SIGKILL);
                waitpid(s->pids[n], NULL, WNOHANG);
            }
            s->pids[n] = 0;
            if (s->socket) {
                char path[4200];
                snprintf(path, sizeof path, "%s-%ld", s->socket, n);
                unlink(path);
            }
        }
}
