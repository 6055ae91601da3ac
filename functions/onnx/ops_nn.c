/* gpufaas — ONNX ops of neural networks: Conv, pooling, normalisation,
 * Gemm, MatMul, Softmax, reductions (functions/onnx). */
#include <inttypes.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

#define W_MASK ((1u << GF_DT_F32) | (1u << GF_DT_F16) | (1u << GF_DT_BF16))

static gf_status need_f32(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *t, const char *what)
{
    if (t->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "%s is %s; gpufaas computes this op in F32",
                            what, gf_dtype_st_name(t->dtype));
    return GF_OK;
}

static gf_status need_w(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *t, const char *what)
{
    if (!((1u << t->dtype) & W_MASK))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "%s is %s; weights may be F32, F16 or BF16",
                            what, gf_dtype_st_name(t->dtype));
    return GF_OK;
}

/* ---- window geometry (Conv, MaxPool, AveragePool) ------------------------------- */

typedef struct {
    int32_t nd;                 /* spatial dims: 1 or 2 */
    int64_t in[2], k[2], stride[2], dil[2], pad_b[2], pad_e[2], out[2];
} window;

/* Reads kernel_shape (or kshape), strides, dilations, pads, auto_pad,
 * ceil_mode and computes the output extent. */
static gf_status window_of(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, const int64_t *kshape,
                           bool ceil_ok, window *w)
{
    const gf_onnx_node *n = c->n;
    int32_t nd = x->rank - 2;
    if (nd < 1 || nd > 2)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "a %d-d window (gpufaas does 1-d and 2-d)",
                            nd);
    w->nd = nd;
    size_t nk, ns, ndl, np;
    const int64_t *ks = gf_onnx_attr_ints(n, "kernel_shape", &nk);
    const int64_t *st = gf_onnx_attr_ints(n, "strides", &ns);
    const int64_t *dl = gf_onnx_attr_ints(n, "dilations", &ndl);
    const int64_t *pd = gf_onnx_attr_ints(n, "pads", &np);
    if ((ks != NULL && nk != (size_t)nd) || (st != NULL && ns != (size_t)nd) ||
        (dl != NULL && ndl != (size_t)nd) || (pd != NULL && np != 2 * (size_t)nd))
        return gf_onnx_fail(c, GF_ERR_INVALID, "kernel_shape, strides, dilations or pads do not "
                            "match the input's %d spatial dims", nd);
    if (ks == NULL && kshape == NULL)
        return gf_onnx_fail(c, GF_ERR_INVALID, "kernel_shape is required");
    int ceil_mode = (int)gf_onnx_attr_int(n, "ceil_mode", 0);
    if (ceil_mode && !ceil_ok)
        return gf_onnx_fail(c, GF_ERR_INVALID, "ceil_mode");
    const char *ap = gf_onnx_attr_str(n, "auto_pad", "NOTSET");
    for (int32_t i = 0; i < nd; i++) {
        w->in[i] = x->shape[2 + i];
        w->k[i] = ks != NULL ? ks[i] : kshape[i];
        w->stride[i] = st != NULL ? st[i] : 1;
        w->dil[i] = dl != NULL ? dl[i] : 1;
        w->pad_b[i] = pd != NULL ? pd[i] : 0;
        w->pad_e[i] = pd != NULL ? pd[nd + i] : 0;
        if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1 || w->pad_b[i] < 0 ||
            w->pad_e[i] < 0 || w->k[i] > (1 << 20) || w->stride[i] > (1 << 20) ||
            w->dil[i] > (1 << 20) || w->pad_b[i] > (1 << 20) || w->pad_e[i] > (1 << 20) ||
            w->in[i] > (INT64_C(1) << 30))
            return gf_onnx_fail(c, GF_ERR_INVALID, "window attributes out of range");
        if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
            int64_t out = (w->in[i] + w->stride[i] - 1) / w->stride[i];
            int64_t span = w->dil[i] * (w->k[i] - 1) + 1;
            int64_t total = (out - 1) * w->stride[i] + span - w->in[i];
            total = total < 0 ? 0 : total;
            w->pad_b[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            w->pad_e[i] = total - w->pad_b[i];
        } else if (strcmp(ap, "VALID") == 0) {
            w->pad_b[i] = w->pad_e[i] = 0;
        } else if (strcmp(ap, "NOTSET") != 0) {
            return gf_onnx_fail(c, GF_ERR_INVALID, "auto_pad '%.16s'", ap);
        }
        w->out[i] = gf_window_out(w->in[i], w->k[i], w->stride[i], w->pad_b[i], w->pad_e[i],
                                  w->dil[i], ceil_mode);
        if (w->out[i] < 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "the window (%" PRId64 ") does not fit the "
                                "padded input (%" PRId64 ")", w->k[i], w->in[i]);
    }
    return GF_OK;
}

/* The geometry fields gf_conv2d_ex_params and gf_pool2d_ex_params share, from
 * a window (1-d: h = kh = 1). */
#define WINDOW_FIELDS(w, two)                                                                   \
    .h = (two) ? (w).in[0] : 1, .w = (two) ? (w).in[1] : (w).in[0],                             \
    .kh = (two) ? (w).k[0] : 1, .kw = (two) ? (w).k[1] : (w).k[0],                              \
    .stride_h = (two) ? (w).stride[0] : 1, .stride_w = (two) ? (w).stride[1] : (w).stride[0],   \
    .pad_t = (two) ? (w).pad_b[0] : 0, .pad_l = (two) ? (w).pad_b[1] : (w).pad_b[0],            \
    .pad_b = (two) ? (w).pad_e[0] : 0, .pad_r = (two) ? (w).pad_e[1] : (w).pad_e[0],            \
    .dil_h = (two) ? (w).dil[0] : 1, .dil_w = (two) ? (w).dil[1] : (w).dil[0]

/* ---- Conv ---------------------------------------------------------------------- */

static gf_status conv_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *wt = c->in[1];
    const gf_onnx_tinfo *b = c->n->n_in > 2 ? c->in[2] : NULL;
    gf_status st;
    if ((st = need_f32(c, x, "X")) != GF_OK || (st = need_w(c, wt, "W")) != GF_OK)
        return st;
    if (wt->rank != x->rank)
        return gf_onnx_fail(c, GF_ERR_INVALID, "W has rank %d, X rank %d", wt->rank, x->rank);
    window w;
    if ((st = window_of(c, x, &wt->shape[2], false, &w)) != GF_OK)
        return st;
    int64_t groups = gf_onnx_attr_int(c->n, "group", 1);
    int64_t cin = x->shape[1], oc = wt->shape[0];
    if (groups < 1 || cin % groups || oc % groups || wt->shape[1] != cin / groups)
        return gf_onnx_fail(c, GF_ERR_INVALID, "W %" PRId64 "x%" PRId64 " does not fit %" PRId64
                            " input channels in %" PRId64 " groups", oc, wt->shape[1], cin,
                            groups);
    for (int32_t i = 0; i < w.nd; i++)
        if (wt->shape[2 + i] != w.k[i])
            return gf_onnx_fail(c, GF_ERR_INVALID, "kernel_shape does not match W");
    if (b != NULL && (gf_onnx_numel(b) != oc || b->dtype != wt->dtype))
        return gf_onnx_fail(c, GF_ERR_INVALID, "B must have %" PRId64 " elements of W's type",
                            oc);
    int64_t shape[4] = {x->shape[0], oc, w.out[0], w.nd == 2 ? w.out[1] : 1};
    gf_conv2d_ex_params *p = (gf_conv2d_ex_params *)c->aux;
    _Static_assert(sizeof *p <= sizeof c->aux, "aux holds the conv params");
    bool two = w.nd == 2;
    *p = (gf_conv2d_ex_params){.n = x->shape[0], .c = cin, WINDOW_FIELDS(w, two), .oc = oc,
                               .groups = groups};
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, shape);
    c->fuse = GF_ONNX_FUSE_ACT | GF_ONNX_FUSE_RESIDUAL;
    return GF_OK;
}

static gf_status conv_run(const gf_onnx_run_ctx *c)
{
    const gf_conv2d_ex_params *p = (const gf_conv2d_ex_params *)c->aux;
    const void *bias = c->n->n_in > 2 ? c->in[2].data : NULL;
    const float *res = c->extra != NULL ? c->extra->data : NULL;
    if (c->packed & 2u) {
        /* W packed at load (gf_onnx_model_set_packed): F32, so is B */
        if (!GF_KERNELS_HAS(c->k, conv2d_packed))
            return gf_onnx_rfail(c, GF_ERR_INTERNAL, "W is packed but the kernel table has no "
                                 "conv2d_packed");
        uint32_t layout = ((c->nhwc & 1u) ? GF_CONV_X_NHWC : 0) |
                          ((c->nhwc & GF_ONNX_NHWC_OUT) ? GF_CONV_Y_NHWC : 0) |
                          ((c->nhwc & GF_ONNX_NHWC_EXTRA) ? GF_CONV_R_NHWC : 0);
        int rc = c->k->conv2d_packed(c->k->ctx, c->s, c->out[0].data, c->in[0].data, p,
                                     c->in[1].data, bias, res, c->act, layout);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    int rc = c->k->conv2d_ex(c->k->ctx, c->s, c->out[0].data, c->in[0].data, p, c->in[1].data,
                             bias, c->in[1].t->dtype, c->extra != NULL ? c->extra->data : NULL,
                             c->act);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- pooling ------------------------------------------------------------------- */

static gf_status pool_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    gf_status st = need_f32(c, x, "X");
    if (st != GF_OK)
        return st;
    bool is_max = strcmp(c->n->op_type, "MaxPool") == 0;
    if (is_max && gf_onnx_attr_int(c->n, "storage_order", 0) != 0)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "storage_order 1 (column-major indices)");
    window w;
    if ((st = window_of(c, x, NULL, true, &w)) != GF_OK)
        return st;
    for (int32_t i = 0; i < w.nd; i++)
        if (w.pad_b[i] >= w.dil[i] * (w.k[i] - 1) + 1 || w.pad_e[i] >= w.dil[i] * (w.k[i] - 1) + 1)
            return gf_onnx_fail(c, GF_ERR_INVALID, "a pad is not smaller than the window");
    bool two = w.nd == 2;
    gf_pool2d_ex_params *p = (gf_pool2d_ex_params *)&c->aux[1];
    _Static_assert(sizeof *p <= sizeof c->aux - 8, "aux holds the pool params");
    *p = (gf_pool2d_ex_params){
        .n = x->shape[0], .c = x->shape[1], WINDOW_FIELDS(w, two),
        .ceil_mode = (int32_t)gf_onnx_attr_int(c->n, "ceil_mode", 0),
        .count_include_pad = (int32_t)gf_onnx_attr_int(c->n, "count_include_pad", 0)};
    c->aux[0] = is_max ? GF_POOL_MAX : GF_POOL_AVG;
    int64_t shape[4] = {x->shape[0], x->shape[1], w.out[0], two ? w.out[1] : 1};
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, shape);
    return GF_OK;
}

static gf_status pool_run(const gf_onnx_run_ctx *c)
{
    int rc = c->k->pool2d_ex(c->k->ctx, c->s, (gf_pool_kind)c->aux[0], c->out[0].data,
                             c->in[0].data, (const gf_pool2d_ex_params *)&c->aux[1]);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

static gf_status global_pool_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    gf_status st = need_f32(c, x, "X");
    if (st != GF_OK)
        return st;
    if (x->rank < 3)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X must have rank 3 or more");
    int64_t shape[GF_MAX_RANK], hw = 1;
    for (int32_t k = 0; k < x->rank; k++) {
        shape[k] = k < 2 ? x->shape[k] : 1;
        if (k >= 2)
            hw *= x->shape[k];
    }
    c->aux[0] = hw;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, shape);
    return GF_OK;
}

static gf_status global_pool_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    bool avg = strcmp(c->n->op_type, "GlobalAveragePool") == 0;
    int rc;
    if (c->nhwc & 1u) /* channels last (from a Conv, choose_layouts): y is the same */
        rc = c->k->reduce(c->k->ctx, c->s, avg ? GF_REDUCE_MEAN : GF_REDUCE_MAX, c->out[0].data,
                          c->in[0].data, x->shape[0], c->aux[0], x->shape[1]);
    else if (avg)
        rc = c->k->global_avgpool(c->k->ctx, c->s, c->out[0].data, c->in[0].data, x->shape[0],
                                  x->shape[1], c->aux[0]);
    else
        rc = c->k->reduce(c->k->ctx, c->s, GF_REDUCE_MAX, c->out[0].data, c->in[0].data,
                          x->shape[0] * x->shape[1], c->aux[0], 1);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- BatchNormalization, LayerNormalization ----------------------------------- */

static gf_status bn_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    gf_status st = need_f32(c, x, "X");
    if (st != GF_OK)
        return st;
    if (gf_onnx_attr_int(c->n, "training_mode", 0) != 0 || c->n->n_out > 1)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "training mode (running statistics as "
                            "outputs): gpufaas runs inference only");
    if (x->rank < 2)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X must have rank 2 or more");
    for (int k = 1; k < 5; k++) {
        if ((st = need_w(c, c->in[k], "a statistics input")) != GF_OK)
            return st;
        if (c->in[k]->dtype != c->in[1]->dtype || gf_onnx_numel(c->in[k]) != x->shape[1])
            return gf_onnx_fail(c, GF_ERR_INVALID, "scale, B, mean and var must be [%" PRId64
                                "] of one type", x->shape[1]);
    }
    int64_t hw = 1;
    for (int32_t k = 2; k < x->rank; k++)
        hw *= x->shape[k];
    c->aux[0] = hw;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
    return GF_OK;
}

static gf_status bn_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    float eps = gf_onnx_attr_float(c->n, "epsilon", 1e-5f);
    int rc = c->k->batchnorm(c->k->ctx, c->s, c->out[0].data, c->in[0].data, x->shape[0],
                             x->shape[1], c->aux[0], c->in[3].data, c->in[4].data,
                             c->in[1].data, c->in[2].data, c->in[1].t->dtype, eps,
                             GF_ACT_IDENTITY);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

static gf_status ln_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *g = c->in[1];
    const gf_onnx_tinfo *b = c->n->n_in > 2 ? c->in[2] : NULL;
    gf_status st = need_f32(c, x, "X");
    if (st != GF_OK || (st = need_w(c, g, "Scale")) != GF_OK)
        return st;
    int64_t axis;
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", -1), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t rows = 1, cols = 1;
    for (int32_t k = 0; k < x->rank; k++) {
        if (k < axis)
            rows *= x->shape[k];
        else
            cols *= x->shape[k];
    }
    if (gf_onnx_numel(g) != cols || (b != NULL && (gf_onnx_numel(b) != cols ||
                                                   b->dtype != g->dtype)))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "Scale and B must cover the normalised "
                            "axes (%" PRId64 " elements, one type); broadcasting them is not "
                            "supported", cols);
    c->aux[0] = rows;
    c->aux[1] = cols;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
    /* Mean and InvStdDev: the statistics, shaped as X with the normalised
     * axes 1; computed apart from the kernel (whose rows give the same) */
    bool stats = false;
    for (int32_t k = 1; k < c->n->n_out; k++)
        stats = stats || c->n->out[k] >= 0;
    if (stats) {
        int64_t sshape[GF_MAX_RANK];
        for (int32_t k = 0; k < x->rank; k++)
            sshape[k] = k < axis ? x->shape[k] : 1;
        for (int32_t k = 1; k < c->n->n_out; k++)
            gf_onnx_set_out(c, k, GF_DT_F32, x->rank, sshape);
        c->aux[2] = 1;
        c->scratch = (size_t)gf_onnx_numel(x) * 4 + 2 * (((size_t)rows * 4 + 255) / 256 * 256);
        int64_t one = 1;
        if ((st = gf_onnx_const_new(GF_DT_F32, 1, &one, &c->step_const, c->err)) != GF_OK)
            return st;
        gf_onnx_const_set_f64(c->step_const, 0, gf_onnx_attr_float(c->n, "epsilon", 1e-5f));
    }
    return GF_OK;
}

/* LayerNormalization's Mean and InvStdDev outputs: mean over each row, then
 * 1 / sqrt(mean((x - mean)^2) + epsilon). */
static int ln_stats(const gf_onnx_run_ctx *c)
{
    int64_t rows = c->aux[0], cols = c->aux[1];
    size_t rb = ((size_t)rows * 4 + 255) / 256 * 256;
    float *mean = c->out[1].data != NULL ? c->out[1].data : (float *)c->scratch;
    float *d = (float *)((char *)c->scratch + 2 * rb);
    float *var = c->n->n_out > 2 && c->out[2].data != NULL ? c->out[2].data
                                                           : (float *)((char *)c->scratch + rb);
    int64_t shape[2] = {rows, cols}, dense[2] = {cols, 1}, per_row[2] = {1, 0};
    int64_t r1[1] = {rows}, s1[1] = {1}, s0[1] = {0};
    int rc = c->k->reduce(c->k->ctx, c->s, GF_REDUCE_MEAN, mean, c->in[0].data, rows, cols, 1);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 2, shape, d, c->in[0].data, dense,
                          mean, per_row, GF_DT_F32);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_MUL, 2, shape, d, d, dense, d, dense,
                          GF_DT_F32);
    if (rc == 0)
        rc = c->k->reduce(c->k->ctx, c->s, GF_REDUCE_MEAN, var, d, rows, cols, 1);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_ADD, 1, r1, var, var, s1, c->step_const, s0,
                          GF_DT_F32);
    if (rc == 0)
        rc = c->k->unary(c->k->ctx, c->s, GF_UNARY_SQRT, var, var, rows, 0, 0);
    if (rc == 0)
        rc = c->k->unary(c->k->ctx, c->s, GF_UNARY_RECIPROCAL, var, var, rows, 0, 0);
    return rc;
}

static gf_status ln_run(const gf_onnx_run_ctx *c)
{
    float eps = gf_onnx_attr_float(c->n, "epsilon", 1e-5f);
    const void *beta = c->n->n_in > 2 ? c->in[2].data : NULL;
    int rc = c->k->layernorm(c->k->ctx, c->s, c->out[0].data, c->in[0].data, c->aux[0],
                             c->aux[1], c->in[1].data, beta, c->in[1].t->dtype, eps);
    if (rc == 0 && c->aux[2])
        rc = ln_stats(c);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Softmax, LogSoftmax -------------------------------------------------------- */

static gf_status softmax_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    gf_status st = need_f32(c, x, "input");
    if (st != GF_OK)
        return st;
    bool old = c->n->opset < 13;
    int64_t axis;
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", old ? 1 : -1), x->rank, old, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t outer = 1, dim = 1, inner = 1;
    for (int32_t k = 0; k < x->rank; k++) {
        if (k < axis)
            outer *= x->shape[k];
        else if (k == axis || old)
            dim *= x->shape[k];
        else
            inner *= x->shape[k];
    }
    c->aux[0] = outer;
    c->aux[1] = dim;
    c->aux[2] = inner;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
    return GF_OK;
}

static gf_status softmax_run(const gf_onnx_run_ctx *c)
{
    int log = strcmp(c->n->op_type, "LogSoftmax") == 0;
    int rc = c->aux[2] == 1
                 ? c->k->softmax(c->k->ctx, c->s, c->out[0].data, c->in[0].data, c->aux[0],
                                 c->aux[1], log)
                 : c->k->softmax_axis(c->k->ctx, c->s, c->out[0].data, c->in[0].data, c->aux[0],
                                      c->aux[1], c->aux[2], log);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Gemm, MatMul --------------------------------------------------------------- */

static gf_status gemm_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0], *b = c->in[1];
    const gf_onnx_tinfo *cc = c->n->n_in > 2 ? c->in[2] : NULL;
    gf_status st;
    if ((st = need_w(c, a, "A")) != GF_OK || (st = need_w(c, b, "B")) != GF_OK)
        return st;
    if (a->rank != 2 || b->rank != 2)
        return gf_onnx_fail(c, GF_ERR_INVALID, "A and B must be matrices");
    int ta = (int)gf_onnx_attr_int(c->n, "transA", 0), tb = (int)gf_onnx_attr_int(c->n, "transB", 0);
    int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
    int64_t kb = tb ? b->shape[1] : b->shape[0], nn = tb ? b->shape[0] : b->shape[1];
    if (k != kb)
        return gf_onnx_fail(c, GF_ERR_INVALID, "A is %" PRId64 "x%" PRId64 " and B %" PRId64
                            "x%" PRId64 " after transposition", m, k, kb, nn);
    int64_t shape[2] = {m, nn};
    float beta = gf_onnx_attr_float(c->n, "beta", 1.0f);
    c->aux[0] = 0; /* how C enters: 0 none, 1 bias row, 2 copied in */
    if (cc != NULL && beta != 0) {
        int32_t r;
        int64_t bs[GF_MAX_RANK];
        if (!gf_onnx_broadcast(cc->rank, cc->shape, 2, shape, &r, bs) || r != 2 || bs[0] != m ||
            bs[1] != nn)
            return gf_onnx_fail(c, GF_ERR_INVALID, "C does not broadcast to [%" PRId64 ", %"
                                PRId64 "]", m, nn);
        bool row = gf_onnx_numel(cc) == nn && (cc->rank == 1 || cc->shape[cc->rank - 1] == nn) &&
                   (cc->rank < 2 || cc->shape[0] == 1);
        if (row && beta == 1.0f && ((1u << cc->dtype) & W_MASK))
            c->aux[0] = 1;
        else if (cc->dtype == GF_DT_F32)
            c->aux[0] = 2;
        else
            return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "C of type %s that is not a bias row",
                                gf_dtype_st_name(cc->dtype));
    }
    c->aux[1] = m;
    c->aux[2] = nn;
    c->aux[3] = k;
    gf_onnx_set_out(c, 0, GF_DT_F32, 2, shape);
    c->fuse = GF_ONNX_FUSE_ACT | (c->aux[0] == 0 ? GF_ONNX_FUSE_BIAS : 0);
    return GF_OK;
}

static gf_status gemm_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0].t, *b = c->in[1].t;
    int ta = (int)gf_onnx_attr_int(c->n, "transA", 0), tb = (int)gf_onnx_attr_int(c->n, "transB", 0);
    float alpha = gf_onnx_attr_float(c->n, "alpha", 1.0f), beta = gf_onnx_attr_float(c->n, "beta", 1.0f);
    int64_t m = c->aux[1], nn = c->aux[2], k = c->aux[3];
    int rc = 0;
    float kbeta = 0;
    if (c->aux[0] == 2) {
        const gf_onnx_tinfo *ct = c->in[2].t;
        int64_t sc[2];
        gf_onnx_bcast_strides(ct->rank, ct->shape, 2, c->out[0].t->shape, sc);
        rc = c->k->strided_copy(c->k->ctx, c->s, 2, c->out[0].t->shape, c->out[0].data, NULL,
                                c->in[2].data, sc, 0, 4);
        kbeta = beta;
    }
    if (rc == 0)
        rc = c->k->gemm(c->k->ctx, c->s, ta, tb, m, nn, k, alpha, c->in[0].data, a->dtype,
                        a->shape[1], c->in[1].data, b->dtype, b->shape[1], kbeta,
                        c->out[0].data, nn);
    /* the bias row (C, or a fused Add's) and a fused activation */
    const gf_onnx_rt *bias = c->aux[0] == 1 ? &c->in[2] : c->extra;
    if (rc == 0 && (bias != NULL || c->act != GF_ACT_IDENTITY))
        rc = c->k->bias_act(c->k->ctx, c->s, c->out[0].data, m, nn,
                            bias != NULL ? bias->data : NULL,
                            bias != NULL ? bias->t->dtype : GF_DT_F32, c->act);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* MatMul with numpy semantics: batch dims broadcast; a 1-d operand gets a
 * dim of 1 that the output drops. aux: [0] m, [1] n, [2] k, [3] batch,
 * [4] folded into one gemm (B 2-d), [5..12] batch shape, [13..20] A batch
 * strides, [21..28] B batch strides, [29] batch rank. */
static gf_status matmul_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0], *b = c->in[1];
    gf_status st;
    if ((st = need_w(c, a, "A")) != GF_OK || (st = need_w(c, b, "B")) != GF_OK)
        return st;
    if (a->rank < 1 || b->rank < 1)
        return gf_onnx_fail(c, GF_ERR_INVALID, "operands must have rank >= 1");
    int64_t as[GF_MAX_RANK + 1], bs[GF_MAX_RANK + 1];
    int32_t ar = a->rank, br = b->rank;
    memcpy(as, a->shape, sizeof a->shape);
    memcpy(bs, b->shape, sizeof b->shape);
    if (ar == 1) {
        as[1] = as[0];
        as[0] = 1;
        ar = 2;
    }
    if (br == 1) {
        bs[1] = 1;
        br = 2;
    }
    int64_t m = as[ar - 2], k = as[ar - 1], kb = bs[br - 2], nn = bs[br - 1];
    if (k != kb)
        return gf_onnx_fail(c, GF_ERR_INVALID, "A's last dim %" PRId64 " is not B's second to "
                            "last %" PRId64, k, kb);
    int32_t rank;
    int64_t batch[GF_MAX_RANK];
    if (!gf_onnx_broadcast(ar - 2, as, br - 2, bs, &rank, batch))
        return gf_onnx_fail(c, GF_ERR_INVALID, "batch dims do not broadcast");
    int64_t shape[GF_MAX_RANK + 2];
    int32_t r = 0;
    for (int32_t i = 0; i < rank; i++)
        shape[r++] = batch[i];
    if (a->rank > 1)
        shape[r++] = m;
    if (b->rank > 1)
        shape[r++] = nn;
    if (r > GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "output rank %d", r);
    int64_t nb = 1;
    for (int32_t i = 0; i < rank; i++)
        nb *= batch[i];
    c->aux[0] = m;
    c->aux[1] = nn;
    c->aux[2] = k;
    c->aux[3] = nb;
    c->aux[4] = br == 2; /* B is one matrix: fold A's batch into m */
    c->aux[29] = rank;
    int64_t sa[GF_MAX_RANK], sb[GF_MAX_RANK];
    gf_onnx_bcast_strides(ar - 2, as, rank, batch, sa);
    gf_onnx_bcast_strides(br - 2, bs, rank, batch, sb);
    for (int32_t i = 0; i < rank; i++) {
        c->aux[5 + i] = batch[i];
        c->aux[13 + i] = sa[i] * m * k;
        c->aux[21 + i] = sb[i] * k * nn;
    }
    gf_onnx_set_out(c, 0, GF_DT_F32, r, shape);
    if (c->aux[4] && a->rank >= 2 && b->rank >= 2)
        c->fuse = GF_ONNX_FUSE_ACT | GF_ONNX_FUSE_BIAS; /* one gemm: a bias row applies */
    return GF_OK;
}

static gf_status matmul_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0].t, *b = c->in[1].t;
    int64_t m = c->aux[0], nn = c->aux[1], k = c->aux[2], nb = c->aux[3];
    int32_t rank = (int32_t)c->aux[29];
    size_t ea = gf_dtype_size(a->dtype), eb = gf_dtype_size(b->dtype);
    int rc;
    if (c->aux[4] && a->rank >= 2) {
        /* [batch..., m, k] x [k, n]: one gemm with m * batch rows (A's batch
         * broadcasts against nothing, so it is dense) */
        rc = c->k->gemm(c->k->ctx, c->s, 0, 0, m * nb, nn, k, 1.0f, c->in[0].data, a->dtype, k,
                        c->in[1].data, b->dtype, nn, 0.0f, c->out[0].data, nn);
        if (rc == 0 && (c->extra != NULL || c->act != GF_ACT_IDENTITY))
            rc = c->k->bias_act(c->k->ctx, c->s, c->out[0].data, m * nb, nn,
                                c->extra != NULL ? c->extra->data : NULL,
                                c->extra != NULL ? c->extra->t->dtype : GF_DT_F32, c->act);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    /* batches: the strides of A and B along the flattened batch, when they
     * are uniform, else one gemm per batch */
    bool uniform = true;
    int64_t stride_a = rank ? c->aux[13 + rank - 1] : 0, stride_b = rank ? c->aux[21 + rank - 1] : 0;
    for (int32_t i = rank - 2; i >= 0 && uniform; i--) {
        int64_t inner = 1;
        for (int32_t j = i + 1; j < rank; j++)
            inner *= c->aux[5 + j];
        uniform = c->aux[13 + i] == stride_a * inner && c->aux[21 + i] == stride_b * inner;
    }
    if (uniform) {
        rc = c->k->gemm_batched(c->k->ctx, c->s, 0, 0, m, nn, k, 1.0f, c->in[0].data, a->dtype, k,
                                stride_a, c->in[1].data, b->dtype, nn, stride_b, 0.0f,
                                c->out[0].data, nn, m * nn, nb);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    for (int64_t i = 0; i < nb; i++) {
        int64_t rem = i, oa = 0, ob = 0;
        for (int32_t j = rank - 1; j >= 0; j--) {
            int64_t idx = rem % c->aux[5 + j];
            rem /= c->aux[5 + j];
            oa += idx * c->aux[13 + j];
            ob += idx * c->aux[21 + j];
        }
        rc = c->k->gemm(c->k->ctx, c->s, 0, 0, m, nn, k, 1.0f,
                        (const char *)c->in[0].data + oa * (int64_t)ea, a->dtype, k,
                        (const char *)c->in[1].data + ob * (int64_t)eb, b->dtype, nn, 0.0f,
                        (float *)c->out[0].data + i * m * nn, nn);
        if (rc)
            return gf_onnx_kfail(c, rc);
    }
    return GF_OK;
}

/* ---- reductions ----------------------------------------------------------------- */

/* aux: [0] op, [1] outer, [2] rdim, [3] inner, [4] transposed first, [5] rank,
 * [6..13] transposed shape, [14..21] transposed strides, [22] identity copy */
static gf_status reduce_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    const gf_onnx_node *n = c->n;
    gf_status st = need_f32(c, x, "input");
    if (st != GF_OK)
        return st;
    bool arg = strncmp(n->op_type, "Arg", 3) == 0;
    int op = n->op->code;
    int64_t axes[GF_MAX_RANK];
    int32_t na = 0;
    bool from_input = !arg && (strcmp(n->op_type, "ReduceSum") == 0 ? n->opset >= 13
                                                                     : n->opset >= 18);
    if (arg) {
        axes[na++] = gf_onnx_attr_int(n, "axis", 0);
        if (gf_onnx_attr_int(n, "select_last_index", 0))
            op = op == GF_REDUCE_ARGMAX ? GF_REDUCE_ARGMAX_LAST : GF_REDUCE_ARGMIN_LAST;
    } else if (from_input) {
        if (n->n_in > 1 && c->in[1] != NULL) {
            const gf_onnx_tinfo *t = c->in[1];
            if (gf_onnx_numel(t) > GF_MAX_RANK || t->host == NULL)
                return gf_onnx_fail(c, GF_ERR_INVALID, "axes must be a short list");
            for (int64_t i = 0; i < gf_onnx_numel(t); i++)
                axes[na++] = gf_onnx_const_i64(t->host, i);
        }
    } else {
        size_t cnt;
        const int64_t *a = gf_onnx_attr_ints(n, "axes", &cnt);
        if (cnt > GF_MAX_RANK)
            return gf_onnx_fail(c, GF_ERR_INVALID, "too many axes");
        for (size_t i = 0; i < cnt; i++)
            axes[na++] = a[i];
    }
    if (!from_input && n->n_in > 1)
        return gf_onnx_fail(c, GF_ERR_INVALID, "axes come from an attribute at this opset");
    bool keep = gf_onnx_attr_int(n, "keepdims", 1) != 0;
    bool noop = gf_onnx_attr_int(n, "noop_with_empty_axes", 0) != 0;
    bool mark[GF_MAX_RANK] = {false};
    for (int32_t i = 0; i < na; i++) {
        int64_t a;
        if (!gf_onnx_axis(axes[i], x->rank, false, &a) || mark[a])
            return gf_onnx_fail(c, GF_ERR_INVALID, "axis %" PRId64 " out of range or repeated",
                                axes[i]);
        mark[a] = true;
    }
    memset(c->aux, 0, sizeof c->aux);
    if (na == 0 && noop) {
        c->aux[22] = 1;
        gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
        return GF_OK;
    }
    if (na == 0)
        for (int32_t k = 0; k < x->rank; k++)
            mark[k] = true;
    int64_t shape[GF_MAX_RANK];
    int32_t r = 0;
    int first = -1, last = -1;
    for (int32_t k = 0; k < x->rank; k++) {
        if (mark[k]) {
            if (first < 0)
                first = k;
            last = k;
            if (keep)
                shape[r++] = 1;
        } else {
            shape[r++] = x->shape[k];
        }
    }
    bool adjacent = true;
    for (int k = first; k <= last && first >= 0; k++)
        adjacent = adjacent && mark[k];
    int64_t outer = 1, rdim = 1, inner = 1;
    if (adjacent) {
        for (int32_t k = 0; k < x->rank; k++) {
            if (first >= 0 && k < first)
                outer *= x->shape[k];
            else if (first >= 0 && k <= last)
                rdim *= x->shape[k];
            else
                inner *= x->shape[k];
        }
    } else {
        /* move the reduced axes last */
        int64_t dense[GF_MAX_RANK];
        gf_onnx_strides(x->rank, x->shape, dense);
        int32_t j = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int32_t k = 0; k < x->rank; k++)
                if (mark[k] == (pass == 1)) {
                    c->aux[6 + j] = x->shape[k];
                    c->aux[14 + j] = dense[k];
                    j++;
                    if (pass == 0)
                        outer *= x->shape[k];
                    else
                        rdim *= x->shape[k];
                }
        c->aux[4] = 1;
        c->aux[5] = x->rank;
        c->scratch = (size_t)gf_onnx_numel(x) * 4;
    }
    if (arg && rdim == 0)
        return gf_onnx_fail(c, GF_ERR_INVALID, "arg-reduction over an empty axis");
    c->aux[0] = op;
    c->aux[1] = outer;
    c->aux[2] = rdim;
    c->aux[3] = inner;
    gf_onnx_set_out(c, 0, arg ? GF_DT_I64 : GF_DT_F32, r, shape);
    return GF_OK;
}

static gf_status reduce_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    int rc;
    if (c->aux[22]) {
        size_t bytes = (size_t)gf_onnx_numel(x) * 4;
        rc = bytes ? c->k->copy2d(c->k->ctx, c->s, c->out[0].data, (int64_t)bytes, c->in[0].data,
                                  (int64_t)bytes, (int64_t)bytes, 1)
                   : 0;
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    const float *src = c->in[0].data;
    if (c->aux[4]) {
        rc = c->k->strided_copy(c->k->ctx, c->s, (int)c->aux[5], &c->aux[6], c->scratch, NULL,
                                c->in[0].data, &c->aux[14], 0, 4);
        if (rc)
            return gf_onnx_kfail(c, rc);
        src = c->scratch;
    }
    rc = c->k->reduce(c->k->ctx, c->s, (gf_reduce_op)c->aux[0], c->out[0].data, src, c->aux[1],
                      c->aux[2], c->aux[3]);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- the table ------------------------------------------------------------------ */

#define WIN "auto_pad:s,dilations:I,kernel_shape:I,pads:I,strides:I"
#define RED(T, CODE, ...) \
    {"", T, {__VA_ARGS__}, 1, 2, 1, 1, "axes:I,keepdims:i,noop_with_empty_axes:i", 0x2, 0, reduce_infer, \
     reduce_run, "F32; axes known when the plan is made", CODE}

const gf_onnx_op gf_onnx_ops_nn[] = {
    {"", "Conv", {1, 11, 22}, 2, 3, 1, 1, WIN ",group:i", 0, 0, conv_infer, conv_run,
     "1-d and 2-d; X F32, W and B F32, F16 or BF16", 0},
    {"", "MaxPool", {8, 10, 11, 12, 22}, 1, 1, 1, 1, WIN ",ceil_mode:i,storage_order:i", 0, 0,
     pool_infer, pool_run, "1-d and 2-d, F32; no Indices output", 0},
    {"", "AveragePool", {7, 10, 11, 19, 22}, 1, 1, 1, 1, WIN ",ceil_mode:i,count_include_pad:i",
     0, 0, pool_infer, pool_run, "1-d and 2-d, F32", 0},
    {"", "GlobalAveragePool", {1, 22}, 1, 1, 1, 1, "", 0, 0, global_pool_infer, global_pool_run,
     "F32", 0},
    {"", "GlobalMaxPool", {1, 22}, 1, 1, 1, 1, "", 0, 0, global_pool_infer, global_pool_run,
     "F32", 0},
    {"", "BatchNormalization", {7, 9, 14, 15}, 5, 5, 1, 3, "epsilon:f,momentum:f,spatial:i,"
     "training_mode:i", 0, 0, bn_infer, bn_run, "inference; statistics F32, F16 or BF16", 0},
    {"", "LayerNormalization", {17}, 2, 3, 1, 3, "axis:i,epsilon:f,stash_type:i", 0, 0,
     ln_infer, ln_run, "X F32; Scale and B cover the normalised axes", 0},
    {"", "Softmax", {1, 11, 13}, 1, 1, 1, 1, "axis:i", 0, 0, softmax_infer, softmax_run, "F32",
     0},
    {"", "LogSoftmax", {1, 11, 13}, 1, 1, 1, 1, "axis:i", 0, 0, softmax_infer, softmax_run,
     "F32", 0},
    {"", "Gemm", {7, 9, 11, 13}, 2, 3, 1, 1, "alpha:f,beta:f,transA:i,transB:i", 0, 0,
     gemm_infer, gemm_run, "A, B F32, F16 or BF16", 0},
    {"", "MatMul", {1, 9, 13}, 2, 2, 1, 1, "", 0, 0, matmul_infer, matmul_run,
     "F32, F16 or BF16 operands; batch dims broadcast", 0},
    RED("ReduceMean", GF_REDUCE_MEAN, 1, 11, 13, 18),
    RED("ReduceSum", GF_REDUCE_SUM, 1, 11, 13),
    RED("ReduceMax", GF_REDUCE_MAX, 1, 11, 12, 13, 18, 20),
    RED("ReduceMin", GF_REDUCE_MIN, 1, 11, 12, 13, 18, 20),
    RED("ReduceProd", GF_REDUCE_PROD, 1, 11, 13, 18),
    RED("ReduceSumSquare", GF_REDUCE_SUM_SQUARE, 1, 11, 13, 18),
    RED("ReduceL1", GF_REDUCE_L1, 1, 11, 13, 18),
    RED("ReduceL2", GF_REDUCE_L2, 1, 11, 13, 18),
    RED("ReduceLogSum", GF_REDUCE_LOG_SUM, 1, 11, 13, 18),
    RED("ReduceLogSumExp", GF_REDUCE_LOG_SUM_EXP, 1, 11, 13, 18),
    {"", "ArgMax", {1, 11, 12, 13}, 1, 1, 1, 1, "axis:i,keepdims:i,select_last_index:i", 0, 0,
     reduce_infer, reduce_run, "F32 input", GF_REDUCE_ARGMAX},
    {"", "ArgMin", {1, 11, 12, 13}, 1, 1, 1, 1, "axis:i,keepdims:i,select_last_index:i", 0, 0,
     reduce_infer, reduce_run, "F32 input", GF_REDUCE_ARGMIN},
    {.type = NULL},
};
