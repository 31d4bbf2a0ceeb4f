/* The server's user.
 *
 * Start-up binds as root, then switches to server.username/groupname for good
 * (sl_switch_user). A config check (-t, and start-up before anything is opened) judges every
 * path the config names as the user that will open it: the error log and the pid file as the
 * starting user, the document roots, access logs and X-Sendfile roots as the server's user. The
 * server's user is taken on by one short-lived thread with raw system calls, so the kernel
 * judges exactly as it will judge the server, and the process keeps its own credentials.
 */
#include "user.h"

#include "log.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>

int sl_switch_user(const char *uname, uid_t uid, gid_t gid, const char *root_dir)
{
    if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || (uname && initgroups(uname, gid) < 0))
        return -errno;
    if (root_dir) {
        tzset(); /* /etc/localtime is outside: the log's timestamps keep the zone */
        if (chroot(root_dir) < 0 || chdir("/") < 0) return -errno;
    }
    if (uid != (uid_t)-1 && setuid(uid) < 0) return -errno;
    return 0;
}

/* One access check, by the calling thread's effective ids: 0 or an errno; *creating tells
 * whether a file that does not exist yet was judged by its directory. */
static int access_one(const sl_conf_access *k, bool *creating)
{
    *creating = false;
    /* Opened by root before the drop and passed on by a graceful restart: no need to open. */
    if (k->kind == SL_ACCESS_APPEND_FILE && sl_kept_has(k->path)) return 0;
    if (k->kind == SL_ACCESS_SEARCH_DIR)
        return faccessat(AT_FDCWD, k->path, X_OK, AT_EACCESS) < 0 ? errno : 0;
    struct stat st;
    if (stat(k->path, &st) == 0)
        return S_ISDIR(st.st_mode) ? EISDIR
               : faccessat(AT_FDCWD, k->path, W_OK, AT_EACCESS) < 0 ? errno : 0;
    if (errno != ENOENT) return errno;
    *creating = true;
    char *dir = strdup(k->path);
    if (!dir) return ENOMEM;
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    int r = faccessat(AT_FDCWD, slash ? dir : ".", W_OK | X_OK, AT_EACCESS) < 0 ? errno : 0;
    free(dir);
    return r;
}

/* The server user's checks, run on a thread of their own that takes the server's credentials. */
typedef struct as_user_job {
    const struct passwd *pw;
    gid_t gid;
    const sl_conf_access *const *v;
    size_t n;
    int *res;
    bool ok;
} as_user_job;

static void *access_as_user_thread(void *arg)
{
    as_user_job *j = arg;
    /* The groups initgroups() would give, as start-up's switch does. */
    int ng = 64;
    gid_t *groups = malloc((size_t)ng * sizeof *groups);
    if (groups && getgrouplist(j->pw->pw_name, j->gid, groups, &ng) < 0) {
        gid_t *more = realloc(groups, (size_t)ng * sizeof *groups);
        groups = more ? more : groups;
        if (!more || getgrouplist(j->pw->pw_name, j->gid, groups, &ng) < 0) ng = -1;
    }
    /* Raw system calls on purpose: on Linux credentials belong to a thread, and only glibc's
     * wrappers make every thread of the process follow. So this thread alone becomes the
     * server's user and the credentials die with it. */
    if (groups && ng >= 0 && syscall(SYS_setgroups, (size_t)ng, groups) == 0 &&
        syscall(SYS_setresgid, j->gid, j->gid, j->gid) == 0 &&
        syscall(SYS_setresuid, j->pw->pw_uid, j->pw->pw_uid, j->pw->pw_uid) == 0) {
        for (size_t i = 0; i < j->n; i++) {
            bool creating;
            j->res[i] = access_one(j->v[i], &creating) << 1 | creating;
        }
        j->ok = true;
    }
    free(groups);
    return NULL;
}

/* res[i] = errno << 1 | creating for each check, judged as pw with group gid. 0, or -1 when they
 * could not be judged (then res is untouched). */
static int access_as_user(const struct passwd *pw, gid_t gid, const sl_conf_access *const *v,
                          size_t n, int *res)
{
    as_user_job j = {pw, gid, v, n, res, false};
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay the main thread's */
    int e = pthread_create(&th, NULL, access_as_user_thread, &j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) return -1;
    pthread_join(th, NULL);
    return j.ok ? 0 : -1;
}

void sl_user_check(sl_conf_check *k, const sl_core_conf *g)
{
    if (!sl_conf_check_system(k)) return;
    const struct passwd *pw = NULL;
    gid_t gid = 0;
    bool user_ok = true;
    const sl_cassign *ua = sl_conf_top_assign(k, "server.username");
    const sl_cassign *ga = sl_conf_top_assign(k, "server.groupname");
    if (g->username) {
        if (!(pw = getpwnam(g->username))) {
            sl_conf_fail(k, ua ? ua->file : NULL, ua ? ua->line : 0,
                         "server.username \"%s\": no such user", g->username);
            user_ok = false;
        } else {
            gid = pw->pw_gid;
        }
    }
    if (g->groupname) {
        const struct group *gr = getgrnam(g->groupname);
        if (!gr) {
            sl_conf_fail(k, ga ? ga->file : NULL, ga ? ga->line : 0,
                         "server.groupname \"%s\": no such group", g->groupname);
            user_ok = false;
        } else {
            gid = gr->gr_gid;
        }
    }
    bool switching = pw && user_ok && pw->pw_uid != 0 && geteuid() == 0;
    bool cannot_judge = (g->username || g->groupname) && geteuid() != 0;
    const sl_conf_access *acc;
    size_t n = sl_conf_check_accesses(k, &acc);
    int *res = calloc(n + 1, sizeof *res);
    int *theirs = calloc(n + 1, sizeof *theirs);
    const sl_conf_access **mine = calloc(n + 1, sizeof *mine);
    if (!res || !theirs || !mine) {
        sl_conf_fail(k, NULL, 0, "out of memory");
        goto out;
    }
    size_t n_mine = 0;
    for (size_t i = 0; i < n; i++) {
        if (acc[i].as_server && switching) {
            mine[n_mine++] = &acc[i];
            continue;
        }
        bool creating;
        int e = access_one(&acc[i], &creating);
        /* Without the server's user to judge by, only what no user could do is an error. */
        if (acc[i].as_server && (cannot_judge || !user_ok) && e != ENOENT && e != ENOTDIR &&
            e != EISDIR)
            e = 0;
        res[i] = e << 1 | creating;
    }
    /* The server user's checks, run on one thread, then put back in file order. */
    if (n_mine && access_as_user(pw, gid, mine, n_mine, theirs) == 0)
        for (size_t i = 0, j = 0; i < n; i++)
            if (acc[i].as_server && switching) res[i] = theirs[j++];
    for (size_t i = 0; i < n; i++) {
        const sl_conf_access *a = &acc[i];
        int e = res[i] >> 1;
        if (!e) continue;
        char who[300] = "";
        if (a->as_server && switching) snprintf(who, sizeof who, " by user \"%s\"", pw->pw_name);
        if (a->kind == SL_ACCESS_SEARCH_DIR) {
            sl_conf_fail(k, a->file, a->line, "%s \"%s\": cannot be entered%s: %s", a->key,
                         a->path, who, strerror(e));
        } else if (res[i] & 1) {
            const char *slash = strrchr(a->path, '/');
            int dl = !slash ? 1 : slash == a->path ? 1 : (int)(slash - a->path);
            sl_conf_fail(k, a->file, a->line, "%s \"%s\": cannot be created in %.*s%s: %s",
                         a->key, a->path, dl, slash ? a->path : ".", who, strerror(e));
        } else {
            sl_conf_fail(k, a->file, a->line, "%s \"%s\": cannot be written%s: %s", a->key,
                         a->path, who, strerror(e));
        }
    }
out:
    free(mine);
    free(theirs);
    free(res);
}
