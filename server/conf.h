/* The config layer: a config file's keys checked against the loaded modules' key tables, and the
 * conf blocks requests read.
 *
 * config_parse.c knows the language; this layer knows what a key is (its type, where its value
 * goes, whether it may sit inside a condition) from the tables modules declare (module.h), and
 * no module by name. Loading a config parses it, picks the modules (server.modules, in lighttpd's
 * order semantics), checks every assignment and reports every error (file:line each), prepares
 * values that need work once (absolute paths, opened directories, compiled tables), and compiles
 * each block's assignments into stores into a conf block. A conf block is one piece of memory
 * holding every loaded module's conf struct at its own offset (the core's first); per request,
 * the blocks whose conditions hold are applied in file order over a copy of the global one. When
 * the only conditions are $SERVER["socket"] ones, the block of each listener is computed once and
 * requests point at it without copying.
 */
#ifndef SL_CONF_H
#define SL_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "config_parse.h"
#include "module.h"

/* A conf block (opaque here: the core conf struct comes first, see core_conf.h). */
typedef struct sl_conf sl_conf;

/* Messages collected while loading: every error, each "file:line: message\n". */
typedef struct sl_errs {
    char *text;
    size_t len, cap;
    unsigned n;
} sl_errs;

/* Add one error (file may be NULL: no location). */
void sl_errs_add(sl_errs *e, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Free the messages. */
void sl_errs_free(sl_errs *e);

/* One listening socket: its canonical address and the literal that $SERVER["socket"] conditions
 * compare with (the config's own spelling, so a condition matches the listener it named). */
typedef struct sl_listen_spec {
    char canon[128];
    char literal[128];
} sl_listen_spec;

#define SL_MAX_LISTENERS 64

struct sl_conf_priv;

/* A loaded config. Immutable once loaded; shared by every loop. */
typedef struct sl_conf_set {
    sl_config_tree *tree;
    char *basedir;                   /* the config file's directory */
    sl_module *mods[SL_MAX_MODULES]; /* loaded modules, [0] the core, in hook order */
    size_t n_mods;
    size_t block_size;               /* bytes of a conf block */
    sl_conf *global;                 /* the top-level block */
    sl_listen_spec listen[SL_MAX_LISTENERS];
    size_t n_listen;                 /* [0] is server.bind:server.port */
    bool only_socket;                /* no conditions but $SERVER["socket"] ones */
    sl_conf **per_listener;          /* final block per listener, or NULL (conditions apply) */
    struct sl_conf_priv *priv;
} sl_conf_set;

/* Load the config file at path with the modules in builtin (NULL-terminated; builtin[0] is the
 * core, always loaded and first). On any error returns NULL with every message in errs (a file
 * that cannot be read is named with its path). check_system also checks what start-up would
 * refuse that the file alone does not show (users and groups that do not exist, unreadable
 * directories). */
sl_conf_set *sl_conf_load(const char *path, sl_module *const *builtin, bool check_system,
                          sl_errs *errs);
/* The same from text; name is used in messages, basedir resolves relative paths and includes. */
sl_conf_set *sl_conf_load_string(const char *text, size_t len, const char *name,
                                 const char *basedir, sl_module *const *builtin,
                                 bool check_system, sl_errs *errs);
/* Free a loaded config and everything prepared for it. */
void sl_conf_free(sl_conf_set *cs);

/* The listeners are final (the core set listen[0] from its bind/port keys): precompute each
 * listener's block when only $SERVER["socket"] conditions exist. 0 or -ENOMEM. */
int sl_conf_listeners_done(sl_conf_set *cs);

/* Helpers for keys' prepare(): 0 when v (a string) is one of the NULL-terminated choices, else
 * -1 with "key \"v\" is not supported (use ...)" in ctx->err. */
int sl_key_choice(const char *key, const sl_cval *v, const sl_key_ctx *ctx,
                  const char *const *choices);
/* 0 when v (an integer) lies in [lo, hi], else -1 with a message in ctx->err. */
int sl_key_range(const char *key, const sl_cval *v, const sl_key_ctx *ctx, long long lo,
                 long long hi);

/* Is module m loaded in cs? */
bool sl_conf_has_module(const sl_conf_set *cs, const sl_module *m);

/* The conf block for a request that came in on listener `listener` with condition input in:
 * a precomputed block, or buf (block_size bytes) filled with the global block and every
 * matching block's assignments applied. */
const sl_conf *sl_conf_for_request(const sl_conf_set *cs, unsigned listener,
                                   const sl_cond_input *in, sl_conf *buf);

#endif
