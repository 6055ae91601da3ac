/* gpufaas tests — the one MLP the tests deploy and check: random weights,
 * written as PyTorch's nn.Sequential names them, and a naive double
 * reference (tests/common). */
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/dtype.h"
#include "core/safetensors.h"


static uint64_t mlp_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static float mlp_uniform(uint64_t *s, float lo, float hi)
{
    double u = (double)(mlp_rng(s) >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

void gf_test_mlp_make(gf_test_mlp *m, uint64_t seed, int layers, const int64_t *dims, bool softmax,
                    int max_batch)
{
    memset(m, 0, sizeof *m);
    uint64_t s = seed ? seed : 1;
    m->layers = layers;
    m->softmax = softmax;
    m->max_batch = max_batch;
    for (int i = 0; i <= layers; i++)
        m->dims[i] = dims[i];
    for (int i = 0; i < layers; i++) {
        size_t nw = (size_t)(dims[i + 1] * dims[i]);
        float bound = 1.0f / sqrtf((float)dims[i]);
        m->w[i] = malloc(nw * sizeof(float));
        m->b[i] = malloc((size_t)dims[i + 1] * sizeof(float));
        if (m->w[i] == NULL || m->b[i] == NULL)
            abort();
        for (size_t k = 0; k < nw; k++)
            m->w[i][k] = mlp_uniform(&s, -bound, bound);
        for (int64_t k = 0; k < dims[i + 1]; k++)
            m->b[i][k] = mlp_uniform(&s, -bound, bound);
    }
}

void gf_test_mlp_free(gf_test_mlp *m)
{
    for (int i = 0; i < m->layers; i++) {
        free(m->w[i]);
        free(m->b[i]);
    }
    memset(m, 0, sizeof *m);
}

gf_status gf_test_mlp_write(const gf_test_mlp *m, const char *path, gf_dtype dtype, gf_err *err)
{
    gf_st_wtensor t[2 * GF_TEST_MLP_MAX_LAYERS];
    char names[2 * GF_TEST_MLP_MAX_LAYERS][32];
    int64_t shapes[2 * GF_TEST_MLP_MAX_LAYERS][2];
    void *conv[2 * GF_TEST_MLP_MAX_LAYERS] = {0};
    gf_status st = GF_OK;
    for (int i = 0; i < m->layers; i++) {
        /* nn.Sequential(Linear, ReLU, Linear, ...): Linear modules at even indices */
        snprintf(names[2 * i], sizeof names[0], "%d.weight", 2 * i);
        snprintf(names[2 * i + 1], sizeof names[0], "%d.bias", 2 * i);
        shapes[2 * i][0] = m->dims[i + 1];
        shapes[2 * i][1] = m->dims[i];
        shapes[2 * i + 1][0] = m->dims[i + 1];
        for (int part = 0; part < 2; part++) {
            int k = 2 * i + part;
            const float *src = part == 0 ? m->w[i] : m->b[i];
            size_t numel = (size_t)(part == 0 ? m->dims[i] * m->dims[i + 1] : m->dims[i + 1]);
            const void *data = src;
            if (dtype != GF_DT_F32) {
                conv[k] = malloc(numel * 2 + 1);
                if (conv[k] == NULL)
                    abort();
                if (dtype == GF_DT_F16)
                    gf_f32_to_f16_n(conv[k], src, numel);
                else
                    gf_f32_to_bf16_n(conv[k], src, numel);
                data = conv[k];
            }
            t[k] = (gf_st_wtensor){names[k], dtype, part == 0 ? 2 : 1, shapes[k], data};
        }
    }
    st = gf_st_write(path, t, (size_t)(2 * m->layers), NULL, 0, err);
    for (int k = 0; k < 2 * m->layers; k++)
        free(conv[k]);
    return st;
}

char *gf_test_mlp_manifest(const gf_test_mlp *m, const char *name)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_buf_printf(&b,
                  "{\"name\":\"%s\",\"kind\":\"mlp\",\"version\":1,"
                  "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,%lld]}],"
                  "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,%lld]}],"
                  "\"max_batch_size\":%d,\"config\":{\"activations\":[",
                  name, (long long)m->dims[0], (long long)m->dims[m->layers], m->max_batch);
    for (int i = 0; i < m->layers; i++)
        gf_buf_printf(&b, "%s\"%s\"", i ? "," : "", i + 1 < m->layers ? "relu" : "identity");
    gf_buf_printf(&b, "],\"softmax\":%s}}", m->softmax ? "true" : "false");
    return gf_buf_steal(&b, NULL);
}

/* v as it is stored in dtype (F32, F16, BF16). */
static double stored(float v, gf_dtype dtype)
{
    return dtype == GF_DT_F16    ? gf_f16_to_f32(gf_f32_to_f16(v))
         : dtype == GF_DT_BF16 ? gf_bf16_to_f32(gf_f32_to_bf16(v)) : v;
}

void gf_test_mlp_ref(const gf_test_mlp *m, gf_dtype dtype, const float *x, int64_t batch,
                     double *y)
{
    int64_t width = 0;
    for (int i = 0; i <= m->layers; i++)
        if (m->dims[i] > width)
            width = m->dims[i];
    double *a = malloc((size_t)width * sizeof(double));
    double *o = malloc((size_t)width * sizeof(double));
    if (a == NULL || o == NULL)
        abort();
    for (int64_t r = 0; r < batch; r++) {
        for (int64_t k = 0; k < m->dims[0]; k++)
            a[k] = x[r * m->dims[0] + k];
        for (int l = 0; l < m->layers; l++) {
            int64_t in = m->dims[l], out = m->dims[l + 1];
            for (int64_t j = 0; j < out; j++) {
                double s = stored(m->b[l][j], dtype);
                for (int64_t k = 0; k < in; k++)
                    s += stored(m->w[l][j * in + k], dtype) * a[k];
                o[j] = (l + 1 < m->layers && s < 0) ? 0 : s;
            }
            memcpy(a, o, (size_t)out * sizeof(double));
        }
        int64_t out = m->dims[m->layers];
        if (m->softmax) {
            double mx = a[0], sum = 0;
            for (int64_t j = 1; j < out; j++)
                mx = a[j] > mx ? a[j] : mx;
            for (int64_t j = 0; j < out; j++)
                sum += exp(a[j] - mx);
            for (int64_t j = 0; j < out; j++)
                a[j] = exp(a[j] - mx) / sum;
        }
        for (int64_t j = 0; j < out; j++)
            y[r * out + j] = a[j];
    }
    free(a);
    free(o);
}

void gf_test_mlp_ref_f32(const gf_test_mlp *m, const float *x, int64_t batch, float *y)
{
    int64_t out = m->dims[m->layers];
    double *d = malloc((size_t)(batch * out + 1) * sizeof *d);
    if (d == NULL)
        abort();
    gf_test_mlp_ref(m, GF_DT_F32, x, batch, d);
    for (int64_t i = 0; i < batch * out; i++)
        y[i] = (float)d[i];
    free(d);
}

double gf_test_max_rel_err(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return NAN;
        double e = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (e > worst)
            worst = e;
    }
    return worst;
}
