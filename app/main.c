/* seekless: command line, start-up order and process set-up.
 *
 * Order matters: load and check the whole config (so -t and a bad config fail before anything
 * is touched, with every error reported), bind sockets and open the logs and pid file while
 * still root, fork into the background, drop privileges, block the signals every thread will
 * inherit, and only then start the thread pools and the event loops. The parent of a daemon
 * waits on a pipe until the loops serve, so "seekless -f conf" returning 0 means the server is
 * accepting.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"
#include "core_conf.h"
#include "h2.h"
#include "log.h"
#include "module.h"
#include "server.h"
#include "tls.h"
#include "sl_version.h"
#include "user.h"

#if SL_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* Tell the service manager (a systemd unit of Type=notify, which sets NOTIFY_SOCKET) what the
 * process is doing: READY=1 once every loop serves, STOPPING=1 when a stop signal is taken.
 * Nothing without NOTIFY_SOCKET, or when built without libsystemd (-Dsystemd=disabled). */
static void notify(const char *state)
{
#if SL_HAVE_SYSTEMD
    if (getenv("NOTIFY_SOCKET")) {
        int r = sd_notify(0, state);
        if (r < 0) sl_log("sd_notify(%s) failed: %s", state, strerror(-r));
    }
#else
    (void)state;
#endif
}

static void notify_stopping(void)
{
    notify("STOPPING=1");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: seekless -f FILE [-D] [-t]\n"
               "       seekless -v | -V | -h\n"
               "  -f FILE  config file (lighttpd syntax)\n"
               "  -D       do not daemonize: stay in the foreground\n"
               "  -t       check the config file and exit: 0 and \"Syntax OK\", or 1 and every\n"
               "           error on stderr (file:line: message), including what start-up would\n"
               "           refuse (unknown user, unusable document root or log directory)\n"
               "  -v, --version  show the version\n"
               "  -V       show the version and the compiled-in network backends and features\n"
               "  -h, --help     this help\n");
}

/* Whether the process runs as server.username / server.groupname already: the new server of a
 * graceful restart is started by the old one after it dropped its privileges. */
static bool already_user(const sl_core_conf *s)
{
    if (s->username) {
        struct passwd *p = getpwnam(s->username);
        if (!p || p->pw_uid != geteuid()) return false;
    }
    if (s->groupname) {
        struct group *g = getgrnam(s->groupname);
        if (!g || g->gr_gid != getegid()) return false;
    }
    return true;
}

/* server.chroot, or NULL ("" and "/" are none, as in lighttpd). */
static const char *chroot_of(const sl_core_conf *s)
{
    return s->chroot_dir && s->chroot_dir[0] && strcmp(s->chroot_dir, "/") ? s->chroot_dir : NULL;
}

/* Run as the configured user/group, inside server.chroot. Done after binding and opening logs
 * and the pid file (their paths are outside the chroot), before serving. */
static int drop_privileges(const sl_core_conf *s, char *err, size_t errlen)
{
    const char *root = chroot_of(s);
    if (!s->username && !s->groupname && !root) return 0;
    /* Started by a graceful restart (never under a chroot: graceful_restart refuses). */
    if (geteuid() != 0 && !root && already_user(s)) return 0;
    if (geteuid() != 0) {
        snprintf(err, errlen, "%s need%s root; running as uid %u",
                 root ? "server.chroot" : "server.username/groupname", root ? "s" : "",
                 (unsigned)geteuid());
        return -1;
    }
    gid_t gid = 0;
    uid_t uid = (uid_t)-1;
    const char *uname = NULL;
    if (s->groupname) {
        struct group *g = getgrnam(s->groupname);
        if (!g) {
            snprintf(err, errlen, "server.groupname \"%s\": no such group", s->groupname);
            return -1;
        }
        gid = g->gr_gid;
    }
    if (s->username) {
        struct passwd *p = getpwnam(s->username);
        if (!p) {
            snprintf(err, errlen, "server.username \"%s\": no such user", s->username);
            return -1;
        }
        uid = p->pw_uid;
        uname = p->pw_name;
        if (!s->groupname) gid = p->pw_gid;
    }
    int r = sl_switch_user(uname, uid, gid, root);
    if (r < 0) {
        snprintf(err, errlen, "%s failed: %s", root ? "server.chroot or dropping privileges"
                 : "dropping privileges", strerror(-r));
        return -1;
    }
    if (root) sl_kept_chrooted();
    if (s->username && uid != 0 && uid != (uid_t)-1 && setuid(0) == 0) {
        snprintf(err, errlen, "dropping privileges failed: could regain root");
        return -1;
    }
    return 0;
}

/* Fork twice and detach. Returns the write end of a pipe the daemon uses to report readiness
 * (the original process waits on it and exits with the daemon's verdict), or -1 on error. */
static int daemonize(void)
{
    int p[2];
    if (pipe(p) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) {
        close(p[1]);
        char ok = 0;
        ssize_t n;
        do n = read(p[0], &ok, 1);
        while (n < 0 && errno == EINTR);
        _exit(n == 1 && ok == '1' ? 0 : 1);
    }
    close(p[0]);
    if (setsid() < 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) _exit(0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        /* stderr follows the error log if there is one, so late messages are not lost. */
        dup2(sl_log_fd() != STDERR_FILENO ? sl_log_fd() : null, STDERR_FILENO);
        close(null);
    }
    return p[1];
}

/* What a graceful restart needs from start-up: how this process was started, and the pid
 * file (kept open: the new server may no longer be allowed to open it; sl_kept_open). */
static const char *conf_path_g;
static const char *argv0_g;
static char exe_path_g[PATH_MAX];
static int pid_fd_g = -1;

#define READY_ENV "SEEKLESS_READY_FD"
#define RESTART_WAIT_S 60

/* SIGUSR1 (lighttpd's graceful restart; `systemctl reload`): check the config as it is now on
 * disk; if it has errors, log them and change nothing. Otherwise start a new seekless on the
 * same listening sockets (inherited across exec, so the kernel's accept queues carry on and no
 * connection is refused in between) and wait until it serves; then this server stops accepting
 * and finishes what is in flight on its own settings (sl_server_run). The new server writes the
 * pid file and, under systemd, becomes the main process (MAINPID). */
static int graceful_restart(sl_server *srv)
{
    if (chroot_of(srv->global)) {
        /* The program, the config and the logs are outside the chroot, and only root could
         * enter a new one: lighttpd, too, does not restart gracefully when chrooted. */
        sl_log("SIGUSR1: no graceful restart under server.chroot (the program and the config "
               "are outside it): restart the service to load a new config; serving on");
        return -1;
    }
    sl_config_errors errs = {0};
    sl_conf_set *cs = sl_conf_load(conf_path_g, sl_modules_builtin, true, &errs);
    char err[1024] = "";
    if (cs) {
        static sl_server probe;
        memset(&probe, 0, sizeof probe);
        int r = sl_server_setup(&probe, cs, err, sizeof err);
        sl_server_free(&probe);
        if (r < 0) cs = NULL;
    }
    if (!cs) {
        for (size_t i = 0; i < errs.n; i++) sl_log("SIGUSR1: %s", errs.msg[i]);
        if (err[0]) sl_log("SIGUSR1: %s", err);
        sl_log("SIGUSR1: %s has errors; nothing changed, serving on", conf_path_g);
        sl_config_errors_free(&errs);
        return -1;
    }
    sl_config_errors_free(&errs);
    notify("RELOADING=1");
    int fds[256];
    const char *canons[256];
    size_t n = sl_server_listeners(srv, fds, canons, 256);
    char *list = malloc(n * 160 + 1);
    int p[2];
    if (!list || pipe2(p, O_CLOEXEC) < 0) {
        free(list);
        sl_log("SIGUSR1: %s; serving on", strerror(errno));
        notify("READY=1");
        return -1;
    }
    size_t at = 0;
    list[0] = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(list + at, 160, "%s%d:%s", i ? "," : "", fds[i], canons[i]);
    pid_t pid = fork();
    if (pid == 0) {
        /* The new server: the sockets, the readiness pipe and the pid file pass the exec. */
        for (size_t i = 0; i < n; i++) fcntl(fds[i], F_SETFD, 0);
        fcntl(p[1], F_SETFD, 0);
        char num[16];
        setenv(SL_INHERIT_ENV, list, 1);
        snprintf(num, sizeof num, "%d", p[1]);
        setenv(READY_ENV, num, 1);
        /* The logs and the pid file: opened by root, which the new server no longer is. */
        sl_kept_pass();
        /* Already in the background (or under a supervisor): -D keeps it from forking again. */
        execl(exe_path_g, argv0_g, "-D", "-f", conf_path_g, (char *)NULL);
        _exit(127);
    }
    free(list);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        sl_log("SIGUSR1: cannot start the new server: %s; serving on", strerror(errno));
        notify("READY=1");
        return -1;
    }
    /* The loops serve meanwhile: only this thread waits. */
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    char ok = 0;
    int pr;
    do pr = poll(&pfd, 1, RESTART_WAIT_S * 1000);
    while (pr < 0 && errno == EINTR);
    ssize_t got = pr > 0 ? read(p[0], &ok, 1) : 0;
    close(p[0]);
    if (got != 1 || ok != '1') {
        kill(pid, SIGKILL); /* if it hangs somewhere; it has taken no connection */
        waitpid(pid, NULL, 0);
        sl_log("SIGUSR1: the new server did not start%s (its own messages are in the error "
               "log); serving on", pr == 0 ? " within " "60 s" : "");
        notify("READY=1");
        return -1;
    }
    char st[64];
    snprintf(st, sizeof st, "MAINPID=%ld\nREADY=1", (long)pid);
    notify(st);
    sl_log("SIGUSR1: new server started (pid %ld)", (long)pid);
    return 0;
}

int main(int argc, char **argv)
{
    sl_server_block_signals(); /* before anything: a HUP or USR1 during start-up waits */
    const char *conf_path = NULL;
    bool foreground = false, test_only = false;
    static const struct option longs[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "f:DtvVh", longs, NULL)) != -1) {
        switch (opt) {
        case 'f': conf_path = optarg; break;
        case 'D': foreground = true; break;
        case 't': test_only = true; break;
        case 'v': printf("seekless/%s\n", SL_VERSION); return 0;
        case 'V':
            printf("seekless/%s\n", SL_VERSION);
            sl_core_print_features();
            sl_tls_print_features();
            sl_h2_print_features();
            printf("systemd-notify: %s\n", SL_HAVE_SYSTEMD ? "libsystemd" : "no");
            return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (!conf_path || optind != argc) {
        usage(stderr);
        return 1;
    }
    /* For a graceful restart: the same program and config file, wherever the cwd is then. */
    static char conf_abs[PATH_MAX];
    conf_path_g = realpath(conf_path, conf_abs) ? conf_abs : conf_path;
    argv0_g = argv[0];
    ssize_t el = readlink("/proc/self/exe", exe_path_g, sizeof exe_path_g - 1);
    exe_path_g[el > 0 ? el : 0] = 0;
    char err[1024] = "";
    /* Every error in the config, syntax and meaning, and what start-up would refuse (unknown
     * user, a directory its user cannot enter), in one run: for -t and for start-up. */
    sl_config_errors errs = {0};
    sl_conf_set *cs = sl_conf_load(conf_path, sl_modules_builtin, true, &errs);
    if (!cs) {
        for (size_t i = 0; i < errs.n; i++) fprintf(stderr, "seekless: %s\n", errs.msg[i]);
        if (errs.dropped)
            fprintf(stderr, "seekless: %zu more error(s) not kept: out of memory\n", errs.dropped);
        if (!sl_config_errors_any(&errs)) fprintf(stderr, "seekless: cannot load the config\n");
        sl_config_errors_free(&errs);
        return 1;
    }
    static sl_server srv;
    if (sl_server_setup(&srv, cs, err, sizeof err) < 0) {
        fprintf(stderr, "seekless: %s\n", err);
        sl_server_free(&srv);
        return 1;
    }
    if (test_only) {
        printf("Syntax OK\n");
        sl_server_free(&srv);
        return 0;
    }
    int r;
    if (sl_fd_limit_apply(srv.global->max_fds, err, sizeof err) < 0 ||
        sl_server_bind(&srv, err, sizeof err) < 0 ||
        ((r = sl_log_open(srv.global->errorlog)) < 0 &&
         snprintf(err, sizeof err, "server.errorlog %s: %s", srv.global->errorlog,
                  strerror(-r))) ||
        sl_server_init_modules(&srv, err, sizeof err) < 0) {
        fprintf(stderr, "seekless: %s\n", err);
        sl_server_free(&srv);
        return 1;
    }
    int pid_fd = -1;
    if (srv.global->pid_file) {
        /* After a graceful restart: the old server's descriptor, which it may not open again. */
        pid_fd = sl_kept_open(srv.global->pid_file, O_WRONLY | O_CREAT);
        if (pid_fd < 0 || ftruncate(pid_fd, 0) < 0) {
            fprintf(stderr, "seekless: server.pid-file %s: %s\n", srv.global->pid_file,
                    strerror(pid_fd < 0 ? -pid_fd : errno));
            sl_server_free(&srv);
            return 1;
        }
    }
    sl_kept_done();
    int ready_fd = -1;
    const char *ready_env = getenv(READY_ENV);
    if (ready_env) {
        /* Started by a graceful restart: the old server waits for our word on this pipe. */
        ready_fd = atoi(ready_env);
        fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
        unsetenv(READY_ENV);
    }
    if (!foreground && !ready_env && (ready_fd = daemonize()) < 0) {
        fprintf(stderr, "seekless: cannot daemonize: %s\n", strerror(errno));
        return 1;
    }
    if (pid_fd >= 0) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
        if (pwrite(pid_fd, buf, (size_t)n, 0) != n) sl_log("writing the pid file failed");
        /* Kept open for a graceful restart's new server. */
        pid_fd_g = pid_fd;
    }
    int rc = 1;
    if (drop_privileges(srv.global, err, sizeof err) < 0 ||
        sl_server_start(&srv, err, sizeof err) < 0) {
        sl_log("%s", err);
        if (foreground || sl_log_fd() != STDERR_FILENO) fprintf(stderr, "seekless: %s\n", err);
    } else {
        if (ready_fd >= 0) {
            ssize_t w = write(ready_fd, "1", 1);
            (void)w;
            close(ready_fd);
            ready_fd = -1;
        }
        if (!ready_env) notify("READY=1"); /* after a restart the old server says it */
        srv.on_stopping = notify_stopping;
        srv.on_restart = graceful_restart;
        rc = sl_server_run(&srv);
    }
    if (ready_fd >= 0) close(ready_fd);
    /* After a graceful restart the pid file names the new server: leave it. */
    const char *pidf = srv.global->pid_file && !srv.handed_over ? strdup(srv.global->pid_file)
                                                                : NULL;
    bool chrooted = chroot_of(srv.global) != NULL;
    sl_server_free(&srv);
    if (pidf) {
        /* A server that dropped privileges may not remove it from root's directory: then
         * it is left empty, as lighttpd does, so no stale pid is signalled. */
        /* Under server.chroot its path names another file: only emptied. */
        if ((chrooted || unlink(pidf) < 0) && pid_fd_g >= 0 &&
            ftruncate(pid_fd_g, 0) < 0)
            sl_log("cannot remove or empty the pid file %s", pidf);
        free((void *)pidf);
    }
    if (pid_fd_g >= 0) sl_kept_close(pid_fd_g);
    sl_log_close();
    return rc;
}
