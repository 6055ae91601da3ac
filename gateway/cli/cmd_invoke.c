/* gpufaas invoke NAME [--version V] --data JSON | --file FILE.json | --npy FILE
 * — run a function once and print its outputs.
 *
 * The input is a full KServe v2 request ({"inputs": [...]}, sent as is), or
 * just the data: a (nested) array for a function with one input, or an
 * object mapping input names to arrays. Then the datatype comes from the
 * function's manifest (GET /v1/functions/NAME) and the shape from the
 * array's nesting (a missing leading batch dimension is taken as 1). .npy
 * files are sent as binary tensors (the binary tensor data extension),
 * converted to the manifest's datatype when they differ.
 *
 * Without --version the request goes to POST /v1/functions/NAME/invoke
 * (whose answer says which worker ran it, cold or warm, and the time it
 * took); with one, to POST /v2/models/NAME/versions/V/infer.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"
#include "gateway/cli/flags.h"
#include "gateway/cli/npy.h"

#define MAX_NPY 64
#define MAX_ROWS_SHOWN 32
#define MAX_VALUES_SHOWN 64
#define VALUES_PER_LINE 8

enum { I_DATA, I_FILE, I_NPY, I_VERSION, I_TOP, I_COUNT_ };

static void invoke_usage(FILE *out);

static const gf_cli_flag invoke_flags[I_COUNT_] = {
    [I_DATA] = {"data", 0, "JSON", 0,
                "the input's data as a JSON array, nested or flat, e.g.\n'[[0.1, 0.2, 0.3]]'; "
                "for several inputs an object\n{\"input_ids\": [[...]], \"attention_mask\": "
                "[[...]]}; or a\nwhole KServe v2 request {\"inputs\": [...]}, sent as is"},
    [I_FILE] = {"file", 0, "FILE", 0, "the same, read from a file"},
    [I_NPY] = {"npy", 0, "[INPUT=]FILE", MAX_NPY,
               "a NumPy .npy array (C order); repeat with INPUT= for\nseveral inputs. Converted "
               "to the input's datatype\nwhen it differs"},
    [I_VERSION] = {"version", 0, "V", 0, "a specific version (default: the current one)"},
    [I_TOP] = {"top", 0, "K", 0,
               "for classification outputs: the K largest values of\neach row, with their "
               "indices"},
};

static const gf_cli_cmd invoke_cmd = {"invoke", invoke_flags, I_COUNT_, invoke_usage};

static void invoke_usage(FILE *out)
{
    fprintf(out,
            "usage: gpufaas invoke NAME [--version V] (--data JSON | --file FILE | --npy FILE...)\n"
            "                      [--top K] [options]\n\n"
            "Run function NAME once and print its outputs. One of --data, --file and --npy\n"
            "gives the input. The datatype comes from the function's manifest; the shape\n"
            "from the array (a missing leading batch dimension is taken as 1).\n\n"
            "options:\n");
    gf_cli_flags_usage(out, &invoke_cmd);
    fputc('\n', out);
    gf_cli_common_usage(out);
}

typedef struct invoke_opts {
    const char *name;
    long long version; /* 0 = current */
    const char *data, *file;
    const char *npy[MAX_NPY];
    int n_npy;
    long long top; /* 0 = all values */
} invoke_opts;

/* ---- reading the input ---------------------------------------------------------------- */

/* Read a whole file (malloc'd, NUL-terminated). NULL after reporting. */
static char *read_file(const gf_cli_client *c, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (f == NULL || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        gf_cli_errorf(c, "cannot read %s: %s", path,
                      f == NULL ? strerror(errno) : "not a regular file");
        if (f != NULL)
            fclose(f);
        return NULL;
    }
    size_t n = (size_t)sb.st_size, cap;
    char *buf = NULL;
    if ((uint64_t)sb.st_size < SIZE_MAX && gf_size_add(n, 1, &cap))
        buf = malloc(cap);
    if (buf == NULL) {
        gf_cli_errorf(c, "cannot read %s: out of memory for %zu bytes", path, n);
        fclose(f);
        return NULL;
    }
    size_t got = n > 0 ? fread(buf, 1, n, f) : 0;
    bool bad = got != n || ferror(f);
    fclose(f);
    if (bad) {
        gf_cli_errorf(c, "cannot read %s: short read", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The manifest's inputs of the version asked for, from GET /v1/functions/NAME:
 * *fn is the whole answer (a new reference to free), the return value is
 * borrowed from it. NULL after reporting. */
static const json_t *function_inputs(gf_cli_client *c, const invoke_opts *o, json_t **fn)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/functions/%s", o->name);
    *fn = gf_cli_get_json(c, path);
    if (*fn == NULL)
        return NULL;
    long long want = o->version > 0 ? o->version : gf_cli_json_int(*fn, "version", -1);
    const json_t *vs = json_object_get(*fn, "versions");
    for (size_t i = 0; i < json_array_size(vs); i++) {
        const json_t *v = json_array_get(vs, i);
        if (gf_cli_json_int(v, "version", -2) == want &&
            json_is_array(json_object_get(v, "inputs")))
            return json_object_get(v, "inputs");
    }
    if (o->version > 0)
        gf_cli_errorf(c, "function '%s' has no version %lld", o->name, o->version);
    else
        gf_cli_errorf(c, "function '%s' has no current version", o->name);
    json_decref(*fn);
    *fn = NULL;
    return NULL;
}

/* The shape of nested arrays, following first elements. False beyond
 * GF_MAX_RANK levels. */
static bool nested_shape(const json_t *v, int64_t *shape, int *rank)
{
    *rank = 0;
    while (json_is_array(v)) {
        if (*rank == GF_MAX_RANK)
            return false;
        shape[(*rank)++] = (int64_t)json_array_size(v);
        v = json_array_size(v) > 0 ? json_array_get(v, 0) : NULL;
    }
    return true;
}

/* Append the leaves of v to flat, checking that v has exactly shape[depth..]
 * and that every leaf is a number or a boolean. */
static bool flatten(const json_t *v, int depth, const int64_t *shape, int rank, json_t *flat)
{
    if (depth == rank) {
        if (!json_is_number(v) && !json_is_boolean(v))
            return false;
        return json_array_append(flat, (json_t *)v) == 0;
    }
    if (!json_is_array(v) || (int64_t)json_array_size(v) != shape[depth])
        return false;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!flatten(json_array_get(v, i), depth + 1, shape, rank, flat))
            return false;
    return true;
}

/* {"name", "datatype", "shape", "data": flat} for the manifest input spec and
 * the user's value; NULL after reporting. */
static json_t *tensor_from_value(const gf_cli_client *c, const json_t *spec, const json_t *value)
{
    const char *name = gf_cli_json_str(spec, "name", "?");
    const json_t *sshape = json_object_get(spec, "shape");
    int srank = (int)json_array_size(sshape);
    int64_t shape[GF_MAX_RANK];
    int rank;
    if (!nested_shape(value, shape, &rank)) {
        gf_cli_errorf(c, "input '%s': arrays nested more than %d deep", name, GF_MAX_RANK);
        return NULL;
    }
    json_t *flat = json_array();
    if (flat == NULL || !flatten(value, 0, shape, rank, flat)) {
        gf_cli_errorf(c,
                      "input '%s': the data must be numbers (or true/false) in arrays of equal "
                      "length at each level",
                      name);
        json_decref(flat);
        return NULL;
    }
    int64_t n = (int64_t)json_array_size(flat);
    if (rank == srank - 1 && srank > 0 && json_integer_value(json_array_get(sshape, 0)) == -1) {
        memmove(shape + 1, shape, (size_t)rank * sizeof shape[0]); /* one sample */
        shape[0] = 1;
        rank++;
    } else if (rank == 1 && srank > 1) {
        /* flat data: the manifest's shape, its one free dimension computed */
        uint64_t known = 1;
        int free_dim = -1, n_free = 0;
        for (int k = 0; k < srank; k++) {
            int64_t d = (int64_t)json_integer_value(json_array_get(sshape, k));
            shape[k] = d;
            if (d < 0) {
                free_dim = k;
                n_free++;
            } else if (!gf_u64_mul(known, (uint64_t)d, &known) || known > INT64_MAX / 2) {
                n_free = 99;
            }
        }
        if (n_free > 1 || known == 0 || (n_free == 1 && (uint64_t)n % known != 0)) {
            char want[128];
            gf_cli_errorf(c,
                          "input '%s': cannot shape %" PRId64 " flat values as %s; give nested "
                          "arrays",
                          name, n, gf_cli_fmt_shape(sshape, want, sizeof want));
            json_decref(flat);
            return NULL;
        }
        if (n_free == 1)
            shape[free_dim] = (int64_t)((uint64_t)n / known);
        rank = srank;
    } else if (rank != srank) {
        char want[128];
        gf_cli_errorf(c, "input '%s': the data has %d dimension%s, the function expects %d (%s)",
                      name, rank, rank == 1 ? "" : "s", srank,
                      gf_cli_fmt_shape(sshape, want, sizeof want));
        json_decref(flat);
        return NULL;
    }
    json_t *js = json_array();
    for (int k = 0; k < rank && js != NULL; k++)
        json_array_append_new(js, json_integer(shape[k]));
    json_t *t = json_pack("{s:s, s:s, s:o, s:o}", "name", name, "datatype",
                          gf_cli_json_str(spec, "datatype", "FP32"), "shape", js, "data", flat);
    if (t == NULL)
        gf_cli_errorf(c, "out of memory");
    return t;
}

/* The JSON request for --data / --file: the text itself when it is a v2
 * request, else built from the manifest. *body is malloc'd. */
static int json_request(gf_cli_client *c, const invoke_opts *o, char **body)
{
    json_error_t je;
    json_t *root;
    if (o->data != NULL) {
        root = json_loads(o->data, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (root == NULL) {
            gf_cli_errorf(c, "--data: malformed JSON at column %d: %s", je.column, je.text);
            return 1;
        }
    } else {
        size_t len;
        char *text = read_file(c, o->file, &len);
        if (text == NULL)
            return 1;
        root = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        free(text);
        if (root == NULL) {
            gf_cli_errorf(c, "%s: malformed JSON at line %d, column %d: %s", o->file, je.line,
                          je.column, je.text);
            return 1;
        }
    }
    if (json_is_object(root) && json_object_get(root, "inputs") != NULL) {
        *body = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (*body == NULL)
            gf_cli_errorf(c, "out of memory");
        return *body != NULL ? 0 : 1;
    }
    json_t *fn = NULL, *req = NULL, *inputs = NULL;
    int rc = 1;
    const json_t *specs = function_inputs(c, o, &fn);
    if (specs == NULL)
        goto out;
    inputs = json_array();
    req = json_pack("{s:O}", "inputs", inputs);
    if (inputs == NULL || req == NULL) {
        gf_cli_errorf(c, "out of memory");
        goto out;
    }
    size_t n_specs = json_array_size(specs);
    if (json_is_object(root)) {
        /* {"input_name": data, ...}: every key an input, every input given */
        const char *key;
        json_t *val;
        json_object_foreach(root, key, val)
        {
            bool known = false;
            for (size_t i = 0; i < n_specs && !known; i++)
                known = strcmp(gf_cli_json_str(json_array_get(specs, i), "name", ""), key) == 0;
            if (!known) {
                gf_cli_errorf(c, "function '%s' has no input '%s'", o->name, key);
                goto out;
            }
        }
        for (size_t i = 0; i < n_specs; i++) {
            const json_t *spec = json_array_get(specs, i);
            const char *iname = gf_cli_json_str(spec, "name", "");
            const json_t *v = json_object_get(root, iname);
            if (v == NULL) {
                gf_cli_errorf(c, "input '%s' is missing", iname);
                goto out;
            }
            json_t *t = tensor_from_value(c, spec, v);
            if (t == NULL)
                goto out;
            json_array_append_new(inputs, t);
        }
    } else {
        if (n_specs != 1) {
            gf_cli_errorf(c,
                          "function '%s' has %zu inputs: give --data as an object "
                          "{\"%s\": [...], ...}",
                          o->name, n_specs, gf_cli_json_str(json_array_get(specs, 0), "name", "?"));
            goto out;
        }
        json_t *t = tensor_from_value(c, json_array_get(specs, 0), root);
        if (t == NULL)
            goto out;
        json_array_append_new(inputs, t);
    }
    *body = json_dumps(req, JSON_COMPACT);
    if (*body == NULL)
        gf_cli_errorf(c, "out of memory");
    else
        rc = 0;
out:
    json_decref(inputs);
    json_decref(req);
    json_decref(fn);
    json_decref(root);
    return rc;
}

/* ---- .npy inputs --------------------------------------------------------------------- */

typedef struct npy_in {
    const char *path;
    char *file; /* the file's bytes (owned) */
    size_t len;
    gf_npy a;
    const json_t *spec; /* borrowed from the function's JSON */
    gf_dtype to;
    size_t out_bytes;
} npy_in;

/* The binary request for --npy: *body (malloc'd, *len bytes) and the JSON
 * header's length *hlen. */
static int npy_request(gf_cli_client *c, const invoke_opts *o, char **body, size_t *len,
                       size_t *hlen)
{
    npy_in in[MAX_NPY];
    memset(in, 0, sizeof in);
    json_t *fn = NULL, *hdr = NULL;
    char *htext = NULL;
    int rc = 1;
    const json_t *specs = function_inputs(c, o, &fn);
    if (specs == NULL)
        goto out;
    size_t n_specs = json_array_size(specs);
    for (int k = 0; k < o->n_npy; k++) {
        const char *arg = o->npy[k], *eq = strchr(arg, '=');
        in[k].path = arg;
        if (eq != NULL) {
            for (size_t i = 0; i < n_specs; i++) {
                const json_t *s = json_array_get(specs, i);
                const char *iname = gf_cli_json_str(s, "name", "");
                if (strlen(iname) == (size_t)(eq - arg) &&
                    strncmp(iname, arg, (size_t)(eq - arg)) == 0) {
                    in[k].spec = s;
                    in[k].path = eq + 1;
                }
            }
        }
        if (in[k].spec == NULL) {
            if (n_specs != 1 || o->n_npy != 1) {
                gf_cli_errorf(c, "function '%s' has %zu inputs: name each one, --npy INPUT=FILE",
                              o->name, n_specs);
                goto out;
            }
            in[k].spec = json_array_get(specs, 0);
        }
        for (int j = 0; j < k; j++)
            if (in[j].spec == in[k].spec) {
                gf_cli_errorf(c, "input '%s' is given twice",
                              gf_cli_json_str(in[k].spec, "name", "?"));
                goto out;
            }
    }
    if ((size_t)o->n_npy != n_specs) {
        gf_cli_errorf(c, "function '%s' has %zu inputs but %d .npy files were given", o->name,
                      n_specs, o->n_npy);
        goto out;
    }
    hdr = json_array();
    if (hdr == NULL)
        goto oom;
    size_t total = 0;
    for (int k = 0; k < o->n_npy; k++) {
        npy_in *x = &in[k];
        const char *iname = gf_cli_json_str(x->spec, "name", "?");
        x->file = read_file(c, x->path, &x->len);
        if (x->file == NULL)
            goto out;
        gf_err err;
        if (gf_npy_parse(x->file, x->len, &x->a, &err) != GF_OK) {
            gf_cli_errorf(c, "%s: %s", x->path, gf_err_msg(&err));
            goto out;
        }
        const char *dt = gf_cli_json_str(x->spec, "datatype", "");
        x->to = gf_dtype_from_kserve_name(dt, strlen(dt));
        if (x->to == GF_DT_INVALID) {
            gf_cli_errorf(c, "input '%s': datatype '%s' cannot be sent from a .npy file", iname,
                          dt);
            goto out;
        }
        if (!gf_size_mul((size_t)x->a.numel, gf_dtype_size(x->to), &x->out_bytes) ||
            !gf_size_add(total, x->out_bytes, &total)) {
            gf_cli_errorf(c, "%s: too large", x->path);
            goto out;
        }
        const json_t *sshape = json_object_get(x->spec, "shape");
        json_t *shape = json_array();
        if (shape == NULL)
            goto oom;
        if (x->a.rank + 1 == (int32_t)json_array_size(sshape) &&
            json_integer_value(json_array_get(sshape, 0)) == -1)
            json_array_append_new(shape, json_integer(1)); /* one sample */
        for (int32_t d = 0; d < x->a.rank; d++)
            json_array_append_new(shape, json_integer(x->a.shape[d]));
        json_t *t = json_pack("{s:s, s:s, s:o, s:{s:I}}", "name", iname, "datatype", dt, "shape",
                              shape, "parameters", "binary_data_size", (json_int_t)x->out_bytes);
        if (t == NULL || json_array_append_new(hdr, t) != 0)
            goto oom;
    }
    json_t *req = json_pack("{s:O}", "inputs", hdr);
    htext = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (htext == NULL)
        goto oom;
    *hlen = strlen(htext);
    if (!gf_size_add(total, *hlen, len) || (*body = malloc(*len > 0 ? *len : 1)) == NULL)
        goto oom;
    memcpy(*body, htext, *hlen);
    size_t off = *hlen;
    for (int k = 0; k < o->n_npy; k++) {
        gf_err err;
        if (gf_npy_convert(&in[k].a, in[k].to, *body + off, &err) != GF_OK) {
            gf_cli_errorf(c, "%s: input '%s': %s", in[k].path,
                          gf_cli_json_str(in[k].spec, "name", "?"), gf_err_msg(&err));
            free(*body);
            *body = NULL;
            goto out;
        }
        off += in[k].out_bytes;
    }
    rc = 0;
    goto out;
oom:
    gf_cli_errorf(c, "out of memory");
out:
    for (int k = 0; k < o->n_npy; k++)
        free(in[k].file);
    free(htext);
    json_decref(hdr);
    json_decref(fn);
    return rc;
}

/* ---- the answer ------------------------------------------------------------------------- */

/* Copy text, quoting the bare NaN, Infinity and -Infinity the server writes
 * for non-finite outputs (not JSON), so that jansson reads them as strings. */
static char *quote_nonfinite(const char *text, size_t len, size_t *out_len)
{
    size_t cap;
    if (!gf_size_mul(len, 2, &cap) || !gf_size_add(cap, 1, &cap))
        return NULL;
    char *out = malloc(cap), *w = out;
    if (out == NULL)
        return NULL;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_str) {
            *w++ = ch;
            if (ch == '\\' && i + 1 < len)
                *w++ = text[++i];
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
            *w++ = ch;
            continue;
        }
        static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
        bool done = false;
        for (int k = 0; k < 3 && !done; k++) {
            size_t wl = strlen(words[k]);
            if (len - i >= wl && memcmp(text + i, words[k], wl) == 0) {
                *w++ = '"';
                memcpy(w, words[k], wl);
                w += wl;
                *w++ = '"';
                i += wl - 1;
                done = true;
            }
        }
        if (!done)
            *w++ = ch;
    }
    *w = '\0';
    *out_len = (size_t)(w - out);
    return out;
}

/* Turn binary outputs (binary tensor data extension) into "data" arrays. */
static int inline_binary(const gf_cli_client *c, json_t *outputs, const char *bin, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < json_array_size(outputs); i++) {
        json_t *o = json_array_get(outputs, i);
        json_t *params = json_object_get(o, "parameters");
        json_t *bsz = json_object_get(params, "binary_data_size");
        if (bsz == NULL)
            continue;
        const char *dt = gf_cli_json_str(o, "datatype", "");
        gf_npy a;
        memset(&a, 0, sizeof a);
        a.dtype = gf_dtype_from_kserve_name(dt, strlen(dt));
        size_t esz = gf_dtype_size(a.dtype);
        json_int_t sz = json_integer_value(bsz);
        if (a.dtype == GF_DT_INVALID || esz == 0 || sz < 0 || (size_t)sz > n - off ||
            (size_t)sz % esz != 0) {
            gf_cli_errorf(c, "the server's binary output '%s' is malformed",
                          gf_cli_json_str(o, "name", "?"));
            return 1;
        }
        a.numel = (uint64_t)sz / esz;
        a.nbytes = (size_t)sz;
        a.data = (const uint8_t *)bin + off;
        json_t *data = json_array();
        for (uint64_t k = 0; k < a.numel && data != NULL; k++) {
            gf_npy_value v = gf_npy_at(&a, k);
            json_t *e = a.dtype == GF_DT_BOOL   ? json_boolean(v.u != 0)
                        : v.kind == GF_NPY_INT  ? json_integer(v.s)
                        : v.kind == GF_NPY_UINT ? json_integer((json_int_t)v.u)
                        : isnan(v.f)            ? json_string("NaN")
                        : isinf(v.f) && v.f > 0 ? json_string("Infinity")
                        : isinf(v.f)            ? json_string("-Infinity")
                                                : json_real(v.f);
            if (e == NULL || json_array_append_new(data, e) != 0) {
                json_decref(data);
                data = NULL;
            }
        }
        if (data == NULL || json_object_set_new(o, "data", data) != 0) {
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        json_object_del(params, "binary_data_size");
        if (json_object_size(params) == 0)
            json_object_del(o, "parameters");
        off += (size_t)sz;
    }
    return 0;
}

/* A leaf as a number for ranking (NaN for what is not one). */
static double leaf_value(const json_t *v)
{
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_boolean(v))
        return json_is_true(v) ? 1 : 0;
    const char *s = json_string_value(v);
    if (s != NULL && strcmp(s, "Infinity") == 0)
        return INFINITY;
    if (s != NULL && strcmp(s, "-Infinity") == 0)
        return -INFINITY;
    return NAN;
}

static void print_leaf(const json_t *v)
{
    if (json_is_integer(v))
        printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        printf("%.6g", json_real_value(v));
    else if (json_is_boolean(v))
        printf("%s", json_is_true(v) ? "true" : "false");
    else if (json_is_string(v) && !isnan(leaf_value(v))) /* Infinity, -Infinity */
        printf("%s", json_string_value(v));
    else if (json_is_string(v) && strcmp(json_string_value(v), "NaN") == 0)
        printf("NaN");
    else
        printf("?");
}

/* Rows and columns of an output: the last dimension is a row. */
static void rows_cols(const json_t *shape, size_t numel, size_t *rows, size_t *cols)
{
    size_t r = json_array_size(shape);
    json_int_t last = r > 0 ? json_integer_value(json_array_get(shape, r - 1)) : 1;
    *cols = last > 0 ? (size_t)last : 1;
    *rows = *cols > 0 ? numel / *cols : 0;
}

/* "[i]" or "[i, j]" for row r of shape (all but the last dimension); "" for
 * rank 0 and 1. */
static void row_label(const json_t *shape, size_t r, char *buf, size_t cap)
{
    size_t rank = json_array_size(shape);
    buf[0] = '\0';
    if (rank < 2 || rank > GF_MAX_RANK)
        return;
    size_t idx[GF_MAX_RANK] = {0};
    for (size_t k = rank - 1; k-- > 0;) {
        json_int_t d = json_integer_value(json_array_get(shape, k));
        size_t dim = d > 0 ? (size_t)d : 1;
        idx[k] = r % dim;
        r /= dim;
    }
    size_t off = (size_t)snprintf(buf, cap, "[");
    for (size_t k = 0; k + 1 < rank && off < cap; k++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%zu", k ? ", " : "", idx[k]);
    if (off < cap)
        snprintf(buf + off, cap - off, "]");
}

typedef struct ranked {
    double v;
    size_t i;
} ranked;

/* Largest first; NaN last; ties by index. */
static int rank_cmp(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    bool na = isnan(a->v), nb = isnan(b->v);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The indices of the k largest values of row (cols values) into top, using
 * scratch (cols entries). */
static void top_k(const json_t *flat, size_t row, size_t cols, size_t k, size_t *top,
                  ranked *scratch)
{
    for (size_t j = 0; j < cols; j++) {
        scratch[j].v = leaf_value(json_array_get(flat, row * cols + j));
        scratch[j].i = j;
    }
    qsort(scratch, cols, sizeof *scratch, rank_cmp);
    for (size_t t = 0; t < k; t++)
        top[t] = scratch[t].i;
}

/* The flat data of an output (nested data flattened), a new reference. */
static json_t *flat_data(const json_t *out)
{
    const json_t *data = json_object_get(out, "data");
    int64_t shape[GF_MAX_RANK];
    int rank;
    json_t *flat = json_array();
    if (flat == NULL || !nested_shape(data, shape, &rank) || !flatten(data, 0, shape, rank, flat)) {
        /* leaves may be the strings NaN/Infinity: flatten by hand */
        json_decref(flat);
        flat = json_array();
        if (flat == NULL)
            return NULL;
        const json_t *stack[GF_MAX_RANK + 1];
        size_t pos[GF_MAX_RANK + 1];
        int sp = 0;
        if (!json_is_array(data))
            return flat;
        stack[0] = data;
        pos[0] = 0;
        while (sp >= 0) {
            if (pos[sp] >= json_array_size(stack[sp])) {
                sp--;
                if (sp >= 0)
                    pos[sp]++;
                continue;
            }
            const json_t *e = json_array_get(stack[sp], pos[sp]);
            if (json_is_array(e) && sp < GF_MAX_RANK) {
                stack[++sp] = e;
                pos[sp] = 0;
            } else {
                json_array_append(flat, (json_t *)e);
                pos[sp]++;
            }
        }
    }
    return flat;
}

static int print_outputs(const gf_cli_client *c, json_t *resp, const invoke_opts *o, bool v1)
{
    json_t *outs = json_object_get(resp, "outputs");
    if (!json_is_array(outs)) {
        gf_cli_errorf(c, "the server's answer has no outputs");
        return 1;
    }
    for (size_t i = 0; i < json_array_size(outs); i++) {
        json_t *out = json_array_get(outs, i);
        const json_t *shape = json_object_get(out, "shape");
        json_t *flat = flat_data(out);
        if (flat == NULL) {
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        size_t rows, cols;
        rows_cols(shape, json_array_size(flat), &rows, &cols);
        size_t k = o->top > 0 ? ((size_t)o->top < cols ? (size_t)o->top : cols) : 0;
        size_t *top = k > 0 ? calloc(k, sizeof *top) : NULL;
        ranked *scratch = k > 0 ? calloc(cols, sizeof *scratch) : NULL;
        if (k > 0 && (top == NULL || scratch == NULL)) {
            free(top);
            free(scratch);
            json_decref(flat);
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        if (c->json) {
            if (k > 0) {
                json_t *tops = json_array();
                for (size_t r = 0; r < rows && tops != NULL; r++) {
                    top_k(flat, r, cols, k, top, scratch);
                    json_t *row = json_array();
                    for (size_t t = 0; t < k && row != NULL; t++)
                        json_array_append_new(
                            row, json_pack("{s:I, s:O}", "index", (json_int_t)top[t], "value",
                                           json_array_get(flat, r * cols + top[t])));
                    json_array_append_new(tops, row);
                }
                json_object_set_new(out, "top", tops);
            }
        } else {
            char sh[128];
            printf("%s  %s  %s%s\n", gf_cli_json_str(out, "name", "?"),
                   gf_cli_json_str(out, "datatype", "?"), gf_cli_fmt_shape(shape, sh, sizeof sh),
                   k > 0 ? "  (top values: index: value)" : "");
            size_t shown = rows < MAX_ROWS_SHOWN ? rows : MAX_ROWS_SHOWN;
            for (size_t r = 0; r < shown; r++) {
                char label[96];
                row_label(shape, r, label, sizeof label);
                printf("  %-6s", label);
                if (k > 0) {
                    top_k(flat, r, cols, k, top, scratch);
                    for (size_t t = 0; t < k; t++) {
                        printf("%s%zu: ", t ? "   " : "", top[t]);
                        print_leaf(json_array_get(flat, r * cols + top[t]));
                    }
                    printf("\n");
                    continue;
                }
                size_t nv = cols < MAX_VALUES_SHOWN ? cols : MAX_VALUES_SHOWN;
                for (size_t j = 0; j < nv; j++) {
                    if (j > 0 && j % VALUES_PER_LINE == 0)
                        printf("\n  %-6s", "");
                    else if (j > 0)
                        printf(" ");
                    print_leaf(json_array_get(flat, r * cols + j));
                }
                if (nv < cols)
                    printf(" ... (%zu more)", cols - nv);
                printf("\n");
            }
            if (shown < rows)
                printf("  ... %zu more rows (--json prints everything)\n", rows - shown);
        }
        free(top);
        free(scratch);
        json_decref(flat);
    }
    if (c->json) {
        /* 9 significant digits give back every FP32 (and FP16, BF16) value exactly */
        bool f64 = false;
        for (size_t i = 0; i < json_array_size(outs); i++)
            f64 |= strcmp(gf_cli_json_str(json_array_get(outs, i), "datatype", ""), "FP64") == 0;
        char *text = json_dumps(resp, JSON_COMPACT | JSON_REAL_PRECISION(f64 ? 17 : 9));
        if (text == NULL) {
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        printf("%s\n", text);
        free(text);
        return 0;
    }
    if (v1) {
        const json_t *t = json_object_get(resp, "timing_us");
        char tot[32], q[32], l[32], e[32];
        printf("version %lld, worker %lld, %s, batch %lld, %s (queue %s, swap-in %s, exec %s)\n",
               gf_cli_json_int(resp, "version", 0), gf_cli_json_int(resp, "worker", -1),
               json_is_true(json_object_get(resp, "cold")) ? "cold" : "warm",
               gf_cli_json_int(resp, "batch_size", 1),
               gf_cli_fmt_seconds((double)gf_cli_json_int(t, "total", 0) / 1e6, tot, sizeof tot),
               gf_cli_fmt_seconds((double)gf_cli_json_int(t, "queue", 0) / 1e6, q, sizeof q),
               gf_cli_fmt_seconds((double)gf_cli_json_int(t, "load", 0) / 1e6, l, sizeof l),
               gf_cli_fmt_seconds((double)gf_cli_json_int(t, "exec", 0) / 1e6, e, sizeof e));
    } else {
        printf("version %s\n", gf_cli_json_str(resp, "model_version", "?"));
    }
    return 0;
}

static int invoke_run(gf_cli_client *c, const invoke_opts *o)
{
    char *body = NULL;
    size_t len = 0, hlen = 0;
    int rc = o->n_npy > 0 ? npy_request(c, o, &body, &len, &hlen) : json_request(c, o, &body);
    if (rc != 0)
        return rc;
    if (o->n_npy == 0)
        len = strlen(body);
    char path[160];
    if (o->version > 0)
        snprintf(path, sizeof path, "/v2/models/%s/versions/%lld/infer", o->name, o->version);
    else
        snprintf(path, sizeof path, "/v1/functions/%s/invoke", o->name);
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    json_t *resp = NULL;
    char *text = NULL;
    rc = 1;
    CURL *e = gf_cli_prepare(c, "POST", path, &r);
    if (e == NULL)
        goto out;
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    struct curl_slist *h =
        curl_slist_append(NULL, o->n_npy > 0 ? "Content-Type: application/octet-stream"
                                             : "Content-Type: application/json");
    char ihcl[64];
    snprintf(ihcl, sizeof ihcl, "Inference-Header-Content-Length: %zu", hlen);
    struct curl_slist *h2 = h != NULL && o->n_npy > 0 ? curl_slist_append(h, ihcl) : h;
    if (h2 == NULL) {
        curl_slist_free_all(h);
        gf_cli_errorf(c, "out of memory");
        goto out;
    }
    int st = gf_cli_perform(c, h2, &r);
    curl_slist_free_all(h2);
    if (st != 0)
        goto out;
    if (r.status < 200 || r.status > 299) {
        gf_cli_report_http(c, &r);
        goto out;
    }
    size_t jlen = r.body.len;
    if (r.ihcl[0] != '\0') {
        long long v;
        if (!gf_cli_parse_int(r.ihcl, 0, (long long)r.body.len, &v)) {
            gf_cli_errorf(c, "the server sent a bad Inference-Header-Content-Length");
            goto out;
        }
        jlen = (size_t)v;
    }
    size_t tlen;
    text = quote_nonfinite(r.body.data != NULL ? r.body.data : "", jlen, &tlen);
    if (text == NULL) {
        gf_cli_errorf(c, "out of memory");
        goto out;
    }
    json_error_t je;
    resp = json_loadb(text, tlen, 0, &je);
    if (resp == NULL || !json_is_object(resp)) {
        gf_cli_errorf(c, "the server's answer is not a JSON object: %s",
                      resp == NULL ? je.text : "");
        goto out;
    }
    if (inline_binary(c, json_object_get(resp, "outputs"), r.body.data + jlen, r.body.len - jlen))
        goto out;
    rc = print_outputs(c, resp, o, o->version <= 0);
out:
    json_decref(resp);
    free(text);
    gf_cli_resp_deinit(&r);
    free(body);
    return rc;
}

int gf_cmd_invoke(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        invoke_usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, "invoke");
    invoke_opts o;
    memset(&o, 0, sizeof o);
    gf_cli_val val[I_COUNT_];
    const char *pos[1];
    int n_pos;
    int rc = gf_cli_parse(&invoke_cmd, &c, val, argc, argv, pos, 1, &n_pos);
    if (rc != 0)
        goto out;
    rc = 2;
    o.name = n_pos > 0 ? pos[0] : NULL;
    o.data = val[I_DATA].v;
    o.file = val[I_FILE].v;
    o.n_npy = val[I_NPY].n;
    memcpy(o.npy, val[I_NPY].all, (size_t)o.n_npy * sizeof o.npy[0]);
    if (!gf_cli_flag_int(&invoke_cmd, &c, I_VERSION, val, 1, INT64_MAX, "a positive integer",
                         &o.version) ||
        !gf_cli_flag_int(&invoke_cmd, &c, I_TOP, val, 1, 1000000, "a positive integer", &o.top))
        goto out;
    int sources = (o.data != NULL) + (o.file != NULL) + (o.n_npy > 0);
    if (o.name == NULL || sources != 1) {
        gf_cli_errorf(&c, "%s",
                      o.name == NULL ? "give the function's NAME"
                                     : "give one of --data, --file or --npy");
        invoke_usage(stderr);
        goto out;
    }
    rc = 1;
    if (!gf_cli_name_ok(&c, o.name))
        goto out;
    rc = invoke_run(&c, &o);
out:
    gf_cli_client_deinit(&c);
    return rc;
}
