/* gpufaas — argument checks of the version 2 kernels (runtime/backend).
 *
 * See kernel_args.h. Besides checking, the strided elementwise kernels
 * (binary, where, strided_copy) get their iteration space here in one
 * canonical form (gf_kiter), so both backends see the same collapsed
 * shapes and need one fast path per pattern, not per call site.
 */
#include "backend/kernel_args.h"

#include <limits.h>
#include <string.h>

#include "backend/kernel_check.h"
#include "core/dtype.h"

static int check_elem(const char *fn, int64_t es)
{
    if (gf_kelem_ok(es))
        return 0;
    return gf_kerr(GF_ERR_INVALID, fn, "elem_size = %lld is not 1, 2, 4 or 8", (long long)es);
}

/* |v| without overflow for the values checked here (> INT64_MIN). */
static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Check rank, shape and each operand's strides (strides[i] NULL: dense
 * row-major), and build the collapsed iteration space into *it. Operand 0
 * is the output. *noop when there are no elements. The reach of every
 * operand (sum of (shape - 1) |stride|) must fit an int64, so the backends
 * can index with int64 arithmetic. */
static int build_iter(const char *fn, int rank, const int64_t *shape, int nops,
                      const int64_t *const strides[], gf_kiter *it, bool *noop)
{
    if (rank < 0 || rank > GF_MAX_RANK)
        return gf_kerr(GF_ERR_INVALID, fn, "rank %d is outside [0, %d]", rank, GF_MAX_RANK);
    if (rank > 0)
        NONNULL(fn, shape);
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return gf_kerr(GF_ERR_INVALID, fn, "dimension %d is negative (%lld)", d,
                           (long long)shape[d]);
        if (!gf_kmul64(n, shape[d], &n))
            return gf_kerr(GF_ERR_OVERFLOW, fn, "the element count overflows");
    }
    int64_t t;
    if (!gf_kmul64(n, 8, &t))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "the byte count overflows");
    memset(it, 0, sizeof *it);
    it->nops = nops;
    it->n = n;
    *noop = n == 0;
    /* Full strides per operand, outermost first. */
    int64_t st[GF_KITER_MAX_OPS][GF_MAX_RANK];
    for (int o = 0; o < nops; o++) {
        if (strides[o] == NULL) {
            int64_t acc = 1;
            for (int d = rank - 1; d >= 0; d--) {
                st[o][d] = acc;
                acc *= shape[d] > 0 ? shape[d] : 1; /* <= n, no overflow */
            }
            continue;
        }
        int64_t reach = 0;
        for (int d = 0; d < rank; d++) {
            st[o][d] = strides[o][d];
            if (strides[o][d] == INT64_MIN || shape[d] == 0)
                continue;
            if (!gf_kmul64(shape[d] - 1, abs64(strides[o][d]), &t) ||
                __builtin_add_overflow(reach, t, &reach))
                return gf_kerr(GF_ERR_OVERFLOW, fn, "operand %d's strides reach beyond 2^63", o);
        }
        for (int d = 0; d < rank; d++)
            if (strides[o][d] == INT64_MIN && shape[d] > 1)
                return gf_kerr(GF_ERR_OVERFLOW, fn, "operand %d has stride INT64_MIN", o);
    }
    if (*noop)
        return 0;
    /* Drop extent-1 dimensions, then merge each dimension into the one
     * inside it when every operand steps over the inner one exactly. */
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (shape[d] == 1)
            continue;
        it->shape[r] = shape[d];
        for (int o = 0; o < nops; o++)
            it->st[o][r] = st[o][d];
        r++;
    }
    if (r == 0) {
        it->rank = 1;
        it->shape[0] = 1;
        return 0;
    }
    /* it->shape[0..r) outermost first; merge d into d + 1 from the inside. */
    int64_t shp[GF_MAX_RANK], sts[GF_KITER_MAX_OPS][GF_MAX_RANK];
    int k = 0; /* dims kept, innermost first */
    for (int d = r - 1; d >= 0; d--) {
        if (k > 0) {
            bool merge = true;
            for (int o = 0; o < nops && merge; o++)
                merge = it->st[o][d] == sts[o][k - 1] * shp[k - 1];
            if (merge) {
                shp[k - 1] *= it->shape[d];
                continue;
            }
        }
        shp[k] = it->shape[d];
        for (int o = 0; o < nops; o++)
            sts[o][k] = it->st[o][d];
        k++;
    }
    it->rank = k;
    for (int d = 0; d < k; d++) {
        it->shape[d] = shp[k - 1 - d];
        for (int o = 0; o < nops; o++)
            it->st[o][d] = sts[o][k - 1 - d];
    }
    for (int d = k; d < GF_MAX_RANK; d++) {
        it->shape[d] = 0;
        for (int o = 0; o < nops; o++)
            it->st[o][d] = 0;
    }
    return 0;
}

int gf_kargs_unary(const float *y, const float *x, int64_t n, gf_unary_op op, bool *noop)
{
    static const char fn[] = "unary";
    if ((int)op < 0 || (int)op >= (int)GF_UNARY_COUNT_)
        return gf_kerr(GF_ERR_INVALID, fn, "op %d is not a gf_unary_op", (int)op);
    NONNEG(fn, n);
    int64_t t;
    TRY(gf_kcheck_count3(fn, n, 4, 1, &t));
    *noop = n == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_binary(gf_binary_op op, int rank, const int64_t *shape, const void *y,
                    const void *a, const int64_t *as, const void *b, const int64_t *bs,
                    gf_dtype dt, gf_dtype *out_dtype, gf_kiter *it, bool *noop)
{
    static const char fn[] = "binary";
    if ((int)op < 0 || (int)op >= (int)GF_BINARY_COUNT_)
        return gf_kerr(GF_ERR_INVALID, fn, "op %d is not a gf_binary_op", (int)op);
    bool numeric = dt == GF_DT_F32 || dt == GF_DT_I32 || dt == GF_DT_I64;
    bool ok;
    if (op <= GF_BINARY_PRELU) {
        ok = numeric;
        *out_dtype = dt;
    } else if (op <= GF_BINARY_GREATER_EQUAL) {
        ok = numeric || (op == GF_BINARY_EQUAL && dt == GF_DT_BOOL);
        *out_dtype = GF_DT_BOOL;
    } else {
        ok = dt == GF_DT_BOOL;
        *out_dtype = GF_DT_BOOL;
    }
    if (!ok)
        return gf_kerr(GF_ERR_UNSUPPORTED, fn, "dtype %s (%d) is not supported for op %d",
                       gf_dtype_st_name(dt), (int)dt, (int)op);
    if (rank > 0) {
        NONNULL(fn, as);
        NONNULL(fn, bs);
    }
    const int64_t *st[3] = {NULL, as, bs};
    TRY(build_iter(fn, rank, shape, 3, st, it, noop));
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, a);
        NONNULL(fn, b);
    }
    return 0;
}

int gf_kargs_where(int rank, const int64_t *shape, const void *y, const void *c,
                   const int64_t *cs, const void *a, const int64_t *as, const void *b,
                   const int64_t *bs, int64_t elem_size, gf_kiter *it, bool *noop)
{
    static const char fn[] = "where";
    TRY(check_elem(fn, elem_size));
    if (rank > 0) {
        NONNULL(fn, cs);
        NONNULL(fn, as);
        NONNULL(fn, bs);
    }
    const int64_t *st[4] = {NULL, cs, as, bs};
    TRY(build_iter(fn, rank, shape, 4, st, it, noop));
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, c);
        NONNULL(fn, a);
        NONNULL(fn, b);
    }
    return 0;
}

int gf_kargs_strided_copy(int rank, const int64_t *shape, const void *y, const int64_t *ys,
                          const void *x, const int64_t *xs, int64_t x_offset, int64_t elem_size,
                          gf_kiter *it, bool *noop)
{
    static const char fn[] = "strided_copy";
    TRY(check_elem(fn, elem_size));
    if (rank > 0)
        NONNULL(fn, xs);
    const int64_t *st[2] = {ys, xs};
    TRY(build_iter(fn, rank, shape, 2, st, it, noop));
    if (*noop)
        return 0;
    /* The lowest and highest elements x reaches, from x_offset; y starts at
     * its first element. (build_iter bounded each stride product.) */
    int64_t xlo = x_offset, xhi = x_offset, t;
    for (int d = 0; d < rank; d++) {
        if (ys != NULL && shape[d] > 1 && ys[d] <= 0)
            return gf_kerr(GF_ERR_INVALID, fn, "y stride %lld on dimension %d must be positive",
                           (long long)ys[d], d);
        int64_t step = (shape[d] - 1) * xs[d];
        if (__builtin_add_overflow(step < 0 ? xlo : xhi, step, step < 0 ? &xlo : &xhi))
            return gf_kerr(GF_ERR_OVERFLOW, fn, "x offsets overflow");
    }
    if (xlo < 0)
        return gf_kerr(GF_ERR_INVALID, fn,
                       "x_offset %lld with these strides reaches element %lld before x",
                       (long long)x_offset, (long long)-xlo);
    if (!gf_kmul64(xhi, elem_size, &t) || !gf_kmul64(it->n, elem_size, &t))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "x or y extents overflow");
    NONNULL(fn, y);
    NONNULL(fn, x);
    return 0;
}

int gf_kargs_gather(const void *y, const void *x, int64_t outer, int64_t axis_dim,
                    int64_t inner, const void *ids, gf_dtype id_dtype, int64_t n_ids,
                    int64_t elem_size, bool *noop)
{
    static const char fn[] = "gather";
    TRY(check_elem(fn, elem_size));
    NONNEG(fn, outer);
    NONNEG(fn, axis_dim);
    NONNEG(fn, inner);
    NONNEG(fn, n_ids);
    TRY(gf_kcheck_idtype(fn, "ids", id_dtype));
    int64_t tx, ty;
    TRY(gf_kcheck_count3(fn, outer, axis_dim, inner, &tx));
    TRY(gf_kcheck_count3(fn, outer, n_ids, inner, &ty));
    TRY(gf_kcheck_count3(fn, tx > ty ? tx : ty, elem_size, 1, &tx));
    *noop = outer == 0 || n_ids == 0 || inner == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, ids);
        if (axis_dim > 0)
            NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_reduce(gf_reduce_op op, const void *y, const float *x, int64_t outer,
                    int64_t rdim, int64_t inner, bool *noop)
{
    static const char fn[] = "reduce";
    if ((int)op < 0 || (int)op >= (int)GF_REDUCE_COUNT_)
        return gf_kerr(GF_ERR_INVALID, fn, "op %d is not a gf_reduce_op", (int)op);
    NONNEG(fn, outer);
    NONNEG(fn, rdim);
    NONNEG(fn, inner);
    int64_t t;
    TRY(gf_kcheck_count3(fn, outer, rdim, inner, &t));
    TRY(gf_kcheck_count3(fn, t, 8, 1, &t));
    TRY(gf_kcheck_count3(fn, outer, inner, 8, &t));
    *noop = outer == 0 || inner == 0;
    if (*noop)
        return 0;
    if (rdim == 0 && op >= GF_REDUCE_ARGMAX)
        return gf_kerr(GF_ERR_INVALID, fn, "arg%s over an empty axis has no answer",
                       op == GF_REDUCE_ARGMAX || op == GF_REDUCE_ARGMAX_LAST ? "max" : "min");
    NONNULL(fn, y);
    if (rdim > 0)
        NONNULL(fn, x);
    return 0;
}

int gf_kargs_softmax_axis(const float *y, const float *x, int64_t outer, int64_t dim,
                          int64_t inner, bool *noop)
{
    static const char fn[] = "softmax_axis";
    NONNEG(fn, outer);
    NONNEG(fn, dim);
    NONNEG(fn, inner);
    int64_t t;
    TRY(gf_kcheck_count3(fn, outer, dim, inner, &t));
    TRY(gf_kcheck_count3(fn, t, 4, 1, &t));
    *noop = outer == 0 || dim == 0 || inner == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_cast_ex(const void *dst, gf_dtype dst_dtype, const void *src, gf_dtype src_dtype,
                     int64_t n, bool *noop)
{
    static const char fn[] = "cast_ex";
    if (!gf_dtype_valid(dst_dtype) || !gf_dtype_valid(src_dtype))
        return gf_kerr(GF_ERR_UNSUPPORTED, fn, "dtypes %d -> %d: not element types",
                       (int)src_dtype, (int)dst_dtype);
    NONNEG(fn, n);
    int64_t t;
    TRY(gf_kcheck_count3(fn, n, 8, 1, &t));
    *noop = n == 0;
    if (!*noop) {
        NONNULL(fn, dst);
        NONNULL(fn, src);
    }
    return 0;
}

int gf_kargs_fill(const void *y, int64_t n, const void *value, int64_t elem_size, bool *noop)
{
    static const char fn[] = "fill";
    TRY(check_elem(fn, elem_size));
    NONNEG(fn, n);
    int64_t t;
    TRY(gf_kcheck_count3(fn, n, elem_size, 1, &t));
    *noop = n == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, value);
    }
    return 0;
}
