/* gpufaas — HTTP content codings (gateway/http): gzip and deflate request
 * bodies (Content-Encoding) and responses (Accept-Encoding), with zlib.
 *
 * Triton's clients compress a whole inference body (the binary extension's
 * tensors included) and announce Inference-Header-Content-Length for the
 * uncompressed body, so a body is inflated before anything reads it, and a
 * response is deflated after it is rendered. "deflate" is the zlib format
 * (RFC 9110 8.4.1.2, what Python's zlib.compress and tritonclient send); a
 * raw deflate stream is accepted as well, as browsers once sent it.
 */
#ifndef GF_GATEWAY_HTTP_ENCODING_H
#define GF_GATEWAY_HTTP_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"

typedef enum gf_http_coding {
    GF_CODING_IDENTITY = 0,
    GF_CODING_GZIP,
    GF_CODING_DEFLATE,
} gf_http_coding;

/* The coding a Content-Encoding header names (NULL = identity). GF_OK, or
 * GF_ERR_UNSUPPORTED with a message naming it (several codings stacked, or
 * one we do not read: the caller answers 415). */
gf_status gf_http_coding_parse(const char *value, gf_http_coding *out, gf_err *err);

/* The coding to answer with for an Accept-Encoding header (NULL = none):
 * gzip, else deflate, else identity, by the client's q-values (q=0 refuses
 * one; "*" stands for gzip). */
gf_http_coding gf_http_coding_accept(const char *accept);

/* "gzip", "deflate", or "identity". Static. */
const char *gf_http_coding_name(gf_http_coding c);

/* Asked before each inflated chunk of n bytes is kept: false refuses it
 * (the inflate ends with GF_ERR_OVERLOADED). */
typedef bool (*gf_http_charge_fn)(void *arg, size_t n);

/* Inflate len bytes at in (coding c, not identity) into out (emptied first;
 * out->limit is set to limit, 0 = none). GF_ERR_TOO_LARGE as soon as the
 * inflated size would pass limit (a zip bomb costs at most limit bytes),
 * GF_ERR_OVERLOADED when charge (NULL = none; called with charge_arg before
 * every chunk of at most 64 KiB is kept) refuses one, GF_ERR_FORMAT for a
 * corrupt or truncated stream, GF_ERR_NOMEM. On failure out is empty; what
 * charge accepted stays the caller's to release. */
gf_status gf_http_inflate(gf_http_coding c, const void *in, size_t len, uint64_t limit,
                          gf_http_charge_fn charge, void *charge_arg, gf_buf *out,
                          gf_err *err);

/* Compress len bytes at in with coding c (not identity): *out is malloc'd
 * (caller frees), *out_len its length. GF_ERR_NOMEM, or GF_ERR_INTERNAL
 * when zlib fails. */
gf_status gf_http_deflate(gf_http_coding c, const void *in, size_t len, char **out,
                          size_t *out_len, gf_err *err);

#endif /* GF_GATEWAY_HTTP_ENCODING_H */
