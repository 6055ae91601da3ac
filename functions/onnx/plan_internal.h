/* gpufaas — the plan's inner structures, shared by plan.c (compile, place,
 * run) and plan_fuse.c (fusion) only (functions/onnx; internal). */
#ifndef GF_FUNCTIONS_ONNX_PLAN_INTERNAL_H
#define GF_FUNCTIONS_ONNX_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "functions/onnx/plan.h"

struct gf_onnx_model {
    gf_onnx_graph *g;
    gf_onnx_const **host; /* per value: host copy of an initializer, or NULL */
    int64_t *param;       /* per value: parameter index of an initializer, or -1 */
    bool *host_in;        /* per graph input: read on the host when the plan is made */
    bool *packed;         /* per value: its parameter holds packed Conv weights */
};

typedef enum { LOC_NONE, LOC_INPUT, LOC_PARAM, LOC_ARENA, LOC_OUTPUT, LOC_ALIAS } loc_kind;

typedef struct {
    loc_kind kind;
    int64_t idx; /* input / param / output index, arena offset, or the aliased value */
} plan_loc;

typedef struct {
    int32_t node;
    int32_t out0;  /* output 0's value: the node's, or the last fused consumer's */
    int32_t extra; /* a fused input (gf_onnx_run_ctx.extra), or -1 */
    int32_t act;   /* a fused activation (gf_act) */
    uint32_t fuse; /* what infer said the step can absorb (GF_ONNX_FUSE_*) */
    uint32_t packed; /* bit k: input k is a packed parameter (gf_onnx_run_ctx.packed) */
    uint32_t nhwc;   /* channels-last inputs and output (gf_onnx_run_ctx.nhwc) */
    bool dead;     /* absorbed by an earlier step */
    size_t scratch_off, scratch;
    gf_onnx_const *sconst; /* infer's step_const (owned), uploaded at sconst_off */
    size_t sconst_off;
    int64_t aux[GF_ONNX_AUX];
    int32_t *uploads; /* values uploaded just before this step */
    int32_t n_uploads;
} plan_step;

typedef struct {
    int32_t out, value;
} plan_copy;

struct gf_onnx_plan {
    const gf_onnx_model *m;
    gf_onnx_tinfo *t;       /* per value */
    gf_onnx_const **folded; /* per value: host result of a folded node (owned) */
    plan_loc *loc;          /* per value */
    plan_step *steps;
    int32_t n_steps;
    plan_copy *copies;      /* outputs that are copied at the end */
    int32_t n_copies;
    size_t arena;
    void **ptr;             /* per value, one run's device addresses */
    gf_onnx_rt *rt_in, *rt_out;
    int32_t max_io;
};

/* Fuse steps: a Conv takes the Add of a residual and a Relu (or the
 * Sigmoid and Mul of SiLU) that follow it, a Gemm or MatMul the Add of a
 * bias row and a Relu, as their infer allowed (gf_onnx_infer_ctx.fuse). The
 * absorbed steps are removed; p->t must be inferred. */
gf_status gf_onnx_plan_fuse(gf_onnx_plan *p, gf_err *err);

#endif /* GF_FUNCTIONS_ONNX_PLAN_INTERNAL_H */
