/* gpufaas — a shared owner of a buffer (hold.h). */
#include "core/hold.h"

#include <stdatomic.h>
#include <stdlib.h>

struct gf_hold {
    atomic_int refs;
    void *p;
    void (*drop)(void *ctx, void *p);
    void *ctx;
};

gf_hold *gf_hold_new(void *p, void (*drop)(void *ctx, void *p), void *ctx)
{
    gf_hold *h = malloc(sizeof *h);
    if (h == NULL)
        return NULL;
    atomic_init(&h->refs, 1);
    h->p = p;
    h->drop = drop;
    h->ctx = ctx;
    return h;
}

static void drop_malloc(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

gf_hold *gf_hold_of_malloc(void *p)
{
    return gf_hold_new(p, drop_malloc, NULL);
}

gf_hold *gf_hold_ref(gf_hold *h)
{
    if (h != NULL)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    return h;
}

void gf_hold_unref(gf_hold *h)
{
    if (h == NULL || atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (h->drop != NULL)
        h->drop(h->ctx, h->p);
    free(h);
}
