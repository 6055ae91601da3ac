/* gpufaas — what the two halves of the ONNX protobuf reader share
 * (functions/onnx; internal: only the importer's files, import_*.c, include it).
 *
 * import_pb.c maps the files, checks the wire format's nesting, decodes
 * tensors and owns the parsed model; import_graph.c turns the decoded
 * messages into a gf_onnx_graph.
 */
#ifndef GF_FUNCTIONS_ONNX_IMPORT_PB_H
#define GF_FUNCTIONS_ONNX_IMPORT_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "functions/onnx/graph.h"
#include "functions/onnx/import.h"
#include "functions/onnx/optable.h"
#include "onnx.pb-c.h"

typedef struct gf_onnx_mapped {
    void *p;
    size_t len;
} gf_onnx_mapped;

struct gf_onnx_parsed {
    gf_onnx_graph *g;
    Onnx__ModelProto *model;
    gf_onnx_mapped file, data;
    const void **init;  /* per value */
    size_t *init_len;
    size_t n_init_alloc;
    void **owned;       /* converted typed-field data */
    size_t n_owned;
    const gf_onnx_strings **vstr; /* per value: the strings its indices name, or NULL */
    size_t n_vstr;
};

/* Map path read-only (at most limit bytes; what names it in messages).
 * Unmap with gf_onnx_pb_unmap (a zeroed or failed map is a no-op). */
gf_status gf_onnx_pb_map(const char *path, size_t limit, const char *what, gf_onnx_mapped *m,
                         gf_err *err);
void gf_onnx_pb_unmap(gf_onnx_mapped *m);

/* A name from the file: at most GF_ONNX_MAX_NAME bytes of UTF-8 without
 * control characters (what says which name, for the message). */
gf_status gf_onnx_pb_check_name(const char *s, const char *what, gf_err *err);

/* Element type, shape and byte size of a TensorProto (name for messages). */
gf_status gf_onnx_pb_tensor_desc(const Onnx__TensorProto *t, const char *name, gf_dtype *dt,
                                 int32_t *rank, int64_t *shape, size_t *nbytes, gf_err *err);

/* The bytes of a TensorProto: raw_data, the typed fields (converted into
 * *owned, malloc'd, the caller's) or data's bytes for external data (data
 * NULL when no external file was given; data_name the file the other
 * tensors used, or NULL). *out borrows from t, data or *owned. */
gf_status gf_onnx_pb_tensor_bytes(const Onnx__TensorProto *t, const char *name, gf_dtype dt,
                                  size_t nbytes, const gf_onnx_mapped *data,
                                  const char *data_name, const void **out, void **owned,
                                  gf_err *err);

/* p owns buf from here on (also on failure, when it is freed). */
gf_status gf_onnx_pb_own(gf_onnx_parsed *p, void *buf, gf_err *err);

/* Rewrite a graph with FP16/BF16 inputs, initializers, Casts or outputs so
 * that every intermediate is F32 (import_f16.c); before wiring. */
gf_status gf_onnx_pb_compute_f32(gf_onnx_parsed *p, gf_err *err);

/* Node np's attribute called name, or NULL. */
const Onnx__AttributeProto *gf_onnx_pb_attr(const Onnx__NodeProto *np, const char *name);

/* A tree ensemble's tables (import_trees.c): m nodes of t trees, c leaf
 * columns; feat[m], thr[m], next[3 * m], leaf[m * c], roots[t] (malloc'd);
 * meta = [levels, NaN step, binary scores, aggregate (0 SUM, 1 AVERAGE,
 * 2 MIN, 3 MAX), features read]. */
typedef struct gf_onnx_trees {
    int64_t m, t, c, features;
    int agg;
    int64_t *feat, *next, *roots;
    float *thr, *leaf;
    int64_t meta[GF_ONNX_TREE_META];
} gf_onnx_trees;

/* Build the tables of node np (a TreeEnsembleClassifier when classifier,
 * else a TreeEnsembleRegressor; lb names it in messages), checking every id.
 * On failure nothing is left to free. */
gf_status gf_onnx_trees_build(const Onnx__NodeProto *np, bool classifier, const char *lb,
                              gf_onnx_trees *tt, gf_err *err);
void gf_onnx_trees_free(gf_onnx_trees *tt);
/* True for the attributes the tables replace (they leave the node). */
bool gf_onnx_trees_consumes(const char *name);

/* An SVMClassifier's matrices (import_svm.c): pairs[v * p] (support vectors
 * by class pairs), votes[p * c] and vote_base[c] (malloc'd). */
typedef struct gf_onnx_svm {
    int64_t v, p, c;
    float *pairs, *votes, *vote_base;
} gf_onnx_svm;

/* Build them from node np's attributes (lb names it), checking every count;
 * the form without support vectors is refused. On failure nothing is left
 * to free. */
gf_status gf_onnx_svm_build(const Onnx__NodeProto *np, const char *lb, gf_onnx_svm *t,
                            gf_err *err);
void gf_onnx_svm_free(gf_onnx_svm *t);

/* Check Scan node np's body attribute (lb names the node): the one body
 * the plan runs, import_scan.c; *kind is then the string that replaces the
 * graph attribute (GF_ONNX_SCAN_SQEUCLIDEAN). Any other body is
 * GF_ERR_UNSUPPORTED saying what gpufaas runs. */
gf_status gf_onnx_scan_body(const Onnx__NodeProto *np, const Onnx__AttributeProto *body,
                            const char *lb, const char **kind, gf_err *err);

/* String values as indices into tables (import_strings.c). */
/* Value v's elements index table t (t owned by p). */
gf_status gf_onnx_pb_strings_set(gf_onnx_parsed *p, int32_t v, const gf_onnx_strings *t,
                                 gf_err *err);
/* String initializer t (name for messages): *shadow is the I64 tensor
 * 0 .. n-1 of its shape to use instead (its data owned by p), *tab its
 * strings. */
gf_status gf_onnx_pb_strings_tensor(gf_onnx_parsed *p, const Onnx__TensorProto *t,
                                    const char *name, Onnx__TensorProto *shadow,
                                    const gf_onnx_strings **tab, gf_err *err);
/* A classifier with classlabels_strings: *npp becomes a copy of the node
 * (owned by p) with integer labels 0 .. C-1 instead, and its label output
 * (already a value) indexes the strings. Other nodes are left alone. */
gf_status gf_onnx_pb_strings_labels(gf_onnx_parsed *p, const Onnx__NodeProto **npp,
                                    gf_err *err);
/* After wiring: carry the tables through the ops that move elements,
 * refuse any other use of a string value, and give each graph output its
 * strings (out_declared[i]: the file declares output i tensor(string)). */
gf_status gf_onnx_pb_strings_flow(gf_onnx_parsed *p, const bool *out_declared, gf_err *err);

/* Build p->g from p->model: values, nodes (Constant nodes become
 * initializers; ai.onnx.ml weights lifted), inputs and outputs, then wire
 * it (gf_onnx_graph_wire). */
gf_status gf_onnx_pb_build(gf_onnx_parsed *p, gf_err *err);

#endif /* GF_FUNCTIONS_ONNX_IMPORT_PB_H */
