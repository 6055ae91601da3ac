/* gpufaas — importing an ONNX model (functions/onnx): the only code that
 * reads ONNX's protobuf (protobuf-c, with onnx.proto compiled at build time).
 *
 * The import runs where deploy validation runs (a worker-side process, never
 * the gateway): it parses the model completely, binds every node to the op
 * table, compiles a plan for the declared inputs (so what cannot run is a
 * 400 at deploy, never a failure at the first request), and writes the
 * version's weights file: the initializers in order of first use, named as
 * in the graph, then the graph's compact JSON form as the U8 tensor
 * GF_ONNX_GRAPH_TENSOR. It returns the manifest: inputs and outputs derived
 * from the graph, overridden field by field by a partial manifest.
 */
#ifndef GF_FUNCTIONS_ONNX_IMPORT_H
#define GF_FUNCTIONS_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "functions/onnx/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model file may not exceed protobuf's 2 GiB; larger weights go to an
 * external data file. */
#define GF_ONNX_MAX_MODEL_BYTES ((size_t)2 << 30)
/* Nesting of protobuf messages accepted (a graph nests about 6 deep). */
#define GF_ONNX_MAX_NESTING 32
/* max_batch_size given to a graph whose first dims are symbolic. */
#define GF_ONNX_DEFAULT_MAX_BATCH 32

typedef struct gf_onnx_import_req {
    const char *model_path; /* the .onnx file */
    const char *data_path;  /* its external data file, or NULL */
    const char *manifest;   /* a partial manifest (JSON object) or NULL */
    size_t manifest_len;
    const char *name;       /* the function's name when the manifest gives none; may be NULL */
    const char *out_path;   /* the weights file to write (published with a rename) */
} gf_onnx_import_req;

/* Import. On success *manifest_json (malloc'd, canonical manifest JSON with
 * kind "onnx") is the caller's. Every failure is a message naming the
 * problem (the node, its op, domain and opset, and what is missing; the
 * tensor and the bytes it lacks; ...) with GF_ERR_INVALID, GF_ERR_FORMAT or
 * GF_ERR_UNSUPPORTED for bad input, and nothing is written. */
gf_status gf_onnx_import(const gf_onnx_import_req *req, char **manifest_json, gf_err *err);

/* The onnx kind's deploy-time converter (gf_fn_convert_fn,
 * functions/runtime.h): uploads[0] is the model, uploads[1] (optional) its
 * external data; writes <out_dir>/GF_CONVERTED_WEIGHTS with gf_onnx_import
 * and returns its manifest. */
struct gf_fn_convert_req;
gf_status gf_onnx_convert(const struct gf_fn_convert_req *req, char **manifest_json,
                          gf_err *err);

/* Parse a model into a graph plus initializer bytes, without checks beyond
 * the format's (for tools and tests). init_data[v] for each initializer
 * value v points into *blob_owner's memory; free both with
 * gf_onnx_parsed_free. */
typedef struct gf_onnx_parsed gf_onnx_parsed;
gf_status gf_onnx_parse_file(const char *model_path, const char *data_path,
                             gf_onnx_parsed **out, gf_err *err);
gf_onnx_graph *gf_onnx_parsed_graph(gf_onnx_parsed *p);
/* The graph, now the caller's (the initializer bytes stay with p). */
gf_onnx_graph *gf_onnx_parsed_take_graph(gf_onnx_parsed *p);
/* Bytes of initializer value v (NULL when v is not one). */
const void *gf_onnx_parsed_init(const gf_onnx_parsed *p, int32_t v, size_t *nbytes);
void gf_onnx_parsed_free(gf_onnx_parsed *p);

/* Read one TensorProto file (ONNX test data: input_0.pb). *out is the
 * caller's (gf_onnx_const_free). Strings come as GF_DT_BYTES in Triton's
 * serialization (<gpufaas/types.h>). */
gf_status gf_onnx_tensor_read(const char *path, gf_onnx_const **out, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_ONNX_IMPORT_H */
