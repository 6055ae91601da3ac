/* gpufaas — JSON (RFC 8259), strictly: the one grammar the whole tree reads
 * JSON with (runtime/core).
 *
 * Two ways in, over one lexer (json_lex.c): a read-only tree (gf_json_parse)
 * for what is small and looked at as a whole — manifests, safetensors
 * headers, request bodies of the admin API, the answers of the worker's
 * one-shot modes — and the lexer itself (gf_json_lexer), which the HTTP
 * front's inference reader walks to put tensor data straight into typed
 * buffers, never building a tree. Strict: no comments, no trailing commas,
 * no NaN, no leading zeros, strings must be valid UTF-8 and escapes well
 * formed (lone surrogates are errors). Nesting deeper than a limit is
 * rejected, so hostile input cannot exhaust the stack. Failures are
 * GF_ERR_FORMAT "malformed JSON at byte N: what" (GF_ERR_NOMEM when memory
 * ran out). jansson is used only to *build* the gateway's JSON answers and by
 * the command line, a client.
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

#include "core/buf.h"
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

/* ---- the lexer -------------------------------------------------------------- */

/* A read position in a JSON text. Caller-owned; the text is borrowed. */
typedef struct gf_json_lexer {
    const char *s;    /* the text */
    size_t len;       /* its length (need not be NUL-terminated) */
    size_t pos;       /* read position */
    size_t depth;     /* arrays/objects open now */
    size_t max_depth; /* bound on depth */
    gf_err *err;      /* where failures are described (may be NULL) */
} gf_json_lexer;

/* A number as written: the nearest double always, the exact integer when it
 * is one that fits. */
typedef struct gf_json_num {
    double d;
    int64_t i;     /* when is_int */
    uint64_t u;    /* when is_uint */
    bool is_int;   /* an integer literal within int64 */
    bool is_uint;  /* a non-negative integer literal within uint64 */
    bool integral; /* written without fraction or exponent (whatever its size) */
} gf_json_num;

/* max_depth 0 = GF_JSON_DEFAULT_DEPTH. */
void gf_json_lexer_init(gf_json_lexer *l, const char *s, size_t len, size_t max_depth,
                        gf_err *err);

/* The next byte after white space (which is skipped), -1 at the end. */
int gf_json_lex_peek(gf_json_lexer *l);
/* Take c when it is next (after white space). */
bool gf_json_lex_eat(gf_json_lexer *l, char c);

/* The type of the value that starts next (from its first byte; nothing is
 * read). *st is GF_ERR_FORMAT when no value starts there. */
gf_json_type gf_json_lex_value_type(gf_json_lexer *l, gf_status *st);

/* Read a string, decoded into out (reset first; its data NUL-terminated,
 * never NULL after success), or only validated when out is NULL. */
gf_status gf_json_lex_string(gf_json_lexer *l, gf_buf *out);
/* Read a number into n, or only validate it when n is NULL. */
gf_status gf_json_lex_number(gf_json_lexer *l, gf_json_num *n);
/* "true", "false" or "null". */
gf_status gf_json_lex_literal(gf_json_lexer *l, const char *word);
/* Read one value of any type, validating it. */
gf_status gf_json_lex_skip(gf_json_lexer *l);

/* Walk an object: *first true on the first call. Each call leaves the next
 * member's key in key (may be NULL: validated only) and the position at its
 * value, which the caller must read; *done is set at the closing brace. */
gf_status gf_json_lex_member(gf_json_lexer *l, bool *first, gf_buf *key, bool *done);
/* The same for an array: leaves the position at the next element. */
gf_status gf_json_lex_element(gf_json_lexer *l, bool *first, bool *done);

/* Only white space is left. */
gf_status gf_json_lex_end(gf_json_lexer *l);

/* GF_ERR_FORMAT "malformed JSON at byte <pos>: what", into l->err. */
gf_status gf_json_lex_fail(gf_json_lexer *l, const char *what);

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
gf_status gf_json_write(const gf_json *v, gf_buf *out);

/* Name of a type ("object", "string", ...), for messages. */
const char *gf_json_type_name(gf_json_type t);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_JSON_H */
