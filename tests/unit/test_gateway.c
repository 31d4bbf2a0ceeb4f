/* The gateway: balancers, the wait queue, and the pool of kept connections over real unix
 * sockets, including the guard for applications that tie a worker to each connection. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include <event2/event.h>

#include "gateway.h"

/* The loop-less gateway the balancer tests use (one per test). */
static sl_gw *gw0;

static sl_gw_group *group3(const char *const *names)
{
    static sl_strlist l;
    l = (sl_strlist){names, 3};
    if (!gw0) gw0 = sl_gw_new(NULL, 1);
    return sl_gw_group_get(gw0, &l);
}

static void gw0_free(void)
{
    sl_gw_free(gw0);
    gw0 = NULL;
}

static void set_disabled(sl_gw_backend *be, time_t until)
{
    be->sh->disabled_until = until;
}

static void test_balancers(void **state)
{
    static const char *const names[] = {"127.0.0.1:1", "127.0.0.1:2", "unix:/tmp/x.sock", NULL};
    sl_gw_group *g = group3(names);
    assert_non_null(g);
    assert_ptr_equal(group3(names), g); /* one group per list */
    /* static: the first healthy one; failover skips disabled and tried ones. */
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 0), &g->b[0]);
    set_disabled(&g->b[0], 200);
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 0), &g->b[1]);
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 100, 1u << 1), &g->b[2]);
    assert_null(sl_gw_pick(g, "static", "/", 1, 100, (1u << 1) | (1u << 2)));
    /* sl_gw_any_usable agrees with the pick about whether a retry has somewhere to go. */
    assert_true(sl_gw_any_usable(g, 100, 1u << 1));
    assert_false(sl_gw_any_usable(g, 100, (1u << 1) | (1u << 2)));
    assert_true(sl_gw_any_usable(g, 200, (1u << 1) | (1u << 2))); /* b[0] enabled again */
    assert_ptr_equal(sl_gw_pick(g, "static", "/", 1, 200, 0), &g->b[0]); /* re-enabled */
    set_disabled(&g->b[0], 0);
    /* round-robin visits each in turn. */
    sl_gw_backend *a = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    sl_gw_backend *b = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    sl_gw_backend *c = sl_gw_pick(g, "round-robin", "/", 1, 1, 0);
    assert_true(a != b && b != c && a != c);
    assert_ptr_equal(sl_gw_pick(g, "round-robin", "/", 1, 1, 0), a);
    /* sqf: fewest in flight. */
    g->b[0].inflight = 5;
    g->b[1].inflight = 1;
    g->b[2].inflight = 3;
    for (int i = 0; i < 5; i++) assert_ptr_equal(sl_gw_pick(g, "sqf", "/", 1, 1, 0), &g->b[1]);
    g->b[0].inflight = g->b[1].inflight = g->b[2].inflight = 0;
    /* carp: a URL sticks to a backend; URLs spread; a disabled backend moves only its URLs. */
    int hits[3] = {0};
    sl_gw_backend *first[64];
    for (int i = 0; i < 64; i++) {
        char url[32];
        int n = snprintf(url, sizeof url, "/file-%d", i);
        first[i] = sl_gw_pick(g, "carp", url, (size_t)n, 1, 0);
        assert_ptr_equal(sl_gw_pick(g, "carp", url, (size_t)n, 1, 0), first[i]);
        hits[first[i] - g->b]++;
    }
    assert_true(hits[0] > 5 && hits[1] > 5 && hits[2] > 5);
    set_disabled(&g->b[2], 10);
    for (int i = 0; i < 64; i++) {
        char url[32];
        int n = snprintf(url, sizeof url, "/file-%d", i);
        sl_gw_backend *now = sl_gw_pick(g, "carp", url, (size_t)n, 1, 0);
        assert_true(now != &g->b[2]);
        if (first[i] != &g->b[2]) assert_ptr_equal(now, first[i]);
    }
    set_disabled(&g->b[2], 0);
    gw0_free();
}

static void test_wait_queue_is_bounded_fifo(void **state)
{
    static const char *const names[] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", NULL};
    sl_gw_group *g = group3(names);
    sl_gw_wait w[3] = {{0}};
    assert_int_equal(sl_gw_wait_add(g, &w[0], 2), 0);
    assert_int_equal(sl_gw_wait_add(g, &w[1], 2), 0);
    assert_int_equal(sl_gw_wait_add(g, &w[2], 2), -EAGAIN);
    sl_gw_wait_remove(g, &w[0]);
    assert_false(w[0].queued);
    assert_int_equal(g->n_waiting, 1);
    assert_ptr_equal(g->wait_head, &w[1]);
    sl_gw_wait_remove(g, &w[1]);
    assert_null(g->wait_head);
    assert_null(g->wait_tail);
    gw0_free();
}


/* A listening unix socket nobody accepts on: connections queue in its backlog, like those of
 * an application whose workers are all busy. */
static int listener(char *path, size_t len)
{
    snprintf(path, len, "/tmp/sl_gw_test_%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&un, sizeof un), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

/* One backend on a fresh listener, with or without an event loop. */
typedef struct backend_fx {
    char path[108], name[120];
    int lfd;
    struct event_base *base;
    sl_gw *gw;
    const char *names[2];
    sl_strlist list;
    sl_gw_backend *be; /* the one backend, listening on path */
} backend_fx;

static sl_gw_backend *fx_open(backend_fx *f, bool loop)
{
    f->lfd = listener(f->path, sizeof f->path);
    snprintf(f->name, sizeof f->name, "unix:%s", f->path);
    f->base = loop ? event_base_new() : NULL;
    if (loop) assert_non_null(f->base);
    f->gw = sl_gw_new(f->base, 1);
    f->names[0] = f->name;
    f->list = (sl_strlist){f->names, 1};
    sl_gw_backend *be = &sl_gw_group_get(f->gw, &f->list)->b[0];
    /* The shared record outlives a test (same socket path): start from nothing learned. */
    be->sh->cap = 0;
    be->sh->cap_ms = 0;
    be->sh->want_ms = 0;
    assert_int_equal(be->sh->answered, 0);
    return f->be = be;
}

static void fx_close(backend_fx *f)
{
    sl_gw_free(f->gw);
    if (f->base) event_base_free(f->base);
    close(f->lfd);
    unlink(f->path);
}

/* cmocka set-ups (without and with an event loop) and tear-down: a backend_fx as the state. */
static int fx_setup(void **state, bool loop)
{
    backend_fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    fx_open(f, loop);
    *state = f;
    return 0;
}

static int fx_plain(void **state)
{
    return fx_setup(state, false);
}

static int fx_loop(void **state)
{
    return fx_setup(state, true);
}

static int fx_teardown(void **state)
{
    fx_close(*state);
    free(*state);
    return 0;
}

#define PLAIN_TEST(test) cmocka_unit_test_setup_teardown(test, fx_plain, fx_teardown)
#define LOOP_TEST(test) cmocka_unit_test_setup_teardown(test, fx_loop, fx_teardown)

/* The fixture's one backend. */
static sl_gw_backend *fx_backend(void **state)
{
    return ((backend_fx *)*state)->be;
}

static sl_gw_conn *open_conn(sl_gw_backend *be)
{
    bool inprog;
    int err = 0;
    assert_true(sl_gw_reserve(be, 1000, sl_gw_now_ms()));
    sl_gw_conn *gc = sl_gw_connect(be, false, &inprog, &err);
    assert_non_null(gc);
    return gc;
}

/* A connection whose backend answered the moment it was sent (no latency learned). */
static sl_gw_conn *answered_conn(sl_gw_backend *be)
{
    sl_gw_conn *gc = open_conn(be);
    sl_gw_answered(gc, gc->sent_ms);
    return gc;
}

static void test_release_keeps_answered_connections(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *a = open_conn(be);
    assert_ptr_equal(be->fresh, a); /* unanswered until the backend speaks */
    sl_gw_answered(a, sl_gw_now_ms());
    assert_null(be->fresh);
    sl_gw_release(a, 4, true, sl_gw_now_ms());
    assert_int_equal(be->n_idle, 1);
    assert_int_equal(be->n_conns, 1);
    assert_int_equal(be->inflight, 0);
    /* Taken again: the same connection, marked as reused. */
    sl_gw_conn *b = sl_gw_take_idle(be);
    assert_ptr_equal(b, a);
    assert_true(b->reused);
    /* keep_max bounds the idle ones. */
    sl_gw_release(b, 0, true, sl_gw_now_ms());
    assert_int_equal(be->n_idle, 0);
    assert_int_equal(be->n_conns, 0);
}

static void test_stuck_new_connection_frees_a_worker(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *kept = open_conn(be);
    sl_gw_answered(kept, sl_gw_now_ms());
    sl_gw_conn *stuck = open_conn(be); /* sent, never answered: in the accept queue */
    uint64_t now = stuck->opened_ms;
    /* Not waiting long yet: the kept connection stays. */
    sl_gw_release(kept, 4, true, now + SL_GW_STALL_MS - 1);
    assert_int_equal(be->n_idle, 1);
    assert_int_equal(be->stalls, 0);
    kept = sl_gw_take_idle(be);
    /* An HTTP backend does not tie a worker to a connection: nothing to free. */
    sl_gw_release(kept, 4, false, now + 1000);
    assert_int_equal(be->n_idle, 1);
    kept = sl_gw_take_idle(be);
    /* Waited SL_GW_STALL_MS: the kept connection closes so its worker can accept. */
    sl_gw_release(kept, 4, true, now + SL_GW_STALL_MS);
    assert_int_equal(be->n_idle, 0);
    assert_int_equal(be->n_conns, 1);
    assert_int_equal(be->stalls, 1);
    /* Its wait restarted: the next release within SL_GW_STALL_MS keeps its connection. */
    assert_int_equal(stuck->opened_ms, now + SL_GW_STALL_MS);
    /* Once answered, the new connection is an ordinary kept one. */
    sl_gw_answered(stuck, now + 5000);
    sl_gw_release(stuck, 4, true, now + 5000);
    assert_int_equal(be->n_idle, 1);
    assert_int_equal(be->stalls, 1);
}

static void test_idle_connections_close_while_a_new_one_waits(void **state)
{
    backend_fx *f = *state;
    sl_gw_backend *be = f->be;
    struct event_base *base = f->base;
    sl_gw_conn *k1 = open_conn(be), *k2 = open_conn(be);
    sl_gw_answered(k1, sl_gw_now_ms());
    sl_gw_answered(k2, sl_gw_now_ms());
    sl_gw_conn *stuck = open_conn(be);
    /* Both kept ones go idle just after the new one was sent: no release will come again, so
     * only the timer can notice the new connection is stuck behind them. */
    sl_gw_release(k1, 4, true, stuck->opened_ms);
    sl_gw_release(k2, 4, true, stuck->opened_ms);
    assert_int_equal(be->n_idle, 2);
    assert_true(be->stall_armed);
    uint64_t sent = stuck->opened_ms;
    event_base_loop(base, EVLOOP_ONCE); /* the check, SL_GW_STALL_MS later */
    /* One idle connection closed for the one stuck connection; the other is still kept, and the
     * stuck one's wait starts again (its worker needs a moment to accept). */
    assert_int_equal(be->n_idle, 1);
    assert_int_equal(be->n_conns, 2);
    assert_int_equal(be->stalls, 1);
    assert_true(stuck->opened_ms >= sent + SL_GW_STALL_MS);
    assert_true(be->stall_armed);
    /* Still not answered after another wait (nobody accepts here): the next one goes. */
    event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(be->n_idle, 0);
    assert_int_equal(be->stalls, 2);
    assert_false(be->stall_armed); /* nothing idle left to close */
    sl_gw_close(stuck);
    assert_int_equal(be->n_conns, 0);
    assert_null(be->fresh);
}

static void test_stuck_connection_teaches_the_worker_count(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *kept = open_conn(be);
    sl_gw_answered(kept, sl_gw_now_ms());
    sl_gw_conn *stuck = open_conn(be);
    uint64_t t = stuck->opened_ms + SL_GW_STALL_MS;
    assert_true(sl_gw_may_open(be, 20, t));
    assert_false(sl_gw_may_open(be, 2, t)); /* max-pool-size still bounds it */
    /* The stuck one suggests the backend has one worker (held by the kept connection): that
     * one closes; when the stuck one is answered at once, the freed worker took it, and the
     * pool stops opening connections that would only queue. */
    sl_gw_release(kept, 4, true, t);
    assert_int_equal(be->stalls, 1);
    assert_int_equal(be->sh->cap, 0); /* not known until the answer confirms it */
    assert_int_equal(be->n_conns, 1);
    sl_gw_answered(stuck, t + 1);
    assert_int_equal(be->sh->cap, 1);
    assert_false(sl_gw_may_open(be, 20, t + 1));
    assert_false(sl_gw_may_open(be, 20, t + SL_GW_CAP_MS));
    /* Forgotten after a while: a backend given more workers gets more connections again. */
    assert_true(sl_gw_may_open(be, 20, t + 1 + SL_GW_CAP_MS));
    sl_gw_close(stuck);
    assert_int_equal(be->n_fresh, 0);
}

static void test_learned_worker_count_never_drops(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *k1 = open_conn(be), *k2 = open_conn(be);
    sl_gw_answered(k1, sl_gw_now_ms());
    sl_gw_answered(k2, sl_gw_now_ms());
    sl_gw_conn *stuck = open_conn(be);
    uint64_t t = stuck->opened_ms + SL_GW_STALL_MS;
    sl_gw_release(k1, 4, true, t);
    sl_gw_answered(stuck, t + 1);
    assert_int_equal(be->sh->cap, 2); /* two answered connections: two workers at least */
    /* Stuck again with only k2 answered: one answered connection says "one worker or more",
     * which is no news; the count stays at two. */
    sl_gw_close(stuck);
    sl_gw_conn *again = open_conn(be);
    /* A stall period later (it grew with the answer time the confirmation measured). */
    uint64_t t2 = t + 1 + 2 * (SL_GW_STALL_MS + 2 * be->lat_ms);
    sl_gw_release(k2, 4, true, t2);
    assert_int_equal(be->stalls, 2);
    sl_gw_answered(again, t2 + 1);
    assert_int_equal(be->sh->cap, 2);
    sl_gw_close(again);
}

static void test_a_late_answer_teaches_nothing(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *kept = answered_conn(be);
    sl_gw_conn *slow = open_conn(be);
    uint64_t t = slow->opened_ms + SL_GW_STALL_MS;
    /* It looks stuck, so the kept connection goes to free a worker for it... */
    sl_gw_release(kept, 4, true, t);
    assert_int_equal(be->stalls, 1);
    /* ...but its answer comes long after the worker was free: the backend was only slow (its
     * workers had no CPU on a busy machine), not short of workers. Nothing is learned, and the
     * pool may grow as before. */
    sl_gw_answered(slow, t + 10 * SL_GW_STALL_MS);
    assert_int_equal(be->sh->cap, 0);
    assert_true(sl_gw_may_open(be, 20, t + 10 * SL_GW_STALL_MS));
    sl_gw_close(slow);
}

static void test_slow_answers_are_not_taken_for_stuck(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *k = answered_conn(be);
    assert_int_equal(be->lat_ms, 0);
    sl_gw_release(k, 4, true, sl_gw_now_ms());
    k = sl_gw_take_idle(be);
    sl_gw_answered(k, k->sent_ms + 200); /* the backend takes 200 ms */
    assert_int_equal(be->lat_ms, 200);
    sl_gw_conn *fresh = open_conn(be);
    /* 100 ms without an answer is normal for this backend: no stall. */
    sl_gw_release(k, 4, true, fresh->opened_ms + SL_GW_STALL_MS + 100);
    assert_int_equal(be->stalls, 0);
    assert_int_equal(be->n_idle, 1);
    /* Past twice its answer time, the new connection is stuck behind the kept one. */
    k = sl_gw_take_idle(be);
    sl_gw_release(k, 4, true, fresh->opened_ms + SL_GW_STALL_MS + 400);
    assert_int_equal(be->stalls, 1);
    assert_int_equal(be->n_idle, 0);
    /* Fast answers bring the answer time down again, slowly. */
    sl_gw_answered(fresh, sl_gw_now_ms());
    sl_gw_release(fresh, 4, true, sl_gw_now_ms());
    k = sl_gw_take_idle(be);
    sl_gw_answered(k, k->sent_ms);
    assert_true(be->lat_ms < 200 && be->lat_ms > 100);
    sl_gw_close(k);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    int *hits = arg;
    char b[16];
    if (what & EV_READ) assert_true(recv(fd, b, sizeof b, 0) > 0);
    (*hits)++;
}

static void test_read_interest_outlives_each_request(void **state)
{
    backend_fx *f = *state;
    sl_gw_backend *be = f->be;
    struct event_base *base = f->base;
    sl_gw_conn *gc = open_conn(be);
    int peer = accept(f->lfd, NULL, NULL);
    assert_true(peer >= 0);
    int hits = 0;
    sl_gw_watch(gc, EV_READ, 5, on_read, &hits);
    assert_int_equal(write(peer, "a", 1), 1);
    event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(hits, 1);
    sl_gw_answered(gc, sl_gw_now_ms());
    /* Parked and taken again, the connection keeps its registration (no epoll_ctl); only the
     * timeout comes and goes. */
    sl_gw_release(gc, 4, true, sl_gw_now_ms());
    assert_true(event_pending(&gc->ev, EV_READ, NULL));
    assert_false(event_pending(&gc->ev, EV_TIMEOUT, NULL));
    assert_ptr_equal(sl_gw_take_idle(be), gc);
    assert_true(event_pending(&gc->ev, EV_READ, NULL));
    sl_gw_watch(gc, EV_READ, 5, on_read, &hits);
    assert_true(event_pending(&gc->ev, EV_TIMEOUT, NULL));
    assert_int_equal(write(peer, "b", 1), 1);
    event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(hits, 2);
    /* A write wait carries the timeout; unwatch stops both. */
    sl_gw_watch(gc, EV_WRITE | EV_READ, 5, on_read, &hits);
    assert_true(event_pending(&gc->wev, EV_WRITE | EV_TIMEOUT, NULL) == (EV_WRITE | EV_TIMEOUT));
    assert_false(event_pending(&gc->ev, EV_TIMEOUT, NULL));
    sl_gw_unwatch(gc);
    assert_false(event_pending(&gc->ev, EV_READ, NULL));
    assert_false(event_pending(&gc->wev, EV_WRITE, NULL));
    /* Idle again, and the backend closes it: dropped at once, the request's handler untouched. */
    sl_gw_release(gc, 4, true, sl_gw_now_ms());
    assert_int_equal(be->n_idle, 1);
    close(peer);
    event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(be->n_idle, 0);
    assert_int_equal(be->n_conns, 0);
    assert_int_equal(hits, 2);
}

static void test_one_kept_connection_closed_per_stall_period(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    sl_gw_conn *k1 = answered_conn(be), *k2 = answered_conn(be);
    sl_gw_conn *s1 = open_conn(be), *s2 = open_conn(be);
    uint64_t t = s2->opened_ms + SL_GW_STALL_MS;
    sl_gw_release(k1, 4, true, t);
    assert_int_equal(be->stalls, 1);
    /* s2 waits as long, but the worker just freed may be about to take it: k2 is kept. */
    sl_gw_release(k2, 4, true, t);
    assert_int_equal(be->stalls, 1);
    assert_int_equal(be->n_idle, 1);
    /* A stall period later s2 (or s1, requeued) still waits: now k2 goes too. */
    k2 = sl_gw_take_idle(be);
    sl_gw_release(k2, 4, true, t + SL_GW_STALL_MS);
    assert_int_equal(be->stalls, 2);
    assert_int_equal(be->n_idle, 0);
    sl_gw_close(s1);
    sl_gw_close(s2);
}

/* Two loops claiming room at once (threads here) never open more than max-pool-size between
 * them: each claim is counted in the same step that checks it. Many rounds of a pool of two,
 * since only the claims for the last places can collide. */
enum { CLAIM_ROUNDS = 20000, CLAIM_POOL = 2 };

typedef struct {
    sl_gw_backend *be;
    pthread_barrier_t *sync;
    bool first;
    long over; /* rounds in which the two claimed more than the pool */
} claim_arg;

static void *claim_rounds(void *p)
{
    claim_arg *a = p;
    for (int r = 0; r < CLAIM_ROUNDS; r++) {
        pthread_barrier_wait(a->sync); /* both claim at once */
        while (sl_gw_reserve(a->be, CLAIM_POOL, 0)) {}
        pthread_barrier_wait(a->sync);
        if (a->first) {
            if (a->be->sh->conns != CLAIM_POOL) a->over++;
            a->be->sh->conns = 0; /* claims only: no connection to close */
        }
    }
    return NULL;
}

static void test_reservations_never_exceed_the_pool(void **state)
{
    sl_gw_backend *be = fx_backend(state);
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, 2);
    claim_arg a[2] = {{be, &sync, true, 0}, {be, &sync, false, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, claim_rounds, &a[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&sync);
    assert_int_equal(a[0].over, 0);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_balancers),
        cmocka_unit_test(test_wait_queue_is_bounded_fifo),
        PLAIN_TEST(test_release_keeps_answered_connections),
        PLAIN_TEST(test_stuck_new_connection_frees_a_worker),
        LOOP_TEST(test_idle_connections_close_while_a_new_one_waits),
        PLAIN_TEST(test_stuck_connection_teaches_the_worker_count),
        PLAIN_TEST(test_learned_worker_count_never_drops),
        PLAIN_TEST(test_a_late_answer_teaches_nothing),
        PLAIN_TEST(test_one_kept_connection_closed_per_stall_period),
        PLAIN_TEST(test_slow_answers_are_not_taken_for_stuck),
        LOOP_TEST(test_read_interest_outlives_each_request),
        PLAIN_TEST(test_reservations_never_exceed_the_pool))
