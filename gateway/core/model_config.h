/* gpufaas — Triton's model configuration (ModelConfig JSON) from and to a
 * manifest (gateway/core): the one mapping between the two, used by
 * GET /v2/models/{m}/config and by a repository load's parameters.config.
 *
 *   manifest                         ModelConfig
 *   name                             name
 *   kind                             platform "gpufaas_<kind>", backend "gpufaas",
 *                                    parameters.kind
 *   inputs/outputs name, datatype    input/output name, data_type TYPE_<datatype>
 *   shape [-1, d...] (every input)   max_batch_size = manifest's, dims [d...]
 *   shape otherwise                  max_batch_size 0, dims = shape
 *   max_queue_delay_us               dynamic_batching.max_queue_delay_microseconds
 *   an output's labels               its label_filename "<output>_labels.txt"; read
 *                                    back, a label_filename names a file of the load
 *                                    (the manifest output's "labels_file", which
 *                                    repo_load.c replaces by its lines)
 *   slo_ms, config, ignore_weights   parameters.slo_ms / config / ignore_weights
 *                                    ({"string_value": ...}; config and
 *                                    ignore_weights as JSON text)
 *
 * Reading one back is strict: a field we do not know is refused by name, so
 * a Triton setting we would silently ignore never looks applied.
 */
#ifndef GF_GATEWAY_CORE_MODEL_CONFIG_H
#define GF_GATEWAY_CORE_MODEL_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "functions/manifest.h"

/* What the config shows besides the manifest. */
typedef struct gw_mc_extra {
    int64_t version;       /* the version described (parameters.version) */
    int n_workers;         /* instance_group count */
    bool gpu;              /* KIND_GPU, else KIND_CPU */
} gw_mc_extra;

/* The ModelConfig JSON of mf (new reference; NULL when out of memory). */
json_t *gw_model_config_of(const gf_manifest *mf, const gw_mc_extra *x);

/* The manifest (canonical JSON appended to out) that ModelConfig cfg
 * describes for the model `name`. base (may be NULL) gives what cfg leaves
 * out: its kind, inputs and outputs, kind config and the rest; without a
 * base cfg must give input, output and a kind. A field cfg has that we do
 * not know, a name that is not `name`, a datatype, dims or a setting out of
 * range is GF_ERR_INVALID naming it. The result still goes through
 * gf_manifest_parse (the caller's), the one validation of manifests. */
gf_status gw_model_config_to_manifest(const json_t *cfg, const char *name,
                                      const gf_manifest *base, bool derives_io, gf_buf *out,
                                      gf_err *err);

#endif /* GF_GATEWAY_CORE_MODEL_CONFIG_H */
