/* libFuzzer target: the KServe v2 request codec (gateway/http/codec.c),
 * JSON and the binary tensor extension. The first byte picks the options
 * (bit 0: an Inference-Header-Content-Length is given, the next two bytes,
 * little-endian; bit 1: v1's FP16-as-JSON); the rest is the body. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gateway/http/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned mode = data[0];
    unsigned hlen = data[1] | (unsigned)data[2] << 8;
    data += 3;
    size -= 3;
    char hl[32];
    const char *hlp = NULL;
    if (mode & 1) {
        snprintf(hl, sizeof hl, "%u", hlen);
        hlp = hl;
    }
    gf_codec_opts opts = {.half_as_json = (mode & 2) != 0, .max_depth = 0};
    gf_codec_request r;
    gf_err err;
    if (gf_codec_request_parse((const char *)data, size, hlp, &opts, &r, &err) == GF_OK) {
        for (size_t i = 0; i < r.n_inputs; i++)
            if (r.inputs[i].t.nbytes > 0 && r.inputs[i].t.data == NULL)
                abort();
        gf_codec_request_deinit(&r);
    } else if (r.inputs != NULL || r.outputs != NULL || r.id != NULL) {
        abort(); /* a failure holds nothing */
    }
    return 0;
}
