/* gpufaas — SVMRegressor and SVMClassifier of the ai.onnx.ml domain, as
 * skl2onnx exports scikit-learn's SVR, NuSVR, OneClassSVM, SVC and NuSVC
 * (functions/onnx).
 *
 * SVMRegressor:
 * y = sum_j coefficients[j] * K(x, sv_j) + rho[0] over the support vectors,
 * or x . coefficients + rho[0] without them (liblinear's form); one_class
 * gives 1 when that is > 0, else -1. K is LINEAR (x . sv), POLY ((gamma x .
 * sv + coef0)^degree), SIGMOID (tanh(gamma x . sv + coef0)) or RBF (exp(-gamma
 * |x - sv|^2)), kernel_params = [gamma, coef0, degree]. The dot products are
 * one gemm; RBF's distances are computed as differences (not |x|^2 + |sv|^2 -
 * 2 x . sv, which cancels when x is near a support vector), rows at a time so
 * the scratch stays bounded. The support vectors and coefficients are lifted
 * into initializers (ops_ml.c), so they live in the parameter cache.
 *
 * SVMClassifier (one-vs-one, without probability estimates): the decision
 * of each pair of classes is one gemm of the kernel values by the matrix the
 * importer made of the coefficients (import_svm.c), + rho; each decision
 * > 0 votes for the pair's first class, else for its second; the label is
 * the class with the most votes (the first on a tie). Z is the decisions, or
 * [-d, d] for two classes, as onnxruntime gives them.
 *
 * With probability estimates (prob_a, prob_b: SVC(probability=True)), Z is
 * instead the class probabilities as libsvm (and onnxruntime) compute them:
 * each pair's probability r = 1 / (1 + exp(d A + B)), kept within [1e-7,
 * 1 - 1e-7], then coupled into one distribution per row by libsvm's
 * iterative method (Wu, Lin and Weng, 2004: minimise p'Qp, p summing to
 * 1): Q is three gemms of r, r^2 and (1 - r)^2 by constant matrices, and
 * the iterations (max(100, classes) sweeps of Gauss-Seidel updates, each
 * row stopping once its error is below 0.005 / classes, as libsvm's loop
 * does) are elementwise kernel calls on [rows, classes], a row that has
 * stopped getting zero updates (which leave it exactly as it is). The label
 * is still the one the votes give, as in onnxruntime.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/ops_ml.h"

#define A gf_onnx_ml_align
#define K c->k->ctx, c->s

/* at most this many floats of differences at once (RBF) */
#define DIFF_MAX ((int64_t)1 << 22)

enum { KER_LINEAR, KER_POLY, KER_RBF, KER_SIGMOID };

/* The kernel named by kernel_type into *ker; kernel_params and
 * post_transform checked. */
static gf_status kernel_of(gf_onnx_infer_ctx *c, int64_t sup, int64_t *ker)
{
    const char *kt = gf_onnx_attr_str(c->n, "kernel_type", "LINEAR");
    *ker = strcmp(kt, "LINEAR") == 0 ? KER_LINEAR : strcmp(kt, "POLY") == 0 ? KER_POLY
         : strcmp(kt, "RBF") == 0 ? KER_RBF : strcmp(kt, "SIGMOID") == 0 ? KER_SIGMOID : -1;
    if (*ker < 0)
        return gf_onnx_fail(c, GF_ERR_INVALID, "kernel_type '%.16s' (LINEAR, POLY, RBF or "
                            "SIGMOID)", kt);
    const gf_onnx_attr *kp = gf_onnx_attr_find(c->n, "kernel_params");
    if (*ker != KER_LINEAR && sup > 0 && (kp == NULL || kp->n < 3))
        return gf_onnx_fail(c, GF_ERR_INVALID, "kernel %s needs kernel_params [gamma, coef0, "
                            "degree]", kt);
    const char *pt = gf_onnx_attr_str(c->n, "post_transform", "NONE");
    if (strcmp(pt, "NONE") != 0)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "post_transform '%.16s' (only NONE is "
                            "supported)", pt);
    return GF_OK;
}

/* Rows per RBF chunk, so differences stay within DIFF_MAX floats. */
static int64_t rbf_chunk(int64_t rows, int64_t sup, int64_t cols)
{
    int64_t chunk = sup > 0 && cols > 0 ? DIFF_MAX / (sup * cols) : 0;
    return chunk < 1 ? 1 : chunk > rows ? rows : chunk;
}

/* aux: [0] rows N, [1] features F, [2] supports S (0: linear form), [3] kernel,
 * [4] one_class, [5] rows per RBF chunk, scratch offsets [6] x, [7] gram,
 * [8] diff, [9] consts, [10] bool */
static gf_status svmreg_infer(gf_onnx_infer_ctx *c)
{
    int64_t rows = 0, cols = 0, n_coef, n_rho, n_sv;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "coefficients", &n_coef)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_F32, "rho", &n_rho)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 3, GF_DT_F32, "support_vectors", &n_sv)) != GF_OK)
        return st;
    int64_t sup = gf_onnx_attr_int(c->n, "n_supports", 0);
    if (n_rho < 1)
        return gf_onnx_fail(c, GF_ERR_INVALID, "rho is missing");
    if (gf_onnx_attr_int(c->n, "n_targets", 1) != 1)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "n_targets must be 1");
    if (sup < 0 || (sup > 0 && (n_sv != sup * cols || n_coef != sup)) ||
        (sup == 0 && n_coef != cols))
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " support vectors of %" PRId64
                            " features need as many coefficients and %" PRId64 " values in "
                            "support_vectors (or, without them, %" PRId64 " coefficients); "
                            "the node has %" PRId64 " and %" PRId64, sup, cols, sup * cols, cols,
                            n_coef, n_sv);
    int64_t ker;
    if ((st = kernel_of(c, sup, &ker)) != GF_OK)
        return st;
    int64_t chunk = rbf_chunk(rows, sup, cols);
    int64_t head[6] = {rows, cols, sup, sup > 0 ? ker : KER_LINEAR,
                       gf_onnx_attr_int(c->n, "one_class", 0) != 0, chunk};
    memcpy(c->aux, head, sizeof head);
    size_t sizes[5] = {
        c->in[0]->dtype == GF_DT_F32 ? 0 : (size_t)(rows * cols) * 4, /* x */
        (size_t)(rows * sup) * 4,                                     /* gram */
        ker == KER_RBF ? (size_t)(chunk * sup * cols) * 4 : 0,        /* diff */
        256, (size_t)rows};                                           /* consts, bool */
    size_t off = 0;
    for (int k = 0; k < 5; k++) {
        c->aux[6 + k] = (int64_t)off;
        off += A(sizes[k]);
    }
    c->scratch = off;
    int64_t ys[2] = {rows, 1};
    gf_onnx_set_out(c, 0, GF_DT_F32, 2, ys);
    return GF_OK;
}

/* The kernel values K(x_n, sv_j) into g [N, S]. */
static int gram(const gf_onnx_run_ctx *c, const float *x, float *g, char *sc)
{
    const int64_t *aux = c->aux;
    int64_t rows = aux[0], cols = aux[1], sup = aux[2], ker = aux[3], chunk = aux[5];
    const float *sv = c->in[3].data;
    const gf_onnx_attr *kp = gf_onnx_attr_find(c->n, "kernel_params");
    float gamma = kp != NULL && kp->n > 0 ? kp->floats[0] : 0.0f;
    float coef0 = kp != NULL && kp->n > 1 ? kp->floats[1] : 0.0f;
    float degree = kp != NULL && kp->n > 2 ? (float)(int64_t)kp->floats[2] : 0.0f;
    float *consts = (float *)(sc + aux[9]);
    int64_t n[1] = {rows * sup}, s1[1] = {1}, s0[1] = {0};
    float k3[3] = {gamma, coef0, -gamma};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = c->k->fill(K, &consts[i], 1, &k3[i], 4);
    if (ker == KER_RBF) {
        float *diff = (float *)(sc + aux[8]);
        for (int64_t r0 = 0; r0 < rows && rc == 0; r0 += chunk) {
            int64_t r = rows - r0 < chunk ? rows - r0 : chunk;
            int64_t shape[3] = {r, sup, cols}, xs[3] = {cols, 0, 1}, ss[3] = {0, cols, 1};
            rc = c->k->binary(K, GF_BINARY_SUB, 3, shape, diff, x + r0 * cols, xs, sv, ss,
                              GF_DT_F32);
            if (rc == 0)
                rc = c->k->reduce(K, GF_REDUCE_SUM_SQUARE, g + r0 * sup, diff, r * sup, cols, 1);
        }
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_MUL, 1, n, g, g, s1, &consts[2], s0, GF_DT_F32);
        if (rc == 0)
            rc = c->k->unary(K, GF_UNARY_EXP, g, g, rows * sup, 0.0f, 0.0f);
        return rc;
    }
    if (rc == 0)
        rc = c->k->gemm(K, 0, 1, rows, sup, cols, 1.0f, x, GF_DT_F32, cols, sv, GF_DT_F32, cols,
                        0.0f, g, sup);
    if (rc == 0 && ker != KER_LINEAR) { /* gamma * dot + coef0 */
        rc = c->k->binary(K, GF_BINARY_MUL, 1, n, g, g, s1, &consts[0], s0, GF_DT_F32);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_ADD, 1, n, g, g, s1, &consts[1], s0, GF_DT_F32);
    }
    if (rc == 0 && ker == KER_POLY)
        rc = c->k->unary(K, GF_UNARY_POW_SCALAR, g, g, rows * sup, degree, 0.0f);
    if (rc == 0 && ker == KER_SIGMOID)
        rc = c->k->unary(K, GF_UNARY_TANH, g, g, rows * sup, 0.0f, 0.0f);
    return rc;
}

static gf_status svmreg_run(const gf_onnx_run_ctx *c)
{
    const int64_t *aux = c->aux;
    int64_t rows = aux[0], cols = aux[1], sup = aux[2];
    char *sc = c->scratch;
    float *y = c->out[0].data;
    const float *x;
    int rc = gf_onnx_ml_x_f32(c, &x, sc + aux[6]);
    if (rc == 0 && sup > 0) {
        float *g = (float *)(sc + aux[7]);
        rc = gram(c, x, g, sc);
        if (rc == 0)
            rc = c->k->gemm(K, 0, 1, rows, 1, sup, 1.0f, g, GF_DT_F32, sup, c->in[1].data,
                            GF_DT_F32, sup, 0.0f, y, 1);
    } else if (rc == 0) {
        rc = c->k->gemm(K, 0, 1, rows, 1, cols, 1.0f, x, GF_DT_F32, cols, c->in[1].data,
                        GF_DT_F32, cols, 0.0f, y, 1);
    }
    if (rc == 0) /* + rho[0] */
        rc = c->k->bias_act(K, y, rows, 1, c->in[2].data, GF_DT_F32, GF_ACT_IDENTITY);
    if (rc == 0 && aux[4]) { /* one class: 1 when > 0, else -1 */
        float *consts = (float *)(sc + aux[9]);
        unsigned char *pos = (unsigned char *)(sc + aux[10]);
        float k3[3] = {0.0f, 1.0f, -1.0f};
        int64_t n[1] = {rows}, s1[1] = {1}, s0[1] = {0};
        for (int i = 0; i < 3 && rc == 0; i++)
            rc = c->k->fill(K, &consts[i], 1, &k3[i], 4);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_GREATER, 1, n, pos, y, s1, &consts[0], s0, GF_DT_F32);
        if (rc == 0)
            rc = c->k->where(K, 1, n, y, pos, s1, &consts[1], s0, &consts[2], s0, 4);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- probability estimates (libsvm's pairwise coupling) ---- */

/* scratch buffers of proba_run: r, 1 - r, a product [N, P]; Q, Q p [N, k, k];
 * p, Q p [N, k]; pQp, error, diff, t1, t2 [N]; a row of updates [N, k]; the
 * active and converged flags [N] (bytes) */
enum { PR_R, PR_R1, PR_T, PR_Q, PR_PROD, PR_P, PR_QP, PR_PQP, PR_ERR, PR_DIFF, PR_T1, PR_T2,
       PR_ROW, PR_ACT, PR_CND, PROBA_BUFS };

static void proba_sizes(int64_t rows, int64_t np, int64_t nc, size_t *sz)
{
    size_t n = (size_t)rows;
    size_t v[PROBA_BUFS] = {n * (size_t)np, n * (size_t)np, n * (size_t)np,
                            n * (size_t)(nc * nc), n * (size_t)(nc * nc), n * (size_t)nc,
                            n * (size_t)nc, n, n, n, n, n, n * (size_t)nc, 0, 0};
    for (int k = 0; k < PROBA_BUFS; k++)
        sz[k] = v[k] * 4;
    sz[PR_ACT] = sz[PR_CND] = n;
}

/* The constants proba_run reads (step_const, F32): A[P], B[P], the maps of
 * r(1 - r), r^2 and (1 - r)^2 into Q (each [P, k k]: pair (i, j) puts
 * -r(1 - r) at Q[i][j] and Q[j][i], r^2 on Q[j][j], (1 - r)^2 on Q[i][i]),
 * then 0, 1, 2, eps = 0.005 / k, 1 / k. */
#define PROBA_CONSTS 5

static gf_status proba_plan(gf_onnx_infer_ctx *c, int64_t rows, int64_t np, int64_t nc,
                            const float *pa, const float *pb)
{
    (void)rows;
    int64_t kk = nc * nc, len = 2 * np + 3 * np * kk + PROBA_CONSTS;
    gf_onnx_const *k;
    gf_status st = gf_onnx_const_new(GF_DT_F32, 1, &len, &k, c->err);
    if (st != GF_OK)
        return st;
    float *f = k->data, *mo = f + 2 * np, *ms = mo + np * kk, *mf = ms + np * kk;
    memset(f, 0, k->nbytes);
    memcpy(f, pa, (size_t)np * sizeof *f);
    memcpy(f + np, pb, (size_t)np * sizeof *f);
    int64_t p = 0;
    for (int64_t i = 0; i < nc; i++)
        for (int64_t j = i + 1; j < nc; j++, p++) {
            mo[p * kk + i * nc + j] = -1.0f;
            mo[p * kk + j * nc + i] = -1.0f;
            ms[p * kk + j * nc + j] = 1.0f; /* Q[j][j] += R[i][j]^2 = r^2 */
            mf[p * kk + i * nc + i] = 1.0f; /* Q[i][i] += R[j][i]^2 = (1 - r)^2 */
        }
    float *cs = mf + np * kk;
    cs[0] = 0.0f;
    cs[1] = 1.0f;
    cs[2] = 2.0f;
    cs[3] = (float)(0.005 / (double)nc);
    cs[4] = (float)(1.0 / (double)nc);
    c->step_const = k;
    return GF_OK;
}

/* z [N, k] = the coupled probabilities of the decisions d [N, P]. */
static int proba_run(const gf_onnx_run_ctx *c, const float *d, float *z)
{
    const int64_t *aux = c->aux;
    int64_t rows = aux[0], np = aux[15], nc = aux[16], kk = nc * nc;
    char *sc = c->scratch;
    float *b[PROBA_BUFS];
    for (int k = 0; k < PROBA_BUFS; k++)
        b[k] = (float *)(sc + aux[18 + k]);
    unsigned char *act = (unsigned char *)b[PR_ACT], *cnd = (unsigned char *)b[PR_CND];
    const float *A = c->step_const, *B = A + np, *mo = B + np, *ms = mo + np * kk,
                *mf = ms + np * kk, *cs = mf + np * kk;
    const float *zero = cs, *one = cs + 1, *two = cs + 2, *eps = cs + 3, *inv_k = cs + 4;
    int64_t sp[2] = {rows, np}, dn2[2] = {np, 1}, row0[2] = {0, 1}, s00[2] = {0, 0};
    int64_t n1[1] = {rows}, n1k[1] = {rows * nc}, s1[1] = {1}, s0[1] = {0}, sk[1] = {nc},
            skk[1] = {kk};
    int64_t rk[2] = {rows, nc}, dk[2] = {nc, 1}, col[2] = {1, 0}, qrow[2] = {kk, 1};
    int64_t r3[3] = {rows, nc, nc}, q3[3] = {kk, nc, 1}, p3[3] = {nc, 0, 1};
#define BIN(op, rank, shape, y, a, as, bb, bs)                                                  \
    (rc = rc ? rc : c->k->binary(K, op, rank, shape, y, a, as, bb, bs, GF_DT_F32))
    int rc = 0;
    /* r = 1 / (1 + exp(d A + B)), within [1e-7, 1 - 1e-7] */
    BIN(GF_BINARY_MUL, 2, sp, b[PR_R], d, dn2, A, row0);
    BIN(GF_BINARY_ADD, 2, sp, b[PR_R], b[PR_R], dn2, B, row0);
    if (rc == 0)
        rc = c->k->unary(K, GF_UNARY_NEG, b[PR_R], b[PR_R], rows * np, 0.0f, 0.0f);
    if (rc == 0)
        rc = c->k->unary(K, GF_UNARY_SIGMOID, b[PR_R], b[PR_R], rows * np, 0.0f, 0.0f);
    if (rc == 0)
        rc = c->k->unary(K, GF_UNARY_CLIP, b[PR_R], b[PR_R], rows * np, 1e-7f, 1.0f - 1e-7f);
    /* Q = r(1 - r) mo + r^2 ms + (1 - r)^2 mf */
    BIN(GF_BINARY_SUB, 2, sp, b[PR_R1], one, s00, b[PR_R], dn2);
    BIN(GF_BINARY_MUL, 2, sp, b[PR_T], b[PR_R], dn2, b[PR_R1], dn2);
    if (rc == 0)
        rc = c->k->gemm(K, 0, 0, rows, kk, np, 1.0f, b[PR_T], GF_DT_F32, np, mo, GF_DT_F32, kk,
                        0.0f, b[PR_Q], kk);
    BIN(GF_BINARY_MUL, 2, sp, b[PR_T], b[PR_R], dn2, b[PR_R], dn2);
    if (rc == 0)
        rc = c->k->gemm(K, 0, 0, rows, kk, np, 1.0f, b[PR_T], GF_DT_F32, np, ms, GF_DT_F32, kk,
                        1.0f, b[PR_Q], kk);
    BIN(GF_BINARY_MUL, 2, sp, b[PR_T], b[PR_R1], dn2, b[PR_R1], dn2);
    if (rc == 0)
        rc = c->k->gemm(K, 0, 0, rows, kk, np, 1.0f, b[PR_T], GF_DT_F32, np, mf, GF_DT_F32, kk,
                        1.0f, b[PR_Q], kk);
    /* p = 1 / k; every row active */
    float inv = 1.0f / (float)nc;
    unsigned char yes = 1;
    if (rc == 0)
        rc = c->k->fill(K, b[PR_P], rows * nc, &inv, 4);
    if (rc == 0)
        rc = c->k->fill(K, act, rows, &yes, 1);
    (void)inv_k;
    int64_t iters = nc > 100 ? nc : 100;
    float *p = b[PR_P], *qp = b[PR_QP], *pqp = b[PR_PQP], *diff = b[PR_DIFF], *t1 = b[PR_T1],
          *t2 = b[PR_T2];
    for (int64_t it = 0; it < iters && rc == 0; it++) {
        /* Qp = Q p, pQp = p . Qp; a row goes on while max |Qp - pQp| >= eps */
        BIN(GF_BINARY_MUL, 3, r3, b[PR_PROD], b[PR_Q], q3, p, p3);
        if (rc == 0)
            rc = c->k->reduce(K, GF_REDUCE_SUM, qp, b[PR_PROD], rows * nc, nc, 1);
        BIN(GF_BINARY_MUL, 1, n1k, b[PR_PROD], p, s1, qp, s1);
        if (rc == 0)
            rc = c->k->reduce(K, GF_REDUCE_SUM, pqp, b[PR_PROD], rows, nc, 1);
        BIN(GF_BINARY_SUB, 2, rk, b[PR_ROW], qp, dk, pqp, col);
        if (rc == 0)
            rc = c->k->unary(K, GF_UNARY_ABS, b[PR_ROW], b[PR_ROW], rows * nc, 0.0f, 0.0f);
        if (rc == 0)
            rc = c->k->reduce(K, GF_REDUCE_MAX, b[PR_ERR], b[PR_ROW], rows, nc, 1);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_GREATER_EQUAL, 1, n1, cnd, b[PR_ERR], s1, eps, s0,
                              GF_DT_F32);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_AND, 1, n1, act, act, s1, cnd, s1, GF_DT_BOOL);
        for (int64_t t = 0; t < nc && rc == 0; t++) {
            const float *qtt = b[PR_Q] + t * nc + t, *qpt = qp + t;
            /* diff = (pQp - Qp[t]) / Q[t][t], 0 where the row has stopped */
            BIN(GF_BINARY_SUB, 1, n1, t1, pqp, s1, qpt, sk);
            BIN(GF_BINARY_DIV, 1, n1, t1, t1, s1, qtt, skk);
            if (rc == 0)
                rc = c->k->where(K, 1, n1, diff, act, s1, t1, s1, zero, s0, 4);
            /* p[t] += diff */
            BIN(GF_BINARY_ADD, 1, n1, t1, p + t, sk, diff, s1);
            if (rc == 0)
                rc = c->k->strided_copy(K, 1, n1, p + t, sk, t1, s1, 0, 4);
            /* pQp = (pQp + diff (diff Q[t][t] + 2 Qp[t])) / (1 + diff) / (1 + diff) */
            BIN(GF_BINARY_MUL, 1, n1, t1, qpt, sk, two, s0);
            BIN(GF_BINARY_MUL, 1, n1, t2, diff, s1, qtt, skk);
            BIN(GF_BINARY_ADD, 1, n1, t1, t2, s1, t1, s1);
            BIN(GF_BINARY_MUL, 1, n1, t1, t1, s1, diff, s1);
            BIN(GF_BINARY_ADD, 1, n1, pqp, pqp, s1, t1, s1);
            BIN(GF_BINARY_ADD, 1, n1, t2, diff, s1, one, s0);
            BIN(GF_BINARY_DIV, 1, n1, pqp, pqp, s1, t2, s1);
            BIN(GF_BINARY_DIV, 1, n1, pqp, pqp, s1, t2, s1);
            /* Qp = (Qp + diff Q[t]) / (1 + diff); p /= 1 + diff */
            BIN(GF_BINARY_MUL, 2, rk, b[PR_ROW], b[PR_Q] + t * nc, qrow, diff, col);
            BIN(GF_BINARY_ADD, 2, rk, qp, qp, dk, b[PR_ROW], dk);
            BIN(GF_BINARY_DIV, 2, rk, qp, qp, dk, t2, col);
            BIN(GF_BINARY_DIV, 2, rk, p, p, dk, t2, col);
        }
    }
#undef BIN
    if (rc == 0)
        rc = c->k->strided_copy(K, 1, n1k, z, NULL, p, s1, 0, 4);
    return rc;
}

/* inputs: 1 classlabels_ints, 2 rho, 3 support_vectors, 4 pairs, 5 votes,
 * 6 vote_base. aux as svmreg's [0..10], then [11] decisions, [12] decisions
 * > 0 as floats, [13] votes, [14] best, [15] pairs P, [16] classes C, [17]
 * with probabilities, [18...] proba_run's scratch offsets */
static gf_status svmclass_infer(gf_onnx_infer_ctx *c)
{
    int64_t rows = 0, cols = 0, n_labels, n_rho, n_sv, n_pairs, n_votes, n_base;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_I64, "classlabels_ints", &n_labels)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_F32, "rho", &n_rho)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 3, GF_DT_F32, "support_vectors", &n_sv)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 4, GF_DT_F32, "the pair matrix", &n_pairs)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 5, GF_DT_F32, "the vote matrix", &n_votes)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 6, GF_DT_F32, "the vote base", &n_base)) != GF_OK)
        return st;
    int64_t nc = n_labels, np = nc * (nc - 1) / 2;
    int64_t sup = np > 0 ? n_pairs / np : 0;
    if (nc < 2 || sup < 1 || n_pairs != sup * np || n_sv != sup * cols || n_rho != np ||
        n_votes != np * nc || n_base != nc)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " classes, %" PRId64 " values of "
                            "rho and %" PRId64 " of support_vectors do not fit %" PRId64
                            " features (the pair matrix is made when a model is deployed)",
                            nc, n_rho, n_sv, cols);
    int64_t ker;
    if ((st = kernel_of(c, sup, &ker)) != GF_OK)
        return st;
    const gf_onnx_attr *pa = gf_onnx_attr_find(c->n, "prob_a"),
                       *pb = gf_onnx_attr_find(c->n, "prob_b");
    bool proba = pa != NULL && pa->n > 0;
    if (proba && (pb == NULL || pa->n != (size_t)np || pb->n != (size_t)np))
        return gf_onnx_fail(c, GF_ERR_INVALID, "prob_a and prob_b must have one value per "
                            "pair of classes (%" PRId64 ")", np);
    if (proba && (st = proba_plan(c, rows, np, nc, pa->floats, pb->floats)) != GF_OK)
        return st;
    int64_t chunk = rbf_chunk(rows, sup, cols);
    int64_t head[6] = {rows, cols, sup, ker, 0, chunk};
    memcpy(c->aux, head, sizeof head);
    c->aux[15] = np;
    c->aux[16] = nc;
    size_t sizes[9] = {
        c->in[0]->dtype == GF_DT_F32 ? 0 : (size_t)(rows * cols) * 4, /* x */
        (size_t)(rows * sup) * 4,                                     /* gram */
        ker == KER_RBF ? (size_t)(chunk * sup * cols) * 4 : 0,        /* diff */
        256, (size_t)(rows * np),                                     /* consts, bool */
        (size_t)(rows * np) * 4, (size_t)(rows * np) * 4,             /* d, d > 0 */
        (size_t)(rows * nc) * 4, (size_t)rows * 8};                   /* votes, best */
    size_t off = 0;
    for (int k = 0; k < 9; k++) {
        c->aux[6 + k] = (int64_t)off;
        off += A(sizes[k]);
    }
    if (proba) { /* after the others: aux[18 + k] the offsets of proba_sizes */
        size_t psz[PROBA_BUFS];
        proba_sizes(rows, np, nc, psz);
        for (int k = 0; k < PROBA_BUFS; k++) {
            c->aux[18 + k] = (int64_t)off;
            off += A(psz[k]);
        }
    }
    c->aux[17] = proba;
    c->scratch = off;
    int64_t ls[1] = {rows}, zs[2] = {rows, proba ? nc : nc == 2 ? 2 : np};
    gf_onnx_set_out(c, 0, GF_DT_I64, 1, ls);
    if (c->n->n_out > 1)
        gf_onnx_set_out(c, 1, GF_DT_F32, 2, zs);
    return GF_OK;
}

static gf_status svmclass_run(const gf_onnx_run_ctx *c)
{
    const int64_t *aux = c->aux;
    int64_t rows = aux[0], sup = aux[2], np = aux[15], nc = aux[16];
    char *sc = c->scratch;
    float *g = (float *)(sc + aux[7]), *consts = (float *)(sc + aux[9]);
    float *d = (float *)(sc + aux[11]), *dpos = (float *)(sc + aux[12]),
          *votes = (float *)(sc + aux[13]);
    unsigned char *pos = (unsigned char *)(sc + aux[10]);
    int64_t *best = (int64_t *)(sc + aux[14]);
    const float *x;
    int rc = gf_onnx_ml_x_f32(c, &x, sc + aux[6]);
    if (rc == 0)
        rc = gram(c, x, g, sc);
    if (rc == 0) /* the decisions: d = K pairs + rho */
        rc = c->k->gemm(K, 0, 0, rows, np, sup, 1.0f, g, GF_DT_F32, sup, c->in[4].data,
                        GF_DT_F32, np, 0.0f, d, np);
    if (rc == 0)
        rc = c->k->bias_act(K, d, rows, np, c->in[2].data, GF_DT_F32, GF_ACT_IDENTITY);
    float zero = 0.0f;
    int64_t n[1] = {rows * np}, s1[1] = {1}, s0[1] = {0};
    if (rc == 0)
        rc = c->k->fill(K, &consts[3], 1, &zero, 4);
    if (rc == 0)
        rc = c->k->binary(K, GF_BINARY_GREATER, 1, n, pos, d, s1, &consts[3], s0, GF_DT_F32);
    if (rc == 0)
        rc = c->k->cast_ex(K, dpos, GF_DT_F32, pos, GF_DT_BOOL, rows * np);
    if (rc == 0) /* votes = (d > 0) votes + vote_base: small integers, exact */
        rc = c->k->gemm(K, 0, 0, rows, nc, np, 1.0f, dpos, GF_DT_F32, np, c->in[5].data,
                        GF_DT_F32, nc, 0.0f, votes, nc);
    if (rc == 0)
        rc = c->k->bias_act(K, votes, rows, nc, c->in[6].data, GF_DT_F32, GF_ACT_IDENTITY);
    if (rc == 0)
        rc = c->k->reduce(K, GF_REDUCE_ARGMAX, best, votes, rows, nc, 1);
    if (rc == 0)
        rc = c->k->gather(K, c->out[0].data, c->in[1].data, 1, nc, 1, best, GF_DT_I64, rows, 8);
    float *z = c->n->n_out > 1 ? c->out[1].data : NULL;
    if (rc == 0 && z != NULL && aux[17]) {
        rc = proba_run(c, d, z);
    } else if (rc == 0 && z != NULL && nc == 2) { /* [-d, d] */
        int64_t rr[1] = {rows}, s2[1] = {2};
        rc = c->k->strided_copy(K, 1, rr, z + 1, s2, d, s1, 0, 4);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_SUB, 1, rr, votes, &consts[3], s0, d, s1, GF_DT_F32);
        if (rc == 0)
            rc = c->k->strided_copy(K, 1, rr, z, s2, votes, s1, 0, 4);
    } else if (rc == 0 && z != NULL) {
        rc = c->k->strided_copy(K, 1, n, z, NULL, d, s1, 0, 4);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

const gf_onnx_op gf_onnx_ops_svm[] = {
    {"ai.onnx.ml", "SVMRegressor", {1}, 1, 4, 1, 1,
     "coefficients:W,kernel_params:F,kernel_type:s,n_supports:i,n_targets:i,one_class:i,"
     "post_transform:s,rho:W,support_vectors:W",
     0, 0, svmreg_infer, svmreg_run,
     "X [N, F] or [F]; kernels LINEAR, POLY, RBF, SIGMOID; one target; post_transform NONE", 0},
    {"ai.onnx.ml", "SVMClassifier", {1}, 1, 4 + GF_ONNX_SVM_TABLES, 1, 2,
     "classlabels_ints:J,classlabels_strings:S,coefficients:F,kernel_params:F,kernel_type:s,"
     "post_transform:s,prob_a:F,prob_b:F,rho:W,support_vectors:W,vectors_per_class:I",
     0, 0, svmclass_infer, svmclass_run,
     "X [N, F] or [F]; integer or string class labels; kernels LINEAR, POLY, RBF, SIGMOID; support "
     "vectors (not liblinear's form); probability estimates (prob_a, prob_b) coupled as "
     "libsvm does; post_transform NONE", 0},
    {.type = NULL},
};
