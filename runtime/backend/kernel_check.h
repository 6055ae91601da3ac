/* gpufaas — the checks kernel_args.c and kernel_args_v2.c share
 * (runtime/backend). Private to those two files: each gf_kargs_* returns
 * early through these macros with the error recorded by gf_kerr. */
#ifndef GF_BACKEND_KERNEL_CHECK_H
#define GF_BACKEND_KERNEL_CHECK_H

#include "backend/kernel_args.h"

#include "core/error.h"

/* Each check returns from the calling gf_kargs_* with the error. */
#define NONNEG(fn, v)                                                                             \
    do {                                                                                          \
        if ((v) < 0)                                                                              \
            return gf_kerr(GF_ERR_INVALID, fn, "%s = %lld is negative", #v, (long long)(v));      \
    } while (0)
#define NONNULL(fn, p)                                                                            \
    do {                                                                                          \
        if ((p) == NULL)                                                                          \
            return gf_kerr(GF_ERR_INVALID, fn, "%s is NULL", #p);                                 \
    } while (0)
#define TRY(call)                                                                                 \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        if (rc_ != 0)                                                                             \
            return rc_;                                                                           \
    } while (0)

/* Weights are F32, F16 or BF16. */
int gf_kcheck_wdtype(const char *fn, const char *what, gf_dtype dt);

/* Indices and masks are I32 or I64. */
int gf_kcheck_idtype(const char *fn, const char *what, gf_dtype dt);

/* act is a gf_act. */
int gf_kcheck_act(const char *fn, gf_act act);

/* a * b * c as the element count into *total, or GF_ERR_OVERFLOW. */
int gf_kcheck_count3(const char *fn, int64_t a, int64_t b, int64_t c, int64_t *total);

/* The sliding-window geometry conv2d and pooling share: sizes >= 0, window,
 * stride and dilation >= 1, everything below 2^30, the window fitting the
 * padded input; *oh, *ow get gf_window_out. pads are top, left, bottom,
 * right. */
int gf_kcheck_window(const char *fn, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, const int64_t pads[4], int64_t dh,
                     int64_t dw, int ceil_mode, int64_t *oh, int64_t *ow);

#endif /* GF_BACKEND_KERNEL_CHECK_H */
