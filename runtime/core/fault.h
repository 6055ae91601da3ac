/* gpufaas — fault injection for tests (runtime/core).
 *
 * In the manner of SQLite's faultsim: a call site that can fail in the field
 * (an allocation, a device call, a copy) asks GF_FAULT("site") and, when it
 * answers true, fails exactly as it would for real. Tests arm a site to fail
 * its Nth call from now and assert a clean error and no leak. When nothing is
 * armed the check is one load of a global flag.
 *
 * Sites used so far: "dev_alloc" (the budget has no room this time: the
 * backend's reclaimer is asked, as when another thread took the room),
 * "dev_page_alloc", "dev_map", "host_alloc",
 * "memcpy_async" (at queue time), "copy_exec" (on the copy stream, reported by
 * the next event/stream sync), "cache_alloc", "device_lost" (cpu: the compute
 * stream's sync finds the device lost, as a CUDA context after a fault, and
 * every later device call fails).
 */
#ifndef GF_CORE_FAULT_H
#define GF_CORE_FAULT_H

#include <stdbool.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

extern volatile int gf_fault_armed_any;

/* True when the current call at site should fail. Thread-safe. */
bool gf_fault_hit(const char *site);

/* Make the nth call (1 = the next) at site fail, and the `repeat` - 1 calls
 * after it too (repeat < 0: every call from the nth on). Thread-safe. */
void gf_fault_arm(const char *site, long nth, long repeat);

/* Arm sites from a spec "site:nth[:repeat][,site:nth[:repeat]...]" (nth and
 * repeat as for gf_fault_arm; repeat defaults to 1), as tests hand a worker
 * process in GPUFAAS_FAULTS. NULL or "" arms nothing. GF_ERR_INVALID naming
 * the bad entry, with nothing armed. err may be NULL. */
gf_status gf_fault_arm_spec(const char *spec, gf_err *err);

/* Disarm every site and forget their counters. */
void gf_fault_reset(void);

/* How many times site failed since it was armed. */
long gf_fault_failures(const char *site);

#define GF_FAULT(site) (gf_fault_armed_any && gf_fault_hit(site))

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_FAULT_H */
