// gpufaas — the cuda kernel library. (Being written: see issue 3.)
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

struct gf_cuda_kctx {
    gf_cuda_alloc_fn alloc_fn;
    gf_cuda_free_fn free_fn;
    void *arg;
};

extern "C" gf_status gf_cuda_kctx_new(gf_cuda_alloc_fn alloc_fn, gf_cuda_free_fn free_fn,
                                      void *arg, gf_cuda_kctx **out, gf_err *err)
{
    gf_cuda_kctx *c = (gf_cuda_kctx *)calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    c->alloc_fn = alloc_fn;
    c->free_fn = free_fn;
    c->arg = arg;
    *out = c;
    return GF_OK;
}

extern "C" void gf_cuda_kctx_free(gf_cuda_kctx *ctx)
{
    free(ctx);
}

extern "C" void gf_cuda_kernels_fill(gf_kernels *k, gf_cuda_kctx *ctx)
{
    memset(k, 0, sizeof *k);
    k->version = GF_KERNELS_VERSION;
    k->size = sizeof *k;
    k->ctx = ctx;
}
