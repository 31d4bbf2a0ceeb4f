/* The module interface.
 *
 * A module is one table (sl_module) in one file: its name and the lighttpd names that load it,
 * the config keys it owns with their types and where they go in its conf struct, its process and
 * per-loop set-up, its request hooks and its status counters. The config layer checks every key
 * of a config against the tables of the modules that are loaded and knows no module by name; the
 * core runs the hooks of the loaded modules, in server.modules order, at fixed phases of a
 * request. Adding a module is one new file and one line in app/modules.c.
 *
 * Phases of a request, in order (each hook may be NULL):
 *   conn_accept     a connection arrived (before its first request): SL_ERROR closes it.
 *   uri_raw         the request head is parsed, the raw target is known, conditions are
 *                   evaluated: rewrite and redirect act here.
 *   uri_clean       the normalized path is known: access checks, authentication.
 *   physical        map the path to a file system location (alias).
 *   handle          produce a response (status page, proxy, directory listing, static file).
 *   response_start  the response head is about to be written: add or change header fields.
 *   request_done    the request ended (answered, failed or aborted): log it, free state.
 *   conn_close      the connection is closing.
 * A request hook answers SL_GO_ON (next module, then the next phase), SL_FINISHED (a response is
 * ready: skip to writing it), SL_WAIT (work is in flight; the module calls sl_conn_handled()
 * later), SL_ERROR (c->status, or the negative errno in c->error, says which error page) or, from
 * uri_raw, uri_clean or physical, SL_COMEBACK: the hook set c->target to a new target (in request
 * memory) and the request starts over from uri_raw with it normalized and the conditions
 * evaluated again (lighttpd's HANDLER_COMEBACK after a rewrite); more than SL_MAX_COMEBACKS times
 * answers 500.
 *
 * Threads: init/fini/reopen run on the main thread; loop_init/loop_fini on the loop's thread;
 * every request hook on the thread of the loop that owns the connection. A module's per-loop
 * state (sl_loop_mod) needs no lock; state shared by loops does. status() may run on any loop
 * and must only read what is safe to read from there (atomics, locked state).
 */
#ifndef SL_MODULE_H
#define SL_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_parse.h"

struct sl_conn;
struct sl_loop;
struct sl_server;
struct sl_status_out;
struct sl_conf_check;

/* What a hook tells the core. */
typedef enum {
    SL_GO_ON,    /* not mine, or nothing to do: ask the next module */
    SL_FINISHED, /* the response is ready in the connection (status, headers, body queue) */
    SL_WAIT,     /* work is in flight; the module resumes the connection when it completes */
    SL_ERROR,    /* failed; c->status (or c->error, a negative errno) says how */
    SL_COMEBACK, /* c->target changed: start the request over from uri_raw */
} sl_hresult;

/* How often one request may start over (SL_COMEBACK) before it is answered 500. */
#define SL_MAX_COMEBACKS 100

/* The type of a config key, and so of the field its value is stored in. */
typedef enum {
    SL_KEY_STRING,  /* const char *: a string */
    SL_KEY_PATH,    /* const char *: a string made absolute against the config file's directory */
    SL_KEY_INT,     /* long: an integer, never negative */
    SL_KEY_BOOL,    /* bool: "enable"/"disable" (also "true"/"false", "on"/"off", 1/0) */
    SL_KEY_STRLIST, /* sl_strlist: an array of strings ("a", "b") */
    SL_KEY_KVLIST,  /* sl_kvlist: an array of "key" => "string" pairs */
    SL_KEY_VALUE,   /* const void *: what the key's prepare() made of the raw value */
} sl_key_type;

/* A list of strings taken from a config array (points into the config tree). */
typedef struct sl_strlist {
    const char *const *v;
    size_t n;
} sl_strlist;

/* "key" => "value" pairs taken from a config array, in file order. */
typedef struct sl_kvlist {
    const char *const *k;
    const char *const *v;
    size_t n;
} sl_kvlist;

/* What the config adds to or sets in a request for the back ends (mod_setenv): `set` fields
 * replace the client's of that name (an empty value only removes them), `add` fields go besides
 * them; the variables go to FastCGI, set ones after everything else so they win. */
typedef struct sl_req_edits {
    sl_kvlist hdr_add, hdr_set, env_add, env_set;
} sl_req_edits;

/* Key flags. */
#define SL_KEY_GLOBAL 1u  /* process-wide: only at the top level, never inside a condition */
#define SL_KEY_APPENDS 2u /* SL_KEY_PATH: a file the server appends to (a log); checked at
                           * load as server.username, who opens it after the drop */
#define SL_KEY_OPENED_BEFORE_DROP 4u /* with SL_KEY_APPENDS: opened by the starting user before
                                      * the drop (sl_kept_open), so checked as that user */

/* Where prepare() runs. */
typedef struct sl_key_ctx {
    const char *basedir;  /* the config file's directory: relative paths are relative to it */
    bool check_system;    /* also check what start-up would refuse (users exist, dirs readable) */
    char *err;            /* room for a message (without file:line; the config layer adds it) */
    size_t errlen;
    void *loader;         /* the config layer's (sl_key_access) */
    const sl_cassign *assign; /* the assignment being prepared */
    unsigned block;       /* its block's number in file order (0: the top level); a request's
                           * conf applies blocks in this order, so keys that act together
                           * (url.rewrite-once with url.rewrite-repeat) tell by it which of
                           * them a later block set */
    const sl_cblock *cond; /* that block (its condition: %N in templates, sl_key_keep_captures) */
} sl_key_ctx;

/* One config key a module owns. */
typedef struct sl_key {
    const char *name;     /* "dir-listing.activate" */
    sl_key_type type;
    unsigned flags;       /* SL_KEY_GLOBAL */
    size_t off;           /* offset of the field in the module's conf struct */
    /* Optional, start-up: check the value (already of the right type) and, for SL_KEY_VALUE,
     * make what the field will hold (*out; may stay NULL). 0, or -1 with a message in ctx->err.
     * What it makes lives until the config is released, which calls release(). */
    int (*prepare)(const sl_cval *v, const sl_key_ctx *ctx, void **out);
    void (*release)(void *prepared);
} sl_key;

/* A module. Tables are defined `sl_module sl_mod_NAME = {...}` in the module's own file; the
 * fields after `status` are the core's. */
typedef struct sl_module {
    const char *name;               /* "static", "proxy-core": logs, status, server.modules */
    const char *const *aliases;     /* lighttpd names that load it ("mod_staticfile"), NULL-ended */
    bool always;                    /* loaded whatever server.modules says (as lighttpd always
                                     * loads mod_indexfile, mod_dirlisting, mod_staticfile) */
    bool fallback;                  /* its handle hook runs after every other module's */
    const sl_key *keys;             /* the keys it owns (SL_KEYS: ended by an entry without a name) */
    size_t conf_size;               /* sizeof its conf struct (0: none) */
    /* Defaults into a zeroed conf struct. */
    void (*defaults)(void *conf);

    /* Optional, at load (start-up and -t), after every key was checked, also when some were
     * refused (those keep their defaults): what only keys together or the system show (a key
     * that must be set, users that must exist). conf is the top-level conf struct. Reports with
     * sl_conf_fail (conf.h). */
    void (*check)(struct sl_conf_check *k, const void *conf);

    /* Process: after the config was checked and before serving (still root, before the fork):
     * open files, start shared state. conf is the top-level (global) conf. 0 or -1 + err. */
    int (*init)(struct sl_server *srv, const void *conf, char *err, size_t errlen);
    /* Process end, after every loop stopped. */
    void (*fini)(struct sl_server *srv);
    /* SIGHUP/SIGUSR1 on the main thread: reopen log files. */
    void (*reopen)(struct sl_server *srv);
    /* Per loop, on its thread, before it serves / after it stopped. 0 or -1 + err. */
    int (*loop_init)(struct sl_loop *loop, char *err, size_t errlen);
    void (*loop_fini)(struct sl_loop *loop);

    sl_hresult (*conn_accept)(struct sl_conn *c);
    sl_hresult (*uri_raw)(struct sl_conn *c);
    sl_hresult (*uri_clean)(struct sl_conn *c);
    sl_hresult (*physical)(struct sl_conn *c);
    sl_hresult (*handle)(struct sl_conn *c);
    void (*response_start)(struct sl_conn *c);
    /* The request ended (answered, or cut short): runs for every module before any
     * request_done, so all the request was (response fields pointing into a module's state,
     * the status, the bytes sent) is still there to be logged. */
    void (*log_request)(struct sl_conn *c);
    void (*request_done)(struct sl_conn *c);
    void (*conn_close)(struct sl_conn *c);

    /* Its counters for the status page (any loop's thread; read only thread-safe state). */
    void (*status)(struct sl_server *srv, struct sl_status_out *o);

    /* Set by the core when the module is loaded. */
    unsigned index;                 /* into c->mctx[] and loop->mod[] */
    size_t conf_off;                /* of its conf struct in a conf block */
} sl_module;

/* A module table, written as one definition in the module's file: SL_MODULE_HEAD gives the fields
 * every table starts with (its name, the type of its conf struct, and the lighttpd names that load
 * it: none or more strings), SL_KEYS its key table in place, and the hooks follow, as in
 *     #define SL_KEY_CONF expire_conf         (once, after the conf struct: see SL_KEY_FLAGS)
 *     ...
 *     sl_module sl_mod_expire = {
 *         SL_MODULE_HEAD("expire", expire_conf, "mod_expire"),
 *         .keys = SL_KEYS(
 *             SL_KEY_PREP("expire.url", SL_KEY_VALUE, url, prep_rules, free),
 *             SL_KEY_PREP("expire.mimetypes", SL_KEY_VALUE, mimetypes, prep_rules, free)),
 *         .response_start = expire_response_start,
 *     };
 * The keys are read where the module is, and the nameless entry that ends a key table is written
 * once, here. */
#define SL_MODULE_HEAD(modname, conf_type, ...)                                                    \
    .name = (modname), .aliases = (const char *const[]){__VA_ARGS__ __VA_OPT__(, ) NULL},         \
    .conf_size = sizeof(conf_type)

/* A key table (SL_KEY_* entries, or sl_key initializers; no comma after the last), ended by an
 * entry without a name. A compound literal at file scope: it lives as long as the program. */
#define SL_KEYS(...) ((const sl_key[]){__VA_ARGS__, {.name = NULL}})

/* Entries of a key table, in a file that defines SL_KEY_CONF as the type of its module's conf
 * struct (once, where that struct is defined or its header included): the key `keyname` of
 * `keytype` stored in `field` of it, with no flags and no prepare() (SL_KEY_AT), with a prepare()
 * and a release() (or NULL) (SL_KEY_PREP), or with flags too (SL_KEY_FLAGS). */
#define SL_KEY_FLAGS(keyname, keytype, keyflags, field, prep, rel)                                 \
    {(keyname), (keytype), (keyflags), offsetof(SL_KEY_CONF, field), (prep), (rel)}
#define SL_KEY_PREP(keyname, keytype, field, prep, rel)                                            \
    SL_KEY_FLAGS(keyname, keytype, 0, field, prep, rel)
#define SL_KEY_AT(keyname, keytype, field) SL_KEY_FLAGS(keyname, keytype, 0, field, NULL, NULL)

/* Most modules one server loads. */
#define SL_MAX_MODULES 32

/* Every module compiled in (app/modules.c), NULL-terminated, in the default order. */
extern sl_module *const sl_modules_builtin[];

/* A module's conf struct for a request (or the global conf block). */
#define SL_MODCONF(conf_block, mod, type) ((const type *)((const char *)(conf_block) + (mod).conf_off))

#endif
