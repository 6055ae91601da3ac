/* gpufaas — the deploy upload: multipart/form-data parts streamed to disk
 * (gateway/http).
 *
 * POST /v1/functions carries either two parts, "manifest" (the JSON, kept in
 * memory, at most GF_MANIFEST_MAX_BYTES) and "weights" (the safetensors
 * file), or a model: "model" (an ONNX file), its name in the text part
 * "name" or a manifest that may give only some fields, and "model_data" (its
 * external data) when the model keeps its weights in a second file. Each
 * file goes straight to a staged file in the gateway's upload directory, in
 * the chunks libmicrohttpd's post processor hands over, the weights' or
 * model's SHA-256 computed on the way: no file is held in memory. gf_upload_iter is
 * the post processor's iterator; tests may call gf_upload_feed directly.
 *
 * The first failure is recorded with the HTTP status it deserves (400 for a
 * missing, unexpected or repeated part, 413 for a part over its limit, 507 when
 * the disk is full, 500 otherwise); every later call is then refused.
 * Not thread-safe: one request, one thread at a time.
 */
#ifndef GF_GATEWAY_HTTP_UPLOAD_H
#define GF_GATEWAY_HTTP_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kind a 'model' part is for: ONNX is the model format gpufaas reads. */
#define GF_UPLOAD_MODEL_KIND "onnx"

typedef struct gf_upload gf_upload;

/* Start an upload whose weights are staged in dir (borrowed; must exist) and
 * may be at most max_weights bytes together (0 = no limit). *out is the caller's
 * (gf_upload_free). Nothing is created on disk until weights arrive. */
gf_status gf_upload_new(const char *dir, uint64_t max_weights, gf_upload **out, gf_err *err);

/* Remove the staged files unless gf_upload_release was called, and free.
 * NULL is a no-op. */
void gf_upload_free(gf_upload *u);

/* size bytes of the part named key, starting at byte off of that part. */
gf_status gf_upload_feed(gf_upload *u, const char *key, const char *data, uint64_t off,
                         size_t size);

/* The MHD_PostDataIterator: cls is the gf_upload. MHD_NO once failed. */
enum MHD_Result gf_upload_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size);

/* Record a failure found outside the parts (a truncated body): the first
 * failure wins. Returns the recorded code. */
gf_status gf_upload_fail(gf_upload *u, gf_status code, const char *msg);

/* The body has ended: check that the parts that came make a deploy (a
 * manifest and weights, or a model with what may go with it), flush the
 * staged files to disk (fsync) and close them, finish the digest. On failure the status and
 * err say why (the recorded failure when there was one): GF_ERR_INVALID /
 * FORMAT / TOO_LARGE for the request, GF_ERR_NO_SPACE for a full disk. */
gf_status gf_upload_finish(gf_upload *u, gf_err *err);

/* After a successful finish: the manifest text (len bytes, NUL-terminated;
 * NULL when no manifest came), the 'name' part (NULL when none came),
 * whether the file came as 'model', the staged file's path, its SHA-256 (64
 * hex digits) and size, and the staged 'model_data' (NULL when none came).
 * All live as long as u. */
const char *gf_upload_manifest(const gf_upload *u, size_t *len);
const char *gf_upload_name(const gf_upload *u);
bool gf_upload_is_model(const gf_upload *u);
const char *gf_upload_path(const gf_upload *u);
const char *gf_upload_sha256(const gf_upload *u);
uint64_t gf_upload_bytes(const gf_upload *u);
const char *gf_upload_data_path(const gf_upload *u);

/* The staged files now belong to someone else (gf_gw_deploy moves or
 * removes them): gf_upload_free will leave them alone. */
void gf_upload_release(gf_upload *u);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_HTTP_UPLOAD_H */
