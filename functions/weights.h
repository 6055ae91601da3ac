/* gpufaas — the weights a kind sees while it loads (functions/).
 *
 * A view of one safetensors file for one load: the tensors the manifest's
 * ignore_weights names are hidden, and every tensor the kind uses is marked,
 * so that after the kind's load the runtime can refuse a file with tensors
 * left over (THE UNUSED-WEIGHTS RULE in gpufaas/function.h): a model is never
 * served without a part its file contains.
 */
#ifndef GF_FUNCTIONS_WEIGHTS_H
#define GF_FUNCTIONS_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "functions/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gf_st_open for a weights file; a file that is not safetensors is named
 * (gf_st_parse says what it is), and an ONNX model is told where it belongs:
 * the `onnx` kind when this runtime has one. */
gf_status gf_fn_weights_open(const char *path, gf_st_file **out, gf_err *err);

/* Caller-owned (gf_fn_weights_init / _deinit). f and mf are borrowed and
 * must outlive the view. */
typedef struct gf_fn_weights {
    gf_st_file *f;
    const gf_manifest *mf;
    size_t n;        /* visible tensors */
    size_t *visible; /* file indices of the visible tensors, file order */
    bool *used;      /* per file index */
    bool *hidden;    /* per file index: covered by ignore_weights */
} gf_fn_weights;

gf_status gf_fn_weights_init(gf_fn_weights *w, gf_st_file *f, const gf_manifest *mf, gf_err *err);
void gf_fn_weights_deinit(gf_fn_weights *w);

/* The visible tensor named name (NULL when absent or ignored). */
const gf_st_tensor *gf_fn_weights_find(const gf_fn_weights *w, const char *name);

/* The i-th visible tensor in file order; NULL when i >= w->n. */
const gf_st_tensor *gf_fn_weights_at(const gf_fn_weights *w, size_t i);

/* Mark tensor name used. False when it is absent or ignored. */
bool gf_fn_weights_use(gf_fn_weights *w, const char *name);

/* GF_OK when every visible tensor was used; else GF_ERR_INVALID with a
 * message naming the first unused ones for kind `kind`, what they look like
 * (a BatchNorm's statistics, a pre-training head...) and the way out. */
gf_status gf_fn_weights_check_unused(const gf_fn_weights *w, const char *kind, gf_err *err);

/* For a tensor a kind needs and the file lacks: " (the file has
 * 'module.0.weight': strip the prefix 'module.')" when another tensor's name
 * ends with "." name, else "". Writes into buf (cap bytes); returns buf. */
const char *gf_fn_weights_missing_hint(const gf_fn_weights *w, const char *name, char *buf,
                                       size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_WEIGHTS_H */
