/* gpufaas — checking a deploy (functions/): what the short-lived
 * `gpufaas-worker --validate` process runs, so that no function code ever
 * runs in the gateway.
 *
 * A deploy brings a manifest and one uploaded file. For most kinds the
 * upload is the version's safetensors weights and checking it means running
 * the kind's load in validation mode (gf_fn_validate). A built-in kind may
 * instead *convert* the upload (gf_fn_convert_fn, registered with the kind in
 * functions/runtime.c): read it, write the version's weights and any
 * companion files into an output directory the gateway provides, and derive
 * the manifest to store. The gateway then publishes those files beside each
 * other in the function store (functions/manifest.h, "the files of a
 * version").
 */
#ifndef GF_FUNCTIONS_DEPLOY_H
#define GF_FUNCTIONS_DEPLOY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "functions/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a deploy brings. Strings are borrowed for the call. */
typedef struct gf_fn_deploy_in {
    const char *manifest;        /* JSON text, or NULL: a converting kind may derive it all */
    size_t manifest_len;
    const char *name;            /* the function's name when the deploy gave it apart from the
                                    manifest (NULL: the manifest's) */
    const char *kind;            /* the kind when the deploy named it apart from the manifest
                                    (e.g. by its upload's part name; NULL: the manifest's) */
    const char *const *uploads;  /* the uploaded files: [0] the model or weights, then extras */
    size_t n_uploads;            /* 1..GF_MAX_UPLOADS */
} gf_fn_deploy_in;

/* What a checked deploy is: the manifest to store and where its files are. */
typedef struct gf_fn_deployed {
    gf_manifest *mf;       /* the manifest to store (canonical form via gf_manifest_to_json) */
    bool converted;        /* <out_dir>/GF_CONVERTED_WEIGHTS replaces the uploads */
    char **companions;     /* suffixes of the companion files in out_dir (malloc'd) */
    size_t n_companions;
} gf_fn_deployed;

/* Check a deploy. The kind is in->kind, else the manifest's "kind". A kind
 * that converts its uploads (gf_fn_convert_fn) gets the manifest as given
 * (possibly partial, or none), the name and every upload, writes into
 * out_dir (an existing empty directory) and returns the manifest to store,
 * which is then parsed strictly. Any other kind needs a complete manifest
 * and exactly one upload, the safetensors weights. Either way the manifest
 * is then validated against the weights by running the kind's load in
 * validation mode. The message names the problem: an unknown kind lists the
 * kinds there are; weights that do not fit name the tensor (GF_ERR_INVALID).
 * *out is filled on success only (gf_fn_deployed_deinit frees it). */
gf_status gf_fn_deploy_check(const gf_fn_deploy_in *in, const char *out_dir, gf_fn_deployed *out,
                             gf_err *err);

/* Free what gf_fn_deploy_check filled in (not the files). NULL is a no-op. */
void gf_fn_deployed_deinit(gf_fn_deployed *d);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_DEPLOY_H */
