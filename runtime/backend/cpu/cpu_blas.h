/* gpufaas — OpenBLAS for the cpu kernels, loaded at run time
 * (runtime/backend/cpu).
 *
 * OpenBLAS picks its kernels for the CPU when the library is loaded, from
 * the CPU model; a model newer than the library (Debian 12's 0.3.21 on
 * Emerald Rapids, say) falls back to the 2004 Prescott kernels, about five
 * times slower. So the cpu backend does not link OpenBLAS: the first
 * gf_cpu_blas_get() dlopens it, after setting OPENBLAS_CORETYPE from the CPU's
 * features (SkylakeX for AVX-512, Haswell for AVX2 + FMA) unless the
 * environment already names a core type. Built without BLAS
 * (GF_HAVE_BLAS 0), or where the library cannot be loaded, there is none
 * and the kernels use plain loops.
 */
#ifndef GF_BACKEND_CPU_BLAS_H
#define GF_BACKEND_CPU_BLAS_H

#include <stdbool.h>

/* cblas_sgemm's signature with int sizes (OpenBLAS's blasint in the
 * Debian builds; checked against cblas.h where it is compiled). */
typedef void (*gf_cpu_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                                float alpha, const float *a, int lda, const float *b, int ldb,
                                float beta, float *c, int ldc);

typedef struct gf_cpu_blas {
    gf_cpu_sgemm_fn sgemm;          /* cblas_sgemm */
    void (*set_threads)(int n);     /* openblas_set_num_threads, or NULL */
    const char *core;               /* the kernels OpenBLAS uses ("SkylakeX"), or "" */
} gf_cpu_blas;

/* The loaded library, or NULL when there is none. Loads it on the first
 * call (thread-safe; later calls return the same table). */
const gf_cpu_blas *gf_cpu_blas_get(void);

#endif /* GF_BACKEND_CPU_BLAS_H */
