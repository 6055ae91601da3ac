/* gpufaas — helpers the ai.onnx.ml op files share (functions/onnx;
 * ops_ml.c defines them, ops_trees.c uses them too). */
#ifndef GF_FUNCTIONS_ONNX_OPS_ML_H
#define GF_FUNCTIONS_ONNX_OPS_ML_H

#include "functions/onnx/optable.h"

/* The element types these ops read X in (computed in F32). */
#define GF_ONNX_ML_MASK_IN                                                                  \
    ((1u << GF_DT_F32) | (1u << GF_DT_F64) | (1u << GF_DT_I64) | (1u << GF_DT_I32))

/* n rounded up to 256 bytes: how scratch is carved into pieces. */
size_t gf_onnx_ml_align(size_t n);

/* X as F32 [rows, cols]: rank 1 is one row, rank 2 as it is; else an error
 * naming the node. */
gf_status gf_onnx_ml_matrix_in(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, int64_t *rows,
                               int64_t *cols);

/* A lifted weight (input k): of dtype dt with *n elements, or absent (*n
 * 0); what names it in the error when its dtype is another. */
gf_status gf_onnx_ml_weight_in(gf_onnx_infer_ctx *c, int k, gf_dtype dt, const char *what,
                               int64_t *n);

/* X (input 0) as F32: itself, or converted into at (rows * cols * 4 bytes
 * of scratch). Returns the kernel's status. */
int gf_onnx_ml_x_f32(const gf_onnx_run_ctx *c, const float **x, void *at);

#endif /* GF_FUNCTIONS_ONNX_OPS_ML_H */
