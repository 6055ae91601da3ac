/* gpufaas tests — residency on a real gpufaas-worker (path in GF_WORKER):
 * the manifest's pin, SET_RESIDENCY at run time, the pin limit answered
 * with GF_ERR_TOO_LARGE, and pinned models still warm after other models
 * churned through a small device. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/residency.h"
#include "core/tensor.h"
#include "testutil.h"
#include "mlp.h"
#include "wharness.h"

#define RECV_MS 20000 /* generous: sanitizer builds on 2 busy cores */
#define N_MODELS 6

typedef struct {
    gf_test_mlp m;
    char key[32];
    char *path;
    char *manifest;
} rmodel;

/* An mlp of one 64 KiB page; pinned in its manifest when pin. */
static void rmodel_make(rmodel *t, const char *dir, int i, bool pin)
{
    int64_t dims[] = {16, 256, 16};
    gf_test_mlp_make(&t->m, 10 + (uint64_t)i, 2, dims, false, 4);
    char file[32], name[16];
    snprintf(name, sizeof name, "r%d", i);
    snprintf(file, sizeof file, "r%d.safetensors", i);
    snprintf(t->key, sizeof t->key, "r%d@1", i);
    t->path = gf_test_path(dir, file);
    gf_err e;
    ck_assert_msg(gf_test_mlp_write(&t->m, t->path, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    char *base = gf_test_mlp_manifest(&t->m, name);
    size_t n = strlen(base);
    t->manifest = malloc(n + 64);
    memcpy(t->manifest, base, n - 1); /* drop the closing brace */
    snprintf(t->manifest + n - 1, 64, "%s}", pin ? ",\"residency\":{\"pin\":true}" : "");
    free(base);
}

static void rmodel_free(rmodel *t)
{
    gf_test_mlp_free(&t->m);
    free(t->path);
    free(t->manifest);
}

static uint32_t call(gf_wh *w, uint64_t id, gf_ipc_frame *f, char *msg, size_t cap)
{
    return gf_wh_call(w, id, RECV_MS, f, msg, cap);
}

static int32_t load(gf_wh *w, const rmodel *t)
{
    gf_ipc_load l = {t->key, t->manifest, (uint32_t)strlen(t->manifest), t->path, "",
                     GF_TIER_STORE};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_load(&w->out, id, &l, NULL), GF_OK);
    gf_ipc_frame f;
    char msg[512];
    uint32_t code = call(w, id, &f, msg, sizeof msg);
    ck_assert_msg(code == 0 && f.h.type == GF_IPC_LOADED, "LOAD %s: %u %s", t->key, code, msg);
    gf_ipc_loaded ld;
    ck_assert_int_eq(gf_ipc_decode_loaded(&f, &ld, NULL), GF_OK);
    gf_ipc_frame_deinit(&f);
    return ld.tier;
}

/* SET_RESIDENCY; 0 on RESIDENCY_SET, else the ERROR's code (message in msg). */
static uint32_t set_residency(gf_wh *w, const char *key, bool pin, gf_priority pr, char *msg,
                              size_t cap)
{
    gf_ipc_residency r = {key, pin ? 1u : 0u, (uint32_t)pr, 0};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_residency(&w->out, id, &r, NULL), GF_OK);
    gf_ipc_frame f;
    uint32_t code = call(w, id, &f, msg, cap);
    if (code == 0) {
        ck_assert_int_eq(f.h.type, GF_IPC_RESIDENCY_SET);
        gf_ipc_frame_deinit(&f);
    }
    return code;
}

static gf_ipc_stats stats(gf_wh *w)
{
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_empty(&w->out, GF_IPC_GET_STATS, id, NULL), GF_OK);
    gf_ipc_frame f;
    ck_assert_uint_eq(call(w, id, &f, NULL, 0), 0);
    gf_ipc_stats st;
    ck_assert_int_eq(gf_ipc_decode_stats(&f, &st, NULL), GF_OK);
    gf_ipc_frame_deinit(&f);
    return st;
}

/* INFER one row; returns whether the answer says it was cold. */
static bool infer_cold(gf_wh *w, const rmodel *t)
{
    float x[16] = {0.5f};
    gf_ipc_tensor in = {.name = "x"};
    int64_t shape[2] = {1, 16};
    ck_assert_int_eq(gf_tensor_init(&in.t, GF_DT_F32, 2, shape, x, GF_MEM_HOST, -1, NULL),
                     GF_OK);
    gf_ipc_infer msg = {t->key, 1, &in, 0, 0, NULL};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_infer(&w->out, id, &msg, NULL), GF_OK);
    gf_ipc_frame f;
    char err[512];
    uint32_t code = call(w, id, &f, err, sizeof err);
    ck_assert_msg(code == 0 && f.h.type == GF_IPC_RESULT, "INFER %s: %u %s", t->key, code, err);
    gf_ipc_result r;
    ck_assert_int_eq(gf_ipc_decode_result(&f, &r, NULL), GF_OK);
    bool cold = (r.flags & GF_IPC_RESULT_COLD) != 0;
    gf_ipc_result_deinit(&r);
    gf_ipc_frame_deinit(&f);
    return cold;
}

START_TEST(test_pins_hold_through_churn)
{
    char *dir = gf_test_tmpdir();
    /* four pages of device (and room for activations), two of them for pins */
    const char *extra[] = {"--device-memory", "288K", "--page-size", "64K", "--pin-limit", "128K",
                           "--host-memory", "4M", NULL};
    gf_wh w;
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_wh_spawn(&w, gf_test_prog("GF_WORKER"), dir, extra, NULL, true, RECV_MS,
                              &e) == GF_OK,
                  "spawn: %s", gf_err_msg(&e));
    rmodel t[N_MODELS];
    for (int i = 0; i < N_MODELS; i++)
        rmodel_make(&t[i], dir, i, i == 0 || i == 5);
    /* r0 pinned by its manifest: on the device at once */
    ck_assert_int_eq(load(&w, &t[0]), GF_TIER_DEVICE);
    for (int i = 1; i < N_MODELS; i++)
        load(&w, &t[i]);
    gf_ipc_stats st = stats(&w);
    ck_assert_uint_eq(st.pin_limit, 128 << 10);
    ck_assert_uint_eq(st.pinned_bytes, 128 << 10); /* r0 and r5, by their manifests */
    char msg[512] = "";
    /* at run time: unpin r5, pin r1 instead */
    ck_assert_uint_eq(set_residency(&w, t[5].key, false, GF_PRIORITY_NORMAL, msg, sizeof msg), 0);
    ck_assert_uint_eq(set_residency(&w, t[1].key, true, GF_PRIORITY_NORMAL, msg, sizeof msg), 0);
    /* a third pin is over the limit */
    uint32_t code = set_residency(&w, t[2].key, true, GF_PRIORITY_HIGH, msg, sizeof msg);
    ck_assert_uint_eq(code, GF_ERR_TOO_LARGE);
    ck_assert_msg(strstr(msg, "pin limit") != NULL, "%s", msg);
    code = set_residency(&w, "nobody@1", true, GF_PRIORITY_NORMAL, msg, sizeof msg);
    ck_assert_uint_eq(code, GF_ERR_NOT_FOUND);
    st = stats(&w);
    ck_assert_uint_eq(st.pinned_bytes, 128 << 10);
    /* churn the two pages left with the others */
    for (int round = 0; round < 3; round++)
        for (int i = 2; i < N_MODELS; i++)
            infer_cold(&w, &t[i]);
    st = stats(&w);
    ck_assert_uint_gt(st.evictions_device, 4);
    /* the pinned ones never left */
    ck_assert(!infer_cold(&w, &t[0]));
    ck_assert(!infer_cold(&w, &t[1]));
    ck_assert_int_eq(gf_wh_wait(&w, RECV_MS, true), 0);
    gf_wh_free(&w);
    for (int i = 0; i < N_MODELS; i++)
        rmodel_free(&t[i]);
    gf_test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_residency");
    TCase *tc = tcase_create("residency");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pins_hold_through_churn);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
