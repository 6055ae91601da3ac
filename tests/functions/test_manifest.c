/* Tests for functions/manifest.c: parsing, the canonical form, every
 * rejection naming its field, request tensors against the manifest, and
 * the residency and admission members. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/residency.h"
#include "core/tensor.h"
#include "functions/manifest.h"
#include "manifest_testlib.h"
#include "testutil.h"

START_TEST(test_manifest_parse_and_round_trip)
{
    gf_manifest *m = parse("{\"name\":\"digits.v2\",\"kind\":\"mlp\",\"version\":3," IO_OK
                           ",\"max_batch_size\":32,\"max_queue_delay_us\":500,\"slo_ms\":12.5,"
                           "\"config\":{\"activations\":[\"relu\",\"identity\"],\"softmax\":true}}");
    ck_assert_str_eq(m->name, "digits.v2");
    ck_assert_str_eq(m->kind, "mlp");
    ck_assert_int_eq(m->version, 3);
    ck_assert_uint_eq(m->n_inputs, 1);
    ck_assert_int_eq(m->inputs[0].dtype, GF_DT_F32);
    ck_assert_int_eq(m->inputs[0].shape[0], -1);
    ck_assert_int_eq(m->max_batch_size, 32);
    ck_assert(m->slo_ms == 12.5);
    ck_assert_str_eq(m->config_json, "{\"activations\":[\"relu\",\"identity\"],\"softmax\":true}");
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_manifest_to_json(m, &b), GF_OK);
    gf_manifest *m2 = parse(b.data);
    gf_buf b2;
    gf_buf_init(&b2);
    ck_assert_int_eq(gf_manifest_to_json(m2, &b2), GF_OK);
    ck_assert_str_eq(b.data, b2.data);
    gf_manifest *m3;
    ck_assert_int_eq(gf_manifest_clone(m, &m3, NULL), GF_OK);
    ck_assert_str_eq(m3->config_json, m->config_json);
    ck_assert_int_eq(gf_manifest_input_index(m, "x"), 0);
    ck_assert_int_eq(gf_manifest_output_index(m, "x"), -1);
    gf_buf_deinit(&b);
    gf_buf_deinit(&b2);
    gf_manifest_free(m);
    gf_manifest_free(m2);
    gf_manifest_free(m3);
    /* ignore_weights survives the canonical form */
    m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"ignore_weights\":[\"aux.w\","
              "\"cls.*\"]}");
    ck_assert_int_eq(gf_manifest_clone(m, &m3, NULL), GF_OK);
    ck_assert_uint_eq(m3->n_ignore_weights, 2);
    ck_assert_str_eq(m3->ignore_weights[1], "cls.*");
    ck_assert(gf_manifest_ignores_weight(m3, "aux.w") && !gf_manifest_ignores_weight(m3, "aux.w2"));
    ck_assert(gf_manifest_ignores_weight(m3, "cls.predictions.bias"));
    ck_assert(gf_manifest_ignores_weight(m3, "cls.") && !gf_manifest_ignores_weight(m3, "cls"));
    gf_manifest_free(m3);
    gf_manifest_free(m);
    /* a config number too large for a double, and -0.0, survive the canonical form
     * (the writer used to print C's "inf", which then failed as "not valid JSON") */
    m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"config\":{\"big\":1e400,"
              "\"nz\":-0.0}}");
    ck_assert_str_eq(m->config_json, "{\"big\":1e999,\"nz\":-0.0}");
    gf_buf_init(&b);
    ck_assert_int_eq(gf_manifest_to_json(m, &b), GF_OK);
    m2 = parse(b.data);
    ck_assert_str_eq(m2->config_json, m->config_json);
    gf_buf_deinit(&b);
    gf_manifest_free(m2);
    gf_manifest_free(m);
    /* defaults */
    m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK "}");
    ck_assert_int_eq(m->max_batch_size, 1);
    ck_assert_int_eq(m->max_queue_delay_us, 0);
    ck_assert_int_eq(m->version, 0);
    ck_assert_str_eq(m->config_json, "{}");
    gf_manifest_free(m);
}
END_TEST

START_TEST(test_manifest_rejects)
{
    parse_bad("[]", "must be a JSON object");
    parse_bad("{", "manifest: malformed JSON");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"colour\":1}", "unknown field \"colour\"");
    parse_bad("{\"kind\":\"mlp\"," IO_OK "}", "missing field \"name\"");
    parse_bad("{\"name\":\"a\"," IO_OK "}", "missing field \"kind\"");
    parse_bad("{\"name\":\"../etc\",\"kind\":\"mlp\"," IO_OK "}", "must match");
    parse_bad("{\"name\":\"Upper\",\"kind\":\"mlp\"," IO_OK "}", "must match");
    parse_bad("{\"name\":\"a\",\"name\":\"b\",\"kind\":\"mlp\"," IO_OK "}",
              "field \"name\" appears twice");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\",\"inputs\":[],\"outputs\":[]}",
              "\"inputs\" needs 1 to");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP33\","
              "\"shape\":[1]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1]}]}",
              "unknown datatype \"FP33\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
              "\"shape\":[0]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1]}]}",
              "shape[0] must be a positive integer or -1");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
              "\"shape\":[1]},{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1]}],"
              "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1]}]}",
              "duplicate name \"x\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
              "\"shape\":[1],\"extra\":1}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
              "\"shape\":[1]}]}", "inputs[0]: unknown field \"extra\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"max_batch_size\":0}",
              "\"max_batch_size\" is 0");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"slo_ms\":-1}", "\"slo_ms\" must be");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"config\":[]}",
              "\"config\" must be an object");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"version\":1.5}",
              "\"version\" must be an integer");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"ignore_weights\":\"x\"}",
              "\"ignore_weights\" must be an array");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"ignore_weights\":[]}",
              "\"ignore_weights\" must be an array of 1 to");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"ignore_weights\":[\"a\",\"\"]}",
              "ignore_weights[1] must be a tensor name");
    ck_assert(gf_function_name_valid("a"));
    ck_assert(gf_function_name_valid("resnet-50_v1.2"));
    ck_assert(!gf_function_name_valid(""));
    ck_assert(!gf_function_name_valid(".hidden"));
    ck_assert(!gf_function_name_valid("a/b"));
    char long_name[70];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    ck_assert(!gf_function_name_valid(long_name));
    long_name[63] = '\0';
    ck_assert(gf_function_name_valid(long_name));
}
END_TEST

START_TEST(test_check_tensor)
{
    gf_manifest *m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"max_batch_size\":4}");
    gf_tensor t;
    gf_err err;
    gf_tensor_init(&t, GF_DT_F32, 2, (int64_t[]){3, 4}, NULL, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(gf_manifest_check_tensor(m, &m->inputs[0], &t, &err), GF_OK);
    gf_tensor_init(&t, GF_DT_F32, 2, (int64_t[]){3, 5}, NULL, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(gf_manifest_check_tensor(m, &m->inputs[0], &t, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "shape [3, 5] does not match [-1, 4]") != NULL, "%s", err.msg);
    gf_tensor_init(&t, GF_DT_I64, 2, (int64_t[]){3, 4}, NULL, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(gf_manifest_check_tensor(m, &m->inputs[0], &t, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "datatype INT64, expected FP32") != NULL, "%s", err.msg);
    gf_tensor_init(&t, GF_DT_F32, 2, (int64_t[]){5, 4}, NULL, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(gf_manifest_check_tensor(m, &m->inputs[0], &t, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "exceeds max_batch_size 4") != NULL, "%s", err.msg);
    gf_manifest_free(m);
}
END_TEST

START_TEST(test_residency_and_admission)
{
    gf_manifest *m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"slo_ms\":20,"
                           "\"residency\":{\"pin\":true,\"priority\":\"high\","
                           "\"keep_warm_s\":2.5},\"admission\":{\"max_predicted_slo\":3}}");
    ck_assert(m->residency.pin);
    ck_assert_int_eq(m->residency.priority, GF_PRIORITY_HIGH);
    ck_assert_uint_eq(m->residency.keep_warm_us, 2500000);
    ck_assert(m->admission_max_slo == 3);
    gf_manifest *c;
    ck_assert_int_eq(gf_manifest_clone(m, &c, NULL), GF_OK); /* through the canonical form */
    ck_assert(gf_residency_equal(&c->residency, &m->residency));
    ck_assert(c->admission_max_slo == 3);
    gf_manifest_free(c);
    gf_manifest_free(m);
    /* members default one by one; the defaults are not written out */
    m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"priority\":\"low\"}}");
    ck_assert(!m->residency.pin);
    ck_assert_int_eq(m->residency.priority, GF_PRIORITY_LOW);
    ck_assert_uint_eq(m->residency.keep_warm_us, 0);
    gf_manifest_free(m);
    m = parse("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{}}");
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_manifest_to_json(m, &b), GF_OK);
    ck_assert_ptr_null(strstr(b.data, "residency"));
    ck_assert_ptr_null(strstr(b.data, "admission"));
    gf_buf_deinit(&b);
    gf_manifest_free(m);
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":[]}",
              "residency must be an object");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"pin\":1}}",
              "\"pin\" must be true or false");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"priority\":\"top\"}}",
              "priority 'top' is not low, normal or high");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"keep_warm_s\":-1}}",
              "\"keep_warm_s\" must be a number of seconds in [0, 86400]");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"keep_warm_s\":1e9}}",
              "in [0, 86400]");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"residency\":{\"sticky\":true}}",
              "unknown member \"sticky\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK
              ",\"residency\":{\"pin\":true,\"pin\":false}}", "\"pin\" appears twice");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"admission\":{\"max_predicted_slo\":2}}",
              "\"admission\" needs \"slo_ms\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"slo_ms\":5,"
              "\"admission\":{\"max_predicted_slo\":0.5}}", "must be a number in [1, 1000]");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"slo_ms\":5,"
              "\"admission\":{\"shed\":true}}", "unknown member \"shed\"");
    parse_bad("{\"name\":\"a\",\"kind\":\"mlp\"," IO_OK ",\"slo_ms\":5,\"admission\":true}",
              "\"admission\" must be an object");
}
END_TEST

/* The grammar the manifest and PUT /v1/functions/{name}/residency share. */
START_TEST(test_residency_json)
{
    const char *text = "{\"keep_warm_s\":0.25,\"pin\":false,\"priority\":\"normal\"}";
    gf_json_doc *doc;
    ck_assert_int_eq(gf_json_parse(text, strlen(text), 0, &doc, NULL), GF_OK);
    gf_residency r;
    ck_assert_int_eq(gf_residency_from_json(gf_json_doc_root(doc), &r, NULL), GF_OK);
    gf_json_doc_free(doc);
    ck_assert_uint_eq(r.keep_warm_us, 250000);
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_residency_to_json(&r, &b), GF_OK);
    ck_assert_str_eq(b.data, "{\"pin\":false,\"priority\":\"normal\",\"keep_warm_s\":0.25}");
    gf_buf_deinit(&b);
    gf_priority p;
    ck_assert_int_eq(gf_priority_parse("high", &p, NULL), GF_OK);
    ck_assert_int_eq(p, GF_PRIORITY_HIGH);
    ck_assert_int_eq(gf_priority_parse("HIGH", &p, NULL), GF_ERR_INVALID);
    ck_assert_str_eq(gf_priority_name(GF_PRIORITY_LOW), "low");
    gf_residency bad = {false, GF_PRIORITY_NORMAL, GF_KEEP_WARM_MAX_US + 1};
    gf_err err;
    ck_assert_int_eq(gf_residency_check(&bad, &err), GF_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("functions_manifest");
    TCase *tc = tcase_create("manifest");
    tcase_add_test(tc, test_manifest_parse_and_round_trip);
    tcase_add_test(tc, test_manifest_rejects);
    tcase_add_test(tc, test_check_tensor);
    tcase_add_test(tc, test_residency_and_admission);
    tcase_add_test(tc, test_residency_json);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
