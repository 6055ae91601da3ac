/* gpufaas benchmarks — bench_density's function mix: sizes, the mlps and
 * their manifests, deploying them, and the invoke requests (see density.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "density.h"
#include "core/safetensors.h"

uint64_t dn_round_up(uint64_t x, uint64_t a)
{
    return a ? (x + a - 1) / a * a : x;
}

/* Hidden width of an mlp 16 -> h -> h -> 1 with about `bytes` of FP32 weights. */
static int64_t dn_hidden_for(double bytes)
{
    double p = bytes / 4 - DN_OUT;
    double h = (-(DN_IN + 2 + DN_OUT) + sqrt((double)((DN_IN + 2 + DN_OUT) * (DN_IN + 2 + DN_OUT)) +
                                             4 * p)) / 2;
    return h < 4 ? 4 : (int64_t)h;
}

void dn_mix_make(dn_fn *f, size_t n, const dn_opts *o, uint64_t page)
{
    uint64_t rng = 21;
    double lo = log(5 * DN_MB * o->scale), hi = log(500 * DN_MB * o->scale);
    for (size_t i = 0; i < n; i++) {
        snprintf(f[i].name, sizeof f[i].name, "fn%04u", (unsigned)(i % 100000));
        f[i].hidden = dn_hidden_for(exp(lo + (hi - lo) * dn_uniform(&rng)));
        int64_t h = f[i].hidden;
        uint64_t t[6] = {(uint64_t)(h * DN_IN), (uint64_t)h, (uint64_t)(h * h), (uint64_t)h,
                         (uint64_t)(DN_OUT * h), DN_OUT};
        f[i].bytes = f[i].device_bytes = 0;
        for (int k = 0; k < 6; k++) {
            f[i].bytes += 4 * t[k];
            f[i].device_bytes += dn_round_up(4 * t[k], 256);
        }
        f[i].device_bytes = dn_round_up(f[i].device_bytes, page);
        f[i].weight = 1.0 / pow((double)(i + 1), 0.9);
        /* compute = rows x weights: size^exponent over the sizes */
        double rel = (double)f[i].bytes / (100 * DN_MB * o->scale);
        f[i].rows = (int)(o->rows * pow(rel, o->exec_exponent - 1) + 0.5);
        if (f[i].rows < 1)
            f[i].rows = 1;
    }
}

/* Small values for every tensor, cut from one buffer (the weights' values
 * do not matter here, only their sizes: writing hundreds of models stays
 * quick). */
static const float *filler(size_t n)
{
    static float *buf;
    static size_t cap;
    if (n > cap) {
        float *nb = realloc(buf, n * sizeof *nb);
        if (nb == NULL)
            dn_die("out of memory");
        for (size_t k = cap; k < n; k++)
            nb[k] = (float)((k * 2654435761u) % 1000) / 10000.0f - 0.05f;
        buf = nb;
        cap = n;
    }
    return buf;
}

/* Write f's weights (nn.Sequential names: Linear, ReLU, Linear, ReLU,
 * Linear) unless present, and its manifest, under dir. */
void dn_fn_write(const dn_fn *f, size_t i, const char *dir, bool weights, const char *extra)
{
    (void)i;
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, f->name);
    if (weights && stat(path, &sb) != 0) {
        int64_t h = f->hidden;
        int64_t shapes[6][2] = {{h, DN_IN}, {h, 0}, {h, h}, {h, 0}, {DN_OUT, h}, {DN_OUT, 0}};
        static const char *const names[6] = {"0.weight", "0.bias",   "2.weight",
                                             "2.bias",   "4.weight", "4.bias"};
        const float *v = filler((size_t)(h * h));
        gf_st_wtensor t[6];
        for (int k = 0; k < 6; k++)
            t[k] = (gf_st_wtensor){names[k], GF_DT_F32, k % 2 ? 1 : 2, shapes[k], v};
        gf_err e;
        if (gf_st_write(path, t, 6, NULL, 0, &e) != GF_OK)
            dn_die("writing %s: %s", path, e.msg);
    }
    json_t *mj = json_pack("{s:s, s:s, s:[{s:s, s:s, s:[i,i]}], s:[{s:s, s:s, s:[i,i]}], s:i, "
                           "s:i, s:{s:[s,s,s], s:b}}",
                           "name", f->name, "kind", "mlp", "inputs", "name", "x", "datatype",
                           "FP32", "shape", -1, DN_IN, "outputs", "name", "y", "datatype", "FP32",
                           "shape", -1, DN_OUT, "max_batch_size", f->rows, "max_queue_delay_us", 0,
                           "config", "activations", "relu", "relu", "identity", "softmax", 0);
    if (mj == NULL)
        dn_die("out of memory");
    if (f->slo_ms > 0)
        json_object_set_new(mj, "slo_ms", json_real(f->slo_ms));
    if (extra != NULL) { /* more members, as a JSON object's text */
        json_t *x = json_loads(extra, 0, NULL);
        if (x == NULL)
            dn_die("bad extra manifest members: %s", extra);
        json_object_update(mj, x);
        json_decref(x);
    }
    snprintf(path, sizeof path, "%s/%s.json", dir, f->name);
    if (json_dump_file(mj, path, JSON_COMPACT) != 0)
        dn_die("writing %s", path);
    json_decref(mj);
}

void dn_deploy(const dn_server *s, const dn_fn *f, const char *dir)
{
    char mpath[512], wpath[512];
    snprintf(mpath, sizeof mpath, "%s/%s.json", dir, f->name);
    snprintf(wpath, sizeof wpath, "%s/%s.safetensors", dir, f->name);
    gf_hh_resp r;
    long st = gf_hh_deploy(s->srv.url, mpath, wpath, NULL, &r);
    if (st != 201 && st != 200) /* 200: the same files again (--keep) */
        dn_die("deploying %s: %ld %s", f->name, st, r.body.data ? r.body.data : "");
    gf_hh_resp_free(&r);
}

void dn_http(const dn_server *s, const char *method, const char *path, const char *body,
             long want)
{
    gf_hh_resp r;
    long st = gf_hh_http(s->srv.url, method, path, NULL, body, body ? strlen(body) : 0, false, &r);
    if (st != want)
        dn_die("%s %s: %ld %s", method, path, st, r.body.data ? r.body.data : "");
    gf_hh_resp_free(&r);
}

void dn_post(const dn_server *s, const char *path, const char *body, long want)
{
    dn_http(s, "POST", path, body, want);
}

/* The invoke requests, one per function: its rows of input as binary data
 * (the KServe binary tensor extension), the answer in JSON. */
void dn_targets_make(gf_dlg_targets *tg, const dn_fn *f, size_t n)
{
    tg->n = n;
    tg->req = calloc(n, sizeof *tg->req);
    tg->len = calloc(n, sizeof *tg->len);
    if (tg->req == NULL || tg->len == NULL)
        dn_die("out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t data = (size_t)f[i].rows * DN_IN * sizeof(float);
        char js[256];
        int jl = snprintf(js, sizeof js,
                          "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[%d,%d],"
                          "\"parameters\":{\"binary_data_size\":%zu}}]}",
                          f[i].rows, DN_IN, data);
        char head[384];
        int hl = snprintf(head, sizeof head,
                          "POST /v1/functions/%s/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: application/octet-stream\r\n"
                          "Inference-Header-Content-Length: %d\r\nContent-Length: %zu\r\n\r\n",
                          f[i].name, jl, (size_t)jl + data);
        tg->len[i] = (size_t)hl + (size_t)jl + data;
        char *p = malloc(tg->len[i] + 1);
        if (p == NULL)
            dn_die("out of memory");
        memcpy(p, head, (size_t)hl);
        memcpy(p + hl, js, (size_t)jl);
        float *x = (float *)malloc(data);
        if (x == NULL)
            dn_die("out of memory");
        for (size_t k = 0; k < data / sizeof(float); k++)
            x[k] = (float)(k % 97) / 97.0f - 0.5f;
        memcpy(p + hl + jl, x, data);
        free(x);
        p[tg->len[i]] = '\0';
        tg->req[i] = p;
    }
}

void dn_targets_free(gf_dlg_targets *tg)
{
    for (size_t i = 0; i < tg->n; i++)
        free(tg->req[i]);
    free(tg->req);
    free(tg->len);
}
