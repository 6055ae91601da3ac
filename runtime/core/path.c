/* gpufaas — file system paths. */
#include "core/path.h"

#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *gf_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

#define GF_DERIVED_KEY_MAX 200

char *gf_derived_name(const char *key)
{
    char safe[GF_DERIVED_KEY_MAX + 1];
    size_t n = 0;
    bool changed = false;
    const char *p = key;
    for (; *p != '\0' && n < GF_DERIVED_KEY_MAX; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '@' || (c == '.' && n > 0);
        changed = changed || !ok;
        safe[n++] = ok ? c : '_';
    }
    changed = changed || *p != '\0' || n == 0;
    safe[n] = '\0';
    char *out = malloc(n + 64);
    if (out == NULL)
        return NULL;
    if (!changed) {
        snprintf(out, n + 64, "%s.safetensors", safe);
        return out;
    }
    /* FNV-1a (64 bits) of the whole key: only tells distinct keys apart */
    uint64_t h = 0xcbf29ce484222325ull;
    for (p = key; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    snprintf(out, n + 64, "%s-%016llx.safetensors", safe, (unsigned long long)h);
    return out;
}

void gf_path_rmtree(const char *path)
{
    nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}
