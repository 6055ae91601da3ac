/* libFuzzer target: the JSON parser (runtime/core/json.c on json_lex.c) and
 * the writer's round trip: whatever parses is written, and what is written
 * parses again and is written the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gf_json_doc *doc = NULL;
    gf_err err;
    if (gf_json_parse((const char *)data, size, 0, &doc, &err) != GF_OK)
        return 0;
    gf_buf a, b;
    gf_buf_init(&a);
    gf_buf_init(&b);
    if (gf_json_write(gf_json_doc_root(doc), &a) != GF_OK)
        abort();
    gf_json_doc *doc2 = NULL;
    if (gf_json_parse(a.data, a.len, 0, &doc2, &err) != GF_OK)
        abort(); /* the writer wrote something the parser refuses */
    if (gf_json_write(gf_json_doc_root(doc2), &b) != GF_OK || a.len != b.len ||
        memcmp(a.data, b.data, a.len) != 0)
        abort(); /* not a fixed point */
    gf_buf_deinit(&a);
    gf_buf_deinit(&b);
    gf_json_doc_free(doc);
    gf_json_doc_free(doc2);
    return 0;
}
