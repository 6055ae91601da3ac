/* gpufaas — an ONNX graph in memory, and its compact file form
 * (functions/onnx).
 *
 * The importer (import.c, the only code that reads ONNX's protobuf) turns a
 * model into this structure; the structure is stored as JSON text in the
 * version's weights file (the U8 tensor GF_ONNX_GRAPH_TENSOR, after the
 * initializers), and the onnx kind reads it back at load without protobuf.
 * Everything here depends on libc and runtime/core only, so the load path
 * builds with the CUDA toolkit alone.
 *
 * Values are named once and referred to by index: graph inputs, initializers
 * (constant tensors; their bytes live in the weights file under the same
 * name) and node outputs. Nodes are kept in a topological order.
 */
#ifndef GF_FUNCTIONS_ONNX_GRAPH_H
#define GF_FUNCTIONS_ONNX_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The weights-file tensor that holds the graph's JSON form. */
#define GF_ONNX_GRAPH_TENSOR "gpufaas.onnx.graph"
/* Format name and version written into that JSON. */
#define GF_ONNX_GRAPH_FORMAT "gpufaas.onnx.graph"
#define GF_ONNX_GRAPH_VERSION 1

/* Bounds on everything a file can declare. */
#define GF_ONNX_MAX_NODES 200000
#define GF_ONNX_MAX_VALUES 1000000
#define GF_ONNX_MAX_NODE_IO 4096    /* inputs or outputs of one node (Concat) */
#define GF_ONNX_MAX_ATTRS 64        /* attributes of one node */
#define GF_ONNX_MAX_ATTR_LIST 65536 /* elements of an ints/floats attribute */
#define GF_ONNX_MAX_NAME 1024       /* bytes of a value, node or attribute name */
#define GF_ONNX_MAX_GRAPH_JSON (256u << 20)
#define GF_ONNX_MAX_INLINE_BYTES (1u << 20) /* a tensor attribute's data */

/* Attribute types: ONNX's AttributeProto.AttributeType numbers. */
typedef enum gf_onnx_attr_type {
    GF_ONNX_ATTR_FLOAT = 1,
    GF_ONNX_ATTR_INT = 2,
    GF_ONNX_ATTR_STRING = 3,
    GF_ONNX_ATTR_TENSOR = 4,
    GF_ONNX_ATTR_GRAPH = 5,
    GF_ONNX_ATTR_FLOATS = 6,
    GF_ONNX_ATTR_INTS = 7,
    GF_ONNX_ATTR_STRINGS = 8,
} gf_onnx_attr_type;

/* A small host tensor (an attribute's value, or a folded constant). */
typedef struct gf_onnx_const {
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    size_t nbytes; /* numel * dtype size */
    void *data;    /* owned (malloc); NULL only when nbytes == 0 */
} gf_onnx_const;

typedef struct gf_onnx_attr {
    char *name;
    gf_onnx_attr_type type;
    int64_t i;          /* INT */
    float f;            /* FLOAT */
    char *s;            /* STRING (NUL-terminated; NUL bytes are refused) */
    size_t n;           /* elements of ints / floats / strings */
    int64_t *ints;      /* INTS */
    float *floats;      /* FLOATS */
    char **strings;     /* STRINGS */
    gf_onnx_const *t;   /* TENSOR */
} gf_onnx_attr;

struct gf_onnx_op;

typedef struct gf_onnx_node {
    char *name;        /* may be "" (then messages use the first output's name) */
    char *op_type;
    char *domain;      /* "" for the default domain ai.onnx */
    int64_t opset;     /* the model's opset for this domain */
    int32_t n_in, n_out;
    int32_t *in;       /* value indices; -1 = an omitted optional input */
    int32_t *out;      /* value indices; -1 = an omitted optional output */
    int32_t n_attrs;
    gf_onnx_attr *attrs;
    const struct gf_onnx_op *op; /* bound by gf_onnx_graph_check */
} gf_onnx_node;

typedef enum gf_onnx_vkind {
    GF_ONNX_V_NODE = 0, /* produced by a node */
    GF_ONNX_V_INPUT = 1,
    GF_ONNX_V_INIT = 2, /* an initializer: constant, in the weights file */
} gf_onnx_vkind;

typedef struct gf_onnx_value {
    char *name;
    gf_onnx_vkind kind;
    gf_dtype dtype;  /* inputs and initializers; node outputs: from the file's
                      * value_info when given, else GF_DT_INVALID */
    int32_t rank;    /* -1 when unknown */
    int64_t shape[GF_MAX_RANK]; /* -1 = not fixed (a symbolic dimension) */
    int32_t producer;  /* node index for GF_ONNX_V_NODE, else -1 */
    int32_t first_use; /* index of the first node reading it, -1 if none */
} gf_onnx_value;

typedef struct gf_onnx_opset {
    char *domain;
    int64_t version;
} gf_onnx_opset;

/* Strings a graph output gives (ONNX tensor(string)): on the device the
 * output is I64 indices into this table (class labels: a classifier's
 * classlabels_strings, a string initializer's elements), turned into BYTES
 * by the kind. n == 0: a numeric output. Strings are UTF-8 without NUL. */
typedef struct gf_onnx_strings {
    int32_t n;
    char **s;
} gf_onnx_strings;

#define GF_ONNX_MAX_STRINGS 65536 /* elements of one table */

typedef struct gf_onnx_graph {
    gf_onnx_value *values;
    int32_t n_values, cap_values;
    gf_onnx_node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *inputs, n_inputs;   /* value indices of the graph inputs */
    int32_t *outputs, n_outputs; /* value indices of the graph outputs */
    gf_onnx_opset *opsets;
    int32_t n_opsets;
    char *producer;              /* "pytorch 2.5.0", "" when unknown */
    gf_onnx_strings *out_strings; /* per graph output (NULL: none are strings) */
    struct gf_onnx_names *names; /* name -> value index */
} gf_onnx_graph;

/* An empty graph. Free with gf_onnx_graph_free (NULL is a no-op). */
gf_status gf_onnx_graph_new(gf_onnx_graph **out, gf_err *err);
void gf_onnx_graph_free(gf_onnx_graph *g);

/* Index of the value named name, or -1. */
int32_t gf_onnx_value_find(const gf_onnx_graph *g, const char *name);
/* Add a value (name copied; must not exist yet: GF_ERR_INVALID naming it).
 * *index gets its index. */
gf_status gf_onnx_value_add(gf_onnx_graph *g, const char *name, gf_onnx_vkind kind,
                            int32_t *index, gf_err *err);
/* Append a zeroed node and return it (NULL when out of memory or over
 * GF_ONNX_MAX_NODES; err says which). The pointer is valid until the next
 * gf_onnx_node_add. */
gf_onnx_node *gf_onnx_node_add(gf_onnx_graph *g, gf_err *err);

/* The model's opset for domain ("" and "ai.onnx" are one), 0 when absent. */
int64_t gf_onnx_graph_opset(const gf_onnx_graph *g, const char *domain);

/* Sort the nodes topologically (stable: file order where the data allows),
 * set producers and first uses, and check the wiring: every node input is a
 * graph input, an initializer or the output of a node; no value is produced
 * twice; no cycle; every graph output is produced. Messages name the node
 * and the value. */
gf_status gf_onnx_graph_wire(gf_onnx_graph *g, gf_err *err);

/* A name for messages: "'conv1' (Conv)" built from the node's name or, when
 * empty, its first output. Written into buf (cap bytes); returns buf. */
const char *gf_onnx_node_label(const gf_onnx_graph *g, const gf_onnx_node *n, char *buf,
                               size_t cap);

/* The datatype graph output i has for a client: GF_DT_BYTES when it gives
 * strings, else plan_dtype (what the plan computes for it). */
gf_dtype gf_onnx_graph_out_dtype(const gf_onnx_graph *g, int32_t i, gf_dtype plan_dtype);
/* Set graph output i's strings (copied); NULL strings clear them. */
gf_status gf_onnx_graph_set_out_strings(gf_onnx_graph *g, int32_t i, int32_t n,
                                        const char *const *strings, gf_err *err);

/* Attribute of a node by name, or NULL. */
const gf_onnx_attr *gf_onnx_attr_find(const gf_onnx_node *n, const char *name);

/* Free a constant (NULL is a no-op). */
void gf_onnx_const_free(gf_onnx_const *c);
/* A new constant with room for its data (zeroed). */
gf_status gf_onnx_const_new(gf_dtype dtype, int32_t rank, const int64_t *shape,
                            gf_onnx_const **out, gf_err *err);

/* The JSON form. to_json appends it to out; from_json parses len bytes and
 * checks everything (bounds, names, indices, wiring, dtypes) before anything
 * uses it. */
gf_status gf_onnx_graph_to_json(const gf_onnx_graph *g, gf_buf *out, gf_err *err);
gf_status gf_onnx_graph_from_json(const char *text, size_t len, gf_onnx_graph **out,
                                  gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_ONNX_GRAPH_H */
