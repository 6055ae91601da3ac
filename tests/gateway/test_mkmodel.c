/* Tests for `gpufaas mkmodel`: the real binary writes weights and a manifest
 * that validate as a deploy validates them, that run through the kind, whose
 * parameter counts equal the published ones of the models they imitate, and
 * that come out the same for the same seed; bad arguments get clear errors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
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

/* Run gpufaas mkmodel with args (NULL-terminated) from tmpdir-relative
 * paths; returns the exit status. */
static int mk(const char *const *args, char **out, char **err)
{
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)gf_test_prog("GF_GPUFAAS");
    argv[n++] = (char *)"mkmodel";
    for (; args[n - 2] != NULL; n++) {
        ck_assert_int_lt(n, 39);
        argv[n] = (char *)args[n - 2];
    }
    argv[n] = NULL;
    return gf_test_run_cmd(argv, out, err, 120);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* mk must succeed; returns nothing, frees its output. */
static void mk_ok(const char *const *args)
{
    char *out, *err;
    int rc = mk(args, &out, &err);
    ck_assert_msg(rc == 0, "mkmodel %s failed (%d): %s", args[0], rc, err);
    free(out);
    free(err);
}

/* mk must fail with status `want` and a message containing `expect`. */
static void mk_fails(const char *const *args, int want, const char *expect)
{
    char *out, *err;
    int rc = mk(args, &out, &err);
    ck_assert_msg(rc == want, "mkmodel %s %s: status %d, expected %d (%s)", args[0],
                  args[1] ? args[1] : "", rc, want, err);
    ck_assert_msg(strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
    free(out);
    free(err);
}

/* Parameters in the file, not counting batchnorm running statistics (which
 * PyTorch keeps as buffers, not parameters). */
static uint64_t count_params(const char *path, gf_dtype want_dtype, size_t *ntensors)
{
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(path, &f, &err) == GF_OK, "%s", err.msg);
    uint64_t n = 0;
    for (size_t i = 0; i < gf_st_count(f); i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        ck_assert_int_eq(t->dtype, want_dtype);
        size_t len = strlen(t->name);
        if (len > 13 && (strcmp(t->name + len - 13, ".running_mean") == 0 ||
                         strcmp(t->name + len - 12, ".running_var") == 0))
            continue;
        n += t->nbytes / gf_dtype_size(t->dtype);
    }
    *ntensors = gf_st_count(f);
    gf_st_close(f);
    return n;
}

/* Validate (as a deploy) and run one batch through the kind; outputs finite. */
static void run_generated(const char *weights, const char *manifest, const gf_tensor *in,
                          size_t n_in, int64_t rows, int64_t cols)
{
    char *derived = gf_test_path(tmpdir, "derived.safetensors");
    fn_rig r;
    fn_rig_open(&r, manifest, weights, derived);
    gf_fn_outputs out;
    gf_err err;
    ck_assert_msg(fn_rig_infer(&r, in, n_in, &out, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(out.t[0].rank, 2);
    ck_assert_int_eq(out.t[0].shape[0], rows);
    ck_assert_int_eq(out.t[0].shape[1], cols);
    const float *y = out.t[0].data;
    for (int64_t i = 0; i < rows * cols; i++)
        ck_assert_msg(isfinite(y[i]), "output %lld is %g", (long long)i, y[i]);
    gf_fn_outputs_free(&out);
    fn_rig_close(&r);
    free(derived);
}

START_TEST(test_help)
{
    char *out, *err;
    ck_assert_int_eq(mk(ARGS("--help"), &out, &err), 0);
    ck_assert_msg(strstr(out, "usage: gpufaas mkmodel KIND") && strstr(out, "resnet50") &&
                      strstr(out, "--intermediate"),
                  "%s", out);
    free(out);
    free(err);
    char *argv[] = {(char *)gf_test_prog("GF_GPUFAAS"), (char *)"--help", NULL};
    ck_assert_int_eq(gf_test_run_cmd(argv, &out, &err, 30), 0);
    ck_assert_msg(strstr(out, "mkmodel") != NULL, "%s", out);
    free(out);
    free(err);
}
END_TEST

/* torchvision's and Hugging Face's published parameter counts. */
START_TEST(test_published_sizes)
{
    char *r18 = gf_test_path(tmpdir, "r18.safetensors");
    char *r50 = gf_test_path(tmpdir, "r50.safetensors");
    char *bb = gf_test_path(tmpdir, "bert-base.safetensors");
    size_t nt;
    mk_ok(ARGS("resnet18", r18));
    ck_assert_uint_eq(count_params(r18, GF_DT_F32, &nt), 11689512u); /* resnet18() */
    mk_ok(ARGS("resnet50", "--dtype", "F16", r50));
    ck_assert_uint_eq(count_params(r50, GF_DT_F16, &nt), 25557032u); /* resnet50() */
    ck_assert_uint_eq(nt, 267);
    /* BertForSequenceClassification.from_pretrained("bert-base-uncased"), 2 labels */
    mk_ok(ARGS("bert", "--dtype", "BF16", bb));
    ck_assert_uint_eq(count_params(bb, GF_DT_BF16, &nt), 109483778u);
    ck_assert_uint_eq(nt, 201);
    /* the default manifest sits next to the weights, named after them */
    char *mpath = gf_test_path(tmpdir, "bert-base.json");
    size_t n;
    char *text = gf_test_read_file(mpath, &n);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "\"name\": \"bert-base\"") && strstr(text, "\"kind\": \"bert\""),
                  "%s", text);
    free(text);
    free(mpath);
    free(r18);
    free(r50);
    free(bb);
}
END_TEST

START_TEST(test_generated_models_run)
{
    /* mlp */
    char *w = gf_test_path(tmpdir, "m.safetensors"), *m = gf_test_path(tmpdir, "m.json");
    mk_ok(ARGS("mlp", "--sizes", "8,16,12,4", "--activation", "gelu", "--softmax", "--dtype",
               "BF16", w));
    float x[3 * 8];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i / 10.0f - 1.0f;
    gf_tensor in[2];
    gf_tensor_init(&in[0], GF_DT_F32, 2, (int64_t[]){3, 8}, x, GF_MEM_HOST, -1, NULL);
    run_generated(w, m, in, 1, 3, 4);
    free(w);
    free(m);

    /* resnet18 with 5 classes at 32x32, manifest elsewhere, custom name */
    w = gf_test_path(tmpdir, "r.safetensors");
    m = gf_test_path(tmpdir, "manifests-r.json");
    mk_ok(ARGS("resnet18", "--classes", "5", "--image", "32", "--dtype", "F16", "--manifest", m,
               "--name", "tiny-resnet", w));
    size_t n;
    char *text = gf_test_read_file(m, &n);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "\"tiny-resnet\"") && strstr(text, "[-1, 3, 32, 32]"), "%s", text);
    free(text);
    float *img = calloc(2 * 3 * 32 * 32, sizeof(float));
    ck_assert_ptr_nonnull(img);
    for (int i = 0; i < 2 * 3 * 32 * 32; i++)
        img[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    gf_tensor_init(&in[0], GF_DT_F32, 4, (int64_t[]){2, 3, 32, 32}, img, GF_MEM_HOST, -1, NULL);
    run_generated(w, m, in, 1, 2, 5);
    free(img);
    free(w);
    free(m);

    /* a small bert with a fixed sequence length */
    w = gf_test_path(tmpdir, "b.safetensors");
    m = gf_test_path(tmpdir, "b.json");
    mk_ok(ARGS("bert", "--layers", "2", "--hidden", "64", "--heads", "4", "--intermediate", "128",
               "--vocab", "100", "--max-positions", "32", "--labels", "3", "--seq", "6", w));
    int64_t ids[2 * 6] = {1, 5, 9, 13, 2, 0, 1, 7, 7, 99, 0, 0};
    int64_t mask[2 * 6] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    gf_tensor_init(&in[0], GF_DT_I64, 2, (int64_t[]){2, 6}, ids, GF_MEM_HOST, -1, NULL);
    gf_tensor_init(&in[1], GF_DT_I64, 2, (int64_t[]){2, 6}, mask, GF_MEM_HOST, -1, NULL);
    run_generated(w, m, in, 2, 2, 3);
    free(w);
    free(m);
}
END_TEST

START_TEST(test_deterministic)
{
    char *a = gf_test_path(tmpdir, "a.safetensors"), *b = gf_test_path(tmpdir, "b.safetensors");
    char *c = gf_test_path(tmpdir, "c.safetensors");
    mk_ok(ARGS("mlp", "--sizes", "16,8", "--seed", "7", a));
    mk_ok(ARGS("mlp", "--sizes", "16,8", "--seed", "7", b));
    mk_ok(ARGS("mlp", "--sizes", "16,8", "--seed", "8", c));
    size_t na, nb, nc;
    char *da = gf_test_read_file(a, &na), *db = gf_test_read_file(b, &nb);
    char *dc = gf_test_read_file(c, &nc);
    ck_assert(da != NULL && db != NULL && dc != NULL);
    ck_assert(na == nb && memcmp(da, db, na) == 0);
    ck_assert(na == nc && memcmp(da, dc, na) != 0);
    free(da);
    free(db);
    free(dc);
    free(a);
    free(b);
    free(c);
}
END_TEST

START_TEST(test_errors)
{
    char *w = gf_test_path(tmpdir, "x.safetensors");
    mk_fails(ARGS("vgg16", w), 2, "unknown kind 'vgg16'");
    mk_fails(ARGS("resnet50"), 2, "no output file");
    mk_fails(ARGS("bert", "--classes", "3", w), 2, "--classes does not apply to kind bert");
    mk_fails(ARGS("mlp", "--dtype", "F64", w), 2, "--dtype must be FP32, FP16 or BF16");
    mk_fails(ARGS("mlp", "--sizes", "8", w), 2, "--sizes");
    mk_fails(ARGS("mlp", "--sizes", "8,0,3", w), 2, "--sizes");
    mk_fails(ARGS("mlp", "--activation", "swish", w), 2, "unknown --activation 'swish'");
    mk_fails(ARGS("bert", "--hidden", "100", "--heads", "3", w), 2, "not a multiple");
    mk_fails(ARGS("bert", "--seq", "600", w), 2, "exceeds --max-positions");
    mk_fails(ARGS("resnet18", "--classes", "abc", w), 2, "--classes must be an integer");
    mk_fails(ARGS("resnet18", "--frobnicate", "1", w), 2, "unknown option '--frobnicate'");
    mk_fails(ARGS("resnet18", "--classes"), 2, "needs a value");
    mk_fails(ARGS("mlp", "--name", "Bad Name", w), 2, "--name 'Bad Name'");
    mk_fails(ARGS("mlp", "/nonexistent-dir/x.safetensors"), 1, "/nonexistent-dir/x");
    free(w);
}
END_TEST

static Suite *mkmodel_suite(void)
{
    Suite *s = suite_create("gateway_mkmodel");
    TCase *tc = tcase_create("mkmodel");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_published_sizes);
    tcase_add_test(tc, test_generated_models_run);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return gf_test_run_suite(mkmodel_suite());
}
