/* gpufaas — NumPy .npy files for `gpufaas invoke --npy` (gateway/cli).
 *
 * The format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor
 * version byte, the header length (2 bytes little-endian in version 1, 4
 * bytes in versions 2 and 3), then the header: a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and ended by '\n'; then the raw elements.
 *
 * The parser trusts nothing: every length is checked against the buffer,
 * sizes are computed with overflow checks, the header must hold exactly the
 * three keys, and the data must have exactly the bytes the shape needs.
 * Supported: descr '<', '>', '|' or '=' with b1, u1..u8, i1..i8, f2, f4, f8;
 * C order only (fortran_order True is refused with a message that says how
 * to fix it); at most GF_MAX_RANK dimensions.
 */
#ifndef GF_GATEWAY_CLI_NPY_H
#define GF_GATEWAY_CLI_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/error.h"

typedef struct gf_npy {
    gf_dtype dtype; /* element type */
    bool swap;      /* stored big-endian: reverse each element's bytes */
    int32_t rank;   /* 0 (a scalar) .. GF_MAX_RANK */
    int64_t shape[GF_MAX_RANK];
    uint64_t numel;
    const uint8_t *data; /* points into the parsed buffer (borrowed) */
    size_t nbytes;       /* numel * element size */
    int major, minor;    /* format version */
} gf_npy;

/* Parse len bytes of an .npy file held in buf (borrowed; out->data points
 * into it). GF_ERR_FORMAT with the reason for a malformed file,
 * GF_ERR_UNSUPPORTED for a valid file we cannot use (structured dtype,
 * Fortran order, rank > 8). */
gf_status gf_npy_parse(const void *buf, size_t len, gf_npy *out, gf_err *err);

/* One element as a number: a float (f), a signed (s) or an unsigned (u)
 * integer; BOOL is an unsigned 0 or 1. */
typedef struct gf_npy_value {
    enum { GF_NPY_FLOAT, GF_NPY_INT, GF_NPY_UINT } kind;
    double f;
    int64_t s;
    uint64_t u;
} gf_npy_value;

/* Element i (flat, C order) of a; i < a->numel. Also serves raw tensors:
 * fill dtype, numel and data of a gf_npy by hand. */
gf_npy_value gf_npy_at(const gf_npy *a, uint64_t i);

/* Convert a's elements to dtype `to` into out (a->numel * size(to) bytes,
 * caller-owned). Floats to integers only when every value is integral and in
 * range; BOOL only from 0 and 1; the error names the first element (flat
 * index) that does not convert. Float to F16/BF16 rounds to nearest even. */
gf_status gf_npy_convert(const gf_npy *a, gf_dtype to, void *out, gf_err *err);

#endif /* GF_GATEWAY_CLI_NPY_H */
