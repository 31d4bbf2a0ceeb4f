/* Rendering the lists modules write on the status page (status.h). JSON members are written
 * with a separator count kept per level, so a module never needs to know what came before it. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sl_status_printf(sl_status_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_chunkq_vprintf(o->q, fmt, ap);
    va_end(ap);
}

void sl_status_list(sl_status_out *o, const char *list, const char *label)
{
    o->label = label;
    o->n_items = 0;
    if (o->fmt == SL_STATUS_JSON) sl_status_printf(o, "%s\"%s\":[", o->n_top++ ? "," : "", list);
}

void sl_status_item(sl_status_out *o, const char *name)
{
    o->item = name;
    o->n_fields = 0;
    if (o->fmt == SL_STATUS_JSON)
        sl_status_printf(o, "%s{\"name\":\"%s\"", o->n_items ? "," : "", name);
    else if (o->fmt == SL_STATUS_TEXT)
        sl_status_printf(o, "%s %s", o->label, name);
    o->n_items++;
}

void sl_status_num(sl_status_out *o, const char *field, uint64_t v, bool counter)
{
    switch (o->fmt) {
    case SL_STATUS_TEXT: sl_status_printf(o, " %s %llu", field, (unsigned long long)v); break;
    case SL_STATUS_JSON: sl_status_printf(o, ",\"%s\":%llu", field, (unsigned long long)v); break;
    case SL_STATUS_PROM:
        sl_status_printf(o, "seekless_%s_%s%s{%s=\"%s\"} %llu\n", o->label, field,
                         counter ? "_total" : "", o->label, o->item, (unsigned long long)v);
        break;
    }
    o->n_fields++;
}

void sl_status_flag(sl_status_out *o, const char *field, bool v)
{
    switch (o->fmt) {
    case SL_STATUS_TEXT: sl_status_printf(o, " %s %s", field, v ? "yes" : "no"); break;
    case SL_STATUS_JSON: sl_status_printf(o, ",\"%s\":%s", field, v ? "true" : "false"); break;
    case SL_STATUS_PROM:
        sl_status_printf(o, "seekless_%s_%s{%s=\"%s\"} %d\n", o->label, field, o->label, o->item,
                         v);
        break;
    }
    o->n_fields++;
}

void sl_status_item_end(sl_status_out *o)
{
    if (o->fmt == SL_STATUS_JSON) sl_status_printf(o, "}");
    if (o->fmt == SL_STATUS_TEXT) sl_status_printf(o, "\n");
}

void sl_status_list_end(sl_status_out *o)
{
    if (o->fmt == SL_STATUS_JSON) sl_status_printf(o, "]");
}
