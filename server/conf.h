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

/* A file or directory the server will open, to be checked as the user that will open it
 * (sl_conf_accesses; the core checks them against server.username). */
typedef enum { SL_ACCESS_SEARCH_DIR, SL_ACCESS_APPEND_FILE } sl_access_kind;

typedef struct sl_conf_access {
    const char *file;    /* where the key that names it is set */
    int line;
    const char *key;
    const char *path;    /* absolute */
    sl_access_kind kind;
    bool as_server;      /* opened after privileges are dropped (else by the starting user) */
} sl_conf_access;

/* One listening socket: its canonical address and the literal that $SERVER["socket"] conditions
 * compare with (the config's own spelling, so a condition matches the listener it named). */
typedef struct sl_listen_spec {
    char canon[128];
    char literal[128];
} sl_listen_spec;

#define SL_MAX_LISTENERS 64

struct sl_conf_priv;

/* The hooks a request runs, in order: the four phases (uri_raw, uri_clean, physical, handle),
 * then response_start, log_request and request_done. */
enum {
    SL_HOOK_URI_RAW,
    SL_HOOK_URI_CLEAN,
    SL_HOOK_PHYSICAL,
    SL_HOOK_HANDLE,
    SL_HOOK_RESPONSE_START,
    SL_HOOK_LOG_REQUEST,
    SL_HOOK_REQUEST_DONE,
    SL_HOOK_N
};

/* A loaded config. Immutable once loaded; shared by every loop. */
typedef struct sl_conf_set {
    sl_config_tree *tree;
    char *basedir;                   /* the config file's directory */
    sl_module *mods[SL_MAX_MODULES]; /* loaded modules, [0] the core, in hook order */
    size_t n_mods;
    /* Per request hook (SL_HOOK_*), the loaded modules that have it, in hook order: a request
     * visits only modules with something to do (most modules have one or two hooks). */
    const sl_module *hook_mods[SL_HOOK_N][SL_MAX_MODULES];
    size_t n_hook_mods[SL_HOOK_N];
    size_t block_size;               /* bytes of a conf block */
    sl_conf *global;                 /* the top-level block */
    sl_listen_spec listen[SL_MAX_LISTENERS];
    size_t n_listen;                 /* [0] is server.bind:server.port */
    bool only_socket;                /* no conditions but $SERVER["socket"] ones */
    size_t n_captures;               /* regex blocks whose groups a %N uses (capture slots) */
    sl_conf **per_listener;          /* final block per listener, or NULL (conditions apply) */
    struct sl_conf_priv *priv;
} sl_conf_set;

/* Load the config file at path with the modules in builtin (NULL-terminated; builtin[0] is the
 * core, always loaded and first). Every error is appended to errs, the parser's (it goes on past
 * a syntax error) and then every key's in file order, so one run names every fault; a file that
 * cannot be read is named with its path. Returns NULL when there was any. check_system also
 * checks what the file alone does not show (users and groups that exist). */
sl_conf_set *sl_conf_load(const char *path, sl_module *const *builtin, bool check_system,
                          sl_config_errors *errs);
/* The same from text; name is used in messages, basedir resolves relative paths and includes. */
sl_conf_set *sl_conf_load_string(const char *text, size_t len, const char *name,
                                 const char *basedir, sl_module *const *builtin,
                                 bool check_system, sl_config_errors *errs);
/* Free a loaded config and everything prepared for it. */
void sl_conf_free(sl_conf_set *cs);

/* The listeners are final (the core set listen[0] from its bind/port keys): precompute each
 * listener's block when only $SERVER["socket"] conditions exist. 0 or -ENOMEM. */
int sl_conf_listeners_done(sl_conf_set *cs);

/* For keys' prepare(): the server will open path (search a directory, or append to a file,
 * creating it), as the server's user (as_server) or as the user starting it. */
void sl_key_access(const sl_key_ctx *ctx, const char *path, sl_access_kind kind, bool as_server);
/* The string the top level of the config last assigns to key (NULL: not set, or not a string),
 * for keys' prepare() that depend on another key wherever it is set (server.username). */
const char *sl_key_top_string(const sl_key_ctx *ctx, const char *key);
/* server.chroot as the config sets it (absolute; NULL when not set, "/" or invalid), for keys'
 * prepare(): paths the server opens after start-up lie inside it, as in lighttpd. */
const char *sl_key_chroot(const sl_key_ctx *ctx);
/* path (absolute, as the server will see it after the chroot) as seen now, before it: the
 * chroot directory prepended, or a copy. malloc'd; NULL when out of memory. */
char *sl_key_root_path(const sl_key_ctx *ctx, const char *path);
/* open(O_PATH | O_DIRECTORY | O_CLOEXEC) of path inside the chroot (sl_key_root_path): the
 * descriptor serves after the chroot. A descriptor, or -1 with errno. */
int sl_key_open_dir(const sl_key_ctx *ctx, const char *path);
/* p made absolute against the config file's directory as SL_KEY_PATH values are (malloc'd; NULL
 * when out of memory), for prepare() functions of keys that hold paths inside other values. */
char *sl_key_abs_path(const sl_key_ctx *ctx, const char *p);

/* What a module's check() hook gets (module.h): the config being loaded. */
typedef struct sl_conf_check sl_conf_check;

/* Report an error at file:line (line <= 0: the file as a whole). Errors are given out sorted
 * by file and line with the keys' own. */
void sl_conf_fail(sl_conf_check *k, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether the load also checks the system (users, groups, access rights): start-up and -t. */
bool sl_conf_check_system(const sl_conf_check *k);
/* The config tree (partial when the parser found errors: then the root's own assignments may be
 * missing, and a key that "is not set" may only have been lost). */
const sl_config_tree *sl_conf_check_tree(const sl_conf_check *k);
/* The last top-level assignment of key that was accepted, or NULL. */
const sl_cassign *sl_conf_top_assign(const sl_conf_check *k, const char *key);
/* The files and directories the server will open, from SL_KEY_APPENDS keys and sl_key_access,
 * in file order. */
size_t sl_conf_check_accesses(const sl_conf_check *k, const sl_conf_access **out);

/* Helpers for keys' prepare(): 0 when v (a string) is one of the NULL-terminated choices, else
 * -1 with "key \"v\" is not supported (use ...)" in ctx->err. */
int sl_key_choice(const char *key, const sl_cval *v, const sl_key_ctx *ctx,
                  const char *const *choices);
/* The message (printf) into ctx->err; returns -1, which prepare() returns: a refused value. */
int sl_key_fail(const sl_key_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A value naming a directory: 0 with *dir its path (absolute against the config file's
 * directory, no trailing '/' but for "/" itself; malloc'd), or with *dir NULL for "" (off, as in
 * lighttpd); -1 with a message in ctx->err when v is no string or memory ran out. */
int sl_key_dir(const sl_cval *v, const sl_key_ctx *ctx, char **dir);
/* 0 when v (an integer) lies in [lo, hi], else -1 with a message in ctx->err. */
int sl_key_range(const char *key, const sl_cval *v, const sl_key_ctx *ctx, long long lo,
                 long long hi);

/* Is module m loaded in cs? */
bool sl_conf_has_module(const sl_conf_set *cs, const sl_module *m);

/* For keys' prepare() of templates that use %N (a group of the condition of the block the key
 * is set in, lighttpd's cond_match): that block keeps its groups per request from now on, in
 * the returned slot of the captures sl_conf_for_request fills (several keys of one block share
 * it). -1 when the block has no =~ condition (sl_cond_groups says how many groups it has). */
int sl_key_keep_captures(const sl_key_ctx *ctx);

/* The conf block for a request that came in on listener `listener` with condition input in:
 * a precomputed block, or buf (block_size bytes) filled with the global block and every
 * matching block's assignments applied. caps (cs->n_captures entries; NULL when 0) gets the
 * groups of the matched blocks that keep them (sl_key_keep_captures); every other entry has
 * set false. Blocks whose groups no key uses cost nothing more than their match. */
const sl_conf *sl_conf_for_request(const sl_conf_set *cs, unsigned listener,
                                   const sl_cond_input *in, sl_conf *buf, sl_cond_capture *caps);

#endif
