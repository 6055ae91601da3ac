/* gpufaas tests — a real gpufaas-worker whose device is lost mid-request
 * (fault injection through GPUFAAS_FAULTS: on cpu the "device_lost" site, hit
 * by the compute stream's sync, stands for a CUDA context that an illegal
 * address or an ECC error left unusable). The request that meets it fails
 * with GF_ERR_DEVICE, the ones queued behind it with GF_ERR_CLOSED (so the
 * gateway retries them), and the worker exits with GF_WORKER_EXIT_DEVICE so
 * that the supervisor starts a fresh one; a worker that keeps answering
 * errors forever is the failure this guards against. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "testutil.h"
#include "wharness.h"

#define RECV_MS 20000 /* generous: sanitizer builds on 2 busy cores */

/* One frame answering request id among the next n (order is not fixed:
 * refused requests may be answered before the failing one). */
typedef struct {
    uint64_t id;
    uint32_t type, code;
    char msg[GF_IPC_MAX_MESSAGE + 1];
} answer;

static void recv_answer(gf_wh *w, answer *a)
{
    gf_ipc_frame f;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_recv(w, &f, RECV_MS, &e);
    ck_assert_msg(st == GF_OK, "recv: %s", gf_err_msg(&e));
    a->id = f.h.request_id;
    a->type = f.h.type;
    a->code = 0;
    a->msg[0] = '\0';
    if (f.h.type == GF_IPC_ERROR) {
        gf_ipc_error er;
        ck_assert_int_eq(gf_ipc_decode_error(&f, &er, &e), GF_OK);
        a->code = er.code;
        snprintf(a->msg, sizeof a->msg, "%s", er.message);
    }
    gf_ipc_frame_deinit(&f);
}

START_TEST(test_device_lost_fails_queued_work_and_exits)
{
    char *dir = gf_test_tmpdir();
    gf_test_mlp m;
    int64_t dims[] = {16, 64, 4};
    gf_test_mlp_make(&m, 7, 2, dims, false, 8);
    char *weights = gf_test_path(dir, "lost.safetensors");
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_test_mlp_write(&m, weights, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    char *manifest = gf_test_mlp_manifest(&m, "lost");
    /* the first sync of the compute stream (the first request's) finds the
     * device lost */
    ck_assert_int_eq(setenv("GPUFAAS_FAULTS", "device_lost:1", 1), 0);
    gf_wh w;
    const char *extra[] = {"--device-memory", "16M", "--host-memory", "0", NULL};
    gf_status st = gf_wh_spawn(&w, gf_test_prog("GF_WORKER"), dir, extra, NULL, true, RECV_MS, &e);
    unsetenv("GPUFAAS_FAULTS");
    ck_assert_msg(st == GF_OK, "spawning the worker: %s (exit %d)", gf_err_msg(&e), w.status);
    gf_ipc_load l = {"lost@1", manifest, (uint32_t)strlen(manifest), weights, "",
                     GF_TIER_DEVICE};
    ck_assert_int_eq(gf_ipc_encode_load(&w.out, gf_wh_id(&w), &l, &e), GF_OK);
    ck_assert_int_eq(gf_wh_send(&w, &e), GF_OK);
    answer a;
    recv_answer(&w, &a);
    ck_assert_msg(a.type == GF_IPC_LOADED, "LOAD answered %s: %s", gf_ipc_type_name(a.type),
                  a.msg);
    /* three requests in one write: the first meets the lost device */
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i / 16.0f;
    uint64_t ids[3];
    for (int r = 0; r < 3; r++) {
        gf_ipc_tensor in = {.name = "x"};
        ck_assert_int_eq(gf_tensor_init(&in.t, GF_DT_F32, 2, (int64_t[]){1, 16}, x, GF_MEM_HOST,
                                        -1, &e),
                         GF_OK);
        gf_ipc_infer msg = {"lost@1", 1, &in, 0, 0, NULL};
        ids[r] = gf_wh_id(&w);
        ck_assert_int_eq(gf_ipc_encode_infer(&w.out, ids[r], &msg, &e), GF_OK);
    }
    ck_assert_int_eq(gf_wh_send(&w, &e), GF_OK);
    int device = 0, closed = 0;
    for (int r = 0; r < 3; r++) {
        recv_answer(&w, &a);
        ck_assert_msg(a.type == GF_IPC_ERROR, "request %llu answered %s",
                      (unsigned long long)a.id, gf_ipc_type_name(a.type));
        ck_assert_msg(strstr(a.msg, "is lost") != NULL, "%s", a.msg);
        if (a.id == ids[0]) {
            ck_assert_msg(a.code == GF_ERR_DEVICE, "the failing request: code %u: %s", a.code,
                          a.msg);
            device++;
        } else {
            ck_assert_msg(a.id == ids[1] || a.id == ids[2], "an answer for %llu",
                          (unsigned long long)a.id);
            ck_assert_msg(a.code == GF_ERR_CLOSED, "a queued request: code %u: %s", a.code,
                          a.msg);
            closed++;
        }
    }
    ck_assert_int_eq(device, 1);
    ck_assert_int_eq(closed, 2);
    /* then the stream ends and the worker exits to be restarted */
    gf_ipc_frame f;
    st = gf_wh_recv(&w, &f, RECV_MS, &e);
    ck_assert_msg(st == GF_ERR_CLOSED, "after the loss: expected end of stream, got %s",
                  gf_status_name(st));
    ck_assert_int_eq(gf_wh_wait(&w, RECV_MS, false), GF_WORKER_EXIT_DEVICE);
    gf_wh_free(&w);
    free(manifest);
    free(weights);
    gf_test_mlp_free(&m);
    gf_test_rmtree(dir);
}
END_TEST

/* A malformed fault spec is a start-up failure that names it. */
START_TEST(test_bad_fault_spec_is_fatal)
{
    char *dir = gf_test_tmpdir();
    char *log = gf_test_path(dir, "stderr.txt");
    ck_assert_int_eq(setenv("GPUFAAS_FAULTS", "device_lost", 1), 0);
    gf_wh w;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_spawn(&w, gf_test_prog("GF_WORKER"), dir, NULL, log, true, RECV_MS, &e);
    unsetenv("GPUFAAS_FAULTS");
    ck_assert_int_eq(st, GF_ERR_CLOSED);
    ck_assert_int_eq(w.status, GF_WORKER_EXIT_FATAL);
    char *text = gf_test_read_file(log, NULL);
    ck_assert_msg(text != NULL && strstr(text, "GPUFAAS_FAULTS") != NULL, "%s", text);
    free(text);
    gf_wh_free(&w);
    free(log);
    gf_test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_device_lost_fails_queued_work_and_exits);
    tcase_add_test(tc, test_bad_fault_spec_is_fatal);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
