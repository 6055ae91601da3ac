/* gpufaas tests — the worker's start-up failures (runtime/worker/start.c), for
 * real: gpufaas-worker (path in GF_WORKER) given a bad device, size, flag,
 * policy or state directory exits with GF_WORKER_EXIT_FATAL ("do not
 * respawn") and says why on stderr, before it answers anything. Part of the
 * worker_process suite (test_worker.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testutil.h"
#include "wharness.h"

#define RECV_MS 20000 /* generous: sanitizer builds on 2 busy cores */

/* Start a worker expected to fail at start-up; returns its exit code and
 * leaves its stderr in *err_text (malloc'd). */
static int start_failing(const char *dir, const char *const *extra, char **err_text)
{
    char *log = gf_test_path(dir, "stderr.txt");
    gf_wh w;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_spawn(&w, gf_test_prog("GF_WORKER"), dir, extra, log, true, RECV_MS, &e);
    ck_assert_msg(st == GF_ERR_CLOSED, "the worker started (%s)", gf_status_name(st));
    int code = w.status;
    gf_wh_free(&w);
    *err_text = gf_test_read_file(log, NULL);
    ck_assert_ptr_nonnull(*err_text);
    free(log);
    return code;
}

START_TEST(test_fatal_start)
{
    char *dir = gf_test_tmpdir();
    char *text;
    if (gf_backend_cuda_device_count() == 0) {
        const char *no_gpu[] = {"--device", "cuda:0", NULL};
        ck_assert_int_eq(start_failing(dir, no_gpu, &text), GF_WORKER_EXIT_FATAL);
        ck_assert_msg(strstr(text, "cuda") != NULL, "stderr: %s", text);
        free(text);
    }
    const char *bad_index[] = {"--device", "cuda:99", NULL};
    ck_assert_int_eq(start_failing(dir, bad_index, &text), GF_WORKER_EXIT_FATAL);
    free(text);
    const char *bad_dev[] = {"--device", "tpu", NULL};
    ck_assert_int_eq(start_failing(dir, bad_dev, &text), GF_WORKER_EXIT_FATAL);
    free(text);
    const char *bad_size[] = {"--device-memory", "12Q", NULL};
    ck_assert_int_eq(start_failing(dir, bad_size, &text), GF_WORKER_EXIT_FATAL);
    ck_assert_msg(strstr(text, "--device-memory") != NULL, "stderr: %s", text);
    free(text);
    const char *bad_flag[] = {"--colour", "blue", NULL};
    ck_assert_int_eq(start_failing(dir, bad_flag, &text), GF_WORKER_EXIT_FATAL);
    ck_assert_msg(strstr(text, "--colour") != NULL, "stderr: %s", text);
    free(text);
    const char *bad_policy[] = {"--policy", "fifo", NULL};
    ck_assert_int_eq(start_failing(dir, bad_policy, &text), GF_WORKER_EXIT_FATAL);
    free(text);
    char *file = gf_test_path(dir, "not-a-dir");
    gf_test_write_file(file, "x", 1);
    const char *bad_state[] = {"--state-dir", file, NULL};
    ck_assert_int_eq(start_failing(dir, bad_state, &text), GF_WORKER_EXIT_FATAL);
    free(text);
    free(file);
    gf_test_rmtree(dir);
}
END_TEST

void tw_start_tests(TCase *tc);

void tw_start_tests(TCase *tc)
{
    tcase_add_test(tc, test_fatal_start);
}
