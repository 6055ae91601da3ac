/* gpufaas — element types and half-precision conversions (runtime/core). */
#ifndef GF_CORE_DTYPE_H
#define GF_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <gpufaas/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of one element in bytes; 0 for an invalid dtype and for BYTES. */
size_t gf_dtype_size(gf_dtype dt);

/* True for the fixed-size element types (excludes GF_DT_INVALID and
 * GF_DT_BYTES, whose elements have no size: <gpufaas/types.h>), the types
 * of weights and of every numeric path. */
bool gf_dtype_valid(gf_dtype dt);

/* True for every type a request, a result or a manifest's input or output
 * may have: gf_dtype_valid or GF_DT_BYTES. */
bool gf_dtype_known(gf_dtype dt);

/* True for F16, BF16, F32, F64. */
bool gf_dtype_is_float(gf_dtype dt);

/* Names: safetensors spelling ("F32", "BF16", "BOOL") and KServe / Triton
 * spelling ("FP32", "BF16", "BOOL", "BYTES"). Return static strings;
 * "INVALID" for an invalid dtype (and, for the safetensors name, BYTES). */
const char *gf_dtype_st_name(gf_dtype dt);
const char *gf_dtype_kserve_name(gf_dtype dt);

/* Reverse lookups; exact, case-sensitive match of len bytes. GF_DT_INVALID
 * when unknown. */
gf_dtype gf_dtype_from_st_name(const char *name, size_t len);
gf_dtype gf_dtype_from_kserve_name(const char *name, size_t len);

/* The bits of an F32, and the F32 of given bits: the same 4 bytes, no
 * conversion (memcpy, so no aliasing rule is broken). */
static inline uint32_t gf_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float gf_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16 and bfloat16 <-> binary32. To-narrow conversions round to nearest,
 * ties to even; overflow gives infinity; NaN stays NaN (quiet, sign kept);
 * subnormals are produced and consumed exactly. */
float gf_f16_to_f32(uint16_t h);
uint16_t gf_f32_to_f16(float f);
float gf_bf16_to_f32(uint16_t h);
uint16_t gf_f32_to_bf16(float f);

/* Array forms. dst and src must not overlap. */
void gf_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void gf_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void gf_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void gf_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_DTYPE_H */
