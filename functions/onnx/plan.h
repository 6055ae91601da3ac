/* gpufaas — compiling an ONNX graph into a plan and running it
 * (functions/onnx).
 *
 * A model is a bound graph plus what is known of its constants: each
 * initializer's parameter index (its place in the parameter cache) and, for
 * small ones, a host copy (for constant folding and shape inputs). A plan is
 * the model compiled for one set of input shapes: the nodes that did not
 * fold away, in topological order, each output's place in one activation
 * arena (liveness-based reuse; the arena's size is known before the first
 * run), the host constants to upload, and the output shapes.
 *
 * Running a plan needs only the kernel table and an environment that hands
 * out parameters (waiting for each just before its first use), uploads host
 * bytes, and gives the arena, inputs and outputs.
 */
#ifndef GF_FUNCTIONS_ONNX_PLAN_H
#define GF_FUNCTIONS_ONNX_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include <gpufaas/kernels.h>

#include "core/error.h"
#include "functions/onnx/graph.h"
#include "functions/onnx/optable.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Initializers with at most this many elements get a host copy. */
#define GF_ONNX_HOST_INIT_MAX 65536
/* Alignment of every arena block. */
#define GF_ONNX_ARENA_ALIGN 256

typedef struct gf_onnx_model gf_onnx_model;
typedef struct gf_onnx_plan gf_onnx_plan;

/* Bind every node of g (gf_onnx_graph_bind) and make a model of it. Takes
 * ownership of g on success and on failure. */
gf_status gf_onnx_model_new(gf_onnx_graph *g, gf_onnx_model **out, gf_err *err);
void gf_onnx_model_free(gf_onnx_model *m);
const gf_onnx_graph *gf_onnx_model_graph(const gf_onnx_model *m);

/* Record initializer `value`'s parameter index. */
void gf_onnx_model_set_param(gf_onnx_model *m, int32_t value, size_t param);
/* Record that initializer `value` (a Conv's F32 weights) is parameter
 * `param` packed by the kernel table's conv2d_pack (for geometries with its
 * c, oc, kh, kw and groups): the plan's Conv steps then call
 * conv2d_packed. */
void gf_onnx_model_set_packed(gf_onnx_model *m, int32_t value, size_t param);

/* Give initializer `value` a host copy of its bytes (copied; nbytes must match
 * its dtype and shape). */
gf_status gf_onnx_model_set_host(gf_onnx_model *m, int32_t value, const void *data,
                                 size_t nbytes, gf_err *err);

/* The initializers the graph uses, in order of first use (ties by value
 * index): the order of the parameters in the weights file. order has room
 * for g->n_values; returns the count. */
int32_t gf_onnx_init_order(const gf_onnx_graph *g, int32_t *order);

/* Compile for the given input shapes (shapes[i] has the rank of graph input
 * i, every dim >= 0). Messages name the node. */
gf_status gf_onnx_plan_compile(const gf_onnx_model *m, const int64_t (*shapes)[GF_MAX_RANK],
                               gf_onnx_plan **out, gf_err *err);

/* The same, with the values of the graph inputs the plan reads on the host
 * (gf_onnx_model_host_input; values[i] NULL for the others, copied): a
 * Reshape target or Slice bounds a graph takes as an input. */
gf_status gf_onnx_plan_compile_with(const gf_onnx_model *m, const int64_t (*shapes)[GF_MAX_RANK],
                                    const gf_onnx_const *const *values, gf_onnx_plan **out,
                                    gf_err *err);

/* Whether graph input i is read on the host when the plan is made: it
 * reaches, through nodes that fold, an input an op reads on the host (a
 * shape, axes, bounds). Its values are then part of the plan, so a plan is
 * made per set of values (they must be small: GF_ONNX_HOST_INPUT_MAX). */
bool gf_onnx_model_host_input(const gf_onnx_model *m, int32_t i);
/* Elements a host-read graph input may have. */
#define GF_ONNX_HOST_INPUT_MAX 4096
void gf_onnx_plan_free(gf_onnx_plan *p);

/* Bytes of the activation arena (the peak of the liveness plan). */
size_t gf_onnx_plan_arena_bytes(const gf_onnx_plan *p);
/* Output i's dtype and shape. */
const gf_onnx_tinfo *gf_onnx_plan_output(const gf_onnx_plan *p, int32_t i);
/* The initializers that could be packed for plan p's convolutions: F32
 * initializers used only as the weights (input 1) of Conv steps whose c,
 * oc, kh, kw and groups agree. values[i] gets the i-th, params[i] the
 * geometry of its first Conv step; both have room for the graph's
 * n_values. Returns the count. */
int32_t gf_onnx_plan_conv_weights(const gf_onnx_plan *p, int32_t *values,
                                  gf_conv2d_ex_params *params);

/* Steps that write their output channels last (NHWC): Conv steps with
 * packed weights whose every reader takes NHWC. */
int32_t gf_onnx_plan_nhwc_steps(const gf_onnx_plan *p);

/* Steps (device kernels' nodes) left after folding. */
int32_t gf_onnx_plan_steps(const gf_onnx_plan *p);

/* What running needs from its caller. */
typedef struct gf_onnx_env {
    void *ctx;
    const gf_kernels *k;
    gf_stream *s;
    /* device address of parameter index (waits until it has arrived) */
    gf_status (*param)(void *ctx, size_t index, void **out, gf_err *err);
    /* copy host bytes to the device on s; src is read before the call returns */
    gf_status (*upload)(void *ctx, void *dst, const void *src, size_t bytes, gf_err *err);
} gf_onnx_env;

/* Run: inputs[i] and outputs[i] are device buffers of the shapes compiled for
 * (outputs as gf_onnx_plan_output says), arena holds
 * gf_onnx_plan_arena_bytes. The plan is not changed: one plan may serve
 * calls one after another (not concurrently: it keeps per-run pointers). */
gf_status gf_onnx_plan_run(gf_onnx_plan *p, const gf_onnx_env *env, void *const *inputs,
                           void *const *outputs, void *arena, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_ONNX_PLAN_H */
