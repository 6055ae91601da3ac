/* gpufaas invoke — building the request (gateway/cli/invoke.h): from --data
 * or --file, a KServe v2 JSON request (the text as given when it is one,
 * else the function's manifest gives each input's datatype and the array's
 * nesting its shape); from --npy, a binary tensor data extension request with
 * each array converted to the input's datatype.
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
#include "gateway/cli/client.h"
#include "gateway/cli/invoke.h"
#include "gateway/cli/npy.h"

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
static const json_t *function_inputs(gf_cli_client *c, const gf_invoke_opts *o, json_t **fn)
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
bool gf_invoke_nested_shape(const json_t *v, int64_t *shape, int *rank)
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
bool gf_invoke_flatten(const json_t *v, int depth, const int64_t *shape, int rank, json_t *flat)
{
    if (depth == rank) {
        if (!json_is_number(v) && !json_is_boolean(v))
            return false;
        return json_array_append(flat, (json_t *)v) == 0;
    }
    if (!json_is_array(v) || (int64_t)json_array_size(v) != shape[depth])
        return false;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!gf_invoke_flatten(json_array_get(v, i), depth + 1, shape, rank, flat))
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
    if (!gf_invoke_nested_shape(value, shape, &rank)) {
        gf_cli_errorf(c, "input '%s': arrays nested more than %d deep", name, GF_MAX_RANK);
        return NULL;
    }
    json_t *flat = json_array();
    if (flat == NULL || !gf_invoke_flatten(value, 0, shape, rank, flat)) {
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
static int json_request(gf_cli_client *c, const gf_invoke_opts *o, char **body)
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
static int npy_request(gf_cli_client *c, const gf_invoke_opts *o, char **body, size_t *len,
                       size_t *hlen)
{
    npy_in in[GF_INVOKE_MAX_NPY];
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
        if (x->to == GF_DT_INVALID || x->to == GF_DT_BYTES) { /* numbers only in .npy */
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

int gf_invoke_request(gf_cli_client *c, const gf_invoke_opts *o, char **body, size_t *len,
                      size_t *hlen)
{
    *hlen = 0;
    if (o->n_npy > 0)
        return npy_request(c, o, body, len, hlen);
    int rc = json_request(c, o, body);
    if (rc == 0)
        *len = strlen(*body);
    return rc;
}
