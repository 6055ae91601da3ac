/* gpufaas — a tree ensemble's attributes turned into the tables its run
 * reads (functions/onnx; TreeEnsembleClassifier, TreeEnsembleRegressor).
 *
 * ONNX describes the trees as parallel lists keyed by (tree id, node id).
 * The importer rewrites them once, at deploy, into dense tables indexed by
 * a node's position in the list, so the device walks every tree of every
 * row one level per step with gathers and a compare (ops_trees.c):
 *   feat[m]     the feature a branch reads (0 for a leaf);
 *   thr[m]      its threshold, the comparison made "x <= thr" for every
 *               rule: x < t is x <= the float below t, and the rules GTE
 *               and GT swap the two children;
 *   next[3][m]  the node taken when x <= thr, when not, and when x is NaN
 *               (the child nodes_missing_value_tracks_true names); a leaf's
 *               three are itself, so a row that reached it stays there;
 *   leaf[m][c]  what the leaf adds to each column (class or target);
 *   roots[t]    each tree's first node in the list, trees in id order;
 *   meta        [levels, NaN needs its own step, binary scores (0 no, 1
 *               weights all >= 0, 2 not), aggregate,
 *               features read].
 * They become initializers, so they live in the weights file and the
 * parameter cache like any model's weights. Every id is checked: a child
 * that does not exist, a node reached twice (a cycle, or a graph that is
 * not a tree) or a weight on a column outside the outputs is a 400.
 */
#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "functions/onnx/import_pb.h"

#define MAX_TREE_NODES ((size_t)1 << 24)
#define MAX_COLUMNS 65536

typedef struct tree_attrs {
    const Onnx__AttributeProto *treeids, *nodeids, *featureids, *values, *modes, *truenode,
        *falsenode, *missing, *w_treeids, *w_nodeids, *w_ids, *w_weights, *labels, *labels_s,
        *n_targets, *aggregate;
} tree_attrs;

const Onnx__AttributeProto *gf_onnx_pb_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t k = 0; k < np->n_attribute; k++)
        if (np->attribute[k]->name != NULL && strcmp(np->attribute[k]->name, name) == 0)
            return np->attribute[k];
    return NULL;
}
#define attr gf_onnx_pb_attr

bool gf_onnx_trees_consumes(const char *name)
{
    static const char *const names[] = {
        "nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
        "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
        "nodes_hitrates", "class_treeids", "class_nodeids", "class_ids", "class_weights",
        "target_treeids", "target_nodeids", "target_ids", "target_weights", "n_targets",
        "aggregate_function"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* The list attribute a (ints, floats or strings), of n entries when
 * required (n < 0: any length, stored in *n). */
static gf_status list_len(const Onnx__AttributeProto *a, const char *name, int kind, size_t *n,
                          bool fixed, const char *lb, gf_err *err)
{
    static const int types[] = {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS,
                                ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS,
                                ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS};
    static const char *const what[] = {"ints", "floats", "strings"};
    if (a == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%s' is missing", lb, name);
    if ((int)a->type != types[kind])
        return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%s' must be a list of %s",
                          lb, name, what[kind]);
    size_t len = kind == 0 ? a->n_ints : kind == 1 ? a->n_floats : a->n_strings;
    if (fixed && len != *n)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%s' has %zu values; "
                          "nodes_treeids has %zu", lb, name, len, *n);
    if (len > MAX_TREE_NODES)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "node %s: attribute '%s' has %zu values (at "
                          "most %zu)", lb, name, len, MAX_TREE_NODES);
    *n = len;
    return GF_OK;
}

/* Node positions sorted by (tree id, node id), for lookups. */
static const int64_t *g_tree, *g_node;
static int cmp_key(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (g_tree[i] != g_tree[j])
        return g_tree[i] < g_tree[j] ? -1 : 1;
    return g_node[i] < g_node[j] ? -1 : g_node[i] > g_node[j];
}

static int64_t find(const int64_t *sorted, size_t m, const int64_t *tree, const int64_t *node,
                    int64_t t, int64_t n)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t i = sorted[mid];
        if (tree[i] < t || (tree[i] == t && node[i] < n))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m && tree[sorted[lo]] == t && node[sorted[lo]] == n)
        return sorted[lo];
    return -1;
}

void gf_onnx_trees_free(gf_onnx_trees *tt)
{
    free(tt->feat);
    free(tt->thr);
    free(tt->next);
    free(tt->leaf);
    free(tt->roots);
    memset(tt, 0, sizeof *tt);
}

static bool mode_is(const ProtobufCBinaryData *s, const char *m)
{
    return s->len == strlen(m) && memcmp(s->data, m, s->len) == 0;
}

/* Rules as x <= thr: thr, and whether the children swap. */
static gf_status rule(const ProtobufCBinaryData *mode, float t, float *thr, bool *swap, bool *leaf,
                      const char *lb, size_t i, gf_err *err)
{
    *leaf = false;
    *swap = false;
    *thr = t;
    if (mode_is(mode, "LEAF")) {
        *leaf = true;
        *thr = 0.0f;
        return GF_OK;
    }
    if (isnan(t))
        return gf_err_set(err, GF_ERR_INVALID, "node %s: tree node %zu has a NaN threshold",
                          lb, i);
    /* x < t is x <= the float below t; below -inf there is none: never */
    float below = t == -INFINITY ? NAN : nextafterf(t, -INFINITY);
    if (mode_is(mode, "BRANCH_LEQ"))
        return GF_OK;
    if (mode_is(mode, "BRANCH_LT")) {
        *thr = below;
        return GF_OK;
    }
    if (mode_is(mode, "BRANCH_GTE")) { /* x >= t: not x < t */
        *thr = below;
        *swap = true;
        return GF_OK;
    }
    if (mode_is(mode, "BRANCH_GT")) { /* x > t: not x <= t */
        *swap = true;
        return GF_OK;
    }
    return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s: tree node %zu has rule '%.*s' (LEAF, "
                      "BRANCH_LEQ, BRANCH_LT, BRANCH_GTE and BRANCH_GT are supported)", lb, i,
                      (int)(mode->len > 32 ? 32 : mode->len), (const char *)mode->data);
}

/* Each tree walked from its root level by level: every child exists in the
 * same tree and no node is reached twice; *levels is the most branches on
 * a path. */
static gf_status walk(gf_onnx_trees *tt, const int64_t *treeids, const bool *is_leaf,
                      const char *lb, gf_err *err)
{
    size_t m = (size_t)tt->m;
    unsigned char *seen = calloc(m + 1, 1);
    int64_t *cur = malloc((m + 1) * sizeof *cur), *nxt = malloc((m + 1) * sizeof *nxt);
    gf_status st = GF_OK;
    if (seen == NULL || cur == NULL || nxt == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t levels = 0;
    for (int64_t t = 0; t < tt->t && st == GF_OK; t++) {
        size_t nc = 1, depth = 0;
        cur[0] = tt->roots[t];
        seen[cur[0]] = 1;
        while (nc > 0 && st == GF_OK) {
            size_t nn = 0;
            for (size_t i = 0; i < nc && st == GF_OK; i++) {
                int64_t v = cur[i];
                if (is_leaf[v])
                    continue;
                for (int k = 0; k < 2; k++) {
                    int64_t c = tt->next[(size_t)k * m + (size_t)v];
                    if (seen[c]) {
                        st = gf_err_set(err, GF_ERR_INVALID, "node %s: tree %" PRId64 " is not "
                                        "a tree (a node is reached twice: a cycle or a shared "
                                        "child)", lb, treeids[v]);
                        break;
                    }
                    seen[c] = 1;
                    nxt[nn++] = c;
                }
            }
            if (nn > 0)
                depth++;
            int64_t *sw = cur;
            cur = nxt;
            nxt = sw;
            nc = nn;
        }
        if ((int64_t)depth > levels)
            levels = (int64_t)depth;
    }
    tt->meta[0] = levels;
out:
    free(seen);
    free(cur);
    free(nxt);
    return st;
}

gf_status gf_onnx_trees_build(const Onnx__NodeProto *np, bool classifier, const char *lb,
                              gf_onnx_trees *tt, gf_err *err)
{
    memset(tt, 0, sizeof *tt);
    const char *w = classifier ? "class" : "target";
    char wn[4][32];
    snprintf(wn[0], sizeof wn[0], "%s_treeids", w);
    snprintf(wn[1], sizeof wn[1], "%s_nodeids", w);
    snprintf(wn[2], sizeof wn[2], "%s_ids", w);
    snprintf(wn[3], sizeof wn[3], "%s_weights", w);
    tree_attrs a = {
        attr(np, "nodes_treeids"), attr(np, "nodes_nodeids"), attr(np, "nodes_featureids"),
        attr(np, "nodes_values"), attr(np, "nodes_modes"), attr(np, "nodes_truenodeids"),
        attr(np, "nodes_falsenodeids"), attr(np, "nodes_missing_value_tracks_true"),
        attr(np, wn[0]), attr(np, wn[1]), attr(np, wn[2]), attr(np, wn[3]),
        attr(np, "classlabels_int64s"), attr(np, "classlabels_strings"), attr(np, "n_targets"),
        attr(np, "aggregate_function")};
    size_t m = 0, nw = 0, nmiss;
    gf_status st;
    if ((st = list_len(a.treeids, "nodes_treeids", 0, &m, false, lb, err)) != GF_OK ||
        (st = list_len(a.nodeids, "nodes_nodeids", 0, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.featureids, "nodes_featureids", 0, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.values, "nodes_values", 1, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.modes, "nodes_modes", 2, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.truenode, "nodes_truenodeids", 0, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.falsenode, "nodes_falsenodeids", 0, &m, true, lb, err)) != GF_OK ||
        (st = list_len(a.w_treeids, wn[0], 0, &nw, false, lb, err)) != GF_OK)
        return st;
    if (m == 0)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: the ensemble has no nodes", lb);
    if ((st = list_len(a.w_nodeids, wn[1], 0, &nw, true, lb, err)) != GF_OK ||
        (st = list_len(a.w_ids, wn[2], 0, &nw, true, lb, err)) != GF_OK ||
        (st = list_len(a.w_weights, wn[3], 1, &nw, true, lb, err)) != GF_OK)
        return st;
    nmiss = m;
    if (a.missing != NULL &&
        (st = list_len(a.missing, "nodes_missing_value_tracks_true", 0, &nmiss, true, lb,
                       err)) != GF_OK)
        return st;
    /* the columns */
    int64_t cols;
    if (classifier) {
        size_t nl = 0;
        if ((st = list_len(a.labels, "classlabels_int64s", 0, &nl, false, lb, err)) != GF_OK)
            return st;
        cols = (int64_t)nl;
    } else {
        if (a.n_targets == NULL || a.n_targets->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: the int attribute n_targets is "
                              "missing", lb);
        cols = a.n_targets->i;
    }
    if (cols < 1 || cols > MAX_COLUMNS)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: %" PRId64 " %s (1 to %d)", lb, cols,
                          classifier ? "class labels" : "targets", MAX_COLUMNS);
    /* aggregate: SUM, AVERAGE, MIN, MAX (regressor; the classifier sums) */
    int agg = 0;
    if (a.aggregate != NULL) {
        const ProtobufCBinaryData *s = &a.aggregate->s;
        if (a.aggregate->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: aggregate_function must be a "
                              "string", lb);
        agg = mode_is(s, "SUM") ? 0 : mode_is(s, "AVERAGE") ? 1 : mode_is(s, "MIN") ? 2
            : mode_is(s, "MAX") ? 3 : -1;
        if (agg < 0)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: aggregate_function must be SUM, "
                              "AVERAGE, MIN or MAX", lb);
    }
    /* a binary classifier may give weights for one class only: one score
     * column (binary 1 when every weight is >= 0, 2 when some are not: how
     * onnxruntime turns the score into two, see ops_trees.c) */
    int binary = 0;
    if (classifier && cols == 2 && nw > 0) {
        bool one = true, positive = true;
        for (size_t i = 0; i < nw; i++) {
            one = one && a.w_ids->ints[i] == a.w_ids->ints[0];
            positive = positive && a.w_weights->floats[i] >= 0.0f;
        }
        binary = one ? (positive ? 1 : 2) : 0;
    }
    int64_t wcols = binary ? 1 : cols;
    if ((size_t)wcols * m > ((size_t)1 << 30) / sizeof(float))
        return gf_err_set(err, GF_ERR_TOO_LARGE, "node %s: %zu nodes by %" PRId64 " columns is "
                          "too large", lb, m, wcols);
    tt->m = (int64_t)m;
    tt->c = wcols;
    tt->agg = agg;
    const int64_t *treeids = a.treeids->ints, *nodeids = a.nodeids->ints;
    int64_t *sorted = malloc(m * sizeof *sorted);
    bool *is_leaf = calloc(m, sizeof *is_leaf);
    tt->feat = calloc(m, sizeof *tt->feat);
    tt->thr = calloc(m, sizeof *tt->thr);
    tt->next = calloc(3 * m, sizeof *tt->next);
    tt->leaf = malloc(m * (size_t)wcols * sizeof *tt->leaf);
    tt->roots = malloc(m * sizeof *tt->roots);
    if (sorted == NULL || is_leaf == NULL || tt->feat == NULL || tt->thr == NULL ||
        tt->next == NULL || tt->leaf == NULL || tt->roots == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m; i++)
        sorted[i] = (int64_t)i;
    g_tree = treeids;
    g_node = nodeids;
    qsort(sorted, m, sizeof *sorted, cmp_key);
    for (size_t i = 1; i < m; i++)
        if (cmp_key(&sorted[i - 1], &sorted[i]) == 0) {
            st = gf_err_set(err, GF_ERR_INVALID, "node %s: tree %" PRId64 " has node id %" PRId64
                            " twice", lb, treeids[sorted[i]], nodeids[sorted[i]]);
            goto out;
        }
    /* roots: a tree's first node in the list; trees in id order */
    for (size_t i = 0; i < m; i++) {
        int64_t v = sorted[i];
        if (i == 0 || treeids[v] != treeids[sorted[i - 1]])
            tt->roots[tt->t++] = v;
        else if (v < tt->roots[tt->t - 1])
            tt->roots[tt->t - 1] = v;
    }
    bool nan_step = false;
    for (size_t i = 0; i < m; i++) {
        bool swap, leaf;
        float thr;
        if ((st = rule(&a.modes->strings[i], a.values->floats[i], &thr, &swap, &leaf, lb, i,
                       err)) != GF_OK)
            goto out;
        is_leaf[i] = leaf;
        tt->thr[i] = thr;
        if (leaf) {
            for (int k = 0; k < 3; k++)
                tt->next[(size_t)k * m + i] = (int64_t)i;
            continue;
        }
        int64_t f = a.featureids->ints[i];
        if (f < 0 || f > (INT64_C(1) << 40)) {
            st = gf_err_set(err, GF_ERR_INVALID, "node %s: tree node %zu reads feature %" PRId64,
                            lb, i, f);
            goto out;
        }
        tt->feat[i] = f;
        if (f + 1 > tt->features)
            tt->features = f + 1;
        int64_t yes = find(sorted, m, treeids, nodeids, treeids[i], a.truenode->ints[i]);
        int64_t no = find(sorted, m, treeids, nodeids, treeids[i], a.falsenode->ints[i]);
        if (yes < 0 || no < 0) {
            st = gf_err_set(err, GF_ERR_INVALID, "node %s: tree %" PRId64 " node %" PRId64
                            " has a child (%" PRId64 " or %" PRId64 ") not in the tree", lb,
                            treeids[i], nodeids[i], a.truenode->ints[i], a.falsenode->ints[i]);
            goto out;
        }
        bool miss_true = a.missing != NULL && a.missing->ints[i] != 0;
        tt->next[i] = swap ? no : yes;
        tt->next[m + i] = swap ? yes : no;
        tt->next[2 * m + i] = miss_true ? yes : no;
        nan_step = nan_step || tt->next[2 * m + i] != tt->next[m + i];
    }
    if ((st = walk(tt, treeids, is_leaf, lb, err)) != GF_OK)
        goto out;
    /* leaf values: the identity of the aggregate where a leaf gives none */
    float none = agg == 2 ? FLT_MAX : agg == 3 ? -FLT_MAX : 0.0f;
    for (size_t i = 0; i < m * (size_t)wcols; i++)
        tt->leaf[i] = none;
    unsigned char *given = calloc(m * (size_t)wcols, 1);
    if (given == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < nw; j++) {
        int64_t v = find(sorted, m, treeids, nodeids, a.w_treeids->ints[j], a.w_nodeids->ints[j]);
        int64_t col = binary ? 0 : a.w_ids->ints[j];
        if (v < 0 || col < 0 || col >= wcols) {
            st = gf_err_set(err, GF_ERR_INVALID, "node %s: weight %zu is for tree %" PRId64
                            " node %" PRId64 " column %" PRId64 ", which does not exist", lb, j,
                            a.w_treeids->ints[j], a.w_nodeids->ints[j], a.w_ids->ints[j]);
            break;
        }
        size_t at = (size_t)v * (size_t)wcols + (size_t)col;
        float x = a.w_weights->floats[j];
        if (!given[at])
            tt->leaf[at] = agg == 2 || agg == 3 ? x : 0.0f;
        if (agg == 2)
            tt->leaf[at] = fminf(tt->leaf[at], x);
        else if (agg == 3)
            tt->leaf[at] = fmaxf(tt->leaf[at], x);
        else if (given[at])
            tt->leaf[at] += x;
        else
            tt->leaf[at] = x;
        given[at] = 1;
    }
    free(given);
    if (st != GF_OK)
        goto out;
    tt->meta[1] = nan_step;
    tt->meta[2] = binary;
    tt->meta[3] = agg;
    tt->meta[4] = tt->features;
out:
    free(sorted);
    free(is_leaf);
    if (st != GF_OK)
        gf_onnx_trees_free(tt);
    return st;
}
