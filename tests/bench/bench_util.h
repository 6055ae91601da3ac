/* gpufaas — what the benchmarks share (tests/bench): a monotonic clock in
 * seconds, the process's CPU seconds and the median of a sample. */
#ifndef GF_TESTS_BENCH_UTIL_H
#define GF_TESTS_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double gf_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all its threads): on a loaded machine
 * this measures the work, where wall time measures the neighbours too. */
static inline double gf_bench_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int gf_bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[n] (sorts v). */
static inline double gf_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, gf_bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* GF_TESTS_BENCH_UTIL_H */
