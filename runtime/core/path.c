/* gpufaas — file system paths. */
#include "core/path.h"

#include <ftw.h>
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

void gf_path_rmtree(const char *path)
{
    nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}
