/* gpufaas — the worker process: the pinned ring INFER payloads are read
 * into, and the outputs copied back to, for the RESULT to be written from
 * (issue 16 point 2). The frame reader (runtime/ipc.h,
 * gf_ipc_payload_alloc) asks here for each payload; an INFER's comes from
 * page-locked memory the backend registered (cuda: cudaHostAlloc; cpu:
 * ordinary page-aligned memory), so the function runtime's host-to-device
 * copy of its inputs is a DMA from where the socket put them, and the
 * buffers are kept for the next requests (allocating pinned memory costs
 * milliseconds). The ring holds at most its limit of pinned bytes; other
 * frames, and INFERs beyond that or when no pinned memory can be had, get
 * ordinary memory. */
#include <stdlib.h>
#include <string.h>

#include "worker/worker_impl.h"

/* Before each payload: which memory it is and, free, the list link. 64
 * bytes so the payload keeps the reader's 64-byte alignment. */
typedef struct pin_hdr {
    struct pin_hdr *next;
    size_t cap;  /* payload bytes it holds */
    bool pinned; /* from gf_host_alloc_pinned (else posix_memalign) */
    char pad[64 - sizeof(void *) - sizeof(size_t) - sizeof(bool)];
} pin_hdr;
_Static_assert(sizeof(pin_hdr) == 64, "the header keeps 64-byte alignment");

#define PIN_MIN (64u << 10) /* the smallest pinned buffer */

void wk_pinned_init(wk_pinned *p, gf_backend *be, size_t limit)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->be = be;
    p->limit = limit;
}

void wk_pinned_deinit(wk_pinned *p)
{
    pin_hdr *h = p->free_list;
    while (h != NULL) {
        pin_hdr *next = h->next;
        gf_host_free_pinned(p->be, h);
        h = next;
    }
    p->free_list = NULL;
    pthread_mutex_destroy(&p->lock);
}

/* A pinned buffer of at least size bytes: a free one that fits (and is not
 * more than 4 times too big), else a new one rounded up to a power of two.
 * NULL when the backend has none to give. */
static pin_hdr *pinned_get(wk_pinned *p, size_t size)
{
    pthread_mutex_lock(&p->lock);
    for (pin_hdr **pp = &p->free_list; *pp != NULL; pp = &(*pp)->next) {
        pin_hdr *h = *pp;
        if (h->cap >= size && (h->cap / 4 <= size || h->cap == PIN_MIN)) {
            *pp = h->next;
            p->pooled -= h->cap;
            pthread_mutex_unlock(&p->lock);
            return h;
        }
    }
    size_t cap = PIN_MIN;
    while (cap < size && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (cap < size || cap > p->limit || p->total > p->limit - cap) {
        pthread_mutex_unlock(&p->lock); /* over the ring's size: ordinary memory */
        return NULL;
    }
    p->total += cap;
    pthread_mutex_unlock(&p->lock);
    void *mem = NULL;
    if (gf_host_alloc_pinned(p->be, sizeof(pin_hdr) + cap, &mem, NULL) != GF_OK) {
        pthread_mutex_lock(&p->lock);
        p->total -= cap;
        pthread_mutex_unlock(&p->lock);
        return NULL;
    }
    pin_hdr *h = mem;
    h->cap = cap;
    h->pinned = true;
    return h;
}

void *wk_pinned_alloc(void *ctx, uint32_t type, size_t size)
{
    wk_pinned *p = ctx;
    pin_hdr *h = type == GF_IPC_INFER || type == GF_IPC_RESULT ? pinned_get(p, size) : NULL;
    if (h == NULL) {
        void *mem = NULL;
        if (size > SIZE_MAX - sizeof(pin_hdr) ||
            posix_memalign(&mem, 64, sizeof(pin_hdr) + size) != 0)
            return NULL;
        h = mem;
        h->cap = size;
        h->pinned = false;
    }
    h->next = NULL;
    return h + 1;
}

void *wk_pinned_alloc_out(void *ctx, size_t size)
{
    return wk_pinned_alloc(ctx, GF_IPC_RESULT, size);
}

void wk_pinned_free(void *ctx, void *payload)
{
    wk_pinned *p = ctx;
    if (payload == NULL)
        return;
    pin_hdr *h = (pin_hdr *)payload - 1;
    if (!h->pinned) {
        free(h);
        return;
    }
    pthread_mutex_lock(&p->lock); /* kept for the next request (total <= limit) */
    h->next = p->free_list;
    p->free_list = h;
    p->pooled += h->cap;
    pthread_mutex_unlock(&p->lock);
}
