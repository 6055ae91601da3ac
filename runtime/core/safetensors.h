/* gpufaas — safetensors reader and writer (runtime/core).
 *
 * Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
 * header length N, N bytes of JSON header, then the data buffer. The header
 * maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with
 * offsets relative to the data buffer, plus an optional "__metadata__" object
 * of string values.
 *
 * The reader maps the file read-only and hands out pointers into the mapping
 * (zero copy). It validates what the reference implementation validates, and
 * every error names the offending tensor:
 *   file >= 8 bytes; N <= 100,000,000 and 8 + N <= file size; header is UTF-8,
 *   starts with '{' and is a JSON object; known dtype; non-negative integer
 *   dimensions; numel * size without overflow; offsets sorted, starting at 0,
 *   contiguous (no holes, no overlaps); each span equals numel * size; no
 *   trailing bytes; __metadata__ values are strings; no duplicate names.
 * We add: rank <= GF_MAX_RANK, no NUL bytes in names, and dtypes the runtime
 * supports (no F8 types).
 */
#ifndef GF_CORE_SAFETENSORS_H
#define GF_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_ST_MAX_HEADER 100000000u

/* One tensor of an open file. Strings and data live as long as the file. */
typedef struct gf_st_tensor {
    const char *name;
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    uint64_t begin, end; /* byte offsets within the data buffer */
    size_t nbytes;       /* end - begin == numel * dtype size */
    const void *data;    /* points into the mapping; alignment not guaranteed */
} gf_st_tensor;

typedef struct gf_st_file gf_st_file;

/* Map and validate a file. On success *out owns the mapping (gf_st_close). */
gf_status gf_st_open(const char *path, gf_st_file **out, gf_err *err);

/* Validate a file already in memory (len bytes at buf). buf is borrowed and
 * must outlive *out. */
gf_status gf_st_parse(const void *buf, size_t len, gf_st_file **out, gf_err *err);

/* Unmap and free. NULL is a no-op. */
void gf_st_close(gf_st_file *f);

/* Tensors in file order (ascending data offset). i < gf_st_count(f). */
size_t gf_st_count(const gf_st_file *f);
const gf_st_tensor *gf_st_at(const gf_st_file *f, size_t i);

/* Tensor by name, or NULL. O(log n). */
const gf_st_tensor *gf_st_find(const gf_st_file *f, const char *name);

/* Index of a tensor in file order by name, or -1. */
long gf_st_index(const gf_st_file *f, const char *name);

/* __metadata__ entries, in header order. */
size_t gf_st_meta_count(const gf_st_file *f);
void gf_st_meta_at(const gf_st_file *f, size_t i, const char **key, const char **value);
/* Value of a metadata key, or NULL. */
const char *gf_st_meta_get(const gf_st_file *f, const char *key);

/* Sizes: the header length N, and the data buffer length. */
uint64_t gf_st_header_len(const gf_st_file *f);
uint64_t gf_st_data_len(const gf_st_file *f);
/* Total file size (8 + N + data). */
uint64_t gf_st_file_len(const gf_st_file *f);

/* Tensor to write. data is read during the call only. */
typedef struct gf_st_wtensor {
    const char *name;
    gf_dtype dtype;
    int32_t rank;
    const int64_t *shape;
    const void *data; /* numel * size bytes; may be NULL when that is 0 */
} gf_st_wtensor;

/* Write a file others can read: tensors in the given order, contiguous, the
 * header padded with spaces to a multiple of 8. meta is n_meta (key, value)
 * pairs of C strings: meta[2*i], meta[2*i+1]; may be NULL when n_meta == 0.
 * Writes to a temporary name and renames into place, so a reader never sees a
 * half-written file. */
gf_status gf_st_write(const char *path, const gf_st_wtensor *tensors, size_t n,
                      const char *const *meta, size_t n_meta, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_SAFETENSORS_H */
