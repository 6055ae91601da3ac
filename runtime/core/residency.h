/* gpufaas — a function's residency on the device (runtime/core): the one
 * definition the manifest, the parameter cache, the worker protocol, the
 * store and the APIs share.
 *
 *   pin          never evicted from the device while the worker's pin limit
 *                allows (pinned bytes are capped, so that pinning cannot
 *                starve the functions that are not pinned);
 *   priority     a class: when the device is full, idle models of a lower
 *                class are evicted before any of a higher one (within a
 *                class, the eviction policy decides);
 *   keep_warm_us after each use the model stays on the device at least this
 *                long (0 = no such guarantee); kept-warm bytes share the pin
 *                limit, the least recently used losing the guarantee first.
 *
 * Manifest form: "residency": {"pin": false, "priority": "normal",
 * "keep_warm_s": 0} (every member optional). The values of gf_priority
 * are stable (they cross the worker protocol).
 */
#ifndef GF_CORE_RESIDENCY_H
#define GF_CORE_RESIDENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_priority {
    GF_PRIORITY_LOW = 0,    /* "low": evicted first */
    GF_PRIORITY_NORMAL = 1, /* "normal": the default */
    GF_PRIORITY_HIGH = 2,   /* "high": evicted last */
} gf_priority;

#define GF_PRIORITY_COUNT 3

/* Longest keep-warm guarantee a function may ask for (a day). */
#define GF_KEEP_WARM_MAX_US (86400ull * 1000000ull)

typedef struct gf_residency {
    bool pin;
    gf_priority priority;
    uint64_t keep_warm_us;
} gf_residency;

/* Not pinned, normal priority, no keep-warm guarantee. */
#define GF_RESIDENCY_DEFAULT ((gf_residency){false, GF_PRIORITY_NORMAL, 0})

/* "low", "normal", "high" ("normal" for anything else). */
const char *gf_priority_name(gf_priority p);

/* The class named s (exactly "low", "normal" or "high"); GF_ERR_INVALID
 * naming the choices otherwise. */
gf_status gf_priority_parse(const char *s, gf_priority *out, gf_err *err);

/* GF_OK when r is in range (a known priority, keep_warm_us at most
 * GF_KEEP_WARM_MAX_US); else GF_ERR_INVALID naming the member. */
gf_status gf_residency_check(const gf_residency *r, gf_err *err);

struct gf_json;
struct gf_buf;

/* Read a residency object ({"pin": bool, "priority": "low"|"normal"|"high",
 * "keep_warm_s": seconds >= 0}; members absent keep their defaults; any
 * other member, a duplicate or a wrong type is GF_ERR_INVALID naming it). */
gf_status gf_residency_from_json(const struct gf_json *obj, gf_residency *out, gf_err *err);

/* Append r as that object, every member written. */
gf_status gf_residency_to_json(const gf_residency *r, struct gf_buf *out);

/* True when the two are equal. */
bool gf_residency_equal(const gf_residency *a, const gf_residency *b);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_RESIDENCY_H */
