/* gpufaas — Triton's system shared memory extension (gateway/http): the
 * regions clients register, and the bytes of a tensor in one.
 *
 * A client creates a POSIX shared memory object (shm_open; tritonclient's
 * utils.shared_memory, perf_analyzer --shared-memory system), registers
 * byte_size bytes of it from offset under a name, and then names the region
 * in an inference's inputs and outputs instead of sending the bytes over
 * HTTP. The gateway maps each region once, at register, to check spans;
 * the tensors go to the worker by reference (gf_shm_tensor_ref: the object's key
 * and the span's offset in it), and the worker maps the object itself,
 * reads its inputs there and writes its outputs there: their bytes never
 * cross the worker's socket, nor are they copied in the gateway.
 *
 * Regions are reference-counted: a request that named one keeps it mapped
 * until it is done, even when it is unregistered meanwhile. Thread-safe.
 */
#ifndef GF_GATEWAY_HTTP_SHM_H
#define GF_GATEWAY_HTTP_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"
#include "gateway/core/gateway.h"

#define GF_SHM_MAX_REGIONS 256
#define GF_SHM_NAME_MAX 63

typedef struct gf_shm_table gf_shm_table;
typedef struct gf_shm_region gf_shm_region;

/* A new, empty table (*out; gf_shm_table_free). GF_ERR_NOMEM. The objects
 * of regions unregistered are forgotten by gw's workers (gf_gw_shm_forget;
 * gw NULL: none). */
gf_status gf_shm_table_new(gf_gw *gw, gf_shm_table **out);

/* Unmap every region (those requests still hold go when they are put). */
void gf_shm_table_free(gf_shm_table *t);

/* Whether name may name a region: 1..GF_SHM_NAME_MAX of [A-Za-z0-9_.-]. */
bool gf_shm_name_valid(const char *name);

/* Map byte_size bytes from offset of the shared memory object key under
 * name. GF_ERR_INVALID naming the problem: a name already registered, a key
 * that does not open, a range past the object's end, a zero size;
 * GF_ERR_TOO_LARGE past GF_SHM_MAX_REGIONS. */
gf_status gf_shm_register(gf_shm_table *t, const char *name, const char *key, uint64_t offset,
                          uint64_t byte_size, gf_err *err);

/* Forget region name (NULL: every region). An unknown name is
 * GF_ERR_NOT_FOUND. */
gf_status gf_shm_unregister(gf_shm_table *t, const char *name, gf_err *err);

/* Append [{"name", "key", "offset", "byte_size"}] of region name (NULL:
 * every region) to out. An unknown name is GF_ERR_NOT_FOUND. */
gf_status gf_shm_status_json(gf_shm_table *t, const char *name, gf_buf *out, gf_err *err);

/* The region called name with a reference (gf_shm_put), or NULL when none
 * is registered under it. */
gf_shm_region *gf_shm_get(gf_shm_table *t, const char *name);

/* Drop a reference; the last one unmaps. NULL is a no-op. */
void gf_shm_put(gf_shm_region *r);

/* The size bytes at offset of the region, or NULL (with err naming the
 * region, its size and the range; GF_ERR_INVALID) when they do not lie in
 * it. what names the tensor in the message ("input 'x'"). */
void *gf_shm_span(gf_shm_region *r, uint64_t offset, uint64_t size, const char *what,
                  gf_err *err);

/* The span [offset, offset + size) of region r as a tensor's shared memory
 * reference: the object's key and the offset from the object's start (the
 * region's offset + offset). With hold, the reference keeps r registered
 * and mapped (the caller's reference to r passes to it: gf_gw_tensors_free
 * puts it); without, it borrows r's key for as long as the caller holds r. */
gf_gw_shm gf_shm_tensor_ref(gf_shm_region *r, uint64_t offset, uint64_t size, bool hold);

#endif /* GF_GATEWAY_HTTP_SHM_H */
