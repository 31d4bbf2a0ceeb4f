/* Named, reference-counted entries: one entry a name, made once and zeroed but for its head,
 * dropped (and unlinked) by its last holder only; a walk holds every entry it is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "registry.h"

typedef struct entry {
    sl_named named;
    int fd;
} entry;

static entry *get(sl_registry *r, const char *name, bool *created)
{
    char *copy = strdup(name);
    assert_non_null(copy);
    return (entry *)sl_registry_get(r, copy, sizeof(entry), created);
}

static void test_one_entry_a_name(void **state)
{
    sl_registry r = SL_REGISTRY_INIT;
    bool created;
    entry *a = get(&r, "/log/a", &created);
    assert_non_null(a);
    assert_true(created);
    assert_string_equal(a->named.name, "/log/a");
    assert_int_equal(a->fd, 0); /* zeroed but for the head */
    a->fd = 7;
    entry *again = get(&r, "/log/a", &created);
    assert_ptr_equal(again, a);
    assert_false(created);
    assert_int_equal(again->fd, 7);
    entry *b = get(&r, "/log/b", NULL);
    assert_ptr_not_equal(b, a);
    assert_int_equal(a->named.refs, 2);
    assert_int_equal(b->named.refs, 1);
    /* The last holder unlinks it; the others only count down. */
    assert_false(sl_registry_drop(&r, &a->named));
    assert_true(sl_registry_drop(&r, &a->named));
    sl_named_free(&a->named);
    assert_ptr_equal(r.head, &b->named);
    assert_null(b->named.next);
    assert_true(get(&r, "/log/a", &created) != NULL && created); /* made anew */
    sl_named *e = r.head;
    assert_true(sl_registry_drop(&r, e));
    sl_named_free(e);
    assert_true(sl_registry_drop(&r, &b->named));
    sl_named_free(&b->named);
    assert_null(r.head);
}

static void test_a_walk_holds_what_it_visits(void **state)
{
    sl_registry r = SL_REGISTRY_INIT;
    entry *x = get(&r, "x", NULL), *y = get(&r, "y", NULL), *z = get(&r, "z", NULL);
    sl_named *walk[2];
    assert_int_equal(sl_registry_hold_all(&r, walk, 2), 2); /* at most 2 */
    assert_ptr_equal(walk[0], &z->named); /* newest first */
    assert_ptr_equal(walk[1], &y->named);
    /* Its config let go of z meanwhile: the walk's reference keeps it. */
    assert_false(sl_registry_drop(&r, &z->named));
    assert_true(sl_registry_drop(&r, walk[0]));
    sl_named_free(walk[0]);
    assert_false(sl_registry_drop(&r, walk[1]));
    entry *all[] = {x, y};
    for (size_t i = 0; i < 2; i++) {
        assert_true(sl_registry_drop(&r, &all[i]->named));
        sl_named_free(&all[i]->named);
    }
    assert_null(r.head);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_one_entry_a_name),
        cmocka_unit_test(test_a_walk_holds_what_it_visits))
