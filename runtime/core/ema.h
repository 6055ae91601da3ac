/* gpufaas — the moving average of what the runtime measures to predict a
 * cost (runtime/core).
 *
 * One smoothing for every place that estimates how long something takes from
 * what it took before: a function's execution time in the worker (is it
 * quick enough to run on the reader thread?) and in the gateway's router (the
 * exec term of queue + swap + exec), and the cache's load bandwidth from each
 * tier (the swap term, and GreedyDual's cost of a miss). An exponentially
 * weighted average: the newest sample weighs GF_EMA_WEIGHT, so a change shows
 * within a handful of samples while one outlier moves it by a fifth.
 */
#ifndef GF_CORE_EMA_H
#define GF_CORE_EMA_H

#define GF_EMA_WEIGHT 0.2

/* The average after sample x; avg <= 0 means no sample yet (x is then it). */
static inline double gf_ema(double avg, double x)
{
    return avg > 0 ? avg + GF_EMA_WEIGHT * (x - avg) : x;
}

#endif /* GF_CORE_EMA_H */
