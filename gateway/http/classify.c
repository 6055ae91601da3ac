/* gpufaas — Triton's classification extension (gateway/http; classify.h). */
#include "gateway/http/classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/dtype.h"
#include "core/tensor.h"

/* Element i of t as a double (t numeric, host memory). */
static double elem(const gf_tensor *t, size_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case GF_DT_U8: return ((const uint8_t *)d)[i];
    case GF_DT_U16: return ((const uint16_t *)d)[i];
    case GF_DT_U32: return ((const uint32_t *)d)[i];
    case GF_DT_U64: return (double)((const uint64_t *)d)[i];
    case GF_DT_I8: return ((const int8_t *)d)[i];
    case GF_DT_I16: return ((const int16_t *)d)[i];
    case GF_DT_I32: return ((const int32_t *)d)[i];
    case GF_DT_I64: return (double)((const int64_t *)d)[i];
    case GF_DT_F16: return gf_f16_to_f32(((const uint16_t *)d)[i]);
    case GF_DT_BF16: return gf_bf16_to_f32(((const uint16_t *)d)[i]);
    case GF_DT_F32: return ((const float *)d)[i];
    case GF_DT_F64: return ((const double *)d)[i];
    default: return 0;
    }
}

/* Does score a (index ia) rank before b (index ib)? NaN ranks last. */
static int better(double a, size_t ia, double b, size_t ib)
{
    if (a != a)
        return 0;
    if (b != b)
        return 1;
    return a > b || (a == b && ia < ib);
}

gf_status gf_classify(const char *name, const gf_tensor *t, int64_t k,
                      const char *const *labels, size_t n_labels, gf_buf *out, int32_t *rank,
                      int64_t shape[GF_MAX_RANK], gf_err *err)
{
    if (t->dtype == GF_DT_BOOL || !gf_dtype_valid(t->dtype) /* BYTES too */ || t->rank < 1 ||
        t->shape[t->rank - 1] < 1)
        return gf_err_set(err, GF_ERR_INVALID,
                          "output '%s': classification needs a numeric output with classes in "
                          "its last dimension",
                          name);
    size_t classes = (size_t)t->shape[t->rank - 1];
    size_t rows = classes > 0 ? gf_tensor_numel(t) / classes : 0;
    size_t keep = (uint64_t)k < classes ? (size_t)k : classes;
    size_t *top = malloc(keep * sizeof *top);
    if (top == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory classifying '%s'", name);
    gf_status st = GF_OK;
    for (size_t r = 0; r < rows && st == GF_OK; r++) {
        size_t base = r * classes, n = 0;
        for (size_t c = 0; c < classes; c++) { /* insertion into the best `keep` */
            double v = elem(t, base + c);
            size_t at = n;
            while (at > 0 && better(v, c, elem(t, base + top[at - 1]), top[at - 1]))
                at--;
            if (at >= keep)
                continue;
            size_t last = n < keep ? n : keep - 1;
            memmove(top + at + 1, top + at, (last - at) * sizeof *top);
            top[at] = c;
            if (n < keep)
                n++;
        }
        for (size_t i = 0; i < keep && st == GF_OK; i++) {
            char s[512];
            int len = snprintf(s, sizeof s, "%f:%zu%s%.400s", elem(t, base + top[i]), top[i],
                               top[i] < n_labels ? ":" : "",
                               top[i] < n_labels ? labels[top[i]] : "");
            if (len < 0 || (size_t)len >= sizeof s)
                len = (int)strlen(s);
            st = gf_bytes_append(out, s, (size_t)len, NULL);
        }
    }
    free(top);
    if (st != GF_OK)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory classifying '%s'", name);
    *rank = t->rank;
    memcpy(shape, t->shape, sizeof t->shape);
    shape[t->rank - 1] = (int64_t)keep;
    return GF_OK;
}
