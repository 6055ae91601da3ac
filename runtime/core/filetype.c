/* gpufaas — what kind of file a user sent (runtime/core). */
#include "core/filetype.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Little-endian u16 at p. */
static unsigned le16(const unsigned char *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static bool has_prefix(const unsigned char *b, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(b, magic, n) == 0;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* The first entry of a zip archive (its local file header: signature, 26
 * bytes of fields, the name length at offset 26, the name at offset 30)
 * tells torch.save's archives ("archive/data.pkl", "archive/version", ...)
 * from numpy.savez's ("arr_0.npy"). */
static gf_filetype sniff_zip(const unsigned char *b, size_t len)
{
    if (len < 30)
        return GF_FILE_ZIP;
    size_t n = le16(b + 26);
    if (n > len - 30)
        n = len - 30;
    const char *name = (const char *)b + 30;
    if (ends_with(name, n, ".npy"))
        return GF_FILE_NPZ;
    if (ends_with(name, n, "/data.pkl") || ends_with(name, n, "/version") ||
        ends_with(name, n, "/byteorder") || ends_with(name, n, "/.format_version") ||
        memmem(name, n, "/data/", 6) != NULL)
        return GF_FILE_TORCH_ZIP;
    return GF_FILE_ZIP;
}

/* An ONNX ModelProto is protobuf: it starts with field 1 (ir_version, a
 * varint: tag 0x08) holding a small version, followed by another
 * ModelProto field (producer_name 2, producer_version 3, domain 4,
 * model_version 5, doc_string 6, graph 7, opset_import 8). */
static bool looks_onnx(const unsigned char *b, size_t len)
{
    if (len < 3 || b[0] != 0x08 || b[1] < 1 || b[1] > 30)
        return false;
    switch (b[2]) {
    case 0x12:
    case 0x1a:
    case 0x22:
    case 0x28:
    case 0x32:
    case 0x3a:
    case 0x42:
        return true;
    default:
        return false;
    }
}

gf_filetype gf_filetype_sniff(const void *head, size_t len)
{
    const unsigned char *b = head;
    if (len == 0)
        return GF_FILE_EMPTY;
    /* safetensors: the header length (8 bytes LE), then the JSON header */
    if (len >= 9 && b[8] == '{') {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = (n << 8) | b[i];
        if (n >= 2 && n < ((uint64_t)1 << 40))
            return GF_FILE_SAFETENSORS;
    }
    if (has_prefix(b, len, "PK\x03\x04", 4) || has_prefix(b, len, "PK\x05\x06", 4))
        return sniff_zip(b, len);
    if (len >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return GF_FILE_PICKLE;
    if (has_prefix(b, len, "\x93NUMPY", 6))
        return GF_FILE_NPY;
    if (has_prefix(b, len, "GGUF", 4))
        return GF_FILE_GGUF;
    if (has_prefix(b, len, "\x89HDF\r\n\x1a\n", 8))
        return GF_FILE_HDF5;
    if (has_prefix(b, len, "\x1f\x8b", 2))
        return GF_FILE_GZIP;
    if (looks_onnx(b, len))
        return GF_FILE_ONNX;
    /* text: skip a UTF-8 byte-order mark and leading white space */
    size_t i = has_prefix(b, len, "\xef\xbb\xbf", 3) ? 3 : 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
        i++;
    if (i < len && (b[i] == '{' || b[i] == '['))
        return GF_FILE_JSON;
    size_t printable = 0, probe = len < 256 ? len : 256;
    for (size_t k = 0; k < probe; k++)
        printable += (b[k] >= 0x20 && b[k] < 0x7f) || b[k] == '\n' || b[k] == '\r' ||
                     b[k] == '\t' || b[k] >= 0x80;
    if (printable == probe)
        return GF_FILE_TEXT;
    return GF_FILE_UNKNOWN;
}

static const struct {
    const char *describe, *advice;
} gf_filetypes[GF_FILETYPE_COUNT_] = {
    [GF_FILE_UNKNOWN] = {"not a format gpufaas knows",
                         "Weights must be safetensors: safetensors.torch.save_file("
                         "model.state_dict(), \"model.safetensors\")."},
    [GF_FILE_EMPTY] = {"empty (0 bytes)", "Send the .safetensors file itself."},
    [GF_FILE_SAFETENSORS] = {"a safetensors file", ""},
    [GF_FILE_TORCH_ZIP] =
        {"a PyTorch checkpoint (torch.save: a zip of pickles, e.g. a .pt or pytorch_model.bin)",
         "gpufaas never unpickles. Save the state_dict with safetensors instead: "
         "safetensors.torch.save_file(torch.load(path, map_location=\"cpu\"), "
         "\"model.safetensors\") (a whole pickled model: its .state_dict())."},
    [GF_FILE_NPZ] = {"a NumPy archive (numpy.savez)",
                     "Convert it, keeping the names: safetensors.numpy.save_file("
                     "dict(numpy.load(path)), \"model.safetensors\")."},
    [GF_FILE_ZIP] = {"a zip archive",
                     "If it holds a model.safetensors, send that file; otherwise save the "
                     "state_dict with safetensors.torch.save_file."},
    [GF_FILE_PICKLE] = {"a Python pickle (torch.save's legacy format, or pickle.dump)",
                        "gpufaas never unpickles. Save the state_dict with safetensors instead: "
                        "safetensors.torch.save_file(torch.load(path, map_location=\"cpu\"), "
                        "\"model.safetensors\") (a whole pickled model: its .state_dict())."},
    [GF_FILE_NPY] = {"a NumPy array (numpy.save: one array, without a tensor name)",
                     "Name each tensor as the kind expects and write them together: "
                     "safetensors.numpy.save_file({\"0.weight\": w0, ...}, "
                     "\"model.safetensors\")."},
    [GF_FILE_GGUF] = {"a GGUF file (llama.cpp)",
                      "gpufaas does not read GGUF: save the original PyTorch state_dict with "
                      "safetensors.torch.save_file."},
    [GF_FILE_ONNX] = {"an ONNX model (a protobuf ModelProto)", ""},
    [GF_FILE_HDF5] = {"an HDF5 file (Keras .h5 weights?)",
                      "gpufaas reads PyTorch-named weights in safetensors: export the model to "
                      "PyTorch and save its state_dict with safetensors.torch.save_file."},
    [GF_FILE_GZIP] = {"gzip-compressed data", "Decompress it (a .tar.gz: extract the "
                                              ".safetensors file from it) and send that."},
    [GF_FILE_JSON] = {"a JSON document (a manifest or config.json?), not weights",
                      "Send the manifest as the part \"manifest\" and the .safetensors file as "
                      "the part \"weights\"."},
    [GF_FILE_TEXT] = {"text, not weights", "Send the .safetensors file itself."},
};

const char *gf_filetype_describe(gf_filetype t)
{
    return (unsigned)t < GF_FILETYPE_COUNT_ ? gf_filetypes[t].describe
                                            : gf_filetypes[GF_FILE_UNKNOWN].describe;
}

const char *gf_filetype_advice(gf_filetype t)
{
    return (unsigned)t < GF_FILETYPE_COUNT_ ? gf_filetypes[t].advice : "";
}

const char *gf_filetype_not_safetensors(const void *head, size_t len, char *buf, size_t cap)
{
    gf_filetype t = gf_filetype_sniff(head, len);
    const char *advice = gf_filetype_advice(t);
    int n = snprintf(buf, cap, "not a safetensors file: it is %s", gf_filetype_describe(t));
    size_t used = n > 0 ? (size_t)n : 0;
    if (t == GF_FILE_UNKNOWN && used < cap) {
        const unsigned char *b = head;
        n = snprintf(buf + used, cap - used, " (it begins with the bytes");
        used += n > 0 ? (size_t)n : 0;
        for (size_t i = 0; i < len && i < 8 && used < cap; i++) {
            n = snprintf(buf + used, cap - used, " %02x", b[i]);
            used += n > 0 ? (size_t)n : 0;
        }
        if (used < cap) {
            n = snprintf(buf + used, cap - used, ")");
            used += n > 0 ? (size_t)n : 0;
        }
    }
    if (used < cap)
        snprintf(buf + used, cap - used, ".%s%s", advice[0] ? " " : "", advice);
    return buf;
}
