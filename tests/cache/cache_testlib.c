/* gpufaas tests — helpers of the cache suites (see cache_testlib.h). */
#include "cache_testlib.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fault.h"
#include "testutil.h"


char *ct_tmpdir;
void ct_setup(void) { ct_tmpdir = gf_test_tmpdir(); }
void ct_teardown(void)
{
    gf_fault_reset();
    gf_test_rmtree(ct_tmpdir);
    ct_tmpdir = NULL;
}

/* Write a model of n F32 tensors with the given element counts; returns the
 * path. Values are a function of (seed, tensor, index). */
char *ct_write_model(const char *name, int n, const size_t *numel, uint32_t seed)
{
    gf_st_wtensor *ts = calloc((size_t)n, sizeof *ts);
    int64_t *shapes = calloc((size_t)n, sizeof *shapes);
    float **data = calloc((size_t)n, sizeof *data);
    char (*names)[16] = calloc((size_t)n, sizeof *names);
    for (int i = 0; i < n; i++) {
        shapes[i] = (int64_t)numel[i];
        data[i] = malloc(numel[i] * sizeof(float) + 1);
        for (size_t k = 0; k < numel[i]; k++)
            data[i][k] = (float)(seed * 1000003u + (uint32_t)i * 7919u + (uint32_t)k);
        snprintf(names[i], sizeof names[i], "t%d", i);
        ts[i] = (gf_st_wtensor){names[i], GF_DT_F32, 1, &shapes[i], data[i]};
    }
    char *path = gf_test_path(ct_tmpdir, name);
    gf_err err;
    ck_assert_msg(gf_st_write(path, ts, (size_t)n, NULL, 0, &err) == GF_OK, "%s", err.msg);
    for (int i = 0; i < n; i++)
        free(data[i]);
    free(data);
    free(ts);
    free(shapes);
    free(names);
    return path;
}

gf_backend *ct_open_cpu(size_t pages, gf_cpu_copy_hook hook, void *arg)
{
    gf_backend_config cfg = {.device = "cpu", .device_budget = pages * PAGE, .page_size = PAGE,
                             .cpu_copy_hook = hook, .cpu_copy_hook_arg = arg};
    gf_backend *be;
    gf_err err;
    ck_assert_msg(gf_backend_open(&cfg, &be, &err) == GF_OK, "%s", err.msg);
    return be;
}

void ct_on_event(void *arg, const gf_cache_event *ev)
{
    ct_evlog *L = arg;
    pthread_mutex_lock(&L->lock);
    const char *k = ev->kind == GF_CACHE_EV_LOAD ? "L" : ev->kind == GF_CACHE_EV_HIT ? "H"
                  : ev->kind == GF_CACHE_EV_EVICT ? "E" : "F";
    if (ev->kind == GF_CACHE_EV_EVICT && ev->from == GF_TIER_DEVICE) {
        L->evictions++;
        size_t len = strlen(L->log);
        if (len + 40 < sizeof L->log)
            snprintf(L->log + len, sizeof L->log - len, "%s%s", len ? "," : "", ev->key);
        for (int i = 0; i < L->n_models; i++)
            if (L->keys != NULL && strcmp(L->keys[i], ev->key) == 0 && L->leases[i] > 0)
                L->violations++;
    }
    if (ev->kind == GF_CACHE_EV_LOAD && ev->to == GF_TIER_DEVICE)
        L->loads++;
    if (ev->kind == GF_CACHE_EV_HIT)
        L->hits++;
    if (ev->kind == GF_CACHE_EV_FAIL)
        L->fails++;
    (void)k;
    pthread_mutex_unlock(&L->lock);
}

gf_cache *ct_new_cache_pinned(gf_backend *be, uint64_t host_budget, gf_evict_policy pol, ct_evlog *L,
                           uint64_t pin_limit)
{
    gf_cache_config cfg = {.host_budget = host_budget, .policy = pol, .chunk_bytes = 64 << 10,
                           .on_event = L ? ct_on_event : NULL, .event_arg = L,
                           .pin_limit = pin_limit};
    gf_cache *c;
    gf_err err;
    ck_assert_msg(gf_cache_new(be, &cfg, &c, &err) == GF_OK, "%s", err.msg);
    return c;
}

gf_cache_model *ct_add(gf_cache *c, const char *key, const char *path)
{
    gf_cache_model *m;
    gf_err err;
    ck_assert_msg(gf_cache_model_add(c, key, path, NULL, 0, &m, &err) == GF_OK, "%s", err.msg);
    return m;
}

char *ct_write_pages_model(const char *name, size_t pages, uint32_t seed)
{
    size_t numel = pages * PAGE / 4;
    return ct_write_model(name, 1, &numel, seed);
}

gf_cache *ct_new_cache(gf_backend *be, uint64_t host_budget, gf_evict_policy pol, ct_evlog *L)
{
    return ct_new_cache_pinned(be, host_budget, pol, L, 0);
}

void ct_use(gf_cache *c, gf_cache_model *m)
{
    gf_lease *l;
    gf_err err;
    ck_assert_msg(gf_cache_acquire(c, m, &l, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_lease_wait_all(l, &err) == GF_OK, "%s", err.msg);
    gf_lease_release(l);
}
