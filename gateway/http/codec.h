/* gpufaas — inference request parsing and response rendering for the HTTP
 * front (gateway/http).
 *
 * The KServe Open Inference Protocol v2 request, as Triton serves it:
 *
 *   {"id": "42",
 *    "parameters": {"binary_data_output": true},
 *    "inputs":  [{"name": "x", "datatype": "FP32", "shape": [1, 4],
 *                 "data": [1, 2, 3, 4]}],
 *    "outputs": [{"name": "probs", "parameters": {"binary_data": true}}]}
 *
 * "data" may be flat (row-major) or nested; either way it must hold exactly
 * as many elements as the shape says. With the binary tensor data extension
 * the body is the JSON header (Inference-Header-Content-Length bytes) then the
 * raw little-endian tensors, in input order, each announced by the input's
 * "binary_data_size" parameter instead of "data".
 *
 * The parser is ours, not a general JSON tree: it converts "data" arrays
 * straight into the typed tensor buffers, so a body never costs more memory
 * than the tensors it carries (a DOM would cost ~50 bytes per number), and
 * it bounds nesting. Every error names the input and the problem; every
 * error here is the client's (HTTP 400) unless memory ran out (500).
 *
 * /v1/functions/{name}/invoke uses the same request shape and parser, with
 * FP16/BF16 also accepted as JSON numbers, and a different response envelope.
 */
#ifndef GF_GATEWAY_HTTP_CODEC_H
#define GF_GATEWAY_HTTP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "functions/manifest.h"
#include "gateway/core/gateway.h"
#include "gateway/http/shm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bound on the nesting of arrays and objects in a request. A rank-8
 * nested "data" array inside the request needs 11 levels. */
#define GF_CODEC_MAX_DEPTH 32

/* One entry of the request's "outputs" list. */
typedef struct gf_codec_output_sel {
    char *name; /* malloc'd */
    int binary; /* the "binary_data" parameter: -1 absent, 0 false, 1 true */
    gf_shm_region *shm; /* shared_memory_region: the output goes there (a reference) */
    uint64_t shm_offset, shm_size;
    int64_t classify; /* the "classification" parameter: top K classes; 0 = none */
    char **labels;    /* the output's class labels (gf_codec_set_labels), owned */
    size_t n_labels;
} gf_codec_output_sel;

/* A parsed inference request. Owned by the caller: gf_codec_request_deinit. */
typedef struct gf_codec_request {
    char *id;             /* "id", malloc'd; NULL when absent */
    gf_gw_tensor *inputs; /* malloc'd array; every name and data malloc'd */
    size_t n_inputs;
    gf_codec_output_sel *outputs; /* requested outputs in request order; NULL = all */
    size_t n_outputs;
    bool binary_output; /* request parameter "binary_data_output" */
    uint64_t timeout_us; /* request parameter "timeout" (microseconds, as Triton's clients
                            send it); 0 = none given */
} gf_codec_request;

typedef struct gf_codec_opts {
    bool half_as_json; /* accept FP16/BF16 "data" as JSON numbers (v1); v2: binary only */
    size_t max_depth;  /* 0 = GF_CODEC_MAX_DEPTH */
    gf_shm_table *shm; /* the system shared memory regions; NULL: the extension is refused */
    gf_hold *body_hold; /* the body's owner: binary inputs become slices of the body, each
                           with a reference (zero copy); NULL: they are copied out */
} gf_codec_opts;

/* Parse a request body (len bytes at body, borrowed; need not be
 * NUL-terminated). header_len is the value of the Inference-Header-Content-
 * Length header, or NULL when the request has none. On success *out (zeroed
 * first) owns everything it holds. On failure *out holds nothing, the status
 * says whose fault it is (GF_ERR_INVALID / FORMAT / UNSUPPORTED: the
 * request's; GF_ERR_NOMEM: ours) and the message names the problem. opts may
 * be NULL (v2 defaults). */
gf_status gf_codec_request_parse(const char *body, size_t len, const char *header_len,
                                 const gf_codec_opts *opts, gf_codec_request *out, gf_err *err);

/* Give requested output k the class labels its classification names
 * (labels: malloc'd array of malloc'd strings, taken over). */
void gf_codec_set_labels(gf_codec_request *r, size_t k, char **labels, size_t n);

/* Free what r holds (inputs not yet handed over, outputs, id) and zero it.
 * NULL is a no-op. */
void gf_codec_request_deinit(gf_codec_request *r);

/* Render a successful result as a v2 inference response into out (appended):
 *   {"model_name", "model_version", "id"?, "outputs": [{"name", "datatype",
 *    "shape", "data" | "parameters": {"binary_data_size"}}]}
 * followed by the binary outputs. req (borrowed; NULL = all outputs as JSON)
 * selects outputs and their encoding; FP16 and BF16 outputs always go as
 * binary (JSON has no such numbers). An output with a shared memory region
 * is written there, and its entry says so instead of carrying data (400
 * when it does not fit the span the request gave). *header_len is the JSON length when a
 * binary part follows (the response's Inference-Header-Content-Length), else
 * 0. A requested output the function does not have is GF_ERR_INVALID; a
 * result that cannot be rendered GF_ERR_NOMEM or GF_ERR_INTERNAL. */
gf_status gf_codec_render_v2(const gf_gw_result *res, const char *model_name,
                             const gf_codec_request *req, gf_buf *out, size_t *header_len,
                             gf_err *err);

/* gf_codec_render_v2 without copying the binary outputs: out gets the JSON
 * (and any classification's bytes), *iov the body as segments in order --
 * out's bytes and the outputs' bytes where they lie (res must outlive the
 * segments: the response's free callback, reply.c). */
typedef struct gf_codec_seg {
    const void *ext; /* an output's bytes; NULL: bytes [off, off + len) of out */
    size_t off, len;
} gf_codec_seg;
#define GF_CODEC_MAX_SEGS (2 * GF_MANIFEST_MAX_IO + 1)
typedef struct gf_codec_iov {
    size_t n;
    gf_codec_seg seg[GF_CODEC_MAX_SEGS];
} gf_codec_iov;
gf_status gf_codec_render_v2_iov(const gf_gw_result *res, const char *model_name,
                                 const gf_codec_request *req, gf_buf *out, size_t *header_len,
                                 gf_codec_iov *iov, gf_err *err);

/* Render a successful result as the /v1 invoke response (JSON only; FP16 and
 * BF16 converted to numbers):
 *   {"function", "version", "outputs": [{"name", "datatype", "shape", "data"}],
 *    "worker", "cold", "batch_size",
 *    "timing_us": {"queue", "load", "exec", "total"}} */
gf_status gf_codec_render_v1(const gf_gw_result *res, const gf_codec_request *req, gf_buf *out,
                             gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_HTTP_CODEC_H */
