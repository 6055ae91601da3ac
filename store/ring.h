/* gpufaas — the store's request-path queue: a bounded lock-free MPSC ring
 * of fixed-size records (store/ only).
 *
 * Dmitry Vyukov's bounded queue with one sequence number per slot: a
 * producer claims a position with one CAS on head, fills the slot and
 * publishes it by storing seq = pos + 1; the single consumer waits for that
 * value, uses the record straight from the slot and hands the slot back
 * with seq = pos + capacity. A full ring is seen by a producer as a slot
 * whose seq is behind its position: the record is dropped and counted, so a
 * handover never waits. Handing a record over is a CAS and a copy.
 *
 * Threading: claim/publish from any thread; next/release/retire/pending from
 * the one consumer thread only; the counters from anywhere.
 */
#ifndef GF_STORE_RING_H
#define GF_STORE_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Bytes a slot takes for a record of rec_size bytes (seq, then the record,
 * rounded to a cache line). */
#define GF_RING_SLOT_SIZE(rec_size) ((((rec_size) + 8u) + 63u) & ~(size_t)63u)

typedef struct gf_ring {
    unsigned char *slots;               /* capacity slots of `stride` bytes, 64-aligned */
    size_t stride;
    uint64_t mask;                      /* capacity - 1 (a power of two) */
    _Alignas(64) _Atomic uint64_t head; /* next position to claim (producers) */
    _Alignas(64) _Atomic uint64_t tail; /* the consumer's position as it last published it */
    _Alignas(64) _Atomic uint64_t dropped; /* records refused because the ring was full */
    uint64_t next;                      /* consumer only: the next position to consume */
} gf_ring;

/* A ring of at least cap records (rounded up to a power of two, >= 2) of
 * rec_size bytes each. GF_ERR_NOMEM naming the size. */
gf_status gf_ring_init(gf_ring *r, uint64_t cap, size_t rec_size, gf_err *err);
void gf_ring_deinit(gf_ring *r);
static inline uint64_t gf_ring_capacity(const gf_ring *r) { return r->mask + 1; }

/* Producer: claim a slot and return its record memory (rec_size bytes, not
 * zeroed) at *pos; NULL when the ring is full (the drop is counted). */
void *gf_ring_claim(gf_ring *r, uint64_t *pos);
/* Producer: publish the record claimed at pos. Returns how many records the
 * consumer has not retired yet, this one included (for "a batch is full"). */
uint64_t gf_ring_publish(gf_ring *r, uint64_t pos);

/* Consumer: the record at the next position, waiting for its producer
 * (which may be between claim and publish). Only when gf_ring_pending > 0. */
void *gf_ring_next(gf_ring *r);
/* Consumer: hand the record gf_ring_next returned back to the producers. */
void gf_ring_release(gf_ring *r);
/* Consumer: publish its position (after a batch), for the counts. */
void gf_ring_retire(gf_ring *r);
/* Consumer: records published or being written beyond its position. */
uint64_t gf_ring_pending(gf_ring *r);

/* Counters: ever claimed, queued now (claimed and not retired), dropped. */
uint64_t gf_ring_claimed(gf_ring *r);
uint64_t gf_ring_queued(gf_ring *r);
uint64_t gf_ring_dropped(gf_ring *r);

#endif /* GF_STORE_RING_H */
