/* gpufaas — tensor descriptors and overflow-checked sizes (runtime/core). */
#ifndef GF_CORE_TENSOR_H
#define GF_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a * b and a + b on sizes; return false (and leave *out unspecified) on
 * overflow. */
static inline bool gf_size_mul(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool gf_size_add(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool gf_u64_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool gf_u64_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* Round n up to a multiple of align (a power of two). False on overflow. */
static inline bool gf_size_align_up(size_t n, size_t align, size_t *out)
{
    size_t t;
    if (!gf_size_add(n, align - 1, &t))
        return false;
    *out = t & ~(align - 1);
    return true;
}

/* Number of elements of a shape. Rejects rank outside [0, GF_MAX_RANK],
 * negative dimensions and overflow, with a message naming the problem. */
gf_status gf_shape_numel(int32_t rank, const int64_t *shape, uint64_t *numel, gf_err *err);

/* Fill *t as a descriptor for data of the given dtype and shape: computes
 * nbytes (overflow-checked) and sets mem/device_id. t is caller-owned; data is
 * borrowed. */
gf_status gf_tensor_init(gf_tensor *t, gf_dtype dtype, int32_t rank, const int64_t *shape,
                         void *data, gf_mem_kind mem, int32_t device_id, gf_err *err);

/* Number of elements of an initialised descriptor (shape already checked). */
uint64_t gf_tensor_numel(const gf_tensor *t);

/* True when a and b have the same rank and dims. */
bool gf_shape_equal(int32_t rank_a, const int64_t *a, int32_t rank_b, const int64_t *b);

/* Write "[2, 3, 4]" into buf (always NUL-terminated, truncated with "..."
 * when cap is too small). Returns buf, for use in messages. */
char *gf_shape_str(char *buf, size_t cap, int32_t rank, const int64_t *shape);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_TENSOR_H */
