/* gpufaas — what the worker protocol's encoder (ipc.c) and decoder
 * (ipc_decode.c) share; private to runtime/. See ipc.h. */
#ifndef GF_IPC_WIRE_H
#define GF_IPC_WIRE_H

#include "ipc.h"

#include <stdint.h>

static inline uint64_t gf_ipc_le_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The sum of the data bytes of n tensors that travel in the frame (not
 * those in shared memory). */
static inline uint64_t gf_ipc_tensor_bytes(const gf_ipc_tensor *t, uint32_t n)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t[i].shm_key == NULL)
            sum += t[i].t.nbytes;
    return sum;
}

#endif
