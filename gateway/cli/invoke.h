/* gpufaas — `gpufaas invoke`'s two halves (gateway/cli): building the
 * request from --data, --file or --npy (invoke_request.c) and running it and
 * printing the answer (cmd_invoke.c). Internal to the command. */
#ifndef GF_GATEWAY_CLI_INVOKE_H
#define GF_GATEWAY_CLI_INVOKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gateway/cli/client.h"

#define GF_INVOKE_MAX_NPY 64

/* What the command line asked for. */
typedef struct gf_invoke_opts {
    const char *name;
    long long version;       /* 0 = current */
    const char *data, *file; /* exactly one of data, file, npy[] is given */
    const char *npy[GF_INVOKE_MAX_NPY];
    int n_npy;
    long long top; /* 0 = all values */
} gf_invoke_opts;

/* The request body for o: for --data / --file a JSON text (the text itself
 * when it is a v2 request, else built from the function's manifest, fetched
 * from the server), *hlen = 0; for --npy the binary tensor data extension's
 * body, *hlen the length of its JSON header. *body is malloc'd, *len bytes.
 * Returns 0, or 1 after reporting through c. */
int gf_invoke_request(gf_cli_client *c, const gf_invoke_opts *o, char **body, size_t *len,
                      size_t *hlen);

/* The shape of nested arrays, following first elements: rank and shape[]
 * (GF_MAX_RANK entries). False beyond GF_MAX_RANK levels. */
bool gf_invoke_nested_shape(const json_t *v, int64_t *shape, int *rank);

/* Append the leaves of v to flat, checking that v has exactly
 * shape[depth..rank) and that every leaf is a number or a boolean. */
bool gf_invoke_flatten(const json_t *v, int depth, const int64_t *shape, int rank, json_t *flat);

#endif /* GF_GATEWAY_CLI_INVOKE_H */
