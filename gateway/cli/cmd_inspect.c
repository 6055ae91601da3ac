/* gpufaas inspect FILE.safetensors */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "gateway/cli/cli.h"

static void inspect_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas inspect FILE.safetensors\n\n"
                 "Validate a safetensors file and list its tensors (name, dtype, shape, bytes)\n"
                 "and metadata. A malformed file is reported on stderr with the reason, and\n"
                 "the exit status is 1.\n");
}

int gf_cmd_inspect(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        inspect_usage(stdout);
        return 0;
    }
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 < argc && path == NULL)
                path = argv[++i];
            if (i + 1 < argc) {
                fprintf(stderr, "gpufaas inspect: unexpected argument '%s'\n", argv[i + 1]);
                return 2;
            }
            break;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "gpufaas inspect: unknown option '%s'\n", argv[i]);
            inspect_usage(stderr);
            return 2;
        }
        if (path != NULL) {
            fprintf(stderr, "gpufaas inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
        path = argv[i];
    }
    if (path == NULL) {
        inspect_usage(stderr);
        return 2;
    }
    gf_err err;
    gf_err_clear(&err);
    gf_st_file *f;
    if (gf_st_open(path, &f, &err) != GF_OK) {
        fprintf(stderr, "gpufaas inspect: %s: %s\n", path, gf_err_msg(&err));
        return 1;
    }
    size_t n = gf_st_count(f);
    printf("file: %s\n", path);
    printf("size: %" PRIu64 " bytes (header %" PRIu64 ", data %" PRIu64 ")\n", gf_st_file_len(f),
           gf_st_header_len(f), gf_st_data_len(f));
    printf("tensors: %zu\n", n);
    if (gf_st_meta_count(f) > 0) {
        printf("metadata:\n");
        for (size_t i = 0; i < gf_st_meta_count(f); i++) {
            const char *k, *v;
            gf_st_meta_at(f, i, &k, &v);
            printf("  %s = %s\n", k, v);
        }
    }
    size_t wname = 4;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(gf_st_at(f, i)->name);
        if (l > wname)
            wname = l;
    }
    if (wname > 60)
        wname = 60;
    if (n > 0)
        printf("%-*s  %-5s  %-24s  %s\n", (int)wname, "NAME", "DTYPE", "SHAPE", "BYTES");
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        char shape[128];
        printf("%-*s  %-5s  %-24s  %zu\n", (int)wname, t->name, gf_dtype_kserve_name(t->dtype),
               gf_shape_str(shape, sizeof shape, t->rank, t->shape), t->nbytes);
    }
    gf_st_close(f);
    return 0;
}
