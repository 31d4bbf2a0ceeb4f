/* FastCGI applications seekless starts itself ("bin-path" in fastcgi.server), as lighttpd does.
 *
 * Hosts are registered when the config is loaded (also by -t, which starts nothing) and started
 * by proxy-core's init, before the server daemonizes: each of max-procs processes gets its own
 * listening socket ("socket-<n>", or port + n) as its standard input, the FastCGI convention,
 * and the environment the host names. They are stopped with their kill-signal at the end.
 */
#ifndef SL_SPAWN_H
#define SL_SPAWN_H

#include <stddef.h>

#include "gw_conf.h"

/* Add s to / remove it from the hosts started by sl_spawn_start. */
void sl_spawn_register(sl_spawn_spec *s);
void sl_spawn_unregister(sl_spawn_spec *s);
/* Free s (stopped or never started). */
void sl_spawn_free(sl_spawn_spec *s);

/* Start every registered host. A process started as root runs as user/group (may be NULL).
 * 0, or -1 with a message in err (the ones started are stopped again). */
int sl_spawn_start(const char *user, const char *group, char *err, size_t errlen);
/* Stop every started process (kill-signal, then wait for it a little, then SIGKILL). */
void sl_spawn_stop(void);

#endif
