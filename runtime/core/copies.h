/* gpufaas — the count of user-space copies of tensor bytes (runtime/core).
 *
 * Issue 16 counts, on the request path, every user-space pass that writes a
 * tensor's values into another buffer: a memcpy, a JSON parse or render, the
 * accumulation of a request body that holds them. Host-to-device and
 * device-to-host copies are not counted (they are the ones that must be), nor
 * the kernel's socket copies. Each copy point adds the tensor bytes it wrote,
 * in the direction of the request (IN: towards the function, OUT: back to the
 * client), so copied bytes / tensor bytes = copies per request.
 *
 * The counters are per process (the gateway's and each worker's are apart),
 * monotonic, relaxed atomics: any thread may add, any thread may read. */
#ifndef GF_CORE_COPIES_H
#define GF_CORE_COPIES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_copy_dir { GF_COPY_IN = 0, GF_COPY_OUT = 1 } gf_copy_dir;

/* Count `bytes` tensor bytes copied in direction d. */
void gf_copies_add(gf_copy_dir d, uint64_t bytes);

/* Tensor bytes copied in direction d by this process so far. */
uint64_t gf_copies_bytes(gf_copy_dir d);

#ifdef __cplusplus
}
#endif

#endif
