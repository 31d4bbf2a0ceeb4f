/* Status page (status.status-url): text, ?json, ?format=prometheus and lighttpd's ?auto. */
#ifndef SL_MOD_STATUS_H
#define SL_MOD_STATUS_H

#include "module.h"

/* The module table. */
extern sl_module sl_mod_status;

#endif
