/* gpufaas — BYTES tensors: their serialization checked, walked, built
 * (runtime/core).
 *
 * The serialization (<gpufaas/types.h>, GF_DT_BYTES): numel elements, each a
 * 4-byte little-endian length n then n bytes, contiguous. It reaches us from
 * clients (JSON strings, the binary extension, shared memory), from a worker
 * frame and from a function; each is checked here, once, before anything
 * walks it, so code past the check may trust that every element lies inside
 * the buffer.
 */
#ifndef GF_CORE_BYTES_H
#define GF_CORE_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest element: its length must fit the 4-byte prefix. */
#define GF_BYTES_MAX_ELEMENT ((uint64_t)UINT32_MAX)

/* GF_OK when len bytes at data are the serialization of exactly numel
 * elements; else GF_ERR_INVALID with a message (no prefix: the caller names
 * the tensor) saying which element runs past the end, or how many elements
 * or bytes are missing or left over. */
gf_status gf_bytes_check(const void *data, size_t len, uint64_t numel, gf_err *err);

/* The byte range [*off, *off + *n) that holds elements [first, first +
 * count) of a CHECKED serialization of len bytes. GF_ERR_INVALID when the
 * range is not inside it. */
gf_status gf_bytes_span(const void *data, size_t len, uint64_t first, uint64_t count, size_t *off,
                        size_t *n, gf_err *err);

/* Element at byte offset *pos of a CHECKED serialization of len bytes: true,
 * *elem and *n set and *pos advanced past it; false at the end. */
bool gf_bytes_next(const void *data, size_t len, size_t *pos, const char **elem, uint32_t *n);

/* Append one element (n bytes at p) to b. GF_ERR_TOO_LARGE when n does not
 * fit the length prefix, GF_ERR_NOMEM. */
gf_status gf_bytes_append(gf_buf *b, const void *p, size_t n, gf_err *err);

/* A BYTES tensor's descriptor: rank, shape, and nbytes of host data that
 * must be the serialization of exactly numel(shape) elements (checked;
 * GF_ERR_INVALID with a message without a prefix otherwise). */
gf_status gf_tensor_init_bytes(gf_tensor *t, int32_t rank, const int64_t *shape, void *data,
                               size_t nbytes, gf_err *err);

/* The nbytes a tensor of dtype, shape and data must have: numel x element
 * size, or for BYTES the checked serialization's len (which is then what
 * data holds). GF_OK when t->nbytes agrees; else GF_ERR_INVALID (or
 * GF_ERR_OVERFLOW) with a message without a prefix. */
gf_status gf_tensor_check_data(const gf_tensor *t, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_BYTES_H */
