/* gpufaas — the moving average of a function's execution time (runtime/core).
 *
 * One smoothing for every place that estimates how long a function runs: the
 * worker (is it quick enough to run on the reader thread?) and the gateway's
 * router (the exec term of queue + swap + exec). An exponentially weighted
 * average: the newest sample weighs GF_EMA_WEIGHT, so a change in a model's
 * speed shows within a handful of requests while one slow outlier moves it
 * by a fifth.
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
