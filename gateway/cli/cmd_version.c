/* gpufaas version */
#include <stdio.h>

#include "gateway/cli/cli.h"
#include "gf_config.h"

int gf_cmd_version(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        printf("usage: gpufaas version\n\nPrint the version and the backends this build has.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "gpufaas version: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("gpufaas %s\n", GF_VERSION);
    printf("backends: cpu (%s)%s\n", GF_HAVE_BLAS ? "OpenBLAS" : "reference loops",
           GF_HAVE_CUDA_MODULE ? ", cuda (module built)" : "");
    return 0;
}
