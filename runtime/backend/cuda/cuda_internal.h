/* gpufaas — what the cuda backend's files share (runtime/backend/cuda).
 * Included by C (gcc) and CUDA (nvcc) translation units of the module only. */
#ifndef GF_BACKEND_CUDA_INTERNAL_H
#define GF_BACKEND_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A cuda stream of the backend. Kernels that detect bad input while running
 * (an out-of-range index, an integer division by zero) write it to
 * dev_error without reading out of range: dev_error[0] = gf_status code |
 * gf_dev_error_kind << 32 (set with atomicCAS from 0, so the first error
 * wins), dev_error[1] = the offending value, dev_error[2] = the limit. The
 * backend's sync reads, reports and clears it: when a kernel that may write
 * it was queued since the last sync (error_armed), the sync queues a copy of
 * the words into host_error (pinned) ahead of its cudaStreamSynchronize, so
 * reading them costs no synchronous copy. */
struct gf_stream {
    cudaStream_t stream;
    int kind;                 /* gf_stream_kind */
    long long *dev_error;     /* 3 device words, zeroed at creation */
    long long *host_error;    /* 3 pinned words: dev_error as of the last armed sync */
    int error_armed;          /* a kernel that may write dev_error was queued */
};

/* What a deferred error describes (bits 32.. of dev_error[0]). */
enum gf_dev_error_kind {
    GF_DEVERR_INDEX = 0,     /* index dev_error[1] outside [0, dev_error[2]) */
    GF_DEVERR_INDEX_NEG = 1, /* index outside [-dev_error[2], dev_error[2]) */
    GF_DEVERR_DIV_ZERO = 2,  /* an integer division or modulo by zero */
};

/* The error words for a kernel about to be queued on s that may record a
 * deferred error; arms the next sync to read them. The only way kernels
 * should get dev_error, so that none is missed. */
static inline long long *gf_cuda_stream_error_words(struct gf_stream *s)
{
    s->error_armed = 1;
    return s->dev_error;
}

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_CUDA_INTERNAL_H */
