/* gpufaas — the deploy upload: multipart/form-data parts streamed to disk
 * (gateway/http).
 *
 * POST /v1/functions carries two parts, "manifest" (the JSON, kept in memory,
 * at most GF_MANIFEST_MAX_BYTES) and "weights" (the safetensors file). The
 * weights go straight to a staged file in the gateway's upload directory, in
 * the chunks libmicrohttpd's post processor hands over, with their SHA-256
 * computed on the way: the file is never held in memory. gf_upload_iter is
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

typedef struct gf_upload gf_upload;

/* Start an upload whose weights are staged in dir (borrowed; must exist) and
 * may be at most max_weights bytes (0 = no limit). *out is the caller's
 * (gf_upload_free). Nothing is created on disk until weights arrive. */
gf_status gf_upload_new(const char *dir, uint64_t max_weights, gf_upload **out, gf_err *err);

/* Remove the staged file unless gf_upload_release was called, and free.
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

/* The body has ended: check that both parts came, flush the staged file to
 * disk (fsync) and close it, finish the digest. On failure the status and
 * err say why (the recorded failure when there was one): GF_ERR_INVALID /
 * FORMAT / TOO_LARGE for the request, GF_ERR_NO_SPACE for a full disk. */
gf_status gf_upload_finish(gf_upload *u, gf_err *err);

/* After a successful finish: the manifest text (len bytes, NUL-terminated),
 * the staged file's path, its SHA-256 (64 hex digits) and size. All live as
 * long as u. */
const char *gf_upload_manifest(const gf_upload *u, size_t *len);
const char *gf_upload_path(const gf_upload *u);
const char *gf_upload_sha256(const gf_upload *u);
uint64_t gf_upload_bytes(const gf_upload *u);

/* The staged file now belongs to someone else (gf_gw_deploy moves or removes
 * it): gf_upload_free will leave it alone. */
void gf_upload_release(gf_upload *u);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_HTTP_UPLOAD_H */
