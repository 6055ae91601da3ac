/* gpufaas — the onnx kind on a device against the cpu, on ONNX functions
 * imported elsewhere (tests/gpu: the GPU machine has no protobuf-c).
 *
 *   onnx_crosscheck CASES_DIR [--device cuda:0] [--rtol R] [--atol A]
 *
 * CASES_DIR holds one folder per case, as onnx_conformance --export writes
 * them: weights.safetensors (the imported graph and its initializers),
 * manifest.json, inputs.safetensors and expected.safetensors (the outputs on
 * the cpu where it was exported). Each case runs on the cpu and on the
 * device, through the function runtime and the parameter cache as a worker
 * runs it; the device's outputs must match the cpu's here (and, reported,
 * the expected ones) within |a - b| <= atol + rtol |b|. Prints
 * onnx_cuda_cases_passed=, _failed=, max_rel_err=; exits 1 when a case
 * fails, 77 without the device.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "functions/runtime.h"

typedef struct {
    gf_backend *be;
    gf_cache *cache;
} dev;

static int open_dev(const char *name, dev *d, gf_err *err)
{
    gf_backend_config cfg = {.device = name, .device_budget = (size_t)2 << 30};
    if (gf_backend_open(&cfg, &d->be, err) != GF_OK)
        return -1;
    gf_cache_config cc = {.host_budget = 0};
    return gf_cache_new(d->be, &cc, &d->cache, err) == GF_OK ? 0 : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b != NULL)
        b[n] = '\0';
    fclose(f);
    return b;
}

/* Run the case on d; outputs into *fo. */
static gf_status run_on(dev *d, const char *key, const gf_manifest *mf, const char *weights,
                        gf_st_file *inf, gf_fn_outputs *fo, gf_err *err)
{
    gf_fn_plan *plan = NULL;
    gf_cache_model *cm = NULL;
    gf_lease *lease = NULL;
    gf_tensor *in = calloc(mf->n_inputs + 1, sizeof *in);
    gf_status st = in != NULL ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == GF_OK && i < mf->n_inputs; i++) {
        const gf_st_tensor *t = gf_st_find(inf, mf->inputs[i].name);
        if (t == NULL)
            st = gf_err_set(err, GF_ERR_INVALID, "no input '%s'", mf->inputs[i].name);
        else
            gf_tensor_init(&in[i], t->dtype, t->rank, t->shape, (void *)t->data, GF_MEM_HOST, -1,
                           NULL);
    }
    if (st == GF_OK)
        st = gf_fn_prepare(gf_fn_kind_find("onnx"), mf, weights, NULL, &plan, err);
    if (st == GF_OK)
        st = gf_cache_model_add(d->cache, key, gf_fn_plan_cache_path(plan),
                                gf_fn_plan_param_names(plan), gf_fn_plan_param_count(plan), &cm,
                                err);
    if (st == GF_OK)
        st = gf_cache_acquire(d->cache, cm, &lease, err);
    gf_fn_timing tm;
    if (st == GF_OK)
        st = gf_fn_infer(plan, d->be, d->cache, lease, in, mf->n_inputs, fo, &tm, err);
    if (lease != NULL)
        gf_lease_release(lease);
    if (cm != NULL)
        gf_cache_model_remove(d->cache, cm, NULL);
    gf_fn_plan_free(plan);
    free(in);
    return st;
}

/* The largest |a - b| / (atol / rtol + |b|)-style excess: returns true when
 * every element is within atol + rtol |b|; *rel gets max |a-b| / max |b|. */
static bool compare(const gf_tensor *a, const gf_tensor *b, double rtol, double atol,
                    double *rel, char *why, size_t cap)
{
    if (a->dtype != b->dtype || a->nbytes != b->nbytes) {
        snprintf(why, cap, "outputs of different types or sizes");
        return false;
    }
    size_t es = gf_dtype_size(a->dtype), n = es ? a->nbytes / es : 0;
    double maxd = 0, maxb = 0;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        double x, y;
        const char *pa = (const char *)a->data + i * es, *pb = (const char *)b->data + i * es;
        if (a->dtype == GF_DT_F32) {
            float fx, fy;
            memcpy(&fx, pa, 4);
            memcpy(&fy, pb, 4);
            x = fx;
            y = fy;
        } else {
            if (memcmp(pa, pb, es) != 0 && ok) {
                snprintf(why, cap, "element %zu differs", i);
                ok = false;
            }
            continue;
        }
        if ((isnan(x) && isnan(y)) || (isinf(y) && x == y))
            continue;
        double dlt = fabs(x - y);
        maxd = dlt > maxd ? dlt : maxd;
        maxb = fabs(y) > maxb ? fabs(y) : maxb;
        if (!(dlt <= atol + rtol * fabs(y)) && ok) {
            snprintf(why, cap, "element %zu is %.9g, expected %.9g", i, x, y);
            ok = false;
        }
    }
    *rel = maxb > 0 ? maxd / maxb : maxd;
    return ok;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *device = "cuda:0";
    double rtol = 1e-3, atol = 1e-5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--rtol") == 0 && i + 1 < argc)
            rtol = atof(argv[++i]);
        else if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc)
            atol = atof(argv[++i]);
        else
            dir = argv[i];
    }
    if (dir == NULL) {
        fprintf(stderr, "usage: onnx_crosscheck CASES_DIR [--device D] [--rtol R] [--atol A]\n");
        return 2;
    }
    gf_err err;
    dev cpu = {0}, gpu = {0};
    if (open_dev(device, &gpu, &err) != 0) {
        printf("SKIP: %s: %s\n", device, err.msg);
        return 77;
    }
    if (open_dev("cpu", &cpu, &err) != 0) {
        fprintf(stderr, "cpu: %s\n", err.msg);
        return 2;
    }
    DIR *dh = opendir(dir);
    if (dh == NULL) {
        printf("SKIP: no cases at %s (tests/gpu/prepare.sh exports them)\n", dir);
        return 77;
    }
    int passed = 0, failed = 0;
    double worst = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096], w[4200], why[1024] = "";
        snprintf(p, sizeof p, "%s/%s/manifest.json", dir, e->d_name);
        char *mj = slurp(p);
        gf_manifest *mf = NULL;
        gf_st_file *inf = NULL, *exf = NULL;
        gf_fn_outputs oc = {0}, og = {0};
        bool ok = mj != NULL && gf_manifest_parse(mj, strlen(mj), &mf, &err) == GF_OK;
        snprintf(w, sizeof w, "%s/%s/inputs.safetensors", dir, e->d_name);
        ok = ok && gf_st_open(w, &inf, &err) == GF_OK;
        snprintf(w, sizeof w, "%s/%s/expected.safetensors", dir, e->d_name);
        ok = ok && gf_st_open(w, &exf, &err) == GF_OK;
        snprintf(w, sizeof w, "%s/%s/weights.safetensors", dir, e->d_name);
        if (ok && run_on(&cpu, e->d_name, mf, w, inf, &oc, &err) != GF_OK) {
            snprintf(why, sizeof why, "cpu: %.900s", err.msg);
            ok = false;
        } else if (ok && run_on(&gpu, e->d_name, mf, w, inf, &og, &err) != GF_OK) {
            snprintf(why, sizeof why, "%.64s: %.900s", device, err.msg);
            ok = false;
        } else if (!ok) {
            snprintf(why, sizeof why, "cannot read the case: %.900s", mj ? err.msg : "manifest");
        }
        for (size_t i = 0; ok && i < og.n; i++) {
            double rel, rel_exp;
            char w2[256];
            ok = compare(&og.t[i], &oc.t[i], rtol, atol, &rel, w2, sizeof w2);
            if (!ok)
                snprintf(why, sizeof why, "output %zu, %s against cpu: %s", i, device, w2);
            const gf_st_tensor *x = gf_st_find(exf, mf->outputs[i].name);
            if (ok && x != NULL) {
                gf_tensor xt;
                gf_tensor_init(&xt, x->dtype, x->rank, x->shape, (void *)x->data, GF_MEM_HOST,
                               -1, NULL);
                if (!compare(&oc.t[i], &xt, rtol, atol, &rel_exp, w2, sizeof w2))
                    printf("note %s: the cpu here differs from the exporting cpu: %s\n",
                           e->d_name, w2);
            }
            worst = rel > worst ? rel : worst;
        }
        if (ok) {
            passed++;
        } else {
            failed++;
            printf("FAIL %s: %s\n", e->d_name, why);
        }
        gf_fn_outputs_free(&oc);
        gf_fn_outputs_free(&og);
        gf_st_close(inf);
        gf_st_close(exf);
        gf_manifest_free(mf);
        free(mj);
    }
    closedir(dh);
    printf("onnx_cuda_cases_passed=%d\nonnx_cuda_cases_failed=%d\nmax_rel_err=%.3g\n", passed,
           failed, worst);
    gf_cache_free(gpu.cache);
    gf_backend_free(gpu.be);
    gf_cache_free(cpu.cache);
    gf_backend_free(cpu.be);
    return failed ? 1 : 0;
}
