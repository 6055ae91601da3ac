/* gpufaas — byte sizes as people write them. */
#include "core/units.h"

#include <stdio.h>
#include <string.h>

#include "core/tensor.h"

gf_status gf_size_parse(const char *s, uint64_t *out, gf_err *err)
{
    const char *p = s;
    uint64_t v = 0;
    if (s == NULL || *p < '0' || *p > '9')
        return gf_err_set(err, GF_ERR_INVALID, "'%s' is not a size (digits, then K, M, G or T)",
                          s != NULL ? s : "");
    while (*p >= '0' && *p <= '9') {
        if (!gf_u64_mul(v, 10, &v) || !gf_u64_add(v, (uint64_t)(*p - '0'), &v))
            return gf_err_set(err, GF_ERR_OVERFLOW, "size '%s' is too large", s);
        p++;
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: break;
    }
    if (shift != 0) {
        p++;
        if (strcmp(p, "iB") == 0 || strcmp(p, "B") == 0)
            p += strlen(p);
    }
    if (*p != '\0')
        return gf_err_set(err, GF_ERR_INVALID, "'%s' is not a size (digits, then K, M, G or T)",
                          s);
    if (shift != 0 && v > (UINT64_MAX >> shift))
        return gf_err_set(err, GF_ERR_OVERFLOW, "size '%s' is too large", s);
    *out = v << shift;
    return GF_OK;
}

char *gf_size_format(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else if (v == (double)(uint64_t)v)
        snprintf(buf, cap, "%.0f %s", v, units[u]);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

char *gf_size_format_exact(uint64_t bytes, char *buf, size_t cap)
{
    static const char units[] = "KMGT";
    int u = -1;
    uint64_t v = bytes;
    while (v != 0 && v % 1024 == 0 && u < 3) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%llu%c", (unsigned long long)v, units[u]);
    return buf;
}
