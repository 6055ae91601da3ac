/* Tests for functions/: the runtime side of the function ABI
 * (validation, derived parameters, inference, workspace eviction), the mlp
 * kind against a naive reference, and plugins (the example, a refused ABI,
 * a non-plugin, a disallowed load). Real files, the real cpu backend and
 * cache. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/arena.h"
#include "core/bytes.h"
#include "core/dtype.h"
#include "core/fault.h"
#include "core/tensor.h"
#include "functions/runtime.h"
#include "manifest_testlib.h"
#include "mlp.h"
#include "testutil.h"

#define PAGE ((size_t)64 << 10)

static char *tmpdir;
static void setup(void) { tmpdir = gf_test_tmpdir(); }
static void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* ---- mlp ---- */

/* Write m in dtype (gf_test_mlp, tests/common/mlp.h) into the test's
 * directory. */
static char *mlp_write(const gf_test_mlp *m, gf_dtype dt, const char *file)
{
    char *path = gf_test_path(tmpdir, file);
    gf_err err;
    ck_assert_msg(gf_test_mlp_write(m, path, dt, &err) == GF_OK, "%s", err.msg);
    return path;
}

typedef struct {
    gf_backend *be;
    gf_cache *cache;
} rt;

static rt rt_open(size_t pages)
{
    rt r;
    gf_backend_config cfg = {.device = "cpu", .device_budget = pages * PAGE, .page_size = PAGE};
    gf_err err;
    ck_assert_msg(gf_backend_open(&cfg, &r.be, &err) == GF_OK, "%s", err.msg);
    gf_cache_config cc = {.host_budget = 4 << 20};
    ck_assert_msg(gf_cache_new(r.be, &cc, &r.cache, &err) == GF_OK, "%s", err.msg);
    return r;
}

static void rt_close(rt *r)
{
    gf_cache_free(r->cache);
    gf_backend_free(r->be);
}

/* Where run_once's outputs go (NULL: malloc); a counting allocator. */
static const gf_fn_host_alloc *run_host;
static int host_allocs, host_frees;
static void *count_alloc(void *ctx, size_t size)
{
    (void)ctx;
    host_allocs++;
    return malloc(size);
}
static void count_free(void *ctx, void *p)
{
    (void)ctx;
    host_frees++;
    free(p);
}

/* prepare + register + acquire + infer one batch; returns the status */
static gf_status run_once(rt *r, const gf_fn_kind *kind, gf_manifest *mf, const char *weights,
                          const char *key, const gf_tensor *in, size_t n_in, gf_fn_outputs *out,
                          gf_err *err)
{
    gf_fn_plan *plan;
    char *derived = gf_test_path(tmpdir, "derived.safetensors");
    gf_status st = gf_fn_prepare(kind, mf, weights, derived, &plan, err);
    free(derived);
    if (st != GF_OK)
        return st;
    gf_cache_model *m = gf_cache_model_find(r->cache, key);
    if (m == NULL)
        ck_assert_msg(gf_cache_model_add(r->cache, key, gf_fn_plan_cache_path(plan),
                                         gf_fn_plan_param_names(plan),
                                         gf_fn_plan_param_count(plan), &m, err) == GF_OK,
                      "%s", err->msg);
    gf_lease *l;
    st = gf_cache_acquire(r->cache, m, &l, err);
    if (st == GF_OK) {
        gf_fn_timing tm;
        st = gf_fn_infer_into(plan, r->be, r->cache, l, in, n_in, 0, NULL, run_host, out, &tm,
                              err);
        gf_lease_release(l);
    }
    gf_fn_plan_free(plan);
    return st;
}

static void check_mlp(gf_dtype dt, int64_t batch, bool softmax, double tol)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 77 + (uint64_t)dt);
    gf_test_mlp ref;
    int64_t dims[4] = {13, 32, 17, 5};
    gf_test_mlp_make(&ref, 77 + (uint64_t)dt, 3, dims, softmax, 8);
    char *w = mlp_write(&ref, dt, "mlp.safetensors");
    char json[512];
    snprintf(json, sizeof json,
             "{\"name\":\"m\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
             "\"shape\":[-1,13]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
             "\"shape\":[-1,5]}],\"max_batch_size\":8,\"config\":{\"softmax\":%s}}",
             softmax ? "true" : "false");
    gf_manifest *mf = parse(json);
    const gf_fn_kind *kind = gf_fn_kind_find("mlp");
    ck_assert_ptr_nonnull(kind);
    gf_err err;
    ck_assert_msg(gf_fn_validate(kind, mf, w, &err) == GF_OK, "%s", err.msg);
    float *x = malloc((size_t)(batch * 13) * sizeof(float));
    for (int64_t i = 0; i < batch * 13; i++)
        x[i] = gf_test_rng_float(&rng, -1, 1);
    gf_tensor in;
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){batch, 13}, x, GF_MEM_HOST, -1, NULL);
    rt r = rt_open(16);
    gf_fn_outputs out;
    ck_assert_msg(run_once(&r, kind, mf, w, "m@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_int_eq(out.t[0].shape[0], batch);
    ck_assert_int_eq(out.t[0].shape[1], 5);
    double *want = malloc((size_t)(batch * 5) * sizeof *want);
    gf_test_mlp_ref(&ref, dt, x, batch, want);
    for (int64_t i = 0; i < batch * 5; i++) {
        float got = ((float *)out.t[0].data)[i];
        ck_assert_msg(fabs(got - want[i]) <= tol * (1 + fabs(want[i])),
                      "dtype %d elem %lld: got %g want %g", dt, (long long)i, got, want[i]);
    }
    gf_fn_outputs_free(&out);
    rt_close(&r);
    gf_manifest_free(mf);
    gf_test_mlp_free(&ref);
    free(want);
    free(x);
    free(w);
}

/* The reference uses the same rounded weights in double, so the only error
 * is FP32 accumulation over <= 32 terms of magnitude ~1: 1e-5 relative is
 * ~80x float epsilon, generous for that and far below any real bug. Half
 * weights change nothing in that argument (the reference rounds them too). */
/* The outputs copied back go to the memory the caller's allocator gives
 * (the worker's pinned ring), and go back to it when freed. */
START_TEST(test_outputs_into_host_memory_given)
{
    gf_fn_host_alloc counting = {count_alloc, count_free, NULL};
    run_host = &counting;
    check_mlp(GF_DT_F32, 3, false, 1e-5);
    run_host = NULL;
    ck_assert_int_eq(host_allocs, 1); /* the one output */
    ck_assert_int_eq(host_frees, 1);
}
END_TEST

START_TEST(test_mlp_matches_reference)
{
    check_mlp(GF_DT_F32, 1, false, 1e-5);
    check_mlp(GF_DT_F32, 7, true, 1e-5);
    check_mlp(GF_DT_F16, 3, false, 1e-5);
    check_mlp(GF_DT_BF16, 8, true, 1e-5);
}
END_TEST

START_TEST(test_mlp_validation_errors)
{
    gf_test_mlp ref;
    int64_t dims[3] = {4, 6, 3};
    gf_test_mlp_make(&ref, 5, 2, dims, false, 4);
    char *w = mlp_write(&ref, GF_DT_F32, "v.safetensors");
    const gf_fn_kind *kind = gf_fn_kind_find("mlp");
    gf_err err;
    /* input width disagrees with 0.weight */
    gf_manifest *mf = parse("{\"name\":\"v\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\","
                            "\"datatype\":\"FP32\",\"shape\":[-1,5]}],\"outputs\":[{\"name\":"
                            "\"y\",\"datatype\":\"FP32\",\"shape\":[-1,3]}]}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "tensor '0.weight' has shape [6, 4], expected [-1, 5]"),
                  "%s", err.msg);
    gf_manifest_free(mf);
    /* output width disagrees with the last layer */
    mf = parse("{\"name\":\"v\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
               "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
               "\"shape\":[-1,9]}]}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "has 9 features but the last layer produces 3"), "%s", err.msg);
    gf_manifest_free(mf);
    /* activations count */
    mf = parse("{\"name\":\"v\",\"kind\":\"mlp\"," IO_OK ",\"config\":{\"activations\":[\"relu\"]}}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "has 1 entries but the weights have 2 Linear layers"), "%s",
                  err.msg);
    gf_manifest_free(mf);
    mf = parse("{\"name\":\"v\",\"kind\":\"mlp\"," IO_OK ",\"config\":{\"activations\":"
               "[\"relu\",\"swish9\"]}}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "activations[1]: unknown activation"), "%s", err.msg);
    gf_manifest_free(mf);
    /* a kind mismatch and missing file */
    mf = parse("{\"name\":\"v\",\"kind\":\"resnet\"," IO_OK "}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, w, &err), GF_ERR_INVALID);
    gf_manifest_free(mf);
    mf = parse("{\"name\":\"v\",\"kind\":\"mlp\"," IO_OK "}");
    ck_assert_int_eq(gf_fn_validate(kind, mf, "/nonexistent/w.safetensors", &err),
                     GF_ERR_NOT_FOUND);
    /* weights without any Linear layer */
    float one = 1;
    gf_st_wtensor t = {"scale", GF_DT_F32, 1, (int64_t[]){1}, &one};
    char *w2 = gf_test_path(tmpdir, "nolayers.safetensors");
    ck_assert_int_eq(gf_st_write(w2, &t, 1, NULL, 0, NULL), GF_OK);
    ck_assert_int_eq(gf_fn_validate(kind, mf, w2, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "tensor 'scale' is not named as an nn.Sequential names"), "%s",
                  err.msg);
    float stats[2] = {0, 1};
    gf_st_wtensor bn[2] = {{"0.running_mean", GF_DT_F32, 1, (int64_t[]){1}, &stats[0]},
                           {"0.running_var", GF_DT_F32, 1, (int64_t[]){1}, &stats[1]}};
    ck_assert_int_eq(gf_st_write(w2, bn, 2, NULL, 0, NULL), GF_OK);
    ck_assert_int_eq(gf_fn_validate(kind, mf, w2, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "no Linear layer"), "%s", err.msg);
    gf_manifest_free(mf);
    gf_test_mlp_free(&ref);
    free(w);
    free(w2);
}
END_TEST

START_TEST(test_infer_input_errors_and_workspace_eviction)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 9);
    gf_test_mlp ref;
    int64_t dims[3] = {64, 64, 8};
    gf_test_mlp_make(&ref, 9, 2, dims, false, 8);
    char *w = mlp_write(&ref, GF_DT_F32, "ws.safetensors");
    gf_manifest *mf = parse("{\"name\":\"ws\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\","
                            "\"datatype\":\"FP32\",\"shape\":[-1,64]}],\"outputs\":[{\"name\":"
                            "\"y\",\"datatype\":\"FP32\",\"shape\":[-1,8]}],"
                            "\"max_batch_size\":4096}");
    const gf_fn_kind *kind = gf_fn_kind_find("mlp");
    rt r = rt_open(10);
    gf_err err;
    /* a big idle model fills most of the device */
    size_t big_numel = 7 * PAGE / 4;
    float *bigdata = calloc(big_numel, sizeof(float));
    gf_st_wtensor bt = {"w", GF_DT_F32, 1, (int64_t[]){(int64_t)big_numel}, bigdata};
    char *bigpath = gf_test_path(tmpdir, "big.safetensors");
    ck_assert_int_eq(gf_st_write(bigpath, &bt, 1, NULL, 0, NULL), GF_OK);
    free(bigdata);
    gf_cache_model *big;
    ck_assert_int_eq(gf_cache_model_add(r.cache, "big", bigpath, NULL, 0, &big, &err), GF_OK);
    gf_lease *l;
    ck_assert_int_eq(gf_cache_acquire(r.cache, big, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    gf_lease_release(l);
    /* a batch whose input and activations (3 x 500 x 64 floats + output)
     * need 400,000 bytes: only fits once the idle model is evicted */
    int64_t batch = 500;
    float *x = calloc((size_t)(batch * 64), sizeof(float));
    gf_tensor in;
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){batch, 64}, x, GF_MEM_HOST, -1, NULL);
    gf_fn_outputs out;
    /* the room an eviction makes can be taken by another thread before the
     * allocation gets it (a swap-in waiting for room wakes first): two
     * allocations failing in a row are retried, not reported */
    gf_fault_arm("dev_alloc", 1, 2);
    ck_assert_msg(run_once(&r, kind, mf, w, "ws@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(gf_fault_failures("dev_alloc"), 2);
    gf_fault_reset();
    gf_fn_outputs_free(&out);
    gf_cache_stats st;
    gf_cache_get_stats(r.cache, &st);
    ck_assert_uint_eq(st.evictions_device, 1);
    /* the same batch again is warm: its device memory comes from the arena
     * the first one grew, so the backend allocates and frees nothing */
    uint64_t a0, f0, a1, f1;
    gf_dev_counters(r.be, &a0, &f0);
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(run_once(&r, kind, mf, w, "ws@1", &in, 1, &out, &err) == GF_OK, "%s",
                      err.msg);
        gf_fn_outputs_free(&out);
    }
    gf_dev_counters(r.be, &a1, &f1);
    ck_assert_uint_eq(a1 - a0, 0);
    ck_assert_uint_eq(f1 - f0, 0);
    /* more than the whole budget: the request's fault (413), not a busy device (503) */
    free(x);
    batch = 4096;
    x = calloc((size_t)(batch * 64), sizeof(float));
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){batch, 64}, x, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(run_once(&r, kind, mf, w, "ws@1", &in, 1, &out, &err), GF_ERR_TOO_LARGE);
    ck_assert_msg(strstr(err.msg, "bytes of device memory, more than the worker's whole device "
                                  "budget"), "%s", err.msg);
    /* wrong input shape and count */
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){2, 63}, x, GF_MEM_HOST, -1, NULL);
    ck_assert_int_eq(run_once(&r, kind, mf, w, "ws@1", &in, 1, &out, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "input 'x': shape [2, 63] does not match [-1, 64]"), "%s",
                  err.msg);
    ck_assert_int_eq(run_once(&r, kind, mf, w, "ws@1", &in, 0, &out, &err), GF_ERR_INVALID);
    uint64_t used;
    gf_dev_usage(r.be, &used, NULL);
    gf_cache_get_stats(r.cache, &st);
    /* nothing leaked on the device: models and the arena's blocks */
    ck_assert_uint_eq(used, st.device_model_bytes + gf_dev_arena_held(gf_backend_arena(r.be)));
    rt_close(&r);
    gf_manifest_free(mf);
    gf_test_mlp_free(&ref);
    free(x);
    free(w);
    free(bigpath);
}
END_TEST

/* ---- plugins ---- */

static char *plugin_path(const char *var)
{
    return strdup(gf_test_prog(var));
}

START_TEST(test_plugins)
{
    gf_err err;
    const gf_fn_kind *k;
    char *example = plugin_path("GF_PLUGIN_EXAMPLE");
    ck_assert_int_eq(gf_fn_plugin_load(example, false, &k, &err), GF_ERR_PERMISSION);
    ck_assert_msg(strstr(err.msg, "--allow-native-functions"), "%s", err.msg);
    ck_assert_ptr_null(gf_fn_kind_find("linear"));
    ck_assert_msg(gf_fn_plugin_load(example, true, &k, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(gf_fn_kind_name(k), "linear");
    ck_assert(gf_fn_kind_is_plugin(k));
    ck_assert_ptr_eq(gf_fn_kind_find("linear"), k);
    const gf_fn_kind *again;
    ck_assert_int_eq(gf_fn_plugin_load(example, true, &again, &err), GF_OK);
    ck_assert_ptr_eq(again, k);
    /* run it: y = x W^T + b, against a naive loop */
    float W[6] = {1, 2, 3, -1, 0.5f, 2}, B[2] = {0.25f, -1}, X[6] = {1, 0, 2, -1, 1, 1};
    gf_st_wtensor ts[2] = {{"weight", GF_DT_F32, 2, (int64_t[]){2, 3}, W},
                           {"bias", GF_DT_F32, 1, (int64_t[]){2}, B}};
    char *w = gf_test_path(tmpdir, "linear.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, 2, NULL, 0, NULL), GF_OK);
    gf_manifest *mf = parse("{\"name\":\"lin\",\"kind\":\"linear\",\"inputs\":[{\"name\":\"x\","
                            "\"datatype\":\"FP32\",\"shape\":[-1,3]}],\"outputs\":[{\"name\":"
                            "\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}],\"max_batch_size\":2}");
    ck_assert_msg(gf_fn_validate(k, mf, w, &err) == GF_OK, "%s", err.msg);
    rt r = rt_open(8);
    gf_tensor in;
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){2, 3}, X, GF_MEM_HOST, -1, NULL);
    gf_fn_outputs out;
    ck_assert_msg(run_once(&r, k, mf, w, "lin@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    for (int s = 0; s < 2; s++)
        for (int o = 0; o < 2; o++) {
            double want = B[o];
            for (int i = 0; i < 3; i++)
                want += X[s * 3 + i] * W[o * 3 + i];
            ck_assert(fabs(((float *)out.t[0].data)[s * 2 + o] - want) < 1e-6);
        }
    gf_fn_outputs_free(&out);
    rt_close(&r);
    gf_manifest_free(mf);
    /* an incompatible ABI, and a shared object that is not a plugin */
    char *bad = plugin_path("GF_PLUGIN_BAD_ABI");
    ck_assert_int_eq(gf_fn_plugin_load(bad, true, &k, &err), GF_ERR_UNSUPPORTED);
    char want[96];
    snprintf(want, sizeof want, "built for function ABI 2.0; this runtime provides %d.%d",
             GF_FN_ABI_MAJOR, GF_FN_ABI_MINOR);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    char *none = plugin_path("GF_PLUGIN_NO_ENTRY");
    ck_assert_int_eq(gf_fn_plugin_load(none, true, &k, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "does not export gf_function_entry"), "%s", err.msg);
    ck_assert_int_eq(gf_fn_plugin_load("/nonexistent/p.so", true, &k, &err), GF_ERR_NOT_FOUND);
    free(example);
    free(bad);
    free(none);
    free(w);
}
END_TEST

/* The 1.1 accessors as a plugin sees them: api->config follows JSON
 * Pointers into the manifest's config (members, items, escapes, every type,
 * what is absent, a malformed pointer refused with the runtime's message);
 * api->companion_path finds the version's companion file beside the weights. */
START_TEST(test_config_accessor_and_companions)
{
    gf_err err;
    const gf_fn_kind *k;
    char *so = plugin_path("GF_PLUGIN_CONFIG");
    ck_assert_msg(gf_fn_plugin_load(so, true, &k, &err) == GF_OK, "%s", err.msg);
    float W[2] = {1, 2};
    gf_st_wtensor ts[1] = {{"weight", GF_DT_F32, 1, (int64_t[]){2}, W}};
    char *w = gf_test_path(tmpdir, "v3.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, 1, NULL, 0, NULL), GF_OK);
#define CFG_IO "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]," \
               "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]"
    gf_manifest *mf = parse(
        "{\"name\":\"c\",\"kind\":\"cfgprobe\"," CFG_IO ",\"config\":{\"probe\":[\"/n\","
        "\"/f\",\"/s\",\"/b\",\"/z\",\"/a\",\"/a/1\",\"/a/2\",\"/a/01\",\"/o\",\"/o/x~1y\","
        "\"/o/t~0\",\"/missing\",\"/n/0\",\"\"],\"n\":-7,\"f\":0.5,\"s\":\"relu\",\"b\":true,"
        "\"z\":null,\"a\":[1,\"two\"],\"o\":{\"x/y\":1,\"t~\":2}}}");
    ck_assert_int_eq(gf_fn_validate(k, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "cfg /n=int:-7;/f=num:0.5;/s=str:relu(4);/b=bool:1;/z=null;"
                                  "/a=array:2;/a/1=str:two(3);/a/2=absent;/a/01=absent;"
                                  "/o=object:x/y,t~;/o/x~1y=int:1;/o/t~0=int:2;/missing=absent;"
                                  "/n/0=absent;=object:probe,n,f,s,b,z,a,o; graph=none"),
                  "%s", err.msg);
    /* a companion file beside the weights is found by its suffix */
    char *g = gf_test_path(tmpdir, "v3.graph");
    gf_test_write_file(g, "g", 1);
    ck_assert_int_eq(gf_fn_validate(k, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "graph=v3.graph"), "%s", err.msg);
    gf_manifest_free(mf);
    /* a malformed pointer is refused by the runtime, naming it */
    mf = parse("{\"name\":\"c\",\"kind\":\"cfgprobe\"," CFG_IO ",\"config\":{\"probe\":"
               "[\"nope\"]}}");
    ck_assert_int_eq(gf_fn_validate(k, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "pointer 'nope' must be empty or start with '/'"), "%s",
                  err.msg);
    gf_manifest_free(mf);
    free(g);
    free(w);
    free(so);
}
END_TEST

START_TEST(test_derived_parameters)
{
    gf_err err;
    const gf_fn_kind *k;
    char *path = plugin_path("GF_PLUGIN_DERIVE");
    ck_assert_msg(gf_fn_plugin_load(path, true, &k, &err) == GF_OK, "%s", err.msg);
    float W[4] = {1, 2, 3, 4}, B[2] = {0.5f, 0.25f}, X[2] = {1, -1};
    gf_st_wtensor ts[2] = {{"weight", GF_DT_F32, 2, (int64_t[]){2, 2}, W},
                           {"bias", GF_DT_F32, 1, (int64_t[]){2}, B}};
    char *w = gf_test_path(tmpdir, "dl.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, 2, NULL, 0, NULL), GF_OK);
    gf_manifest *mf = parse("{\"name\":\"dl\",\"kind\":\"double_linear\",\"inputs\":[{\"name\":"
                            "\"x\",\"datatype\":\"FP32\",\"shape\":[-1,2]}],\"outputs\":[{"
                            "\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}");
    ck_assert_msg(gf_fn_validate(k, mf, w, &err) == GF_OK, "%s", err.msg);
    char *derived = gf_test_path(tmpdir, "derived.safetensors");
    ck_assert_int_ne(access(derived, F_OK), 0); /* validation writes nothing */
    gf_fn_plan *plan;
    ck_assert_msg(gf_fn_prepare(k, mf, w, derived, &plan, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(gf_fn_plan_cache_path(plan), derived);
    ck_assert_uint_eq(gf_fn_plan_param_count(plan), 2);
    ck_assert_str_eq(gf_fn_plan_param_names(plan)[0], "weight_x2");
    ck_assert_str_eq(gf_fn_plan_param_names(plan)[1], "bias");
    struct stat s1, s2;
    ck_assert_int_eq(stat(derived, &s1), 0);
    gf_st_file *f;
    ck_assert_int_eq(gf_st_open(derived, &f, &err), GF_OK);
    ck_assert_uint_eq(gf_st_count(f), 2);
    ck_assert(((const float *)gf_st_find(f, "weight_x2")->data)[3] == 8.0f);
    ck_assert_str_eq(gf_st_meta_get(f, "gpufaas.kind"), "double_linear");
    gf_st_close(f);
    gf_fn_plan_free(plan);
    /* a second prepare reuses the file */
    ck_assert_int_eq(gf_fn_prepare(k, mf, w, derived, &plan, &err), GF_OK);
    ck_assert_int_eq(stat(derived, &s2), 0);
    ck_assert(s1.st_mtim.tv_sec == s2.st_mtim.tv_sec && s1.st_mtim.tv_nsec == s2.st_mtim.tv_nsec);
    gf_fn_plan_free(plan);
    rt r = rt_open(8);
    gf_tensor in;
    gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){1, 2}, X, GF_MEM_HOST, -1, NULL);
    gf_fn_outputs out;
    ck_assert_msg(run_once(&r, k, mf, w, "dl@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    /* y = x (2W)^T + b = [2*(1-2)+0.5, 2*(3-4)+0.25] */
    ck_assert(((float *)out.t[0].data)[0] == -1.5f);
    ck_assert(((float *)out.t[0].data)[1] == -1.75f);
    gf_fn_outputs_free(&out);
    rt_close(&r);
    /* without a derived path a deriving kind cannot be prepared */
    ck_assert_int_eq(gf_fn_prepare(k, mf, w, NULL, &plan, &err), GF_ERR_INVALID);
    gf_manifest_free(mf);
    free(path);
    free(w);
    free(derived);
}
END_TEST

/* Validation with weights written from ts (n tensors) and the double_linear
 * manifest plus `extra` (manifest fields); NULL expect = must pass. */
static void dl_validate(const gf_fn_kind *k, const gf_st_wtensor *ts, size_t n, const char *extra,
                        const char *const *expect)
{
    char *w = gf_test_path(tmpdir, "dl-unused.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, n, NULL, 0, NULL), GF_OK);
    char m[1024];
    snprintf(m, sizeof m,
             "{\"name\":\"dl\",\"kind\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,2]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
             "\"shape\":[-1,2]}]%s}",
             gf_fn_kind_name(k), extra);
    gf_manifest *mf = parse(m);
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_fn_validate(k, mf, w, &err);
    if (expect == NULL) {
        ck_assert_msg(st == GF_OK, "%s: %s", m, err.msg);
    } else {
        ck_assert_msg(st == GF_ERR_INVALID, "%s: accepted", m);
        for (size_t i = 0; expect[i] != NULL; i++)
            ck_assert_msg(strstr(err.msg, expect[i]) != NULL, "'%s' lacks '%s'", err.msg,
                          expect[i]);
        /* a real load refuses the same way */
        gf_fn_plan *plan;
        char *derived = gf_test_path(tmpdir, "dl-unused.derived");
        ck_assert_int_eq(gf_fn_prepare(k, mf, w, derived, &plan, &err), GF_ERR_INVALID);
        free(derived);
    }
    gf_manifest_free(mf);
    free(w);
}

#define EXPECT(...) ((const char *const[]){__VA_ARGS__, NULL})

/* THE UNUSED-WEIGHTS RULE: a tensor no kind used is a deploy error naming
 * it, unless ignore_weights lists it; ignored tensors are invisible. */
START_TEST(test_unused_weights)
{
    gf_err err;
    const gf_fn_kind *k, *k10;
    char *path = plugin_path("GF_PLUGIN_DERIVE"), *path10 = plugin_path("GF_PLUGIN_DERIVE_V10");
    ck_assert_msg(gf_fn_plugin_load(path, true, &k, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_fn_plugin_load(path10, true, &k10, &err) == GF_OK, "%s", err.msg);
    float W[4] = {1, 2, 3, 4}, B[2] = {0.5f, 0.25f}, M[2] = {0, 1};
    gf_st_wtensor ts[5] = {{"weight", GF_DT_F32, 2, (int64_t[]){2, 2}, W},
                           {"bias", GF_DT_F32, 1, (int64_t[]){2}, B},
                           {"bn.running_mean", GF_DT_F32, 1, (int64_t[]){2}, M},
                           {"cls.predictions.bias", GF_DT_F32, 1, (int64_t[]){2}, M},
                           {"cls.predictions.decoder.bias", GF_DT_F32, 1, (int64_t[]){2}, M}};
    /* everything used: the source of the derived parameter through weight_use */
    dl_validate(k, ts, 2, "", NULL);
    /* a plugin built for ABI 1.0 looked at it with weight_info: that counts */
    dl_validate(k10, ts, 2, "", NULL);
    /* left over: named, with what it looks like and the way out */
    dl_validate(k, ts, 3, "",
                EXPECT("tensor 'bn.running_mean' (a BatchNorm's statistics) is not used by kind "
                       "double_linear", "\"ignore_weights\""));
    dl_validate(k10, ts, 3, "", EXPECT("'bn.running_mean'"));
    dl_validate(k, ts, 5, "",
                EXPECT("'bn.running_mean'", "Remove such tensors from the file",
                       "; unused ('cls.predictions.bias', 'cls.predictions.decoder.bias': 3 in "
                       "all)"));
    /* listed in ignore_weights: exact names and prefixes */
    dl_validate(k, ts, 3, ",\"ignore_weights\":[\"bn.running_mean\"]", NULL);
    dl_validate(k, ts, 5, ",\"ignore_weights\":[\"bn.running_mean\",\"cls.*\"]", NULL);
    dl_validate(k, ts, 5, ",\"ignore_weights\":[\"cls.*\"]",
                EXPECT("tensor 'bn.running_mean'", "is not used"));
    dl_validate(k, ts, 4, ",\"ignore_weights\":[\"bn.running_mean\"]",
                EXPECT("'cls.predictions.bias' (a pre-training head"));
    /* an ignored tensor is invisible: ignoring one the kind needs is a
     * missing tensor */
    dl_validate(k, ts, 2, ",\"ignore_weights\":[\"b*\"]",
                EXPECT("weights have no tensor 'bias'"));
    free(path);
    free(path10);
}
END_TEST

/* BYTES through the ABI (1.5): the example `strings` plugin reads a BYTES
 * input on the host and answers a BYTES output (output_bytes) and an INT32
 * one (upload); the runtime checks what reaches it. */
START_TEST(test_bytes_plugin)
{
    gf_err err;
    const gf_fn_kind *k;
    char *so = plugin_path("GF_PLUGIN_STRINGS");
    ck_assert_msg(gf_fn_plugin_load(so, true, &k, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(gf_fn_kind_name(k), "strings");
    unsigned char table[256];
    for (int b = 0; b < 256; b++)
        table[b] = b >= 'a' && b <= 'z' ? (unsigned char)(b - 'a' + 'A') : (unsigned char)b;
    gf_st_wtensor ts[1] = {{"table", GF_DT_U8, 1, (int64_t[]){256}, table}};
    char *w = gf_test_path(tmpdir, "table.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, 1, NULL, 0, NULL), GF_OK);
    gf_manifest *mf = parse("{\"name\":\"s\",\"kind\":\"strings\",\"inputs\":[{\"name\":"
                            "\"text\",\"datatype\":\"BYTES\",\"shape\":[-1,2]}],\"outputs\":"
                            "[{\"name\":\"mapped\",\"datatype\":\"BYTES\",\"shape\":[-1,2]},"
                            "{\"name\":\"length\",\"datatype\":\"INT32\",\"shape\":[-1,2]}],"
                            "\"max_batch_size\":4}");
    ck_assert_msg(gf_fn_validate(k, mf, w, &err) == GF_OK, "%s", err.msg);
    /* "ab", "", "x\0yz", "Q" */
    static const unsigned char ser[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 4, 0, 0, 0,
                                        'x', 0,   'y', 'z', 1, 0, 0, 0, 'Q'};
    gf_tensor in;
    ck_assert_int_eq(gf_tensor_init_bytes(&in, 2, (int64_t[]){2, 2}, (void *)ser, sizeof ser,
                                          &err), GF_OK);
    rt r = rt_open(8);
    gf_fn_outputs out;
    ck_assert_msg(run_once(&r, k, mf, w, "s@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(out.n, 2);
    static const unsigned char up[] = {2, 0, 0, 0, 'A', 'B', 0, 0, 0, 0, 4, 0, 0, 0,
                                       'X', 0,   'Y', 'Z', 1, 0, 0, 0, 'Q'};
    ck_assert_int_eq(out.t[0].dtype, GF_DT_BYTES);
    ck_assert_int_eq(out.t[0].mem, GF_MEM_HOST);
    ck_assert_int_eq(out.t[0].shape[0], 2);
    ck_assert_uint_eq(out.t[0].nbytes, sizeof up);
    ck_assert(memcmp(out.t[0].data, up, sizeof up) == 0);
    const int32_t lens[4] = {2, 0, 4, 1};
    ck_assert_int_eq(out.t[1].dtype, GF_DT_I32);
    ck_assert(memcmp(out.t[1].data, lens, sizeof lens) == 0);
    gf_fn_outputs_free(&out);
    /* a serialization that does not hold the shape's elements never reaches the kind */
    in.shape[0] = 3;
    ck_assert_int_eq(run_once(&r, k, mf, w, "s@1", &in, 1, &out, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "input 'text': BYTES data of 23 bytes ends after 4 of its 6")
                  != NULL, "%s", err.msg);
    in.shape[0] = 2;
    in.nbytes = sizeof ser - 1;
    ck_assert_int_eq(run_once(&r, k, mf, w, "s@1", &in, 1, &out, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "BYTES element 3 says 1 bytes but only 0") != NULL, "%s",
                  err.msg);
    rt_close(&r);
    gf_manifest_free(mf);
    /* the kind checks its manifest: a numeric input is refused at deploy */
    mf = parse("{\"name\":\"s\",\"kind\":\"strings\",\"inputs\":[{\"name\":\"text\","
               "\"datatype\":\"FP32\",\"shape\":[-1]}],\"outputs\":[{\"name\":\"mapped\","
               "\"datatype\":\"BYTES\",\"shape\":[-1]},{\"name\":\"length\",\"datatype\":"
               "\"INT32\",\"shape\":[-1]}]}");
    ck_assert_int_eq(gf_fn_validate(k, mf, w, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "must be BYTES") != NULL, "%s", err.msg);
    gf_manifest_free(mf);
    free(w);
    free(so);
}
END_TEST

/* Device memory read back during infer (ABI 1.7 api->download): the test
 * plugin `rowmax` reads its input and a parameter on the host. */
START_TEST(test_download)
{
    gf_err err;
    const gf_fn_kind *k;
    char *so = plugin_path("GF_PLUGIN_DOWNLOAD");
    ck_assert_msg(gf_fn_plugin_load(so, true, &k, &err) == GF_OK, "%s", err.msg);
    float scale = 2.0f;
    gf_st_wtensor ts[1] = {{"scale", GF_DT_F32, 1, (int64_t[]){1}, &scale}};
    char *w = gf_test_path(tmpdir, "scale.safetensors");
    ck_assert_int_eq(gf_st_write(w, ts, 1, NULL, 0, NULL), GF_OK);
    gf_manifest *mf = parse("{\"name\":\"r\",\"kind\":\"rowmax\",\"inputs\":[{\"name\":"
                            "\"x\",\"datatype\":\"FP32\",\"shape\":[-1,3]}],\"outputs\":"
                            "[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1]}],"
                            "\"max_batch_size\":4}");
    ck_assert_msg(gf_fn_validate(k, mf, w, &err) == GF_OK, "%s", err.msg);
    float x[6] = {1, 5, 2, -3, -1, -2};
    gf_tensor in;
    ck_assert_int_eq(gf_tensor_init(&in, GF_DT_F32, 2, (int64_t[]){2, 3}, x, GF_MEM_HOST, -1,
                                    &err), GF_OK);
    rt r = rt_open(8);
    gf_fn_outputs out;
    ck_assert_msg(run_once(&r, k, mf, w, "r@1", &in, 1, &out, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(out.n, 1);
    const float want[2] = {10, -2};
    ck_assert_int_eq(out.t[0].shape[0], 2);
    ck_assert(memcmp(out.t[0].data, want, sizeof want) == 0);
    gf_fn_outputs_free(&out);
    rt_close(&r);
    gf_manifest_free(mf);
    free(w);
    free(so);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("functions_runtime");
    TCase *tc = tcase_create("runtime");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_mlp_matches_reference);
    tcase_add_test(tc, test_outputs_into_host_memory_given);
    tcase_add_test(tc, test_mlp_validation_errors);
    tcase_add_test(tc, test_infer_input_errors_and_workspace_eviction);
    tcase_add_test(tc, test_plugins);
    tcase_add_test(tc, test_bytes_plugin);
    tcase_add_test(tc, test_download);
    tcase_add_test(tc, test_config_accessor_and_companions);
    tcase_add_test(tc, test_derived_parameters);
    tcase_add_test(tc, test_unused_weights);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
