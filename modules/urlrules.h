/* Lists of "regex" => "template" rules over the request-target, shared by mod_redirect and
 * mod_rewrite (lighttpd's url.redirect and url.rewrite-* keys, the same substitution language):
 *
 *   $N, ${N}         group N of the rule's own match (0..99); $N copies it as it is, ${N}
 *                    %-encodes it like ${escpsnde:N} (lighttpd's defaults)
 *   %N, %{N}         group N (0..9) of the =~ condition of the block the key is set in
 *                    (lighttpd's %N: a block's own condition, not an outer one); %N copies it
 *                    as it is, %{N} encodes like ${N}, %{FLAGS:N} as below
 *   ${url.scheme} ${url.authority} ${url.authority.noport} ${url.port} ${url.path} ${url.query}
 *                    parts of the request (the path and query as the target has them)
 *   ${qsa}           the query appended: "?q", or "&q" when the result already has a '?'
 *   ${FLAGS:X}       X (a group or a url part) through esc: / escape: (encode all but
 *                    unreserved), escnde: (the same, without encoding twice), escpsnde: (and
 *                    '/' kept), noesc: / noescape:, tolower:, toupper: (several may be given)
 *   $$ and %%        a '$' and a '%'; another '$' or '%' stands for itself
 * A rule whose template is empty matches and stops the search without a result (lighttpd's way
 * to exempt URLs). What lighttpd would silently skip is refused at load with a message: a group
 * the pattern does not have, a %N where the key's block has no =~ condition or one with fewer
 * groups, an unknown ${...} name, base64 flags.
 *
 * Templates are compiled at load into parts, so a request costs one pcre2_match per rule tried
 * (JIT-compiled where PCRE2 has a JIT) and one pass over the matched rule's parts.
 */
#ifndef SL_URLRULES_H
#define SL_URLRULES_H

#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config_parse.h"

/* Highest group a template may name (${99}); match data made by sl_urlrules_match_data()
 * holds them all. */
#define SL_URLRULES_MAX_GROUP 99

typedef struct sl_urlrules sl_urlrules;

/* The request's parts a template may use besides the target. */
typedef struct sl_url_env {
    const char *scheme;    /* "http" */
    const char *authority; /* the Host (normalized), or "" */
    unsigned port;         /* the listening socket's port */
    const sl_cond_capture *caps; /* the request's condition groups (c->caps) for %N, or NULL:
                                  * then %N writes nothing */
} sl_url_env;

/* What sl_urlrules_apply found. */
enum {
    SL_URL_NOMATCH = 0, /* no rule matched */
    SL_URL_EXEMPT = 1,  /* a rule with an empty template matched: stop, no result */
    SL_URL_MATCHED = 2, /* a rule matched; its result is in out */
};

/* Compile the config value v of key (an array of "regex" => "template" strings) and append its
 * rules to *rs (made when *rs is NULL). cond_groups: how many groups the =~ condition of the
 * key's block has, for %N (-1: it has none, and a %N is an error). 0, or -1 with a message in
 * err (*rs is then left as it was, still the caller's). */
int sl_urlrules_compile(sl_urlrules **rs, const sl_cval *v, const char *key, int cond_groups,
                        char *err, size_t errlen);

struct sl_key_ctx;

/* A key's prepare(): sl_urlrules_compile with the groups of the key's block's condition, and
 * when a template uses %N, that block made to keep its groups per request
 * (sl_key_keep_captures) in the slot the rules read. 0, or -1 with a message in ctx->err. */
int sl_urlrules_prepare(sl_urlrules **rs, const sl_cval *v, const struct sl_key_ctx *ctx);

/* Whether some template of rs uses %N. */
bool sl_urlrules_uses_cond(const sl_urlrules *rs);

/* Which entry of sl_url_env.caps holds the groups %N names (-1: none; for tests). */
void sl_urlrules_set_slot(sl_urlrules *rs, int slot);

/* How many rules rs holds (0 for NULL). */
size_t sl_urlrules_count(const sl_urlrules *rs);

/* Free a list (NULL is fine); the signature is an sl_key release(). */
void sl_urlrules_free(void *rs);

/* Match data with room for every group a template may name; one per loop is enough (a loop
 * runs one request at a time). NULL when out of memory. */
pcre2_match_data *sl_urlrules_match_data(void);

/* A module's loop_init and loop_fini (mod_rewrite, mod_redirect) with the loop's slot for it
 * (loop->mod[] at its index): the loop's match data made into it (0, or -1 with a message in
 * err), and freed from it. */
int sl_urlrules_loop_init(void **slot, char *err, size_t errlen);
void sl_urlrules_loop_fini(void **slot);

/* Try subject (the request-target as sl_target_normalize() leaves it, with its query) against
 * the rules in order; the first match decides. SL_URL_MATCHED writes its result to out
 * (NUL-terminated, *outlen bytes); *idx says which rule (0-based, in the order compiled).
 * -ENAMETOOLONG: the result does not fit in cap bytes; -EIO: PCRE2 failed (a match limit). */
int sl_urlrules_apply(const sl_urlrules *rs, pcre2_match_data *md, const char *subject,
                      size_t len, const sl_url_env *env, char *out, size_t cap, size_t *outlen,
                      size_t *idx);

#endif
