/* The status page module: connection states, counters, backends and pool queues. */
#ifndef SL_MOD_STATUS_H
#define SL_MOD_STATUS_H

#include "module.h"

/* Answers GET/HEAD of status.status-url (text; "?json"; "?format=prometheus"). */
extern const sl_module sl_mod_status;

#endif
