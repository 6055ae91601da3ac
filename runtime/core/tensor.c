/* gpufaas — tensor descriptors and overflow-checked sizes. */
#include "core/tensor.h"

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/floatfmt.h"

gf_status gf_shape_numel(int32_t rank, const int64_t *shape, uint64_t *numel, gf_err *err)
{
    if (rank < 0 || rank > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_INVALID, "rank %d is outside 0..%d", (int)rank,
                          GF_MAX_RANK);
    uint64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return gf_err_set(err, GF_ERR_INVALID, "dimension %d is negative (%lld)", (int)i,
                              (long long)shape[i]);
        if (!gf_u64_mul(n, (uint64_t)shape[i], &n))
            return gf_err_set(err, GF_ERR_OVERFLOW, "element count overflows at dimension %d",
                              (int)i);
    }
    *numel = n;
    return GF_OK;
}

gf_status gf_tensor_init(gf_tensor *t, gf_dtype dtype, int32_t rank, const int64_t *shape,
                         void *data, gf_mem_kind mem, int32_t device_id, gf_err *err)
{
    if (!gf_dtype_valid(dtype))
        return gf_err_set(err, GF_ERR_INVALID, "invalid dtype %d", (int)dtype);
    uint64_t numel;
    gf_status st = gf_shape_numel(rank, shape, &numel, err);
    if (st != GF_OK)
        return st;
    uint64_t bytes;
    if (!gf_u64_mul(numel, gf_dtype_size(dtype), &bytes) || bytes > SIZE_MAX)
        return gf_err_set(err, GF_ERR_OVERFLOW, "byte size of %llu %s elements overflows",
                          (unsigned long long)numel, gf_dtype_kserve_name(dtype));
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    t->nbytes = (size_t)bytes;
    t->data = data;
    t->mem = mem;
    t->device_id = mem == GF_MEM_DEVICE ? device_id : -1;
    return GF_OK;
}

uint64_t gf_tensor_numel(const gf_tensor *t)
{
    uint64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

bool gf_shape_equal(int32_t rank_a, const int64_t *a, int32_t rank_b, const int64_t *b)
{
    if (rank_a != rank_b)
        return false;
    for (int32_t i = 0; i < rank_a; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Append n bytes of s to buf as snprintf would at buf + *used (what fits,
 * NUL terminated); *used counts them all. */
static void shape_put(char *buf, size_t cap, size_t *used, const char *s, size_t n)
{
    if (*used < cap) {
        size_t k = cap - 1 - *used < n ? cap - 1 - *used : n;
        memcpy(buf + *used, s, k);
        buf[*used + k] = '\0';
    }
    *used += n;
}

/* Without printf: the gateway builds a shape's text for each input of each
 * request (the messages that name it), ~500 instructions a number. */
char *gf_shape_str(char *buf, size_t cap, int32_t rank, const int64_t *shape)
{
    if (cap == 0)
        return buf;
    size_t used = 0;
    buf[0] = '\0';
    shape_put(buf, cap, &used, "[", 1);
    for (int32_t i = 0; i < rank && used < cap; i++) {
        char num[2 + GF_FMT_INT_MAX] = ", ";
        int n = gf_fmt_i64(num + 2, shape[i]);
        if (i == 0)
            shape_put(buf, cap, &used, num + 2, (size_t)n);
        else
            shape_put(buf, cap, &used, num, (size_t)n + 2);
    }
    if (used < cap)
        shape_put(buf, cap, &used, "]", 1);
    if (used >= cap && cap >= 4) /* truncated */
        memcpy(buf + cap - 4, "...", 4);
    return buf;
}
