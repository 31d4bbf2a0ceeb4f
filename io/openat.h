/* Opening paths beneath a directory without ever leaving it (openat2 RESOLVE_BENEATH). */
#ifndef SL_OPENAT_H
#define SL_OPENAT_H

#include <stdbool.h>

/* sl_open_beneath, optionally (cached) only from the dentry cache: -EAGAIN when a component
 * is not cached or the kernel cannot tell. O_NOATIME in flags is dropped when the kernel
 * refuses it (EPERM: not the file's owner). */
int sl_open_beneath_ex(int dirfd, const char *rel, int flags, bool follow, bool cached);

/* sl_open_beneath_ex that tells whether the file was reached through a symlink: it opens
 * without following any first, and only on -ELOOP with follow true opens again following them
 * (*linked true; one failed openat2 more for such a path, none for any other). A file opened with
 * *linked false had no symlink anywhere on its path at the time of the open, which lets the
 * open-file cache take it without looking at the path again. */
int sl_open_beneath_noting_links(int dirfd, const char *rel, int flags, bool follow, bool cached,
                                 bool *linked);

/* False once the kernel showed it cannot answer from the dentry cache alone (no openat2, as
 * under valgrind, or no RESOLVE_CACHED): a cached open then always says -EAGAIN. */
bool sl_open_cached_works(void);

/* False once openat2 was refused (ENOSYS: an old kernel, a seccomp filter, valgrind): paths are
 * then walked component by component and every symlink is refused. Opens through an io_uring
 * must then not be used either: the ring's openat2 would follow the links the walk refuses. */
bool sl_openat2_works(void);

/* Open rel (relative, no leading '/') beneath dirfd without ever leaving it; symlinks inside are
 * followed only when follow is true. Returns an fd or a negative errno (-EXDEV for an escape,
 * -ELOOP for a symlink that may not be followed). */
int sl_open_beneath(int dirfd, const char *rel, int flags, bool follow);

#endif
