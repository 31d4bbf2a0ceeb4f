/* Thread pool and completion ports: jobs run off the loop, done() runs on the thread of the port
 * they were submitted with, in completion order, once; the queue bound refuses; one pool serves
 * two loops and each gets back only its own jobs; freeing a port runs every outstanding done().
 * Limiters: half the workers at once, then a FIFO, then refused; a waiting job whose turn comes
 * to a full pool completes without running; synchronous slots. */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#include "threadpool.h"

typedef struct tjob {
    sl_job job;
    pthread_t worker_thread;
    pthread_t done_thread;
    int work_runs, done_runs;
    int order;
    pthread_mutex_t *gate; /* work() blocks on it when set */
} tjob;

static int done_seq;
static int done_total;
static struct event_base *loop_base;

static void work(sl_job *j)
{
    tjob *t = (tjob *)j;
    t->worker_thread = pthread_self();
    if (t->gate) {
        pthread_mutex_lock(t->gate);
        pthread_mutex_unlock(t->gate);
    }
    t->work_runs++;
}

static void done(sl_job *j)
{
    tjob *t = (tjob *)j;
    t->done_thread = pthread_self();
    t->done_runs++;
    t->order = done_seq++;
    done_total++;
}

static int want_total;
static void done_counting(sl_job *j)
{
    done(j);
    if (done_total == want_total) event_base_loopbreak(loop_base);
}

static void test_jobs_run_on_workers_and_complete_on_the_loop(void **state)
{
    loop_base = event_base_new();
    sl_tport *port = sl_tport_new(loop_base);
    sl_tpool *p = sl_tpool_new("t", 4, 100);
    assert_non_null(p);
    assert_non_null(port);
    enum { N = 50 };
    tjob *jobs = calloc(N, sizeof *jobs);
    done_total = 0;
    want_total = N;
    for (int i = 0; i < N; i++) {
        jobs[i].job.work = work;
        jobs[i].job.done = done_counting;
        assert_int_equal(sl_tpool_submit(p, port, &jobs[i].job), 0);
    }
    struct timeval limit = {10, 0};
    event_base_loopexit(loop_base, &limit);
    event_base_dispatch(loop_base);
    assert_int_equal(done_total, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(jobs[i].work_runs, 1);
        assert_int_equal(jobs[i].done_runs, 1);
        assert_false(pthread_equal(jobs[i].worker_thread, pthread_self()));
        assert_true(pthread_equal(jobs[i].done_thread, pthread_self()));
        assert_true(jobs[i].job.t_queued <= jobs[i].job.t_started);
        assert_true(jobs[i].job.t_started <= jobs[i].job.t_done);
    }
    sl_tpool_stats st;
    sl_tpool_get_stats(p, &st);
    assert_int_equal(st.threads, 4);
    assert_int_equal(st.submitted, N);
    assert_int_equal(st.completed, N);
    assert_int_equal(st.queued, 0);
    sl_tpool_free(p);
    sl_tport_free(port);
    free(jobs);
    event_base_free(loop_base);
}

static void test_full_queue_refuses_with_eagain(void **state)
{
    loop_base = event_base_new();
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&gate); /* the one worker blocks on its first job */
    sl_tport *port = sl_tport_new(loop_base);
    sl_tpool *p = sl_tpool_new("t", 1, 2);
    assert_non_null(p);
    tjob j[4] = {{.gate = &gate}, {.gate = NULL}, {.gate = NULL}, {.gate = NULL}};
    for (int i = 0; i < 4; i++) {
        j[i].job.work = work;
        j[i].job.done = done;
    }
    assert_int_equal(sl_tpool_submit(p, port, &j[0].job), 0);
    /* Wait until the worker holds job 0, so the queue is empty again. */
    for (int i = 0; i < 2000; i++) {
        sl_tpool_stats st;
        sl_tpool_get_stats(p, &st);
        if (st.running == 1) break;
        usleep(1000);
    }
    assert_int_equal(sl_tpool_submit(p, port, &j[1].job), 0);
    assert_int_equal(sl_tpool_submit(p, port, &j[2].job), 0);
    assert_int_equal(sl_tpool_submit(p, port, &j[3].job), -EAGAIN);
    sl_tpool_stats st;
    sl_tpool_get_stats(p, &st);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.queued, 2);
    pthread_mutex_unlock(&gate);
    done_seq = 0;
    done_total = 0;
    /* Freeing the pool waits for the queue; freeing the port runs every done(), in the order
     * the jobs finished. */
    sl_tpool_free(p);
    assert_int_equal(j[0].done_runs, 0);
    sl_tport_free(port);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(j[i].work_runs, 1);
        assert_int_equal(j[i].done_runs, 1);
        assert_int_equal(j[i].order, i);
    }
    assert_int_equal(j[3].work_runs, 0);
    assert_int_equal(j[3].done_runs, 0);
    event_base_free(loop_base);
}

typedef struct complete_arg {
    sl_tport *port;
    sl_job *j;
} complete_arg;

static void *completer(void *arg)
{
    complete_arg *a = arg;
    sl_tport_complete(a->port, a->j);
    return NULL;
}

static void test_complete_from_another_thread(void **state)
{
    loop_base = event_base_new();
    sl_tport *port = sl_tport_new(loop_base);
    tjob j = {0};
    j.job.done = done_counting;
    done_total = 0;
    want_total = 1;
    complete_arg a = {port, &j.job};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, completer, &a), 0);
    struct timeval limit = {5, 0};
    event_base_loopexit(loop_base, &limit);
    event_base_dispatch(loop_base);
    pthread_join(th, NULL);
    assert_int_equal(j.done_runs, 1);
    assert_true(pthread_equal(j.done_thread, pthread_self()));
    sl_tport_free(port);
    event_base_free(loop_base);
}

/* Two loops on threads of their own share one pool: each job's done() runs on the loop whose
 * port it was submitted with. */
typedef struct loop_arg {
    struct event_base *base;
    sl_tport *port;
    sl_tpool *pool;
    tjob jobs[40];
    int done;
} loop_arg;

static void loop_done(sl_job *j)
{
    tjob *t = (tjob *)j;
    t->done_thread = pthread_self();
    t->done_runs++;
}

static void *run_loop(void *arg)
{
    loop_arg *a = arg;
    a->base = event_base_new();
    a->port = sl_tport_new(a->base);
    for (int i = 0; i < 40; i++) {
        a->jobs[i].job.work = work;
        a->jobs[i].job.done = loop_done;
        assert_int_equal(sl_tpool_submit(a->pool, a->port, &a->jobs[i].job), 0);
    }
    for (int spins = 0; spins < 5000; spins++) {
        event_base_loop(a->base, EVLOOP_NONBLOCK);
        int n = 0;
        for (int i = 0; i < 40; i++) n += a->jobs[i].done_runs;
        if (n == 40) break;
        usleep(1000);
    }
    return NULL;
}

static void test_one_pool_two_loops(void **state)
{
    sl_tpool *p = sl_tpool_new("t", 3, 200);
    loop_arg a[2] = {{.pool = p}, {.pool = p}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run_loop, &a[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 40; i++) {
            assert_int_equal(a[l].jobs[i].done_runs, 1);
            assert_true(pthread_equal(a[l].jobs[i].done_thread, th[l]));
        }
    sl_tpool_free(p);
    for (int i = 0; i < 2; i++) {
        sl_tport_free(a[i].port);
        event_base_free(a[i].base);
    }
}

/* ---- limiters ---- */

static sl_tlimit *cur_limit;
static _Atomic int n_in_work, max_in_work;

typedef struct ljob {
    tjob t;
    bool ran;
} ljob;

static void limited_work(sl_job *j)
{
    int now = atomic_fetch_add(&n_in_work, 1) + 1;
    int max = atomic_load(&max_in_work);
    while (now > max && !atomic_compare_exchange_weak(&max_in_work, &max, now)) {
    }
    work(j);
    atomic_fetch_sub(&n_in_work, 1);
}

static void limited_done(sl_job *j)
{
    ((ljob *)j)->ran = sl_tlimit_done(cur_limit, j);
    done_counting(j);
}

/* Waits until the pool has `n` jobs on its workers. */
static void wait_running(sl_tpool *p, unsigned n)
{
    sl_tpool_stats st;
    for (int i = 0; i < 2000; i++) {
        sl_tpool_get_stats(p, &st);
        if (st.running == n) return;
        usleep(1000);
    }
    fail_msg("the pool never ran %u jobs", n);
}

static void run_loop_until(int total)
{
    want_total = total;
    struct timeval limit = {10, 0};
    event_base_loopexit(loop_base, &limit);
    event_base_dispatch(loop_base);
    assert_int_equal(done_total, total);
}

static void test_limiter_runs_half_then_queues_then_refuses(void **state)
{
    loop_base = event_base_new();
    sl_tport *port = sl_tport_new(loop_base);
    sl_tpool *p = sl_tpool_new("t", 4, 100);
    sl_tlimit l = SL_TLIMIT_INIT(2);
    cur_limit = &l;
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&gate);
    ljob j[5];
    memset(j, 0, sizeof j);
    atomic_store(&max_in_work, 0);
    for (int i = 0; i < 5; i++) {
        j[i].t.gate = &gate;
        j[i].t.job = (sl_job){.work = limited_work, .done = limited_done};
    }
    for (int i = 0; i < 4; i++) assert_int_equal(sl_tlimit_submit(&l, p, port, &j[i].t.job), 0);
    assert_int_equal(sl_tlimit_submit(&l, p, port, &j[4].t.job), -EAGAIN);
    unsigned running, waiting;
    uint64_t refused;
    sl_tlimit_get(&l, &running, &waiting, &refused);
    assert_int_equal(running, 2); /* half of 4 */
    assert_int_equal(waiting, 2);
    assert_int_equal(refused, 1);
    wait_running(p, 2);
    pthread_mutex_unlock(&gate);
    done_total = 0;
    run_loop_until(4);
    for (int i = 0; i < 4; i++) {
        assert_true(j[i].ran);
        assert_int_equal(j[i].t.work_runs, 1);
    }
    assert_int_equal(j[4].t.work_runs, 0);
    assert_true(j[2].t.job.t_queued <= j[3].t.job.t_queued); /* oldest first */
    assert_true(atomic_load(&max_in_work) <= 2);
    sl_tlimit_get(&l, &running, &waiting, NULL);
    assert_int_equal(running, 0);
    assert_int_equal(waiting, 0);
    sl_tpool_free(p);
    sl_tport_free(port);
    event_base_free(loop_base);
}

static void test_limiter_turn_to_a_full_pool_completes_without_running(void **state)
{
    loop_base = event_base_new();
    sl_tport *port = sl_tport_new(loop_base);
    sl_tpool *p = sl_tpool_new("t", 2, 1); /* one slot; a queue of one */
    sl_tlimit l = SL_TLIMIT_INIT(4);
    cur_limit = &l;
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&gate);
    ljob j = {.t.job = {.work = limited_work, .done = limited_done}};
    tjob x[3];
    memset(x, 0, sizeof x);
    for (int i = 0; i < 3; i++) {
        x[i].gate = &gate;
        x[i].job = (sl_job){.work = work, .done = done};
    }
    assert_true(sl_tlimit_enter(&l, 2)); /* the slot: work already on a worker */
    assert_int_equal(sl_tlimit_submit(&l, p, port, &j.t.job), 0); /* waits for it */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_tpool_submit(p, port, &x[i].job), 0);
        if (i < 2) wait_running(p, (unsigned)i + 1);
    }
    sl_tlimit_leave(&l); /* j's turn, but the pool's workers and queue are full */
    done_total = 0;
    run_loop_until(1);
    assert_false(j.ran);
    assert_int_equal(j.t.work_runs, 0);
    unsigned running;
    sl_tlimit_get(&l, &running, NULL, NULL);
    assert_int_equal(running, 0); /* its done() gave the slot back */
    pthread_mutex_unlock(&gate);
    sl_tpool_free(p);
    sl_tport_free(port);
    for (int i = 0; i < 3; i++) assert_int_equal(x[i].work_runs, 1);
    event_base_free(loop_base);
}

static void test_limiter_synchronous_slots(void **state)
{
    sl_tlimit l = SL_TLIMIT_INIT(0);
    assert_int_equal(sl_tlimit_slots(0), 1);
    assert_int_equal(sl_tlimit_slots(1), 1);
    assert_int_equal(sl_tlimit_slots(5), 2);
    assert_true(sl_tlimit_enter(&l, 4));
    assert_true(sl_tlimit_enter(&l, 4));
    assert_false(sl_tlimit_enter(&l, 4));
    sl_tlimit_leave(&l);
    assert_true(sl_tlimit_enter(&l, 4));
    unsigned running;
    uint64_t refused;
    sl_tlimit_get(&l, &running, NULL, &refused);
    assert_int_equal(running, 2);
    assert_int_equal(refused, 1);
    sl_tlimit_leave(&l);
    sl_tlimit_leave(&l);
}

TU_MAIN(NULL, NULL,
        cmocka_unit_test(test_jobs_run_on_workers_and_complete_on_the_loop),
        cmocka_unit_test(test_full_queue_refuses_with_eagain),
        cmocka_unit_test(test_complete_from_another_thread),
        cmocka_unit_test(test_one_pool_two_loops),
        cmocka_unit_test(test_limiter_runs_half_then_queues_then_refuses),
        cmocka_unit_test(test_limiter_turn_to_a_full_pool_completes_without_running),
        cmocka_unit_test(test_limiter_synchronous_slots))
