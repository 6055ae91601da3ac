/* gpufaas — what kind of file a user sent (runtime/core).
 *
 * Weights must be safetensors; users send what their tools write: torch.save
 * checkpoints (a zip of pickles, or a bare pickle in the legacy format),
 * NumPy .npy/.npz files, GGUF, ONNX models, Keras HDF5 files, a config.json.
 * gf_filetype_sniff looks at the first bytes of a file and names it, so that
 * an error can say what the file is and how to make a safetensors file from
 * it, instead of reporting an absurd header length. libc only.
 */
#ifndef GF_CORE_FILETYPE_H
#define GF_CORE_FILETYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_filetype {
    GF_FILE_UNKNOWN = 0, /* none of the below */
    GF_FILE_EMPTY,       /* 0 bytes */
    GF_FILE_SAFETENSORS, /* an 8-byte header length, then '{' (maybe truncated) */
    GF_FILE_TORCH_ZIP,   /* torch.save since PyTorch 1.6: a zip holding <name>/data.pkl */
    GF_FILE_NPZ,         /* numpy.savez: a zip of .npy files */
    GF_FILE_ZIP,         /* another zip archive (a .keras file, ...) */
    GF_FILE_PICKLE,      /* a Python pickle (torch.save's legacy format, pickle.dump) */
    GF_FILE_NPY,         /* numpy.save: one array */
    GF_FILE_GGUF,        /* llama.cpp's GGUF */
    GF_FILE_ONNX,        /* an ONNX ModelProto (protobuf) */
    GF_FILE_HDF5,        /* HDF5 (Keras .h5 weights) */
    GF_FILE_GZIP,        /* gzip-compressed data (a .tar.gz?) */
    GF_FILE_JSON,        /* text starting with '{' or '[' */
    GF_FILE_TEXT,        /* other printable text (HTML, a script, ...) */
    GF_FILETYPE_COUNT_
} gf_filetype;

/* What the first len bytes of a file (head; the whole file when it is
 * shorter) say it is. head may be NULL when len is 0. */
gf_filetype gf_filetype_sniff(const void *head, size_t len);

/* "a PyTorch checkpoint (torch.save: a zip of pickles)": a noun phrase for
 * messages. Static; never NULL. */
const char *gf_filetype_describe(gf_filetype t);

/* How to turn such a file into safetensors (one or two sentences, static;
 * "" when there is nothing specific to say). */
const char *gf_filetype_advice(gf_filetype t);

/* Write "not a safetensors file: it is <description>. <advice>" for a file
 * whose first len bytes are head (plus the first bytes in hex when the type
 * is unknown) into buf (cap bytes). Returns buf. */
const char *gf_filetype_not_safetensors(const void *head, size_t len, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_FILETYPE_H */
