/* The digits example (examples/digits/train.py) end to end: train on
 * scikit-learn's 8x8 digits, export for the mlp kind, and classify the
 * held-out split through gf_fn_prepare, the cache and gf_fn_infer on the cpu
 * backend. Skipped (77) when the interpreter lacks scikit-learn (the GPU
 * machine has no package registry); CI installs it from
 * tests/requirements.txt. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "core/tensor.h"
#include "functions/runtime.h"
#include "kinds_testlib.h"
#include "testutil.h"

static char *tmpdir;
static void setup(void)
{
    tmpdir = gf_test_tmpdir();
}
static void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* ---- the digits example ---- */

/* examples/digits/train.py trains an MLP on scikit-learn's 8x8 digits and
 * exports it for the mlp kind; classifying the held-out split through our
 * runtime must reach 95%. */
START_TEST(test_digits_example)
{
    const char *py = getenv("GF_PYTHON"), *src = getenv("GF_SOURCE_ROOT");
    ck_assert_msg(py != NULL && src != NULL, "GF_PYTHON and GF_SOURCE_ROOT must be set (meson)");
    char *script = gf_test_path(src, "examples/digits/train.py");
    char *dir = gf_test_path(tmpdir, "digits");
    char *argv[] = {(char *)py, script, dir, NULL};
    char *out = NULL, *errtext = NULL;
    int rc = gf_test_run_cmd(argv, &out, &errtext, 240);
    ck_assert_msg(rc == 0,
                  "train.py failed (%d; needs scikit-learn from "
                  "tests/requirements.txt): %s",
                  rc, errtext ? errtext : "");
    printf("%s", out);

    char *mpath = gf_test_path(dir, "digits.json");
    char *weights = gf_test_path(dir, "digits.safetensors");
    fn_rig r;
    fn_rig_open(&r, mpath, weights, NULL);
    const gf_manifest *mf = r.mf;
    ck_assert_str_eq(mf->kind, "mlp");
    gf_err err;

    char *tpath = gf_test_path(dir, "test.safetensors");
    gf_st_file *tf;
    ck_assert_msg(gf_st_open(tpath, &tf, &err) == GF_OK, "%s", err.msg);
    const gf_st_tensor *x = gf_st_find(tf, "x"), *y = gf_st_find(tf, "y");
    ck_assert(x != NULL && y != NULL && x->dtype == GF_DT_F32 && y->dtype == GF_DT_I64);
    int64_t n = x->shape[0], correct = 0;
    ck_assert(n >= 400 && x->shape[1] == 64 && y->shape[0] == n);
    for (int64_t b0 = 0; b0 < n; b0 += mf->max_batch_size) {
        int64_t bn = n - b0 < mf->max_batch_size ? n - b0 : mf->max_batch_size;
        int64_t shape[2] = {bn, 64};
        float *batch = malloc((size_t)bn * 64 * sizeof(float));
        ck_assert_ptr_nonnull(batch);
        memcpy(batch, (const char *)x->data + (size_t)b0 * 64 * sizeof(float),
               (size_t)bn * 64 * sizeof(float));
        gf_tensor in;
        gf_tensor_init(&in, GF_DT_F32, 2, shape, batch, GF_MEM_HOST, -1, NULL);
        gf_fn_outputs o;
        ck_assert_msg(fn_rig_infer(&r, &in, 1, &o, &err) == GF_OK, "%s", err.msg);
        const float *probs = o.t[0].data;
        for (int64_t i = 0; i < bn; i++) {
            int best = 0;
            double sum = 0;
            for (int c = 0; c < 10; c++) {
                sum += probs[i * 10 + c];
                if (probs[i * 10 + c] > probs[i * 10 + best])
                    best = c;
            }
            ck_assert_msg(fabs(sum - 1.0) < 1e-4, "probabilities sum to %g", sum);
            int64_t label;
            memcpy(&label, (const char *)y->data + (size_t)(b0 + i) * 8, 8);
            correct += best == label;
        }
        gf_fn_outputs_free(&o);
        free(batch);
    }
    double acc = (double)correct / (double)n;
    printf("digits: %lld of %lld held-out images right through gpufaas (%.2f%%)\n",
           (long long)correct, (long long)n, 100.0 * acc);
    ck_assert_msg(acc >= 0.95, "held-out accuracy %.4f < 0.95", acc);
    gf_st_close(tf);
    fn_rig_close(&r);
    free(tpath);
    free(weights);
    free(mpath);
    free(out);
    free(errtext);
    free(dir);
    free(script);
}
END_TEST

/* True when `py -c "import sklearn"` succeeds (outside any test, so
 * without Check's helpers). */
static bool have_sklearn(const char *py)
{
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(py, py, "-c", "import sklearn", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void)
{
    const char *py = getenv("GF_PYTHON");
    if (py == NULL) {
        fprintf(stderr, "skipped: GF_PYTHON is not set (meson sets it when python3 is found)\n");
        return GF_TEST_SKIP;
    }
    if (!have_sklearn(py)) {
        fprintf(stderr, "skipped: %s has no scikit-learn (install tests/requirements.txt)\n", py);
        return GF_TEST_SKIP;
    }
    Suite *s = suite_create("functions_digits");
    TCase *tc = tcase_create("digits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_digits_example);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
