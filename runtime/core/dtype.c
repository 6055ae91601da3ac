/* gpufaas — element types and half-precision conversions. */
#include "core/dtype.h"

#include <string.h>

static const struct {
    size_t size;
    const char *st;     /* safetensors */
    const char *kserve; /* KServe v2 / Triton */
} gf_dtype_table[GF_DT_COUNT_] = {
    [GF_DT_INVALID] = {0, "INVALID", "INVALID"},
    [GF_DT_BOOL] = {1, "BOOL", "BOOL"},
    [GF_DT_U8] = {1, "U8", "UINT8"},
    [GF_DT_U16] = {2, "U16", "UINT16"},
    [GF_DT_U32] = {4, "U32", "UINT32"},
    [GF_DT_U64] = {8, "U64", "UINT64"},
    [GF_DT_I8] = {1, "I8", "INT8"},
    [GF_DT_I16] = {2, "I16", "INT16"},
    [GF_DT_I32] = {4, "I32", "INT32"},
    [GF_DT_I64] = {8, "I64", "INT64"},
    [GF_DT_F16] = {2, "F16", "FP16"},
    [GF_DT_BF16] = {2, "BF16", "BF16"},
    [GF_DT_F32] = {4, "F32", "FP32"},
    [GF_DT_F64] = {8, "F64", "FP64"},
    [GF_DT_BYTES] = {0, NULL, "BYTES"}, /* no element size; never in safetensors */
};

bool gf_dtype_valid(gf_dtype dt)
{
    return dt > GF_DT_INVALID && dt < GF_DT_COUNT_ && dt != GF_DT_BYTES;
}

bool gf_dtype_known(gf_dtype dt)
{
    return gf_dtype_valid(dt) || dt == GF_DT_BYTES;
}

size_t gf_dtype_size(gf_dtype dt)
{
    return gf_dtype_valid(dt) ? gf_dtype_table[dt].size : 0;
}

bool gf_dtype_is_float(gf_dtype dt)
{
    return dt == GF_DT_F16 || dt == GF_DT_BF16 || dt == GF_DT_F32 || dt == GF_DT_F64;
}

const char *gf_dtype_st_name(gf_dtype dt)
{
    return gf_dtype_valid(dt) ? gf_dtype_table[dt].st : "INVALID";
}

const char *gf_dtype_kserve_name(gf_dtype dt)
{
    return gf_dtype_known(dt) ? gf_dtype_table[dt].kserve : "INVALID";
}

static gf_dtype gf_dtype_lookup(const char *name, size_t len, int kserve)
{
    if (name == NULL)
        return GF_DT_INVALID;
    for (int i = 1; i < GF_DT_COUNT_; i++) {
        const char *cand = kserve ? gf_dtype_table[i].kserve : gf_dtype_table[i].st;
        if (cand != NULL && strlen(cand) == len && memcmp(cand, name, len) == 0)
            return (gf_dtype)i;
    }
    return GF_DT_INVALID;
}

gf_dtype gf_dtype_from_st_name(const char *name, size_t len)
{
    return gf_dtype_lookup(name, len, 0);
}

gf_dtype gf_dtype_from_kserve_name(const char *name, size_t len)
{
    return gf_dtype_lookup(name, len, 1);
}

float gf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (man == 0) {
            x = sign; /* +-0 */
        } else {
            /* subnormal: value = man * 2^-24; normalise the mantissa */
            uint32_t shift = 0;
            while ((man & 0x400u) == 0) {
                man <<= 1;
                shift++;
            }
            man &= 0x3ffu;
            x = sign | ((113u - shift) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (man << 13); /* inf or NaN, payload kept */
    } else {
        x = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return gf_bits_f32(x);
}

uint16_t gf_f32_to_f16(float f)
{
    uint32_t x = gf_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (halfway to 2^16) rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero */
        if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 is a tie to even 0) */
            return (uint16_t)sign;
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax - 0x38000000u) >> 13; /* rebias 127 -> 15 */
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
        r++; /* a carry moves into the exponent, which is the right result */
    return (uint16_t)(sign | r);
}

float gf_bf16_to_f32(uint16_t h)
{
    return gf_bits_f32((uint32_t)h << 16);
}

uint16_t gf_f32_to_bf16(float f)
{
    uint32_t x = gf_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, keep sign and top payload */
        return (uint16_t)((x >> 16) | 0x0040u);
    uint32_t bias = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + bias) >> 16);
}

void gf_f16_to_f32_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gf_f16_to_f32(src[i]);
}

void gf_f32_to_f16_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gf_f32_to_f16(src[i]);
}

void gf_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gf_bf16_to_f32(src[i]);
}

void gf_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gf_f32_to_bf16(src[i]);
}
