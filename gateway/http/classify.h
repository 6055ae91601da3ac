/* gpufaas — Triton's classification extension (gateway/http): an output
 * requested with "parameters": {"classification": K} is answered as the top
 * K classes of each row instead of the raw scores.
 *
 * The last dimension of the output holds the classes; every index of the
 * dimensions before it is a row. The answer is a BYTES tensor of shape
 * [..., min(K, classes)], each element "score:index" (or "score:index:label"
 * when the function has labels), best first, ties by the lower index; the
 * score is printed as C's %f (as Triton does). BYTES tensors travel as
 * Triton writes them: in JSON, an array of strings; in binary, each element
 * as a 4-byte little-endian length followed by its bytes.
 */
#ifndef GF_GATEWAY_HTTP_CLASSIFY_H
#define GF_GATEWAY_HTTP_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "gpufaas/types.h"

/* The classification of t (a numeric tensor of rank >= 1) into out (the
 * BYTES serialization: length-prefixed elements), *rank and shape (the
 * answer's shape). labels may be NULL. GF_ERR_INVALID naming the output for
 * a tensor that cannot be classified (BOOL, rank 0, no classes), GF_ERR_NOMEM. */
gf_status gf_classify(const char *name, const gf_tensor *t, int64_t k,
                      const char *const *labels, size_t n_labels, gf_buf *out, int32_t *rank,
                      int64_t shape[GF_MAX_RANK], gf_err *err);

#endif /* GF_GATEWAY_HTTP_CLASSIFY_H */
