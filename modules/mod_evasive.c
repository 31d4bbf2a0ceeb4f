/* mod_evasive: lighttpd's limit of concurrent connections per client address.
 *   evasive.max-conns-per-ip = 10       (0: no limit; may differ inside conditions, as lighttpd's
 *                                         whitelists do with $HTTP["remoteip"] ... = 0)
 *   evasive.location = "https://example.org/busy.html"   (302 there instead of 403)
 *   evasive.silent = "enable"           (do not log the clients turned away)
 *
 * lighttpd counts, when a request reaches uri_clean, the connections of the same address that are
 * past reading a request head (idle keep-alive connections do not count), this one included, and
 * turns the request away when there are more than the limit. Here every request counts itself in
 * a table shared by all loops (ipcount.c: why a lock per bucket) from its uri_clean hook until it
 * ends (request_done), which is the same set: one request in progress per busy connection. A
 * request turned away gets 403 (or the 302) and its connection is closed, so a client cannot
 * keep it to retry at no cost. The table exists only when some block sets a limit: otherwise the
 * module costs a pointer test per request.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "conf.h"
#include "connection.h"
#include "ipcount.h"
#include "log.h"
#include "module.h"
#include "status.h"

typedef struct evasive_conf {
    long max_conns;       /* 0: no limit */
    bool silent;
    const char *location; /* "" or NULL: answer 403 */
} evasive_conf;

#define SL_KEY_CONF evasive_conf

sl_module sl_mod_evasive;

#define ECONF(c) SL_MODCONF((c)->conf, sl_mod_evasive, evasive_conf)

/* Whether some assignment sets a limit (prepare runs for each one, at load, before init). */
static bool limit_set;
static sl_ipcount *table;
static atomic_ulong n_turned_away;

static int prep_max(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)ctx;
    (void)out;
    if (v->num > 0) limit_set = true;
    return 0;
}

/* The Location goes into the response head as it is: no line break may split it. */
static int prep_location(const sl_cval *v, const sl_key_ctx *ctx, void **out)
{
    (void)out;
    if (!strpbrk(v->str, "\r\n")) return 0;
    snprintf(ctx->err, ctx->errlen, "evasive.location must not contain a line break");
    return -1;
}

static int evasive_init(struct sl_server *srv, const void *conf, char *err, size_t errlen)
{
    (void)srv;
    (void)conf;
    if (!limit_set) return 0;
    if (!(table = sl_ipcount_new())) {
        snprintf(err, errlen, "mod_evasive: out of memory");
        return -1;
    }
    return 0;
}

static void evasive_fini(struct sl_server *srv)
{
    (void)srv;
    sl_ipcount_free(table);
    table = NULL;
}

static sl_hresult evasive_uri_clean(sl_conn *c)
{
    if (!table) return SL_GO_ON;
    sl_ipkey key = sl_ipkey_of((const struct sockaddr *)&c->peer);
    long n;
    if (!SL_CTX(c, sl_mod_evasive)) {
        /* Counted once per request, though a rewrite brings it here again; the key is kept,
         * for the address may change back before request_done (mod_extforward). */
        sl_ipkey *kept = sl_conn_alloc(c, sizeof *kept);
        if (!kept || (n = sl_ipcount_inc(table, &key)) < 0) return SL_GO_ON; /* no memory */
        *kept = key;
        SL_CTX(c, sl_mod_evasive) = kept;
    } else {
        n = sl_ipcount_get(table, &key);
    }
    const evasive_conf *e = ECONF(c);
    if (!e->max_conns || n <= e->max_conns) return SL_GO_ON;
    atomic_fetch_add_explicit(&n_turned_away, 1, memory_order_relaxed);
    if (!e->silent) {
        char ip[64];
        sl_addr_str((const struct sockaddr *)&c->peer, ip, sizeof ip, NULL);
        sl_log("%s turned away: too many connections (%ld, evasive.max-conns-per-ip %ld)", ip, n,
               e->max_conns);
    }
    c->keep_alive = c->ka_after_body = false;
    if (e->location && e->location[0]) {
        sl_resp_begin(c, 302);
        sl_resp_header_static(c, "Location", 8, e->location, strlen(e->location));
        sl_resp_end_headers(c, 0);
        return SL_FINISHED;
    }
    c->status = 403;
    return SL_ERROR;
}

static void evasive_request_done(sl_conn *c)
{
    const sl_ipkey *key = SL_CTX(c, sl_mod_evasive);
    if (!key) return;
    sl_ipcount_dec(table, key);
    SL_CTX(c, sl_mod_evasive) = NULL;
}

static void evasive_status(struct sl_server *srv, sl_status_out *o)
{
    (void)srv;
    sl_status_list(o, "evasive", "what");
    sl_status_item(o, "clients");
    sl_status_num(o, "turned_away", atomic_load_explicit(&n_turned_away, memory_order_relaxed),
                  true);
    sl_status_num(o, "busy_addresses", table ? sl_ipcount_size(table) : 0, false);
    sl_status_item_end(o);
    sl_status_list_end(o);
}

sl_module sl_mod_evasive = {
    SL_MODULE_HEAD("evasive", evasive_conf, "mod_evasive"),
    .keys = SL_KEYS(
        SL_KEY_PREP("evasive.max-conns-per-ip", SL_KEY_INT, max_conns, prep_max, NULL),
        SL_KEY_AT("evasive.silent", SL_KEY_BOOL, silent),
        SL_KEY_PREP("evasive.location", SL_KEY_STRING, location, prep_location, NULL)),
    .init = evasive_init,
    .fini = evasive_fini,
    .uri_clean = evasive_uri_clean,
    .request_done = evasive_request_done,
    .status = evasive_status,
};
