/* gpufaas — the count of user-space copies of tensor bytes (copies.h). */
#include "core/copies.h"

#include <stdatomic.h>

static _Atomic uint64_t copied[2];

void gf_copies_add(gf_copy_dir d, uint64_t bytes)
{
    atomic_fetch_add_explicit(&copied[d == GF_COPY_OUT], bytes, memory_order_relaxed);
}

uint64_t gf_copies_bytes(gf_copy_dir d)
{
    return atomic_load_explicit(&copied[d == GF_COPY_OUT], memory_order_relaxed);
}
