/* End-to-end tests of the HTTP front: a real `gpufaas serve` process on a
 * free loopback port, with cpu workers, a real SQLite file and a temporary
 * state directory, driven over HTTP with libcurl. The model and its expected
 * outputs come from the independent numpy reference
 * (tests/functions/ref_models.py). */
#include <check.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/safetensors.h"
#include "hhfixture.h"
#include "testutil.h"

#define TOKEN "s3cret-token"

/* ---- the server process ------------------------------------------------------------ */

static gf_hh_server srv;
static char *test_dir;  /* temporary directory: state (var), serve.log, model files */
static char *model_dir; /* ref_models.py output */

static void dump_log(void)
{
    gf_hh_server_dump_log(&srv, 4000);
}

/* Start gpufaas serve with 2 cpu workers and the extra arguments
 * (NULL-terminated); returns when it prints where it listens. */
static void server_start_args(const char *const *extra)
{
    gf_hf_start(&srv, gf_hf_cpu2, extra, 60);
}

/* SIGTERM, and the exit status (-1: had to be killed after timeout_s). */
static int server_stop_status(int timeout_s)
{
    return gf_hh_server_stop(&srv, timeout_s);
}

static void setup(void)
{
    gf_hf_setup(&srv, &test_dir);
    /* the model and the numpy reference outputs */
    model_dir = gf_test_path(test_dir, "model");
    const char *py = getenv("GF_PYTHON"), *src = getenv("GF_SOURCE_ROOT");
    ck_assert_msg(py != NULL && src != NULL, "GF_PYTHON and GF_SOURCE_ROOT must be set (meson)");
    char *script = gf_test_path(src, "tests/functions/ref_models.py");
    char *argv[] = {(char *)py,  script,       "--kind",   "mlp",        "--batch",       "3",
                    "--softmax", "--mlp-dims", "64,48,10", "--mlp-acts", "relu,identity", "--out",
                    model_dir,   NULL};
    char *err = NULL;
    int rc = gf_test_run_cmd(argv, NULL, &err, 120);
    ck_assert_msg(rc == 0, "ref_models.py failed (%d): %s", rc, err != NULL ? err : "");
    free(err);
    free(script);
}

static void teardown(void)
{
    free(model_dir);
    model_dir = NULL;
    gf_hf_teardown(&srv, &test_dir);
}

/* ---- HTTP ------------------------------------------------------------------------------ */

typedef gf_hh_resp resp;

static void resp_free(resp *r)
{
    gf_hh_resp_free(r);
}

/* method path [headers] [body]; body NULL = none. chunked: send without a
 * Content-Length. */
static long http_ex(const char *method, const char *path, const char *const *headers,
                    const void *body, size_t len, bool chunked, resp *r)
{
    return gf_hh_http(srv.url, method, path, headers, body, len, chunked, r);
}

static long http(const char *method, const char *path, const char *body, resp *r)
{
    return http_ex(method, path, NULL, body, body != NULL ? strlen(body) : 0, false, r);
}

static const char *const auth_hdr[] = {"Authorization: Bearer " TOKEN, NULL};

/* An error answer: the status, {"error": "..."} containing want. */
static void expect_error(long got, resp *r, long want_status, const char *want)
{
    ck_assert_msg(got == want_status, "status %ld, want %ld: %s", got, want_status,
                  r->body.data != NULL ? r->body.data : "");
    char why[512];
    ck_assert_msg(gf_hh_is_json_error(r, want, why, sizeof why), "%s", why);
}

/* POST /v1/functions as curl -F manifest=@... -F weights=@... does. */
static long deploy_files(const char *manifest_path, const char *weights_path, const char *token,
                         resp *r)
{
    return gf_hh_deploy(srv.url, manifest_path, weights_path, token, r);
}

/* Deploy the reference model under name, with max_queue_delay_us set when
 * delay_us >= 0. */
static void deploy_ref_delay(const char *name, long delay_us)
{
    char *mp = gf_test_path(model_dir, "manifest.json");
    size_t n;
    char *m = gf_test_read_file(mp, &n);
    ck_assert_ptr_nonnull(m);
    json_t *j = json_loads(m, 0, NULL);
    json_object_set_new(j, "name", json_string(name));
    if (delay_us >= 0)
        json_object_set_new(j, "max_queue_delay_us", json_integer(delay_us));
    char *named = json_dumps(j, 0);
    char *np = gf_test_path(test_dir, "named.json");
    gf_test_write_file(np, named, strlen(named));
    char *wp = gf_test_path(model_dir, "weights.safetensors");
    resp r;
    long st = deploy_files(np, wp, TOKEN, &r);
    ck_assert_msg(st == 201, "deploy %s: %ld %s", name, st, r.body.data);
    resp_free(&r);
    free(mp), free(m), free(named), free(np), free(wp);
    json_decref(j);
}

static void deploy_ref(const char *name)
{
    deploy_ref_delay(name, -1);
}

/* ---- the reference ------------------------------------------------------------------- */

typedef struct ref {
    gf_st_file *in, *exp;
    const gf_st_tensor *x; /* F32 [3, 64] */
    const gf_st_tensor *y; /* F64 [3, 10] */
} ref;

static void ref_open(ref *rf)
{
    char *ip = gf_test_path(model_dir, "inputs.safetensors");
    char *ep = gf_test_path(model_dir, "expected.safetensors");
    gf_err err;
    ck_assert(gf_st_open(ip, &rf->in, &err) == GF_OK);
    ck_assert(gf_st_open(ep, &rf->exp, &err) == GF_OK);
    rf->x = gf_st_find(rf->in, "x");
    rf->y = gf_st_find(rf->exp, "y");
    ck_assert(rf->x != NULL && rf->y != NULL);
    free(ip), free(ep);
}

static void ref_close(ref *rf)
{
    gf_st_close(rf->in);
    gf_st_close(rf->exp);
}

static float ref_x(const ref *rf, size_t i)
{
    float v;
    memcpy(&v, (const char *)rf->x->data + 4 * i, 4);
    return v;
}

static double ref_y(const ref *rf, size_t i)
{
    double v;
    memcpy(&v, (const char *)rf->y->data + 8 * i, 8);
    return v;
}

static bool close_enough(double got, double want)
{
    return fabs(got - want) <= 1e-4 * (1.0 + fabs(want));
}

/* The v2 / v1 JSON request for the reference input (rows of x). */
static char *ref_json_request(const ref *rf, bool nested, const char *extra)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_buf_printf(&b,
                  "{%s\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3,64],"
                  "\"data\":[",
                  extra != NULL ? extra : "");
    for (size_t i = 0; i < 3 * 64; i++) {
        if (nested && i % 64 == 0)
            gf_buf_printf(&b, "%s[", i > 0 ? "," : "");
        else if (i > 0)
            gf_buf_append_str(&b, ",");
        gf_buf_printf(&b, "%.9g", (double)ref_x(rf, i));
        if (nested && i % 64 == 63)
            gf_buf_append_str(&b, "]");
    }
    gf_buf_append_str(&b, "]}]}");
    size_t len;
    return gf_buf_steal(&b, &len);
}

/* The outputs in a JSON answer match the reference. */
static void check_json_outputs(const ref *rf, const char *body, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    ck_assert_msg(j != NULL, "%s: %.300s", je.text, body);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "name")), "y");
    ck_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "FP32");
    json_t *shape = json_object_get(o, "shape");
    ck_assert_int_eq(json_integer_value(json_array_get(shape, 0)), 3);
    ck_assert_int_eq(json_integer_value(json_array_get(shape, 1)), 10);
    json_t *data = json_object_get(o, "data");
    ck_assert_uint_eq(json_array_size(data), 30);
    for (size_t i = 0; i < 30; i++) {
        double got = json_number_value(json_array_get(data, i));
        ck_assert_msg(close_enough(got, ref_y(rf, i)), "y[%zu] = %.9g, reference %.9g", i, got,
                      ref_y(rf, i));
    }
    json_decref(j);
}

/* The binary-extension request for the reference input. */
static char *ref_binary_request(const ref *rf, bool binary_out, size_t *len, char hdr[64])
{
    char json[512];
    int jl = snprintf(json, sizeof json,
                      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3,64],"
                      "\"parameters\":{\"binary_data_size\":%zu}}]%s}",
                      rf->x->nbytes,
                      binary_out ? ",\"outputs\":[{\"name\":\"y\",\"parameters\":"
                                   "{\"binary_data\":true}}]"
                                 : "");
    char *b = malloc((size_t)jl + rf->x->nbytes);
    memcpy(b, json, (size_t)jl);
    memcpy(b + jl, rf->x->data, rf->x->nbytes);
    *len = (size_t)jl + rf->x->nbytes;
    snprintf(hdr, 64, "Inference-Header-Content-Length: %d", jl);
    return b;
}

static void check_binary_outputs(const ref *rf, resp *r)
{
    ck_assert_msg(r->ihcl[0] != '\0', "no Inference-Header-Content-Length in the answer");
    ck_assert_str_eq(r->ctype, "application/octet-stream");
    size_t hl = (size_t)strtoull(r->ihcl, NULL, 10);
    ck_assert_uint_le(hl, r->body.len);
    json_t *j = json_loadb(r->body.data, hl, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    ck_assert_ptr_null(json_object_get(o, "data"));
    json_int_t sz =
        json_integer_value(json_object_get(json_object_get(o, "parameters"), "binary_data_size"));
    ck_assert_int_eq(sz, 120);
    ck_assert_uint_eq(r->body.len, hl + 120);
    for (size_t i = 0; i < 30; i++) {
        float v;
        memcpy(&v, r->body.data + hl + 4 * i, 4);
        ck_assert_msg(close_enough(v, ref_y(rf, i)), "y[%zu] = %.9g, reference %.9g", i, (double)v,
                      ref_y(rf, i));
    }
    json_decref(j);
}

/* ---- tests ---------------------------------------------------------------------------- */

START_TEST(test_deploy_and_invoke)
{
    const char *extra[] = {"--admin-token", TOKEN, NULL};
    server_start_args(extra);
    ref rf;
    ref_open(&rf);
    resp r;

    ck_assert_int_eq(http("GET", "/v2/health/live", NULL, &r), 200);
    ck_assert_uint_eq(r.body.len, 0);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2/health/ready", NULL, &r), 200);
    ck_assert_uint_eq(r.body.len, 0);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2", NULL, &r), 200);
    ck_assert_msg(strstr(r.body.data, "binary_tensor_data") != NULL, "%s", r.body.data);
    resp_free(&r);

    /* deploy as curl -F does: with the token only */
    char *mp = gf_test_path(model_dir, "manifest.json");
    char *wp = gf_test_path(model_dir, "weights.safetensors");
    expect_error(deploy_files(mp, wp, NULL, &r), &r, 401, "needs the admin token");
    resp_free(&r);
    expect_error(deploy_files(mp, wp, "wrong", &r), &r, 401, "bad admin token");
    resp_free(&r);
    ck_assert_int_eq(deploy_files(mp, wp, TOKEN, &r), 201);
    ck_assert_str_eq(r.location, "/v1/functions/ref-mlp");
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "ref-mlp");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 1);
    json_decref(j);
    resp_free(&r);

    ck_assert_int_eq(http("GET", "/v1/functions", NULL, &r), 200);
    ck_assert_msg(strstr(r.body.data, "\"ref-mlp\"") != NULL, "%s", r.body.data);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v1/functions/ref-mlp", NULL, &r), 200);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2/models/ref-mlp", NULL, &r), 200);
    j = json_loadb(r.body.data, r.body.len, 0, NULL);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "versions"), 0)), "1");
    json_decref(j);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2/models/ref-mlp/ready", NULL, &r), 200);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2/models/ref-mlp/versions/1/ready", NULL, &r), 200);
    resp_free(&r);

    /* inference: v2 JSON flat and nested, v1, a pinned version, binary in and out */
    for (int nested = 0; nested < 2; nested++) {
        char *body = ref_json_request(&rf, nested, "\"id\":\"r1\",");
        ck_assert_int_eq(http("POST", "/v2/models/ref-mlp/infer", body, &r), 200);
        ck_assert_str_eq(r.ctype, "application/json");
        check_json_outputs(&rf, r.body.data, r.body.len);
        ck_assert_msg(strstr(r.body.data, "\"id\":\"r1\"") &&
                          strstr(r.body.data, "\"model_name\":\"ref-mlp\"") &&
                          strstr(r.body.data, "\"model_version\":\"1\""),
                      "%s", r.body.data);
        resp_free(&r);
        ck_assert_int_eq(http("POST", "/v1/functions/ref-mlp/invoke", body, &r), 200);
        check_json_outputs(&rf, r.body.data, r.body.len);
        ck_assert_msg(strstr(r.body.data, "\"timing_us\"") != NULL, "%s", r.body.data);
        resp_free(&r);
        ck_assert_int_eq(http("POST", "/v2/models/ref-mlp/versions/1/infer", body, &r), 200);
        check_json_outputs(&rf, r.body.data, r.body.len);
        resp_free(&r);
        expect_error(http("POST", "/v2/models/ref-mlp/versions/7/infer", body, &r), &r, 404, "7");
        resp_free(&r);
        free(body);
    }
    size_t blen;
    char hdr[64];
    char *bin = ref_binary_request(&rf, true, &blen, hdr);
    const char *bh[] = {hdr, NULL};
    ck_assert_int_eq(http_ex("POST", "/v2/models/ref-mlp/infer", bh, bin, blen, false, &r), 200);
    check_binary_outputs(&rf, &r);
    resp_free(&r);
    free(bin);
    bin = ref_binary_request(&rf, false, &blen, hdr); /* binary in, JSON out */
    ck_assert_int_eq(http_ex("POST", "/v2/models/ref-mlp/infer", bh, bin, blen, false, &r), 200);
    ck_assert_str_eq(r.ihcl, "");
    check_json_outputs(&rf, r.body.data, r.body.len);
    resp_free(&r);
    free(bin);

    /* metrics, workers, placements */
    ck_assert_int_eq(http("GET", "/metrics", NULL, &r), 200);
    ck_assert_str_eq(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_msg(strstr(r.body.data,
                         "gpufaas_requests_total{function=\"ref-mlp\",version=\"1\",code=\"200\"}"),
                  "%.2000s", r.body.data);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v1/workers", NULL, &r), 200);
    j = json_loadb(r.body.data, r.body.len, 0, NULL);
    ck_assert_msg(j != NULL, "%s", r.body.data);
    json_decref(j);
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v1/placements", NULL, &r), 200);
    ck_assert_msg(strstr(r.body.data, "ref-mlp") != NULL, "%s", r.body.data);
    resp_free(&r);

    /* the repository extension */
    ck_assert_int_eq(http("POST", "/v2/repository/index", NULL, &r), 200);
    ck_assert_msg(strstr(r.body.data, "\"READY\"") != NULL, "%s", r.body.data);
    resp_free(&r);
    ck_assert_int_eq(http("POST", "/v2/repository/index", "{\"ready\":true}", &r), 200);
    ck_assert_msg(strstr(r.body.data, "ref-mlp") != NULL, "%s", r.body.data);
    resp_free(&r);
    expect_error(http("POST", "/v2/repository/models/ref-mlp/unload", "{}", &r), &r, 401,
                 "admin token");
    resp_free(&r);
    ck_assert_int_eq(http_ex("POST", "/v2/repository/models/ref-mlp/unload", auth_hdr,
                             "{\"parameters\":{\"unload_dependents\":false}}", 42, false, &r),
                     200);
    resp_free(&r);
    ck_assert_int_eq(
        http_ex("POST", "/v2/repository/models/ref-mlp/load", auth_hdr, "{}", 2, false, &r), 200);
    resp_free(&r);
    char *body = ref_json_request(&rf, false, NULL);
    ck_assert_int_eq(http("POST", "/v2/models/ref-mlp/infer", body, &r), 200);
    check_json_outputs(&rf, r.body.data, r.body.len);
    resp_free(&r);

    /* the SQLite file: the version, and invocations once the store commits */
    char *db = gf_test_path(srv.state, "gpufaas.db");
    sqlite3 *s;
    ck_assert_int_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(s, 5000);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(s, "SELECT count(*) FROM function_versions", -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    int inv = 0;
    for (int i = 0; i < 100 && inv == 0; i++) {
        ck_assert_int_eq(sqlite3_prepare_v2(s, "SELECT count(*) FROM invocations", -1, &q, NULL),
                         SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
        inv = sqlite3_column_int(q, 0);
        sqlite3_finalize(q);
        if (inv == 0)
            usleep(50 * 1000);
    }
    ck_assert_int_gt(inv, 0);
    sqlite3_close(s);
    free(db);

    /* delete: only with the token; afterwards 404 everywhere */
    expect_error(http("DELETE", "/v1/functions/ref-mlp", NULL, &r), &r, 401, "admin token");
    resp_free(&r);
    ck_assert_int_eq(http_ex("DELETE", "/v1/functions/ref-mlp", auth_hdr, NULL, 0, false, &r), 200);
    resp_free(&r);
    expect_error(http("GET", "/v1/functions/ref-mlp", NULL, &r), &r, 404, "not found");
    resp_free(&r);
    expect_error(http("POST", "/v2/models/ref-mlp/infer", body, &r), &r, 404, "ref-mlp");
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v2/models/ref-mlp/ready", NULL, &r), 400);
    resp_free(&r);
    free(body);
    free(mp);
    free(wp);
    ref_close(&rf);
}
END_TEST

typedef struct bad_case {
    const char *method, *path;
    const char *hdr;  /* one extra header or NULL */
    const char *body; /* NULL = none */
    long status;
    const char *want; /* in the error message */
} bad_case;

START_TEST(test_bad_input_each_4xx)
{
    const char *extra[] = {"--admin-token", TOKEN, "--max-body", "1M", NULL};
    server_start_args(extra);
    deploy_ref("good");
    ref rf;
    ref_open(&rf);
#define GOOD_BODY                                                                                  \
    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":["               \
    "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"                             \
    "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}"
    static const bad_case cases[] = {
        {"POST", "/v2/models/good/infer", NULL, "{\"inputs\":[{\"name\":\"x\",", 400,
         "malformed JSON"},
        {"POST", "/v2/models/good/infer", NULL, "not json", 400, "malformed JSON"},
        {"POST", "/v2/models/good/infer", NULL, "", 400, "empty body"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP16\",\"shape\":[1,64],\"data\":[1]}]}", 400,
         "FP16 data must be sent as binary"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[1,1],\"data\":[1]}]}", 400,
         "datatype"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[1,1],\"data\":[1]}]}", 400,
         "x"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2,3]}]}",
         400, "shape"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[1,2,3]}]}",
         400, "data has 3 elements but shape [1, 64] needs 64"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"z\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":[1]}]}", 400,
         "needs 64"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,64],\"data\":"
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}",
         400, "nesting deeper than 32"},
        {"POST", "/v2/models/unknown/infer", NULL, GOOD_BODY, 404, "unknown"},
        {"POST", "/v2/models/good/versions/9/infer", NULL, GOOD_BODY, 404, "9"},
        {"POST", "/v2/models/good/versions/zero/infer", NULL, GOOD_BODY, 400,
         "invalid version 'zero'"},
        {"POST", "/v2/models/good/versions/0/infer", NULL, GOOD_BODY, 400, "invalid version '0'"},
        /* routing sees the raw path: an escape cannot add a segment nor cut a name */
        {"POST", "/v2/models/..%2F..%2Fetc/infer", NULL, GOOD_BODY, 400,
         "invalid function name '../../etc'"},
        {"POST", "/v2/models/good%2Finfer", NULL, GOOD_BODY, 405, "method POST is not allowed"},
        {"POST", "/v2/models/good%2fversions%2f1/infer", NULL, GOOD_BODY, 400,
         "invalid function name 'good/versions/1'"},
        {"POST", "/v2/models/go%00od/infer", NULL, GOOD_BODY, 400, "%00 in the path"},
        {"POST", "/v2/models/good%zz/infer", NULL, GOOD_BODY, 400, "malformed percent-escape"},
        {"POST", "/v2/models/good%2/infer", NULL, GOOD_BODY, 400, "malformed percent-escape"},
        {"GET", "/v2/models/good/versions/1%00/ready", NULL, NULL, 400, "%00 in the path"},
        {"GET", "/v2/models%2Fgood/ready", NULL, NULL, 404, "no such endpoint"},
        {"POST", "/v2/models/%2E%2E/infer", NULL, GOOD_BODY, 400, "invalid function name '..'"},
        {"POST", "/v2/models/Bad_Name/infer", NULL, GOOD_BODY, 400, "invalid function name"},
        {"GET", "/v1/functions/a%20b", NULL, NULL, 400, "invalid function name 'a b'"},
        {"POST", "/v2/models/good/infer", "Inference-Header-Content-Length: 999999", GOOD_BODY, 400,
         "Inference-Header-Content-Length 999999 is out of range"},
        {"POST", "/v2/models/good/infer", "Inference-Header-Content-Length: -1", GOOD_BODY, 400,
         "is not a number"},
        {"POST", "/v2/models/good/infer", "Inference-Header-Content-Length: 0", GOOD_BODY, 400,
         "out of range"},
        {"POST", "/v2/models/good/infer", NULL,
         "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,64],"
         "\"parameters\":{\"binary_data_size\":256}}]}",
         400, "no Inference-Header-Content-Length header"},
        {"POST", "/v1/functions", "Content-Type: application/json", "{}", 401, "admin token"},
        {"POST", "/v1/functions", "Authorization: Bearer nope", "{}", 401, "bad admin token"},
        {"POST", "/v1/functions", "Authorization: Basic " TOKEN, "{}", 401, "admin token"},
        {"POST", "/v1/functions", "Authorization: Bearer " TOKEN, "{}", 415, "multipart/form-data"},
        {"DELETE", "/v1/functions/good", "Authorization: Bearer nope", NULL, 401,
         "bad admin token"},
        {"POST", "/v2/repository/models/good/load", NULL, "{}", 401, "admin token"},
        {"POST", "/v2/repository/models/good/unload", "Authorization: Bearer x", "{}", 401,
         "bad admin token"},
        {"POST", "/v2/repository/models/good/load", "Authorization: Bearer " TOKEN, "{\"a\":", 400,
         "malformed JSON"},
        {"POST", "/v2/repository/models/nope/load", "Authorization: Bearer " TOKEN, NULL, 404,
         "nope"},
        {"POST", "/v2/repository/index", NULL, "[1]", 400, "must be a JSON object"},
        {"POST", "/v2/repository/index", NULL, "{\"ready\":3}", 400, "must be true or false"},
        {"GET", "/v2/models/good/infer", NULL, NULL, 405, "method GET is not allowed"},
        {"PUT", "/v1/functions", NULL, "{}", 405, "not allowed"},
        {"GET", "/nowhere", NULL, NULL, 404, "no such endpoint: GET /nowhere"},
        {"GET", "/v2/models/good/", NULL, NULL, 404, "no such endpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        const char *hdrs[] = {c->hdr, NULL};
        resp r;
        long st = http_ex(c->method, c->path, hdrs, c->body, c->body != NULL ? strlen(c->body) : 0,
                          false, &r);
        if (st != c->status || strstr(r.body.data != NULL ? r.body.data : "", c->want) == NULL)
            ck_abort_msg("case %zu (%s %s): status %ld, want %ld '%s': %s", i, c->method, c->path,
                         st, c->status, c->want, r.body.data);
        expect_error(st, &r, c->status, c->want);
        resp_free(&r);
        /* and the server keeps serving */
        ck_assert_int_eq(http("GET", "/v2/health/live", NULL, &r), 200);
        resp_free(&r);
    }

    /* too large: declared, and chunked (no length given) */
    size_t big = 2u << 20;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    resp r;
    expect_error(http_ex("POST", "/v2/models/good/infer", NULL, huge, big, false, &r), &r, 413,
                 "larger than the limit of 1048576 bytes");
    resp_free(&r);
    expect_error(http_ex("POST", "/v2/models/good/infer", NULL, huge, big, true, &r), &r, 413,
                 "larger than the limit of 1048576 bytes");
    resp_free(&r);
    free(huge);

    /* deploys the core rejects: each its 4xx, nothing half-deployed */
    char *mp = gf_test_path(model_dir, "manifest.json");
    char *wp = gf_test_path(model_dir, "weights.safetensors");
    char *junk = gf_test_path(test_dir, "junk.bin");
    gf_test_write_file(junk, "not a safetensors file", 22);
    char *badm = gf_test_path(test_dir, "bad.json");
    gf_test_write_file(badm, "{\"name\":\"x\"", 11);
    long st = deploy_files(mp, junk, TOKEN, &r);
    ck_assert_msg(st == 400, "junk weights: %ld %s", st, r.body.data);
    resp_free(&r);
    st = deploy_files(badm, wp, TOKEN, &r);
    ck_assert_msg(st == 400, "bad manifest: %ld %s", st, r.body.data);
    resp_free(&r);
    expect_error(deploy_files(mp, NULL, TOKEN, &r), &r, 400, "missing form field 'weights'");
    resp_free(&r);
    ck_assert_int_eq(http("GET", "/v1/functions/x", NULL, &r), 404);
    resp_free(&r);
    free(mp), free(wp), free(junk), free(badm);

    /* still serving, still correct */
    char *body = ref_json_request(&rf, false, NULL);
    ck_assert_int_eq(http("POST", "/v2/models/good/infer", body, &r), 200);
    check_json_outputs(&rf, r.body.data, r.body.len);
    resp_free(&r);
    free(body);
    /* 4xx answered by the HTTP front are counted too */
    ck_assert_int_eq(http("GET", "/metrics", NULL, &r), 200);
    ck_assert_msg(strstr(r.body.data, "code=\"400\"") != NULL, "%.3000s", r.body.data);
    resp_free(&r);
    ref_close(&rf);
#undef GOOD_BODY
}
END_TEST

/* ---- concurrency: keep-alive, many clients, answers resumed from core threads ------- */

typedef struct client_arg {
    const ref *rf;
    const char *body;
    int n;
    int ok, fail_http, fail_conn, wrong;
    volatile int *stop; /* stop early when set (NULL: never) */
} client_arg;

static void *client_main(void *p)
{
    client_arg *a = p;
    for (int i = 0; i < a->n && (a->stop == NULL || !*a->stop); i++) {
        resp r;
        long st = http("POST", "/v2/models/ref-mlp/infer", a->body, &r);
        if (st == 200) {
            json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
            json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
            bool good = json_array_size(d) == 30;
            for (size_t k = 0; good && k < 30; k++)
                good = close_enough(json_number_value(json_array_get(d, k)), ref_y(a->rf, k));
            json_decref(j);
            if (good)
                a->ok++;
            else
                a->wrong++;
        } else if (st == 503) {
            a->fail_http++;
        } else if (st < 0) {
            a->fail_conn++;
        } else {
            fprintf(stderr, "unexpected status %ld: %s\n", st, r.body.data);
            a->wrong++;
        }
        resp_free(&r);
    }
    gf_hh_thread_end();
    return NULL;
}

START_TEST(test_concurrent_keepalive)
{
    server_start_args(NULL);
    deploy_ref("ref-mlp");
    ref rf;
    ref_open(&rf);
    char *body = ref_json_request(&rf, false, NULL);
    enum { NT = 8, NREQ = 40 };
    pthread_t t[NT];
    client_arg args[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (client_arg){&rf, body, NREQ, 0, 0, 0, 0, NULL};
        ck_assert_int_eq(pthread_create(&t[i], NULL, client_main, &args[i]), 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(args[i].ok == NREQ, "client %d: %d ok, %d 503, %d conn, %d wrong", i,
                      args[i].ok, args[i].fail_http, args[i].fail_conn, args[i].wrong);
    }
    free(body);
    ref_close(&rf);
}
END_TEST

/* One polling thread, requests that wait 300 ms for a batch to fill: they
 * can only end up in one batch if no thread is held while they wait. */
typedef struct batch_arg {
    const char *body;
    long status;
    int batch_size;
    bool correct;
    const ref *rf;
} batch_arg;

static void *batch_client(void *p)
{
    batch_arg *a = p;
    resp r;
    a->status = http("POST", "/v1/functions/slow/invoke", a->body, &r);
    if (a->status == 200) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        a->batch_size = (int)json_integer_value(json_object_get(j, "batch_size"));
        json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
        a->correct = json_array_size(d) == 30;
        for (size_t k = 0; a->correct && k < 30; k++)
            a->correct = close_enough(json_number_value(json_array_get(d, k)), ref_y(a->rf, k));
        json_decref(j);
    }
    resp_free(&r);
    gf_hh_thread_end();
    return NULL;
}

START_TEST(test_waiting_holds_no_thread)
{
    const char *extra[] = {"--http-threads", "1", NULL};
    server_start_args(extra);
    deploy_ref_delay("slow", 300000);
    ref rf;
    ref_open(&rf);
    char *body = ref_json_request(&rf, false, NULL);
    enum { NT = 6 };
    pthread_t t[NT];
    batch_arg args[NT];
    for (int i = 0; i < NT; i++) {
        args[i] = (batch_arg){body, 0, 0, false, &rf};
        ck_assert_int_eq(pthread_create(&t[i], NULL, batch_client, &args[i]), 0);
    }
    int biggest = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(args[i].status, 200);
        ck_assert(args[i].correct);
        if (args[i].batch_size > biggest)
            biggest = args[i].batch_size;
    }
    ck_assert_msg(biggest >= 3, "requests did not wait together: largest batch %d", biggest);
    free(body);
    ref_close(&rf);
}
END_TEST

/* SIGTERM under load: every answer is correct or a clean 503; exit 0. */
START_TEST(test_sigterm_drains)
{
    server_start_args(NULL);
    deploy_ref("ref-mlp");
    ref rf;
    ref_open(&rf);
    char *body = ref_json_request(&rf, false, NULL);
    enum { NT = 4 };
    pthread_t t[NT];
    client_arg args[NT];
    volatile int stop = 0;
    for (int i = 0; i < NT; i++) {
        args[i] = (client_arg){&rf, body, 100000, 0, 0, 0, 0, &stop};
        ck_assert_int_eq(pthread_create(&t[i], NULL, client_main, &args[i]), 0);
    }
    usleep(300 * 1000);
    int st = server_stop_status(30);
    stop = 1;
    int ok = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        ok += args[i].ok;
        ck_assert_msg(args[i].wrong == 0, "client %d got %d wrong answers", i, args[i].wrong);
    }
    ck_assert_int_gt(ok, 0);
    if (st != 0)
        dump_log();
    ck_assert_int_eq(st, 0);
    free(body);
    ref_close(&rf);
}
END_TEST

static Suite *e2e_suite(void)
{
    Suite *s = suite_create("http_e2e");
    TCase *tc = tcase_create("e2e");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_deploy_and_invoke);
    tcase_add_test(tc, test_bad_input_each_4xx);
    tcase_add_test(tc, test_concurrent_keepalive);
    tcase_add_test(tc, test_waiting_holds_no_thread);
    tcase_add_test(tc, test_sigterm_drains);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = gf_test_run_suite(e2e_suite());
    curl_global_cleanup();
    return rc;
}
