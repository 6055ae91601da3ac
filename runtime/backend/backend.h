/* gpufaas — the device interface (runtime/backend).
 *
 * One opaque gf_backend per device, opened by name ("cpu", "cuda:0"). It
 * offers, with the same contract on every backend:
 *
 *  - device memory under a byte budget the caller sets: plain allocations
 *    (activations, workspace) and fixed-size physical pages that are mapped
 *    into reserved virtual ranges (the parameter cache's unit of accounting).
 *    Both count against the one budget; exceeding it is GF_ERR_NO_DEVICE_MEM.
 *  - pinned host memory (the source of fast asynchronous copies);
 *  - two streams, compute and copy, with asynchronous copies and events;
 *  - the kernel table (gpufaas/kernels.h);
 *  - device information.
 *
 * cpu: "device memory" is a separate budgeted heap; pages come from one memfd
 * and are mapped with mmap(MAP_FIXED) into PROT_NONE reservations; the copy
 * stream is a thread; the compute stream is the calling thread (work on it is
 * done when the call returns); events are counters with condition variables.
 * cuda: cudaMalloc/cudaHostAlloc, the driver's VMM API (reached through
 * cudaGetDriverEntryPointByVersion, never by linking libcuda), two
 * cudaStreams, cudaEvents, cuBLAS and our own kernels; it lives in a module
 * (libgf_backend_cuda.so) loaded with dlopen, so one build runs everywhere.
 *
 * Threading: one thread drives a backend (the worker's executor) except where
 * a function says otherwise; event query/sync may be called from any thread.
 */
#ifndef GF_BACKEND_H
#define GF_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/kernels.h>
#include <gpufaas/types.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_backend gf_backend;
typedef struct gf_event gf_event;
/* gf_stream is declared in gpufaas/kernels.h */

#define GF_DEFAULT_PAGE_SIZE ((size_t)2 << 20) /* 2 MiB */

/* Called on the cpu copy thread before each copy it performs (tests use it
 * to hold or slow the copy stream deterministically). */
typedef void (*gf_cpu_copy_hook)(void *arg, size_t nbytes);

typedef struct gf_backend_config {
    const char *device;     /* "cpu", "cuda" (= cuda:0) or "cuda:N" */
    size_t device_budget;   /* bytes; 0 = default (cpu: 1 GiB; cuda: free memory - reserve) */
    size_t device_reserve;  /* cuda: bytes left free when budget is 0 (0 = 1 GiB) */
    size_t page_size;       /* 0 = GF_DEFAULT_PAGE_SIZE; rounded up to a power of two that is
                               at least the device granularity (cpu: the system page size;
                               cuda: cuMemGetAllocationGranularity); at most 1 GiB */
    int blas_threads;       /* cpu: OpenBLAS threads (0 = 1) */
    /* cpu only: emulate a link of this many bytes/s on the copy stream
     * (0 = as fast as memcpy), for benchmarks and pipelining tests. */
    uint64_t cpu_copy_bandwidth;
    gf_cpu_copy_hook cpu_copy_hook; /* cpu only; may be NULL */
    void *cpu_copy_hook_arg;
    bool precommit; /* commit the whole page pool from the start, in the background
                       (cuda always does; cpu when set, for tests) */
} gf_backend_config;

typedef enum gf_device_kind { GF_DEVICE_CPU = 0, GF_DEVICE_CUDA = 1 } gf_device_kind;

typedef struct gf_device_info {
    gf_device_kind kind;
    int index;              /* cuda ordinal; 0 for cpu */
    char name[128];         /* "cpu (OpenBLAS, 2 threads)", "NVIDIA H200" */
    uint64_t total_memory;  /* physical device memory (cpu: system RAM) */
    uint64_t free_memory;   /* at the time of the query */
    uint64_t budget;        /* the budget in force */
    size_t page_size;       /* the page size in force */
    int cc_major, cc_minor; /* cuda compute capability; 0 on cpu */
    int pcie_gen, pcie_width; /* cuda link (0 when unknown) */
    double link_peak_gbps;  /* theoretical host<->device GB/s (0 when unknown) */
} gf_device_info;

typedef enum gf_stream_kind { GF_STREAM_COMPUTE = 0, GF_STREAM_COPY = 1 } gf_stream_kind;

typedef enum gf_copy_kind {
    GF_COPY_H2D = 0,
    GF_COPY_D2H = 1,
    GF_COPY_D2D = 2,
    GF_COPY_H2H = 3,
} gf_copy_kind;

/* ---- lifetime ---- */

/* Open a device. *out is owned by the caller (gf_backend_free). Fails with
 * GF_ERR_NOT_FOUND for a device that does not exist (no GPU, no module),
 * GF_ERR_INVALID for a malformed name or budget. */
gf_status gf_backend_open(const gf_backend_config *cfg, gf_backend **out, gf_err *err);

/* Wait for all streams, free everything the backend allocated. NULL is a no-op. */
void gf_backend_free(gf_backend *be);

/* Number of CUDA devices usable here (0 when there is no driver, no GPU or
 * the module was not built). Never fails. */
int gf_backend_cuda_device_count(void);

/* True once the device is lost: a fault (an illegal address, an
 * uncorrectable ECC error, a kernel that trapped) left the CUDA context
 * unusable. Such an error is sticky: every later call fails with it and
 * nothing short of a new process clears it, so the caller fails what it
 * holds and exits (the worker exits with GF_WORKER_EXIT_DEVICE and the
 * gateway starts a fresh one). Cheap (one stream query the first time):
 * call it after a device call failed. Any thread. cpu: only through the
 * fault-injection site "device_lost". */
bool gf_backend_lost(gf_backend *be);

/* Information about the device (fresh free_memory on each call). */
void gf_backend_info(gf_backend *be, gf_device_info *out);

/* The device's index (cuda ordinal, 0 for cpu), without querying the
 * device: cheap enough for every tensor descriptor on the request path. */
int gf_backend_device_index(gf_backend *be);

/* The kernel table; lives as long as be. */
const gf_kernels *gf_backend_kernels(gf_backend *be);

/* The backend's per-request device arena (backend/arena.h): what a request
 * allocates on the device comes from it, never from gf_dev_alloc. Lives as
 * long as be. */
struct gf_dev_arena *gf_backend_arena(gf_backend *be);

/* ---- device memory ---- */

/* Plain device allocation of size bytes (256-byte aligned), counted against
 * the budget. When the budget has no room it asks the reclaimer (below) to
 * make some, and tries again. GF_ERR_NO_DEVICE_MEM when the budget would
 * still be exceeded. */
gf_status gf_dev_alloc(gf_backend *be, size_t size, void **out, gf_err *err);

/* Frees room in the budget for an allocation of `bytes` if it can (the
 * parameter cache evicts idle models) and returns the bytes of the budget
 * now free. Called by gf_dev_alloc with no backend lock held, on the thread
 * allocating (the kernels' workspace grows inside a kernel call). */
typedef uint64_t (*gf_reclaim_fn)(void *arg, uint64_t bytes);

/* Register the backend's reclaimer (one at a time; fn NULL clears it). Set
 * and clear it while no other thread allocates. */
void gf_backend_set_reclaim(gf_backend *be, gf_reclaim_fn fn, void *arg);
/* Free a gf_dev_alloc block; NULL is a no-op. Waits for nothing: the caller
 * makes sure no queued work still uses it. */
void gf_dev_free(gf_backend *be, void *ptr);

/* Budget accounting: bytes in use (allocations + pages taken) and the
 * budget. Pages freed keep their memory for the next taker, but an
 * allocation that needs their room releases them first, so budget - used is
 * what can still be allocated. */
void gf_dev_usage(gf_backend *be, uint64_t *used, uint64_t *budget);

/* Device memory the backend holds: allocations plus every page with memory
 * behind it, taken or free in the pool. Never more than the budget. */
uint64_t gf_dev_held(gf_backend *be);

/* True once the background commit of the page pool (a backend that
 * precommits) has ended: every page committed, the budget's room taken by
 * allocations, or a commit failed (the rest are committed on first use).
 * True at once for a backend that does not precommit. */
bool gf_dev_precommit_done(gf_backend *be);

/* Page size in force (a power of two, a multiple of the device's granularity). */
size_t gf_dev_page_size(gf_backend *be);

/* Reserve a virtual range of size bytes (a multiple of the page size) with no
 * memory behind it; costs no budget. *out is page-aligned. */
gf_status gf_dev_vreserve(gf_backend *be, size_t size, void **out, gf_err *err);
/* Release a range from gf_dev_vreserve; every page in it must be unmapped. */
void gf_dev_vrelease(gf_backend *be, void *base, size_t size);

/* Take one physical page from the pool (counted against the budget). A page
 * freed earlier is reused before a new one is committed. Never calls the
 * reclaimer (the cache takes pages under its own lock and evicts itself).
 * *page is an opaque handle >= 0. */
gf_status gf_dev_page_alloc(gf_backend *be, int64_t *page, gf_err *err);
/* Return a page to the pool; it must not be mapped anywhere. */
void gf_dev_page_free(gf_backend *be, int64_t page);

/* Map n pages one after another from addr (page-aligned, inside a
 * reservation, the whole range unmapped), readable and writable by the
 * device, with the access set once for the range (cuda: one cuMemSetAccess,
 * not one per page). On failure nothing of the range stays mapped. */
gf_status gf_dev_map_range(gf_backend *be, void *addr, const int64_t *pages, size_t n,
                           gf_err *err);
/* Unmap the n pages mapped from addr (failures are logged). */
void gf_dev_unmap_range(gf_backend *be, void *addr, size_t n);

/* How many device allocations and frees the backend has made so far:
 * gf_dev_alloc and gf_dev_page_alloc calls that succeeded (allocs),
 * gf_dev_free and gf_dev_page_free calls (frees). A warm request makes none
 * (the worker's STATS report them). */
void gf_dev_counters(gf_backend *be, uint64_t *allocs, uint64_t *frees);

/* Map page at addr (page-aligned, inside a reservation, currently unmapped),
 * readable and writable by the device. A page is mapped at one address at a
 * time; its bytes follow it from one mapping to the next. */
gf_status gf_dev_map(gf_backend *be, void *addr, int64_t page, gf_err *err);
/* Unmap the page at addr; the reservation stays. */
gf_status gf_dev_unmap(gf_backend *be, void *addr, gf_err *err);

/* ---- pinned host memory ---- */

/* Page-locked host memory (cpu: page-aligned ordinary memory). Not counted
 * against the device budget. */
gf_status gf_host_alloc_pinned(gf_backend *be, size_t size, void **out, gf_err *err);
void gf_host_free_pinned(gf_backend *be, void *ptr);

/* ---- streams, copies, events ---- */

/* The backend's streams; live as long as be. */
gf_stream *gf_backend_stream(gf_backend *be, gf_stream_kind kind);

/* Queue a copy of n bytes on s. Returns once queued (cpu compute stream:
 * once done). Source and destination must stay valid until the copy is done
 * (record an event after it to know). */
gf_status gf_memcpy_async(gf_backend *be, gf_stream *s, void *dst, const void *src, size_t n,
                          gf_copy_kind kind, gf_err *err);

/* Wait until everything queued on s is done; reports the first deferred
 * error of s (a failed copy, a kernel's out-of-range index) and clears it. */
gf_status gf_stream_sync(gf_backend *be, gf_stream *s, gf_err *err);

gf_status gf_event_new(gf_backend *be, gf_event **out, gf_err *err);
void gf_event_free(gf_backend *be, gf_event *ev);
/* Capture the work queued on s so far: the event completes when it is done. */
gf_status gf_event_record(gf_backend *be, gf_event *ev, gf_stream *s, gf_err *err);
/* Make later work on s wait until ev (as last recorded) completes. On the
 * cpu compute stream this blocks the caller. */
gf_status gf_stream_wait_event(gf_backend *be, gf_stream *s, gf_event *ev, gf_err *err);
/* True when ev's captured work is done (an event never recorded is done).
 * Any thread. */
bool gf_event_query(gf_backend *be, gf_event *ev);
/* Block until ev completes. Returns the stream's deferred error, if any work
 * before ev failed. Any thread. */
gf_status gf_event_sync(gf_backend *be, gf_event *ev, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_H */
