/* gpufaas — a strict JSON (RFC 8259) parser producing a read-only tree
 * (runtime/core).
 *
 * Used where the runtime must not depend on anything but libc: safetensors
 * headers, function manifests inside workers. Strict: no comments, no trailing
 * commas, no NaN, no leading zeros, strings must be valid UTF-8 and escapes
 * well formed (lone surrogates are errors). Nesting deeper than a limit is
 * rejected, so hostile input cannot exhaust the stack.
 *
 * All nodes and strings of one document live in one arena, freed at once by
 * gf_json_doc_free(). Object members keep their textual order; duplicate keys
 * are kept (use gf_json_obj_find_dup() to reject them where that matters).
 */
#ifndef GF_CORE_JSON_H
#define GF_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_json_type {
    GF_JSON_NULL,
    GF_JSON_BOOL,
    GF_JSON_NUMBER,
    GF_JSON_STRING,
    GF_JSON_ARRAY,
    GF_JSON_OBJECT,
} gf_json_type;

typedef struct gf_json gf_json;
struct gf_buf;

typedef struct gf_json_member {
    const char *key; /* NUL-terminated; may contain NUL bytes (see key_len) */
    size_t key_len;
    gf_json *value;
} gf_json_member;

struct gf_json {
    gf_json_type type;
    size_t offset; /* byte offset of the value in the text, for messages */
    union {
        bool b; /* GF_JSON_BOOL */
        struct {
            double d;     /* always set (nearest double) */
            int64_t i;    /* valid when is_int */
            uint64_t u;   /* valid when is_uint */
            bool is_int;  /* an integer literal (no fraction/exponent) within int64 */
            bool is_uint; /* a non-negative integer literal within uint64 */
        } num;
        struct {
            const char *s; /* decoded, NUL-terminated; may contain NUL (see len) */
            size_t len;
        } str;
        struct {
            gf_json **items;
            size_t n;
        } arr;
        struct {
            gf_json_member *m;
            size_t n;
        } obj;
    } u;
};

typedef struct gf_json_doc gf_json_doc;

/* Default limit on nested arrays/objects for gf_json_parse (max_depth == 0
 * selects it); "[[1]]" has depth 2. */
#define GF_JSON_DEFAULT_DEPTH 64

/* Parse len bytes of text (need not be NUL-terminated). The whole text must
 * be one value, optionally surrounded by whitespace. On success *out owns the
 * tree (free with gf_json_doc_free). On failure the message gives the byte
 * offset and what was expected. */
gf_status gf_json_parse(const char *text, size_t len, size_t max_depth, gf_json_doc **out,
                        gf_err *err);

/* Root value; lives as long as doc. */
const gf_json *gf_json_doc_root(const gf_json_doc *doc);

/* Free a document and every node in it. NULL is a no-op. */
void gf_json_doc_free(gf_json_doc *doc);

/* First member of object obj named key (exact bytes; key is a C string), or
 * NULL when absent or obj is not an object. */
const gf_json *gf_json_get(const gf_json *obj, const char *key);

/* Resolve a JSON Pointer (RFC 6901) from root: "" is root itself, "/a/0"
 * member "a" then item 0 ("~1" in a token stands for '/', "~0" for '~'; an
 * array index is decimal without leading zeros). *out is NULL when the
 * pointer leads nowhere (a missing member, an index out of range, a token
 * into a scalar). GF_ERR_INVALID, naming the pointer, when it is malformed
 * (not "" and not starting with '/', or a '~' not followed by 0 or 1). */
gf_status gf_json_pointer(const gf_json *root, const char *pointer, const gf_json **out,
                          gf_err *err);

/* Index of the first member whose key also appears earlier in obj, or -1 when
 * all keys are distinct. O(n log n). Returns -2 when out of memory. */
long gf_json_obj_find_dup(const gf_json *obj);

/* Append v as compact JSON text (numbers that were integer literals are
 * written exactly; others with 17 significant digits). */
gf_status gf_json_write(const gf_json *v, struct gf_buf *out);

/* Name of a type ("object", "string", ...), for messages. */
const char *gf_json_type_name(gf_json_type t);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_JSON_H */
