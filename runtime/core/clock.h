/* gpufaas — clocks (runtime/core).
 *
 * The one place that reads the time: monotonic time for durations and
 * deadlines, wall-clock time for what is recorded (logs, the database,
 * events), and deadlines for pthread_cond_timedwait. Header-only so every
 * layer (the CUDA module included) uses it without linking anything. */
#ifndef GF_CORE_CLOCK_H
#define GF_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t gf_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Monotonic time: for durations and deadlines. */
static inline uint64_t gf_mono_ns(void) { return gf_clock_ns(CLOCK_MONOTONIC); }
static inline uint64_t gf_mono_us(void) { return gf_mono_ns() / 1000u; }
static inline double gf_mono_s(void) { return (double)gf_mono_ns() * 1e-9; }

/* Wall-clock (CLOCK_REALTIME) microseconds since the epoch: for records. */
static inline int64_t gf_wall_us(void) { return (int64_t)(gf_clock_ns(CLOCK_REALTIME) / 1000u); }

/* *out = now + after_ns on clock, for pthread_cond_timedwait on a condition
 * variable that uses that clock. */
static inline void gf_deadline_after(clockid_t clock, uint64_t after_ns, struct timespec *out)
{
    uint64_t t = gf_clock_ns(clock) + after_ns;
    out->tv_sec = (time_t)(t / 1000000000u);
    out->tv_nsec = (long)(t % 1000000000u);
}

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_CLOCK_H */
