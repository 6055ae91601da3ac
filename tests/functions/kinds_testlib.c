/* Helpers shared by the tests of the built-in kinds. */
#include "kinds_testlib.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "core/tensor.h"
#include "testutil.h"

void fn_rig_open(fn_rig *r, const char *manifest_path, const char *weights, const char *derived)
{
    gf_err err;
    size_t n;
    char *text = gf_test_read_file(manifest_path, &n);
    ck_assert_msg(text != NULL, "cannot read %s", manifest_path);
    ck_assert_msg(gf_manifest_parse(text, n, &r->mf, &err) == GF_OK, "%s", err.msg);
    free(text);
    const gf_fn_kind *kind = gf_fn_kind_find(r->mf->kind);
    ck_assert_msg(kind != NULL, "no kind '%s'", r->mf->kind);
    ck_assert_msg(gf_fn_validate(kind, r->mf, weights, &err) == GF_OK, "validate: %s", err.msg);
    ck_assert_msg(gf_fn_prepare(kind, r->mf, weights, derived, &r->plan, &err) == GF_OK,
                  "prepare: %s", err.msg);
    const char *dev = getenv("GF_TEST_DEVICE");
    gf_backend_config cfg = {.device = dev != NULL && dev[0] ? dev : "cpu",
                             .device_budget = (size_t)1 << 30};
    ck_assert_msg(gf_backend_open(&cfg, &r->be, &err) == GF_OK, "%s", err.msg);
    gf_cache_config cc = {.host_budget = 0};
    ck_assert_msg(gf_cache_new(r->be, &cc, &r->cache, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_cache_model_add(r->cache, r->mf->name, gf_fn_plan_cache_path(r->plan),
                                     gf_fn_plan_param_names(r->plan),
                                     gf_fn_plan_param_count(r->plan), &r->model, &err) == GF_OK,
                  "%s", err.msg);
}

gf_status fn_rig_infer(fn_rig *r, const gf_tensor *in, size_t n_in, gf_fn_outputs *out, gf_err *err)
{
    gf_lease *lease;
    gf_status st = gf_cache_acquire(r->cache, r->model, &lease, err);
    ck_assert_msg(st == GF_OK, "acquire: %s", err->msg);
    gf_fn_timing tm;
    st = gf_fn_infer(r->plan, r->be, r->cache, lease, in, n_in, out, &tm, err);
    gf_lease_release(lease);
    return st;
}

void fn_rig_close(fn_rig *r)
{
    gf_cache_free(r->cache);
    gf_backend_free(r->be);
    gf_fn_plan_free(r->plan);
    gf_manifest_free(r->mf);
}

/* Host tensors of a safetensors file, in manifest order of `io` (names). */
static gf_tensor *tensors_load(gf_st_file *f, const gf_manifest_io *io, size_t n)
{
    gf_tensor *t = calloc(n, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *s = gf_st_find(f, io[i].name);
        ck_assert_msg(s != NULL, "no tensor '%s'", io[i].name);
        ck_assert_int_eq(gf_tensor_init(&t[i], s->dtype, s->rank, s->shape, (void *)s->data,
                                        GF_MEM_HOST, -1, NULL),
                         GF_OK);
    }
    return t;
}

static double st_get(const gf_st_tensor *t, size_t i)
{
    if (t->dtype == GF_DT_F32) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        return f;
    }
    ck_assert_int_eq(t->dtype, GF_DT_F64);
    double d;
    memcpy(&d, (const char *)t->data + 8 * i, 8);
    return d;
}

fn_result fn_compare(const char *manifest_path, const char *weights, const char *derived,
                     const char *inputs_path, const char *expected_path)
{
    fn_result res = {0, 0};
    gf_err err;
    fn_rig r;
    fn_rig_open(&r, manifest_path, weights, derived);
    const gf_manifest *mf = r.mf;
    gf_st_file *inf, *exf;
    ck_assert_msg(gf_st_open(inputs_path, &inf, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_st_open(expected_path, &exf, &err) == GF_OK, "%s", err.msg);
    gf_tensor *in = tensors_load(inf, mf->inputs, mf->n_inputs);
    gf_fn_outputs out;
    ck_assert_msg(fn_rig_infer(&r, in, mf->n_inputs, &out, &err) == GF_OK, "infer: %s", err.msg);
    ck_assert_uint_eq(out.n, mf->n_outputs);
    /* the same request again is warm: the same bytes out, and not one device
     * allocation or free (the arena the first one grew serves it) */
    uint64_t a0, f0, a1, f1;
    gf_dev_counters(r.be, &a0, &f0);
    gf_fn_outputs again;
    ck_assert_msg(fn_rig_infer(&r, in, mf->n_inputs, &again, &err) == GF_OK, "infer: %s",
                  err.msg);
    gf_dev_counters(r.be, &a1, &f1);
    ck_assert_msg(a1 == a0 && f1 == f0, "a warm request made %llu device allocations and %llu "
                  "frees", (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
    ck_assert_uint_eq(again.n, out.n);
    for (size_t i = 0; i < out.n; i++)
        ck_assert_msg(again.t[i].nbytes == out.t[i].nbytes &&
                      memcmp(again.t[i].data, out.t[i].data, out.t[i].nbytes) == 0,
                      "output '%s' differs on the warm request", mf->outputs[i].name);
    gf_fn_outputs_free(&again);
    for (size_t i = 0; i < out.n; i++) {
        const gf_st_tensor *e = gf_st_find(exf, mf->outputs[i].name);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(out.t[i].dtype, GF_DT_F32);
        ck_assert_msg(gf_shape_equal(out.t[i].rank, out.t[i].shape, e->rank, e->shape),
                      "output '%s' has the wrong shape", mf->outputs[i].name);
        const float *y = out.t[i].data;
        size_t n = e->nbytes / (e->dtype == GF_DT_F32 ? 4 : 8);
        for (size_t j = 0; j < n; j++) {
            double ref = st_get(e, j);
            ck_assert_msg(isfinite(y[j]), "output %zu is not finite", j);
            res.err = fmax(res.err, fabs((double)y[j] - ref));
            res.scale = fmax(res.scale, fabs(ref));
        }
    }
    gf_fn_outputs_free(&out);
    free(in);
    gf_st_close(inf);
    gf_st_close(exf);
    fn_rig_close(&r);
    return res;
}

void fn_expect_invalid(const char *manifest_path, const char *mtext, const char *weights,
                       const char *scratch, const char *const *expect)
{
    gf_manifest *mf;
    gf_err err;
    char *text = NULL;
    size_t n = 0;
    if (manifest_path != NULL) {
        text = gf_test_read_file(manifest_path, &n);
        ck_assert_msg(text != NULL, "cannot read %s", manifest_path);
        mtext = text;
    } else {
        n = strlen(mtext);
    }
    ck_assert_msg(gf_manifest_parse(mtext, n, &mf, &err) == GF_OK, "%s", err.msg);
    free(text);
    const gf_fn_kind *kind = gf_fn_kind_find(mf->kind);
    ck_assert_ptr_nonnull(kind);
    gf_err_clear(&err);
    ck_assert_msg(gf_fn_validate(kind, mf, weights, &err) != GF_OK,
                  "validation passed (case expecting '%s')", expect[0]);
    for (size_t i = 0; expect[i] != NULL; i++)
        ck_assert_msg(strstr(err.msg, expect[i]) != NULL, "message '%s' lacks '%s'", err.msg,
                      expect[i]);
    /* prepare reports the same problem */
    gf_fn_plan *plan;
    char *derived = gf_test_path(scratch, "derived-bad.safetensors");
    ck_assert_int_ne(gf_fn_prepare(kind, mf, weights, derived, &plan, &err), GF_OK);
    free(derived);
    gf_manifest_free(mf);
}

void fn_st_copy_edited(const char *src, const char *dst, const char *drop, const char *reshape,
                       const char *add)
{
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(src, &f, &err) == GF_OK, "%s", err.msg);
    size_t n = gf_st_count(f), k = 0;
    gf_st_wtensor *wt = calloc(n + 1, sizeof *wt);
    int64_t(*shapes)[GF_MAX_RANK] = calloc(n + 1, sizeof *shapes);
    ck_assert(wt != NULL && shapes != NULL);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        if (drop != NULL && strcmp(t->name, drop) == 0)
            continue;
        memcpy(shapes[k], t->shape, sizeof shapes[k]);
        if (reshape != NULL && strcmp(t->name, reshape) == 0) {
            /* [a, b, ...] -> [a/2, 2b, ...]: same bytes, wrong shape */
            ck_assert(t->rank >= 2 && t->shape[0] % 2 == 0);
            shapes[k][0] /= 2;
            shapes[k][1] *= 2;
        }
        wt[k] = (gf_st_wtensor){t->name, t->dtype, t->rank, shapes[k], t->data};
        k++;
    }
    static const float zeros[2] = {0, 0};
    if (add != NULL) {
        shapes[k][0] = 2;
        wt[k++] = (gf_st_wtensor){add, GF_DT_F32, 1, shapes[k - 1], zeros};
    }
    ck_assert_msg(gf_st_write(dst, wt, k, NULL, 0, &err) == GF_OK, "%s", err.msg);
    free(wt);
    free(shapes);
    gf_st_close(f);
}

/* Copy src to dst, renaming with prefix and swapping the first two elements
 * of tensor `shuffle` (either may be NULL). */
static void st_copy_with(const char *src, const char *dst, const char *prefix,
                         const char *shuffle)
{
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(src, &f, &err) == GF_OK, "%s", err.msg);
    size_t n = gf_st_count(f);
    gf_st_wtensor *wt = calloc(n, sizeof *wt);
    char **names = calloc(n, sizeof *names);
    void *copy = NULL;
    ck_assert(wt != NULL && names != NULL);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        size_t len = strlen(t->name) + (prefix ? strlen(prefix) : 0) + 1;
        names[i] = malloc(len);
        ck_assert_ptr_nonnull(names[i]);
        snprintf(names[i], len, "%s%s", prefix ? prefix : "", t->name);
        const void *data = t->data;
        if (shuffle != NULL && strcmp(t->name, shuffle) == 0) {
            uint64_t numel = 0;
            ck_assert_int_eq(gf_shape_numel(t->rank, t->shape, &numel, NULL), GF_OK);
            size_t es = t->nbytes / (size_t)numel;
            copy = malloc(t->nbytes);
            ck_assert(copy != NULL && t->nbytes >= 2 * es);
            memcpy(copy, t->data, t->nbytes);
            memcpy(copy, (const char *)t->data + es, es);
            memcpy((char *)copy + es, t->data, es);
            data = copy;
        }
        wt[i] = (gf_st_wtensor){names[i], t->dtype, t->rank, t->shape, data};
    }
    ck_assert_msg(gf_st_write(dst, wt, n, NULL, 0, &err) == GF_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(wt);
    free(copy);
    gf_st_close(f);
}

void fn_st_copy_prefixed(const char *src, const char *dst, const char *prefix)
{
    st_copy_with(src, dst, prefix, NULL);
}

void fn_st_copy_shuffled(const char *src, const char *dst, const char *name)
{
    st_copy_with(src, dst, NULL, name);
}
