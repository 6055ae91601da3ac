/* gpufaas — the ONNX op table: the one list of what the onnx kind runs
 * (functions/onnx).
 *
 * Each entry names an op (domain, type), the opset versions whose semantics
 * it implements, the attributes it understands, which inputs it reads on the
 * host (shape-like inputs that must be known when a plan is made), and three
 * functions:
 *   infer  shapes and dtypes of the outputs from those of the inputs (and
 *          the host data of the inputs known at plan time); it also checks
 *          every attribute value and dtype, and, when all inputs are known
 *          and the op can be computed on the host, computes the outputs
 *          there (constant folding);
 *   run    the device work, through the kernel table only, so every op runs
 *          on cpu and cuda alike.
 * The docs' table of supported ops is generated from this table
 * (gf_onnx_optable_markdown), so the two cannot drift.
 */
#ifndef GF_FUNCTIONS_ONNX_OPTABLE_H
#define GF_FUNCTIONS_ONNX_OPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/kernels.h>
#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"
#include "functions/onnx/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest folded (host-computed) tensor, in elements. Bigger results run on
 * the device instead. */
#define GF_ONNX_FOLD_MAX 65536
/* Per-step integers infer leaves for run. */
#define GF_ONNX_AUX 48

/* The newest opsets whose op versions the table was checked against (ONNX
 * 1.23): a model importing a newer one is refused, since a version the table
 * does not list may have changed an op's meaning. */
#define GF_ONNX_OPSET_NEWEST 28
#define GF_ONNX_ML_OPSET_NEWEST 5

/* A tree ensemble's tables, inputs after its lifted attributes (made by
 * the importer, import_trees.c; read by ops_trees.c): feature, threshold,
 * next, leaf, roots, meta; meta has GF_ONNX_TREE_META values. */
#define GF_ONNX_TREE_TABLES 6
#define GF_ONNX_TREE_META 5
/* An SVMClassifier's matrices, inputs after its lifted attributes
 * (import_svm.c; ops_svm.c): pairs, votes, vote_base. */
#define GF_ONNX_SVM_TABLES 3

/* A Scan's body as the importer leaves it (import_scan.c): the string
 * attribute 'body' names the one subgraph gpufaas runs, pairwise squared
 * Euclidean distances (ops_scan.c). */
#define GF_ONNX_SCAN_SQEUCLIDEAN "gpufaas.sqeuclidean"

/* What plan-time inference knows of a value. */
typedef struct gf_onnx_tinfo {
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    const gf_onnx_const *host; /* the data, when known at plan time; else NULL */
} gf_onnx_tinfo;

typedef struct gf_onnx_infer_ctx {
    const gf_onnx_graph *g;
    const gf_onnx_node *n;
    const gf_onnx_tinfo *const *in; /* n->n_in entries; NULL for an omitted input */
    gf_onnx_tinfo *out;             /* n->n_out entries to fill (host NULL) */
    gf_onnx_const **fold;           /* n->n_out slots: infer may store host results
                                     * here (owned by the caller afterwards); it must
                                     * then fill all of them */
    bool may_fold;                  /* every present input is known on the host */
    size_t scratch;                 /* out: device scratch bytes run needs */
    gf_onnx_const *step_const;      /* out: host data run reads on the device (flat gather
                                     * indices, a constant); the plan owns it afterwards and
                                     * uploads it before each run of the step */
    int64_t aux[GF_ONNX_AUX];       /* out: anything run wants precomputed */
    uint32_t fuse;                  /* out: what the step may absorb (GF_ONNX_FUSE_*) */
    gf_err *err;
} gf_onnx_infer_ctx;

/* What a step may absorb from the steps after it (the plan fuses them when
 * the intermediate value has no other use): its run then finds the fused
 * input in gf_onnx_run_ctx.extra and the activation in .act. */
enum {
    GF_ONNX_FUSE_ACT = 1u << 0,      /* an activation applied to output 0 (Relu, SiLU) */
    GF_ONNX_FUSE_RESIDUAL = 1u << 1, /* + a tensor of output 0's shape, before the activation */
    GF_ONNX_FUSE_BIAS = 1u << 2,     /* + a row over output 0's last dim, before the activation */
};

/* A value at run time. */
typedef struct gf_onnx_rt {
    const gf_onnx_tinfo *t; /* NULL for an omitted input or output */
    void *data;             /* device address */
} gf_onnx_rt;

typedef struct gf_onnx_run_ctx {
    const gf_onnx_graph *g;
    const gf_onnx_node *n;
    gf_err *err;
    const gf_kernels *k;
    gf_stream *s;
    const gf_onnx_rt *in;  /* n->n_in entries */
    const gf_onnx_rt *out; /* n->n_out entries */
    void *scratch;         /* ctx.scratch bytes, 256-byte aligned */
    const void *step_const; /* infer's step_const, on the device; NULL when none */
    const gf_onnx_rt *extra; /* a fused residual or bias (GF_ONNX_FUSE_*), or NULL */
    gf_act act;              /* a fused activation, GF_ACT_IDENTITY when none */
    const int64_t *aux;    /* what infer left */
    uint32_t packed;       /* bit k: input k holds weights packed by the kernel table's
                            * conv2d_pack (only a Conv's W: gf_onnx_model_set_packed) */
    uint32_t nhwc;         /* bit k: input k is channels last (NHWC) rather than NCHW;
                            * GF_ONNX_NHWC_EXTRA: so is the fused input; GF_ONNX_NHWC_OUT:
                            * so is output 0 (only Conv steps with packed weights write
                            * NHWC, and only they and global pooling read it) */
} gf_onnx_run_ctx;

#define GF_ONNX_NHWC_EXTRA (1u << 30)
#define GF_ONNX_NHWC_OUT (1u << 31)

enum {
    GF_ONNX_OP_ALIAS = 1u << 0,     /* output 0 is input 0's bytes with another shape */
    GF_ONNX_OP_HOST_ONLY = 1u << 1, /* no device run: the outputs must fold */
    GF_ONNX_OP_IMPORT = 1u << 2,    /* rewritten by the importer (Constant) */
};

typedef struct gf_onnx_op {
    const char *domain;  /* "" (ai.onnx) or "ai.onnx.ml" */
    const char *type;
    int since[10];       /* the since-versions implemented, ascending, 0-terminated */
    int8_t min_in, max_in, min_out, max_out; /* max_in -1 = variadic */
    const char *attrs;   /* understood attributes, "name:t,..." t one of f i s F I S T, or
                          * W / J: a list of floats / ints the importer lifts into an
                          * initializer (F32 / I64), input 1, 2, ... in spec order */
    uint32_t host_inputs;/* bit k: input k is read on the host at plan time */
    uint32_t flags;      /* GF_ONNX_OP_* */
    gf_status (*infer)(gf_onnx_infer_ctx *c);
    gf_status (*run)(const gf_onnx_run_ctx *c); /* NULL for HOST_ONLY and IMPORT ops */
    const char *notes;   /* limits, for the docs: "F32; axes must be adjacent" */
    int code;            /* for ops sharing functions: the kernel's op enum */
} gf_onnx_op;

/* The op for (domain, type) at the model's opset for that domain, or NULL
 * with a message saying what is missing (unknown op, a domain we do not
 * implement, an opset that selects a version we do not implement, an opset
 * newer than GF_ONNX_OPSET_NEWEST / GF_ONNX_ML_OPSET_NEWEST). */
const gf_onnx_op *gf_onnx_op_find(const char *domain, const char *type, int64_t opset,
                                  char *why, size_t why_cap);

/* The since-version of op selected by opset (the largest since <= opset), 0
 * when none. */
int gf_onnx_op_version(const gf_onnx_op *op, int64_t opset);

/* Check a node against its op without shapes: op known at this opset, input
 * and output counts, every attribute understood and of the right type. On
 * success n->op is bound. The message names the node, op, domain and opset
 * and lists what is missing. */
gf_status gf_onnx_node_bind(const gf_onnx_graph *g, gf_onnx_node *n, gf_err *err);

/* Lifted attributes of op: the count, and the input index (1, 2, ...) and
 * code ('W' floats, 'J' ints) of attribute name, 0 when it is not lifted. */
int gf_onnx_lifted_count(const gf_onnx_op *op);
int gf_onnx_lifted_input(const gf_onnx_op *op, const char *name, char *code);

/* Bind every node, collecting every unsupported op into one message (each
 * op once, with a node that uses it). */
gf_status gf_onnx_graph_bind(gf_onnx_graph *g, gf_err *err);

/* The supported-ops table as Markdown (for docs/functions.md). */
gf_status gf_onnx_optable_markdown(gf_buf *out);

/* ---- helpers the op files share ---- */

/* Format an error about node c->n: "node 'x' (Op): <msg>". Returns code. */
gf_status gf_onnx_fail(const gf_onnx_infer_ctx *c, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Attribute lookups with defaults (the types were checked by bind). */
int64_t gf_onnx_attr_int(const gf_onnx_node *n, const char *name, int64_t dflt);
float gf_onnx_attr_float(const gf_onnx_node *n, const char *name, float dflt);
const char *gf_onnx_attr_str(const gf_onnx_node *n, const char *name, const char *dflt);
/* INTS attribute: *n_out elements (NULL, 0 when absent). */
const int64_t *gf_onnx_attr_ints(const gf_onnx_node *n, const char *name, size_t *n_out);
/* numel of a tinfo (shapes are bounded, so this does not overflow). */
int64_t gf_onnx_numel(const gf_onnx_tinfo *t);
/* Dense strides in elements. */
void gf_onnx_strides(int32_t rank, const int64_t *shape, int64_t *strides);
/* Normalise axis in [-rank, rank) (or [-rank, rank] when extra, as
 * Flatten's): a negative axis counts from the end. False when out of
 * range. */
bool gf_onnx_axis(int64_t axis, int32_t rank, bool extra, int64_t *out);
/* Read element i of a host constant of an integer or float type as int64 /
 * double. */
int64_t gf_onnx_const_i64(const gf_onnx_const *c, int64_t i);
double gf_onnx_const_f64(const gf_onnx_const *c, int64_t i);
/* Store element i of a host constant from an int64 / double (converted to
 * its dtype as a C cast would, halves rounded to even for F16/BF16). */
void gf_onnx_const_set_i64(gf_onnx_const *c, int64_t i, int64_t v);
void gf_onnx_const_set_f64(gf_onnx_const *c, int64_t i, double v);
/* Offset, in elements, of flat output index i of shape[rank] in a tensor with
 * the given strides. */
int64_t gf_onnx_offset(int64_t i, int32_t rank, const int64_t *shape, const int64_t *strides);
/* A host result for output k with the given shape (c->fold[k] set). */
gf_status gf_onnx_fold_new(gf_onnx_infer_ctx *c, int32_t k, gf_dtype dtype, int32_t rank,
                           const int64_t *shape, gf_onnx_const **out);
/* Set output k's dtype and shape. */
void gf_onnx_set_out(gf_onnx_infer_ctx *c, int32_t k, gf_dtype dtype, int32_t rank,
                     const int64_t *shape);
/* Kernel failure: "node 'x' (Op): <the kernel's message>"; returns rc. */
gf_status gf_onnx_kfail(const gf_onnx_run_ctx *c, int rc);
/* A run-time failure that is not a kernel's. */
gf_status gf_onnx_rfail(const gf_onnx_run_ctx *c, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Numpy broadcasting of two shapes into out (rank *out_rank); false when
 * incompatible. */
bool gf_onnx_broadcast(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b,
                       int32_t *out_rank, int64_t *out);
/* Strides of a (rank ra) read as out_rank dims broadcast to out: 0 where
 * broadcast. */
void gf_onnx_bcast_strides(int32_t ra, const int64_t *a, int32_t out_rank, const int64_t *out,
                           int64_t *strides);

/* ONNX's TensorProto.DataType number -> gf_dtype (GF_DT_INVALID for types
 * the runtime has not: strings, complex, float8, 4-bit). */
gf_dtype gf_onnx_dtype(int64_t onnx_type);

/* The op lists of each file, NULL-terminated ({.type = NULL}). */
extern const gf_onnx_op gf_onnx_ops_elementwise[];
extern const gf_onnx_op gf_onnx_ops_binary[];
extern const gf_onnx_op gf_onnx_ops_shape[];
extern const gf_onnx_op gf_onnx_ops_gather[];
extern const gf_onnx_op gf_onnx_ops_scan[];
extern const gf_onnx_op gf_onnx_ops_nn[];
extern const gf_onnx_op gf_onnx_ops_ml[];
extern const gf_onnx_op gf_onnx_ops_trees[];
extern const gf_onnx_op gf_onnx_ops_svm[];

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_ONNX_OPTABLE_H */
