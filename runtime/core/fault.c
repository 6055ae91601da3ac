/* gpufaas — fault injection for tests. */
#include "core/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GF_FAULT_SITES 16

volatile int gf_fault_armed_any = 0;

static struct {
    char site[32];
    long countdown; /* calls left before the first failure; 0 = failing now */
    long remaining; /* failures left; < 0 = unlimited */
    long failures;
} gf_faults[GF_FAULT_SITES];
static int gf_fault_n;
static pthread_mutex_t gf_fault_lock = PTHREAD_MUTEX_INITIALIZER;

void gf_fault_arm(const char *site, long nth, long repeat)
{
    pthread_mutex_lock(&gf_fault_lock);
    int i;
    for (i = 0; i < gf_fault_n; i++)
        if (strcmp(gf_faults[i].site, site) == 0)
            break;
    if (i == gf_fault_n && gf_fault_n < GF_FAULT_SITES) {
        gf_fault_n++;
        strncpy(gf_faults[i].site, site, sizeof gf_faults[i].site - 1);
        gf_faults[i].site[sizeof gf_faults[i].site - 1] = '\0';
    }
    if (i < GF_FAULT_SITES) {
        gf_faults[i].countdown = nth > 0 ? nth - 1 : 0;
        gf_faults[i].remaining = repeat == 0 ? 1 : repeat;
        gf_faults[i].failures = 0;
        gf_fault_armed_any = 1;
    }
    pthread_mutex_unlock(&gf_fault_lock);
}

/* One "site:nth[:repeat]" entry of len bytes at p. */
static bool fault_parse_one(const char *p, size_t len, char *site, size_t cap, long *nth,
                            long *repeat)
{
    const char *colon = memchr(p, ':', len);
    if (colon == NULL || colon == p || (size_t)(colon - p) >= cap)
        return false;
    memcpy(site, p, (size_t)(colon - p));
    site[colon - p] = '\0';
    char num[48];
    size_t rest = len - (size_t)(colon - p) - 1;
    if (rest == 0 || rest >= sizeof num)
        return false;
    memcpy(num, colon + 1, rest);
    num[rest] = '\0';
    char *end;
    errno = 0;
    *nth = strtol(num, &end, 10);
    if (errno != 0 || end == num || *nth < 1)
        return false;
    *repeat = 1;
    if (*end == ':') {
        char *r = end + 1;
        *repeat = strtol(r, &end, 10);
        if (errno != 0 || end == r || *repeat == 0)
            return false;
    }
    return *end == '\0';
}

gf_status gf_fault_arm_spec(const char *spec, gf_err *err)
{
    if (spec == NULL || spec[0] == '\0')
        return GF_OK;
    /* check every entry before arming any */
    for (int pass = 0; pass < 2; pass++) {
        const char *p = spec;
        while (*p != '\0') {
            const char *comma = strchr(p, ',');
            size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
            char site[32];
            long nth, repeat;
            if (!fault_parse_one(p, len, site, sizeof site, &nth, &repeat))
                return gf_err_set(err, GF_ERR_INVALID,
                                  "fault spec entry '%.*s' is not site:nth[:repeat]", (int)len,
                                  p);
            if (pass == 1)
                gf_fault_arm(site, nth, repeat);
            p += len;
            if (*p == ',')
                p++;
        }
    }
    return GF_OK;
}

void gf_fault_reset(void)
{
    pthread_mutex_lock(&gf_fault_lock);
    gf_fault_n = 0;
    gf_fault_armed_any = 0;
    memset(gf_faults, 0, sizeof gf_faults);
    pthread_mutex_unlock(&gf_fault_lock);
}

bool gf_fault_hit(const char *site)
{
    bool hit = false;
    pthread_mutex_lock(&gf_fault_lock);
    for (int i = 0; i < gf_fault_n; i++) {
        if (strcmp(gf_faults[i].site, site) != 0)
            continue;
        if (gf_faults[i].remaining == 0)
            break;
        if (gf_faults[i].countdown > 0) {
            gf_faults[i].countdown--;
            break;
        }
        hit = true;
        gf_faults[i].failures++;
        if (gf_faults[i].remaining > 0)
            gf_faults[i].remaining--;
        break;
    }
    pthread_mutex_unlock(&gf_fault_lock);
    return hit;
}

long gf_fault_failures(const char *site)
{
    long n = 0;
    pthread_mutex_lock(&gf_fault_lock);
    for (int i = 0; i < gf_fault_n; i++)
        if (strcmp(gf_faults[i].site, site) == 0)
            n = gf_faults[i].failures;
    pthread_mutex_unlock(&gf_fault_lock);
    return n;
}
