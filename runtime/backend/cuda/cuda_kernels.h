/* gpufaas — the cuda kernel library (runtime/backend/cuda).
 *
 * Implements gpufaas/kernels.h with cuBLAS and our own kernels (.cu). Every
 * kernel is queued on the given stream (a struct gf_stream from
 * cuda_internal.h) and returns without waiting.
 */
#ifndef GF_BACKEND_CUDA_KERNELS_H
#define GF_BACKEND_CUDA_KERNELS_H

#include <gpufaas/kernels.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_cuda_kctx gf_cuda_kctx;

/* Create the kernels' context on the current device: a cuBLAS handle and a
 * device workspace grown on demand. alloc/free_fn allocate device memory
 * through the backend, so workspace counts against the device budget; they
 * return 0 on success. */
typedef int (*gf_cuda_alloc_fn)(void *arg, size_t size, void **out);
typedef void (*gf_cuda_free_fn)(void *arg, void *ptr);
gf_status gf_cuda_kctx_new(gf_cuda_alloc_fn alloc_fn, gf_cuda_free_fn free_fn, void *arg,
                           gf_cuda_kctx **out, gf_err *err);

/* Free the context (waits for nothing: the backend synchronises first). */
void gf_cuda_kctx_free(gf_cuda_kctx *ctx);

/* Fill every member of *k except `sync`, with k->ctx = ctx. */
void gf_cuda_kernels_fill(gf_kernels *k, gf_cuda_kctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_CUDA_KERNELS_H */
