/* gpufaas — Triton's ModelConfig JSON from and to a manifest (see
 * model_config.h for the mapping). */
#include "gateway/core/model_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"

#define PLATFORM_PREFIX "gpufaas_"
#define LABELS_SUFFIX "_labels.txt" /* the label_filename shown for an output's labels */

/* TYPE_FP32 for FP32 (Triton's data_type names; BYTES is TYPE_STRING). */
static void type_name(gf_dtype dt, char *out, size_t cap)
{
    snprintf(out, cap, "TYPE_%s", dt == GF_DT_BYTES ? "STRING" : gf_dtype_kserve_name(dt));
}

/* True when every input's first dim is -1: the manifest batches. */
static bool batches(const gf_manifest *mf)
{
    for (size_t i = 0; i < mf->n_inputs; i++)
        if (mf->inputs[i].rank < 1 || mf->inputs[i].shape[0] != -1)
            return false;
    return mf->n_inputs > 0;
}

static json_t *io_of(const gf_manifest_io *io, size_t n, bool strip_batch, bool is_input)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n && arr != NULL; i++) {
        json_t *dims = json_array();
        bool strip = strip_batch && io[i].rank >= 1 && io[i].shape[0] == -1;
        for (int32_t k = strip ? 1 : 0; k < io[i].rank; k++)
            json_array_append_new(dims, json_integer(io[i].shape[k]));
        char tn[32];
        type_name(io[i].dtype, tn, sizeof tn);
        json_t *e = json_pack("{s:s, s:s, s:o, s:b}", "name", io[i].name, "data_type", tn, "dims",
                              dims, "is_shape_tensor", 0);
        if (e != NULL && is_input) {
            json_object_set_new(e, "format", json_string("FORMAT_NONE"));
            json_object_set_new(e, "allow_ragged_batch", json_false());
            json_object_set_new(e, "optional", json_false());
        } else if (e != NULL) {
            char lf[96] = "";
            if (io[i].n_labels > 0)
                snprintf(lf, sizeof lf, "%s" LABELS_SUFFIX, io[i].name);
            json_object_set_new(e, "label_filename", json_string(lf));
        }
        json_array_append_new(arr, e);
    }
    return arr;
}

static json_t *string_param(const char *s)
{
    return json_pack("{s:s}", "string_value", s);
}

json_t *gw_model_config_of(const gf_manifest *mf, const gw_mc_extra *x)
{
    bool b = batches(mf);
    char platform[96], iname[96], ver[24];
    snprintf(platform, sizeof platform, PLATFORM_PREFIX "%s", mf->kind);
    snprintf(iname, sizeof iname, "%s_0", mf->name);
    snprintf(ver, sizeof ver, "%lld", (long long)x->version);
    json_t *params = json_object();
    json_object_set_new(params, "kind", string_param(mf->kind));
    json_object_set_new(params, "version", string_param(ver));
    json_object_set_new(params, "config", string_param(mf->config_json));
    if (mf->slo_ms > 0) {
        char slo[40];
        snprintf(slo, sizeof slo, "%.17g", mf->slo_ms);
        json_object_set_new(params, "slo_ms", string_param(slo));
    }
    if (mf->n_ignore_weights > 0) {
        json_t *iw = json_array();
        for (size_t i = 0; i < mf->n_ignore_weights; i++)
            json_array_append_new(iw, json_string(mf->ignore_weights[i]));
        char *text = json_dumps(iw, JSON_COMPACT);
        json_decref(iw);
        json_object_set_new(params, "ignore_weights", string_param(text != NULL ? text : "[]"));
        free(text);
    }
    json_t *gpus = json_array();
    if (x->gpu)
        for (int w = 0; w < x->n_workers; w++)
            json_array_append_new(gpus, json_integer(w));
    json_t *cfg = json_pack(
        "{s:s, s:s, s:s, s:{s:{s:i}}, s:I, s:o, s:o, s:[{s:s, s:s, s:i, s:o}], s:s, s:o}",
        "name", mf->name, "platform", platform, "backend", "gpufaas", "version_policy", "latest",
        "num_versions", 1, "max_batch_size", (json_int_t)(b ? mf->max_batch_size : 0), "input",
        io_of(mf->inputs, mf->n_inputs, b, true), "output",
        io_of(mf->outputs, mf->n_outputs, b, false), "instance_group", "name", iname,
        "kind", x->gpu ? "KIND_GPU" : "KIND_CPU", "count", x->n_workers > 0 ? x->n_workers : 1,
        "gpus", gpus, "default_model_filename", "", "parameters", params);
    if (cfg != NULL && b)
        json_object_set_new(cfg, "dynamic_batching",
                            json_pack("{s:[], s:I, s:b}", "preferred_batch_size",
                                      "max_queue_delay_microseconds",
                                      (json_int_t)mf->max_queue_delay_us, "preserve_ordering", 1));
    return cfg;
}

/* ---- reading a ModelConfig back ------------------------------------------------------ */

/* Refuse a key of obj that is not in the NULL-terminated list. */
static gf_status known_keys(const json_t *obj, const char *what, const char *const *keys,
                            gf_err *err)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        bool ok = false;
        for (size_t i = 0; keys[i] != NULL && !ok; i++)
            ok = strcmp(k, keys[i]) == 0;
        if (!ok)
            return gf_err_set(err, GF_ERR_INVALID,
                              "config: %s has the field '%.60s', which gpufaas does not support",
                              what, k);
    }
    return GF_OK;
}

/* An integer, or an integer in a string (protobuf's JSON for int64). */
static bool get_int(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        *out = strtoll(s, &end, 10);
        return *s != '\0' && *end == '\0';
    }
    return false;
}

/* One input or output list of cfg into the manifest's form. */
static gf_status io_from(const json_t *arr, const char *what, bool add_batch, json_t **out,
                         gf_err *err)
{
    static const char *const in_keys[] = {"name", "data_type", "dims", "format",
                                          "is_shape_tensor", "allow_ragged_batch", "optional",
                                          NULL};
    static const char *const out_keys[] = {"name", "data_type", "dims", "label_filename",
                                           "is_shape_tensor", NULL};
    bool is_in = strcmp(what, "input") == 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return gf_err_set(err, GF_ERR_INVALID, "config: '%s' must be a non-empty array", what);
    json_t *list = json_array();
    size_t i;
    const json_t *e;
    gf_status st = GF_OK;
    json_array_foreach((json_t *)arr, i, e) {
        if (!json_is_object(e)) {
            st = gf_err_set(err, GF_ERR_INVALID, "config: %s[%zu] must be an object", what, i);
            break;
        }
        if ((st = known_keys(e, what, is_in ? in_keys : out_keys, err)) != GF_OK)
            break;
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *tn = json_string_value(json_object_get(e, "data_type"));
        const json_t *dims = json_object_get(e, "dims");
        if (name == NULL || tn == NULL || !json_is_array(dims)) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "config: %s[%zu] needs 'name', 'data_type' and 'dims'", what, i);
            break;
        }
        const char *dt = strcmp(tn, "TYPE_STRING") == 0    ? "BYTES"
                         : strncmp(tn, "TYPE_", 5) == 0 ? tn + 5
                                                        : "";
        if (gf_dtype_from_kserve_name(dt, strlen(dt)) == GF_DT_INVALID) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "config: %s '%.60s': data_type '%.40s' is not one gpufaas runs "
                            "(TYPE_FP32, TYPE_INT64, ...)",
                            what, name, tn);
            break;
        }
        const json_t *flag;
        if (((flag = json_object_get(e, "is_shape_tensor")) != NULL && !json_is_false(flag)) ||
            ((flag = json_object_get(e, "allow_ragged_batch")) != NULL && !json_is_false(flag)) ||
            ((flag = json_object_get(e, "optional")) != NULL && !json_is_false(flag))) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "config: %s '%.60s': shape tensors, ragged batches and optional "
                            "inputs are not supported",
                            what, name);
            break;
        }
        const char *fmt = json_string_value(json_object_get(e, "format"));
        if (json_object_get(e, "format") != NULL &&
            (fmt == NULL || strcmp(fmt, "FORMAT_NONE") != 0)) {
            st = gf_err_set(err, GF_ERR_INVALID, "config: input '%.60s': format must be "
                            "FORMAT_NONE", name);
            break;
        }
        json_t *shape = json_array();
        if (add_batch)
            json_array_append_new(shape, json_integer(-1));
        size_t k;
        const json_t *d;
        json_array_foreach((json_t *)dims, k, d) {
            long long n;
            if (!get_int(d, &n)) {
                st = gf_err_set(err, GF_ERR_INVALID, "config: %s '%.60s': dims must be "
                                "integers", what, name);
                break;
            }
            json_array_append_new(shape, json_integer(n));
        }
        if (st != GF_OK) {
            json_decref(shape);
            break;
        }
        json_t *entry = json_pack("{s:s, s:s, s:o}", "name", name, "datatype", dt, "shape",
                                  shape);
        const char *lf = json_string_value(json_object_get(e, "label_filename"));
        if (json_object_get(e, "label_filename") != NULL && lf == NULL) {
            json_decref(entry);
            st = gf_err_set(err, GF_ERR_INVALID, "config: output '%.60s': label_filename must "
                            "be a string", name);
            break;
        }
        if (lf != NULL && lf[0] != '\0') /* repo_load.c reads the file it names */
            json_object_set_new(entry, "labels_file", json_string(lf));
        json_array_append_new(list, entry);
    }
    if (st != GF_OK) {
        json_decref(list);
        return st;
    }
    *out = list;
    return GF_OK;
}

/* parameters: {"key": {"string_value": "..."}} into the manifest m. */
static gf_status params_from(const json_t *params, json_t *m, gf_err *err)
{
    if (!json_is_object(params))
        return gf_err_set(err, GF_ERR_INVALID, "config: 'parameters' must be an object");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)params, k, v) {
        const json_t *sv = json_is_object(v) ? json_object_get(v, "string_value") : NULL;
        if (sv == NULL || !json_is_string(sv) || json_object_size(v) != 1)
            return gf_err_set(err, GF_ERR_INVALID,
                              "config: parameters.%.60s must be {\"string_value\": \"...\"}", k);
        const char *s = json_string_value(sv);
        if (strcmp(k, "kind") == 0) {
            json_object_set_new(m, "kind", json_string(s));
        } else if (strcmp(k, "slo_ms") == 0) {
            char *end;
            double slo = strtod(s, &end);
            if (*s == '\0' || *end != '\0')
                return gf_err_set(err, GF_ERR_INVALID, "config: parameters.slo_ms '%.40s' is "
                                  "not a number", s);
            json_object_set_new(m, "slo_ms", json_real(slo));
        } else if (strcmp(k, "config") == 0 || strcmp(k, "ignore_weights") == 0) {
            json_error_t je;
            json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &je);
            if (j == NULL)
                return gf_err_set(err, GF_ERR_INVALID, "config: parameters.%s is not JSON: %s",
                                  k, je.text);
            json_object_set_new(m, k, j);
        } else if (strcmp(k, "version") != 0) { /* version: shown, not set */
            return gf_err_set(err, GF_ERR_INVALID,
                              "config: parameters.%.60s is not a gpufaas parameter (kind, "
                              "config, slo_ms, ignore_weights)",
                              k);
        }
    }
    return GF_OK;
}

static gf_status kind_from_platform(const char *field, const char *s, json_t *m, gf_err *err)
{
    size_t n = strlen(PLATFORM_PREFIX);
    if (strncmp(s, PLATFORM_PREFIX, n) == 0 && s[n] != '\0')
        json_object_set_new(m, "kind", json_string(s + n));
    else if (strcmp(s, "onnxruntime_onnx") == 0 || strcmp(s, "onnxruntime") == 0)
        json_object_set_new(m, "kind", json_string("onnx"));
    else if (strcmp(s, "gpufaas") != 0 && s[0] != '\0')
        return gf_err_set(err, GF_ERR_INVALID,
                          "config: %s '%.60s' is not one gpufaas runs (gpufaas_<kind>, "
                          "onnxruntime_onnx)",
                          field, s);
    return GF_OK;
}

gf_status gw_model_config_to_manifest(const json_t *cfg, const char *name,
                                      const gf_manifest *base, bool derives_io, gf_buf *out,
                                      gf_err *err)
{
    static const char *const top[] = {"name", "platform", "backend", "runtime",
                                      "version_policy", "max_batch_size", "input", "output",
                                      "dynamic_batching", "instance_group", "parameters",
                                      "default_model_filename", NULL};
    static const char *const dyn[] = {"preferred_batch_size", "max_queue_delay_microseconds",
                                      "preserve_ordering", NULL};
    if (!json_is_object(cfg))
        return gf_err_set(err, GF_ERR_INVALID, "config must be a JSON object (ModelConfig)");
    gf_status st = known_keys(cfg, "the model configuration", top, err);
    if (st != GF_OK)
        return st;
    json_t *m = NULL;
    if (base != NULL) {
        gf_buf b;
        gf_buf_init(&b);
        if (gf_manifest_to_json(base, &b) == GF_OK)
            m = json_loadb(b.data, b.len, 0, NULL);
        gf_buf_deinit(&b);
        json_object_del(m, "version"); /* a load makes a new one */
    } else {
        m = json_pack("{s:s}", "name", name);
    }
    if (m == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory reading the model configuration");
    const json_t *v;
    const char *s;
    if ((v = json_object_get(cfg, "name")) != NULL &&
        (!json_is_string(v) || strcmp(json_string_value(v), name) != 0)) {
        st = gf_err_set(err, GF_ERR_INVALID, "config: name must be '%s', the model loaded",
                        name);
        goto out;
    }
    const char *fields[2] = {"platform", "backend"};
    for (int i = 0; i < 2 && st == GF_OK; i++)
        if ((v = json_object_get(cfg, fields[i])) != NULL)
            st = (s = json_string_value(v)) == NULL
                     ? gf_err_set(err, GF_ERR_INVALID, "config: %s must be a string", fields[i])
                     : kind_from_platform(fields[i], s, m, err);
    if (st != GF_OK)
        goto out;
    long long mbs = -1;
    if ((v = json_object_get(cfg, "max_batch_size")) != NULL &&
        (!get_int(v, &mbs) || mbs < 0 || mbs > 1 << 20)) {
        st = gf_err_set(err, GF_ERR_INVALID, "config: max_batch_size must be an integer >= 0");
        goto out;
    }
    /* the batch dimension: the config's, else the base's */
    bool base_batches = base != NULL && batches(base);
    bool add_batch = mbs >= 0 ? mbs > 0 : base_batches;
    if (mbs > 0)
        json_object_set_new(m, "max_batch_size", json_integer(mbs));
    else if (mbs == 0)
        json_object_set_new(m, "max_batch_size", json_integer(1));
    const char *lists[2] = {"input", "output"};
    const char *mkeys[2] = {"inputs", "outputs"};
    for (int i = 0; i < 2; i++) {
        if ((v = json_object_get(cfg, lists[i])) == NULL) {
            if (base == NULL && derives_io)
                continue;
            if (base == NULL) {
                st = gf_err_set(err, GF_ERR_INVALID, "config: '%s' is needed to deploy a new "
                                "model", lists[i]);
                goto out;
            }
            if (mbs >= 0 && add_batch != base_batches) {
                st = gf_err_set(err, GF_ERR_INVALID,
                                "config: max_batch_size %lld changes the batch dimension; give "
                                "'input' and 'output' with it",
                                mbs);
                goto out;
            }
            continue;
        }
        json_t *list = NULL;
        if ((st = io_from(v, lists[i], add_batch, &list, err)) != GF_OK)
            goto out;
        json_object_set_new(m, mkeys[i], list);
    }
    if ((v = json_object_get(cfg, "dynamic_batching")) != NULL) {
        if (!json_is_object(v)) {
            st = gf_err_set(err, GF_ERR_INVALID, "config: dynamic_batching must be an object");
            goto out;
        }
        if ((st = known_keys(v, "dynamic_batching", dyn, err)) != GF_OK)
            goto out;
        const json_t *d = json_object_get(v, "max_queue_delay_microseconds");
        long long us = 0;
        if (d != NULL && (!get_int(d, &us) || us < 0)) {
            st = gf_err_set(err, GF_ERR_INVALID, "config: dynamic_batching."
                            "max_queue_delay_microseconds must be an integer >= 0");
            goto out;
        }
        json_object_set_new(m, "max_queue_delay_us", json_integer(us));
        const json_t *pb = json_object_get(v, "preferred_batch_size");
        if (pb != NULL && !json_is_array(pb)) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "config: dynamic_batching.preferred_batch_size must be an array");
            goto out;
        }
    } else if (mbs >= 0) {
        json_object_set_new(m, "max_queue_delay_us", json_integer(0)); /* no dynamic batching */
    }
    if ((v = json_object_get(cfg, "parameters")) != NULL && (st = params_from(v, m, err)) != GF_OK)
        goto out;
    if (json_object_get(m, "kind") == NULL && !derives_io) {
        st = gf_err_set(err, GF_ERR_INVALID, "config: no kind: give platform "
                        "\"gpufaas_<kind>\" or parameters.kind");
        goto out;
    }
    char *text = json_dumps(m, JSON_COMPACT);
    st = text != NULL ? gf_buf_append_str(out, text) : GF_ERR_NOMEM;
    free(text);
    if (st != GF_OK)
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory reading the model configuration");
out:
    json_decref(m);
    return st;
}
