/* gpufaas — tier and eviction policy names. */
#include "core/tier.h"

#include <strings.h>

const char *gf_tier_name(gf_tier t)
{
    switch (t) {
    case GF_TIER_STORE: return "store";
    case GF_TIER_HOST: return "host";
    case GF_TIER_DEVICE: return "device";
    case GF_TIER_NONE: break;
    }
    return "none";
}

static const char *const gf_policy_names[] = {
    [GF_EVICT_LRU] = "lru", [GF_EVICT_GDS] = "gds", [GF_EVICT_GDSF] = "gdsf"};

const char *gf_evict_policy_name(gf_evict_policy p)
{
    return (unsigned)p < sizeof gf_policy_names / sizeof gf_policy_names[0] ? gf_policy_names[p]
                                                                             : "lru";
}

gf_status gf_evict_policy_parse(const char *s, gf_evict_policy *out, gf_err *err)
{
    for (size_t i = 0; i < sizeof gf_policy_names / sizeof gf_policy_names[0]; i++) {
        if (s != NULL && strcasecmp(s, gf_policy_names[i]) == 0) {
            *out = (gf_evict_policy)i;
            return GF_OK;
        }
    }
    return gf_err_set(err, GF_ERR_INVALID, "'%.40s' is not lru, gds or gdsf", s != NULL ? s : "");
}
