/* Config parser: lighttpd 1.4 syntax into a tree of conditional blocks.
 *
 * This module knows the syntax only (assignments, values, variables, includes, conditions); the
 * meaning of keys lives in settings.c. All values in a tree are immutable once parsed and may be
 * shared between several assignments and array items (a reference such as `var.x` does not copy),
 * so treat every pointer reachable from a tree as read-only. Everything is owned by the tree and
 * released by sl_config_tree_free().
 *
 * Limits (each reported as "file:line: message"): includes nest at most SL_CONFIG_MAX_INCLUDE_DEPTH
 * deep and load at most SL_CONFIG_MAX_INCLUDED_FILES files; conditions nest at most
 * SL_CONFIG_MAX_BLOCK_DEPTH deep and arrays SL_CONFIG_MAX_ARRAY_DEPTH deep; one file or string is
 * at most SL_CONFIG_MAX_TEXT bytes; a tree uses at most SL_CONFIG_MAX_MEMORY bytes.
 */
#ifndef SL_CONFIG_PARSE_H
#define SL_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* Deepest chain of nested includes (the top-level file is depth 0). */
#define SL_CONFIG_MAX_INCLUDE_DEPTH 16
/* Most files one parse may load through include (a glob counts every file it matches). */
#define SL_CONFIG_MAX_INCLUDED_FILES 1024
/* Deepest nesting of conditional blocks. */
#define SL_CONFIG_MAX_BLOCK_DEPTH 256
/* Deepest nesting of arrays inside arrays. */
#define SL_CONFIG_MAX_ARRAY_DEPTH 64
/* Largest config file or string accepted, in bytes. */
#define SL_CONFIG_MAX_TEXT (8u << 20)
/* Most memory one tree may hold for its blocks and values (guards against exponential growth
 * through repeated `var.x += var.x`). */
#define SL_CONFIG_MAX_MEMORY (64u << 20)

/* The type of a config value. */
typedef enum { SL_CV_STRING, SL_CV_INT, SL_CV_ARRAY } sl_cval_type;

/* A config value (see the struct below). */
typedef struct sl_cval sl_cval;

/* One element of an array value: `"key" => value` or just `value`. */
typedef struct sl_cval_item {
    char *key; /* NULL for an unkeyed element */
    sl_cval *val;
} sl_cval_item;

/* A config value: a string, an integer or an array (which may mix keyed and unkeyed items; keys
 * are unique within one array). */
struct sl_cval {
    sl_cval_type type;
    char *str;           /* SL_CV_STRING, NUL-terminated (may contain no NUL) */
    long long num;       /* SL_CV_INT */
    sl_cval_item *items; /* SL_CV_ARRAY (NULL when empty) */
    size_t n_items;
};

/* One `key = value` as it stands after the whole block was parsed: at most one per key per block
 * (:= and += update the block's earlier assignment in place). */
typedef struct sl_cassign {
    char *key;        /* "server.document-root" */
    sl_cval *val;     /* final value (after +, +=, variables) */
    const char *file; /* file name for messages (owned by the tree) */
    int line;         /* line of the latest statement that set it */
} sl_cassign;

/* What a conditional block tests. */
typedef enum {
    SL_COND_NONE /* root block */,
    SL_COND_SOCKET,    /* $SERVER["socket"] */
    SL_COND_URL,       /* $HTTP["url"] */
    SL_COND_HOST,      /* $HTTP["host"] */
    SL_COND_QUERY,     /* $HTTP["querystring"] (also "query-string") */
    SL_COND_REMOTE_IP, /* $HTTP["remoteip"] / ["remote-ip"]: the client's address */
    SL_COND_SCHEME,    /* $HTTP["scheme"] */
    SL_COND_METHOD,    /* $HTTP["request-method"] */
    SL_COND_HEADER,    /* $REQUEST_HEADER["Name"], and the $HTTP fields that name one header:
                        * "useragent"/"user-agent", "referer", "cookie", "language"
                        * (Accept-Language); the name is in sl_cblock.header */
} sl_cond_field;

/* How a conditional block tests: ==, !=, =~, !~, =^ (prefix), =$ (suffix). */
typedef enum {
    SL_COND_EQ,
    SL_COND_NE,
    SL_COND_MATCH,
    SL_COND_NOMATCH,
    SL_COND_PREFIX,
    SL_COND_SUFFIX
} sl_cond_op;

/* $HTTP["remoteip"] == / != "ip" or "ip/bits": the network, parsed at load. */
typedef struct sl_cond_net {
    unsigned char addr[16]; /* 4 bytes for IPv4 */
    int family;             /* AF_INET or AF_INET6 */
    int bits;               /* prefix length; the full length for a single address */
} sl_cond_net;

/* A block of the tree (see the struct below). */
typedef struct sl_cblock sl_cblock;

/* The root block (field SL_COND_NONE, line 0) or a conditional block. A plain `else { }` block has
 * is_else set and repeats field, op, pattern and re of the block it follows, so that a consumer
 * asking "is this key inside a condition?" or collecting $SERVER["socket"] values sees it as
 * conditional; its own condition is never tested. */
struct sl_cblock {
    sl_cond_field field;
    sl_cond_op op;
    char *pattern; /* the string on the right-hand side */
    void *re;      /* pcre2_code * for MATCH/NOMATCH, else NULL */
    char *header;  /* SL_COND_HEADER: the field name ("User-Agent"), else NULL */
    sl_cond_net *net; /* SL_COND_REMOTE_IP with == or !=, else NULL */
    bool is_else;  /* a plain `else { }` (no condition; matches when the chain before it did not) */
    sl_cassign *assigns;
    size_t n_assigns; /* in file order */
    sl_cblock **children;
    size_t n_children;     /* first block of each if/else chain, in file order */
    sl_cblock *else_next;  /* next alternative in an if/else chain, or NULL */
    sl_cblock *parent;     /* enclosing block (for every block of a chain); NULL for the root */
    void *ext;             /* for the consumer of the tree (conf.c: the compiled assignments);
                            * the parser sets it NULL and never reads it */
    const char *file;
    int line;
};

/* Private bookkeeping of a tree (memory, compiled patterns). */
struct sl_config_priv;

/* A parsed config. */
typedef struct sl_config_tree {
    sl_cblock *root;
    bool partial; /* errors were found: statements are missing, placeholder blocks stand in for
                   * conditions that did not parse; check it further, never serve from it */
    struct sl_config_priv *priv; /* private to config_parse.c */
} sl_config_tree;

/* Most errors one check collects; beyond it the parser stops with a last message saying so. */
#define SL_CONFIG_MAX_ERRORS 200

/* Every error found in a config, in the order found, each "file:line: message" (or "file: message"
 * for one that concerns the whole file). Zero-initialize; release with sl_config_errors_free. */
typedef struct sl_config_errors {
    char **msg;
    size_t n;
    size_t dropped; /* messages lost for lack of memory (still errors) */
} sl_config_errors;

/* Whether any error was found. */
static inline bool sl_config_errors_any(const sl_config_errors *e)
{
    return e->n || e->dropped;
}

/* Add one error at file:line (line <= 0: the file as a whole). A message equal to the previous
 * one is not repeated. Out of memory drops the message and counts it in dropped. */
void sl_config_error_add(sl_config_errors *e, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Free the messages and reset to empty. */
void sl_config_errors_free(sl_config_errors *e);
/* Every message, one per line (no newline after the last), cut to fit buf. */
void sl_config_errors_join(const sl_config_errors *e, char *buf, size_t len);

/* Parse a config file and collect EVERY error: after a syntax error the parser skips to the next
 * line that starts a statement (a key or variable followed by '=', '+=' or ':=', a condition,
 * '}', 'include' or 'else') and goes on, keeping braces in the skipped text balanced (a '{' there
 * opens a placeholder block so the block's own statements are still checked); an error that does
 * not break the syntax (an unsupported condition, a bad regex, a duplicate key) is reported and
 * parsing goes on as if the statement were right. Errors are appended to errs.
 * Returns the tree, partial when errors were found (tree->partial; only good for more checks,
 * never for serving), or NULL when the file cannot be read ("path: cannot read config file: ...")
 * or memory ran out. Relative includes are resolved against the directory of the file that
 * contains them. */
sl_config_tree *sl_config_parse_file_all(const char *path, sl_config_errors *errs);

/* The same for text; name is used in messages (NULL: "<config>"); basedir resolves relative
 * includes (NULL: any include is refused with an error). */
sl_config_tree *sl_config_parse_string_all(const char *text, size_t len, const char *name,
                                           const char *basedir, sl_config_errors *errs);

/* Parse a config file. On error returns NULL and writes every error, one per line, into err.
 * Relative includes are resolved against the directory of the file that contains them. */
sl_config_tree *sl_config_parse_file(const char *path, char *err, size_t errlen);

/* Parse text; name is used in messages (NULL: "<config>"); basedir resolves relative includes
 * (NULL: any include is refused with an error). On error returns NULL and writes every error,
 * "name:line: message", one per line, into err. */
sl_config_tree *sl_config_parse_string(const char *text, size_t len, const char *name,
                                       const char *basedir, char *err, size_t errlen);

/* Free a tree and everything it owns; NULL is a no-op. */
void sl_config_tree_free(sl_config_tree *t);

struct sockaddr;

/* What a request offers to conditions. Any string may be NULL (treated as the empty string).
 * What costs work to find (a header's combined value, the client address as text) is asked
 * of lazy() only when a condition on it is tested, so a config pays only for the fields its
 * conditions use. */
typedef struct sl_cond_input {
    const char *socket;
    const char *url;
    const char *host;
    const char *query;
    const char *scheme;            /* "http" */
    const char *method;            /* "GET" */
    const struct sockaddr *peer;   /* the client (remoteip == / != with a network), or NULL */
    /* The text of a field for block b: SL_COND_HEADER (b->header's combined value, NULL when
     * absent) or SL_COND_REMOTE_IP (the address as text: "127.0.0.1", "::1"). The returned
     * string must live as long as the request (captures point into it). NULL: none. */
    const char *(*lazy)(void *ud, const sl_cblock *b);
    void *ud;
} sl_cond_input;

/* Most groups of a condition's regex that %0..%9 in url.rewrite-* / url.redirect can name. */
#define SL_COND_MAX_CAPTURE 10

/* The groups of a regex (=~) condition that matched, for %N (lighttpd's cond_match): offsets
 * into subject, which lives as long as the request. */
typedef struct sl_cond_capture {
    bool set;        /* filled by the last evaluation of the conditions */
    const char *subject;
    unsigned n;      /* group pairs in ov (0: %0 only when n >= 1) */
    size_t ov[2 * SL_COND_MAX_CAPTURE]; /* start, end of group i at [2i], [2i+1]; SIZE_MAX: unset */
} sl_cond_capture;

/* Does this block's own condition hold? (root: always true; is_else: true — chain logic is in
 * sl_config_eval). ==/!= compare exactly (remoteip: the client address against the network);
 * =^ and =$ test a prefix and a suffix; =~/!~ run the compiled pattern. A pattern that fails to
 * run (e.g. it hits PCRE2's match limit on a hostile input) makes both =~ and !~ false, so a
 * runaway match never switches a block on. */
bool sl_cond_match(const sl_cblock *b, const sl_cond_input *in);

/* The same, and for a =~ block that holds, its groups into cap (cap may be NULL). */
bool sl_cond_match_capture(const sl_cblock *b, const sl_cond_input *in, sl_cond_capture *cap);

/* How many groups the regex of b's own =~ condition has; -1 when b has no =~ condition (none,
 * another operator, a plain else, or a pattern that did not compile). */
int sl_cond_groups(const sl_cblock *b);

/* Walk the tree from root: call apply() for each assignment of the root, then for each child chain
 * the first block whose condition matches (following else_next), recursively, in file order.
 * Outer blocks' assignments are applied before inner ones, so later calls override earlier ones. */
void sl_config_eval(const sl_config_tree *t, const sl_cond_input *in,
                    void (*apply)(const sl_cassign *a, void *ud), void *ud);

/* Visit every assignment in the tree (all blocks, whether they would match or not), with the block
 * it is in: used at start-up to type-check every key and to collect the $SERVER["socket"] values.
 * Order: visit_block(b), then visit() for b's assignments, then each child chain block by block,
 * recursively; the root is visited too. Either callback may be NULL. */
void sl_config_walk(const sl_config_tree *t,
                    void (*visit)(const sl_cblock *b, const sl_cassign *a, void *ud),
                    void (*visit_block)(const sl_cblock *b, void *ud), void *ud);

/* Short printable name of a value type, for messages: "string", "integer", "array". */
const char *sl_cval_type_name(sl_cval_type t);

/* Is v an array of strings: ( "k" => "v", ... ) when keyed (every item has a key), ( "v", ... )
 * when not (no item has one)? An empty array is both. The shape of list and map options. */
bool sl_cval_strings(const sl_cval *v, bool keyed);

#endif
