/* Helpers shared by the tests of the built-in kinds. */
#include "kinds_testlib.h"

#include <check.h>
#include <stdlib.h>

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
