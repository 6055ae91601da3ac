/* gpufaas tests — the order a real gpufaas-worker (path in GF_WORKER) runs
 * requests in. Ready-first (the default): while a request waits for its
 * model's swap-in, requests behind it whose model is on the device run, so
 * the compute stream is not idle behind a swap. --schedule deadline:
 * ready-first, and of the requests that can run the one due soonest.
 * --schedule fifo: strictly in arrival order. The link is emulated (--copy-bandwidth) so the swap is
 * slow enough to order against. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "testutil.h"
#include "mlp.h"
#include "wharness.h"

#define RECV_MS 30000 /* generous: sanitizer builds on 2 busy cores */
#define N_WARM 3

typedef struct {
    gf_test_mlp m;
    char key[32];
    char *path;
    char *manifest;
} smodel;

static void smodel_make_batch(smodel *t, const char *dir, const char *name, int layers,
                              const int64_t *dims, int max_batch)
{
    gf_test_mlp_make(&t->m, 7 + (uint64_t)strlen(name), layers, dims, false, max_batch);
    char file[64];
    snprintf(file, sizeof file, "%s.safetensors", name);
    snprintf(t->key, sizeof t->key, "%s@1", name);
    t->path = gf_test_path(dir, file);
    gf_err e;
    ck_assert_msg(gf_test_mlp_write(&t->m, t->path, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    t->manifest = gf_test_mlp_manifest(&t->m, name);
}

static void smodel_make(smodel *t, const char *dir, const char *name, int layers,
                        const int64_t *dims)
{
    smodel_make_batch(t, dir, name, layers, dims, 4);
}

static void smodel_free(smodel *t)
{
    gf_test_mlp_free(&t->m);
    free(t->path);
    free(t->manifest);
}

static void load(gf_wh *w, const smodel *t, int32_t tier)
{
    gf_ipc_load l = {t->key, t->manifest, (uint32_t)strlen(t->manifest), t->path, "", tier};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_load(&w->out, id, &l, NULL), GF_OK);
    gf_ipc_frame f;
    char msg[512];
    uint32_t code = gf_wh_call(w, id, RECV_MS, &f, msg, sizeof msg);
    ck_assert_msg(code == 0 && f.h.type == GF_IPC_LOADED, "LOAD %s: %u %s", t->key, code, msg);
    gf_ipc_frame_deinit(&f);
}

#define MAX_ROWS 1024

/* A worker on dir with the extra flags. */
static void spawn(gf_wh *w, const char *dir, const char *const *extra, gf_err *e)
{
    gf_err_clear(e);
    ck_assert_msg(gf_wh_spawn(w, gf_test_prog("GF_WORKER"), dir, extra, NULL, true, RECV_MS,
                              e) == GF_OK,
                  "spawn: %s", gf_err_msg(e));
}

/* Encode (not send) an INFER of `rows` rows of t; its id. */
static uint64_t encode_infer_rows(gf_wh *w, const smodel *t, int rows)
{
    static float x[MAX_ROWS * 16];
    for (int i = 0; i < MAX_ROWS * 16; i++)
        x[i] = 0.01f * (float)(i % 64);
    gf_ipc_tensor in = {.name = "x"};
    int64_t shape[2] = {rows, t->m.dims[0]};
    ck_assert_int_le(t->m.dims[0], 16);
    ck_assert_int_le(rows, MAX_ROWS);
    ck_assert_int_eq(gf_tensor_init(&in.t, GF_DT_F32, 2, shape, x, GF_MEM_HOST, -1, NULL),
                     GF_OK);
    gf_ipc_infer msg = {t->key, 1, &in, 0, 0, NULL};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_infer(&w->out, id, &msg, NULL), GF_OK);
    return id;
}

/* One row. */
static uint64_t encode_infer(gf_wh *w, const smodel *t)
{
    return encode_infer_rows(w, t, 1);
}

/* A cold INFER of a large model (its swap takes about half a second), then
 * N_WARM of a small model on the device, sent together: the position of the
 * cold one's RESULT among the N_WARM + 1 answers (0 = first). */
static int cold_answer_position(const char *schedule)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "64M", "--host-memory", "0", "--copy-bandwidth",
                           "8M", "--schedule", schedule, NULL};
    gf_wh w;
    gf_err e;
    spawn(&w, dir, extra, &e);
    int64_t big_dims[] = {16, 1024, 1024, 16}; /* 4.3 MB: ~0.5 s over 8 MB/s */
    int64_t small_dims[] = {16, 64, 16};
    smodel big, small;
    smodel_make(&big, dir, "big", 3, big_dims);
    smodel_make(&small, dir, "small", 2, small_dims);
    load(&w, &big, GF_TIER_STORE);
    load(&w, &small, GF_TIER_DEVICE);
    uint64_t id_big = encode_infer(&w, &big);
    for (int i = 0; i < N_WARM; i++)
        encode_infer(&w, &small);
    ck_assert_int_eq(gf_wh_send(&w, &e), GF_OK);
    int pos = -1;
    for (int got = 0; got < N_WARM + 1; got++) {
        gf_ipc_frame f;
        ck_assert_msg(gf_wh_recv(&w, &f, RECV_MS, &e) == GF_OK, "%s", gf_err_msg(&e));
        ck_assert_msg(f.h.type == GF_IPC_RESULT, "answer %d: frame type %d", got, f.h.type);
        if (f.h.request_id == id_big) {
            gf_ipc_result r;
            ck_assert_int_eq(gf_ipc_decode_result(&f, &r, NULL), GF_OK);
            ck_assert_uint_eq(r.flags & GF_IPC_RESULT_COLD, GF_IPC_RESULT_COLD);
            /* its wait was its swap-in's (about 0.5 s), whichever order ran it */
            ck_assert_msg(r.load_us >= 200000 && r.load_us > r.queue_us,
                          "load_us %llu queue_us %llu", (unsigned long long)r.load_us,
                          (unsigned long long)r.queue_us);
            gf_ipc_result_deinit(&r);
            pos = got;
        }
        gf_ipc_frame_deinit(&f);
    }
    ck_assert_int_eq(gf_wh_wait(&w, 10000, true), 0);
    gf_wh_free(&w);
    smodel_free(&big);
    smodel_free(&small);
    gf_test_rmtree(dir);
    return pos;
}

/* Give t's manifest an SLO of slo_ms. */
static void smodel_set_slo(smodel *t, int slo_ms)
{
    size_t n = strlen(t->manifest);
    ck_assert(n > 0 && t->manifest[n - 1] == '}');
    char *m = malloc(n + 32);
    ck_assert_ptr_nonnull(m);
    snprintf(m, n + 32, "%.*s,\"slo_ms\":%d}", (int)n - 1, t->manifest, slo_ms);
    free(t->manifest);
    t->manifest = m;
}

/* A cold INFER of a large model without an SLO (its swap takes about half a
 * second; a load without a deadline is due GF_CACHE_UNDUE_US, 1 s, after it
 * begins), then one of a small cold model with an SLO of 700 ms, sent
 * together: the order of their answers, and the small one's RESULT. Both
 * load from the store tier: their slices are sized by the link, so the small
 * one's goes ahead within a slice or two (when store loads were sliced by
 * the store's read speed, 1 MiB slices of an 8 MB/s link queued the big
 * model's first half-second before it, and it lost 3 runs of 5). */
static void swap_order(const char *order, bool *small_first, uint64_t *small_total_us,
                       uint64_t *big_load_us)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "64M", "--host-memory", "0", "--copy-bandwidth",
                           "8M", "--swap-order", order, NULL};
    gf_wh w;
    gf_err e;
    spawn(&w, dir, extra, &e);
    int64_t big_dims[] = {16, 1024, 1024, 16}; /* 4.3 MB: ~0.5 s over 8 MB/s */
    int64_t small_dims[] = {16, 64, 16};       /* 5 KB: under a millisecond */
    smodel big, small;
    smodel_make(&big, dir, "big", 3, big_dims);
    smodel_make(&small, dir, "small", 2, small_dims);
    smodel_set_slo(&small, 700);
    load(&w, &big, GF_TIER_STORE);
    load(&w, &small, GF_TIER_STORE);
    uint64_t id_big = encode_infer(&w, &big);
    uint64_t id_small = encode_infer(&w, &small);
    ck_assert_int_eq(gf_wh_send(&w, &e), GF_OK);
    int got_small = -1;
    for (int got = 0; got < 2; got++) {
        gf_ipc_frame f;
        ck_assert_msg(gf_wh_recv(&w, &f, RECV_MS, &e) == GF_OK, "%s", gf_err_msg(&e));
        ck_assert_msg(f.h.type == GF_IPC_RESULT, "answer %d: frame type %d", got, f.h.type);
        ck_assert(f.h.request_id == id_big || f.h.request_id == id_small);
        gf_ipc_result r;
        ck_assert_int_eq(gf_ipc_decode_result(&f, &r, NULL), GF_OK);
        if (f.h.request_id == id_big) {
            *big_load_us = r.load_us;
        } else {
            ck_assert_uint_eq(r.flags & GF_IPC_RESULT_COLD, GF_IPC_RESULT_COLD);
            *small_total_us = r.queue_us + r.load_us + r.exec_us;
            got_small = got;
        }
        gf_ipc_result_deinit(&r);
        gf_ipc_frame_deinit(&f);
    }
    *small_first = got_small == 0;
    ck_assert_int_eq(gf_wh_wait(&w, 10000, true), 0);
    gf_wh_free(&w);
    smodel_free(&big);
    smodel_free(&small);
    gf_test_rmtree(dir);
}

/* --schedule deadline against ready-first: a long request (no SLO, about a
 * second's worth of compute on one core, 1024 rows through 2048 x 2048) runs
 * while two warm ones queue behind it, sent together after it: "loose" (an
 * SLO of 60 s) first, then "tight" (30 s). Both SLOs are far beyond what
 * the test takes, so neither is ever past hope. True when tight's answer
 * came before loose's. */
static bool tight_answered_first(const char *schedule)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "64M", "--host-memory", "0", "--schedule",
                           schedule, NULL};
    gf_wh w;
    gf_err e;
    spawn(&w, dir, extra, &e);
    int64_t long_dims[] = {16, 2048, 2048, 16};
    int64_t small_dims[] = {16, 64, 16};
    smodel slow, loose, tight;
    smodel_make_batch(&slow, dir, "slow", 3, long_dims, MAX_ROWS);
    smodel_make(&loose, dir, "loose", 2, small_dims);
    smodel_make(&tight, dir, "tight", 2, small_dims);
    smodel_set_slo(&loose, 60000);
    smodel_set_slo(&tight, 30000);
    load(&w, &slow, GF_TIER_DEVICE);
    load(&w, &loose, GF_TIER_DEVICE);
    load(&w, &tight, GF_TIER_DEVICE);
    uint64_t id_slow = encode_infer_rows(&w, &slow, MAX_ROWS);
    uint64_t id_loose = encode_infer(&w, &loose);
    uint64_t id_tight = encode_infer(&w, &tight);
    ck_assert_int_eq(gf_wh_send(&w, &e), GF_OK);
    int at_loose = -1, at_tight = -1;
    for (int got = 0; got < 3; got++) {
        gf_ipc_frame f;
        ck_assert_msg(gf_wh_recv(&w, &f, RECV_MS, &e) == GF_OK, "%s", gf_err_msg(&e));
        ck_assert_msg(f.h.type == GF_IPC_RESULT, "answer %d: frame type %d", got, f.h.type);
        ck_assert(f.h.request_id == id_slow || f.h.request_id == id_loose ||
                  f.h.request_id == id_tight);
        if (f.h.request_id == id_loose)
            at_loose = got;
        if (f.h.request_id == id_tight)
            at_tight = got;
        gf_ipc_frame_deinit(&f);
    }
    ck_assert_int_eq(gf_wh_wait(&w, 10000, true), 0);
    gf_wh_free(&w);
    smodel_free(&slow);
    smodel_free(&loose);
    smodel_free(&tight);
    gf_test_rmtree(dir);
    return at_tight < at_loose;
}

START_TEST(test_deadline_schedule_runs_the_due_soonest)
{
    ck_assert_msg(tight_answered_first("deadline"),
                  "the request due sooner was answered after the one queued ahead of it");
}
END_TEST

START_TEST(test_ready_first_keeps_arrival_order_among_warm)
{
    ck_assert_msg(!tight_answered_first("ready-first"),
                  "ready-first reordered two warm requests");
}
END_TEST

START_TEST(test_deadline_swap_overtakes_a_long_one)
{
    bool first;
    uint64_t us, big_load_us = 0;
    swap_order("deadline", &first, &us, &big_load_us);
    /* its swap went ahead of the big one's (a slice or two of it), and the
     * request ran while the big one still loaded (ready-first). Measured
     * against the big one's own load, not a fixed time: a loaded machine
     * slows both, and waiting behind it would cost all of it. */
    ck_assert_msg(first, "the small function's request answered after the big one's");
    ck_assert_msg(us < big_load_us / 2, "the small function's request took %llu us, the big "
                  "one's load %llu us", (unsigned long long)us, (unsigned long long)big_load_us);
}
END_TEST

START_TEST(test_arrival_swap_order_waits_behind_a_long_one)
{
    bool first;
    uint64_t us, big_load_us = 0;
    swap_order("arrival", &first, &us, &big_load_us);
    ck_assert_msg(us >= 300000, "the small function's request took only %llu us: its swap did "
                  "not wait for the big one's", (unsigned long long)us);
}
END_TEST

START_TEST(test_ready_first_runs_warm_requests_during_a_swap)
{
    int pos = cold_answer_position("ready-first");
    ck_assert_msg(pos == N_WARM, "the cold request answered at %d of %d: the warm ones waited "
                  "behind its swap-in", pos, N_WARM + 1);
}
END_TEST

START_TEST(test_fifo_keeps_arrival_order)
{
    ck_assert_int_eq(cold_answer_position("fifo"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_schedule");
    TCase *tc = tcase_create("schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ready_first_runs_warm_requests_during_a_swap);
    tcase_add_test(tc, test_fifo_keeps_arrival_order);
    tcase_add_test(tc, test_deadline_swap_overtakes_a_long_one);
    tcase_add_test(tc, test_arrival_swap_order_waits_behind_a_long_one);
    tcase_add_test(tc, test_deadline_schedule_runs_the_due_soonest);
    tcase_add_test(tc, test_ready_first_keeps_arrival_order_among_warm);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
