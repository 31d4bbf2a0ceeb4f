/* Opening paths beneath a directory that they can never leave.
 *
 * openat2(RESOLVE_BENEATH) does it in the kernel, so no "..", absolute symlink or race leads
 * out, whatever the path normalizer missed; with RESOLVE_CACHED it answers only from the dentry
 * and inode caches, so the event loop can try a lookup without ever waiting for the disk. Where
 * openat2 is missing (kernels before 5.6, or valgrind, which does not know the call) the path is
 * walked one component at a time with O_NOFOLLOW instead.
 */
#include "openat.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* Without openat2 (kernels before 5.6, or valgrind, which does not know the call): walk the
 * path one component at a time with O_NOFOLLOW, so no component can be a symlink or "..", and
 * the walk cannot leave dirfd. Stricter than RESOLVE_BENEATH: every symlink is refused (-ELOOP),
 * even one that stays inside. */
static int open_beneath_walk(int dirfd, const char *rel, int flags)
{
    char buf[4096];
    size_t n = strlen(rel);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, rel, n + 1);
    int cur = dirfd;
    char *save = NULL;
    char *comp = strtok_r(buf, "/", &save);
    if (!comp) return -EINVAL;
    for (;;) {
        char *next = strtok_r(NULL, "/", &save);
        if (!strcmp(comp, "..")) {
            if (cur != dirfd) close(cur);
            return -EXDEV;
        }
        int fd;
        do {
            fd = next ? openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                      : openat(cur, comp, flags | O_NOFOLLOW);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0 && errno == EPERM && (flags & O_NOATIME) && !next)
            fd = openat(cur, comp, (flags & ~O_NOATIME) | O_NOFOLLOW);
        int err = fd < 0 ? -errno : 0;
        /* O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR (for the last component too, when
         * the caller asked for a directory); report it as the symlink. */
        struct stat st;
        if (err == -ENOTDIR && (next || (flags & O_DIRECTORY)) &&
            fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            err = -ELOOP;
        if (cur != dirfd) close(cur);
        if (err) return err;
        if (!next) return fd;
        cur = fd;
        comp = next;
    }
}

static atomic_bool no_cached;   /* the kernel predates RESOLVE_CACHED (5.12) */
static atomic_bool no_openat2;  /* read by stat threads too */

bool sl_open_cached_works(void)
{
    return !no_cached && !no_openat2;
}

bool sl_openat2_works(void)
{
    return !no_openat2;
}

int sl_open_beneath_ex(int dirfd, const char *rel, int flags, bool follow, bool cached)
{
    if (cached && (no_cached || no_openat2)) return -EAGAIN;
    if (no_openat2) return open_beneath_walk(dirfd, rel, flags);
    struct open_how how = {
        .flags = (unsigned long long)flags,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (follow ? 0 : RESOLVE_NO_SYMLINKS) |
                   (cached ? RESOLVE_CACHED : 0),
    };
    for (;;) {
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0) return (int)fd;
        if (errno == EPERM && (how.flags & O_NOATIME)) {
            /* O_NOATIME needs the file's owner or CAP_FOWNER: open it the ordinary way. */
            how.flags &= ~(unsigned long long)O_NOATIME;
            continue;
        }
        if (errno == ENOSYS) {
            no_openat2 = true; /* set on the loop thread first: the cached probe runs there */
            sl_log("openat2() is not available: paths are walked component by component and "
                   "symlinks are never followed");
            return cached ? -EAGAIN : open_beneath_walk(dirfd, rel, flags);
        }
        if (cached && errno == EINVAL) {
            no_cached = true;
            return -EAGAIN;
        }
        /* Without RESOLVE_CACHED, EAGAIN means a concurrent rename raced the beneath-check:
         * retry. With it, EAGAIN is the answer "not in the dentry cache". */
        if (errno == EINTR || (errno == EAGAIN && !cached)) continue;
        return -errno;
    }
}

int sl_open_beneath_noting_links(int dirfd, const char *rel, int flags, bool follow, bool cached,
                                 bool *linked)
{
    *linked = false;
    int fd = sl_open_beneath_ex(dirfd, rel, flags, false, cached);
    if (fd != -ELOOP || !follow) return fd;
    /* A symlink on the way (or too many: the second open says so again). Without openat2 the
     * walk refuses every symlink whatever follow says, and says -ELOOP again. */
    *linked = true;
    return sl_open_beneath_ex(dirfd, rel, flags, true, cached);
}

int sl_open_beneath(int dirfd, const char *rel, int flags, bool follow)
{
    return sl_open_beneath_ex(dirfd, rel, flags, follow, false);
}

