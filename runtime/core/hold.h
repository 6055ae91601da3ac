/* gpufaas — a shared owner of a buffer (runtime/core).
 *
 * Zero-copy slices (issue 16): a tensor whose bytes lie inside a bigger
 * buffer someone else allocated (a request body, a received frame's payload)
 * keeps that buffer alive with a reference on its hold instead of a copy of
 * its own. The last reference frees the buffer with the function it was
 * given. References are atomic: any thread may take or drop one. */
#ifndef GF_CORE_HOLD_H
#define GF_CORE_HOLD_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_hold gf_hold;

/* A hold of p with one reference; drop(ctx, p) frees p with the last one.
 * NULL when out of memory (p is then still the caller's). */
gf_hold *gf_hold_new(void *p, void (*drop)(void *ctx, void *p), void *ctx);

/* A hold of p that frees it with free(). */
gf_hold *gf_hold_of_malloc(void *p);

/* One more reference; returns h. NULL is a no-op. */
gf_hold *gf_hold_ref(gf_hold *h);

/* Drop one reference; the last frees the buffer and the hold. NULL is a
 * no-op. */
void gf_hold_unref(gf_hold *h);

#ifdef __cplusplus
}
#endif

#endif
