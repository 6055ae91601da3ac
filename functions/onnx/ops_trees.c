/* gpufaas — tree ensembles of the ai.onnx.ml domain: TreeEnsembleClassifier
 * and TreeEnsembleRegressor, as skl2onnx exports scikit-learn's decision
 * trees, random forests, extra trees and gradient boosting (functions/onnx).
 *
 * The importer turned the trees into dense tables (import_trees.c), which
 * are inputs after the lifted base_values (and classlabels_int64s): feat,
 * thr, next, leaf, roots, and meta, read on the host. Every row walks every
 * tree at once, one level per step, through the kernel table:
 *   cur = roots (per row and tree);
 *   levels times: f = feat[cur]; v = x[row, f]; cur = v <= thr[cur] ?
 *                 next[0][cur] : next[1][cur] (next[2][cur] where v is NaN);
 *   scores[row] = aggregate over trees of leaf[cur] (+ base_values);
 * then the classifier's post transform and labels (argmax). Semantics are
 * ONNX's reference implementation's (onnx/reference/ops/aionnxml), checked
 * against onnxruntime on skl2onnx's exports (tests/functions/onnx/ml).
 */
#include <inttypes.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/ops_ml.h"

#define A gf_onnx_ml_align

enum { PT_NONE, PT_LOGISTIC, PT_SOFTMAX };
enum { AGG_SUM, AGG_AVERAGE, AGG_MIN, AGG_MAX };

/* aux: [0] rows N, [1] features F, [2] trees T, [3] nodes M, [4] leaf columns C,
 * [5] levels, [6] NaN step, [7] binary, [8] aggregate, [9] post transform,
 * [10] labels L (classifier), [11] base values, [12] first table input,
 * [13..] scratch offsets: 13 x, 14 cur, 15 a, 16 b, 17 f, 18 nan, 19 v, 20 th,
 * 21 cond, 22 ok, 23 vals, 24 scores, 25 best, 26 consts, 27 binary t */
static gf_status trees_infer(gf_onnx_infer_ctx *c)
{
    bool cls = c->n->op->code == 1;
    int t0 = cls ? 3 : 2;
    int64_t rows = 0, cols = 0;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    for (int k = 0; k < GF_ONNX_TREE_TABLES; k++)
        if (c->n->n_in <= t0 + k || c->in[t0 + k] == NULL)
            return gf_onnx_fail(c, GF_ERR_INVALID, "the node has not its tree tables (made "
                                "when a model is deployed)");
    const gf_onnx_tinfo *feat = c->in[t0], *thr = c->in[t0 + 1], *next = c->in[t0 + 2],
                        *leaf = c->in[t0 + 3], *roots = c->in[t0 + 4], *meta = c->in[t0 + 5];
    int64_t m = gf_onnx_numel(feat), t = gf_onnx_numel(roots);
    if (meta->host == NULL || gf_onnx_numel(meta) != GF_ONNX_TREE_META || meta->dtype != GF_DT_I64 ||
        feat->dtype != GF_DT_I64 || thr->dtype != GF_DT_F32 || next->dtype != GF_DT_I64 ||
        leaf->dtype != GF_DT_F32 || roots->dtype != GF_DT_I64 || m < 1 || t < 1 ||
        gf_onnx_numel(thr) != m || gf_onnx_numel(next) != 3 * m || gf_onnx_numel(leaf) % m)
        return gf_onnx_fail(c, GF_ERR_INVALID, "the tree tables do not fit together");
    int64_t lc = gf_onnx_numel(leaf) / m;
    int64_t levels = gf_onnx_const_i64(meta->host, 0), features = gf_onnx_const_i64(meta->host, 4);
    int64_t binary = gf_onnx_const_i64(meta->host, 2), agg = gf_onnx_const_i64(meta->host, 3);
    if (levels < 0 || levels > m || agg < AGG_SUM || agg > AGG_MAX || lc < 1)
        return gf_onnx_fail(c, GF_ERR_INVALID, "the tree tables do not fit together");
    if (features > cols)
        return gf_onnx_fail(c, GF_ERR_INVALID, "the trees read feature %" PRId64 "; X has %"
                            PRId64 " features", features - 1, cols);
    int64_t n_base, n_labels = 0;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "base_values", &n_base)) != GF_OK ||
        (cls && (st = gf_onnx_ml_weight_in(c, 2, GF_DT_I64, "classlabels_int64s",
                                           &n_labels)) != GF_OK))
        return st;
    if (cls && (binary ? lc != 1 || n_labels != 2 : lc != n_labels))
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " class labels for %" PRId64
                            " score columns", n_labels, lc);
    int64_t ocols = cls ? n_labels : lc;
    if (binary && n_base > 1)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "a binary ensemble with weights for one "
                            "class takes one base value, not %" PRId64, n_base);
    if (n_base != 0 && n_base != 1 && n_base != ocols)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " base_values for %" PRId64
                            " columns (1 or one each)", n_base, ocols);
    const char *pt = gf_onnx_attr_str(c->n, "post_transform", "NONE");
    int64_t post = strcmp(pt, "NONE") == 0 ? PT_NONE
                 : cls && strcmp(pt, "LOGISTIC") == 0 ? PT_LOGISTIC
                 : cls && strcmp(pt, "SOFTMAX") == 0 ? PT_SOFTMAX : -1;
    if (post < 0)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "post_transform '%.16s' is not supported "
                            "(%s)", pt, cls ? "NONE, LOGISTIC and SOFTMAX are" : "only NONE is");
    int64_t *aux = c->aux;
    const int64_t head[13] = {rows, cols, t, m, lc, levels, gf_onnx_const_i64(meta->host, 1),
                              binary, agg, post, n_labels, n_base, t0};
    memcpy(aux, head, sizeof head);
    size_t nt = (size_t)(rows * t), off = 0;
    size_t sizes[15] = {
        c->in[0]->dtype == GF_DT_F32 ? 0 : (size_t)(rows * cols) * 4, /* x */
        nt * 8, nt * 8, nt * 8, nt * 8, nt * 8,                      /* cur a b f nan */
        nt * 4, nt * 4, nt, nt,                                       /* v th cond ok */
        nt * (size_t)lc * 4,                                          /* vals */
        (size_t)(rows * (ocols > lc ? ocols : lc)) * 4,               /* scores */
        (size_t)rows * 8, 256, (size_t)rows * 4};                     /* best consts t */
    for (int k = 0; k < 15; k++) {
        aux[13 + k] = (int64_t)off;
        off += A(sizes[k]);
    }
    c->scratch = off;
    /* the offset of each row in X: row * F, per row and tree */
    gf_onnx_const *rowoff;
    int64_t rs[1] = {rows};
    if ((st = gf_onnx_const_new(GF_DT_I64, 1, rs, &rowoff, c->err)) != GF_OK)
        return st;
    for (int64_t r = 0; r < rows; r++)
        ((int64_t *)rowoff->data)[r] = r * cols;
    c->step_const = rowoff;
    if (cls) {
        int64_t ls[1] = {rows}, zs[2] = {rows, n_labels};
        gf_onnx_set_out(c, 0, GF_DT_I64, 1, ls);
        if (c->n->n_out > 1)
            gf_onnx_set_out(c, 1, GF_DT_F32, 2, zs);
    } else {
        int64_t ys[2] = {rows, lc};
        gf_onnx_set_out(c, 0, GF_DT_F32, 2, ys);
    }
    return GF_OK;
}

#define K c->k->ctx, c->s

/* Every row and tree from its root to its leaf: cur[N * T]. */
static int walk(const gf_onnx_run_ctx *c, const float *x, char *sc)
{
    const int64_t *aux = c->aux;
    int64_t rows = aux[0], cols = aux[1], t = aux[2], m = aux[3], nt = rows * t;
    int t0 = (int)aux[12];
    const int64_t *feat = c->in[t0].data, *next = c->in[t0 + 2].data;
    const float *thr = c->in[t0 + 1].data;
    int64_t *cur = (int64_t *)(sc + aux[14]), *a = (int64_t *)(sc + aux[15]),
            *b = (int64_t *)(sc + aux[16]), *f = (int64_t *)(sc + aux[17]),
            *nan = (int64_t *)(sc + aux[18]);
    float *v = (float *)(sc + aux[19]), *th = (float *)(sc + aux[20]);
    unsigned char *cond = (unsigned char *)(sc + aux[21]), *ok = (unsigned char *)(sc + aux[22]);
    int64_t shape[2] = {rows, t}, dense[2] = {t, 1}, per_tree[2] = {0, 1}, per_row[2] = {1, 0};
    int64_t r1[1] = {nt}, s1[1] = {1};
    int rc = c->k->strided_copy(K, 2, shape, cur, NULL, c->in[t0 + 4].data, per_tree, 0, 8);
    for (int64_t d = 0; d < aux[5] && rc == 0; d++) {
        rc = c->k->gather(K, f, feat, 1, m, 1, cur, GF_DT_I64, nt, 8);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_ADD, 2, shape, f, f, dense, c->step_const, per_row,
                              GF_DT_I64);
        if (rc == 0)
            rc = c->k->gather(K, v, x, 1, rows * cols, 1, f, GF_DT_I64, nt, 4);
        if (rc == 0)
            rc = c->k->gather(K, th, thr, 1, m, 1, cur, GF_DT_I64, nt, 4);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_LESS_EQUAL, 1, r1, cond, v, s1, th, s1, GF_DT_F32);
        if (rc == 0)
            rc = c->k->gather(K, a, next, 1, m, 1, cur, GF_DT_I64, nt, 8);
        if (rc == 0)
            rc = c->k->gather(K, b, next + m, 1, m, 1, cur, GF_DT_I64, nt, 8);
        if (rc == 0 && aux[6]) { /* NaN (v != v) takes the missing-value child */
            rc = c->k->gather(K, nan, next + 2 * m, 1, m, 1, cur, GF_DT_I64, nt, 8);
            if (rc == 0)
                rc = c->k->where(K, 1, r1, f, cond, s1, a, s1, b, s1, 8);
            if (rc == 0)
                rc = c->k->binary(K, GF_BINARY_EQUAL, 1, r1, ok, v, s1, v, s1, GF_DT_F32);
            if (rc == 0)
                rc = c->k->where(K, 1, r1, cur, ok, s1, f, s1, nan, s1, 8);
        } else if (rc == 0) {
            rc = c->k->where(K, 1, r1, cur, cond, s1, a, s1, b, s1, 8);
        }
    }
    return rc;
}

static gf_status trees_run(const gf_onnx_run_ctx *c)
{
    const int64_t *aux = c->aux;
    bool cls = c->n->op->code == 1;
    int64_t rows = aux[0], t = aux[2], m = aux[3], lc = aux[4], labels = aux[10];
    int64_t nb = aux[11], post = aux[9];
    int t0 = (int)aux[12];
    char *sc = c->scratch;
    const float *x;
    int rc = gf_onnx_ml_x_f32(c, &x, sc + aux[13]);
    if (rc == 0)
        rc = walk(c, x, sc);
    const int64_t *cur = (const int64_t *)(sc + aux[14]);
    float *vals = (float *)(sc + aux[23]), *consts = (float *)(sc + aux[26]);
    /* the classifier's scores z: the output Z, or scratch when not asked for;
     * a binary one sums into one column s first */
    float *z = cls && c->n->n_out > 1 && c->out[1].data != NULL ? c->out[1].data
                                                                : (float *)(sc + aux[24]);
    float *scores = !cls ? c->out[0].data : aux[7] ? (float *)(sc + aux[27]) : z;
    /* aggregate over the trees: vals is [N, T, C] */
    if (rc == 0)
        rc = c->k->gather(K, vals, c->in[t0 + 3].data, 1, m, lc, cur, GF_DT_I64, rows * t, 4);
    gf_reduce_op op = aux[8] == AGG_MIN ? GF_REDUCE_MIN
                    : aux[8] == AGG_MAX ? GF_REDUCE_MAX : GF_REDUCE_SUM;
    if (rc == 0)
        rc = c->k->reduce(K, op, scores, vals, rows, t, lc);
    int64_t r1[1] = {rows * lc}, s1[1] = {1}, s0[1] = {0};
    if (rc == 0 && aux[8] == AGG_AVERAGE) {
        float inv = 1.0f / (float)t;
        rc = c->k->fill(K, &consts[0], 1, &inv, 4);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_MUL, 1, r1, scores, scores, s1, &consts[0], s0,
                              GF_DT_F32);
    }
    int64_t shape[2] = {rows, lc}, dense[2] = {lc, 1}, bs[2] = {0, nb > 1 ? 1 : 0};
    if (rc == 0 && nb > 0)
        rc = c->k->binary(K, GF_BINARY_ADD, 2, shape, scores, scores, dense, c->in[1].data, bs,
                          GF_DT_F32);
    if (!cls)
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    if (rc == 0 && aux[7]) {
        /* one score s per row, turned into two as onnxruntime does: Z = [1 - s, s]
         * when every weight is >= 0, else [-s, s]; with LOGISTIC the logistic
         * function of [-s, s]; SOFTMAX leaves them as they are. The label is
         * the second when s > 0.5 (weights >= 0) or s > 0 (not). */
        bool pos = aux[7] == 1;
        float k[2] = {pos && post != PT_LOGISTIC ? 1.0f : 0.0f, pos ? 0.5f : 0.0f};
        float *tmp = vals;
        unsigned char *second = (unsigned char *)(sc + aux[21]);
        const int64_t *lab = c->in[2].data;
        int64_t rr[1] = {rows}, s2[1] = {2};
        rc = c->k->fill(K, &consts[1], 1, &k[0], 4);
        if (rc == 0)
            rc = c->k->fill(K, &consts[2], 1, &k[1], 4);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_SUB, 1, rr, tmp, &consts[1], s0, scores, s1,
                              GF_DT_F32);
        if (rc == 0)
            rc = c->k->strided_copy(K, 1, rr, z + 1, s2, scores, s1, 0, 4);
        if (rc == 0)
            rc = c->k->strided_copy(K, 1, rr, z, s2, tmp, s1, 0, 4);
        if (rc == 0 && post == PT_LOGISTIC)
            rc = c->k->unary(K, GF_UNARY_SIGMOID, z, z, rows * 2, 0.0f, 0.0f);
        if (rc == 0)
            rc = c->k->binary(K, GF_BINARY_GREATER, 1, rr, second, scores, s1, &consts[2], s0,
                              GF_DT_F32);
        if (rc == 0)
            rc = c->k->where(K, 1, rr, c->out[0].data, second, s1, &lab[1], s0, &lab[0], s0, 8);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    if (rc == 0 && post == PT_LOGISTIC)
        rc = c->k->unary(K, GF_UNARY_SIGMOID, z, z, rows * labels, 0.0f, 0.0f);
    if (rc == 0 && post == PT_SOFTMAX)
        rc = c->k->softmax_axis(K, z, z, rows, labels, 1, 0);
    int64_t *best = (int64_t *)(sc + aux[25]);
    if (rc == 0)
        rc = c->k->reduce(K, GF_REDUCE_ARGMAX, best, z, rows, labels, 1);
    if (rc == 0)
        rc = c->k->gather(K, c->out[0].data, c->in[2].data, 1, labels, 1, best, GF_DT_I64, rows,
                          8);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

#define ML "ai.onnx.ml"
#define NODES                                                                              \
    "nodes_falsenodeids:I,nodes_featureids:I,nodes_hitrates:F,"                            \
    "nodes_missing_value_tracks_true:I,nodes_modes:S,nodes_nodeids:I,nodes_treeids:I,"     \
    "nodes_truenodeids:I,nodes_values:F"

const gf_onnx_op gf_onnx_ops_trees[] = {
    {ML, "TreeEnsembleClassifier", {1, 3}, 1, 3 + GF_ONNX_TREE_TABLES, 1, 2,
     "base_values:W,classlabels_int64s:J,classlabels_strings:S,class_ids:I,class_nodeids:I,"
     "class_treeids:I,class_weights:F," NODES ",post_transform:s",
     1u << 8, 0, trees_infer, trees_run,
     "X [N, F] or [F]; integer or string class labels; rules LEQ, LT, GTE, GT (not EQ, NEQ); "
     "post_transform NONE, LOGISTIC or SOFTMAX; no *_as_tensor attributes", 1},
    {ML, "TreeEnsembleRegressor", {1, 3}, 1, 2 + GF_ONNX_TREE_TABLES, 1, 1,
     "aggregate_function:s,base_values:W,n_targets:i," NODES ",post_transform:s,target_ids:I,"
     "target_nodeids:I,target_treeids:I,target_weights:F",
     1u << 7, 0, trees_infer, trees_run,
     "X [N, F] or [F]; rules LEQ, LT, GTE, GT (not EQ, NEQ); aggregate SUM, AVERAGE, MIN "
     "or MAX; post_transform NONE; no *_as_tensor attributes", 2},
    {.type = NULL},
};
