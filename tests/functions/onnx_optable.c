/* gpufaas — the supported-ops table of docs/functions.md, made from the op
 * table in code (functions/onnx/optable.c), so the two cannot drift.
 *
 *   onnx_optable --check DOC   exit 1 (saying so) when DOC's table differs
 *   onnx_optable --write DOC   rewrite DOC's table from the code
 *   onnx_optable               print the table
 *
 * The table sits in DOC between the lines BEGIN and END below. meson test
 * functions_onnx_optable runs --check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "functions/onnx/optable.h"

#define BEGIN "<!-- onnx-ops: made by tests/functions/onnx_optable --write; do not edit -->\n"
#define END "<!-- onnx-ops end -->\n"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    gf_buf b;
    gf_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        gf_buf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return gf_buf_steal(&b, NULL);
}

int main(int argc, char **argv)
{
    gf_buf t;
    gf_buf_init(&t);
    if (gf_onnx_optable_markdown(&t) != GF_OK) {
        fprintf(stderr, "onnx_optable: out of memory\n");
        return 2;
    }
    if (argc < 3) {
        fputs(t.data, stdout);
        gf_buf_deinit(&t);
        return 0;
    }
    bool write = strcmp(argv[1], "--write") == 0;
    size_t len;
    char *doc = slurp(argv[2], &len);
    char *b = doc != NULL ? strstr(doc, BEGIN) : NULL;
    char *e = b != NULL ? strstr(b, END) : NULL;
    if (e == NULL) {
        fprintf(stderr, "onnx_optable: %s has no table between\n  %s  and %s", argv[2], BEGIN,
                END);
        free(doc);
        gf_buf_deinit(&t);
        return 2;
    }
    char *body = b + strlen(BEGIN);
    bool same = (size_t)(e - body) == t.len && memcmp(body, t.data, t.len) == 0;
    int rc = 0;
    if (write && !same) {
        FILE *f = fopen(argv[2], "wb");
        if (f == NULL || fwrite(doc, 1, (size_t)(body - doc), f) != (size_t)(body - doc) ||
            fwrite(t.data, 1, t.len, f) != t.len ||
            fwrite(e, 1, len - (size_t)(e - doc), f) != len - (size_t)(e - doc) ||
            fclose(f) != 0) {
            fprintf(stderr, "onnx_optable: cannot write %s\n", argv[2]);
            rc = 2;
        }
    } else if (!write && !same) {
        fprintf(stderr, "onnx_optable: the supported-ops table in %s differs from the op table "
                "in functions/onnx; run: build/tests/functions/onnx_optable --write %s\n",
                argv[2], argv[2]);
        rc = 1;
    }
    free(doc);
    gf_buf_deinit(&t);
    return rc;
}
