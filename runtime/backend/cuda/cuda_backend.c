/* gpufaas — the cuda backend module (libgf_backend_cuda.so).
 *
 * Loaded with dlopen by backend.c, so that binaries never link the CUDA
 * runtime or the driver library directly and one build runs on machines
 * with and without a GPU. Device memory comes from cudaMalloc; pages are
 * physical allocations of the driver's virtual memory management API
 * (cuMemCreate) mapped into ranges reserved with cuMemAddressReserve; the
 * driver functions are reached through cudaGetDriverEntryPointByVersion,
 * never by linking libcuda. Streams are two non-blocking cudaStreams;
 * events are cudaEvents without timing, with blocking synchronisation. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_impl.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/page_pool.h"
#include "backend/pcie.h"
#include "core/log.h"
#include "core/tensor.h"

#define GF_CUDA_DEFAULT_RESERVE ((size_t)1 << 30)

typedef struct {
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
} cuda_vmm;

typedef struct {
    gf_backend *be;
    int index;
    const gf_backend_hostfns *host;
    cuda_vmm vmm;
    CUmemAllocationProp prop;
    struct gf_stream compute, copy;
    gf_cuda_kctx *kctx;
    /* the page pool (be->pool, backend.c's): a physical allocation per
     * committed page, created on first use, kept for reuse while the budget
     * allows and released when an allocation needs its room */
    CUmemGenericAllocationHandle *handles;
} cuda_ctx;

struct gf_event {
    cudaEvent_t ev;
};

static __thread int gf_cuda_current = -1;

/* Make the backend's device current on the calling thread. */
static void cuda_enter(cuda_ctx *c)
{
    if (gf_cuda_current != c->index) {
        cudaSetDevice(c->index);
        gf_cuda_current = c->index;
    }
}

static gf_status cuda_fail(gf_err *err, gf_status code, const char *call, cudaError_t e)
{
    cudaGetLastError(); /* clear a non-sticky error so later calls are not blamed */
    return gf_err_set(err, code, "%s failed: %s (%s)", call, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

static gf_status cu_fail(gf_err *err, gf_status code, const char *call, CUresult r)
{
    return gf_err_set(err, code, "%s failed: CUresult %d", call, (int)r);
}

/* ---- memory ----------------------------------------------------------------- */

static gf_status cuda_dev_alloc(gf_backend *be, size_t size, void **out, gf_err *err)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    cudaError_t e = cudaMalloc(out, size ? size : 1);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc(%zu)", size);
        return cuda_fail(err, GF_ERR_NO_DEVICE_MEM, what, e);
    }
    return GF_OK;
}

static void cuda_dev_free(gf_backend *be, void *ptr)
{
    cuda_enter(be->context);
    cudaFree(ptr);
}

static gf_status cuda_host_alloc(gf_backend *be, size_t size, void **out, gf_err *err)
{
    cuda_enter(be->context);
    cudaError_t e = cudaHostAlloc(out, size ? size : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaHostAlloc(%zu)", size);
        return cuda_fail(err, GF_ERR_NOMEM, what, e);
    }
    return GF_OK;
}

static void cuda_host_free(gf_backend *be, void *ptr)
{
    cuda_enter(be->context);
    cudaFreeHost(ptr);
}

static gf_status cuda_vreserve(gf_backend *be, size_t size, void **out, gf_err *err)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUdeviceptr p = 0;
    /* the alignment must be a power of two (or 0, the granularity): the page
     * size is one (gf_page_size_choose), so the range starts on a page */
    CUresult r = c->vmm.reserve(&p, size, be->page_size, 0, 0);
    if (r != CUDA_SUCCESS)
        return cu_fail(err, GF_ERR_NO_DEVICE_MEM, "cuMemAddressReserve", r);
    *out = (void *)(uintptr_t)p;
    return GF_OK;
}

static void cuda_vrelease(gf_backend *be, void *base, size_t size)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUresult r = c->vmm.address_free((CUdeviceptr)(uintptr_t)base, size);
    if (r != CUDA_SUCCESS)
        GF_LOG_E("cuMemAddressFree(%p, %zu) failed: CUresult %d", base, size, (int)r);
}

static gf_status cuda_page_commit(gf_backend *be, int64_t p, gf_err *err)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUresult r = c->vmm.create(&c->handles[p], be->page_size, &c->prop, 0);
    if (r != CUDA_SUCCESS)
        return cu_fail(err, GF_ERR_NO_DEVICE_MEM, "cuMemCreate", r);
    return GF_OK;
}

/* The page is free, so unmapped everywhere: cuMemRelease frees its memory at
 * once ("when all outstanding mappings to the memory are unmapped", cuda.h). */
static void cuda_page_release(gf_backend *be, int64_t p)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUresult r = c->vmm.release(c->handles[p]);
    if (r != CUDA_SUCCESS)
        GF_LOG_E("cuMemRelease(page %lld) failed: CUresult %d", (long long)p, (int)r);
    c->handles[p] = 0;
}

static gf_status cuda_map(gf_backend *be, void *addr, int64_t page, gf_err *err)
{
    cuda_ctx *c = be->context;
    if (!gf_page_pool_is_committed(&be->pool, page))
        return gf_err_set(err, GF_ERR_INVALID, "page %lld is not an allocated pool page",
                          (long long)page);
    cuda_enter(c);
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    CUresult r = c->vmm.map(p, be->page_size, 0, c->handles[page], 0);
    if (r != CUDA_SUCCESS)
        return cu_fail(err, GF_ERR_DEVICE, "cuMemMap", r);
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = c->index;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = c->vmm.set_access(p, be->page_size, &desc, 1);
    if (r != CUDA_SUCCESS) {
        c->vmm.unmap(p, be->page_size);
        return cu_fail(err, GF_ERR_DEVICE, "cuMemSetAccess", r);
    }
    return GF_OK;
}

/* Map the pages one after another, then set the access of the whole range
 * with one cuMemSetAccess (per page it is most of a mapping's cost). */
static gf_status cuda_map_range(gf_backend *be, void *addr, const int64_t *pages, size_t n,
                                gf_err *err)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)addr;
    size_t done = 0;
    gf_status st = GF_OK;
    for (; done < n; done++) {
        if (!gf_page_pool_is_committed(&be->pool, pages[done])) {
            st = gf_err_set(err, GF_ERR_INVALID, "page %lld is not an allocated pool page",
                            (long long)pages[done]);
            break;
        }
        CUresult r = c->vmm.map(base + done * be->page_size, be->page_size, 0,
                                c->handles[pages[done]], 0);
        if (r != CUDA_SUCCESS) {
            st = cu_fail(err, GF_ERR_DEVICE, "cuMemMap", r);
            break;
        }
    }
    if (st == GF_OK) {
        CUmemAccessDesc desc;
        memset(&desc, 0, sizeof desc);
        desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc.location.id = c->index;
        desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CUresult r = c->vmm.set_access(base, n * be->page_size, &desc, 1);
        if (r == CUDA_SUCCESS)
            return GF_OK;
        st = cu_fail(err, GF_ERR_DEVICE, "cuMemSetAccess", r);
    }
    for (size_t i = 0; i < done; i++)
        c->vmm.unmap(base + i * be->page_size, be->page_size);
    return st;
}

static gf_status cuda_unmap(gf_backend *be, void *addr, gf_err *err)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    CUresult r = c->vmm.unmap((CUdeviceptr)(uintptr_t)addr, be->page_size);
    if (r != CUDA_SUCCESS)
        return cu_fail(err, GF_ERR_DEVICE, "cuMemUnmap", r);
    return GF_OK;
}

/* ---- streams, copies, events ---------------------------------------------------- */

static gf_stream *cuda_stream(gf_backend *be, gf_stream_kind kind)
{
    cuda_ctx *c = be->context;
    return kind == GF_STREAM_COPY ? &c->copy : &c->compute;
}

static gf_status cuda_memcpy_async(gf_backend *be, gf_stream *s, void *dst, const void *src,
                                   size_t n, gf_copy_kind kind, gf_err *err)
{
    (void)kind; /* unified addressing: the runtime knows where each pointer lives */
    cuda_enter(be->context);
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaMemcpyAsync", e);
    return GF_OK;
}

/* Wait for everything queued on s, then report and clear its deferred
 * kernel error. The error words are copied into pinned memory by a copy
 * queued before the wait (only when a kernel that may write them ran since
 * the last sync), so no synchronous cudaMemcpy is needed to read them. */
static gf_status cuda_sync_stream(struct gf_stream *s, gf_err *err)
{
    int armed = s->error_armed;
    cudaError_t e;
    if (armed) {
        e = cudaMemcpyAsync(s->host_error, s->dev_error, 3 * sizeof(long long),
                            cudaMemcpyDeviceToHost, s->stream);
        if (e != cudaSuccess)
            return cuda_fail(err, GF_ERR_DEVICE, "queueing the read of the stream's error word",
                             e);
    }
    e = cudaStreamSynchronize(s->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaStreamSynchronize", e);
    if (!armed)
        return GF_OK;
    s->error_armed = 0;
    const long long *words = s->host_error;
    if (words[0] == 0)
        return GF_OK;
    gf_status code = (gf_status)(words[0] & 0xffffffff);
    unsigned long long kind = (unsigned long long)words[0] >> 32;
    long long bad = words[1], limit = words[2];
    /* clear it in stream order, so an error recorded after this sync by work
     * queued on the stream is not erased */
    cudaMemsetAsync(s->dev_error, 0, 3 * sizeof(long long), s->stream);
    switch (kind) {
    case GF_DEVERR_INDEX_NEG:
        return gf_err_set(err, code,
                          "a kernel found an out-of-range index %lld (valid: %lld to %lld)", bad,
                          -limit, limit - 1);
    case GF_DEVERR_DIV_ZERO:
        return gf_err_set(err, code, "a kernel found an integer division or modulo by zero");
    default:
        return gf_err_set(err, code,
                          "a kernel found an out-of-range index %lld (valid: 0 to %lld)", bad,
                          limit - 1);
    }
}

static gf_status cuda_stream_sync(gf_backend *be, gf_stream *s, gf_err *err)
{
    cuda_enter(be->context);
    return cuda_sync_stream(s, err);
}

static int cuda_kernel_sync(void *kctx, gf_stream *s)
{
    (void)kctx;
    return (int)cuda_sync_stream(s, NULL);
}

static gf_status cuda_event_new(gf_backend *be, gf_event **out, gf_err *err)
{
    cuda_enter(be->context);
    gf_event *ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for an event");
    /* BlockingSync: cudaEventSynchronize then sleeps in the driver until the
     * event completes instead of busy-waiting ("If the cudaEventBlockingSync
     * flag has not been set, then the CPU thread will busy-wait", runtime
     * API): the cache's loader waits on staging and load events for as long
     * as a model takes to copy, and would spin a core of the worker's for
     * all of it. cudaStreamWaitEvent and cudaEventQuery are unaffected. */
    cudaError_t e =
        cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming | cudaEventBlockingSync);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail(err, GF_ERR_DEVICE, "cudaEventCreateWithFlags", e);
    }
    *out = ev;
    return GF_OK;
}

static void cuda_event_free(gf_backend *be, gf_event *ev)
{
    cuda_enter(be->context);
    cudaEventDestroy(ev->ev);
    free(ev);
}

static gf_status cuda_event_record(gf_backend *be, gf_event *ev, gf_stream *s, gf_err *err)
{
    cuda_enter(be->context);
    cudaError_t e = cudaEventRecord(ev->ev, s->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaEventRecord", e);
    return GF_OK;
}

static gf_status cuda_stream_wait_event(gf_backend *be, gf_stream *s, gf_event *ev, gf_err *err)
{
    cuda_enter(be->context);
    cudaError_t e = cudaStreamWaitEvent(s->stream, ev->ev, 0);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaStreamWaitEvent", e);
    return GF_OK;
}

static bool cuda_event_query(gf_backend *be, gf_event *ev)
{
    cuda_enter(be->context);
    cudaError_t e = cudaEventQuery(ev->ev);
    if (e == cudaErrorNotReady)
        return false;
    if (e != cudaSuccess)
        cudaGetLastError();
    return true; /* done, or failed: a sync reports which */
}

static gf_status cuda_event_sync(gf_backend *be, gf_event *ev, gf_err *err)
{
    cuda_enter(be->context);
    cudaError_t e = cudaEventSynchronize(ev->ev);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaEventSynchronize", e);
    return GF_OK;
}

/* ---- a lost device ---------------------------------------------------------------- */

/* True for the errors after which the CUDA context is unusable: the runtime
 * API documents each of these as leaving "the process in an inconsistent
 * state ... any further CUDA work will return the same error. To continue
 * using CUDA, the process must be terminated and relaunched"
 * (driver_types.h), plus an uncorrectable ECC or NVLink error and a
 * destroyed context, which no call can undo either. */
static bool cuda_is_sticky(cudaError_t e)
{
    switch ((int)e) {
    case cudaErrorIllegalAddress:      /* 700 */
    case cudaErrorLaunchTimeout:       /* 702 */
    case cudaErrorContextIsDestroyed:  /* 709 */
    case cudaErrorAssert:              /* 710 */
    case cudaErrorHardwareStackError:  /* 714 */
    case cudaErrorIllegalInstruction:  /* 715 */
    case cudaErrorMisalignedAddress:   /* 716 */
    case cudaErrorInvalidAddressSpace: /* 717 */
    case cudaErrorInvalidPc:           /* 718 */
    case cudaErrorLaunchFailure:       /* 719 */
    case cudaErrorECCUncorrectable:    /* 214 */
    case cudaErrorNvlinkUncorrectable: /* 220 */
    case 226:                          /* cudaErrorContained (CUDA 12.x+) */
    case 721:                          /* cudaErrorTensorMemoryLeak (CUDA 12.x+) */
    case 810:                          /* cudaErrorMpsClientTerminated */
    case 911:                          /* cudaErrorExternalDevice */
    case cudaErrorUnknown:             /* 999: what a GPU gone from the bus gives */
        return true;
    default:
        return false;
    }
}

/* Probe: a sticky error is returned by every call, so a query of the
 * backend's streams (cheap, never blocks) reports it; NotReady and success
 * mean the context works. A non-sticky error of the query itself is
 * cleared and does not count. */
static bool cuda_lost(gf_backend *be)
{
    cuda_ctx *c = be->context;
    cuda_enter(c);
    struct gf_stream *streams[2] = {&c->compute, &c->copy};
    for (int i = 0; i < 2; i++) {
        cudaError_t e = cudaStreamQuery(streams[i]->stream);
        if (e == cudaSuccess || e == cudaErrorNotReady)
            continue;
        if (cuda_is_sticky(e)) {
            GF_LOG_E("cuda:%d: %s (%s)", c->index, cudaGetErrorString(e), cudaGetErrorName(e));
            return true;
        }
        cudaGetLastError();
    }
    return false;
}

/* ---- info ---------------------------------------------------------------------- */

/* PCIe link from sysfs (the runtime API does not report it): the most the
 * link supports, not its current (idle-lowered) speed; see pcie.h. */
static void cuda_pcie_link(int index, gf_device_info *info)
{
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    for (char *p = bus; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    char path[128];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s", bus);
    gf_pcie_link link;
    gf_pcie_link_read(path, &link);
    info->pcie_gen = link.gen;
    info->pcie_width = link.width;
    info->link_peak_gbps = link.gbps;
}

static void cuda_refresh_info(gf_backend *be, gf_device_info *info)
{
    cuda_enter(be->context);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        info->free_memory = free_b;
    else
        cudaGetLastError();
}

/* ---- lifetime -------------------------------------------------------------------- */

static void cuda_stream_destroy(struct gf_stream *s)
{
    if (s->dev_error != NULL)
        cudaFree(s->dev_error);
    if (s->host_error != NULL)
        cudaFreeHost(s->host_error);
    if (s->stream != NULL)
        cudaStreamDestroy(s->stream);
    memset(s, 0, sizeof *s);
}

static gf_status cuda_stream_create(struct gf_stream *s, gf_stream_kind kind, gf_err *err)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "cudaStreamCreateWithFlags", e);
    e = cudaMalloc((void **)&s->dev_error, 3 * sizeof(long long));
    if (e == cudaSuccess)
        e = cudaMemset(s->dev_error, 0, 3 * sizeof(long long));
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&s->host_error, 3 * sizeof(long long), cudaHostAllocDefault);
    if (e != cudaSuccess)
        return cuda_fail(err, GF_ERR_DEVICE, "allocating the stream's error word", e);
    return GF_OK;
}

static void cuda_free(gf_backend *be)
{
    cuda_ctx *c = be->context;
    if (c != NULL) {
        cuda_enter(c);
        cudaDeviceSynchronize();
        gf_cuda_kctx_free(c->kctx);
        cuda_stream_destroy(&c->copy);
        cuda_stream_destroy(&c->compute);
        if (c->handles != NULL)
            for (int64_t i = 0; i < be->n_pages; i++)
                if (gf_page_pool_is_committed(&be->pool, i))
                    c->vmm.release(c->handles[i]);
        free(c->handles);
        free(c);
    }
    be->context = NULL;
}

static const struct gf_backend_iface cuda_iface = {
    /* .free = */ cuda_free,
    /* .refresh_info = */ cuda_refresh_info,
    /* .dev_alloc = */ cuda_dev_alloc,
    /* .dev_free = */ cuda_dev_free,
    /* .vreserve = */ cuda_vreserve,
    /* .vrelease = */ cuda_vrelease,
    /* .page_commit = */ cuda_page_commit,
    /* .page_release = */ cuda_page_release,
    /* .map = */ cuda_map,
    /* .unmap = */ cuda_unmap,
    /* .host_alloc = */ cuda_host_alloc,
    /* .host_free = */ cuda_host_free,
    /* .stream = */ cuda_stream,
    /* .memcpy_async = */ cuda_memcpy_async,
    /* .stream_sync = */ cuda_stream_sync,
    /* .event_new = */ cuda_event_new,
    /* .event_free = */ cuda_event_free,
    /* .event_record = */ cuda_event_record,
    /* .stream_wait_event = */ cuda_stream_wait_event,
    /* .event_query = */ cuda_event_query,
    /* .event_sync = */ cuda_event_sync,
    /* .lost = */ cuda_lost,
    /* .map_range = */ cuda_map_range,
};

static gf_status cuda_load_vmm(cuda_vmm *v, gf_err *err)
{
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
        {"cuMemGetAllocationGranularity", offsetof(cuda_vmm, granularity)},
        {"cuMemCreate", offsetof(cuda_vmm, create)},
        {"cuMemRelease", offsetof(cuda_vmm, release)},
        {"cuMemAddressReserve", offsetof(cuda_vmm, reserve)},
        {"cuMemAddressFree", offsetof(cuda_vmm, address_free)},
        {"cuMemMap", offsetof(cuda_vmm, map)},
        {"cuMemUnmap", offsetof(cuda_vmm, unmap)},
        {"cuMemSetAccess", offsetof(cuda_vmm, set_access)},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult q;
        cudaError_t e = cudaGetDriverEntryPointByVersion(syms[i].name, &fn, 12000,
                                                         cudaEnableDefault, &q);
        if (e != cudaSuccess || fn == NULL || q != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            return gf_err_set(err, GF_ERR_DEVICE,
                              "the driver does not provide %s (virtual memory management)",
                              syms[i].name);
        }
        memcpy((char *)v + syms[i].off, &fn, sizeof fn);
    }
    return GF_OK;
}

static int cuda_ws_alloc(void *arg, size_t size, void **out)
{
    cuda_ctx *c = arg;
    return (int)c->host->dev_alloc(c->be, size, out, NULL);
}

static void cuda_ws_free(void *arg, void *ptr)
{
    cuda_ctx *c = arg;
    c->host->dev_free(c->be, ptr);
}

static int cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* "driver version is insufficient", "no CUDA-capable device": no GPU */
        cudaGetLastError();
        return 0;
    }
    return n;
}

static gf_status cuda_open(const gf_backend_config *cfg, int index, const gf_backend_hostfns *host,
                           gf_backend **out, gf_err *err)
{
    *out = NULL;
    gf_status st;
    gf_backend *be = calloc(1, sizeof *be);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory opening cuda:%d", index);
    }
    be->iface = cuda_iface;
    be->context = c;
    be->precommit = true; /* cuMemCreate per page at start, never on a swap-in */
    c->be = be;
    c->index = index;
    c->host = host;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess)
        e = cudaFree(NULL); /* create the context now, not on the first request */
    if (e != cudaSuccess) {
        st = cuda_fail(err, GF_ERR_DEVICE, "initialising the CUDA context", e);
        goto fail;
    }
    gf_cuda_current = index;
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, index);
    if (e != cudaSuccess) {
        st = cuda_fail(err, GF_ERR_DEVICE, "cudaGetDeviceProperties", e);
        goto fail;
    }
    if ((st = cuda_load_vmm(&c->vmm, err)) != GF_OK)
        goto fail;
    memset(&c->prop, 0, sizeof c->prop);
    c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->prop.location.id = index;
    size_t gran = 0;
    CUresult r = c->vmm.granularity(&gran, &c->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0) {
        st = cu_fail(err, GF_ERR_DEVICE, "cuMemGetAllocationGranularity", r);
        goto fail;
    }
    size_t page;
    if ((st = gf_page_size_choose(cfg->page_size, gran, (size_t)1 << 30, &page, err)) != GF_OK)
        goto fail;
    be->page_size = page;
    size_t free_b = 0, total_b = 0;
    e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        st = cuda_fail(err, GF_ERR_DEVICE, "cudaMemGetInfo", e);
        goto fail;
    }
    size_t reserve = cfg->device_reserve ? cfg->device_reserve : GF_CUDA_DEFAULT_RESERVE;
    if (cfg->device_budget != 0) {
        be->budget = cfg->device_budget;
        if (be->budget > free_b)
            GF_LOG_W("cuda:%d: budget %zu exceeds the %zu bytes free now", index,
                     (size_t)be->budget, free_b);
    } else if (free_b > reserve) {
        be->budget = free_b - reserve;
    } else {
        st = gf_err_set(err, GF_ERR_INVALID,
                        "cuda:%d: only %zu bytes free, less than the %zu-byte reserve", index,
                        free_b, reserve);
        goto fail;
    }
    int64_t pool_pages = (int64_t)(be->budget / page);
    be->n_pages = pool_pages;
    c->handles = calloc((size_t)(pool_pages ? pool_pages : 1), sizeof *c->handles);
    if (c->handles == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory for a pool of %lld pages",
                        (long long)pool_pages);
        goto fail;
    }
    if ((st = cuda_stream_create(&c->compute, GF_STREAM_COMPUTE, err)) != GF_OK ||
        (st = cuda_stream_create(&c->copy, GF_STREAM_COPY, err)) != GF_OK)
        goto fail;
    if ((st = gf_cuda_kctx_new(cuda_ws_alloc, cuda_ws_free, c, &c->kctx, err)) != GF_OK)
        goto fail;
    gf_cuda_kernels_fill(&be->kernels, c->kctx);
    be->kernels.sync = cuda_kernel_sync;

    gf_device_info *info = &be->info;
    info->kind = GF_DEVICE_CUDA;
    info->index = index;
    size_t nl = strnlen(prop.name, sizeof prop.name);
    if (nl >= sizeof info->name)
        nl = sizeof info->name - 1;
    memcpy(info->name, prop.name, nl);
    info->name[nl] = '\0';
    info->total_memory = total_b;
    info->free_memory = free_b;
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    cuda_pcie_link(index, info);
    *out = be;
    return GF_OK;
fail:
    cuda_free(be);
    free(be);
    return st;
}

static void cuda_set_log(const char *role, int level)
{
    gf_log_init(role, (gf_log_level)level);
}

static const gf_backend_module gf_cuda_module_desc = {
    /* .abi = */ GF_BACKEND_MODULE_ABI,
    /* .size = */ sizeof(gf_backend_module),
    /* .device_count = */ cuda_device_count,
    /* .open = */ cuda_open,
    /* .set_log = */ cuda_set_log,
};

const gf_backend_module *gf_backend_cuda_module(void);

__attribute__((visibility("default"))) const gf_backend_module *gf_backend_cuda_module(void)
{
    return &gf_cuda_module_desc;
}
