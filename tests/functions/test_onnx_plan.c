/* The ONNX plan compiler (functions/onnx/plan.c, plan_fuse.c) and the
 * graph's stored form (graph_json.c), on graphs built here with the graph
 * API: constant folding of a torch-style shape chain, the liveness arena
 * (reuse, and the exact peak), fusion, the order of the weights, the JSON
 * form read back to the same graph, topological order, and plans per batch
 * size. Runs on the cpu backend's kernel
 * table where a plan is executed. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/buf.h"
#include "functions/onnx/graph.h"
#include "functions/onnx/plan.h"
#include "testutil.h"

/* ---- building graphs ------------------------------------------------------------- */

static gf_onnx_graph *graph(void)
{
    gf_onnx_graph *g;
    ck_assert(gf_onnx_graph_new(&g, NULL) == GF_OK);
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = strdup("");
    g->opsets[0].version = 17;
    g->n_opsets = 1;
    g->producer = strdup("test");
    g->inputs = calloc(8, sizeof *g->inputs);
    g->outputs = calloc(8, sizeof *g->outputs);
    return g;
}

static int32_t value(gf_onnx_graph *g, const char *name, gf_onnx_vkind kind, gf_dtype dt,
                     int32_t rank, const int64_t *shape)
{
    int32_t v;
    ck_assert(gf_onnx_value_add(g, name, kind, &v, NULL) == GF_OK);
    g->values[v].dtype = dt;
    g->values[v].rank = rank;
    for (int32_t k = 0; k < rank; k++)
        g->values[v].shape[k] = shape[k];
    if (kind == GF_ONNX_V_INPUT)
        g->inputs[g->n_inputs++] = v;
    return v;
}

/* A node of op type with inputs and outputs named (created as node values
 * when they do not exist); attrs: up to one int attribute (name, value). */
static void node(gf_onnx_graph *g, const char *op, const char *const *in, int n_in,
                 const char *const *out, int n_out, const char *attr, int64_t ival)
{
    for (int k = 0; k < n_out; k++)
        if (gf_onnx_value_find(g, out[k]) < 0)
            value(g, out[k], GF_ONNX_V_NODE, GF_DT_INVALID, -1, NULL);
    gf_onnx_node *n = gf_onnx_node_add(g, NULL);
    ck_assert_ptr_nonnull(n);
    n->name = strdup(out[0]);
    n->op_type = strdup(op);
    n->domain = strdup("");
    n->opset = 17;
    n->in = malloc(sizeof *n->in * (size_t)(n_in + 1));
    n->out = malloc(sizeof *n->out * (size_t)(n_out + 1));
    for (int k = 0; k < n_in; k++) {
        n->in[k] = gf_onnx_value_find(g, in[k]);
        ck_assert_int_ge(n->in[k], 0);
    }
    for (int k = 0; k < n_out; k++)
        n->out[k] = gf_onnx_value_find(g, out[k]);
    n->n_in = n_in;
    n->n_out = n_out;
    n->attrs = calloc(1, sizeof *n->attrs);
    if (attr != NULL) {
        n->attrs[0].name = strdup(attr);
        n->attrs[0].type = GF_ONNX_ATTR_INT;
        n->attrs[0].i = ival;
        n->n_attrs = 1;
    }
}

#define N(...) (const char *const[]){__VA_ARGS__}, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *))

static void output(gf_onnx_graph *g, const char *name)
{
    g->outputs[g->n_outputs++] = gf_onnx_value_find(g, name);
}

/* An initializer with a host copy; its parameter index is its order. */
static int32_t init(gf_onnx_graph *g, const char *name, gf_dtype dt, int32_t rank,
                    const int64_t *shape)
{
    return value(g, name, GF_ONNX_V_INIT, dt, rank, shape);
}

static gf_onnx_model *model_of(gf_onnx_graph *g, int32_t n_host, const int32_t *host_v,
                               const void *const *host_data, const size_t *host_bytes)
{
    ck_assert(gf_onnx_graph_wire(g, NULL) == GF_OK);
    gf_onnx_model *m;
    gf_err e;
    ck_assert_msg(gf_onnx_model_new(g, &m, &e) == GF_OK, "%s", e.msg);
    int32_t order[64];
    int32_t n = gf_onnx_init_order(gf_onnx_model_graph(m), order);
    for (int32_t i = 0; i < n; i++)
        gf_onnx_model_set_param(m, order[i], (size_t)i);
    for (int32_t i = 0; i < n_host; i++)
        ck_assert(gf_onnx_model_set_host(m, host_v[i], host_data[i], host_bytes[i], NULL) ==
                  GF_OK);
    return m;
}

/* ---- folding ------------------------------------------------------------------------ */

/* torch's flatten of x [N, C, H, W] as it exports it: Shape -> Gather(0) ->
 * Unsqueeze -> Concat with [-1] -> Reshape. Everything but the Reshape folds
 * (which is a view), so the plan has no device step at all. */
START_TEST(test_shape_chain_folds)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 4, (int64_t[]){-1, 3, 4, 5});
    int64_t one = 1;
    int32_t i0 = init(g, "zero", GF_DT_I64, 0, NULL);
    int32_t ax = init(g, "axes", GF_DT_I64, 1, &one);
    int32_t m1 = init(g, "minus1", GF_DT_I64, 1, &one);
    node(g, "Shape", N("x"), N("shape"), NULL, 0);
    node(g, "Gather", N("shape", "zero"), N("n"), "axis", 0);
    node(g, "Unsqueeze", N("n", "axes"), N("n1"), NULL, 0);
    node(g, "Concat", N("n1", "minus1"), N("target"), "axis", 0);
    node(g, "Reshape", N("x", "target"), N("y"), NULL, 0);
    output(g, "y");
    int64_t zero = 0, minus1 = -1;
    gf_onnx_model *m = model_of(g, 3, (int32_t[]){i0, ax, m1},
                                (const void *[]){&zero, &zero, &minus1},
                                (size_t[]){8, 8, 8});
    gf_onnx_plan *p;
    gf_err e;
    ck_assert_msg(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{7, 3, 4, 5}}, &p, &e) ==
                  GF_OK, "%s", e.msg);
    const gf_onnx_tinfo *y = gf_onnx_plan_output(p, 0);
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->shape[0], 7);
    ck_assert_int_eq(y->shape[1], 60);
    /* Shape, Gather, Unsqueeze and Concat folded; the Reshape is a view of
     * the input: one step, which only names the view */
    ck_assert_int_le(gf_onnx_plan_steps(p), 1);
    ck_assert_uint_eq(gf_onnx_plan_arena_bytes(p), 0);
    gf_onnx_plan_free(p);
    /* another batch size: another plan, folded for it */
    ck_assert(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{2, 3, 4, 5}}, &p, &e) ==
              GF_OK);
    ck_assert_int_eq(gf_onnx_plan_output(p, 0)->shape[0], 2);
    gf_onnx_plan_free(p);
    gf_onnx_model_free(m);
}
END_TEST

/* A Reshape whose target is a graph input: that input is read on the host,
 * and each set of its values makes its own plan. */
START_TEST(test_host_read_input)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 2, (int64_t[]){2, 6});
    value(g, "shape", GF_ONNX_V_INPUT, GF_DT_I64, 1, (int64_t[]){2});
    node(g, "Relu", N("x"), N("r"), NULL, 0);
    node(g, "Reshape", N("r", "shape"), N("y"), NULL, 0);
    output(g, "y");
    gf_onnx_model *m = model_of(g, 0, NULL, NULL, NULL);
    ck_assert(!gf_onnx_model_host_input(m, 0));
    ck_assert(gf_onnx_model_host_input(m, 1));
    gf_onnx_plan *p;
    gf_err e;
    const int64_t shapes[2][GF_MAX_RANK] = {{2, 6}, {2}};
    /* without the values: refused, naming the input */
    ck_assert(gf_onnx_plan_compile(m, shapes, &p, &e) != GF_OK);
    ck_assert_msg(strstr(e.msg, "'shape'") != NULL, "%s", e.msg);
    int64_t target[2] = {3, -1};
    gf_onnx_const v = {.dtype = GF_DT_I64, .rank = 1, .shape = {2}, .nbytes = 16,
                       .data = target};
    const gf_onnx_const *values[2] = {NULL, &v};
    ck_assert_msg(gf_onnx_plan_compile_with(m, shapes, values, &p, &e) == GF_OK, "%s", e.msg);
    target[0] = 0; /* copied: the plan does not keep the caller's values */
    ck_assert_int_eq(gf_onnx_plan_output(p, 0)->shape[0], 3);
    ck_assert_int_eq(gf_onnx_plan_output(p, 0)->shape[1], 4);
    gf_onnx_plan_free(p);
    gf_onnx_model_free(m);
}
END_TEST

/* ---- liveness ------------------------------------------------------------------------ */

/* x [-1, 1000] -> a = Relu(x) -> b = Exp(a) -> c = Neg(b) -> y = a - c:
 * a stays alive while b and c are made. */
static gf_onnx_graph *late_use_graph(void)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 2, (int64_t[]){-1, 1000});
    node(g, "Relu", N("x"), N("a"), NULL, 0);
    node(g, "Exp", N("a"), N("b"), NULL, 0);
    node(g, "Neg", N("b"), N("c"), NULL, 0);
    node(g, "Sub", N("a", "c"), N("y"), NULL, 0);
    output(g, "y");
    return g;
}

/* x -> Relu -> Sigmoid -> Tanh -> ... (8 ops) -> y: each intermediate dies
 * when the next one is made, so two blocks suffice however long the chain;
 * the peak is exactly two tensors of 1000 floats (256-byte aligned). */
START_TEST(test_liveness_reuses_blocks)
{
    static const char *const ops[8] = {"Relu", "Sigmoid", "Tanh", "Abs",
                                       "Neg",  "Exp",     "Sqrt", "Relu"};
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 2, (int64_t[]){-1, 1000});
    char prev[8] = "x", cur[8];
    for (int i = 0; i < 8; i++) {
        snprintf(cur, sizeof cur, i == 7 ? "y" : "t%d", i);
        node(g, ops[i], (const char *const[]){prev}, 1, (const char *const[]){cur}, 1, NULL,
             0);
        strcpy(prev, cur);
    }
    output(g, "y");
    gf_onnx_model *m = model_of(g, 0, NULL, NULL, NULL);
    gf_onnx_plan *p;
    ck_assert(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{1, 1000}}, &p, NULL) ==
              GF_OK);
    ck_assert_int_eq(gf_onnx_plan_steps(p), 8);
    /* y is written in place into the output; t0..t6 alternate between two blocks */
    size_t block = (1000 * 4 + GF_ONNX_ARENA_ALIGN - 1) / GF_ONNX_ARENA_ALIGN *
                   GF_ONNX_ARENA_ALIGN;
    ck_assert_uint_eq(gf_onnx_plan_arena_bytes(p), 2 * block);
    gf_onnx_plan_free(p);
    /* a value used late stays alive: x -> a -> b -> c, y = a + c needs a
     * third block while b and c are live with a */
    g = late_use_graph();
    gf_onnx_model *m2 = model_of(g, 0, NULL, NULL, NULL);
    ck_assert(gf_onnx_plan_compile(m2, (const int64_t[][GF_MAX_RANK]){{1, 1000}}, &p, NULL) ==
              GF_OK);
    ck_assert_uint_eq(gf_onnx_plan_arena_bytes(p), 3 * block);
    gf_onnx_plan_free(p);
    gf_onnx_model_free(m2);
    gf_onnx_model_free(m);
}
END_TEST

/* ---- fusion, run on the cpu backend ---------------------------------------------------- */

typedef struct {
    gf_backend *be;
    const float *w;   /* parameters, on the backend */
    void **params;
} run_env;

static gf_status env_param(void *ctx, size_t index, void **out, gf_err *err)
{
    (void)err;
    *out = ((run_env *)ctx)->params[index];
    return GF_OK;
}

static gf_status env_upload(void *ctx, void *dst, const void *src, size_t bytes, gf_err *err)
{
    (void)ctx;
    (void)err;
    memcpy(dst, src, bytes); /* the cpu backend's device memory is host memory */
    return GF_OK;
}

/* Run plan p on the cpu backend: params[n_params] (bytes each), input x,
 * output y (host arrays of nx / ny floats, copied in and out). */
static void run_on_cpu(gf_onnx_plan *p, int n_params, const void *const *params,
                       const size_t *param_bytes, const float *x, size_t nx, float *y, size_t ny)
{
    gf_backend *be;
    gf_backend_config cfg = {.device = "cpu", .device_budget = 64 << 20};
    ck_assert(gf_backend_open(&cfg, &be, NULL) == GF_OK);
    void *dp[4] = {NULL}, *dx, *dy, *arena = NULL;
    ck_assert_int_le(n_params, 4);
    for (int i = 0; i < n_params; i++) {
        ck_assert(gf_dev_alloc(be, param_bytes[i], &dp[i], NULL) == GF_OK);
        memcpy(dp[i], params[i], param_bytes[i]);
    }
    ck_assert(gf_dev_alloc(be, nx * sizeof *x, &dx, NULL) == GF_OK);
    ck_assert(gf_dev_alloc(be, ny * sizeof *y, &dy, NULL) == GF_OK);
    if (gf_onnx_plan_arena_bytes(p) > 0)
        ck_assert(gf_dev_alloc(be, gf_onnx_plan_arena_bytes(p), &arena, NULL) == GF_OK);
    memcpy(dx, x, nx * sizeof *x);
    run_env re = {be, NULL, dp};
    gf_onnx_env env = {.ctx = &re, .k = gf_backend_kernels(be),
                       .s = gf_backend_stream(be, GF_STREAM_COMPUTE), .param = env_param,
                       .upload = env_upload};
    gf_err e;
    ck_assert_msg(gf_onnx_plan_run(p, &env, (void *[]){dx}, (void *[]){dy}, arena, &e) == GF_OK,
                  "%s", e.msg);
    ck_assert(env.k->sync(env.k->ctx, env.s) == 0);
    memcpy(y, dy, ny * sizeof *y);
    for (int i = 0; i < n_params; i++)
        gf_dev_free(be, dp[i]);
    gf_dev_free(be, dx);
    gf_dev_free(be, dy);
    if (arena != NULL)
        gf_dev_free(be, arena);
    gf_backend_free(be);
}

/* Conv -> Add(residual x) -> Relu is one step, and computes what the three
 * ops compute; Conv -> Sigmoid, Mul (SiLU) is one step too. */
START_TEST(test_conv_fusions)
{
    for (int silu = 0; silu < 2; silu++) {
        gf_onnx_graph *g = graph();
        value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 4, (int64_t[]){-1, 2, 5, 5});
        int32_t wv = init(g, "w", GF_DT_F32, 4, (int64_t[]){2, 2, 1, 1});
        node(g, "Conv", N("x", "w"), N("c"), NULL, 0);
        if (silu) {
            node(g, "Sigmoid", N("c"), N("s"), NULL, 0);
            node(g, "Mul", N("c", "s"), N("y"), NULL, 0);
        } else {
            node(g, "Add", N("c", "x"), N("r"), NULL, 0);
            node(g, "Relu", N("r"), N("y"), NULL, 0);
        }
        output(g, "y");
        float w[4] = {1.0f, -2.0f, 0.5f, 3.0f};
        gf_onnx_model *m = model_of(g, 1, (int32_t[]){wv}, (const void *[]){w},
                                    (size_t[]){sizeof w});
        gf_onnx_plan *p;
        gf_err e;
        ck_assert_msg(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{1, 2, 5, 5}}, &p,
                                           &e) == GF_OK, "%s", e.msg);
        ck_assert_int_eq(gf_onnx_plan_steps(p), 1);
        /* run it and compare with the three ops by hand */
        float x[50], y[50];
        for (int i = 0; i < 50; i++)
            x[i] = (float)((i * 7) % 11) - 5.0f;
        run_on_cpu(p, 1, (const void *[]){w}, (size_t[]){sizeof w}, x, 50, y, 50);
        for (int o = 0; o < 2; o++)
            for (int i = 0; i < 25; i++) {
                double cv = w[o * 2] * x[i] + w[o * 2 + 1] * x[25 + i];
                double want = silu ? cv / (1 + exp(-cv)) : fmax(cv + x[o * 25 + i], 0);
                ck_assert_msg(fabs(y[o * 25 + i] - want) <= 1e-5 * (1 + fabs(want)),
                              "silu %d: y[%d] = %g, expected %g", silu, o * 25 + i,
                              y[o * 25 + i], want);
            }
        gf_onnx_plan_free(p);
        gf_onnx_model_free(m);
    }
}
END_TEST

/* Conv weights packed by the backend (gf_onnx_model_set_packed): the plan
 * keeps a Conv's output channels last where every reader is a packed Conv
 * or a global pooling, NCHW where another op reads it, and computes what
 * the unpacked plan computes. x -> Conv+Relu (a1) -> Sigmoid -> Conv + a1
 * + Relu (r) -> Conv + r -> GlobalAveragePool. */
START_TEST(test_packed_convs_channels_last)
{
    gf_backend *be;
    gf_backend_config cfg = {.device = "cpu", .device_budget = 64 << 20};
    ck_assert(gf_backend_open(&cfg, &be, NULL) == GF_OK);
    const gf_kernels *k = gf_backend_kernels(be);
    gf_conv2d_ex_params cp = {1, 8, 4, 4, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1};
    int64_t bytes = GF_KERNELS_HAS(k, conv2d_pack_size) ? k->conv2d_pack_size(k->ctx, &cp) : 0;
    if (bytes == 0) {
        printf("packed convolutions: this backend has no packed weights (oneDNN off)\n");
        gf_backend_free(be);
        return;
    }
    float w[3][64], x[128], want[16], got[16];
    for (int i = 0; i < 3 * 64; i++)
        w[i / 64][i % 64] = (float)((i * 37) % 17 - 8) / 16.0f;
    for (int i = 0; i < 128; i++)
        x[i] = (float)((i * 11) % 13 - 6) / 4.0f;
    void *packed[3];
    for (int i = 0; i < 3; i++) {
        packed[i] = malloc((size_t)bytes);
        ck_assert(k->conv2d_pack(k->ctx, packed[i], &cp, w[i]) == 0);
    }
    for (int pack = 0; pack < 2; pack++) {
        gf_onnx_graph *g = graph();
        value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 4, (int64_t[]){-1, 8, 4, 4});
        int32_t wv[3];
        wv[0] = init(g, "w1", GF_DT_F32, 4, (int64_t[]){8, 8, 1, 1});
        wv[1] = init(g, "w2", GF_DT_F32, 4, (int64_t[]){8, 8, 1, 1});
        wv[2] = init(g, "w3", GF_DT_F32, 4, (int64_t[]){8, 8, 1, 1});
        node(g, "Conv", N("x", "w1"), N("c1"), NULL, 0);
        node(g, "Relu", N("c1"), N("a1"), NULL, 0);
        node(g, "Sigmoid", N("a1"), N("s1"), NULL, 0);
        node(g, "Conv", N("s1", "w2"), N("c2"), NULL, 0);
        node(g, "Add", N("c2", "a1"), N("r2"), NULL, 0);
        node(g, "Relu", N("r2"), N("r"), NULL, 0);
        node(g, "Conv", N("r", "w3"), N("c3"), NULL, 0);
        node(g, "Add", N("c3", "r"), N("r3"), NULL, 0);
        node(g, "GlobalAveragePool", N("r3"), N("y"), NULL, 0);
        output(g, "y");
        gf_onnx_model *m = model_of(g, 0, NULL, NULL, NULL);
        for (int i = 0; pack && i < 3; i++)
            gf_onnx_model_set_packed(m, wv[i], (size_t)i);
        gf_onnx_plan *p;
        gf_err e;
        ck_assert_msg(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{2, 8, 4, 4}}, &p,
                                           &e) == GF_OK, "%s", e.msg);
        ck_assert_int_eq(gf_onnx_plan_steps(p), 5);
        /* r and r3 stay NHWC; a1 (read by Sigmoid) does not */
        ck_assert_int_eq(gf_onnx_plan_nhwc_steps(p), pack ? 2 : 0);
        float xx[256], *y = pack ? got : want;
        memcpy(xx, x, sizeof x);
        memcpy(xx + 128, x, sizeof x);
        if (pack)
            run_on_cpu(p, 3, (const void *const *)packed, (size_t[]){bytes, bytes, bytes}, xx,
                       256, y, 16);
        else
            run_on_cpu(p, 3, (const void *[]){w[0], w[1], w[2]},
                       (size_t[]){sizeof w[0], sizeof w[1], sizeof w[2]}, xx, 256, y, 16);
        gf_onnx_plan_free(p);
        gf_onnx_model_free(m);
    }
    for (int i = 0; i < 16; i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i])),
                      "y[%d] = %g packed, %g not", i, got[i], want[i]);
    for (int i = 0; i < 3; i++)
        free(packed[i]);
    gf_backend_free(be);
}
END_TEST

/* A value with another use, or a graph output, is not fused away. */
START_TEST(test_no_fusion_when_used_twice)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 4, (int64_t[]){-1, 2, 3, 3});
    int32_t wv = init(g, "w", GF_DT_F32, 4, (int64_t[]){2, 2, 1, 1});
    node(g, "Conv", N("x", "w"), N("c"), NULL, 0);
    node(g, "Relu", N("c"), N("y"), NULL, 0);
    output(g, "y");
    output(g, "c"); /* the conv's own output is wanted too */
    float w[4] = {1, 2, 3, 4};
    gf_onnx_model *m = model_of(g, 1, (int32_t[]){wv}, (const void *[]){w},
                                (size_t[]){sizeof w});
    gf_onnx_plan *p;
    ck_assert(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{1, 2, 3, 3}}, &p, NULL) ==
              GF_OK);
    ck_assert_int_eq(gf_onnx_plan_steps(p), 2);
    gf_onnx_plan_free(p);
    gf_onnx_model_free(m);
}
END_TEST

/* ---- order, shapes per batch size, errors ---------------------------------------------- */

/* Nodes listed consumer first (a file may list them in any order; wiring
 * sorts them topologically): y = -(relu(x) * 2) still runs in order. */
START_TEST(test_topological_order)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 2, (int64_t[]){-1, 3});
    int32_t two = init(g, "two", GF_DT_F32, 0, NULL);
    value(g, "r", GF_ONNX_V_NODE, GF_DT_INVALID, -1, NULL);
    value(g, "m", GF_ONNX_V_NODE, GF_DT_INVALID, -1, NULL);
    node(g, "Neg", N("m"), N("y"), NULL, 0);
    node(g, "Mul", N("r", "two"), N("m"), NULL, 0);
    node(g, "Relu", N("x"), N("r"), NULL, 0);
    output(g, "y");
    float twof = 2.0f;
    gf_onnx_model *m = model_of(g, 1, (int32_t[]){two}, (const void *[]){&twof},
                                (size_t[]){4});
    gf_onnx_plan *p;
    gf_err e;
    ck_assert_msg(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{2, 3}}, &p, &e) ==
                  GF_OK, "%s", e.msg);
    float x[6] = {-1, 0, 1, 2, -3, 0.5f}, y[6];
    run_on_cpu(p, 1, (const void *[]){&twof}, (size_t[]){4}, x, 6, y, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(y[i], -(x[i] > 0 ? x[i] : 0.0f) * 2.0f);
    gf_onnx_plan_free(p);
    gf_onnx_model_free(m);
    /* a cycle cannot be ordered: refused when the graph is wired */
    g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 1, (int64_t[]){3});
    value(g, "b", GF_ONNX_V_NODE, GF_DT_INVALID, -1, NULL);
    node(g, "Add", N("x", "b"), N("a"), NULL, 0);
    node(g, "Relu", N("a"), N("b"), NULL, 0);
    output(g, "a");
    ck_assert(gf_onnx_graph_wire(g, &e) != GF_OK);
    ck_assert_msg(strstr(e.msg, "cycle") != NULL, "%s", e.msg);
    gf_onnx_graph_free(g);
}
END_TEST

/* One plan per batch size: shapes resolved for it, the arena's peak scaled
 * with it (known before any run); an input shape the graph does not allow
 * is refused naming the input. */
START_TEST(test_plans_per_batch_size)
{
    gf_onnx_graph *g = late_use_graph();
    gf_onnx_model *m = model_of(g, 0, NULL, NULL, NULL);
    gf_err e;
    for (int64_t n = 1; n <= 16; n *= 4) {
        gf_onnx_plan *p;
        ck_assert_msg(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{n, 1000}}, &p,
                                           &e) == GF_OK, "%s", e.msg);
        size_t block = ((size_t)n * 4000 + GF_ONNX_ARENA_ALIGN - 1) / GF_ONNX_ARENA_ALIGN *
                       GF_ONNX_ARENA_ALIGN;
        ck_assert_uint_eq(gf_onnx_plan_arena_bytes(p), 3 * block);
        ck_assert_int_eq(gf_onnx_plan_output(p, 0)->shape[0], n);
        ck_assert_int_eq(gf_onnx_plan_output(p, 0)->shape[1], 1000);
        float x[4] = {-1, 0.5f, 2, 0};
        if (n == 1) { /* and it computes y = a + exp(a), a = relu(x) */
            float xs[1000], ys[1000];
            for (int i = 0; i < 1000; i++)
                xs[i] = x[i % 4];
            run_on_cpu(p, 0, NULL, NULL, xs, 1000, ys, 1000);
            for (int i = 0; i < 1000; i++) {
                double a = xs[i] > 0 ? xs[i] : 0;
                ck_assert(fabs(ys[i] - (a + exp(a))) <= 1e-5 * (1 + a + exp(a)));
            }
        }
        gf_onnx_plan_free(p);
    }
    gf_onnx_plan *p = NULL;
    ck_assert(gf_onnx_plan_compile(m, (const int64_t[][GF_MAX_RANK]){{2, 999}}, &p, &e) !=
              GF_OK);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(e.msg, "'x'") != NULL, "%s", e.msg);
    gf_onnx_model_free(m);
}
END_TEST

/* ---- the weights' order and the stored form ------------------------------------------- */

/* Initializers in order of first use (the file order does not matter), and
 * the JSON form reads back to a graph that writes the same JSON. */
START_TEST(test_init_order_and_json_round_trip)
{
    gf_onnx_graph *g = graph();
    value(g, "x", GF_ONNX_V_INPUT, GF_DT_F32, 2, (int64_t[]){-1, 4});
    int32_t b2 = init(g, "b2", GF_DT_F32, 1, (int64_t[]){4});
    int32_t w1 = init(g, "w1", GF_DT_F16, 2, (int64_t[]){4, 4});
    init(g, "unused", GF_DT_F32, 1, (int64_t[]){3});
    int32_t w2 = init(g, "w2", GF_DT_BF16, 2, (int64_t[]){4, 4});
    node(g, "MatMul", N("x", "w1"), N("h"), NULL, 0);
    node(g, "MatMul", N("h", "w2"), N("h2"), NULL, 0);
    node(g, "Add", N("h2", "b2"), N("y"), NULL, 0);
    output(g, "y");
    ck_assert(gf_onnx_graph_wire(g, NULL) == GF_OK);
    int32_t order[16];
    ck_assert_int_eq(gf_onnx_init_order(g, order), 3);
    ck_assert_int_eq(order[0], w1);
    ck_assert_int_eq(order[1], w2);
    ck_assert_int_eq(order[2], b2);
    gf_buf j1, j2;
    gf_buf_init(&j1);
    gf_buf_init(&j2);
    ck_assert(gf_onnx_graph_to_json(g, &j1, NULL) == GF_OK);
    gf_onnx_graph *back;
    gf_err e;
    ck_assert_msg(gf_onnx_graph_from_json(j1.data, j1.len, &back, &e) == GF_OK, "%s", e.msg);
    ck_assert(gf_onnx_graph_to_json(back, &j2, NULL) == GF_OK);
    ck_assert_uint_eq(j1.len, j2.len);
    ck_assert(memcmp(j1.data, j2.data, j1.len) == 0);
    ck_assert_int_eq(back->n_nodes, 3);
    ck_assert_str_eq(back->nodes[2].op_type, "Add");
    ck_assert_int_eq(back->values[gf_onnx_value_find(back, "w2")].dtype, GF_DT_BF16);
    /* a stored form that lies is refused before anything uses it */
    char *bad = strdup(j1.data);
    char *at = strstr(bad, "\"MatMul\"");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"MatMu\"", 8);
    gf_onnx_graph *bg = NULL;
    if (gf_onnx_graph_from_json(bad, strlen(bad), &bg, &e) == GF_OK) {
        gf_onnx_model *bm;
        ck_assert(gf_onnx_model_new(bg, &bm, &e) != GF_OK); /* unknown op when bound */
    }
    size_t half = j1.len / 2;
    ck_assert(gf_onnx_graph_from_json(j1.data, half, &bg, &e) != GF_OK);
    free(bad);
    gf_buf_deinit(&j1);
    gf_buf_deinit(&j2);
    gf_onnx_graph_free(back);
    gf_onnx_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("functions_onnx_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, test_shape_chain_folds);
    tcase_add_test(tc, test_host_read_input);
    tcase_add_test(tc, test_liveness_reuses_blocks);
    tcase_add_test(tc, test_conv_fusions);
    tcase_add_test(tc, test_packed_convs_channels_last);
    tcase_add_test(tc, test_no_fusion_when_used_twice);
    tcase_add_test(tc, test_init_order_and_json_round_trip);
    tcase_add_test(tc, test_topological_order);
    tcase_add_test(tc, test_plans_per_batch_size);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
