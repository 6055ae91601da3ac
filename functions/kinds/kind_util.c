/* gpufaas — helpers the built-in kinds share: per-channel vectors and
 * batchnorm (see THE FOLDING RULE in kind_util.h). Public ABI only. */
#include "kind_util.h"

#include <math.h>
#include <stdlib.h>

double gf_ku_get(const void *p, gf_dtype dt, size_t i)
{
    uint16_t h;
    uint32_t x;
    float f;
    switch (dt) {
    case GF_DT_F16: {
        memcpy(&h, (const char *)p + 2 * i, 2);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v = e == 0    ? ldexp(m, -24)
                   : e == 31 ? (m ? NAN : INFINITY)
                             : ldexp(m | 0x400, e - 25);
        return (h & 0x8000) ? -v : v;
    }
    case GF_DT_BF16:
        memcpy(&h, (const char *)p + 2 * i, 2);
        x = (uint32_t)h << 16;
        memcpy(&f, &x, 4);
        return f;
    default:
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
}

int gf_ku_vecs_declare(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                       const char *const *names, const bool *needed, int n, int64_t c,
                       gf_ku_vecs *v)
{
    memset(v, 0, sizeof *v);
    v->n = n;
    v->c = c;
    gf_tensor t[4];
    int rc, first = -1;
    bool mixed = false;
    for (int j = 0; j < n; j++) {
        v->present[j] =
            names[j] != NULL && (needed[j] || api->weight_info(ctx, names[j], &t[j]) == 0);
        if (!v->present[j])
            continue;
        if ((rc = gf_ku_expect(api, ctx, kind, names[j], GF_KU_FLOAT_MASK, 1, &c, &t[j])) != 0)
            return rc;
        if (first < 0)
            first = j;
        mixed = mixed || t[j].dtype != t[first].dtype;
    }
    if (first < 0)
        return 0;
    if (!mixed) {
        v->dtype = t[first].dtype;
        for (int j = 0; j < n; j++)
            if (v->present[j] && (rc = api->require(ctx, names[j], 0, 1, &c, &v->idx[j])) != 0)
                return rc;
        return 0;
    }
    /* the kernel reads one dtype: an exact F32 copy of all of them */
    v->packed = true;
    v->dtype = GF_DT_F32;
    char name[256];
    snprintf(name, sizeof name, "%s.f32", names[first]);
    const int64_t shape[2] = {n, c};
    void *data = NULL;
    if ((rc = api->derive(ctx, name, GF_DT_F32, 2, shape, &data, &v->idx[0])) != 0)
        return rc;
    for (int j = 1; j < n; j++)
        v->idx[j] = v->idx[0];
    if (api->validating(ctx) == 1 || data == NULL)
        return 0;
    float *out = data;
    for (int j = 0; j < n; j++) {
        gf_tensor d;
        if (!v->present[j])
            continue;
        if ((rc = api->weight_data(ctx, names[j], &d)) != 0)
            return rc;
        for (int64_t i = 0; i < c; i++)
            out[j * c + i] = (float)gf_ku_get(d.data, d.dtype, (size_t)i);
    }
    return 0;
}

int gf_ku_vecs_get(const gf_fn_api *api, gf_fn_ctx *ctx, const gf_ku_vecs *v, const void **ptr)
{
    gf_tensor t;
    int rc;
    for (int j = 0; j < 4; j++)
        ptr[j] = NULL;
    if (v->packed) {
        if ((rc = api->param(ctx, v->idx[0], &t)) != 0)
            return rc;
        for (int j = 0; j < v->n; j++)
            if (v->present[j])
                ptr[j] = (const float *)t.data + j * v->c;
        return 0;
    }
    for (int j = 0; j < v->n; j++) {
        if (!v->present[j])
            continue;
        if ((rc = api->param(ctx, v->idx[j], &t)) != 0)
            return rc;
        ptr[j] = t.data;
    }
    return 0;
}

static const char *const gf_bn_parts[4] = {"running_mean", "running_var", "weight", "bias"};

int gf_ku_bn_declare(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind, const char *bn,
                     bool affine, int64_t c, gf_ku_vecs *v)
{
    char names[4][256];
    const char *np[4];
    const bool needed[4] = {true, true, affine, affine};
    for (int j = 0; j < 4; j++) {
        snprintf(names[j], sizeof names[j], "%s.%s", bn, gf_bn_parts[j]);
        np[j] = j < 2 || affine ? names[j] : NULL;
    }
    gf_ku_bn_counter(api, ctx, bn);
    return gf_ku_vecs_declare(api, ctx, kind, np, needed, 4, c, v);
}

void gf_ku_bn_counter(const gf_fn_api *api, gf_fn_ctx *ctx, const char *bn)
{
    char name[256];
    snprintf(name, sizeof name, "%s.num_batches_tracked", bn);
    api->weight_use(ctx, name);
}

int gf_ku_bn_fold(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind, const char *wname,
                  const char *bname, const char *bn, bool affine, int32_t wrank,
                  const int64_t *wshape, double eps, size_t *w_idx, size_t *b_idx)
{
    int64_t oc = wshape[0];
    char name[256], bnames[4][256];
    gf_tensor wi, bi, tv[4], wd, bd = {0}, d[4];
    int rc;
    if ((rc = gf_ku_expect(api, ctx, kind, wname, 1u << GF_DT_F32, wrank, wshape, &wi)) != 0)
        return rc;
    if (bname != NULL && (rc = gf_ku_expect(api, ctx, kind, bname, 1u << GF_DT_F32, 1, &oc, &bi)))
        return rc;
    for (int j = 0; j < 4; j++) {
        snprintf(bnames[j], sizeof bnames[j], "%s.%s", bn, gf_bn_parts[j]);
        if ((j < 2 || affine) &&
            (rc = gf_ku_expect(api, ctx, kind, bnames[j], GF_KU_FLOAT_MASK, 1, &oc, &tv[j])) != 0)
            return rc;
    }
    gf_ku_bn_counter(api, ctx, bn);
    void *fw = NULL, *fb = NULL;
    snprintf(name, sizeof name, "%s.folded", wname);
    if ((rc = api->derive(ctx, name, GF_DT_F32, wrank, wshape, &fw, w_idx)) != 0)
        return rc;
    size_t wl = strlen(wname);
    int stem = wl > 7 && strcmp(wname + wl - 7, ".weight") == 0 ? (int)(wl - 7) : (int)wl;
    if (bname != NULL)
        snprintf(name, sizeof name, "%s.folded", bname);
    else
        snprintf(name, sizeof name, "%.*s.bias.folded", stem, wname);
    if ((rc = api->derive(ctx, name, GF_DT_F32, 1, &oc, &fb, b_idx)) != 0)
        return rc;
    if (api->validating(ctx) == 1 || fw == NULL || fb == NULL)
        return 0;
    if ((rc = api->weight_data(ctx, wname, &wd)) != 0 ||
        (bname != NULL && (rc = api->weight_data(ctx, bname, &bd)) != 0))
        return rc;
    for (int j = 0; j < 4; j++)
        if ((j < 2 || affine) && (rc = api->weight_data(ctx, bnames[j], &d[j])) != 0)
            return rc;
    size_t per = wi.nbytes / 4 / (size_t)(oc > 0 ? oc : 1);
    float *w = fw, *b = fb;
    for (int64_t o = 0; o < oc; o++) {
        size_t oi = (size_t)o;
        double var = gf_ku_get(d[1].data, d[1].dtype, oi);
        if (!(var + eps > 0.0))
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "tensor '%s' has a negative or NaN entry at %zu", bnames[1], oi);
        double g = affine ? gf_ku_get(d[2].data, d[2].dtype, oi) : 1.0;
        double beta = affine ? gf_ku_get(d[3].data, d[3].dtype, oi) : 0.0;
        double scale = g / sqrt(var + eps), mean = gf_ku_get(d[0].data, d[0].dtype, oi);
        double bias = bname != NULL ? gf_ku_get(bd.data, GF_DT_F32, oi) : 0.0;
        b[oi] = (float)((bias - mean) * scale + beta);
        for (size_t j = 0; j < per; j++)
            w[oi * per + j] = (float)(gf_ku_get(wd.data, GF_DT_F32, oi * per + j) * scale);
    }
    return 0;
}
