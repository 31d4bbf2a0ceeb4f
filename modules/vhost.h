/* Virtual hosting: a request's document root chosen from its host at run time (mod_simple_vhost,
 * mod_evhost). */
#ifndef SL_VHOST_H
#define SL_VHOST_H

#include <stdbool.h>
#include <stddef.h>

#include "connection.h"
#include "module.h"

/* The request's host as a path component: c->host without its port, or NULL when it cannot
 * name a directory safely (empty, "." or "..", a '/' or '\\' in it, a leading '.'). In the
 * request's memory. */
const char *sl_vhost_name(sl_conn *c);

/* Make the first of the directories paths[0..n) that exists the request's document root
 * (c->docroot) for the rest of the request, mod's per-request slot keeping it open until
 * sl_vhost_done. Symlinks are followed (several names for one site). Looked up from the dentry
 * cache on the loop, or on a stat thread when that cannot answer (SL_WAIT; the request goes on
 * when it is done). When none exists the document root stays the configured one. Called again
 * for the same request (a rewrite started it over), it only puts the chosen directory back.
 * Returns SL_GO_ON or SL_WAIT. */
sl_hresult sl_vhost_apply(sl_conn *c, const sl_module *mod, const char *const *paths, size_t n);

/* Open path as a directory (symlinks followed): from the dentry cache only when cached
 * (-EAGAIN when it cannot tell), else a lookup that may wait for the disk. An fd (O_PATH) or a
 * negative errno. */
int sl_vhost_open_dir(const char *path, bool cached);

/* The request ended: close what sl_vhost_apply opened for it. */
void sl_vhost_done(sl_conn *c, const sl_module *mod);

/* A stat thread's directory lookup for c came back (the job counted in c->pending): true when
 * the request goes on; false when the client left meanwhile, and then fd (if >= 0) is closed and
 * c released, so the caller only frees its job. */
bool sl_vhost_job_back(sl_conn *c, int fd);

/* Whether sl_vhost_apply already ran for this request (its slot is set). */
bool sl_vhost_applied(const sl_conn *c, const sl_module *mod);

#endif
