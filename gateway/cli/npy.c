/* gpufaas — NumPy .npy files (gateway/cli). */
#include "gateway/cli/npy.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* A cursor over the header text [p, end). */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A Python string literal in ' or " without escapes: [*s, *s + *n). */
static bool read_str(cursor *c, const char **s, size_t *n)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\')
            return false;
        c->p++;
    }
    if (c->p >= c->end)
        return false;
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return true;
}

static bool word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* (d0, d1, ...) with an optional trailing comma; "()" is a scalar. */
static gf_status read_shape(cursor *c, gf_npy *out, gf_err *err)
{
    if (!eat(c, '('))
        return gf_err_set(err, GF_ERR_FORMAT, "'shape' is not a tuple");
    out->rank = 0;
    for (;;) {
        skip_space(c);
        if (eat(c, ')'))
            return GF_OK;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return gf_err_set(err, GF_ERR_FORMAT,
                              "'shape' holds something other than "
                              "non-negative integers");
        int64_t d = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (d > (INT64_MAX - (*c->p - '0')) / 10)
                return gf_err_set(err, GF_ERR_FORMAT, "a dimension in 'shape' is too large");
            d = d * 10 + (*c->p - '0');
            c->p++;
        }
        if (c->p < c->end && *c->p == 'L') /* Python 2's long */
            c->p++;
        if (out->rank == GF_MAX_RANK)
            return gf_err_set(err, GF_ERR_UNSUPPORTED,
                              "arrays of more than %d dimensions are "
                              "not supported",
                              GF_MAX_RANK);
        out->shape[out->rank++] = d;
        if (eat(c, ','))
            continue;
        if (eat(c, ')'))
            return GF_OK;
        return gf_err_set(err, GF_ERR_FORMAT, "'shape' is not a tuple of integers");
    }
}

/* '<f4' and friends. */
static gf_status read_descr(const char *s, size_t n, gf_npy *out, gf_err *err)
{
    if (n != 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|' && s[0] != '='))
        return gf_err_set(err, GF_ERR_UNSUPPORTED,
                          "dtype '%.*s' is not supported (use one of "
                          "bool, uint8..uint64, int8..int64, float16, float32, float64)",
                          (int)(n > 32 ? 32 : n), s);
    static const struct {
        char kind, size;
        gf_dtype dt;
    } map[] = {
        {'b', '1', GF_DT_BOOL}, {'u', '1', GF_DT_U8},  {'u', '2', GF_DT_U16}, {'u', '4', GF_DT_U32},
        {'u', '8', GF_DT_U64},  {'i', '1', GF_DT_I8},  {'i', '2', GF_DT_I16}, {'i', '4', GF_DT_I32},
        {'i', '8', GF_DT_I64},  {'f', '2', GF_DT_F16}, {'f', '4', GF_DT_F32}, {'f', '8', GF_DT_F64},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (map[i].kind == s[1] && map[i].size == s[2]) {
            out->dtype = map[i].dt;
            out->swap = s[0] == '>' && gf_dtype_size(map[i].dt) > 1;
            return GF_OK;
        }
    }
    return gf_err_set(err, GF_ERR_UNSUPPORTED,
                      "dtype '%.3s' is not supported (use one of bool, "
                      "uint8..uint64, int8..int64, float16, float32, float64)",
                      s);
}

gf_status gf_npy_parse(const void *buf, size_t len, gf_npy *out, gf_err *err)
{
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
        return gf_err_set(err, GF_ERR_FORMAT, "not a .npy file (no \\x93NUMPY magic)");
    out->major = b[6];
    out->minor = b[7];
    size_t hlen, hstart;
    if (out->major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (out->major == 2 || out->major == 3) {
        if (len < 12)
            return gf_err_set(err, GF_ERR_FORMAT, "truncated header (%zu bytes)", len);
        uint32_t h =
            (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
        hlen = h;
        hstart = 12;
    } else {
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "format version %d.%d is not supported",
                          out->major, out->minor);
    }
    size_t data_off;
    if (!gf_size_add(hstart, hlen, &data_off) || data_off > len)
        return gf_err_set(err, GF_ERR_FORMAT, "the header says %zu bytes but the file has %zu",
                          hlen, len - hstart);
    cursor c = {(const char *)b + hstart, (const char *)b + data_off};
    for (const char *p = c.p; p < c.end; p++)
        if (*p == '\0')
            return gf_err_set(err, GF_ERR_FORMAT, "the header holds a NUL byte");
    if (!eat(&c, '{'))
        return gf_err_set(err, GF_ERR_FORMAT, "the header is not a dict");
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    const char *descr = NULL;
    size_t descr_len = 0;
    while (!eat(&c, '}')) {
        const char *key;
        size_t klen;
        if (!read_str(&c, &key, &klen) || !eat(&c, ':'))
            return gf_err_set(err, GF_ERR_FORMAT, "the header is not a dict of quoted keys");
        gf_status st = GF_OK;
        if (klen == 5 && memcmp(key, "descr", 5) == 0 && !have_descr) {
            have_descr = true;
            skip_space(&c);
            if (c.p < c.end && *c.p == '[')
                return gf_err_set(err, GF_ERR_UNSUPPORTED, "structured dtypes are not supported");
            if (!read_str(&c, &descr, &descr_len))
                return gf_err_set(err, GF_ERR_FORMAT, "'descr' is not a string");
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0 && !have_order) {
            have_order = true;
            if (word(&c, "True"))
                fortran = true;
            else if (!word(&c, "False"))
                return gf_err_set(err, GF_ERR_FORMAT, "'fortran_order' is not True or False");
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0 && !have_shape) {
            have_shape = true;
            st = read_shape(&c, out, err);
        } else {
            return gf_err_set(err, GF_ERR_FORMAT,
                              "unexpected or repeated key '%.*s' in the "
                              "header",
                              (int)(klen > 40 ? 40 : klen), key);
        }
        if (st != GF_OK)
            return st;
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return gf_err_set(err, GF_ERR_FORMAT, "the header dict is malformed");
            break;
        }
    }
    skip_space(&c);
    if (c.p != c.end)
        return gf_err_set(err, GF_ERR_FORMAT, "the header has text after its dict");
    if (!have_descr || !have_order || !have_shape)
        return gf_err_set(err, GF_ERR_FORMAT, "the header lacks '%s'",
                          !have_descr   ? "descr"
                          : !have_order ? "fortran_order"
                                        : "shape");
    gf_status st = read_descr(descr, descr_len, out, err);
    if (st != GF_OK)
        return st;
    uint64_t numel = 1;
    for (int32_t i = 0; i < out->rank; i++)
        if (!gf_u64_mul(numel, (uint64_t)out->shape[i], &numel))
            return gf_err_set(err, GF_ERR_OVERFLOW, "the shape's element count overflows");
    uint64_t nbytes;
    if (!gf_u64_mul(numel, gf_dtype_size(out->dtype), &nbytes) || nbytes > SIZE_MAX)
        return gf_err_set(err, GF_ERR_OVERFLOW, "the array's byte size overflows");
    if (fortran && out->rank > 1) {
        int nonunit = 0;
        for (int32_t i = 0; i < out->rank; i++)
            nonunit += out->shape[i] > 1;
        if (nonunit > 1)
            return gf_err_set(err, GF_ERR_UNSUPPORTED,
                              "Fortran-order arrays are not supported "
                              "(save np.ascontiguousarray(a) instead)");
    }
    size_t have = len - data_off;
    if (have < nbytes)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "truncated: the data has %zu bytes but shape "
                          "needs %" PRIu64,
                          have, nbytes);
    if (have > nbytes)
        return gf_err_set(err, GF_ERR_FORMAT, "%zu bytes after the data the shape describes",
                          have - (size_t)nbytes);
    out->numel = numel;
    out->nbytes = (size_t)nbytes;
    out->data = b + data_off;
    return GF_OK;
}

/* ---- conversion ----------------------------------------------------------------------- */

typedef gf_npy_value value;

static value read_value(gf_dtype dt, const uint8_t *p, bool swap)
{
    /* the element's bits, little-endian (or big-endian when swap) */
    size_t sz = gf_dtype_size(dt);
    uint64_t bits = 0;
    for (size_t k = 0; k < sz; k++)
        bits |= (uint64_t)p[swap ? sz - 1 - k : k] << (8 * k);
    value v = {GF_NPY_FLOAT, 0, 0, 0};
    switch (dt) {
    case GF_DT_BOOL:
        v.kind = GF_NPY_UINT;
        v.u = bits != 0;
        break;
    case GF_DT_U8:
    case GF_DT_U16:
    case GF_DT_U32:
    case GF_DT_U64:
        v.kind = GF_NPY_UINT;
        v.u = bits;
        break;
    case GF_DT_I8:
    case GF_DT_I16:
    case GF_DT_I32:
    case GF_DT_I64: {
        v.kind = GF_NPY_INT;
        if (sz < 8 && ((bits >> (8 * sz - 1)) & 1))
            bits |= ~(uint64_t)0 << (8 * sz); /* sign-extend */
        memcpy(&v.s, &bits, 8);               /* two's complement */
        break;
    }
    case GF_DT_F16:
        v.f = gf_f16_to_f32((uint16_t)bits);
        break;
    case GF_DT_BF16:
        v.f = gf_bf16_to_f32((uint16_t)bits);
        break;
    case GF_DT_F32: {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, 4);
        v.f = f;
        break;
    }
    case GF_DT_F64:
        memcpy(&v.f, &bits, 8);
        break;
    default:
        break;
    }
    return v;
}

/* The value as an exact integer: *neg and *mag, or false when it is not one. */
static bool integral(value v, bool *neg, uint64_t *mag)
{
    switch (v.kind) {
    case GF_NPY_UINT:
        *neg = false;
        *mag = v.u;
        return true;
    case GF_NPY_INT:
        *neg = v.s < 0;
        *mag = v.s < 0 ? (uint64_t)0 - (uint64_t)v.s : (uint64_t)v.s;
        return true;
    case GF_NPY_FLOAT:
        if (!isfinite(v.f) || v.f != floor(v.f) || fabs(v.f) >= 18446744073709551616.0)
            return false;
        *neg = v.f < 0;
        *mag = (uint64_t)fabs(v.f);
        return true;
    }
    return false;
}

static double as_double(value v)
{
    return v.kind == GF_NPY_FLOAT ? v.f : v.kind == GF_NPY_INT ? (double)v.s : (double)v.u;
}

static gf_status write_value(gf_dtype to, value v, uint8_t *dst, uint64_t idx, gf_err *err)
{
    if (gf_dtype_is_float(to)) {
        double d = as_double(v);
        switch (to) {
        case GF_DT_F64:
            memcpy(dst, &d, 8);
            break;
        case GF_DT_F32: {
            float f = (float)d;
            memcpy(dst, &f, 4);
            break;
        }
        case GF_DT_F16: {
            uint16_t h = gf_f32_to_f16((float)d);
            memcpy(dst, &h, 2);
            break;
        }
        default: {
            uint16_t h = gf_f32_to_bf16((float)d);
            memcpy(dst, &h, 2);
            break;
        }
        }
        return GF_OK;
    }
    bool neg;
    uint64_t mag;
    if (!integral(v, &neg, &mag))
        return gf_err_set(err, GF_ERR_INVALID,
                          "element %" PRIu64 " (%g) is not an integer, "
                          "but the input is %s",
                          idx, as_double(v), gf_dtype_kserve_name(to));
    uint64_t umax = 0;
    int64_t imin = 0;
    switch (to) {
    case GF_DT_BOOL:
        umax = 1;
        break;
    case GF_DT_U8:
        umax = UINT8_MAX;
        break;
    case GF_DT_U16:
        umax = UINT16_MAX;
        break;
    case GF_DT_U32:
        umax = UINT32_MAX;
        break;
    case GF_DT_U64:
        umax = UINT64_MAX;
        break;
    case GF_DT_I8:
        umax = INT8_MAX;
        imin = INT8_MIN;
        break;
    case GF_DT_I16:
        umax = INT16_MAX;
        imin = INT16_MIN;
        break;
    case GF_DT_I32:
        umax = INT32_MAX;
        imin = INT32_MIN;
        break;
    case GF_DT_I64:
        umax = INT64_MAX;
        imin = INT64_MIN;
        break;
    default:
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "cannot convert to %s",
                          gf_dtype_kserve_name(to));
    }
    bool ok = neg ? mag <= (uint64_t)0 - (uint64_t)imin && imin < 0 : mag <= umax;
    if (!ok) {
        if (v.kind == GF_NPY_FLOAT)
            return gf_err_set(err, GF_ERR_INVALID,
                              "element %" PRIu64 " (%g) is out of range "
                              "for %s",
                              idx, v.f, gf_dtype_kserve_name(to));
        return gf_err_set(err, GF_ERR_INVALID,
                          "element %" PRIu64 " (%s%" PRIu64 ") is out of "
                          "range for %s",
                          idx, neg ? "-" : "", mag, gf_dtype_kserve_name(to));
    }
    uint64_t bits = neg ? (uint64_t)0 - mag : mag; /* two's complement */
    size_t sz = gf_dtype_size(to);
    for (size_t k = 0; k < sz; k++) /* little-endian, as the wire wants */
        dst[k] = (uint8_t)(bits >> (8 * k));
    return GF_OK;
}

gf_npy_value gf_npy_at(const gf_npy *a, uint64_t i)
{
    assert(i < a->numel);
    return read_value(a->dtype, a->data + i * gf_dtype_size(a->dtype), a->swap);
}

gf_status gf_npy_convert(const gf_npy *a, gf_dtype to, void *out, gf_err *err)
{
    size_t in_sz = gf_dtype_size(a->dtype), out_sz = gf_dtype_size(to);
    if (in_sz == 0 || out_sz == 0)
        return gf_err_set(err, GF_ERR_INVALID, "invalid dtype");
    if (a->dtype == to && !a->swap) {
        if (a->nbytes > 0)
            memcpy(out, a->data, a->nbytes);
        return GF_OK;
    }
    uint8_t *dst = out;
    for (uint64_t i = 0; i < a->numel; i++) {
        value v = read_value(a->dtype, a->data + i * in_sz, a->swap);
        gf_status st = write_value(to, v, dst + i * out_sz, i, err);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}
