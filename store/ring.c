/* gpufaas — the store's bounded lock-free MPSC ring (see ring.h). */
#include "store/ring.h"

#include <sched.h>
#include <stdlib.h>

typedef struct {
    _Atomic uint64_t seq; /* pos: free for pos; pos + 1: holds pos's record */
} gf_ring_hdr;

static gf_ring_hdr *slot_at(const gf_ring *r, uint64_t pos)
{
    return (gf_ring_hdr *)(r->slots + (size_t)(pos & r->mask) * r->stride);
}

static void *rec_of(gf_ring_hdr *h)
{
    return (unsigned char *)h + 8;
}

gf_status gf_ring_init(gf_ring *r, uint64_t cap, size_t rec_size, gf_err *err)
{
    uint64_t c = 2;
    while (c < cap)
        c <<= 1;
    r->stride = GF_RING_SLOT_SIZE(rec_size);
    r->mask = c - 1;
    r->slots = aligned_alloc(64, (size_t)c * r->stride);
    if (r->slots == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a queue of %llu records",
                          (unsigned long long)c);
    for (uint64_t i = 0; i < c; i++)
        atomic_init(&slot_at(r, i)->seq, i);
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    atomic_init(&r->dropped, 0);
    r->next = 0;
    return GF_OK;
}

void gf_ring_deinit(gf_ring *r)
{
    free(r->slots);
    r->slots = NULL;
}

void *gf_ring_claim(gf_ring *r, uint64_t *pos_out)
{
    uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        gf_ring_hdr *slot = slot_at(r, pos);
        uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *pos_out = pos;
                return rec_of(slot);
            }
        } else if (diff < 0) {
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            return NULL;
        } else {
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
        }
    }
}

uint64_t gf_ring_publish(gf_ring *r, uint64_t pos)
{
    atomic_store_explicit(&slot_at(r, pos)->seq, pos + 1, memory_order_release);
    return pos + 1 - atomic_load_explicit(&r->tail, memory_order_relaxed);
}

void *gf_ring_next(gf_ring *r)
{
    gf_ring_hdr *slot = slot_at(r, r->next);
    unsigned spins = 0;
    while (atomic_load_explicit(&slot->seq, memory_order_acquire) != r->next + 1)
        if (++spins > 64)
            sched_yield();
    return rec_of(slot);
}

void gf_ring_release(gf_ring *r)
{
    atomic_store_explicit(&slot_at(r, r->next)->seq, r->next + r->mask + 1,
                          memory_order_release);
    r->next++;
}

void gf_ring_retire(gf_ring *r)
{
    atomic_store_explicit(&r->tail, r->next, memory_order_relaxed);
}

uint64_t gf_ring_pending(gf_ring *r)
{
    return atomic_load_explicit(&r->head, memory_order_acquire) - r->next;
}

uint64_t gf_ring_claimed(gf_ring *r)
{
    return atomic_load_explicit(&r->head, memory_order_relaxed);
}

uint64_t gf_ring_queued(gf_ring *r)
{
    return atomic_load_explicit(&r->head, memory_order_relaxed) -
           atomic_load_explicit(&r->tail, memory_order_relaxed);
}

uint64_t gf_ring_dropped(gf_ring *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}
