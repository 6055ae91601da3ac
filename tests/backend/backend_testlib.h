/* What the backend suites' files share (test_backend.c defines it): the
 * device under test and small helpers over it. Each file adds its tests to
 * the one TCase through its tb_*_tests function. */
#ifndef GF_TESTS_BACKEND_TESTLIB_H
#define GF_TESTS_BACKEND_TESTLIB_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The device named by argv[1] ("cpu" by default), and whether it is cpu. */
extern const char *tb_device;
extern bool tb_is_cpu;

/* Opens tb_device under `budget` bytes with pages of 64 KiB where the
 * device allows it; fails the test on error. `hook` (cpu only) sees each
 * copy. */
gf_backend *tb_open_be(uint64_t budget, gf_cpu_copy_hook hook, void *arg);

/* The page size the device gives for a request of 64 KiB (64 KiB on cpu,
 * the allocation granularity on a GPU), asked in the test's own process. */
size_t tb_dev_page(void);

/* Copies n bytes host -> device / device -> host on the compute stream and
 * waits for them; fails the test on error. */
void tb_to_dev(gf_backend *be, void *dst, const void *src, size_t n);
void tb_from_dev(gf_backend *be, void *dst, const void *src, size_t n);

/* The copy stream and events (test_backend_stream.c); the PCIe link
 * (test_backend_pcie.c). */
void tb_stream_tests(TCase *tc);
void tb_pcie_tests(TCase *tc);

#endif
