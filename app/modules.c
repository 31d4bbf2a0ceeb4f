/* Every module compiled into seekless, in their default order: the core first, the fallback
 * handlers (static files) run last whatever their place. Adding a module is one line here and
 * its own file. */
#include "core_conf.h"
#include "h2.h"
#include "mod_proxy.h"
#include "mod_static.h"
#include "mod_status.h"
#include "module.h"
#include "tls.h"

extern sl_module sl_mod_accesslog;
extern sl_module sl_mod_alias;
extern sl_module sl_mod_bwlimit;
extern sl_module sl_mod_auth;
extern sl_module sl_mod_deflate;
extern sl_module sl_mod_evasive;
extern sl_module sl_mod_extforward;
extern sl_module sl_mod_evhost;
extern sl_module sl_mod_simple_vhost;
extern sl_module sl_mod_userdir;
extern sl_module sl_mod_rrdtool;
extern sl_module sl_mod_dirlisting;
extern sl_module sl_mod_expire;
extern sl_module sl_mod_setenv;
extern sl_module sl_mod_redirect;
extern sl_module sl_mod_rewrite;
extern sl_module sl_mod_timing;

sl_module *const sl_modules_builtin[] = {
    &sl_mod_core,
    &sl_mod_extforward, /* first in uri_raw: it starts a request over with the client's address */
    &sl_mod_bwlimit,
    &sl_mod_tls,
    &sl_mod_h2,
    &sl_mod_evasive,
    &sl_mod_auth,
    &sl_mod_status,
    &sl_mod_proxy,
    &sl_mod_simple_vhost,
    &sl_mod_evhost,
    &sl_mod_setenv,
    &sl_mod_expire,
    &sl_mod_accesslog,
    &sl_mod_rrdtool,
    &sl_mod_timing,
    &sl_mod_rewrite,
    &sl_mod_redirect,
    &sl_mod_userdir,
    &sl_mod_alias,
    &sl_mod_dirlisting,
    &sl_mod_deflate,
    &sl_mod_static,
    NULL,
};
