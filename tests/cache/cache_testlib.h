/* gpufaas tests — helpers of the cache suites (tests/cache): models written
 * as real safetensors files, a cpu backend of a given number of pages, an
 * event log, a cache over it. The tests call ck_assert, so a failure fails
 * the test that called. */
#ifndef GF_CACHE_TESTLIB_H
#define GF_CACHE_TESTLIB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

#define PAGE ((size_t)64 << 10)

/* The test's temporary directory (set by the fixture). */
extern char *ct_tmpdir;
void ct_setup(void);
void ct_teardown(void);

/* Write a model of n F32 tensors with the given element counts under
 * ct_tmpdir; returns the path (malloc'd). Values are a function of (seed,
 * tensor, index). */
char *ct_write_model(const char *name, int n, const size_t *numel, uint32_t seed);
/* A model of `pages` pages exactly: one tensor filling the range. */
char *ct_write_pages_model(const char *name, size_t pages, uint32_t seed);

/* A cpu backend of `pages` pages of PAGE bytes (hook: the copy hook, may be
 * NULL). */
gf_backend *ct_open_cpu(size_t pages, gf_cpu_copy_hook hook, void *arg);

/* Every event, counted; device evictions listed in log ("B,C,A"). */
typedef struct {
    pthread_mutex_t lock;
    char log[4096];
    int evictions, loads, hits, fails;
    int *leases; /* per model index, maintained by the test */
    char **keys;
    int n_models;
    int violations;
} ct_evlog;

void ct_on_event(void *arg, const gf_cache_event *ev);

/* A cache over be (the event log L may be NULL). */
gf_cache *ct_new_cache(gf_backend *be, uint64_t host_budget, gf_evict_policy pol, ct_evlog *L);
/* The same with a pin limit (0 = half the device budget). */
gf_cache *ct_new_cache_pinned(gf_backend *be, uint64_t host_budget, gf_evict_policy pol, ct_evlog *L,
                           uint64_t pin_limit);
gf_cache_model *ct_add(gf_cache *c, const char *key, const char *path);

/* Acquire m, wait for all its tensors, release. */
void ct_use(gf_cache *c, gf_cache_model *m);

#endif /* GF_CACHE_TESTLIB_H */
