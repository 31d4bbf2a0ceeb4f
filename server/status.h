/* The status page's output: what a module's status() hook writes, in one shape for every format.
 *
 * A module writes lists of items ("backends", each one backend) with named numbers and flags;
 * the core renders them as text for people, JSON for programs and Prometheus text for scrapers:
 *   text        backend 127.0.0.1:9000 inflight 2 requests 17 disabled no
 *   JSON        "backends":[{"name":"127.0.0.1:9000","inflight":2,"requests":17,"disabled":false}]
 *   Prometheus  seekless_backend_inflight{backend="127.0.0.1:9000"} 2
 *               seekless_backend_requests_total{backend="127.0.0.1:9000"} 17
 */
#ifndef SL_STATUS_H
#define SL_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "chunk.h"

typedef enum { SL_STATUS_TEXT, SL_STATUS_JSON, SL_STATUS_PROM } sl_status_fmt;

/* A rendering in progress (the status module owns it). */
typedef struct sl_status_out {
    sl_chunkq *q;
    sl_status_fmt fmt;
    const char *label;   /* the current list's item label ("backend") */
    const char *item;    /* the current item's name */
    int n_items;         /* items written in the current list */
    int n_fields;        /* fields written in the current item */
    int n_top;           /* top-level JSON members written */
} sl_status_out;

/* Begin a list called `list` ("backends") whose items are labelled `label` ("backend"). */
void sl_status_list(sl_status_out *o, const char *list, const char *label);
/* Begin one item of the list; name identifies it ("127.0.0.1:9000"). */
void sl_status_item(sl_status_out *o, const char *name);
/* A number of the current item: a counter (only grows) or a gauge. */
void sl_status_num(sl_status_out *o, const char *field, uint64_t v, bool counter);
/* A yes/no of the current item. */
void sl_status_flag(sl_status_out *o, const char *field, bool v);
/* End the current item. */
void sl_status_item_end(sl_status_out *o);
/* End the list. */
void sl_status_list_end(sl_status_out *o);

/* printf into the output (the status module's own lines). */
void sl_status_printf(sl_status_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
