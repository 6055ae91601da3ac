/* gpufaas — OpenBLAS for the cpu kernels, loaded at run time
 * (runtime/backend/cpu). See cpu_blas.h. */
#include "backend/cpu/cpu_blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "gf_config.h"

#if GF_HAVE_BLAS
#include <cblas.h>

/* gf_cpu_sgemm_fn's int sizes and enum values are what cblas.h declares. */
#ifdef OPENBLAS_VERSION
_Static_assert(sizeof(blasint) == sizeof(int), "OpenBLAS is built with 32-bit blasint");
#endif
_Static_assert((int)CblasRowMajor == 101 && (int)CblasNoTrans == 111 && (int)CblasTrans == 112,
               "CBLAS enum values");
#endif

static gf_cpu_blas g_blas;
static bool g_have;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The OpenBLAS core type for this CPU's vector units, or NULL to let
 * OpenBLAS decide. */
static const char *core_for_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

static void load(void)
{
#if GF_HAVE_BLAS
    const char *set = getenv("OPENBLAS_CORETYPE"), *chosen = NULL;
    if (set == NULL && (chosen = core_for_cpu()) != NULL)
        setenv("OPENBLAS_CORETYPE", chosen, 0);
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && h == NULL; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        GF_LOG_W("cpu: no BLAS library could be loaded (%s): gemm uses plain loops", dlerror());
        return;
    }
    g_blas.sgemm = (gf_cpu_sgemm_fn)(void (*)(void))dlsym(h, "cblas_sgemm");
    g_blas.set_threads = (void (*)(int))(void (*)(void))dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))(void (*)(void))dlsym(h, "openblas_get_corename");
    g_blas.core = corename != NULL ? corename() : "";
    if (g_blas.sgemm == NULL) {
        GF_LOG_W("cpu: the BLAS library has no cblas_sgemm: gemm uses plain loops");
        return; /* the handle stays open: harmless */
    }
    g_have = true;
    if (chosen != NULL)
        GF_LOG_D("cpu: OpenBLAS core %s (OPENBLAS_CORETYPE set from the CPU's features)",
                 g_blas.core);
#endif
}

const gf_cpu_blas *gf_cpu_blas_get(void)
{
    pthread_once(&g_once, load);
    return g_have ? &g_blas : NULL;
}
