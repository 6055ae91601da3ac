/* libFuzzer target: the safetensors reader (runtime/core/safetensors.c) on
 * any bytes. A file it accepts must be self-consistent: every tensor found by
 * name, its data inside the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gf_st_file *f = NULL;
    gf_err err;
    gf_err_clear(&err);
    if (gf_st_parse(data, size, &f, &err) != GF_OK) {
        if (f != NULL || err.msg[0] == '\0')
            abort(); /* a failure leaves nothing and says why */
        return 0;
    }
    for (size_t i = 0; i < gf_st_count(f); i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        if (gf_st_find(f, t->name) != t)
            abort();
        const uint8_t *p = t->data;
        if (t->nbytes > 0 && (p < data || p + t->nbytes > data + size))
            abort();
    }
    for (size_t i = 0; i < gf_st_meta_count(f); i++) {
        const char *k, *v;
        gf_st_meta_at(f, i, &k, &v);
        if (gf_st_meta_get(f, k) != v)
            abort();
    }
    gf_st_close(f);
    return 0;
}
