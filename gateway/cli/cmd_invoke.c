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
#include "gateway/cli/invoke.h"
#include "gateway/cli/npy.h"

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
    [I_NPY] = {"npy", 0, "[INPUT=]FILE", GF_INVOKE_MAX_NPY,
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
    if (flat == NULL || !gf_invoke_nested_shape(data, shape, &rank) ||
        !gf_invoke_flatten(data, 0, shape, rank, flat)) {
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

static int print_outputs(const gf_cli_client *c, json_t *resp, const gf_invoke_opts *o, bool v1)
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

static int invoke_run(gf_cli_client *c, const gf_invoke_opts *o)
{
    char *body = NULL;
    size_t len = 0, hlen = 0;
    int rc = gf_invoke_request(c, o, &body, &len, &hlen);
    if (rc != 0)
        return rc;
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
    if (st != 0 || gf_cli_resp_ok(c, &r) != 0)
        goto out;
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
    gf_invoke_opts o;
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
