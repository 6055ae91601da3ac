/* gpufaas — public types shared by the runtime and function authors.
 *
 * This header is part of the function ABI (see gpufaas/function.h): it depends
 * on the C standard library only, and its enumerator values and struct layouts
 * never change within one major ABI version. Additions go at the end.
 */
#ifndef GPUFAAS_TYPES_H
#define GPUFAAS_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest tensor rank the runtime handles. */
#define GF_MAX_RANK 8

/* Element types. 0 is deliberately not a type, so a zeroed descriptor is
 * recognisably invalid. Values are stable (they cross the worker protocol). */
typedef enum gf_dtype {
    GF_DT_INVALID = 0,
    GF_DT_BOOL = 1,  /* one byte, 0 or 1 */
    GF_DT_U8 = 2,
    GF_DT_U16 = 3,
    GF_DT_U32 = 4,
    GF_DT_U64 = 5,
    GF_DT_I8 = 6,
    GF_DT_I16 = 7,
    GF_DT_I32 = 8,
    GF_DT_I64 = 9,
    GF_DT_F16 = 10,  /* IEEE 754 binary16 */
    GF_DT_BF16 = 11, /* bfloat16: the top half of a binary32 */
    GF_DT_F32 = 12,
    GF_DT_F64 = 13,
    GF_DT_BYTES = 14, /* variable-length byte strings (KServe BYTES): see below */
    GF_DT_COUNT_     /* number of values; not a type */
} gf_dtype;

/* BYTES tensors (ABI 1.5). A BYTES tensor has no element size: its data is
 * Triton's serialization of its numel elements in row-major order, each a
 * 4-byte little-endian length n followed by n bytes (any bytes; UTF-8 is
 * the client's business), contiguous, and nbytes is the length of the whole
 * serialization. Whatever the runtime hands a function is checked: exactly
 * numel elements, no length past the end. BYTES data lives in host memory
 * (GF_MEM_HOST) everywhere, also in infer on a device backend: strings never
 * go to the device. Weights are never BYTES. */
#define GF_BYTES_LEN_SIZE 4

/* Where the bytes of a buffer live. */
typedef enum gf_mem_kind {
    GF_MEM_HOST = 0,   /* ordinary host memory */
    GF_MEM_PINNED = 1, /* page-locked host memory, usable for async copies */
    GF_MEM_DEVICE = 2, /* memory of the device named by device_id */
} gf_mem_kind;

/* A dense, contiguous, row-major tensor. The descriptor never owns data:
 * whoever hands one over states how long `data` stays valid. */
typedef struct gf_tensor {
    gf_dtype dtype;              /* element type */
    int32_t rank;                /* 0..GF_MAX_RANK; rank 0 is a scalar */
    int64_t shape[GF_MAX_RANK];  /* dims [0, rank) are meaningful, each >= 0 */
    size_t nbytes;               /* numel * element size, overflow-checked; BYTES: the serialization */
    void *data;                  /* first byte; may be NULL when nbytes == 0 */
    gf_mem_kind mem;             /* where data lives */
    int32_t device_id;           /* device index when mem == GF_MEM_DEVICE, else -1 */
} gf_tensor;

#ifdef __cplusplus
}
#endif

#endif /* GPUFAAS_TYPES_H */
