/* Numerics of the built-in kinds (mlp, resnet, bert) against an independent
 * numpy reference (tests/functions/ref_models.py, written from the models'
 * definitions), through the whole path a worker takes: gf_fn_prepare (with
 * batchnorm folding into a derived file), the parameter cache on the cpu
 * backend, gf_fn_infer. Plus the deploy-time validation messages.
 *
 * Tolerances. Every comparison is |ours - ref| <= tol * max|ref| over the
 * output: errors in these networks are absolute errors at the scale of the
 * activations, not relative to each element (a logit near 0 is as exposed as
 * a large one). The reference computes in float64 from exactly the weight
 * values stored, so what remains is our FP32 arithmetic plus, for resnet, the
 * re-rounding of folded weights and biases to the weight dtype:
 *  - mlp and bert, any weight dtype: the kernels widen the stored weights
 *    exactly and compute in FP32; sums of up to 3072 products, two layers,
 *    LayerNorm and softmax in FP32 give ~1e-7..1e-5 of the scale (measured
 *    up to 7.5e-6): tol 1e-4.
 *  - resnet F32: FP32 accumulation over up to 4608 terms through 18-50
 *    layers; measured <= 4e-7: tol 1e-4.
 *  - resnet F16: every folded weight and bias is rounded to F16 once more
 *    (relative error up to 2^-11 each, the precision of the dtype itself);
 *    through 20 convolutions that is measured at 3.5e-4: tol 3e-3.
 *  - resnet BF16: the same rounding at 2^-8; measured 1.6e-3 (resnet-18) and
 *    4.9e-3 (resnet-50): tol 2.5e-2.
 * A wrong layer, a missing bias or a transposed weight gives an error of the
 * order of the scale itself (>= 0.1), far above every tolerance; the measured
 * errors are printed with each case (meson's log) to keep the margins honest.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Run ref_models.py with args (NULL-terminated) into dir. */
static void ref_generate(const char *dir, const char *const *args)
{
    const char *py = getenv("GF_PYTHON"), *src = getenv("GF_SOURCE_ROOT");
    ck_assert_msg(py != NULL && src != NULL, "GF_PYTHON and GF_SOURCE_ROOT must be set (meson)");
    char *script = gf_test_path(src, "tests/functions/ref_models.py");
    char *argv[48];
    int n = 0;
    argv[n++] = (char *)py;
    argv[n++] = script;
    argv[n++] = (char *)"--out";
    argv[n++] = (char *)dir;
    for (; args[n - 4] != NULL; n++) {
        ck_assert_int_lt(n, 46);
        argv[n] = (char *)args[n - 4];
    }
    argv[n] = NULL;
    char *err = NULL;
    int rc = gf_test_run_cmd(argv, NULL, &err, 240);
    ck_assert_msg(rc == 0, "ref_models.py failed (%d): %s", rc, err ? err : "");
    free(err);
    free(script);
}

static gf_manifest *manifest_load(const char *dir)
{
    char *path = gf_test_path(dir, "manifest.json");
    size_t n;
    char *text = gf_test_read_file(path, &n);
    ck_assert_ptr_nonnull(text);
    gf_manifest *m;
    gf_err err;
    ck_assert_msg(gf_manifest_parse(text, n, &m, &err) == GF_OK, "%s", err.msg);
    free(text);
    free(path);
    return m;
}

/* Host tensors of a safetensors file, in manifest order of `io` (names). */
static gf_tensor *tensors_load(gf_st_file *f, const gf_manifest_io *io, size_t n)
{
    gf_tensor *t = calloc(n, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *s = gf_st_find(f, io[i].name);
        ck_assert_msg(s != NULL, "no tensor '%s'", io[i].name);
        ck_assert_int_eq(gf_tensor_init(&t[i], s->dtype, s->rank, s->shape, (void *)s->data,
                                        GF_MEM_HOST, -1, NULL),
                         GF_OK);
    }
    return t;
}

static double st_get(const gf_st_tensor *t, size_t i)
{
    double d;
    memcpy(&d, (const char *)t->data + 8 * i, 8);
    return d;
}

typedef struct run_result {
    double err, scale; /* max |ours - ref| and max |ref| */
} run_result;

/* prepare, cache, infer the case in dir; compare with expected.safetensors. */
static run_result run_case(const char *dir)
{
    run_result res = {0, 0};
    gf_err err;
    char *mpath = gf_test_path(dir, "manifest.json");
    char *weights = gf_test_path(dir, "weights.safetensors");
    char *derived = gf_test_path(dir, "derived.safetensors");
    fn_rig r;
    fn_rig_open(&r, mpath, weights, derived);
    const gf_manifest *mf = r.mf;

    char *inpath = gf_test_path(dir, "inputs.safetensors");
    char *expath = gf_test_path(dir, "expected.safetensors");
    gf_st_file *inf, *exf;
    ck_assert_msg(gf_st_open(inpath, &inf, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_st_open(expath, &exf, &err) == GF_OK, "%s", err.msg);
    gf_tensor *in = tensors_load(inf, mf->inputs, mf->n_inputs);
    gf_fn_outputs out;
    ck_assert_msg(fn_rig_infer(&r, in, mf->n_inputs, &out, &err) == GF_OK, "infer: %s", err.msg);
    ck_assert_uint_eq(out.n, mf->n_outputs);
    for (size_t i = 0; i < out.n; i++) {
        const gf_st_tensor *e = gf_st_find(exf, mf->outputs[i].name);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(out.t[i].dtype, GF_DT_F32);
        ck_assert_msg(gf_shape_equal(out.t[i].rank, out.t[i].shape, e->rank, e->shape),
                      "output '%s' has the wrong shape", mf->outputs[i].name);
        const float *y = out.t[i].data;
        size_t n = e->nbytes / 8;
        for (size_t j = 0; j < n; j++) {
            double ref = st_get(e, j);
            ck_assert_msg(isfinite(y[j]), "output %zu is not finite", j);
            res.err = fmax(res.err, fabs((double)y[j] - ref));
            res.scale = fmax(res.scale, fabs(ref));
        }
    }
    gf_fn_outputs_free(&out);
    free(in);
    gf_st_close(inf);
    gf_st_close(exf);
    fn_rig_close(&r);
    free(inpath);
    free(expath);
    free(mpath);
    free(weights);
    free(derived);
    return res;
}

/* Generate with args, run, check against tol (relative to the output scale). */
static void check_case(const char *label, double tol, const char *const *args)
{
    char *dir = gf_test_path(tmpdir, "case");
    ref_generate(dir, args);
    run_result r = run_case(dir);
    double rel = r.err / (r.scale > 0 ? r.scale : 1.0);
    printf("%-28s max|err| %.3g  scale %.3g  err/scale %.3g  (tol %.1e)\n", label, r.err, r.scale,
           rel, tol);
    fflush(stdout);
    ck_assert_msg(r.scale > 0, "%s: the reference output is all zeros", label);
    ck_assert_msg(rel <= tol, "%s: max error %.3g is %.3g of the output scale %.3g (tol %.1e)",
                  label, r.err, rel, r.scale, tol);
    free(dir);
}

#define TOL_FP32 1e-4 /* mlp and bert with any weight dtype; resnet F32 */
#define TOL_RESNET_F16 3e-3
#define TOL_RESNET_BF16 2.5e-2

#define CASE(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- mlp ---- */

START_TEST(test_mlp)
{
    check_case("mlp F32 b1", TOL_FP32, CASE("--kind", "mlp", "--batch", "1"));
    check_case("mlp F16 b5 softmax", TOL_FP32,
               CASE("--kind", "mlp", "--dtype", "F16", "--batch", "5", "--softmax", "--mlp-acts",
                    "tanh,silu,identity"));
    check_case("mlp BF16 b3", TOL_FP32, CASE("--kind", "mlp", "--dtype", "BF16", "--batch", "3"));
}
END_TEST

/* ---- resnet ---- */

START_TEST(test_resnet18_f32)
{
    check_case("resnet18 F32 b1", TOL_FP32, CASE("--kind", "resnet", "--depth", "18"));
    check_case(
        "resnet18 F32 b3 (depth inferred)", TOL_FP32,
        CASE("--kind", "resnet", "--depth", "18", "--batch", "3", "--infer-depth", "--seed", "2"));
}
END_TEST

START_TEST(test_resnet18_half)
{
    check_case("resnet18 F16 b2", TOL_RESNET_F16,
               CASE("--kind", "resnet", "--depth", "18", "--dtype", "F16", "--batch", "2"));
    check_case("resnet18 BF16 b1", TOL_RESNET_BF16,
               CASE("--kind", "resnet", "--depth", "18", "--dtype", "BF16", "--seed", "3"));
}
END_TEST

START_TEST(test_resnet50)
{
    check_case("resnet50 F32 b2", TOL_FP32,
               CASE("--kind", "resnet", "--depth", "50", "--batch", "2", "--classes", "7"));
    check_case("resnet50 BF16 b1", TOL_RESNET_BF16,
               CASE("--kind", "resnet", "--depth", "50", "--dtype", "BF16", "--size", "32",
                    "--infer-depth"));
}
END_TEST

/* ---- bert ---- */

START_TEST(test_bert_small)
{
    check_case("bert L2 H128 F32 b1", TOL_FP32, CASE("--kind", "bert", "--batch", "1"));
    check_case("bert L2 H128 F32 b3 I32", TOL_FP32,
               CASE("--kind", "bert", "--batch", "3", "--id-dtype", "I32", "--mask-dtype", "I32",
                    "--seed", "4"));
    check_case("bert L2 H128 F16 b3", TOL_FP32,
               CASE("--kind", "bert", "--batch", "3", "--dtype", "F16", "--mask-dtype", "I32"));
    check_case("bert L2 H128 BF16 b2", TOL_FP32,
               CASE("--kind", "bert", "--batch", "2", "--dtype", "BF16"));
}
END_TEST

/* bert-base shapes (hidden 768, 12 heads, intermediate 3072, vocab 30522,
 * 512 positions) with 2 layers instead of 12: every tensor shape of
 * bert-base is exercised, at a sixth of the file size. */
#define BERT_BASE                                                                                  \
    "--kind", "bert", "--hidden", "768", "--heads", "12", "--inter", "3072", "--vocab", "30522",   \
        "--max-pos", "512", "--labels", "2", "--seq", "8", "--batch", "2"

START_TEST(test_bert_base_shapes)
{
    check_case("bert-base-shape L2 F32 b2", TOL_FP32, CASE(BERT_BASE));
    check_case("bert-base-shape L2 F16 b2", TOL_FP32, CASE(BERT_BASE, "--dtype", "F16"));
}
END_TEST

/* ---- validation at deploy time ---- */

/* Copy src to dst without tensor `drop`, and with tensor `reshape` (when
 * not NULL) given a different first dimension. */
static void st_copy_edited(const char *src, const char *dst, const char *drop, const char *reshape)
{
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(src, &f, &err) == GF_OK, "%s", err.msg);
    size_t n = gf_st_count(f), k = 0;
    gf_st_wtensor *wt = calloc(n, sizeof *wt);
    int64_t(*shapes)[GF_MAX_RANK] = calloc(n, sizeof *shapes);
    ck_assert(wt != NULL && shapes != NULL);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        if (drop != NULL && strcmp(t->name, drop) == 0)
            continue;
        memcpy(shapes[k], t->shape, sizeof shapes[k]);
        const void *data = t->data;
        if (reshape != NULL && strcmp(t->name, reshape) == 0) {
            /* [a, b, ...] -> [a/2, 2b, ...]: same bytes, wrong shape */
            ck_assert(t->rank >= 2 && t->shape[0] % 2 == 0);
            shapes[k][0] /= 2;
            shapes[k][1] *= 2;
        }
        wt[k] = (gf_st_wtensor){t->name, t->dtype, t->rank, shapes[k], data};
        k++;
    }
    ck_assert_msg(gf_st_write(dst, wt, k, NULL, 0, &err) == GF_OK, "%s", err.msg);
    free(wt);
    free(shapes);
    gf_st_close(f);
}

/* Validation of the manifest in dir (text replaced when mtext != NULL)
 * against weights must fail with a message containing each of expect[]. */
static void expect_invalid(const char *dir, const char *weights, const char *mtext,
                           const char *const *expect)
{
    gf_manifest *mf;
    gf_err err;
    if (mtext != NULL)
        ck_assert_msg(gf_manifest_parse(mtext, strlen(mtext), &mf, &err) == GF_OK, "%s", err.msg);
    else
        mf = manifest_load(dir);
    const gf_fn_kind *kind = gf_fn_kind_find(mf->kind);
    gf_err_clear(&err);
    ck_assert_msg(gf_fn_validate(kind, mf, weights, &err) != GF_OK,
                  "validation passed (case "
                  "expecting '%s')",
                  expect[0]);
    for (size_t i = 0; expect[i] != NULL; i++)
        ck_assert_msg(strstr(err.msg, expect[i]) != NULL, "message '%s' lacks '%s'", err.msg,
                      expect[i]);
    /* prepare reports the same problem */
    gf_fn_plan *plan;
    char *derived = gf_test_path(tmpdir, "derived-bad.safetensors");
    ck_assert_int_ne(gf_fn_prepare(kind, mf, weights, derived, &plan, &err), GF_OK);
    free(derived);
    gf_manifest_free(mf);
}

START_TEST(test_resnet_validation)
{
    char *dir = gf_test_path(tmpdir, "case");
    ref_generate(dir, CASE("--kind", "resnet", "--depth", "18", "--dtype", "F16"));
    char *good = gf_test_path(dir, "weights.safetensors");
    char *bad = gf_test_path(tmpdir, "bad.safetensors");

    st_copy_edited(good, bad, "layer3.0.bn2.running_var", NULL);
    expect_invalid(dir, bad, NULL, CASE("layer3.0.bn2.running_var"));
    st_copy_edited(good, bad, "layer2.0.downsample.0.weight", NULL);
    expect_invalid(dir, bad, NULL, CASE("layer2.0.downsample.0.weight"));
    st_copy_edited(good, bad, NULL, "layer4.1.conv2.weight");
    expect_invalid(dir, bad, NULL,
                   CASE("layer4.1.conv2.weight", "[256, 1024, 3, 3]", "[512, 512, 3, 3]"));
    st_copy_edited(good, bad, NULL, "fc.weight");
    expect_invalid(dir, bad, NULL, CASE("fc.weight", "[5, 1024]", "[10, 512]"));
    /* a resnet-18 file claimed as resnet-34 names the first missing block */
    const char *m34 = "{\"name\":\"r\",\"kind\":\"resnet\",\"inputs\":[{\"name\":\"input\","
                      "\"datatype\":\"FP32\",\"shape\":[-1,3,64,64]}],\"outputs\":[{\"name\":"
                      "\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,10]}],\"config\":"
                      "{\"depth\":34}}";
    expect_invalid(dir, good, m34, CASE("layer1.2.conv1.weight"));
    /* a grey-scale input; a wrong class count */
    const char *grey = "{\"name\":\"r\",\"kind\":\"resnet\",\"inputs\":[{\"name\":\"input\","
                       "\"datatype\":\"FP32\",\"shape\":[-1,1,64,64]}],\"outputs\":[{\"name\":"
                       "\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,10]}]}";
    expect_invalid(dir, good, grey, CASE("input", "[N, 3, H, W]", "[-1, 1, 64, 64]"));
    const char *classes = "{\"name\":\"r\",\"kind\":\"resnet\",\"inputs\":[{\"name\":\"input\","
                          "\"datatype\":\"FP32\",\"shape\":[-1,3,-1,-1]}],\"outputs\":[{\"name\":"
                          "\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,1000]}]}";
    expect_invalid(dir, good, classes, CASE("logits", "10"));
    const char *unknown = "{\"name\":\"r\",\"kind\":\"resnet\",\"inputs\":[{\"name\":\"input\","
                          "\"datatype\":\"FP32\",\"shape\":[-1,3,-1,-1]}],\"outputs\":[{\"name\":"
                          "\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,10]}],"
                          "\"config\":{\"dept\":18}}";
    expect_invalid(dir, good, unknown, CASE("dept"));
    free(good);
    free(bad);
    free(dir);
}
END_TEST

START_TEST(test_bert_validation)
{
    char *dir = gf_test_path(tmpdir, "case");
    ref_generate(dir, CASE("--kind", "bert", "--dtype", "BF16"));
    char *good = gf_test_path(dir, "weights.safetensors");
    char *bad = gf_test_path(tmpdir, "bad.safetensors");
    st_copy_edited(good, bad, "bert.encoder.layer.1.output.LayerNorm.bias", NULL);
    expect_invalid(dir, bad, NULL, CASE("bert.encoder.layer.1.output.LayerNorm.bias"));
    st_copy_edited(good, bad, NULL, "bert.encoder.layer.0.intermediate.dense.weight");
    expect_invalid(
        dir, bad, NULL,
        CASE("bert.encoder.layer.0.intermediate.dense.weight", "[256, 256]", "[512, 128]"));
    st_copy_edited(good, bad, "classifier.weight", NULL);
    expect_invalid(dir, bad, NULL, CASE("classifier.weight"));
    const char *io = "\"outputs\":[{\"name\":\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,3]}]";
    char m[1024];
    snprintf(m, sizeof m,
             "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"ids\","
             "\"datatype\":\"INT64\",\"shape\":[-1,-1]}],%s}",
             io);
    expect_invalid(dir, good, m, CASE("ids", "input_ids"));
    snprintf(m, sizeof m,
             "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
             "\"datatype\":\"FP32\",\"shape\":[-1,-1]}],%s}",
             io);
    expect_invalid(dir, good, m, CASE("input_ids", "INT32 or INT64"));
    snprintf(m, sizeof m,
             "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
             "\"datatype\":\"INT64\",\"shape\":[-1,100]}],%s}",
             io);
    expect_invalid(dir, good, m, CASE("max_position_embeddings"));
    snprintf(m, sizeof m,
             "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
             "\"datatype\":\"INT64\",\"shape\":[-1,-1]}],%s,\"config\":{\"num_hidden_layers\":1}}",
             io);
    expect_invalid(dir, good, m, CASE("num_hidden_layers", "bert.encoder.layer.1."));
    snprintf(m, sizeof m,
             "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
             "\"datatype\":\"INT64\",\"shape\":[-1,-1]}],%s,\"config\":{\"num_attention_heads\":"
             "3}}",
             io);
    expect_invalid(dir, good, m, CASE("num_attention_heads"));
    snprintf(
        m, sizeof m,
        "{\"name\":\"b\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
        "\"datatype\":\"INT64\",\"shape\":[-1,-1]}],%s,\"config\":{\"hidden_act\":\"swiglu\"}}",
        io);
    expect_invalid(dir, good, m, CASE("hidden_act"));
    free(good);
    free(bad);
    free(dir);
}
END_TEST

/* An out-of-range token id is an error naming the index, not a crash. */
START_TEST(test_bert_bad_token)
{
    char *dir = gf_test_path(tmpdir, "case");
    ref_generate(dir, CASE("--kind", "bert", "--batch", "1", "--id-dtype", "I32"));
    char *mpath = gf_test_path(dir, "manifest.json");
    char *weights = gf_test_path(dir, "weights.safetensors");
    fn_rig r;
    fn_rig_open(&r, mpath, weights, NULL);
    int32_t ids[4] = {1, 2, 5000, 3};
    int64_t mask[4] = {1, 1, 1, 1};
    int64_t shape[2] = {1, 4};
    gf_tensor in[2];
    gf_tensor_init(&in[0], GF_DT_I32, 2, shape, ids, GF_MEM_HOST, -1, NULL);
    gf_tensor_init(&in[1], GF_DT_I64, 2, shape, mask, GF_MEM_HOST, -1, NULL);
    gf_fn_outputs out;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_eq(fn_rig_infer(&r, in, 2, &out, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "5000") != NULL, "message '%s' lacks the index", err.msg);
    fn_rig_close(&r);
    free(mpath);
    free(weights);
    free(dir);
}
END_TEST

static Suite *kinds_suite(void)
{
    Suite *s = suite_create("functions_kinds");
    struct {
        const char *name;
        const TTest *fn;
    } tests[] = {
        {"mlp", test_mlp},
        {"resnet18_f32", test_resnet18_f32},
        {"resnet18_half", test_resnet18_half},
        {"resnet50", test_resnet50},
        {"bert_small", test_bert_small},
        {"bert_base_shapes", test_bert_base_shapes},
        {"resnet_validation", test_resnet_validation},
        {"bert_validation", test_bert_validation},
        {"bert_bad_token", test_bert_bad_token},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, tests[i].fn);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return gf_test_run_suite(kinds_suite());
}
