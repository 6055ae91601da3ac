/* What worker_ipc's files share (test_ipc.c defines it). */
#ifndef GF_TESTS_WORKER_IPC_TESTLIB_H
#define GF_TESTS_WORKER_IPC_TESTLIB_H

#include <check.h>
#include <stdint.h>

#include "core/buf.h"

/* Append to b an INFER frame (request id) of two tensors with different
 * alignment needs: x F32 [2, 3] and mask_0 I32 [3]. Fails the test on error. */
void ti_encode_sample_infer(gf_buf *b, uint64_t id);

/* The frame I/O tests (test_ipc_io.c), as the TCase "io". */
TCase *ti_io_tcase(void);

#endif
