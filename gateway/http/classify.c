/* gpufaas — Triton's classification extension (gateway/http; classify.h). */
#include "gateway/http/classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (t->dtype == GF_DT_BOOL || !gf_dtype_valid(t->dtype) || t->rank < 1 ||
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
            unsigned char pre[4] = {(unsigned char)len, (unsigned char)(len >> 8),
                                    (unsigned char)(len >> 16), (unsigned char)(len >> 24)};
            st = gf_buf_append(out, pre, 4);
            if (st == GF_OK)
                st = gf_buf_append(out, s, (size_t)len);
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

gf_status gf_bytes_put_json(gf_buf *b, const char *bytes, size_t len)
{
    gf_status st = gf_buf_append(b, "[", 1);
    size_t at = 0;
    for (bool first = true; at < len && st == GF_OK; first = false) {
        if (len - at < 4)
            return GF_ERR_INTERNAL;
        const unsigned char *p = (const unsigned char *)bytes + at;
        size_t n = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
        if (n > len - at - 4)
            return GF_ERR_INTERNAL;
        if (!first)
            st = gf_buf_append(b, ",", 1);
        if (st == GF_OK)
            st = gf_buf_append_json_str(b, bytes + at + 4, n);
        at += 4 + n;
    }
    return st == GF_OK ? gf_buf_append(b, "]", 1) : st;
}
