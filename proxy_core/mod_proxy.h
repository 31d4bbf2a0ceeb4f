/* proxy-core: the reverse-proxy module (FastCGI and HTTP backends, X-Sendfile). */
#ifndef SL_MOD_PROXY_H
#define SL_MOD_PROXY_H

#include <stddef.h>

#include "module.h"

/* The module table: takes requests whose settings name proxy-core.backends. */
extern const sl_module sl_mod_proxy;

/* Resolve an X-Sendfile value against the allowed roots: percent-decode, require an absolute
 * path, remove dot segments, and find the root it lies under (prefix match including the slash).
 * On success writes the normalized path to out (outcap bytes) and returns the index of the root
 * (roots[i]), with *rel pointing into out at the path relative to that root. Returns -EACCES
 * when the path is relative or outside every root, -EINVAL when it does not decode, or
 * -ENAMETOOLONG. The synchronous core of X-Sendfile, used by tests without a server. */
int sl_xsendfile_locate(const char *value, size_t len, const char *const *roots, size_t n_roots,
                        char *out, size_t outcap, const char **rel);

#endif
