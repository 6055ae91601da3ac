/* Unit tests of the gateway's two policies, which are pure functions of
 * the core's state: the router's cost model (gw_route: queue wait + swap-in
 * + execution estimate, router.c) and the batcher's batch selection
 * (gw_batch_due and gw_take_batch, batcher.c). The state is built here as
 * the core keeps it (gateway/core/internal.h); no worker, no thread. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/internal.h"
#include "testutil.h"

/* ---- the router ---------------------------------------------------------------------- */

/* A gateway with n workers, all up, idle, unmeasured. */
static gf_gw *gw_with(int n)
{
    gf_gw *gw = calloc(1, sizeof *gw);
    ck_assert_ptr_nonnull(gw);
    gw->n_workers = n;
    for (int i = 0; i < n; i++) {
        gw->workers[i].id = i;
        gw->workers[i].state = GW_W_UP;
    }
    return gw;
}

/* A version of `bytes` bytes, placed nowhere. */
static gw_version *version_of(uint64_t bytes)
{
    gw_version *v = calloc(1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    v->bytes = bytes;
    for (int i = 0; i < GW_MAX_WORKERS; i++)
        v->pl[i].tier = GF_TIER_STORE;
    return v;
}

static void measured(gw_worker *w, double host_bps, double store_bps)
{
    w->have_stats = true;
    w->stats.host_bw_bps = (uint64_t)host_bps;
    w->stats.store_bw_bps = (uint64_t)store_bps;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-6 * (1 + fabs(b));
}

/* The model on a worker's device costs no swap: that worker wins until its
 * queue outweighs the swap elsewhere. */
START_TEST(test_route_locality_against_queue)
{
    gf_gw *gw = gw_with(2);
    gw_version *v = version_of(100000000); /* 100 MB */
    v->pl[1].tier = GF_TIER_DEVICE;
    v->pl[0].exec_us = v->pl[1].exec_us = 500;
    measured(&gw->workers[0], 10e9, 1e9);
    measured(&gw->workers[1], 10e9, 1e9);
    double est;
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[1]);
    ck_assert(near(est, 500)); /* no swap, the exec estimate; the queue is not in it */
    /* worker 0 would read 100 MB from its store at 1 GB/s: 100 ms; a queue of
     * 99 ms on worker 1 still loses to that, 101 ms does not */
    gw->workers[1].queued_us = 99000;
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[1]);
    gw->workers[1].queued_us = 101000;
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[0]);
    ck_assert(near(est, 100000 + 500)); /* the swap and the exec */
    free(v);
    free(gw);
}
END_TEST

/* The swap term: bytes over the worker's measured bandwidth of the tier the
 * model would come from (host, else store); the defaults (10 and 2 GB/s)
 * before a worker has measured; the device bytes once LOADED said them. */
START_TEST(test_route_swap_term)
{
    gf_gw *gw = gw_with(1);
    gw_version *v = version_of(20000000); /* 20 MB */
    v->exec_us = 1; /* so est is the swap */
    double est;
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[0]);
    ck_assert(near(est, 20000000 / 2e9 * 1e6 + 1)); /* store tier, default 2 GB/s */
    v->pl[0].tier = GF_TIER_HOST;
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 20000000 / 10e9 * 1e6 + 1)); /* host tier, default 10 GB/s */
    measured(&gw->workers[0], 5e9, 0.5e9);
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 20000000 / 5e9 * 1e6 + 1));
    v->pl[0].tier = GF_TIER_STORE;
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 20000000 / 0.5e9 * 1e6 + 1));
    v->device_bytes = 30000000; /* the layout on the device is what moves */
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 30000000 / 0.5e9 * 1e6 + 1));
    free(v);
    free(gw);
}
END_TEST

/* The exec term: this worker's average, else the version's on any worker,
 * else 1 ms. */
START_TEST(test_route_exec_term)
{
    gf_gw *gw = gw_with(2);
    gw_version *v = version_of(0);
    double est;
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 1000));
    v->exec_us = 300;
    gw_route(gw, v, -1, &est);
    ck_assert(near(est, 300));
    v->pl[1].exec_us = 100; /* measured faster on worker 1 */
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[1]);
    ck_assert(near(est, 100));
    free(v);
    free(gw);
}
END_TEST

/* Who may be chosen: only workers that are up and not excluded; a tie goes
 * to the one with fewer batches in flight; none up: NULL. */
/* --replicate auto: a replica adds compute unless every worker is a cpu
 * worker and they are at least as many as the cores (all on the same
 * cores); a cuda worker has its own device. */
START_TEST(test_replicas_add_compute)
{
    gf_gw *gw = gw_with(2);
    snprintf(gw->workers[0].device, sizeof gw->workers[0].device, "cpu:0");
    snprintf(gw->workers[1].device, sizeof gw->workers[1].device, "cpu:1");
    ck_assert(!gw_replicas_add_compute(gw, 2));
    ck_assert(!gw_replicas_add_compute(gw, 1));
    ck_assert(gw_replicas_add_compute(gw, 4)); /* two cores no worker runs on */
    snprintf(gw->workers[1].device, sizeof gw->workers[1].device, "cuda:0");
    ck_assert(gw_replicas_add_compute(gw, 2));
    snprintf(gw->workers[0].device, sizeof gw->workers[0].device, "cuda:1");
    ck_assert(gw_replicas_add_compute(gw, 1));
    free(gw);
}
END_TEST

START_TEST(test_route_candidates)
{
    gf_gw *gw = gw_with(3);
    gw_version *v = version_of(1000);
    gw->workers[0].n_inflight = 2;
    gw->workers[1].n_inflight = 1;
    gw->workers[2].n_inflight = 3;
    ck_assert_ptr_eq(gw_route(gw, v, -1, NULL), &gw->workers[1]);
    ck_assert_ptr_eq(gw_route(gw, v, 1, NULL), &gw->workers[0]);
    gw->workers[0].state = GW_W_DOWN;
    ck_assert_ptr_eq(gw_route(gw, v, 1, NULL), &gw->workers[2]);
    gw->workers[2].state = GW_W_STARTING;
    ck_assert_ptr_null(gw_route(gw, v, 1, NULL));
    double est = -1;
    ck_assert_ptr_eq(gw_route(gw, v, -1, &est), &gw->workers[1]);
    ck_assert(est > 0);
    free(v);
    free(gw);
}
END_TEST

/* ---- the batcher --------------------------------------------------------------------- */

typedef struct {
    gf_manifest mf;
    gf_manifest_io in;
    gw_version v;
    gw_req reqs[16];
    gf_gw_tensor inputs[16];
    int n;
} queue;

/* A version with one input [-1, 4] (batchable) and the given limits. */
static void queue_init(queue *q, int64_t max_batch, int64_t delay_us)
{
    memset(q, 0, sizeof *q);
    q->in.rank = 2;
    q->in.shape[0] = -1;
    q->in.shape[1] = 4;
    q->mf.inputs = &q->in;
    q->mf.n_inputs = 1;
    q->mf.max_batch_size = max_batch;
    q->mf.max_queue_delay_us = delay_us;
    q->v.mf = &q->mf;
    q->v.batchable = true;
    atomic_init(&q->v.refs, 1);
}

/* Queue a request of `rows` rows whose input is [rows, width], submitted at t. */
static gw_req *queue_push(queue *q, int64_t rows, int64_t width, uint64_t t)
{
    ck_assert_int_lt(q->n, 16);
    gw_req *r = &q->reqs[q->n];
    gf_gw_tensor *in = &q->inputs[q->n];
    q->n++;
    in->t.rank = 2;
    in->t.shape[0] = rows;
    in->t.shape[1] = width;
    r->inputs = in;
    r->rows = rows;
    r->t_submit_us = t;
    r->v = &q->v;
    if (q->v.q_tail != NULL)
        q->v.q_tail->next = r;
    else
        q->v.q_head = r;
    q->v.q_tail = r;
    q->v.q_len++;
    q->v.q_rows += rows;
    return r;
}

/* The requests of a batch, as indices into q->reqs. */
static int batch_members(queue *q, gw_batch *b, int *idx)
{
    int n = 0;
    for (gw_req *r = b->reqs; r != NULL; r = r->next)
        idx[n++] = (int)(r - q->reqs);
    ck_assert_uint_eq(b->n_reqs, (uint32_t)n);
    return n;
}

static void batch_done(gw_batch *b)
{
    atomic_fetch_sub(&b->v->refs, 1); /* the reference take_batch took */
    free(b);
}

/* The head and the requests after it whose inputs agree past the batch
 * dimension, up to max_batch_size rows, in submit order; the others keep
 * their order in the queue. */
START_TEST(test_take_batch_selection)
{
    queue q;
    queue_init(&q, 8, 1000);
    queue_push(&q, 2, 4, 0);  /* 0 */
    queue_push(&q, 3, 5, 1);  /* 1: another width: not with 0 */
    queue_push(&q, 3, 4, 2);  /* 2 */
    queue_push(&q, 4, 4, 3);  /* 3: 2 + 3 + 4 > 8 */
    queue_push(&q, 2, 4, 4);  /* 4: fits: 7 rows... */
    queue_push(&q, 1, 4, 5);  /* 5: ...and 8 */
    queue_push(&q, 1, 4, 6);  /* 6: the batch is full */
    gw_batch *b = gw_take_batch(&q.v);
    ck_assert_ptr_nonnull(b);
    int idx[16];
    ck_assert_int_eq(batch_members(&q, b, idx), 4);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_int_eq(idx[1], 2);
    ck_assert_int_eq(idx[2], 4);
    ck_assert_int_eq(idx[3], 5);
    ck_assert_int_eq(b->rows, 8);
    ck_assert_ptr_eq(b->v, &q.v);
    ck_assert_int_eq(atomic_load(&q.v.refs), 2); /* the batch pins the version */
    /* what is left, in order, with the counts and the tail right */
    ck_assert_ptr_eq(q.v.q_head, &q.reqs[1]);
    ck_assert_ptr_eq(q.reqs[1].next, &q.reqs[3]);
    ck_assert_ptr_eq(q.reqs[3].next, &q.reqs[6]);
    ck_assert_ptr_null(q.reqs[6].next);
    ck_assert_ptr_eq(q.v.q_tail, &q.reqs[6]);
    ck_assert_uint_eq(q.v.q_len, 3);
    ck_assert_int_eq(q.v.q_rows, 3 + 4 + 1);
    batch_done(b);
    /* the next batch starts at the new head: its width, not the old one */
    b = gw_take_batch(&q.v);
    ck_assert_int_eq(batch_members(&q, b, idx), 1);
    ck_assert_int_eq(idx[0], 1);
    batch_done(b);
    b = gw_take_batch(&q.v);
    ck_assert_int_eq(batch_members(&q, b, idx), 2);
    ck_assert_int_eq(idx[0], 3);
    ck_assert_int_eq(idx[1], 6);
    ck_assert_ptr_null(q.v.q_head);
    ck_assert_ptr_null(q.v.q_tail);
    ck_assert_uint_eq(q.v.q_len, 0);
    batch_done(b);
}
END_TEST

/* A version that cannot batch (a fixed batch dimension) sends one request a
 * batch, whatever follows; a head larger than max_batch_size still goes
 * (alone: submit refused it if it did not fit). */
START_TEST(test_take_batch_unbatchable_and_big_head)
{
    queue q;
    queue_init(&q, 8, 1000);
    q.v.batchable = false;
    queue_push(&q, 1, 4, 0);
    queue_push(&q, 1, 4, 1);
    gw_batch *b = gw_take_batch(&q.v);
    int idx[16];
    ck_assert_int_eq(batch_members(&q, b, idx), 1);
    ck_assert_int_eq(idx[0], 0);
    ck_assert_ptr_eq(q.v.q_head, &q.reqs[1]);
    batch_done(b);
    queue_init(&q, 4, 1000);
    queue_push(&q, 4, 4, 0);
    queue_push(&q, 1, 4, 1);
    b = gw_take_batch(&q.v);
    ck_assert_int_eq(batch_members(&q, b, idx), 1); /* full with the head alone */
    batch_done(b);
}
END_TEST

/* When a queue is due: its head has waited max_queue_delay_us, or it holds
 * max_batch_size rows, or the version cannot batch; else its deadline is
 * when the head will have waited that long. */
START_TEST(test_batch_due)
{
    queue q;
    queue_init(&q, 8, 1000);
    uint64_t dl = 0;
    ck_assert(!gw_batch_due(&q.v, 5000, &dl)); /* empty */
    queue_push(&q, 3, 4, 5000);
    dl = 0;
    ck_assert(!gw_batch_due(&q.v, 5500, &dl));
    ck_assert_uint_eq(dl, 6000);
    ck_assert(gw_batch_due(&q.v, 6000, &dl));
    queue_push(&q, 5, 4, 5900); /* 8 rows: full, due at once */
    ck_assert(gw_batch_due(&q.v, 5950, &dl));
    queue_init(&q, 8, 0); /* no delay: due as soon as queued */
    queue_push(&q, 1, 4, 7000);
    ck_assert(gw_batch_due(&q.v, 7000, &dl));
    queue_init(&q, 8, 1000);
    q.v.batchable = false;
    queue_push(&q, 1, 4, 7000);
    ck_assert(gw_batch_due(&q.v, 7000, &dl));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, test_route_locality_against_queue);
    tcase_add_test(tc, test_route_swap_term);
    tcase_add_test(tc, test_route_exec_term);
    tcase_add_test(tc, test_route_candidates);
    tcase_add_test(tc, test_replicas_add_compute);
    tcase_add_test(tc, test_take_batch_selection);
    tcase_add_test(tc, test_take_batch_unbatchable_and_big_head);
    tcase_add_test(tc, test_batch_due);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
