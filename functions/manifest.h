/* gpufaas — function manifests (functions/).
 *
 * A manifest is JSON:
 *   {"name": "digits", "kind": "mlp", "version": 3,
 *    "inputs":  [{"name": "x", "datatype": "FP32", "shape": [-1, 64]}],
 *    "outputs": [{"name": "probs", "datatype": "FP32", "shape": [-1, 10]}],
 *    "max_batch_size": 32, "max_queue_delay_us": 500, "slo_ms": 50,
 *    "config": {"activations": ["relu", "identity"], "softmax": true}}
 * name matches ^[a-z0-9][a-z0-9_.-]{0,62}$; kind names a built-in kind or a
 * plugin; version (optional) is a positive integer; inputs and outputs are
 * non-empty lists with KServe datatypes and shapes of 0 (a scalar, never
 * batched) to 8 dims, each positive or -1 (any size; the first dim is the
 * batch dimension when -1);
 * max_batch_size >= 1 (default 1); max_queue_delay_us >= 0 (default 0);
 * slo_ms > 0 (optional); config is an object handed to the kind;
 * residency (optional) is {"pin", "priority", "keep_warm_s"} (core/residency.h);
 * admission (optional, needs slo_ms) is {"max_predicted_slo": F}: a request
 * whose predicted completion (queue + swap-in + execution) exceeds F x slo_ms
 * is answered at once with 503 and Retry-After instead of being served late;
 * ignore_weights (optional) lists weights tensors the function deliberately
 * does without (see gf_manifest_ignores_weight). Unknown fields are rejected
 * with their name.
 */
#ifndef GF_FUNCTIONS_MANIFEST_H
#define GF_FUNCTIONS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/residency.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_MANIFEST_MAX_IO 64
#define GF_MANIFEST_MAX_BYTES (1u << 20)

typedef struct gf_manifest_io {
    char *name;
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK]; /* -1 = any size */
    char **labels;              /* an output's class labels: labels[i] names class i (the */
    size_t n_labels;            /* classification extension); 0 = none */
} gf_manifest_io;

/* Bounds on an output's "labels": how many, and the bytes of one. */
#define GF_MANIFEST_MAX_LABELS 100000
#define GF_MANIFEST_MAX_LABEL_LEN 256

typedef struct gf_manifest {
    char *name;
    char *kind;
    int64_t version;            /* 0 when not given */
    gf_manifest_io *inputs;
    size_t n_inputs;
    gf_manifest_io *outputs;
    size_t n_outputs;
    int64_t max_batch_size;
    int64_t max_queue_delay_us;
    double slo_ms;              /* 0 when not given */
    gf_residency residency;     /* GF_RESIDENCY_DEFAULT when not given */
    double admission_max_slo;   /* admission.max_predicted_slo; 0 = admit everything */
    char *config_json;          /* the config object re-serialised, "{}" when absent */
    char **ignore_weights;      /* weights tensors the kind never sees: exact names, or */
    size_t n_ignore_weights;    /* prefixes ending in '*' ("*" = every unused one); 0 = none */
} gf_manifest;

/* True when name matches ^[a-z0-9][a-z0-9_.-]{0,62}$ (safe as a path part). */
bool gf_function_name_valid(const char *name);

/* The files of a version. Its weights are one safetensors file
 * (".../v3.safetensors"); a kind that converts its uploads at deploy may
 * add companion files beside it, each named by a suffix: the weights path
 * with ".safetensors" replaced by "." + suffix (".../v3.graph"). */
#define GF_COMPANION_SUFFIX_MAX 32

/* What a kind's deploy-time converter (functions/deploy.h) writes in the
 * directory it is given: the version's weights, and each companion file as
 * GF_CONVERTED_BASE "." suffix, so that gf_companion_path of the converted
 * weights names them there as it does once they are published. */
#define GF_CONVERTED_BASE "weights"

/* Most files one deploy may upload: the model or weights, then its extra
 * parts (ONNX external data). */
#define GF_MAX_UPLOADS 8
#define GF_CONVERTED_WEIGHTS GF_CONVERTED_BASE ".safetensors"

/* True when suffix matches ^[a-z0-9_]{1,32}$ and is not "safetensors". */
bool gf_companion_suffix_valid(const char *suffix);

/* The companion file `suffix` of weights_path (malloc'd; NULL when out of
 * memory). When weights_path does not end in ".safetensors", "." + suffix
 * is appended. */
char *gf_companion_path(const char *weights_path, const char *suffix);

/* Parse and check a manifest (len bytes of JSON, at most
 * GF_MANIFEST_MAX_BYTES). The message names the offending field. *out is
 * owned by the caller (gf_manifest_free). */
gf_status gf_manifest_parse(const char *text, size_t len, gf_manifest **out, gf_err *err);

/* Deep copy. */
gf_status gf_manifest_clone(const gf_manifest *m, gf_manifest **out, gf_err *err);

void gf_manifest_free(gf_manifest *m);

/* Append the manifest as canonical JSON (the form stored and sent to
 * workers; gf_manifest_parse reads it back to an equal manifest). */
gf_status gf_manifest_to_json(const gf_manifest *m, gf_buf *out);

/* Limits of ignore_weights: entries, and bytes per entry. */
#define GF_MANIFEST_MAX_IGNORE 256
#define GF_MANIFEST_MAX_IGNORE_LEN 256

/* True when ignore_weights covers tensor name: an entry equal to it, or an
 * entry "P*" where name starts with P. */
bool gf_manifest_ignores_weight(const gf_manifest *m, const char *name);

/* Index of the input / output named name, or -1. */
long gf_manifest_input_index(const gf_manifest *m, const char *name);
long gf_manifest_output_index(const gf_manifest *m, const char *name);

/* Check a request tensor against a manifest entry: dtype, rank and every
 * fixed dim; a -1 batch dim (dim 0) must be <= max_batch_size. The message
 * names the tensor and both shapes. */
gf_status gf_manifest_check_tensor(const gf_manifest *m, const gf_manifest_io *spec,
                                   const gf_tensor *t, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_MANIFEST_H */
