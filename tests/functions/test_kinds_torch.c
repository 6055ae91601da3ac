/* The built-in kinds on files PyTorch itself wrote (tests/fixtures/torch,
 * made by make_fixtures.py with torch and transformers; committed, so no
 * test run needs torch): state_dicts saved with safetensors.torch.save_file
 * and save_pretrained, checked against torch's own outputs for the same
 * inputs. And what a deploy of a torch.save or ONNX file says.
 *
 * Tolerance: torch computes in FP32 as we do, in another order; measured
 * differences are below 1e-6 of the output scale: tol 1e-5. Serving these
 * models without their BatchNorm1d or LayerNorm (as kind mlp once did) is
 * wrong by half the scale. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "functions/runtime.h"
#include "kinds_testlib.h"
#include "testutil.h"

#define TOL 1e-5

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

static char *write_manifest(const char *text)
{
    char *p = gf_test_path(tmpdir, "manifest.json");
    gf_test_write_file(p, text, strlen(text));
    return p;
}

#define MLP_MANIFEST(out, cfg)                                                                     \
    "{\"name\":\"torch-mlp\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","  \
    "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1," out     \
    "]}],\"max_batch_size\":8,\"config\":" cfg "}"

/* Deploy fixture `name` (name.safetensors, name.io.safetensors) with the
 * manifest text and compare with torch's y. */
static void check_mlp(const char *label, const char *name, const char *manifest)
{
    char file[128], io[128];
    snprintf(file, sizeof file, "torch/%s.safetensors", name);
    snprintf(io, sizeof io, "torch/%s.io.safetensors", name);
    char *w = gf_test_fixture(file), *iop = gf_test_fixture(io), *mp = write_manifest(manifest);
    char *derived = gf_test_path(tmpdir, "derived.safetensors");
    fn_result r = fn_compare(mp, w, derived, iop, iop);
    double rel = r.err / (r.scale > 0 ? r.scale : 1);
    printf("%-40s max|err| %.3g  scale %.3g  err/scale %.3g  (tol %.0e)\n", label, r.err, r.scale,
           rel, TOL);
    fflush(stdout);
    ck_assert_msg(r.scale > 0.1, "%s: torch's output is near zero", label);
    ck_assert_msg(rel <= TOL, "%s: %.3g of the output scale (tol %.0e)", label, rel, TOL);
    free(w);
    free(iop);
    free(mp);
    free(derived);
}

START_TEST(test_mlp_torch)
{
    /* issue 14's Sequential(Linear(4,8), BatchNorm1d(8), ReLU(), Linear(8,2)),
     * with no config, and described by [str(m) for m in model] */
    check_mlp("Linear-BN-ReLU-Linear (no config)", "mlp_bn", MLP_MANIFEST("2", "{}"));
    check_mlp("Linear-BN-ReLU-Linear (layers = str)", "mlp_bn",
              MLP_MANIFEST("2", "{\"layers\":[\"Linear(in_features=4, out_features=8, "
                                "bias=True)\",\"BatchNorm1d(8, eps=1e-05, momentum=0.1, "
                                "affine=True, track_running_stats=True)\",\"ReLU()\",\"Linear("
                                "in_features=8, out_features=2, bias=True)\"]}"));
    check_mlp("same, model.half()", "mlp_bn_f16", MLP_MANIFEST("2", "{}"));
    check_mlp("Linear-ReLU-BN-Linear", "mlp_relu_bn", MLP_MANIFEST("2", "{}"));
    check_mlp("Linear-LayerNorm-ReLU-Linear", "mlp_ln",
              MLP_MANIFEST("2", "{\"layers\":[\"Linear\",\"LayerNorm\",\"ReLU\",\"Linear\"]}"));
    check_mlp("ReLU-Linear-ReLU-Linear", "mlp_lead_relu",
              MLP_MANIFEST("2", "{\"layers\":[\"ReLU\",\"Linear\",\"ReLU\",\"Linear\"]}"));
}
END_TEST

/* Without the description they need, they are refused, not served wrongly. */
START_TEST(test_mlp_torch_refused)
{
    char *w = gf_test_fixture("torch/mlp_ln.safetensors");
    fn_expect_invalid(NULL, MLP_MANIFEST("2", "{}"), w, tmpdir,
                      (const char *const[]){"a LayerNorm?", "\"layers\"", NULL});
    free(w);
    w = gf_test_fixture("torch/mlp_lead_relu.safetensors");
    fn_expect_invalid(NULL, MLP_MANIFEST("2", "{}"), w, tmpdir,
                      (const char *const[]){"module 0 of the Sequential has no tensors", NULL});
    free(w);
}
END_TEST

/* BertForSequenceClassification with 4 heads of 4, from save_pretrained:
 * with its config.json pasted into the manifest it matches torch; without,
 * it is refused (hidden/64 heads would be wrong). */
START_TEST(test_bert_torch)
{
    char *cfgp = gf_test_fixture("torch/bert4/config.json"),
         *w = gf_test_fixture("torch/bert4/model.safetensors");
    char *iop = gf_test_fixture("torch/bert4.io.safetensors");
    size_t n;
    char *cfg = gf_test_read_file(cfgp, &n);
    ck_assert_ptr_nonnull(cfg);
    const char *head = "{\"name\":\"bert4\",\"kind\":\"bert\",\"inputs\":[{\"name\":\"input_ids\","
                       "\"datatype\":\"INT64\",\"shape\":[-1,-1]},{\"name\":\"attention_mask\","
                       "\"datatype\":\"INT64\",\"shape\":[-1,-1]}],\"outputs\":[{\"name\":"
                       "\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,3]}],\"max_batch_size\":4";
    size_t cap = strlen(head) + n + 64;
    char *m = malloc(cap);
    ck_assert_ptr_nonnull(m);
    snprintf(m, cap, "%s,\"config\":%s}", head, cfg);
    char *mp = write_manifest(m);
    fn_result r = fn_compare(mp, w, NULL, iop, iop);
    double rel = r.err / (r.scale > 0 ? r.scale : 1);
    printf("%-40s max|err| %.3g  scale %.3g  err/scale %.3g  (tol %.0e)\n",
           "BERT 4 heads (config.json)", r.err, r.scale, rel, TOL);
    ck_assert_msg(r.scale > 0.1 && rel <= TOL, "bert4: %.3g of the scale %.3g", rel, r.scale);
    snprintf(m, cap, "%s}", head);
    fn_expect_invalid(NULL, m, w, tmpdir,
                      (const char *const[]){"set \"num_attention_heads\"", NULL});
    free(m);
    free(mp);
    free(cfg);
    free(cfgp);
    free(w);
    free(iop);
}
END_TEST

/* A torch.save checkpoint, a legacy pickle or an ONNX model sent as weights
 * says what it is and what to do, through the deploy-time validation. */
START_TEST(test_not_safetensors)
{
    const struct {
        const char *file, *expect;
    } cases[] = {
        {"torch/mlp_bn.pt", "it is a PyTorch checkpoint (torch.save"},
        {"torch/mlp_bn_legacy.pt", "it is a Python pickle"},
        {"torch/mlp_bn.onnx", "it is an ONNX model"},
        {"torch/arr.npy", "it is a NumPy array"},
    };
    gf_manifest *mf;
    gf_err err;
    const char *text = MLP_MANIFEST("2", "{}");
    ck_assert_int_eq(gf_manifest_parse(text, strlen(text), &mf, &err), GF_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = gf_test_fixture(cases[i].file);
        gf_err_clear(&err);
        ck_assert_int_eq(gf_fn_validate(gf_fn_kind_find("mlp"), mf, p, &err), GF_ERR_FORMAT);
        ck_assert_msg(strstr(err.msg, cases[i].expect), "%s: '%s'", cases[i].file, err.msg);
        if (strstr(cases[i].file, ".onnx"))
            ck_assert_msg(strstr(err.msg, gf_fn_kind_find("onnx") ? "the part \"model\""
                                                                  : "does not run ONNX models yet"),
                          "%s", err.msg);
        free(p);
    }
    gf_manifest_free(mf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("functions_kinds_torch");
    TCase *tc = tcase_create("torch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mlp_torch);
    tcase_add_test(tc, test_mlp_torch_refused);
    tcase_add_test(tc, test_bert_torch);
    tcase_add_test(tc, test_not_safetensors);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
