/* Config parser: lighttpd 1.4 syntax into a tree of conditional blocks.
 *
 * A hand-written lexer (one token of lookahead) feeds a recursive-descent parser for values and an
 * iterative statement loop for blocks: a `{` pushes a block, a `}` pops back to the parent, so only
 * arrays recurse (and their depth is capped). Includes reuse the statement loop with a new lexer on
 * the included file, adding statements to whatever block is open; include_shell does the same with
 * a command's output (run with /bin/sh in the including file's directory, as lighttpd does).
 *
 * Every node, string and value lives in one arena owned by the tree: values are immutable once
 * built, so a reference (`var.x`, an earlier key, `+=`) shares the value instead of copying it, and
 * an error anywhere simply drops the whole arena. The arena's size is capped, which bounds the
 * exponential growth that `var.x := var.x + var.x` repeated would otherwise cause. While parsing, a
 * hash map keyed by (scope, name) finds a block's assignment of a key, a variable, or a key inside
 * an array being built, so duplicate checks stay linear. Compiled patterns are listed separately
 * because PCRE2 owns their memory.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "config_parse.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <pcre2.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addr.h"

/* ------------------------------------------------------------------------------------------ */
/* Memory                                                                                     */

#define CHUNK_SIZE 65536
#define ARENA_ALIGN (alignof(max_align_t))

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
} arena_chunk;

struct sl_config_priv {
    arena_chunk *chunks; /* head: the chunk small allocations come from */
    size_t bytes;
    pcre2_code **res;
    size_t n_res, cap_res;
};

/* (scope, name) -> index. Scope is a block (its assignments), an array (its keys) or the variable
 * table; names are arena strings, so entries never dangle while the parse runs. */
typedef struct map_ent {
    const void *scope;
    const char *key;
    size_t idx;
} map_ent;

typedef struct str_map {
    map_ent *e;
    size_t cap, n;
} str_map;

/* ------------------------------------------------------------------------------------------ */
/* Lexer and parser state                                                                     */

typedef enum {
    T_EOF,
    T_STRING,
    T_INT,
    T_NAME,
    T_COND, /* $NAME */
    T_ASSIGN,
    T_APPEND,
    T_FORCE,
    T_EQ,
    T_NE,
    T_MATCH,
    T_NOMATCH,
    T_PREFIX, /* =^ */
    T_SUFFIX, /* =$ */
    T_ARROW,
    T_PLUS,
    T_LPAREN,
    T_RPAREN,
    T_COMMA,
    T_LBRACE,
    T_RBRACE,
    T_LBRACKET,
    T_RBRACKET,
} tok_type;

typedef struct lexer {
    const char *src;
    size_t len, pos;
    int line;
    tok_type type;
    int tok_line;
    size_t tok_pos; /* where the token at hand starts, for error recovery */
    long long num;
    char *text; /* STRING (decoded), NAME, COND: NUL-terminated */
    size_t text_len, text_cap;
} lexer;

typedef struct parse_ctx {
    sl_config_tree *tree;
    struct sl_config_priv *priv;
    sl_config_errors *errs;
    bool failed; /* the statement at hand failed: parse_text skips to the next one */
    bool fatal;  /* out of memory, over a size limit or too many errors: stop parsing */
    const char *file; /* current file's name (arena) */
    const char *dir;  /* directory for its relative includes; NULL: includes refused */
    lexer *lx;
    sl_cblock *cur;         /* innermost open block */
    sl_cblock *last_closed; /* block whose '}' was the previous statement, for `else` */
    int block_depth;
    int include_depth;
    int files_loaded;
    str_map map;
    sl_cval **vars;
    size_t n_vars;
    char poisoned; /* map scope of keys and variables whose assignment failed (its address) */
} parse_ctx;

/* ------------------------------------------------------------------------------------------ */
/* Error list                                                                                 */

static void errors_addv(sl_config_errors *e, const char *file, int line, const char *fmt,
                        va_list ap)
{
    char buf[1200];
    int n = line > 0 ? snprintf(buf, sizeof buf, "%s:%d: ", file, line)
                     : snprintf(buf, sizeof buf, "%s: ", file);
    if (n < 0 || (size_t)n >= sizeof buf) n = 0;
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    /* One fault seen twice (a statement re-read after recovery) is one message. */
    if (e->n && e->msg[e->n - 1] && !strcmp(e->msg[e->n - 1], buf)) return;
    /* Capacity doubles at powers of two, as arena_push. */
    char *m = strdup(buf);
    char **nm = m && (e->n & (e->n - 1)) == 0
                    ? realloc(e->msg, (e->n ? e->n * 2 : 1) * sizeof *nm)
                    : e->msg;
    if (!m || !nm) {
        free(m);
        e->dropped++; /* counted, so a check never passes for lack of memory */
        return;
    }
    e->msg = nm;
    e->msg[e->n++] = m;
}

void sl_config_error_add(sl_config_errors *e, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errors_addv(e, file ? file : "<config>", line, fmt, ap);
    va_end(ap);
}

void sl_config_errors_free(sl_config_errors *e)
{
    for (size_t i = 0; i < e->n; i++) free(e->msg[i]);
    free(e->msg);
    e->msg = NULL;
    e->n = e->dropped = 0;
}

void sl_config_errors_join(const sl_config_errors *e, char *buf, size_t len)
{
    if (!buf || !len) return;
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i <= e->n && o + 1 < len; i++) {
        int k = i < e->n ? snprintf(buf + o, len - o, "%s%s", i ? "\n" : "", e->msg[i])
                : e->dropped ? snprintf(buf + o, len - o, "%s%zu more error(s) not kept: out of "
                                        "memory", i ? "\n" : "", e->dropped)
                             : 0;
        if (k < 0) break;
        o += (size_t)k < len - o ? (size_t)k : len - o - 1;
    }
}

/* Record an error that does not break the syntax: the statement goes on. */
static void reportv(parse_ctx *c, int line, const char *fmt, va_list ap)
{
    if (c->fatal) return;
    c->tree->partial = true;
    errors_addv(c->errs, c->file ? c->file : "<config>", line, fmt, ap);
    if (c->errs->n + c->errs->dropped >= SL_CONFIG_MAX_ERRORS) {
        sl_config_error_add(c->errs, c->file, line, "too many errors (%d); not reading further",
                            SL_CONFIG_MAX_ERRORS);
        c->fatal = c->failed = true;
    }
}

static void report(parse_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(parse_ctx *c, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reportv(c, line, fmt, ap);
    va_end(ap);
}

/* End the statement without a message: it only failed because an earlier error was reported. */
static void fail_quietly(parse_ctx *c)
{
    c->tree->partial = true;
    c->failed = true;
}

/* Record an error that ends the statement; the first one per statement is the one reported
 * (what follows it is a consequence). */
static void fail_at(parse_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(parse_ctx *c, int line, const char *fmt, ...)
{
    if (c->failed) return;
    va_list ap;
    va_start(ap, fmt);
    reportv(c, line, fmt, ap);
    va_end(ap);
    c->failed = true;
}

/* The same about the token at hand. */
#define fail(c, ...) fail_at((c), (c)->lx ? (c)->lx->tok_line : 0, __VA_ARGS__)

/* Out of memory, or a limit that recovery cannot get around: stop parsing. */
static void fail_fatal(parse_ctx *c, const char *what)
{
    fail(c, "%s", what);
    c->fatal = true;
}

static void fail_too_large(parse_ctx *c)
{
    char m[96];
    snprintf(m, sizeof m, "configuration too large (its values would need more than %u MiB)",
             SL_CONFIG_MAX_MEMORY >> 20);
    fail_fatal(c, m);
}

static void *arena_alloc(parse_ctx *c, size_t n)
{
    struct sl_config_priv *p = c->priv;
    if (n > SL_CONFIG_MAX_MEMORY) goto too_big;
    n = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    if (!n) n = ARENA_ALIGN;
    arena_chunk *ch = p->chunks;
    if (ch && ch->cap - ch->used >= n) {
        void *r = ch->data + ch->used;
        ch->used += n;
        return r;
    }
    /* A large request gets a chunk of its own behind the head, so the head's free space keeps
     * serving small requests. */
    bool own = n > CHUNK_SIZE / 4;
    size_t cap = own ? n : CHUNK_SIZE;
    if (p->bytes + sizeof(arena_chunk) + cap > SL_CONFIG_MAX_MEMORY) goto too_big;
    ch = calloc(1, sizeof(arena_chunk) + cap);
    if (!ch) {
        fail_fatal(c, "out of memory");
        return NULL;
    }
    p->bytes += sizeof(arena_chunk) + cap;
    ch->cap = cap;
    ch->used = n;
    if (own && p->chunks) {
        ch->next = p->chunks->next;
        p->chunks->next = ch;
    } else {
        ch->next = p->chunks;
        p->chunks = ch;
    }
    return ch->data;
too_big:
    fail_too_large(c);
    return NULL;
}

static char *arena_strndup(parse_ctx *c, const char *s, size_t n)
{
    char *r = arena_alloc(c, n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

static char *arena_strdup(parse_ctx *c, const char *s)
{
    return arena_strndup(c, s, strlen(s));
}

/* Arena arrays grow by doubling from 4 without storing a capacity: with n elements in use, the
 * capacity is full exactly when n is 0 or a power of two >= 4. */
static void *arena_push(parse_ctx *c, void *arr, size_t n, size_t elsz)
{
    if (n != 0 && (n < 4 || (n & (n - 1)) != 0)) return arr;
    size_t cap = n ? n * 2 : 4;
    if (cap > SL_CONFIG_MAX_MEMORY / elsz) {
        fail_too_large(c);
        return NULL;
    }
    void *r = arena_alloc(c, cap * elsz);
    if (r && n) memcpy(r, arr, n * elsz);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Hash map                                                                                   */

static size_t map_hash(const void *scope, const char *key)
{
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)(uintptr_t)scope * 0x9e3779b97f4a7c15ull);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 29));
}

static map_ent *map_slot(const str_map *m, const void *scope, const char *key)
{
    size_t mask = m->cap - 1;
    for (size_t i = map_hash(scope, key) & mask;; i = (i + 1) & mask) {
        map_ent *e = &m->e[i];
        if (!e->key || (e->scope == scope && !strcmp(e->key, key))) return e;
    }
}

static bool map_get(const str_map *m, const void *scope, const char *key, size_t *idx)
{
    if (!m->cap) return false;
    map_ent *e = map_slot(m, scope, key);
    if (!e->key) return false;
    *idx = e->idx;
    return true;
}

/* Insert or update; key must outlive the map. */
static int map_put(parse_ctx *c, const void *scope, const char *key, size_t idx)
{
    str_map *m = &c->map;
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        /* The map only lives during the parse, but it grows with the values (joining keyed
         * arrays repeatedly is quadratic), so it shares their budget. */
        if (c->priv->bytes + ncap * sizeof(map_ent) > SL_CONFIG_MAX_MEMORY) {
            fail_too_large(c);
            return -1;
        }
        map_ent *ne = calloc(ncap, sizeof *ne);
        if (!ne) {
            fail_fatal(c, "out of memory");
            return -1;
        }
        str_map nm = {ne, ncap, m->n};
        for (size_t i = 0; i < m->cap; i++)
            if (m->e[i].key) *map_slot(&nm, m->e[i].scope, m->e[i].key) = m->e[i];
        free(m->e);
        *m = nm;
    }
    map_ent *e = map_slot(m, scope, key);
    if (!e->key) m->n++;
    *e = (map_ent){scope, key, idx};
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Lexer                                                                                      */

static bool is_alpha(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_name_char(unsigned char ch)
{
    return is_alpha(ch) || is_digit(ch) || ch == '.' || ch == '-' || ch == '_';
}

/* Copy s into buf for a message: at most max bytes, control and non-ASCII bytes as '?'. */
static const char *printable(char *buf, size_t bufsz, const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] && n < max && n + 4 < bufsz; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (s[n] && n + 4 <= bufsz) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

static const char *tok_desc(const lexer *lx, char *buf, size_t bufsz)
{
    char tmp[64];
    switch (lx->type) {
    case T_EOF: return "end of file";
    case T_STRING:
        snprintf(buf, bufsz, "string \"%s\"", printable(tmp, sizeof tmp, lx->text, 40));
        return buf;
    case T_INT: snprintf(buf, bufsz, "integer %lld", lx->num); return buf;
    case T_NAME:
        snprintf(buf, bufsz, "'%s'", printable(tmp, sizeof tmp, lx->text, 40));
        return buf;
    case T_COND:
        snprintf(buf, bufsz, "'$%s'", printable(tmp, sizeof tmp, lx->text, 40));
        return buf;
    case T_ASSIGN: return "'='";
    case T_APPEND: return "'+='";
    case T_FORCE: return "':='";
    case T_EQ: return "'=='";
    case T_NE: return "'!='";
    case T_MATCH: return "'=~'";
    case T_NOMATCH: return "'!~'";
    case T_PREFIX: return "'=^'";
    case T_SUFFIX: return "'=$'";
    case T_ARROW: return "'=>'";
    case T_PLUS: return "'+'";
    case T_LPAREN: return "'('";
    case T_RPAREN: return "')'";
    case T_COMMA: return "','";
    case T_LBRACE: return "'{'";
    case T_RBRACE: return "'}'";
    case T_LBRACKET: return "'['";
    case T_RBRACKET: return "']'";
    }
    return "token";
}

static int text_put(parse_ctx *c, char ch)
{
    lexer *lx = c->lx;
    if (lx->text_len + 1 >= lx->text_cap) {
        size_t ncap = lx->text_cap ? lx->text_cap * 2 : 128;
        char *nt = realloc(lx->text, ncap);
        if (!nt) {
            fail_fatal(c, "out of memory");
            return -1;
        }
        lx->text = nt;
        lx->text_cap = ncap;
    }
    lx->text[lx->text_len++] = ch;
    lx->text[lx->text_len] = 0;
    return 0;
}

static int lex_string(parse_ctx *c)
{
    lexer *lx = c->lx;
    lx->pos++; /* opening quote */
    if (text_put(c, 0) < 0) return -1; /* an empty string still needs its NUL */
    lx->text_len = 0;
    while (lx->pos < lx->len) {
        char ch = lx->src[lx->pos++];
        if (ch == '"') {
            lx->type = T_STRING;
            return 0;
        }
        if (ch == 0) {
            fail_at(c, lx->line, "NUL byte inside a string");
            return -1;
        }
        if (ch == '\n') lx->line++;
        if (ch == '\\' && lx->pos < lx->len) {
            char e = lx->src[lx->pos];
            /* Unknown escapes stay as backslash + char so that regexes such as "\.html$" reach
             * PCRE2 unchanged. */
            if (e == '"' || e == '\\' || e == 'n' || e == 't') {
                lx->pos++;
                ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            }
        }
        if (text_put(c, ch) < 0) return -1;
    }
    fail_at(c, lx->tok_line, "unterminated string");
    return -1;
}

static int lex_int(parse_ctx *c)
{
    lexer *lx = c->lx;
    size_t start = lx->pos;
    bool neg = lx->src[lx->pos] == '-';
    if (neg) lx->pos++;
    long long v = 0;
    bool overflow = false;
    while (lx->pos < lx->len && is_digit((unsigned char)lx->src[lx->pos])) {
        int d = lx->src[lx->pos++] - '0';
        /* Accumulate towards the sign so that LLONG_MIN itself is representable. */
        if (__builtin_mul_overflow(v, 10, &v) ||
            (neg ? __builtin_sub_overflow(v, d, &v) : __builtin_add_overflow(v, d, &v)))
            overflow = true;
    }
    bool junk = false;
    while (lx->pos < lx->len && is_name_char((unsigned char)lx->src[lx->pos])) {
        lx->pos++;
        junk = true;
    }
    char shown[48];
    size_t n = lx->pos - start;
    snprintf(shown, sizeof shown, "%.*s%s", (int)(n > 40 ? 40 : n), lx->src + start,
             n > 40 ? "..." : "");
    if (junk) {
        fail(c, "invalid integer '%s'", shown);
        return -1;
    }
    if (overflow) {
        fail(c, "integer out of range: %s", shown);
        return -1;
    }
    lx->num = v;
    lx->type = T_INT;
    return 0;
}

static int lex_name(parse_ctx *c, tok_type type)
{
    lexer *lx = c->lx;
    size_t start = lx->pos;
    while (lx->pos < lx->len && is_name_char((unsigned char)lx->src[lx->pos])) lx->pos++;
    size_t n = lx->pos - start;
    const char *s = lx->src + start;
    lx->text_len = 0;
    for (size_t i = 0; i < n; i++)
        if (text_put(c, s[i]) < 0) return -1;
    /* Dotted names need every part: "a..b" or "var." is a typo, not a key. */
    bool empty_part = s[n - 1] == '.';
    for (size_t i = 1; i < n; i++) empty_part |= s[i] == '.' && s[i - 1] == '.';
    if (empty_part) {
        char tmp[64];
        fail(c, "invalid name '%s'", printable(tmp, sizeof tmp, lx->text, 40));
        return -1;
    }
    lx->type = type;
    return 0;
}

static int lex_next(parse_ctx *c)
{
    lexer *lx = c->lx;
    lx->text_len = 0;
    for (;;) {
        if (lx->pos >= lx->len) {
            lx->type = T_EOF;
            lx->tok_line = lx->line;
            lx->tok_pos = lx->pos;
            return 0;
        }
        char ch = lx->src[lx->pos];
        if (ch == '\n') {
            lx->line++;
            lx->pos++;
        } else if (ch == ' ' || ch == '\t' || ch == '\r') {
            lx->pos++;
        } else if (ch == '#') {
            while (lx->pos < lx->len && lx->src[lx->pos] != '\n') lx->pos++;
        } else {
            break;
        }
    }
    lx->tok_line = lx->line;
    lx->tok_pos = lx->pos;
    unsigned char ch = (unsigned char)lx->src[lx->pos];
    unsigned char next = lx->pos + 1 < lx->len ? (unsigned char)lx->src[lx->pos + 1] : 0;
    if (ch == '"') return lex_string(c);
    if (is_digit(ch) || (ch == '-' && is_digit(next))) return lex_int(c);
    if (is_alpha(ch) || ch == '_') return lex_name(c, T_NAME);
    if (ch == '$') {
        if (!is_alpha(next) && next != '_') {
            fail(c, "expected a name after '$'");
            return -1;
        }
        lx->pos++;
        return lex_name(c, T_COND);
    }
    tok_type t;
    size_t n = 1;
    switch (ch) {
    case '=':
        if (next == '=') t = T_EQ, n = 2;
        else if (next == '~') t = T_MATCH, n = 2;
        else if (next == '^') t = T_PREFIX, n = 2;
        else if (next == '$') t = T_SUFFIX, n = 2; /* no value starts with '$' */
        else if (next == '>') t = T_ARROW, n = 2;
        else t = T_ASSIGN;
        break;
    case '+':
        if (next == '=') t = T_APPEND, n = 2;
        else t = T_PLUS;
        break;
    case ':':
        if (next != '=') goto bad;
        t = T_FORCE, n = 2;
        break;
    case '!':
        if (next == '=') t = T_NE, n = 2;
        else if (next == '~') t = T_NOMATCH, n = 2;
        else goto bad;
        break;
    case '(': t = T_LPAREN; break;
    case ')': t = T_RPAREN; break;
    case ',': t = T_COMMA; break;
    case '{': t = T_LBRACE; break;
    case '}': t = T_RBRACE; break;
    case '[': t = T_LBRACKET; break;
    case ']': t = T_RBRACKET; break;
    case ';':
        fail(c, "unexpected ';': statements are separated by whitespace or newlines, not ';'");
        return -1;
    default: goto bad;
    }
    lx->pos += n;
    lx->type = t;
    return 0;
bad:
    if (ch >= 0x21 && ch < 0x7f)
        fail(c, "unexpected character '%c'", ch);
    else
        fail(c, "unexpected byte 0x%02x", ch);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                     */

const char *sl_cval_type_name(sl_cval_type t)
{
    switch (t) {
    case SL_CV_STRING: return "string";
    case SL_CV_INT: return "integer";
    case SL_CV_ARRAY: return "array";
    }
    return "unknown";
}

bool sl_cval_strings(const sl_cval *v, bool keyed)
{
    if (v->type != SL_CV_ARRAY) return false;
    for (size_t i = 0; i < v->n_items; i++)
        if ((v->items[i].key != NULL) != keyed || v->items[i].val->type != SL_CV_STRING)
            return false;
    return true;
}

static sl_cval *new_val(parse_ctx *c, sl_cval_type type)
{
    sl_cval *v = arena_alloc(c, sizeof *v);
    if (v) v->type = type;
    return v;
}

static sl_cval *new_str(parse_ctx *c, const char *s, size_t n)
{
    sl_cval *v = new_val(c, SL_CV_STRING);
    if (v && !(v->str = arena_strndup(c, s, n))) return NULL;
    return v;
}

static bool has_keys(const sl_cval *a)
{
    for (size_t i = 0; i < a->n_items; i++)
        if (a->items[i].key) return true;
    return false;
}

/* a + b (append: a += b, which also lets an array take a string as a new element). */
static sl_cval *combine(parse_ctx *c, int line, sl_cval *a, sl_cval *b, bool append)
{
    sl_cval *r;
    if (a->type == SL_CV_INT && b->type == SL_CV_INT) {
        if (!(r = new_val(c, SL_CV_INT))) return NULL;
        if (__builtin_add_overflow(a->num, b->num, &r->num)) {
            fail_at(c, line, "integer overflow: %lld + %lld", a->num, b->num);
            return NULL;
        }
        return r;
    }
    /* A string and an integer join as text, either way round and with += too, as in lighttpd
     * 1.4 (Debian's config runs `include_shell "/usr/share/lighttpd/use-ipv6.pl " + server.port`). */
    bool sa = a->type == SL_CV_STRING, sb = b->type == SL_CV_STRING;
    if ((sa || a->type == SL_CV_INT) && (sb || b->type == SL_CV_INT) && (sa || sb)) {
        char na[24], nb[24];
        const char *pa = sa ? a->str : (snprintf(na, sizeof na, "%lld", a->num), na);
        const char *pb = sb ? b->str : (snprintf(nb, sizeof nb, "%lld", b->num), nb);
        size_t la = strlen(pa), lb = strlen(pb);
        if (!(r = new_val(c, SL_CV_STRING)) || !(r->str = arena_alloc(c, la + lb + 1)))
            return NULL;
        memcpy(r->str, pa, la);
        memcpy(r->str + la, pb, lb + 1);
        return r;
    }
    if (a->type == SL_CV_ARRAY && (b->type == SL_CV_ARRAY || (append && b->type == SL_CV_STRING))) {
        size_t nb = b->type == SL_CV_ARRAY ? b->n_items : 1;
        if (a->n_items > SL_CONFIG_MAX_MEMORY / sizeof(sl_cval_item)) {
            fail_too_large(c);
            return NULL;
        }
        if (!(r = new_val(c, SL_CV_ARRAY))) return NULL;
        r->n_items = a->n_items + nb;
        if (!(r->items = arena_alloc(c, r->n_items * sizeof *r->items))) return NULL;
        if (a->n_items) memcpy(r->items, a->items, a->n_items * sizeof *r->items);
        if (b->type == SL_CV_STRING) {
            r->items[a->n_items].val = b;
            return r;
        }
        if (nb) memcpy(r->items + a->n_items, b->items, nb * sizeof *r->items);
        /* Each side already has unique keys; only a clash between the two sides is new. */
        if (has_keys(a) && has_keys(b)) {
            for (size_t i = 0; i < a->n_items; i++)
                if (a->items[i].key && map_put(c, r, a->items[i].key, i) < 0) return NULL;
            for (size_t i = 0; i < nb; i++) {
                size_t dummy;
                const char *k = b->items[i].key;
                if (k && map_get(&c->map, r, k, &dummy)) {
                    char tmp[64];
                    fail_at(c, line, "duplicate array key \"%s\" when joining arrays",
                            printable(tmp, sizeof tmp, k, 40));
                    return NULL;
                }
            }
        }
        return r;
    }
    fail_at(c, line, "type mismatch: %s %s %s", sl_cval_type_name(a->type), append ? "+=" : "+",
            sl_cval_type_name(b->type));
    return NULL;
}

static sl_cval *parse_expr(parse_ctx *c, int depth);

/* The value visible for a key from the open block: set in it or in an enclosing block earlier. */
static sl_cval *visible_key(parse_ctx *c, const char *key)
{
    for (sl_cblock *b = c->cur; b; b = b->parent) {
        size_t idx;
        if (map_get(&c->map, b, key, &idx)) return b->assigns[idx].val;
    }
    return NULL;
}

static sl_cval *lookup_ref(parse_ctx *c, const char *name)
{
    char tmp[64];
    size_t idx;
    /* A name whose own assignment failed was reported there; its use is no new error. */
    if (map_get(&c->map, &c->poisoned, name, &idx) && !visible_key(c, name) &&
        !(strncmp(name, "var.", 4) == 0 && map_get(&c->map, &c->vars, name, &idx))) {
        fail_quietly(c);
        return NULL;
    }
    if (!strncmp(name, "var.", 4)) {
        if (map_get(&c->map, &c->vars, name, &idx)) return c->vars[idx];
        fail(c, "unknown variable '%s'", printable(tmp, sizeof tmp, name, 40));
        return NULL;
    }
    if (!strncmp(name, "env.", 4)) {
        const char *e = getenv(name + 4);
        if (!e) {
            fail(c, "environment variable '%s' is not set",
                 printable(tmp, sizeof tmp, name + 4, 40));
            return NULL;
        }
        return new_str(c, e, strlen(e));
    }
    sl_cval *v = visible_key(c, name);
    if (!v)
        fail(c, "unknown variable or key '%s' (a key must be set before it is used)",
             printable(tmp, sizeof tmp, name, 40));
    return v;
}

static bool at_line_start(const lexer *lx, size_t pos);
static bool starts_statement(const lexer *lx, size_t pos);

/* A name that begins a line and a statement ("b = 1") where an array item or its ',' / ')' was
 * due: the array was left open, which says more than "unknown variable 'b'". */
static bool next_statement_here(const lexer *lx)
{
    return lx->type == T_NAME && at_line_start(lx, lx->tok_pos) && starts_statement(lx, lx->tok_pos);
}

static sl_cval *parse_array(parse_ctx *c, int depth)
{
    int open_line = c->lx->tok_line;
    if (depth >= SL_CONFIG_MAX_ARRAY_DEPTH) {
        fail(c, "arrays nested too deep (more than %d levels)", SL_CONFIG_MAX_ARRAY_DEPTH);
        return NULL;
    }
    sl_cval *arr = new_val(c, SL_CV_ARRAY);
    if (!arr || lex_next(c) < 0) return NULL;
    for (;;) {
        if (c->lx->type == T_RPAREN) break;
        if (next_statement_here(c->lx)) {
            fail(c, "unterminated array (opened on line %d)", open_line);
            return NULL;
        }
        int item_line = c->lx->tok_line;
        sl_cval *v = parse_expr(c, depth + 1);
        if (!v) return NULL;
        char *key = NULL;
        if (c->lx->type == T_ARROW) {
            if (v->type != SL_CV_STRING) {
                fail_at(c, item_line, "array key must be a string, not %s",
                        sl_cval_type_name(v->type));
                return NULL;
            }
            key = v->str;
            size_t dummy;
            if (map_get(&c->map, arr, key, &dummy)) {
                char tmp[64];
                fail_at(c, item_line, "duplicate array key \"%s\"",
                        printable(tmp, sizeof tmp, key, 40));
                return NULL;
            }
            if (map_put(c, arr, key, arr->n_items) < 0 || lex_next(c) < 0) return NULL;
            if (!(v = parse_expr(c, depth + 1))) return NULL;
        }
        if (!(arr->items = arena_push(c, arr->items, arr->n_items, sizeof *arr->items)))
            return NULL;
        arr->items[arr->n_items++] = (sl_cval_item){key, v};
        if (c->lx->type == T_COMMA) {
            if (lex_next(c) < 0) return NULL;
            continue;
        }
        if (c->lx->type == T_RPAREN) break;
        if (c->lx->type == T_EOF || next_statement_here(c->lx)) {
            fail(c, "unterminated array (opened on line %d)", open_line);
        } else {
            char d[96];
            fail(c, "expected ',' or ')' in array, got %s", tok_desc(c->lx, d, sizeof d));
        }
        return NULL;
    }
    if (lex_next(c) < 0) return NULL; /* ')' */
    if (!arr->n_items) arr->items = NULL;
    return arr;
}

static sl_cval *parse_primary(parse_ctx *c, int depth)
{
    lexer *lx = c->lx;
    sl_cval *v = NULL;
    char d[96];
    switch (lx->type) {
    case T_STRING:
        v = new_str(c, lx->text, lx->text_len);
        break;
    case T_INT:
        if ((v = new_val(c, SL_CV_INT))) v->num = lx->num;
        break;
    case T_NAME:
        v = lookup_ref(c, lx->text);
        break;
    case T_LPAREN: return parse_array(c, depth);
    default:
        fail(c, "expected a value, got %s", tok_desc(lx, d, sizeof d));
        return NULL;
    }
    if (!v || lex_next(c) < 0) return NULL;
    return v;
}

static sl_cval *parse_expr(parse_ctx *c, int depth)
{
    sl_cval *v = parse_primary(c, depth);
    while (v && c->lx->type == T_PLUS) {
        int line = c->lx->tok_line;
        if (lex_next(c) < 0) return NULL;
        sl_cval *r = parse_primary(c, depth);
        if (!r) return NULL;
        v = combine(c, line, v, r, false);
    }
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Statements                                                                                 */

static int set_var(parse_ctx *c, int line, char *name, tok_type op, sl_cval *v)
{
    size_t idx;
    bool have = map_get(&c->map, &c->vars, name, &idx);
    if (have && op == T_ASSIGN) {
        char tmp[64];
        /* The syntax is fine: say so and go on with the new value, as := would. */
        report(c, line, "duplicate variable '%s'; use := to override",
               printable(tmp, sizeof tmp, name, 40));
    }
    if (have && op == T_APPEND && !(v = combine(c, line, c->vars[idx], v, true))) return -1;
    if (have) {
        c->vars[idx] = v;
        return 0;
    }
    if (!(c->vars = arena_push(c, c->vars, c->n_vars, sizeof *c->vars))) return -1;
    c->vars[c->n_vars] = v;
    if (map_put(c, &c->vars, name, c->n_vars) < 0) return -1;
    c->n_vars++;
    return 0;
}

static int set_key(parse_ctx *c, int line, char *key, tok_type op, sl_cval *v)
{
    sl_cblock *b = c->cur;
    size_t idx;
    bool here = map_get(&c->map, b, key, &idx);
    if (here && op == T_ASSIGN) {
        char tmp[64];
        /* The syntax is fine: say so and go on with the new value, as := would. */
        report(c, line, "duplicate config key '%s'; use := to override",
               printable(tmp, sizeof tmp, key, 40));
    }
    if (op == T_APPEND) {
        sl_cval *prev = visible_key(c, key);
        if (prev && !(v = combine(c, line, prev, v, true))) return -1;
    }
    if (!here) {
        if (!(b->assigns = arena_push(c, b->assigns, b->n_assigns, sizeof *b->assigns)))
            return -1;
        idx = b->n_assigns;
        if (map_put(c, b, key, idx) < 0) return -1;
        b->n_assigns++;
        b->assigns[idx].key = key;
    }
    b->assigns[idx].val = v;
    b->assigns[idx].file = c->file;
    b->assigns[idx].line = line;
    return 0;
}

static int parse_assignment(parse_ctx *c)
{
    lexer *lx = c->lx;
    int line = lx->tok_line;
    char tmp[64], d[96];
    char *key = arena_strndup(c, lx->text, lx->text_len);
    if (!key || lex_next(c) < 0) return -1;
    tok_type op = lx->type;
    if (op != T_ASSIGN && op != T_APPEND && op != T_FORCE) {
        fail_at(c, line, "expected '=', '+=' or ':=' after '%s', got %s",
                printable(tmp, sizeof tmp, key, 40), tok_desc(lx, d, sizeof d));
        return -1;
    }
    bool to_env = !strncmp(key, "env.", 4);
    if (to_env)
        report(c, line, "cannot assign to environment variable '%s'",
               printable(tmp, sizeof tmp, key, 40));
    sl_cval *v = lex_next(c) < 0 ? NULL : parse_expr(c, 0);
    int r = !v ? -1 : to_env ? 0 : !strncmp(key, "var.", 4) ? set_var(c, line, key, op, v)
                                                              : set_key(c, line, key, op, v);
    /* Later uses of a key or variable that could not be set would only repeat this error. */
    if (r < 0 && !c->fatal) map_put(c, &c->poisoned, key, 0);
    return r;
}

static int compile_pattern(parse_ctx *c, int line, sl_cblock *b)
{
    struct sl_config_priv *p = c->priv;
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)b->pattern, PCRE2_ZERO_TERMINATED, 0, &ec, &off,
                                   NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        char tmp[96];
        if (pcre2_get_error_message(ec, msg, sizeof msg) < 0)
            snprintf((char *)msg, sizeof msg, "?");
        /* A report, not a failure: the block is read on, its pattern never matches. */
        report(c, line, "bad regex \"%s\": %s at offset %zu",
               printable(tmp, sizeof tmp, b->pattern, 80), (char *)msg, (size_t)off);
        return -1;
    }
    if (p->n_res == p->cap_res) {
        size_t ncap = p->cap_res ? p->cap_res * 2 : 8;
        pcre2_code **nr = realloc(p->res, ncap * sizeof *nr);
        if (!nr) {
            pcre2_code_free(re);
            fail_fatal(c, "out of memory");
            return -1;
        }
        p->res = nr;
        p->cap_res = ncap;
    }
    p->res[p->n_res++] = re;
    b->re = re;
    return 0;
}

/* `$NAME["sub"] op value {` with the lexer on $NAME; leaves it after the '{'. */
/* Where the port of a (normalized) host starts (its ':'), or its end when it has none. */
static size_t host_port_at(const char *h)
{
    const char *from = h[0] == '[' ? strchr(h, ']') : h;
    const char *colon = from ? strchr(from, ':') : NULL;
    return colon ? (size_t)(colon - h) : strlen(h);
}

/* Can a $HTTP["host"] == / != pattern equal a host as requests present it (sl_host_normalize)? Not
 * with an upper-case letter, a trailing dot, or the default port ":80": those are normalized away,
 * so such a rule would silently never apply. */
static bool host_pattern_normal(const char *p)
{
    for (const char *q = p; *q; q++)
        if (*q >= 'A' && *q <= 'Z') return false;
    size_t at = host_port_at(p);
    return !(at > 0 && p[at - 1] == '.') && strcmp(p + at, ":80") != 0;
}


/* The field a condition names, or SL_COND_NONE; *header gets the field name of a header
 * condition (lighttpd maps useragent, referer, cookie and language onto request headers). */
static sl_cond_field cond_field(const char *obj, const char *name, const char **header)
{
    static const struct {
        const char *name;
        sl_cond_field field;
        const char *header;
    } http[] = {
        {"url", SL_COND_URL, NULL},
        {"host", SL_COND_HOST, NULL},
        {"querystring", SL_COND_QUERY, NULL},
        {"query-string", SL_COND_QUERY, NULL},
        {"remoteip", SL_COND_REMOTE_IP, NULL},
        {"remote-ip", SL_COND_REMOTE_IP, NULL},
        {"scheme", SL_COND_SCHEME, NULL},
        {"request-method", SL_COND_METHOD, NULL},
        {"useragent", SL_COND_HEADER, "User-Agent"},
        {"user-agent", SL_COND_HEADER, "User-Agent"},
        {"referer", SL_COND_HEADER, "Referer"},
        {"cookie", SL_COND_HEADER, "Cookie"},
        {"language", SL_COND_HEADER, "Accept-Language"},
    };
    *header = NULL;
    if (!strcmp(obj, "SERVER")) return !strcmp(name, "socket") ? SL_COND_SOCKET : SL_COND_NONE;
    if (!strcmp(obj, "REQUEST_HEADER")) {
        /* A field name is a token (RFC 9110 §5.1). */
        if (!name[0] || name[strspn(name, "!#$%&'*+-.^_`|~0123456789"
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")])
            return SL_COND_NONE;
        *header = name;
        return SL_COND_HEADER;
    }
    if (!strcmp(obj, "HTTP"))
        for (size_t i = 0; i < sizeof http / sizeof http[0]; i++)
            if (!strcmp(name, http[i].name)) {
                *header = http[i].header;
                return http[i].field;
            }
    return SL_COND_NONE;
}

static bool has_upper(const char *p)
{
    for (; *p; p++)
        if (*p >= 'A' && *p <= 'Z') return true;
    return false;
}

/* $HTTP["remoteip"] == "ip", "ip/bits", IPv6 also in brackets ("[::1]/128") as lighttpd takes
 * it. 0 or -EINVAL. */
static int parse_net(const char *s, sl_cond_net *net)
{
    char buf[128];
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || (end[1] && end[1] != '/') ||
            snprintf(buf, sizeof buf, "%.*s%s", (int)(end - s - 1), s + 1, end + 1) >=
                (int)sizeof buf ||
            !strchr(buf, ':'))
            return -EINVAL;
        s = buf;
    }
    return sl_cidr_parse(s, net->addr, &net->family, &net->bits);
}

static sl_cblock *parse_condition(parse_ctx *c)
{
    lexer *lx = c->lx;
    int line = lx->tok_line;
    char d[96], t1[64], t2[64];
    if (c->block_depth >= SL_CONFIG_MAX_BLOCK_DEPTH) {
        fail(c, "conditions nested too deep (more than %d levels)", SL_CONFIG_MAX_BLOCK_DEPTH);
        return NULL;
    }
    char *name = arena_strndup(c, lx->text, lx->text_len);
    if (!name || lex_next(c) < 0) return NULL;
    if (lx->type != T_LBRACKET) {
        fail(c, "expected '[' after '$%s', got %s", printable(t1, sizeof t1, name, 40),
             tok_desc(lx, d, sizeof d));
        return NULL;
    }
    if (lex_next(c) < 0) return NULL;
    if (lx->type != T_STRING) {
        fail(c, "expected a quoted name in $%s[...], got %s", printable(t1, sizeof t1, name, 40),
             tok_desc(lx, d, sizeof d));
        return NULL;
    }
    const char *header = NULL;
    sl_cond_field field = cond_field(name, lx->text, &header);
    /* Errors in what a condition means (not in its syntax) are reported and the block is read
     * on as a placeholder, so that its statements are checked too. */
    bool placeholder = false;
    if (field == SL_COND_NONE) {
        if (!strcmp(name, "REQUEST_HEADER"))
            report(c, line, "$REQUEST_HEADER[\"%s\"]: not a header field name",
                   printable(t2, sizeof t2, lx->text, 40));
        else if (!strcmp(name, "HTTP"))
            report(c, line,
                   "unsupported condition $HTTP[\"%s\"] (known: url, host, querystring, "
                   "remoteip, scheme, request-method, useragent, referer, cookie, language; "
                   "any header with $REQUEST_HEADER[\"Name\"])",
                   printable(t2, sizeof t2, lx->text, 40));
        else
            report(c, line, "unsupported condition $%s[\"%s\"]",
                   printable(t1, sizeof t1, name, 40), printable(t2, sizeof t2, lx->text, 40));
        placeholder = true;
    } else if (header && !(header = arena_strdup(c, header))) {
        return NULL;
    }
    if (lex_next(c) < 0) return NULL;
    if (lx->type != T_RBRACKET) {
        fail(c, "expected ']', got %s", tok_desc(lx, d, sizeof d));
        return NULL;
    }
    if (lex_next(c) < 0) return NULL;
    sl_cond_op op;
    switch (lx->type) {
    case T_EQ: op = SL_COND_EQ; break;
    case T_NE: op = SL_COND_NE; break;
    case T_MATCH: op = SL_COND_MATCH; break;
    case T_NOMATCH: op = SL_COND_NOMATCH; break;
    case T_PREFIX: op = SL_COND_PREFIX; break;
    case T_SUFFIX: op = SL_COND_SUFFIX; break;
    default:
        fail(c, "expected '==', '!=', '=~', '!~', '=^' or '=$' in condition, got %s",
             tok_desc(lx, d, sizeof d));
        return NULL;
    }
    if (field == SL_COND_SOCKET && op != SL_COND_EQ && op != SL_COND_NE) {
        report(c, lx->tok_line, "$SERVER[\"socket\"] only supports == and !=");
        placeholder = true;
    }
    if (lex_next(c) < 0) return NULL;
    int value_line = lx->tok_line;
    sl_cval *v = parse_expr(c, 0);
    if (!v) return NULL;
    if (v->type != SL_CV_STRING) {
        report(c, value_line, "condition value must be a string, not %s",
               sl_cval_type_name(v->type));
        placeholder = true;
    }
    if (lx->type != T_LBRACE) {
        fail(c, "expected '{' after condition, got %s", tok_desc(lx, d, sizeof d));
        return NULL;
    }
    if (!placeholder && field == SL_COND_HOST && (op == SL_COND_EQ || op == SL_COND_NE) &&
        !host_pattern_normal(v->str)) {
        report(c, value_line,
               "$HTTP[\"host\"] %s \"%s\" can never match: hosts are compared normalized (lower "
               "case, no trailing dot, no \":80\")",
               op == SL_COND_EQ ? "==" : "!=", printable(t1, sizeof t1, v->str, 80));
        placeholder = true;
    }
    if (!placeholder && field == SL_COND_HOST && (op == SL_COND_PREFIX || op == SL_COND_SUFFIX) &&
        has_upper(v->str)) {
        report(c, value_line,
               "$HTTP[\"host\"] %s \"%s\" can never match: hosts are compared in lower case",
               op == SL_COND_PREFIX ? "=^" : "=$", printable(t1, sizeof t1, v->str, 80));
        placeholder = true;
    }
    sl_cond_net net;
    if (!placeholder && field == SL_COND_REMOTE_IP && (op == SL_COND_EQ || op == SL_COND_NE) &&
        parse_net(v->str, &net) < 0) {
        report(c, value_line,
               "$HTTP[\"remoteip\"] %s \"%s\": not an IP address or network (want \"ip\" or "
               "\"ip/bits\", bits at most 32 for IPv4 and 128 for IPv6)",
               op == SL_COND_EQ ? "==" : "!=", printable(t1, sizeof t1, v->str, 80));
        placeholder = true;
    }
    sl_cblock *b = arena_alloc(c, sizeof *b);
    if (!b) return NULL;
    b->field = field;
    b->op = op;
    b->pattern = v->type == SL_CV_STRING ? v->str : arena_strdup(c, "");
    b->header = (char *)header;
    b->file = c->file;
    b->line = line;
    if (!b->pattern) return NULL;
    if (placeholder) {
        /* Never matches, never names a listener: it only carries its statements to the checks. */
        b->field = SL_COND_URL;
        b->op = SL_COND_MATCH;
        b->header = NULL;
    } else if ((op == SL_COND_MATCH || op == SL_COND_NOMATCH) &&
               compile_pattern(c, value_line, b) < 0 && c->fatal) {
        return NULL;
    } else if (field == SL_COND_REMOTE_IP && (op == SL_COND_EQ || op == SL_COND_NE)) {
        if (!(b->net = arena_alloc(c, sizeof *b->net))) return NULL;
        *b->net = net;
    }
    if (lex_next(c) < 0) return NULL; /* '{' */
    return b;
}

static void open_block(parse_ctx *c, sl_cblock *b)
{
    c->cur = b;
    c->block_depth++;
}

static int parse_else(parse_ctx *c, sl_cblock *prev)
{
    lexer *lx = c->lx;
    int line = lx->tok_line;
    char d[96];
    if (!prev) {
        fail(c, "'else' without a condition block right before it");
        return -1;
    }
    if (prev->is_else) {
        fail(c, "'else' cannot follow a plain 'else { }' block");
        return -1;
    }
    if (lex_next(c) < 0) return -1;
    sl_cblock *b;
    if (lx->type == T_LBRACE) {
        if (c->block_depth >= SL_CONFIG_MAX_BLOCK_DEPTH) {
            fail(c, "conditions nested too deep (more than %d levels)", SL_CONFIG_MAX_BLOCK_DEPTH);
            return -1;
        }
        if (!(b = arena_alloc(c, sizeof *b))) return -1;
        b->is_else = true;
        b->field = prev->field;
        b->op = prev->op;
        b->pattern = prev->pattern;
        b->re = prev->re;
        b->header = prev->header;
        b->net = prev->net;
        b->file = c->file;
        b->line = line;
        if (lex_next(c) < 0) return -1;
    } else if (lx->type == T_COND) {
        if (!(b = parse_condition(c))) return -1;
    } else {
        fail(c, "expected '{' or a condition after 'else', got %s", tok_desc(lx, d, sizeof d));
        return -1;
    }
    b->parent = prev->parent;
    prev->else_next = b;
    open_block(c, b);
    return 0;
}

static void parse_text(parse_ctx *c, const char *text, size_t len);

static int read_all(const char *path, char **out, size_t *outlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -errno;
    struct stat st;
    int e = fstat(fd, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        close(fd);
        return -e;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (n == cap) {
            if (cap > SL_CONFIG_MAX_TEXT) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            e = errno;
            free(buf);
            close(fd);
            return -e;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n > SL_CONFIG_MAX_TEXT) {
        free(buf);
        return -EFBIG;
    }
    *out = buf;
    *outlen = n;
    return 0;
}

/* Directory part of path, for its relative includes: "" for a bare name (the working directory). */
static char *dir_of(parse_ctx *c, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return arena_strdup(c, "");
    return arena_strndup(c, path, slash == path ? 1 : (size_t)(slash - path));
}

/* dir + "/" + name, with dir's glob metacharacters escaped when for_glob. */
static char *join_path(const char *dir, const char *name, bool for_glob)
{
    size_t dl = name[0] == '/' ? 0 : strlen(dir), nl = strlen(name);
    char *r = malloc(dl * 2 + nl + 2);
    if (!r) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < dl; i++) {
        if (for_glob && strchr("*?[]\\", dir[i])) r[o++] = '\\';
        r[o++] = dir[i];
    }
    if (dl && dir[dl - 1] != '/') r[o++] = '/';
    memcpy(r + o, name, nl + 1);
    return r;
}

/* Longest path quoted in a message before it is cut with "...". */
#define PATH_SHOWN 400

/* Parse text (freed here) as the file `name` whose includes resolve against `dir`, into the
 * block open now. Its errors are its own: the include statement did its part. */
static void parse_included(parse_ctx *c, const char *name, const char *dir, char *text, size_t len)
{
    const char *sv_file = c->file, *sv_dir = c->dir;
    lexer *sv_lx = c->lx;
    c->file = name;
    c->dir = dir;
    c->include_depth++;
    parse_text(c, text, len);
    c->include_depth--;
    c->file = sv_file;
    c->dir = sv_dir;
    c->lx = sv_lx;
    free(text);
}

static int include_one(parse_ctx *c, int line, const char *path)
{
    char tmp[PATH_SHOWN + 8];
    if (++c->files_loaded > SL_CONFIG_MAX_INCLUDED_FILES) {
        fail_at(c, line, "too many included files (more than %d)", SL_CONFIG_MAX_INCLUDED_FILES);
        return -1;
    }
    char *text;
    size_t len;
    int r = read_all(path, &text, &len);
    if (r < 0) {
        fail_at(c, line, "cannot include \"%s\": %s", printable(tmp, sizeof tmp, path, PATH_SHOWN),
                r == -EFBIG ? "file too large" : strerror(-r));
        return -1;
    }
    char *fname = arena_strdup(c, path);
    char *fdir = fname ? dir_of(c, fname) : NULL;
    if (!fdir) {
        free(text);
        return -1;
    }
    parse_included(c, fname, fdir, text, len);
    return 0;
}

/* The argument of include or include_shell (kw): a non-empty string, in a config read from a
 * file (its directory resolves it), within the nesting limit. NULL after reporting; *line is
 * the statement's line. `nodir` and `empty` say why in kw's own words. */
static const char *include_arg(parse_ctx *c, const char *kw, const char *nodir, const char *empty,
                               int *line)
{
    *line = c->lx->tok_line;
    char tmp[PATH_SHOWN + 8];
    if (lex_next(c) < 0) return NULL;
    sl_cval *v = parse_expr(c, 0);
    if (!v) return NULL;
    if (v->type != SL_CV_STRING) {
        fail_at(c, *line, "%s needs a string, not %s", kw, sl_cval_type_name(v->type));
        return NULL;
    }
    if (!c->dir) {
        fail_at(c, *line, "%s is not allowed here (%s)", kw, nodir);
        return NULL;
    }
    if (!v->str[0]) {
        fail_at(c, *line, "%s of an empty %s", kw, empty);
        return NULL;
    }
    if (c->include_depth >= SL_CONFIG_MAX_INCLUDE_DEPTH) {
        fail_at(c, *line, "include nesting too deep (more than %d levels) at %s%s\"%s\"",
                SL_CONFIG_MAX_INCLUDE_DEPTH, strcmp(kw, "include") ? kw : "",
                strcmp(kw, "include") ? " " : "", printable(tmp, sizeof tmp, v->str, PATH_SHOWN));
        return NULL;
    }
    return v->str;
}

static int parse_include(parse_ctx *c)
{
    int line;
    char tmp[PATH_SHOWN + 8];
    const char *arg = include_arg(c, "include", "no base directory to resolve it against", "path",
                                  &line);
    if (!arg) return -1;
    if (!strpbrk(arg, "*?[")) {
        char *path = join_path(c->dir, arg, false);
        if (!path) {
            fail_fatal(c, "out of memory");
            return -1;
        }
        int r = include_one(c, line, path);
        free(path);
        return r;
    }
    char *pat = join_path(c->dir, arg, true);
    if (!pat) {
        fail_fatal(c, "out of memory");
        return -1;
    }
    glob_t g;
    int gr = glob(pat, 0, NULL, &g);
    free(pat);
    /* A pattern that matches nothing includes nothing (an empty conf.d is normal). */
    if (gr == GLOB_NOMATCH) return 0;
    if (gr != 0) {
        fail_at(c, line, "include \"%s\": %s", printable(tmp, sizeof tmp, arg, PATH_SHOWN),
                gr == GLOB_NOSPACE ? "out of memory" : "cannot read directory");
        return -1;
    }
    int r = 0;
    for (size_t i = 0; i < g.gl_pathc && r == 0; i++) r = include_one(c, line, g.gl_pathv[i]);
    globfree(&g);
    return r;
}

/* Run cmd with /bin/sh in dir ("" = the working directory), as lighttpd's include_shell does:
 * its standard output is the text (at most SL_CONFIG_MAX_TEXT bytes), its standard error goes
 * where ours does, and anything but exit status 0 is a failure described in why. */
static int run_shell(const char *dir, const char *cmd, char **out, size_t *outlen, char *why,
                     size_t whylen)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(why, whylen, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    /* fork/exec rather than posix_spawn: <spawn.h> is also the name of a header of proxy_core
     * that some builds put on the include path first. */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        snprintf(why, whylen, "cannot run /bin/sh: %s", strerror(e));
        return -1;
    }
    if (pid == 0) {
        /* The child: only async-signal-safe calls until exec. */
        if (pfd[1] == STDOUT_FILENO)
            fcntl(pfd[1], F_SETFD, 0); /* our stdout was closed: the pipe took its number */
        else if (dup2(pfd[1], STDOUT_FILENO) < 0)
            _exit(126);
        if (dir[0] && chdir(dir) < 0) _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    bool big = false;
    int rerr = 0;
    while (buf) {
        if (n == cap) {
            if (cap > SL_CONFIG_MAX_TEXT) {
                big = true;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(pfd[0], buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rerr = errno;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(pfd[0]); /* a command still writing gets SIGPIPE */
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!buf || big || rerr || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!buf)
            snprintf(why, whylen, "out of memory");
        else if (big || n > SL_CONFIG_MAX_TEXT)
            snprintf(why, whylen, "its output is too large (more than %d bytes)", SL_CONFIG_MAX_TEXT);
        else if (rerr)
            snprintf(why, whylen, "cannot read its output: %s", strerror(rerr));
        else if (WIFEXITED(status))
            snprintf(why, whylen, "it exited with status %d", WEXITSTATUS(status));
        else
            snprintf(why, whylen, "it was killed by signal %d", WTERMSIG(status));
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = n;
    return 0;
}

/* include_shell "command": the command's output, parsed as config in place of the statement
 * (lighttpd 1.4's semantics: run at start-up by the user starting the server, in the including
 * file's directory; a failing command is an error, not an empty include). */
static int parse_include_shell(parse_ctx *c)
{
    int line;
    char tmp[PATH_SHOWN + 8];
    /* A config given as a string (tests, fuzzing) runs nothing. */
    const char *cmd = include_arg(c, "include_shell", "only in a config file", "command", &line);
    if (!cmd) return -1;
    printable(tmp, sizeof tmp, cmd, PATH_SHOWN);
    if (++c->files_loaded > SL_CONFIG_MAX_INCLUDED_FILES) {
        fail_at(c, line, "too many included files (more than %d)", SL_CONFIG_MAX_INCLUDED_FILES);
        return -1;
    }
    char *text, why[128];
    size_t len;
    if (run_shell(c->dir, cmd, &text, &len, why, sizeof why) < 0) {
        fail_at(c, line, "include_shell \"%s\": %s", tmp, why);
        return -1;
    }
    /* Its errors name the command, with the line of its output. */
    size_t nl = strlen(tmp) + 20;
    char *name = arena_alloc(c, nl);
    if (!name) {
        free(text);
        return -1;
    }
    snprintf(name, nl, "include_shell \"%s\"", tmp);
    parse_included(c, name, c->dir, text, len);
    return 0;
}

/* ---- Recovery after an error: skip to the next statement, keep the braces balanced ---- */

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* Whether only blanks stand between the last newline (or the start) and pos. */
static bool at_line_start(const lexer *lx, size_t pos)
{
    while (pos > 0 && is_blank(lx->src[pos - 1])) pos--;
    return pos == 0 || lx->src[pos - 1] == '\n';
}

/* Whether the line at pos (after blanks) begins a statement: a condition, '}', a key or variable
 * followed by '=', '+=' or ':=', or include / include_shell / else followed by what they take.
 * A name followed by anything else (',' or ')') is a reference inside a value, not a statement. */
static bool starts_statement(const lexer *lx, size_t pos)
{
    const char *s = lx->src;
    size_t n = lx->len;
    while (pos < n && is_blank(s[pos])) pos++;
    if (pos >= n) return false;
    if (s[pos] == '$' || s[pos] == '}') return true;
    if (!is_alpha((unsigned char)s[pos]) && s[pos] != '_') return false;
    size_t w = pos;
    while (pos < n && is_name_char((unsigned char)s[pos])) pos++;
    size_t wl = pos - w;
    while (pos < n && is_blank(s[pos])) pos++;
    char a = pos < n ? s[pos] : 0, b = pos + 1 < n ? s[pos + 1] : 0;
    if (a == '=') return b != '=' && b != '~' && b != '>';
    if ((a == '+' || a == ':') && b == '=') return true;
    bool keyword = (wl == 7 && !memcmp(s + w, "include", 7)) ||
                   (wl == 13 && !memcmp(s + w, "include_shell", 13)) ||
                   (wl == 4 && !memcmp(s + w, "else", 4));
    return keyword && (a == '"' || a == '{' || a == '$' || is_alpha((unsigned char)a));
}

/* Where to read on after the statement that began at stmt_start failed: at the token at hand
 * when it begins a line and a statement (the failed statement ended early, e.g. "a = ( 1,"
 * followed by the next key), else at the next line that begins a statement, or at the end. */
static size_t resume_point(const lexer *lx, size_t stmt_start)
{
    size_t p = lx->tok_pos < lx->len ? lx->tok_pos : lx->len;
    if (p > stmt_start && at_line_start(lx, p) && starts_statement(lx, p)) return p;
    for (;;) {
        while (p < lx->len && lx->src[p] != '\n') p++;
        if (p >= lx->len) return lx->len;
        p++;
        if (starts_statement(lx, p)) return p;
    }
}

/* A block standing in for a condition that did not parse, so that braces stay balanced and its
 * statements are still read and checked. It never matches. */
static void open_placeholder(parse_ctx *c, int line)
{
    if (c->block_depth >= SL_CONFIG_MAX_BLOCK_DEPTH) return;
    sl_cblock *b = arena_alloc(c, sizeof *b);
    sl_cblock *p = c->cur;
    if (!b || !(b->pattern = arena_strdup(c, "")) ||
        !(p->children = arena_push(c, p->children, p->n_children, sizeof *p->children)))
        return;
    b->field = SL_COND_URL;
    b->op = SL_COND_MATCH; /* no compiled pattern: never matches */
    b->file = c->file;
    b->line = line;
    b->parent = p;
    p->children[p->n_children++] = b;
    open_block(c, b);
}

/* After a failed statement (begun at stmt_start), move the lexer to where the next one can be
 * read, and apply the braces of the skipped text (outside strings and comments): a '{' opens a
 * placeholder block, a '}' closes the block at hand unless that is base. */
static void recover(parse_ctx *c, size_t stmt_start, sl_cblock *base)
{
    lexer *lx = c->lx;
    size_t to = resume_point(lx, stmt_start);
    int line = lx->tok_line;
    /* The line at `to`, counted from the token at hand (resume_point never goes back before it). */
    for (size_t i = lx->tok_pos; i < to && i < lx->len; i++) line += lx->src[i] == '\n';
    int bline = lx->tok_line;
    for (size_t i = stmt_start; i < lx->tok_pos && i < lx->len; i++) bline -= lx->src[i] == '\n';
    bool in_str = false, closed_last = false;
    for (size_t i = stmt_start; i < to; i++) {
        char ch = lx->src[i];
        if (ch == '\n') bline++;
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '#') {
            while (i + 1 < to && lx->src[i + 1] != '\n') i++;
        } else if (ch == '{') {
            open_placeholder(c, bline);
            closed_last = false;
        } else if (ch == '}' && c->cur != base) {
            c->last_closed = c->cur;
            c->cur = c->cur->parent;
            c->block_depth--;
            closed_last = true;
        }
    }
    if (!closed_last) c->last_closed = NULL;
    c->failed = false;
    lx->pos = to;
    lx->line = line;
    lex_next(c); /* a failure here is recovered from on the next turn */
}

/* One file's (or string's) statements, added to the block open at the start. Errors are
 * collected in c->errs; after each failed statement, recover() finds the next one. */
static void parse_text(parse_ctx *c, const char *text, size_t len)
{
    lexer lx = {.src = text, .len = len, .line = 1};
    c->lx = &lx;
    sl_cblock *base = c->cur;
    int base_depth = c->block_depth;
    char d[96];
    /* An `else` must follow its '}' within the same file. */
    c->last_closed = NULL;
    size_t stmt_start = 0;
    lex_next(c);
    while (!c->fatal) {
        if (c->failed) {
            recover(c, stmt_start, base);
            stmt_start = lx.tok_pos;
            continue;
        }
        sl_cblock *closed = c->last_closed;
        c->last_closed = NULL;
        if (lx.type == T_EOF) {
            if (c->cur != base) {
                int around = -1;
                for (sl_cblock *b = c->cur; b != base; b = b->parent) around++;
                char more[64] = "";
                if (around > 0) snprintf(more, sizeof more, " (and %d around it)", around);
                report(c, c->cur->line, "missing '}': this block is still open at end of file%s",
                       more);
            }
            break;
        }
        stmt_start = lx.tok_pos;
        switch (lx.type) {
        case T_NAME:
            if (!strcmp(lx.text, "include")) {
                parse_include(c);
            } else if (!strcmp(lx.text, "include_shell")) {
                parse_include_shell(c);
            } else if (!strcmp(lx.text, "else")) {
                parse_else(c, closed);
            } else {
                parse_assignment(c);
            }
            break;
        case T_COND: {
            sl_cblock *b = parse_condition(c);
            if (!b) break;
            sl_cblock *p = c->cur;
            if (!(p->children = arena_push(c, p->children, p->n_children, sizeof *p->children)))
                break;
            p->children[p->n_children++] = b;
            b->parent = p;
            open_block(c, b);
            break;
        }
        case T_RBRACE:
            if (c->cur == base) {
                report(c, lx.tok_line, "unexpected '}' (no block is open)");
            } else {
                c->last_closed = c->cur;
                c->cur = c->cur->parent;
                c->block_depth--;
            }
            lex_next(c);
            stmt_start = lx.tok_pos; /* recovering from a bad next token must not see this '}' */
            break;
        default:
            fail(c, "unexpected %s; expected a key, a condition, 'include' or '}'",
                 tok_desc(&lx, d, sizeof d));
            break;
        }
    }
    free(lx.text);
    c->lx = NULL;
    c->last_closed = NULL;
    c->cur = base;
    c->block_depth = base_depth;
}

static sl_config_tree *parse_common(const char *text, size_t len, const char *name,
                                    const char *basedir, sl_config_errors *errs)
{
    sl_config_tree *t = calloc(1, sizeof *t);
    struct sl_config_priv *p = calloc(1, sizeof *p);
    if (!t || !p) {
        free(t);
        free(p);
        sl_config_error_add(errs, name, 0, "out of memory");
        return NULL;
    }
    t->priv = p;
    parse_ctx c = {.tree = t, .priv = p, .errs = errs, .file = name};
    size_t before = errs->n + errs->dropped;
    sl_cblock *root = arena_alloc(&c, sizeof *root);
    char *fname = arena_strdup(&c, name);
    char *dir = basedir ? arena_strdup(&c, basedir) : NULL;
    if (root && fname && (dir || !basedir)) {
        root->file = c.file = fname;
        root->field = SL_COND_NONE;
        t->root = c.cur = root;
        c.dir = dir;
        if (len > SL_CONFIG_MAX_TEXT)
            report(&c, 0, "configuration too large (more than %u MiB)", SL_CONFIG_MAX_TEXT >> 20);
        else
            parse_text(&c, text, len);
    }
    free(c.map.e);
    if (!t->root || c.fatal) {
        /* Out of memory or over a limit: what was read is not worth checking further. */
        if (errs->n + errs->dropped == before) sl_config_error_add(errs, name, 0, "out of memory");
        sl_config_tree_free(t);
        return NULL;
    }
    t->partial = errs->n + errs->dropped > before;
    return t;
}

sl_config_tree *sl_config_parse_string_all(const char *text, size_t len, const char *name,
                                           const char *basedir, sl_config_errors *errs)
{
    return parse_common(text ? text : "", text ? len : 0, name ? name : "<config>", basedir, errs);
}

sl_config_tree *sl_config_parse_file_all(const char *path, sl_config_errors *errs)
{
    char *text;
    size_t len;
    int r = read_all(path, &text, &len);
    if (r < 0) {
        sl_config_error_add(errs, path, 0, "cannot read config file: %s",
                            r == -EFBIG ? "file too large" : strerror(-r));
        return NULL;
    }
    /* Relative includes resolve against the file's own directory ("" = working directory). */
    const char *slash = strrchr(path, '/');
    size_t dl = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(dl + 1);
    if (!dir) {
        free(text);
        sl_config_error_add(errs, path, 0, "out of memory");
        return NULL;
    }
    memcpy(dir, path, dl);
    dir[dl] = 0;
    sl_config_tree *t = parse_common(text, len, path, dir, errs);
    free(dir);
    free(text);
    return t;
}

/* The single-buffer interface: a tree only when the config is clean. */
static sl_config_tree *clean_or_null(sl_config_tree *t, sl_config_errors *errs, char *err,
                                     size_t errlen)
{
    if (err && errlen) sl_config_errors_join(errs, err, errlen);
    if (sl_config_errors_any(errs)) {
        sl_config_tree_free(t);
        t = NULL;
    }
    sl_config_errors_free(errs);
    return t;
}

sl_config_tree *sl_config_parse_string(const char *text, size_t len, const char *name,
                                       const char *basedir, char *err, size_t errlen)
{
    sl_config_errors errs = {0};
    sl_config_tree *t = sl_config_parse_string_all(text, len, name, basedir, &errs);
    return clean_or_null(t, &errs, err, errlen);
}

sl_config_tree *sl_config_parse_file(const char *path, char *err, size_t errlen)
{
    sl_config_errors errs = {0};
    sl_config_tree *t = sl_config_parse_file_all(path, &errs);
    return clean_or_null(t, &errs, err, errlen);
}

void sl_config_tree_free(sl_config_tree *t)
{
    if (!t) return;
    struct sl_config_priv *p = t->priv;
    if (p) {
        for (size_t i = 0; i < p->n_res; i++) pcre2_code_free(p->res[i]);
        free(p->res);
        for (arena_chunk *ch = p->chunks, *next; ch; ch = next) {
            next = ch->next;
            free(ch);
        }
        free(p);
    }
    free(t);
}

/* ------------------------------------------------------------------------------------------ */
/* Evaluation                                                                                 */

/* $HTTP["host"] == pattern: a pattern without a port names the host on any port, as lighttpd's
 * == and nginx's server_name do, so "example.com:8080" does not dodge a rule for "example.com";
 * one with a port must match exactly. */
static bool host_equal(const char *host, const char *pattern)
{
    size_t pl = strlen(pattern), hp = host_port_at(host);
    if (host_port_at(pattern) < pl) return strcmp(host, pattern) == 0;
    return hp == pl && memcmp(host, pattern, pl) == 0;
}

/* The client's address against a network (an IPv4-mapped IPv6 client is in IPv4 networks). */
static bool net_contains(const sl_cond_net *n, const struct sockaddr *sa)
{
    const unsigned char *a;
    if (!sa) return false;
    if (sa->sa_family == AF_INET) {
        if (n->family != AF_INET) return false;
        a = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (n->family == AF_INET && IN6_IS_ADDR_V4MAPPED(a6))
            a = a6->s6_addr + 12;
        else if (n->family == AF_INET6)
            a = a6->s6_addr;
        else
            return false;
    } else {
        return false;
    }
    int full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(a, n->addr, (size_t)full)) return false;
    unsigned char mask = (unsigned char)(0xff00 >> rest);
    return !rest || ((a[full] ^ n->addr[full]) & mask) == 0;
}

/* The string a block's field has in this request. */
static const char *cond_subject(const sl_cblock *b, const sl_cond_input *in)
{
    const char *s = NULL;
    if (in) {
        switch (b->field) {
        case SL_COND_SOCKET: s = in->socket; break;
        case SL_COND_URL: s = in->url; break;
        case SL_COND_HOST: s = in->host; break;
        case SL_COND_QUERY: s = in->query; break;
        case SL_COND_SCHEME: s = in->scheme; break;
        case SL_COND_METHOD: s = in->method; break;
        case SL_COND_REMOTE_IP:
        case SL_COND_HEADER: s = in->lazy ? in->lazy(in->ud, b) : NULL; break;
        case SL_COND_NONE: break;
        }
    }
    return s ? s : "";
}

bool sl_cond_match_capture(const sl_cblock *b, const sl_cond_input *in, sl_cond_capture *cap)
{
    if (!b || b->field == SL_COND_NONE || b->is_else) return true;
    if (b->net) { /* remoteip == / !=: no text needed */
        bool in_net = net_contains(b->net, in ? in->peer : NULL);
        return b->op == SL_COND_EQ ? in_net : !in_net;
    }
    const char *s = cond_subject(b, in);
    switch (b->op) {
    case SL_COND_EQ:
        return b->field == SL_COND_HOST ? host_equal(s, b->pattern) : strcmp(s, b->pattern) == 0;
    case SL_COND_NE:
        return b->field == SL_COND_HOST ? !host_equal(s, b->pattern) : strcmp(s, b->pattern) != 0;
    case SL_COND_PREFIX: return strncmp(s, b->pattern, strlen(b->pattern)) == 0;
    case SL_COND_SUFFIX: {
        size_t sl = strlen(s), pl = strlen(b->pattern);
        return pl <= sl && memcmp(s + sl - pl, b->pattern, pl) == 0;
    }
    case SL_COND_MATCH:
    case SL_COND_NOMATCH: {
        if (!b->re) return false;
        bool want = cap && b->op == SL_COND_MATCH;
        pcre2_match_data *md = pcre2_match_data_create(want ? SL_COND_MAX_CAPTURE : 1, NULL);
        if (!md) return false;
        int rc = pcre2_match(b->re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
        if (want && rc >= 0) {
            /* rc 0: more groups than room, all SL_COND_MAX_CAPTURE pairs are set. */
            unsigned n = rc == 0 ? SL_COND_MAX_CAPTURE : (unsigned)rc;
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            cap->set = true;
            cap->subject = s;
            cap->n = n;
            for (unsigned i = 0; i < 2 * n; i++)
                cap->ov[i] = ov[i] == PCRE2_UNSET ? SIZE_MAX : (size_t)ov[i];
        }
        pcre2_match_data_free(md);
        if (b->op == SL_COND_MATCH) return rc >= 0;
        return rc == PCRE2_ERROR_NOMATCH;
    }
    }
    return false;
}

bool sl_cond_match(const sl_cblock *b, const sl_cond_input *in)
{
    return sl_cond_match_capture(b, in, NULL);
}

int sl_cond_groups(const sl_cblock *b)
{
    uint32_t n = 0;
    if (!b || b->is_else || b->op != SL_COND_MATCH || !b->re ||
        pcre2_pattern_info(b->re, PCRE2_INFO_CAPTURECOUNT, &n) != 0)
        return -1;
    return (int)n;
}

static void eval_block(const sl_cblock *b, const sl_cond_input *in,
                       void (*apply)(const sl_cassign *a, void *ud), void *ud)
{
    for (size_t i = 0; i < b->n_assigns; i++) apply(&b->assigns[i], ud);
    for (size_t i = 0; i < b->n_children; i++) {
        for (const sl_cblock *x = b->children[i]; x; x = x->else_next) {
            if (sl_cond_match(x, in)) {
                eval_block(x, in, apply, ud);
                break;
            }
        }
    }
}

void sl_config_eval(const sl_config_tree *t, const sl_cond_input *in,
                    void (*apply)(const sl_cassign *a, void *ud), void *ud)
{
    if (t && t->root && apply) eval_block(t->root, in, apply, ud);
}

static void walk_block(const sl_cblock *b,
                       void (*visit)(const sl_cblock *b, const sl_cassign *a, void *ud),
                       void (*visit_block)(const sl_cblock *b, void *ud), void *ud)
{
    if (visit_block) visit_block(b, ud);
    if (visit)
        for (size_t i = 0; i < b->n_assigns; i++) visit(b, &b->assigns[i], ud);
    for (size_t i = 0; i < b->n_children; i++)
        for (const sl_cblock *x = b->children[i]; x; x = x->else_next)
            walk_block(x, visit, visit_block, ud);
}

void sl_config_walk(const sl_config_tree *t,
                    void (*visit)(const sl_cblock *b, const sl_cassign *a, void *ud),
                    void (*visit_block)(const sl_cblock *b, void *ud), void *ud)
{
    if (t && t->root) walk_block(t->root, visit, visit_block, ud);
}
