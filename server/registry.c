/* Named, reference-counted entries (registry.h): a singly linked list under one mutex, looked
 * up by name with strcmp (a config names a handful), unlinked by the holder that drops the last
 * reference, which then frees the entry outside the lock. */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

sl_named *sl_registry_get(sl_registry *r, char *name, size_t size, bool *created)
{
    if (created) *created = false;
    pthread_mutex_lock(&r->lock);
    sl_named *e = r->head;
    while (e && strcmp(e->name, name)) e = e->next;
    if (e) {
        free(name);
    } else if ((e = calloc(1, size < sizeof *e ? sizeof *e : size))) {
        e->name = name;
        e->next = r->head;
        r->head = e;
        if (created) *created = true;
    } else {
        free(name);
    }
    if (e) e->refs++;
    pthread_mutex_unlock(&r->lock);
    return e;
}

bool sl_registry_drop(sl_registry *r, sl_named *e)
{
    pthread_mutex_lock(&r->lock);
    bool last = --e->refs == 0;
    if (last)
        for (sl_named **at = &r->head; *at; at = &(*at)->next)
            if (*at == e) {
                *at = e->next;
                break;
            }
    pthread_mutex_unlock(&r->lock);
    return last;
}

size_t sl_registry_hold_all(sl_registry *r, sl_named **out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&r->lock);
    for (sl_named *e = r->head; e && n < max; e = e->next) {
        e->refs++;
        out[n++] = e;
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

void sl_named_free(sl_named *e)
{
    if (!e) return;
    free(e->name);
    free(e);
}
