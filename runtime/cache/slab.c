/* gpufaas — shared pages for small models. See slab.h. */
#include "cache/slab.h"

#include <stdlib.h>
#include <string.h>

bool gf_slab_place(gf_slab *s, size_t len, size_t *off)
{
    if (len == 0 || len > s->size || s->size - s->used < len)
        return false;
    size_t at = 0, k = 0;
    for (; k < s->n_ext; k++) { /* the first gap before extent k that holds len */
        if (s->ext[k].off - at >= len)
            break;
        at = s->ext[k].off + s->ext[k].len;
    }
    if (k == s->n_ext && s->size - at < len)
        return false;
    if (s->n_ext == s->cap_ext) {
        size_t cap = s->cap_ext ? 2 * s->cap_ext : 8;
        gf_slab_extent *e = realloc(s->ext, cap * sizeof *e);
        if (e == NULL)
            return false;
        s->ext = e;
        s->cap_ext = cap;
    }
    memmove(&s->ext[k + 1], &s->ext[k], (s->n_ext - k) * sizeof *s->ext);
    s->ext[k] = (gf_slab_extent){at, len};
    s->n_ext++;
    s->used += len;
    *off = at;
    return true;
}

void gf_slab_remove(gf_slab *s, size_t off)
{
    for (size_t k = 0; k < s->n_ext; k++) {
        if (s->ext[k].off != off)
            continue;
        s->used -= s->ext[k].len;
        memmove(&s->ext[k], &s->ext[k + 1], (s->n_ext - k - 1) * sizeof *s->ext);
        s->n_ext--;
        return;
    }
}

void gf_slab_deinit(gf_slab *s)
{
    free(s->ext);
    s->ext = NULL;
    s->n_ext = s->cap_ext = 0;
}
