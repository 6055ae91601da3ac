/* gpufaas — BYTES tensors: their serialization checked, walked, built. */
#include "core/bytes.h"

#include <inttypes.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

gf_status gf_bytes_check(const void *data, size_t len, uint64_t numel, gf_err *err)
{
    const unsigned char *p = data;
    size_t at = 0;
    for (uint64_t k = 0; k < numel; k++) {
        if (len - at < GF_BYTES_LEN_SIZE)
            return gf_err_set(err, GF_ERR_INVALID,
                              "BYTES data of %zu bytes ends after %" PRIu64 " of its %" PRIu64
                              " elements (each needs a 4-byte length)",
                              len, k, numel);
        uint32_t n = le32(p + at);
        at += GF_BYTES_LEN_SIZE;
        if (n > len - at)
            return gf_err_set(err, GF_ERR_INVALID,
                              "BYTES element %" PRIu64 " says %" PRIu32 " bytes but only %zu "
                              "of the %zu bytes are left",
                              k, n, len - at, len);
        at += n;
    }
    if (at != len)
        return gf_err_set(err, GF_ERR_INVALID,
                          "BYTES data has %zu bytes after the %" PRIu64 " elements its shape "
                          "holds",
                          len - at, numel);
    return GF_OK;
}

bool gf_bytes_next(const void *data, size_t len, size_t *pos, const char **elem, uint32_t *n)
{
    const unsigned char *p = data;
    if (*pos >= len || len - *pos < GF_BYTES_LEN_SIZE)
        return false;
    uint32_t m = le32(p + *pos);
    if (m > len - *pos - GF_BYTES_LEN_SIZE)
        return false;
    *elem = (const char *)p + *pos + GF_BYTES_LEN_SIZE;
    *n = m;
    *pos += GF_BYTES_LEN_SIZE + (size_t)m;
    return true;
}

gf_status gf_bytes_span(const void *data, size_t len, uint64_t first, uint64_t count, size_t *off,
                        size_t *n, gf_err *err)
{
    size_t pos = 0;
    const char *e;
    uint32_t m;
    for (uint64_t k = 0; k < first; k++)
        if (!gf_bytes_next(data, len, &pos, &e, &m))
            return gf_err_set(err, GF_ERR_INVALID, "BYTES data has fewer than %" PRIu64
                              " elements", first);
    size_t start = pos;
    for (uint64_t k = 0; k < count; k++)
        if (!gf_bytes_next(data, len, &pos, &e, &m))
            return gf_err_set(err, GF_ERR_INVALID, "BYTES data has fewer than %" PRIu64
                              " elements", first + count);
    *off = start;
    *n = pos - start;
    return GF_OK;
}

gf_status gf_bytes_append(gf_buf *b, const void *p, size_t n, gf_err *err)
{
    if ((uint64_t)n > GF_BYTES_MAX_ELEMENT)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "a BYTES element of %zu bytes is over the "
                          "limit of %" PRIu64, n, GF_BYTES_MAX_ELEMENT);
    unsigned char pre[GF_BYTES_LEN_SIZE] = {(unsigned char)n, (unsigned char)(n >> 8),
                                            (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
    if (gf_buf_reserve(b, GF_BYTES_LEN_SIZE + n) != GF_OK)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a BYTES element of %zu bytes", n);
    gf_buf_append(b, pre, sizeof pre);
    if (n > 0)
        gf_buf_append(b, p, n);
    return GF_OK;
}

gf_status gf_tensor_check_data(const gf_tensor *t, gf_err *err)
{
    if (!gf_dtype_known(t->dtype))
        return gf_err_set(err, GF_ERR_INVALID, "invalid dtype %d", (int)t->dtype);
    uint64_t numel;
    gf_status st = gf_shape_numel(t->rank, t->shape, &numel, err);
    if (st != GF_OK)
        return st;
    if (t->dtype == GF_DT_BYTES)
        return t->nbytes > 0 && t->data == NULL
                   ? gf_err_set(err, GF_ERR_INVALID, "BYTES data missing")
                   : gf_bytes_check(t->data, t->nbytes, numel, err);
    uint64_t want;
    if (!gf_u64_mul(numel, gf_dtype_size(t->dtype), &want))
        return gf_err_set(err, GF_ERR_OVERFLOW, "byte size of %" PRIu64 " %s elements overflows",
                          numel, gf_dtype_kserve_name(t->dtype));
    if (want != (uint64_t)t->nbytes)
        return gf_err_set(err, GF_ERR_INVALID, "%zu bytes but its shape and dtype need %" PRIu64,
                          t->nbytes, want);
    return GF_OK;
}

gf_status gf_tensor_init_bytes(gf_tensor *t, int32_t rank, const int64_t *shape, void *data,
                               size_t nbytes, gf_err *err)
{
    gf_status st = gf_tensor_init(t, GF_DT_U8, rank, shape, NULL, GF_MEM_HOST, -1, err);
    if (st != GF_OK)
        return st;
    uint64_t numel = t->nbytes; /* one byte per element as U8 */
    t->dtype = GF_DT_BYTES;
    t->nbytes = nbytes;
    t->data = data;
    if (nbytes > 0 && data == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "BYTES data missing");
    return gf_bytes_check(data, nbytes, numel, err);
}
