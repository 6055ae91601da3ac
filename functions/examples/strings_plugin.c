/* gpufaas example plugin: the `strings` kind, a function of BYTES tensors.
 *
 * It shows the BYTES part of the ABI (1.5): a BYTES input is host memory in
 * Triton's serialization (walk it with gf_fn_bytes_next), a BYTES output is
 * set with api->output_bytes, and a numeric output computed on the host goes
 * to the device with api->upload. For each string of its input it answers
 * the string with every byte mapped through a table (upper-casing, say) and
 * its length in bytes:
 *
 *   weights: "table"  U8 [256]: byte b becomes table[b]
 *   inputs:  "text"   BYTES [-1]  (or [-1, n]: rows of n strings)
 *   outputs: "mapped" BYTES, the input's shape
 *            "length" INT32, the input's shape
 *
 * Strings are host work, so load keeps a host copy of the table (state
 * never holds device memory); it is also required as a parameter, as every
 * weights tensor must be used.
 * Build: cc -shared -fPIC -I<prefix>/include strings_plugin.c -o libgf_example_strings.so
 * and start the server with --allow-native-functions --plugin that.so. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

typedef struct {
    unsigned char table[256];
} strings_state;

static int strings_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    if (!GF_FN_HAS(api, output_bytes))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "strings needs a runtime with ABI 1.5");
    if (api->input_count(ctx) != 1 || api->output_count(ctx) != 2)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "strings takes one input (text) and two outputs (mapped, length)");
    gf_fn_io in, up, len;
    api->input_spec(ctx, 0, &in);
    api->output_spec(ctx, 0, &up);
    api->output_spec(ctx, 1, &len);
    if (in.dtype != GF_DT_BYTES || up.dtype != GF_DT_BYTES || len.dtype != GF_DT_I32 ||
        up.rank != in.rank || len.rank != in.rank)
        return api->set_error(ctx, GF_ERR_INVALID, "strings: input '%s' and output '%s' must be "
                              "BYTES and output '%s' INT32, all of one rank", in.name, up.name,
                              len.name);
    strings_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "strings: out of memory");
    const int64_t shape[1] = {256};
    size_t index;
    int rc = api->require(ctx, "table", 1u << GF_DT_U8, 1, shape, &index);
    gf_tensor t;
    if (rc == 0 && !api->validating(ctx) && (rc = api->weight_data(ctx, "table", &t)) == 0)
        memcpy(st->table, t.data, sizeof st->table);
    if (rc != 0) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static int strings_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    const strings_state *st = state;
    gf_tensor x, y;
    int rc = api->input(ctx, 0, &x);
    if (rc != 0)
        return rc;
    size_t n = 1;
    for (int32_t d = 0; d < x.rank; d++)
        n *= (size_t)x.shape[d];
    const void **elems = calloc(n ? n : 1, sizeof *elems);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    int32_t *counts = calloc(n ? n : 1, sizeof *counts);
    unsigned char *mapped = malloc(x.nbytes ? x.nbytes : 1); /* the strings are shorter */
    if (elems == NULL || lens == NULL || counts == NULL || mapped == NULL) {
        rc = api->set_error(ctx, GF_ERR_NOMEM, "strings: out of memory");
        goto out;
    }
    size_t pos = 0, at = 0, k = 0;
    const void *e;
    size_t m;
    while (k < n && gf_fn_bytes_next(&x, &pos, &e, &m)) {
        for (size_t i = 0; i < m; i++)
            mapped[at + i] = st->table[((const unsigned char *)e)[i]];
        elems[k] = mapped + at;
        lens[k] = m;
        counts[k] = m > INT32_MAX ? INT32_MAX : (int32_t)m;
        at += m;
        k++;
    }
    if (k != n) {
        rc = api->set_error(ctx, GF_ERR_INTERNAL, "strings: %zu elements, expected %zu", k, n);
        goto out;
    }
    if ((rc = api->output_bytes(ctx, 0, x.rank, x.shape, elems, lens)) != 0 ||
        (rc = api->output(ctx, 1, x.rank, x.shape, &y)) != 0)
        goto out;
    rc = api->upload(ctx, y.data, counts, n * sizeof *counts);
out:
    free(elems);
    free(lens);
    free(counts);
    free(mapped);
    return rc;
}

static void strings_unload(void *state)
{
    free(state);
}

static const gf_fn_desc strings_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ "strings",
    /* .load = */ strings_load,
    /* .infer = */ strings_infer,
    /* .unload = */ strings_unload,
};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &strings_desc;
}
