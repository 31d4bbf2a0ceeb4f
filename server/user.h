/* The server's user: switching to it at start-up, and judging at load time, as that user, the
 * files and directories the server will open. */
#ifndef SL_USER_H
#define SL_USER_H

#include <sys/types.h>

#include "conf.h"
#include "core_conf.h"

/* Become uid/gid as start-up does after binding: supplementary groups cleared, then uname's
 * (when given) added, then chroot to root_dir (when not NULL; while the group files can still
 * be read and before root is given up, as lighttpd does), then uid; uid (uid_t)-1 keeps the
 * user. Needs root. 0 or a negative errno. */
int sl_switch_user(const char *uname, uid_t uid, gid_t gid, const char *root_dir);

/* The core's load-time check of what start-up would refuse beyond single values: a
 * server.username or server.groupname that does not exist, and a file or directory from
 * sl_conf_check_accesses that its user cannot use. What is opened after privileges are dropped
 * is judged as server.username (on a thread of its own that takes that user's credentials);
 * when that needs root and we are not root, only what no user could do is an error (start-up
 * refuses anyway: switching user needs root). g is the top-level core conf. */
void sl_user_check(sl_conf_check *k, const sl_core_conf *g);

#endif
