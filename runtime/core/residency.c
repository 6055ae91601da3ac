/* gpufaas — residency names and checks (see residency.h). */
#include "core/residency.h"

#include <math.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"

static const char *const gf_priority_names[GF_PRIORITY_COUNT] = {
    [GF_PRIORITY_LOW] = "low", [GF_PRIORITY_NORMAL] = "normal", [GF_PRIORITY_HIGH] = "high"};

const char *gf_priority_name(gf_priority p)
{
    return (unsigned)p < GF_PRIORITY_COUNT ? gf_priority_names[p] : "normal";
}

gf_status gf_priority_parse(const char *s, gf_priority *out, gf_err *err)
{
    for (int i = 0; i < GF_PRIORITY_COUNT; i++) {
        if (s != NULL && strcmp(s, gf_priority_names[i]) == 0) {
            *out = (gf_priority)i;
            return GF_OK;
        }
    }
    return gf_err_set(err, GF_ERR_INVALID, "priority '%.40s' is not low, normal or high",
                      s != NULL ? s : "");
}

gf_status gf_residency_check(const gf_residency *r, gf_err *err)
{
    if ((unsigned)r->priority >= GF_PRIORITY_COUNT)
        return gf_err_set(err, GF_ERR_INVALID, "priority %d is not low, normal or high",
                          (int)r->priority);
    if (r->keep_warm_us > GF_KEEP_WARM_MAX_US)
        return gf_err_set(err, GF_ERR_INVALID, "keep_warm_s is at most %llu (a day)",
                          (unsigned long long)(GF_KEEP_WARM_MAX_US / 1000000ull));
    return GF_OK;
}

bool gf_residency_equal(const gf_residency *a, const gf_residency *b)
{
    return a->pin == b->pin && a->priority == b->priority && a->keep_warm_us == b->keep_warm_us;
}

gf_status gf_residency_from_json(const gf_json *obj, gf_residency *out, gf_err *err)
{
    gf_residency r = GF_RESIDENCY_DEFAULT;
    if (obj == NULL || obj->type != GF_JSON_OBJECT)
        return gf_err_set(err, GF_ERR_INVALID, "residency must be an object, not %s",
                          obj != NULL ? gf_json_type_name(obj->type) : "nothing");
    long dup = gf_json_obj_find_dup(obj);
    if (dup >= 0)
        return gf_err_set(err, GF_ERR_INVALID, "residency: \"%.40s\" appears twice",
                          obj->u.obj.m[dup].key);
    for (size_t i = 0; i < obj->u.obj.n; i++) {
        const char *k = obj->u.obj.m[i].key;
        const gf_json *v = obj->u.obj.m[i].value;
        if (strcmp(k, "pin") == 0) {
            if (v->type != GF_JSON_BOOL)
                return gf_err_set(err, GF_ERR_INVALID, "residency: \"pin\" must be true or "
                                  "false");
            r.pin = v->u.b;
        } else if (strcmp(k, "priority") == 0) {
            if (v->type != GF_JSON_STRING)
                return gf_err_set(err, GF_ERR_INVALID, "residency: \"priority\" must be "
                                  "\"low\", \"normal\" or \"high\"");
            gf_status st = gf_priority_parse(v->u.str.s, &r.priority, err);
            if (st != GF_OK)
                return gf_err_prefix(err, "residency");
        } else if (strcmp(k, "keep_warm_s") == 0) {
            double max_s = (double)(GF_KEEP_WARM_MAX_US / 1000000ull);
            if (v->type != GF_JSON_NUMBER || !isfinite(v->u.num.d) || v->u.num.d < 0 ||
                v->u.num.d > max_s)
                return gf_err_set(err, GF_ERR_INVALID, "residency: \"keep_warm_s\" must be a "
                                  "number of seconds in [0, %.0f]", max_s);
            r.keep_warm_us = (uint64_t)(v->u.num.d * 1e6 + 0.5);
        } else {
            return gf_err_set(err, GF_ERR_INVALID, "residency: unknown member \"%.40s\" (pin, "
                              "priority, keep_warm_s)", k);
        }
    }
    *out = r;
    return GF_OK;
}

gf_status gf_residency_to_json(const gf_residency *r, gf_buf *out)
{
    return gf_buf_printf(out, "{\"pin\":%s,\"priority\":\"%s\",\"keep_warm_s\":%.17g}",
                         r->pin ? "true" : "false", gf_priority_name(r->priority),
                         (double)r->keep_warm_us / 1e6);
}
