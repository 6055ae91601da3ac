/* gpufaas — the cpu kernel library (runtime/backend/cpu).
 *
 * Implements gpufaas/kernels.h on the host: OpenBLAS (cblas) for gemm when
 * built with it, plain C loops otherwise. The cpu compute stream is the
 * calling thread, so every kernel has finished when it returns and the
 * `stream` argument is not used.
 */
#ifndef GF_BACKEND_CPU_KERNELS_H
#define GF_BACKEND_CPU_KERNELS_H

#include <gpufaas/kernels.h>

#include "core/error.h"

typedef struct gf_cpu_kctx gf_cpu_kctx;

/* Create the kernels' context: scratch buffers (grown on demand, kept for
 * reuse) and the BLAS thread count (blas_threads <= 0 means 1). */
gf_status gf_cpu_kctx_new(int blas_threads, gf_cpu_kctx **out, gf_err *err);

/* Free the context. NULL is a no-op. */
void gf_cpu_kctx_free(gf_cpu_kctx *ctx);

/* Fill every member of *k except `sync` (which the backend provides, since it
 * owns the streams), with k->ctx = ctx. */
void gf_cpu_kernels_fill(gf_kernels *k, gf_cpu_kctx *ctx);

#endif /* GF_BACKEND_CPU_KERNELS_H */
