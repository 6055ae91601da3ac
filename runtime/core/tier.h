/* gpufaas — the tiers a model's parameters live in, and the device tier's
 * eviction policies (runtime/core): one definition for the cache, the worker
 * protocol, the store and the gateway.
 *
 * The values are stable: they cross the worker protocol (runtime/ipc.h), and
 * the names are what SQLite stores and the APIs show.
 */
#ifndef GF_CORE_TIER_H
#define GF_CORE_TIER_H

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slowest first: a move to a higher tier is a load, to a lower one an
 * eviction. */
typedef enum gf_tier {
    GF_TIER_NONE = -1,  /* in no tier above the store (evicted everywhere), or unknown */
    GF_TIER_STORE = 0,  /* "store": the version's weights file, mmap'd */
    GF_TIER_HOST = 1,   /* "host": a worker's (pinned) host memory */
    GF_TIER_DEVICE = 2, /* "device": a worker's device pool */
} gf_tier;

/* "store", "host", "device"; "none" for GF_TIER_NONE and anything else. */
const char *gf_tier_name(gf_tier t);

/* True for GF_TIER_STORE, GF_TIER_HOST and GF_TIER_DEVICE. */
static inline int gf_tier_valid(int t)
{
    return t >= GF_TIER_STORE && t <= GF_TIER_DEVICE;
}

/* How the device tier chooses what to evict. */
typedef enum gf_evict_policy {
    GF_EVICT_LRU = 0,  /* "lru": least recently used */
    GF_EVICT_GDS = 1,  /* "gds": GreedyDual-Size (cheap to reload per byte goes first) */
    GF_EVICT_GDSF = 2, /* "gdsf": GreedyDual-Size-Frequency (uses x reload cost per byte) */
} gf_evict_policy;

/* "lru", "gds", "gdsf". */
const char *gf_evict_policy_name(gf_evict_policy p);

/* The policy named s ("lru", "gds" or "gdsf", any case); GF_ERR_INVALID
 * otherwise, saying which names there are. */
gf_status gf_evict_policy_parse(const char *s, gf_evict_policy *out, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_TIER_H */
