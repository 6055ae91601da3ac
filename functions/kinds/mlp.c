/* gpufaas — the `mlp` kind: a PyTorch nn.Sequential of Linear, BatchNorm1d,
 * LayerNorm and activation modules.
 *
 * Tensors are named as the Sequential's state_dict names them, by module
 * index i: a Linear has `i.weight` [out, in] and optionally `i.bias` [out]; a
 * BatchNorm1d has `i.running_mean`, `i.running_var` [c], `i.num_batches_tracked`
 * and, when affine, `i.weight`, `i.bias` [c]; a LayerNorm has `i.weight` [c]
 * and `i.bias` [c] when elementwise_affine (else nothing). Modules without
 * tensors (ReLU, Dropout, ...) leave only a gap in the indices. Every tensor
 * must be one of these (the runtime refuses the rest).
 *
 * Config, one of two descriptions of the modules without tensors:
 *   {"layers": ["Linear", "BatchNorm1d", "ReLU", "Linear"]}
 *       one entry per module of the Sequential, in order: a PyTorch class name
 *       or what str(module) prints ("GELU(approximate='tanh')",
 *       "LayerNorm((8,), eps=1e-06, elementwise_affine=True)"), so
 *       [str(m) for m in model] is always right. Required for a LayerNorm (the
 *       tensors cannot tell it from an RMSNorm or GroupNorm) and for modules
 *       before the first Linear.
 *   {"activations": ["relu", "identity"], "softmax": false, "bn_eps": 1e-5}
 *       one activation per Linear, applied at the gap (module without
 *       tensors) that follows that Linear and its BatchNorm1d, or after the
 *       last module for the last Linear; without it, relu where there is a
 *       gap and identity where there is none. See docs/functions.md.
 * With F32 weights a BatchNorm1d right after a Linear is folded into it at
 * load; otherwise batchnorm runs from the stored statistics (THE FOLDING
 * RULE, kind_util.h). One input [N, in] FP32, one output [N, out] FP32.
 *
 * Written against gpufaas/function.h only, like a plugin.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

#include "kind_util.h"
#include "kinds.h"

#define MLP_KIND "mlp"
#define MLP_MAX_MODULES 1024

/* What the weights say module i is. */
typedef enum { T_NONE = 0, T_LINEAR, T_BN, T_NORM } tmod_kind;

typedef struct {
    tmod_kind kind;
    bool bias;          /* Linear, T_NORM: i.bias; BatchNorm1d: affine (i.weight, i.bias) */
    int64_t rows, cols; /* Linear weight [rows, cols]; BN/NORM: rows = c */
} tmod;

/* What a module does, once the config has described the tensorless ones. */
typedef enum { M_NOOP = 0, M_LINEAR, M_BN, M_LN, M_ACT, M_SOFTMAX, M_LOGSOFTMAX } mod_kind;

typedef struct {
    mod_kind kind;
    gf_act act; /* M_ACT */
    float eps;  /* M_BN, M_LN */
} mod;

typedef enum { OP_LINEAR, OP_BN, OP_LN, OP_ACT, OP_SOFTMAX } op_kind;

typedef struct {
    op_kind kind;
    int module;    /* index in the Sequential, for messages */
    int64_t out;   /* features out */
    gf_act act;    /* fused (LINEAR, BN) or the activation itself (ACT) */
    bool has_bias; /* LINEAR */
    size_t w, b;   /* LINEAR parameters */
    gf_ku_vecs v;  /* BN: mean, var, gamma, beta; LN: gamma, beta */
    float eps;     /* BN, LN */
    int log;       /* SOFTMAX: log_softmax */
} mlp_op;

typedef struct {
    int n;
    mlp_op *ops;
    int64_t in, max_width;
} mlp_state;

static const struct {
    const char *name;  /* config "activations" and the lower-case aliases of "layers" */
    const char *torch; /* the PyTorch class */
    gf_act act;
} mlp_acts[] = {
    {"identity", "Identity", GF_ACT_IDENTITY},
    {"relu", "ReLU", GF_ACT_RELU},
    {"gelu", "GELU", GF_ACT_GELU_ERF},
    {"gelu_tanh", NULL, GF_ACT_GELU_TANH},
    {"silu", "SiLU", GF_ACT_SILU},
    {"tanh", "Tanh", GF_ACT_TANH},
    {"sigmoid", "Sigmoid", GF_ACT_SIGMOID},
    {"linear", NULL, GF_ACT_IDENTITY},
};
#define MLP_NACTS (sizeof mlp_acts / sizeof mlp_acts[0])

/* ---- what the weights hold ---- */

/* "<digits>.<rest>": *idx and *rest; false for any other name. */
static bool split_name(const char *name, long *idx, const char **rest)
{
    const char *dot = strchr(name, '.');
    if (dot == NULL || dot == name || dot - name > 7)
        return false;
    for (const char *p = name; p < dot; p++)
        if (*p < '0' || *p > '9')
            return false;
    *idx = strtol(name, NULL, 10);
    *rest = dot + 1;
    return true;
}

/* Classify every module with tensors; *n_out = last index + 1. */
static int discover(const gf_fn_api *api, gf_fn_ctx *ctx, tmod *t, int *n_out)
{
    static const char *const parts[] = {"weight", "bias", "running_mean", "running_var",
                                        "num_batches_tracked"};
    unsigned have[MLP_MAX_MODULES] = {0};
    int n = 0;
    for (size_t i = 0; i < api->weight_count(ctx); i++) {
        const char *name = api->weight_name(ctx, i), *rest;
        long idx;
        if (!split_name(name, &idx, &rest))
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "tensor '%.96s' is not named as an nn.Sequential names its "
                                  "modules ('<index>.weight', '<index>.bias', ...): kind mlp "
                                  "runs an nn.Sequential of Linear, BatchNorm1d, LayerNorm and "
                                  "activations (list the tensor in the manifest's "
                                  "\"ignore_weights\" to deploy without it)",
                                  name);
        if (idx >= MLP_MAX_MODULES)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED, "tensor '%.96s': more than %d modules",
                                  name, MLP_MAX_MODULES);
        size_t p = 0;
        while (p < 5 && strcmp(rest, parts[p]) != 0)
            p++;
        if (p == 5)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "tensor '%.96s': module %ld is not a Linear, BatchNorm1d or "
                                  "LayerNorm (kind mlp reads their weight, bias, running_mean, "
                                  "running_var and num_batches_tracked%s)",
                                  name, idx, strchr(rest, '.') ? "; a nested module?" : "");
        have[idx] |= 1u << p;
        if (idx + 1 > n)
            n = (int)idx + 1;
    }
    for (int i = 0; i < n; i++) {
        char wn[32];
        gf_tensor w, b;
        snprintf(wn, sizeof wn, "%d.weight", i);
        bool hw = have[i] & 1, hb = have[i] & 2, stats = have[i] & 12;
        if (hw)
            api->weight_info(ctx, wn, &w);
        if (stats) {
            snprintf(wn, sizeof wn, "%d.running_%s", i, (have[i] & 4) ? "mean" : "var");
            api->weight_info(ctx, wn, &b);
            if ((have[i] & 12) != 12 || hw != hb || b.rank != 1)
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "module %d has %s but not all of running_mean, "
                                      "running_var%s [c]: not a BatchNorm1d",
                                      i, wn, hw || hb ? ", weight and bias" : "");
            t[i] = (tmod){T_BN, hw, b.shape[0], 0};
        } else if (have[i] & 16) {
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "module %d has num_batches_tracked but no running_mean", i);
        } else if (hw && w.rank == 2) {
            t[i] = (tmod){T_LINEAR, hb, w.shape[0], w.shape[1]};
        } else if (hw && w.rank == 1) {
            t[i] = (tmod){T_NORM, hb, w.shape[0], 0};
        } else if (hw) {
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "tensor '%d.weight' has rank %d: module %d is not a Linear "
                                  "(rank 2) or a normalisation (rank 1)%s",
                                  i, (int)w.rank, i, w.rank == 3 ? "; a Conv1d?" : "");
        } else if (hb) {
            return api->set_error(ctx, GF_ERR_INVALID, "module %d has a bias but no weight", i);
        }
    }
    *n_out = n;
    return 0;
}

/* ---- the config ---- */

/* e.g. "layers": ["ReLU", "Linear", ...] from what the weights show (gaps as
 * ReLU), for messages; "" when there are too many modules to list. */
static const char *suggest(const tmod *t, int n, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    if (n > 8)
        return buf;
    int k = snprintf(buf, cap, "; e.g. \"layers\": [");
    used = k > 0 ? (size_t)k : 0;
    for (int i = 0; i < n && used < cap; i++) {
        static const char *const names[] = {"ReLU", "Linear", "BatchNorm1d", "LayerNorm"};
        k = snprintf(buf + used, cap - used, "%s\"%s\"", i ? ", " : "", names[t[i].kind]);
        used += k > 0 ? (size_t)k : 0;
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "] with your activations");
    return buf;
}

/* The value of keyword `key` in a str(module) argument list ("8, eps=1e-05,
 * affine=True"), copied into buf; false when absent. */
static bool arg_get(const char *args, const char *key, char *buf, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = args; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p != args && p[-1] != ' ' && p[-1] != ',' && p[-1] != '(') || p[kl] != '=')
            continue;
        const char *v = p + kl + 1, *e = v;
        while (*e && *e != ',' && *e != ')')
            e++;
        size_t n = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
        memcpy(buf, v, n);
        buf[n] = '\0';
        return true;
    }
    return false;
}

/* One entry of "layers" into *m, checked against what the weights hold. */
static int parse_layer(const gf_fn_api *api, gf_fn_ctx *ctx, int i, const gf_fn_cfg *e, const tmod *t,
                       double bn_eps, mod *m)
{
    if (e->type != GF_FN_CFG_STRING || e->n == 0 || e->n > 200)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "mlp config: layers[%d] must be a module's class name or str()", i);
    const char *s = e->s, *paren = strchr(s, '(');
    char cls[64], val[64];
    size_t cl = paren ? (size_t)(paren - s) : strlen(s);
    while (cl > 0 && s[cl - 1] == ' ')
        cl--;
    snprintf(cls, sizeof cls, "%.*s", (int)(cl < sizeof cls - 1 ? cl : sizeof cls - 1), s);
    const char *args = paren ? paren + 1 : "";
    tmod_kind want = T_NONE;
    if (strcmp(cls, "Linear") == 0) {
        m->kind = M_LINEAR;
        want = T_LINEAR;
    } else if (strcmp(cls, "BatchNorm1d") == 0) {
        m->kind = M_BN;
        want = T_BN;
        if ((arg_get(args, "track_running_stats", val, sizeof val) && strcmp(val, "False") == 0) ||
            t[i].kind == T_NORM)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "mlp: layers[%d] is a BatchNorm1d without running statistics "
                                  "(track_running_stats=False): it normalises each batch by its "
                                  "own statistics, so its answer depends on the other requests "
                                  "in the batch",
                                  i);
    } else if (strcmp(cls, "LayerNorm") == 0) {
        m->kind = M_LN;
        want = t[i].kind == T_NORM ? T_NORM : T_NONE; /* elementwise_affine=False: none */
    } else if (strcmp(cls, "Softmax") == 0 || strcmp(cls, "LogSoftmax") == 0) {
        m->kind = cls[0] == 'L' ? M_LOGSOFTMAX : M_SOFTMAX;
        if (arg_get(args, "dim", val, sizeof val) && strcmp(val, "-1") != 0 &&
            strcmp(val, "1") != 0)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "mlp: layers[%d] is %s over dim %s; on [N, features] only dim 1 "
                                  "(or -1) is supported",
                                  i, cls, val);
    } else if (strcmp(cls, "Dropout") == 0 || strcmp(cls, "Flatten") == 0) {
        m->kind = M_NOOP; /* identity at inference; Flatten of [N, F] */
    } else if (strcmp(cls, "GELU") == 0) {
        m->kind = M_ACT;
        m->act = arg_get(args, "approximate", val, sizeof val) && strcmp(val, "'tanh'") == 0
                     ? GF_ACT_GELU_TANH
                     : GF_ACT_GELU_ERF;
    } else {
        size_t j = 0;
        while (j < MLP_NACTS && !((mlp_acts[j].torch && strcmp(cls, mlp_acts[j].torch) == 0) ||
                                  strcmp(cls, mlp_acts[j].name) == 0))
            j++;
        if (j == MLP_NACTS)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "mlp config: layers[%d] is \"%.64s\"; kind mlp supports Linear, "
                                  "BatchNorm1d, LayerNorm, ReLU, GELU, SiLU, Tanh, Sigmoid, "
                                  "Identity, Dropout, Flatten, Softmax and LogSoftmax",
                                  i, cls);
        m->kind = M_ACT;
        m->act = mlp_acts[j].act;
    }
    /* PyTorch's defaults: eps 1e-5 for both norms (bn_eps for BatchNorm1d) */
    double eps = m->kind == M_BN ? bn_eps : 1e-5;
    if (arg_get(args, "eps", val, sizeof val)) {
        char *end;
        eps = strtod(val, &end);
        if (end == val || !(eps > 0.0) || eps > 1.0)
            return api->set_error(ctx, GF_ERR_INVALID, "mlp config: layers[%d]: eps=%s", i, val);
    }
    m->eps = (float)eps;
    if (t[i].kind != want) {
        static const char *const has[] = {"no tensors", "a Linear's weight [out, in]",
                                          "a BatchNorm1d's running statistics",
                                          "a normalisation's weight [c]"};
        return api->set_error(ctx, GF_ERR_INVALID,
                              "mlp config: layers[%d] is %s but the weights have %s for module "
                              "%d ('%d.*')",
                              i, cls, has[t[i].kind], i, i);
    }
    if (m->kind == M_LINEAR) {
        char *end;
        if (arg_get(args, "in_features", val, sizeof val) && strtoll(val, &end, 10) != t[i].cols)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: layers[%d] has in_features=%s but '%d.weight' "
                                  "has %lld columns",
                                  i, val, i, (long long)t[i].cols);
        if (arg_get(args, "bias", val, sizeof val) && (strcmp(val, "True") == 0) != t[i].bias)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: layers[%d] has bias=%s but "
                                  "the weights %s '%d.bias'",
                                  i, val, t[i].bias ? "have" : "lack", i);
    }
    return 0;
}

/* "activations" (or the default): describe the tensorless modules between
 * the tensor modules t[0..n) into m; *n_mods may grow by one (a trailing
 * activation). acts is NULL for the default. */
static int place_activations(const gf_fn_api *api, gf_fn_ctx *ctx, const tmod *t, int n,
                             const gf_act *acts, double bn_eps, mod *m, int *n_mods)
{
    char sug[256];
    int first_linear = -1;
    for (int i = 0; i < n; i++) {
        if (t[i].kind == T_NORM)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "module %d has '%d.weight' [%lld] but no running statistics: "
                                  "a LayerNorm? (or an RMSNorm, a GroupNorm...: the tensors do "
                                  "not say); describe the Sequential in config \"layers\"%s",
                                  i, i, (long long)t[i].rows, suggest(t, n, sug, sizeof sug));
        if (t[i].kind == T_LINEAR && first_linear < 0)
            first_linear = i;
        if (t[i].kind == T_NONE && first_linear < 0)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "module %d of the Sequential has no tensors and comes before "
                                  "the first Linear (an activation, Dropout or Flatten?): "
                                  "\"activations\" cannot describe it, describe the Sequential "
                                  "in config \"layers\"%s",
                                  i, suggest(t, n, sug, sizeof sug));
        m[i].kind = t[i].kind == T_LINEAR ? M_LINEAR : t[i].kind == T_BN ? M_BN : M_NOOP;
        m[i].eps = (float)bn_eps;
    }
    int j = 0; /* Linear number */
    for (int i = first_linear; i < n; j++) {
        int end = i + 1, gaps = 0, gap_at = -1;
        while (end < n && t[end].kind != T_LINEAR)
            end++;
        for (int q = i + 1; q < end; q++)
            if (t[q].kind == T_NONE && t[q - 1].kind != T_NONE && gaps++ == 0)
                gap_at = q;
        gf_act act = acts != NULL ? acts[j] : gaps > 0 ? GF_ACT_RELU : GF_ACT_IDENTITY;
        if (act != GF_ACT_IDENTITY && gaps > 1)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "between Linear %d and %s the Sequential has modules without "
                                  "tensors in two places, so where activation %d goes is "
                                  "ambiguous: describe the Sequential in config \"layers\"%s",
                                  i, end < n ? "the next Linear" : "the end", j,
                                  suggest(t, n, sug, sizeof sug));
        if (act != GF_ACT_IDENTITY && gaps == 1) {
            m[gap_at] = (mod){M_ACT, act, 0};
        } else if (act != GF_ACT_IDENTITY && end < n) {
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: activations[%d] is not identity, but the "
                                  "Sequential has no module between Linear %d and Linear %d "
                                  "to hold it (its indices leave no gap)",
                                  j, i, end);
        } else if (act != GF_ACT_IDENTITY) {
            m[(*n_mods)++] = (mod){M_ACT, act, 0}; /* after the last module */
        }
        i = end;
    }
    return 0;
}

static int count_linears(const tmod *t, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += t[i].kind == T_LINEAR;
    return k;
}

/* Parse the config into the module list m (capacity n + 2); *n_mods. */
static int mlp_config(const gf_fn_api *api, gf_fn_ctx *ctx, const tmod *t, int n, mod *m,
                      int *n_mods)
{
    static const char *const known[] = {"layers", "activations", "softmax", "bn_eps", NULL};
    gf_fn_cfg layers, acts, soft, v;
    int rc;
    if ((rc = gf_ku_cfg_known(api, ctx, MLP_KIND, known)) != 0 ||
        (rc = api->config(ctx, "/layers", &layers)) != 0 ||
        (rc = api->config(ctx, "/activations", &acts)) != 0 ||
        (rc = api->config(ctx, "/softmax", &soft)) != 0)
        return rc;
    double bn_eps = 1e-5;
    if ((rc = gf_ku_cfg_positive(api, ctx, MLP_KIND, "bn_eps", 1.0, &bn_eps)) != 0)
        return rc;
    if (soft.type != GF_FN_CFG_ABSENT && soft.type != GF_FN_CFG_BOOL)
        return api->set_error(ctx, GF_ERR_INVALID, "mlp config: \"softmax\" must be true or false");
    if (layers.type != GF_FN_CFG_ABSENT) {
        if (acts.type != GF_FN_CFG_ABSENT || soft.type != GF_FN_CFG_ABSENT)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: with \"layers\", list the activations and any "
                                  "Softmax there, not in \"activations\" or \"softmax\"");
        if (layers.type != GF_FN_CFG_ARRAY || layers.n == 0 || layers.n > MLP_MAX_MODULES)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: \"layers\" must be an array of 1 to %d modules",
                                  MLP_MAX_MODULES);
        *n_mods = (int)layers.n;
        if (n > *n_mods)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: \"layers\" lists %d modules but the weights have "
                                  "tensors for module %d",
                                  *n_mods, n - 1);
        for (int i = 0; i < *n_mods; i++) {
            char ptr[32];
            snprintf(ptr, sizeof ptr, "/layers/%d", i);
            if ((rc = api->config(ctx, ptr, &v)) != 0 ||
                (rc = parse_layer(api, ctx, i, &v, t, bn_eps, &m[i])) != 0)
                return rc;
        }
        return 0;
    }
    gf_act given[MLP_MAX_MODULES];
    int nl = count_linears(t, n);
    if (acts.type != GF_FN_CFG_ABSENT) {
        if (acts.type != GF_FN_CFG_ARRAY || (int)acts.n != nl)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "mlp config: \"activations\" has %zu entries but the weights "
                                  "have %d Linear layers (one entry per Linear)",
                                  acts.type == GF_FN_CFG_ARRAY ? acts.n : (size_t)0, nl);
        for (int j = 0; j < nl; j++) {
            char ptr[48];
            snprintf(ptr, sizeof ptr, "/activations/%d", j);
            if ((rc = api->config(ctx, ptr, &v)) != 0)
                return rc;
            size_t q = 0;
            while (q < MLP_NACTS &&
                   !(v.type == GF_FN_CFG_STRING && strcmp(v.s, mlp_acts[q].name) == 0))
                q++;
            if (q == MLP_NACTS)
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "mlp config: activations[%d]: unknown activation (use "
                                      "identity, relu, gelu, gelu_tanh, silu, tanh or sigmoid)",
                                      j);
            given[j] = mlp_acts[q].act;
        }
    }
    *n_mods = n;
    if ((rc = place_activations(api, ctx, t, n, acts.type != GF_FN_CFG_ABSENT ? given : NULL,
                                bn_eps, m, n_mods)) != 0)
        return rc;
    if (soft.type == GF_FN_CFG_BOOL && soft.i)
        m[(*n_mods)++] = (mod){M_SOFTMAX, GF_ACT_IDENTITY, 0};
    return 0;
}

/* ---- load: the ops, and their parameters in execution order ---- */

static int declare_linear(const gf_fn_api *api, gf_fn_ctx *ctx, const tmod *t, int i,
                          const mod *next, int64_t width, mlp_op *op, bool *folded)
{
    char wn[32], bn_[32], bnp[16];
    snprintf(wn, sizeof wn, "%d.weight", i);
    snprintf(bn_, sizeof bn_, "%d.bias", i);
    const int64_t want[2] = {-1, width};
    gf_tensor w, b;
    int rc;
    if ((rc = gf_ku_expect(api, ctx, MLP_KIND, wn, GF_KU_FLOAT_MASK, 2, want, &w)) != 0)
        return rc;
    op->kind = OP_LINEAR;
    op->out = w.shape[0];
    op->has_bias = t[i].bias;
    bool bias_f32 = !t[i].bias || (api->weight_info(ctx, bn_, &b) == 0 && b.dtype == GF_DT_F32);
    *folded = next != NULL && next->kind == M_BN && w.dtype == GF_DT_F32 && bias_f32 &&
              t[i + 1].kind == T_BN && t[i + 1].rows == w.shape[0];
    if (*folded) { /* THE FOLDING RULE: F32 weights, the BatchNorm1d right after */
        snprintf(bnp, sizeof bnp, "%d", i + 1);
        op->has_bias = true;
        op->eps = next->eps;
        return gf_ku_bn_fold(api, ctx, MLP_KIND, wn, t[i].bias ? bn_ : NULL, bnp, t[i + 1].bias, 2,
                             w.shape, next->eps, &op->w, &op->b);
    }
    if ((rc = api->require(ctx, wn, GF_KU_FLOAT_MASK, 2, want, &op->w)) != 0)
        return rc;
    if (t[i].bias && (rc = api->require(ctx, bn_, GF_KU_FLOAT_MASK, 1, &op->out, &op->b)) != 0)
        return rc;
    return 0;
}

/* Turn the module list into ops (fusing an activation into the Linear or
 * BatchNorm1d before it) and declare their parameters. */
static int build(const gf_fn_api *api, gf_fn_ctx *ctx, const tmod *t, const mod *m, int n_mods,
                 int64_t in_width, mlp_state *s)
{
    int64_t width = in_width; /* -1 until a module fixes it */
    int rc = 0;
    for (int i = 0; i < n_mods && rc == 0; i++) {
        if (m[i].kind == M_NOOP)
            continue;
        mlp_op *op = &s->ops[s->n];
        memset(op, 0, sizeof *op);
        op->module = i;
        op->act = GF_ACT_IDENTITY;
        op->eps = m[i].eps;
        char name[32];
        bool folded = false;
        if (m[i].kind == M_LINEAR) {
            rc = declare_linear(api, ctx, t, i, i + 1 < n_mods ? &m[i + 1] : NULL, width, op,
                                &folded);
            if (rc == 0 && s->n == 0)
                s->in = t[i].cols;
            width = op->out;
            i += folded;
        } else if (m[i].kind == M_BN || m[i].kind == M_LN) {
            int64_t c = m[i].kind == M_BN || t[i].kind == T_NORM ? t[i].rows : width;
            if (c < 0)
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "mlp: module %d (a LayerNorm without tensors) comes first "
                                      "and the manifest's input does not fix its features",
                                      i);
            if (width >= 0 && c != width)
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "mlp: module %d normalises %lld features but its input "
                                      "has %lld",
                                      i, (long long)c, (long long)width);
            if (m[i].kind == M_BN) {
                op->kind = OP_BN;
                snprintf(name, sizeof name, "%d", i);
                rc = gf_ku_bn_declare(api, ctx, MLP_KIND, name, t[i].bias, c, &op->v);
            } else {
                char g[32], b[32];
                snprintf(g, sizeof g, "%d.weight", i);
                snprintf(b, sizeof b, "%d.bias", i);
                const char *names[2] = {g, b};
                const bool needed[2] = {false, false};
                op->kind = OP_LN;
                rc = gf_ku_vecs_declare(api, ctx, MLP_KIND, names, needed, 2, c, &op->v);
            }
            if (s->n == 0)
                s->in = c;
            width = op->out = c;
        } else {
            op->kind = m[i].kind == M_ACT ? OP_ACT : OP_SOFTMAX;
            op->act = m[i].act;
            op->log = m[i].kind == M_LOGSOFTMAX;
            op->out = width;
            if (s->n == 0)
                s->in = width;
        }
        /* an activation right after a Linear or BatchNorm1d runs fused */
        if (rc == 0 && (op->kind == OP_LINEAR || op->kind == OP_BN) && i + 1 < n_mods &&
            m[i + 1].kind == M_ACT) {
            op->act = m[i + 1].act;
            i++;
        }
        if (op->out > s->max_width)
            s->max_width = op->out;
        s->n++;
    }
    return rc;
}

static void mlp_unload(void *state)
{
    mlp_state *s = state;
    if (s == NULL)
        return;
    free(s->ops);
    free(s);
}

static int mlp_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    if (api->input_count(ctx) != 1 || api->output_count(ctx) != 1)
        return api->set_error(ctx, GF_ERR_INVALID, "mlp takes exactly one input and one output");
    gf_fn_io in, out;
    api->input_spec(ctx, 0, &in);
    api->output_spec(ctx, 0, &out);
    if (in.dtype != GF_DT_F32 || in.rank != 2 || out.dtype != GF_DT_F32 || out.rank != 2)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "mlp's input and output must be FP32 of shape [-1, features]");
    tmod *t = calloc(MLP_MAX_MODULES + 2, sizeof *t);
    mod *m = calloc(MLP_MAX_MODULES + 2, sizeof *m);
    mlp_state *s = calloc(1, sizeof *s);
    int n = 0, n_mods = 0, rc;
    if (t == NULL || m == NULL || s == NULL ||
        (s->ops = calloc(MLP_MAX_MODULES + 2, sizeof *s->ops)) == NULL) {
        rc = api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = discover(api, ctx, t, &n)) != 0)
        goto done;
    if (count_linears(t, n) == 0) {
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "weights have no Linear layer (a tensor '<index>.weight' of rank 2, "
                            "as nn.Sequential names them)");
        goto done;
    }
    if ((rc = mlp_config(api, ctx, t, n, m, &n_mods)) != 0 ||
        (rc = build(api, ctx, t, m, n_mods, in.shape[1], s)) != 0)
        goto done;
    int64_t width = s->ops[s->n - 1].out;
    if (in.shape[1] != -1 && in.shape[1] != s->in)
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "input '%s' has %lld features but the first layer takes %lld", in.name,
                            (long long)in.shape[1], (long long)s->in);
    else if (out.shape[1] != -1 && out.shape[1] != width)
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "output '%s' has %lld features but the last layer produces %lld",
                            out.name, (long long)out.shape[1], (long long)width);
done:
    free(t);
    free(m);
    if (rc != 0) {
        mlp_unload(s);
        return rc;
    }
    *state = s;
    return 0;
}

/* ---- infer ---- */

static int run_op(const gf_fn_api *api, gf_fn_ctx *ctx, const mlp_op *op, float *dst,
                  const float *src, int64_t n, int64_t width)
{
    const gf_kernels *k = api->kernels(ctx);
    gf_stream *st = api->stream(ctx);
    const void *v[4];
    gf_tensor w, b;
    int rc = 0;
    switch (op->kind) {
    case OP_LINEAR:
        if ((rc = api->param(ctx, op->w, &w)) != 0 ||
            (op->has_bias && (rc = api->param(ctx, op->b, &b)) != 0))
            return rc;
        rc = k->gemm(k->ctx, st, 0, 1, n, op->out, width, 1.0f, src, GF_DT_F32, width, w.data,
                     w.dtype, width, 0.0f, dst, op->out);
        if (rc == 0 && (op->has_bias || op->act != GF_ACT_IDENTITY))
            rc = k->bias_act(k->ctx, st, dst, n, op->out, op->has_bias ? b.data : NULL,
                             op->has_bias ? b.dtype : GF_DT_F32, op->act);
        break;
    case OP_BN:
        if ((rc = gf_ku_vecs_get(api, ctx, &op->v, v)) != 0)
            return rc;
        rc = k->batchnorm(k->ctx, st, dst, src, n, op->out, 1, v[0], v[1], v[2], v[3], op->v.dtype,
                          op->eps, op->act);
        break;
    case OP_LN:
        if ((rc = gf_ku_vecs_get(api, ctx, &op->v, v)) != 0)
            return rc;
        rc = k->layernorm(k->ctx, st, dst, src, n, op->out, v[0], v[1],
                          op->v.n > 0 && (op->v.present[0] || op->v.present[1]) ? op->v.dtype
                                                                                : GF_DT_F32,
                          op->eps);
        break;
    case OP_ACT:
        rc = k->cast(k->ctx, st, dst, GF_DT_F32, src, GF_DT_F32, n * width);
        if (rc == 0)
            rc = k->bias_act(k->ctx, st, dst, n, width, NULL, GF_DT_F32, op->act);
        break;
    case OP_SOFTMAX:
        rc = k->softmax(k->ctx, st, dst, src, n, width, op->log);
        break;
    }
    if (rc != 0)
        return api->set_error(ctx, rc, "module %d: %s", op->module, k->last_error(k->ctx));
    return 0;
}

static int mlp_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    const mlp_state *s = state;
    gf_tensor x, y;
    int rc = api->input(ctx, 0, &x);
    if (rc != 0)
        return rc;
    int64_t n = x.shape[0];
    if (x.shape[1] != s->in)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "input has %lld features, the first layer "
                              "takes %lld",
                              (long long)x.shape[1], (long long)s->in);
    int64_t yshape[2] = {n, s->ops[s->n - 1].out};
    if ((rc = api->output(ctx, 0, 2, yshape, &y)) != 0)
        return rc;
    float *buf[2] = {NULL, NULL};
    if (s->n > 1) {
        size_t bytes;
        if (__builtin_mul_overflow((size_t)n, (size_t)s->max_width * sizeof(float), &bytes))
            return api->set_error(ctx, GF_ERR_INVALID, "mlp: batch %lld overflows", (long long)n);
        if ((rc = api->workspace(ctx, bytes, (void **)&buf[0])) != 0 ||
            (rc = api->workspace(ctx, bytes, (void **)&buf[1])) != 0)
            return rc;
    }
    /* every op reads cur and writes another buffer; the last one writes y */
    const float *cur = x.data;
    int64_t width = s->in;
    for (int i = 0; i < s->n; i++) {
        float *dst = i + 1 == s->n ? (float *)y.data : buf[i % 2];
        if ((rc = run_op(api, ctx, &s->ops[i], dst, cur, n, width)) != 0)
            return rc;
        cur = dst;
        width = s->ops[i].out;
    }
    return 0;
}

static const gf_fn_desc mlp_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ MLP_KIND,
    /* .load = */ mlp_load,
    /* .infer = */ mlp_infer,
    /* .unload = */ mlp_unload,
};

const gf_fn_desc *gf_fn_kind_mlp(void)
{
    return &mlp_desc;
}
