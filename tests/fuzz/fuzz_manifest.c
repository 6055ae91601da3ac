/* libFuzzer target: the manifest parser (functions/manifest.c); what it
 * accepts must survive its canonical form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "functions/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gf_manifest *m = NULL;
    gf_err err;
    if (gf_manifest_parse((const char *)data, size, &m, &err) != GF_OK)
        return 0;
    gf_buf a, b;
    gf_buf_init(&a);
    gf_buf_init(&b);
    gf_manifest *m2 = NULL;
    if (gf_manifest_to_json(m, &a) != GF_OK || gf_manifest_parse(a.data, a.len, &m2, &err) != GF_OK ||
        gf_manifest_to_json(m2, &b) != GF_OK || a.len != b.len || memcmp(a.data, b.data, a.len))
        abort(); /* the canonical form does not read back as itself */
    gf_buf_deinit(&a);
    gf_buf_deinit(&b);
    gf_manifest_free(m);
    gf_manifest_free(m2);
    return 0;
}
