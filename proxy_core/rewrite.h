/* proxy-core.rewrite-request and proxy-core.rewrite-response (lighttpd 1.5's mod_proxy_core):
 * "regex" => "template" rules (mod_rewrite's language, modules/urlrules.h) over what a back end
 * is told and over the header fields it answers with. */
#ifndef SL_PROXY_REWRITE_H
#define SL_PROXY_REWRITE_H

#include <stdbool.h>
#include <stddef.h>

#include "connection.h"
#include "module.h"
#include "proto.h"
#include "urlrules.h"

typedef struct sl_proxy_rewrites sl_proxy_rewrites;

/* Keys' prepare() for proxy-core.rewrite-request: ( "_uri" => ( "regex" => "template", ... ),
 * "_docroot" => (...), "_pathinfo" => (...), "_scriptname" => (...), "Header-Name" => (...) ).
 * 0, or -1 with a message in ctx->err. */
int sl_proxy_rewrites_prep_request(const sl_cval *v, const sl_key_ctx *ctx, void **out);
/* The same for proxy-core.rewrite-response: ( "Header-Name" => ( "regex" => "template" ) ). */
int sl_proxy_rewrites_prep_response(const sl_cval *v, const sl_key_ctx *ctx, void **out);
/* Free what the prepare functions made (an sl_key release()). */
void sl_proxy_rewrites_free(void *rw);

/* Apply request rules to m before it is encoded: "_uri" to the target the back end gets
 * (HTTP's request line, FastCGI's REQUEST_URI), "_docroot" to DOCUMENT_ROOT, "_pathinfo" and
 * "_scriptname" (matched against the request's path) to PATH_INFO and SCRIPT_NAME, a header
 * name to that field (matched against the client's value, "" when absent; the result replaces
 * it). The first matching rule of a name decides; no match leaves it. Results live in the
 * request's memory. md is a match block of sl_urlrules_match_data() the caller keeps (one per
 * loop: none is made per request). 0 or -ENOMEM. */
int sl_proxy_rewrite_request(const sl_proxy_rewrites *rw, sl_conn *c, sl_proxy_msg *m,
                             pcre2_match_data *md);

/* A response field the back end sent: its new value (request memory, *outlen bytes) when a
 * rule for its name matched, else NULL (keep it). md as for sl_proxy_rewrite_request. */
const char *sl_proxy_rewrite_response(const sl_proxy_rewrites *rw, sl_conn *c,
                                      pcre2_match_data *md, const char *name, size_t name_len,
                                      const char *value, size_t value_len, size_t *outlen);

#endif
