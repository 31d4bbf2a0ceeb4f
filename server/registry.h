/* Named, reference-counted entries shared by the config blocks that name them.
 *
 * An access log file or an rrdtool database is one entry a name, however many blocks of however
 * many loaded configs (the running one, and one a graceful restart checks) name it: a key's
 * prepare() gets the entry (sl_registry_get) and its release() lets it go (sl_registry_drop),
 * and the last to let go frees it. An entry's struct begins with an sl_named; the rest is the
 * module's (an fd, counters). The registry's lock guards the list and the counts, so a thread
 * other than the one loading configs may walk it (sl_registry_hold_all).
 */
#ifndef SL_REGISTRY_H
#define SL_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The head of an entry. */
typedef struct sl_named {
    struct sl_named *next;
    char *name;
    unsigned refs;    /* holders: blocks of loaded configs, walks under way */
} sl_named;

/* Every entry of one kind; static, set up with SL_REGISTRY_INIT. */
typedef struct sl_registry {
    pthread_mutex_t lock; /* guards the list and every entry's refs */
    sl_named *head;       /* newest first; without the lock only on the thread that changes it */
} sl_registry;

#define SL_REGISTRY_INIT {PTHREAD_MUTEX_INITIALIZER, NULL}

/* The entry named `name` (which it takes) with one more holder: the existing one (`name` is
 * freed), or a new one of `size` bytes (at least sizeof(sl_named)), zeroed but for its head
 * (*created is set then). NULL when out of memory (`name` is freed). */
sl_named *sl_registry_get(sl_registry *r, char *name, size_t size, bool *created);

/* One holder less. True when it was the last: the entry has left the registry, and the caller
 * closes what it holds and frees it (sl_named_free). */
bool sl_registry_drop(sl_registry *r, sl_named *e);

/* Up to `max` entries into out[], each with one more holder (dropped with sl_registry_drop
 * when done with it), so a walk may use them without the lock. Returns how many. */
size_t sl_registry_hold_all(sl_registry *r, sl_named **out, size_t max);

/* Free an entry that left the registry: its name, then the entry. */
void sl_named_free(sl_named *e);

#endif
