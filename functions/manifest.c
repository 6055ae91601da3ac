/* gpufaas — function manifests: parse, check, serialise. */
#include "functions/manifest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"

bool gf_function_name_valid(const char *name)
{
    if (name == NULL)
        return false;
    size_t n = strlen(name);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (i == 0 ? !alnum : !(alnum || c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

bool gf_companion_suffix_valid(const char *suffix)
{
    if (suffix == NULL)
        return false;
    size_t n = strlen(suffix);
    if (n == 0 || n > GF_COMPANION_SUFFIX_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = suffix[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return strcmp(suffix, "safetensors") != 0;
}

char *gf_companion_path(const char *weights_path, const char *suffix)
{
    size_t n = strlen(weights_path);
    static const char ext[] = ".safetensors";
    size_t base = n >= sizeof ext - 1 && strcmp(weights_path + n - (sizeof ext - 1), ext) == 0
                      ? n - (sizeof ext - 1) : n;
    size_t cap = base + 1 + strlen(suffix) + 1;
    char *p = malloc(cap);
    if (p != NULL)
        snprintf(p, cap, "%.*s.%s", (int)base, weights_path, suffix);
    return p;
}

static void io_free(gf_manifest_io *io, size_t n)
{
    if (io == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(io[i].name);
        for (size_t k = 0; k < io[i].n_labels; k++)
            free(io[i].labels[k]);
        free(io[i].labels);
    }
    free(io);
}

void gf_manifest_free(gf_manifest *m)
{
    if (m == NULL)
        return;
    free(m->name);
    free(m->kind);
    io_free(m->inputs, m->n_inputs);
    io_free(m->outputs, m->n_outputs);
    free(m->config_json);
    for (size_t i = 0; i < m->n_ignore_weights; i++)
        free(m->ignore_weights[i]);
    free(m->ignore_weights);
    free(m);
}

bool gf_manifest_ignores_weight(const gf_manifest *m, const char *name)
{
    for (size_t i = 0; i < m->n_ignore_weights; i++) {
        const char *e = m->ignore_weights[i];
        size_t n = strlen(e);
        if (n > 0 && e[n - 1] == '*' ? strncmp(name, e, n - 1) == 0 : strcmp(name, e) == 0)
            return true;
    }
    return false;
}

static gf_status parse_ignore(const gf_json *v, gf_manifest *m, gf_err *err)
{
    if (v->type != GF_JSON_ARRAY || v->u.arr.n == 0 || v->u.arr.n > GF_MANIFEST_MAX_IGNORE)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"ignore_weights\" must be an array "
                          "of 1 to %d tensor names (or prefixes ending in '*')",
                          GF_MANIFEST_MAX_IGNORE);
    m->ignore_weights = calloc(v->u.arr.n, sizeof *m->ignore_weights);
    if (m->ignore_weights == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < v->u.arr.n; i++) {
        const gf_json *e = v->u.arr.items[i];
        if (e->type != GF_JSON_STRING || e->u.str.len == 0 ||
            e->u.str.len > GF_MANIFEST_MAX_IGNORE_LEN || strlen(e->u.str.s) != e->u.str.len)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: ignore_weights[%zu] must be a "
                              "tensor name of 1 to %d bytes", i, GF_MANIFEST_MAX_IGNORE_LEN);
        if ((m->ignore_weights[i] = strdup(e->u.str.s)) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        m->n_ignore_weights = i + 1;
    }
    return GF_OK;
}

static gf_status dup_str(const gf_json *v, char **out, const char *field, gf_err *err)
{
    if (v->type != GF_JSON_STRING)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" must be a string, not a %s",
                          field, gf_json_type_name(v->type));
    if (strlen(v->u.str.s) != v->u.str.len)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" contains a NUL byte", field);
    *out = strdup(v->u.str.s);
    return *out ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
}

static gf_status get_int(const gf_json *v, int64_t lo, int64_t hi, int64_t *out,
                         const char *field, gf_err *err)
{
    if (v->type != GF_JSON_NUMBER || !v->u.num.is_int)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" must be an integer", field);
    if (v->u.num.i < lo || v->u.num.i > hi)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" is %lld, outside %lld..%lld",
                          field, (long long)v->u.num.i, (long long)lo, (long long)hi);
    *out = v->u.num.i;
    return GF_OK;
}

/* An output's "labels": an array of 1..GF_MANIFEST_MAX_LABELS strings of
 * 1..GF_MANIFEST_MAX_LABEL_LEN bytes, without control characters. */
static gf_status parse_labels(const gf_json *v, const char *where, gf_manifest_io *io,
                              gf_err *err)
{
    if (v->type != GF_JSON_ARRAY || v->u.arr.n == 0 || v->u.arr.n > GF_MANIFEST_MAX_LABELS)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: %s: \"labels\" must be an array of 1 "
                          "to %d strings", where, GF_MANIFEST_MAX_LABELS);
    io->labels = calloc(v->u.arr.n, sizeof *io->labels);
    if (io->labels == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < v->u.arr.n; i++) {
        const gf_json *e = v->u.arr.items[i];
        bool ok = e->type == GF_JSON_STRING && e->u.str.len > 0 &&
                  e->u.str.len <= GF_MANIFEST_MAX_LABEL_LEN;
        for (size_t k = 0; ok && k < e->u.str.len; k++)
            ok = (unsigned char)e->u.str.s[k] >= 0x20 && e->u.str.s[k] != 0x7f;
        if (!ok)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: %s: labels[%zu] must be 1 to %d "
                              "bytes of text without control characters", where, i,
                              GF_MANIFEST_MAX_LABEL_LEN);
        if ((io->labels[i] = strdup(e->u.str.s)) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        io->n_labels = i + 1;
    }
    return GF_OK;
}

static gf_status parse_io_list(const gf_json *v, const char *field, gf_manifest_io **out,
                               size_t *n_out, gf_err *err)
{
    if (v->type != GF_JSON_ARRAY)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" must be an array", field);
    size_t n = v->u.arr.n;
    if (n == 0 || n > GF_MANIFEST_MAX_IO)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"%s\" needs 1 to %d entries, has %zu",
                          field, GF_MANIFEST_MAX_IO, n);
    gf_manifest_io *io = calloc(n, sizeof *io);
    if (io == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_status st = GF_OK;
    for (size_t i = 0; i < n && st == GF_OK; i++) {
        const gf_json *e = v->u.arr.items[i];
        char where[64];
        snprintf(where, sizeof where, "%s[%zu]", field, i);
        if (e->type != GF_JSON_OBJECT) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s must be an object", where);
            break;
        }
        const gf_json *name = NULL, *dt = NULL, *shape = NULL, *labels = NULL;
        for (size_t k = 0; k < e->u.obj.n; k++) {
            const gf_json_member *mm = &e->u.obj.m[k];
            if (strcmp(mm->key, "name") == 0)
                name = mm->value;
            else if (strcmp(mm->key, "labels") == 0 && strcmp(field, "outputs") == 0)
                labels = mm->value;
            else if (strcmp(mm->key, "datatype") == 0)
                dt = mm->value;
            else if (strcmp(mm->key, "shape") == 0)
                shape = mm->value;
            else {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s: unknown field \"%.64s\"",
                                where, mm->key);
                break;
            }
        }
        if (st != GF_OK)
            break;
        if (name == NULL || dt == NULL || shape == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s needs \"name\", \"datatype\" and "
                            "\"shape\"", where);
            break;
        }
        if ((st = dup_str(name, &io[i].name, "name", err)) != GF_OK)
            break;
        size_t nl = strlen(io[i].name);
        bool printable = nl > 0 && nl <= 64;
        for (size_t k = 0; k < nl && printable; k++)
            printable = (unsigned char)io[i].name[k] > 0x20 && io[i].name[k] != 0x7f;
        if (!printable) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s.name must be 1 to 64 printable "
                            "characters without spaces", where);
            break;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(io[k].name, io[i].name) == 0) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s: duplicate name \"%s\"",
                                field, io[i].name);
                break;
            }
        }
        if (st != GF_OK)
            break;
        if (dt->type != GF_JSON_STRING ||
            (io[i].dtype = gf_dtype_from_kserve_name(dt->u.str.s, dt->u.str.len)) ==
                GF_DT_INVALID) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s (\"%s\"): unknown datatype%s%.32s%s "
                            "(expected BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64, BYTES)",
                            where, io[i].name, dt->type == GF_JSON_STRING ? " \"" : "",
                            dt->type == GF_JSON_STRING ? dt->u.str.s : "",
                            dt->type == GF_JSON_STRING ? "\"" : "");
            break;
        }
        if (shape->type != GF_JSON_ARRAY || shape->u.arr.n > GF_MAX_RANK) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s (\"%s\"): shape must be an "
                            "array of 0 (a scalar) to %d dimensions", where, io[i].name,
                            GF_MAX_RANK);
            break;
        }
        io[i].rank = (int32_t)shape->u.arr.n;
        for (size_t k = 0; k < shape->u.arr.n; k++) {
            const gf_json *d = shape->u.arr.items[k];
            if (d->type != GF_JSON_NUMBER || !d->u.num.is_int ||
                (d->u.num.i < 1 && d->u.num.i != -1) || d->u.num.i > ((int64_t)1 << 40)) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: %s (\"%s\"): shape[%zu] must "
                                "be a positive integer or -1", where, io[i].name, k);
                break;
            }
            io[i].shape[k] = d->u.num.i;
        }
        if (st == GF_OK && labels != NULL)
            st = parse_labels(labels, where, &io[i], err);
    }
    if (st != GF_OK) {
        io_free(io, n);
        return st;
    }
    *out = io;
    *n_out = n;
    return GF_OK;
}

/* "admission": {"max_predicted_slo": F}, F in [1, 1000]. */
static gf_status parse_admission(const gf_json *v, gf_manifest *m, gf_err *err)
{
    if (v->type != GF_JSON_OBJECT)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"admission\" must be an object "
                          "{\"max_predicted_slo\": F}");
    if (gf_json_obj_find_dup(v) >= 0)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: \"admission\" has a member twice");
    for (size_t i = 0; i < v->u.obj.n; i++) {
        const char *k = v->u.obj.m[i].key;
        const gf_json *x = v->u.obj.m[i].value;
        if (strcmp(k, "max_predicted_slo") != 0)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: admission: unknown member "
                              "\"%.40s\" (max_predicted_slo)", k);
        if (x->type != GF_JSON_NUMBER || !isfinite(x->u.num.d) || x->u.num.d < 1 ||
            x->u.num.d > 1000)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: admission: \"max_predicted_slo\" "
                              "must be a number in [1, 1000] (multiples of slo_ms)");
        m->admission_max_slo = x->u.num.d;
    }
    return GF_OK;
}

gf_status gf_manifest_parse(const char *text, size_t len, gf_manifest **out, gf_err *err)
{
    *out = NULL;
    if (len > GF_MANIFEST_MAX_BYTES)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "manifest is %zu bytes, more than %u", len,
                          GF_MANIFEST_MAX_BYTES);
    gf_json_doc *doc;
    gf_status st = gf_json_parse(text, len, 32, &doc, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "manifest");
        if (err != NULL)
            err->code = GF_ERR_INVALID;
        return GF_ERR_INVALID;
    }
    const gf_json *root = gf_json_doc_root(doc);
    gf_manifest *m = calloc(1, sizeof *m);
    gf_buf cfg;
    gf_buf_init(&cfg);
    if (m == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    m->max_batch_size = 1;
    m->residency = GF_RESIDENCY_DEFAULT;
    if (root->type != GF_JSON_OBJECT) {
        st = gf_err_set(err, GF_ERR_INVALID, "manifest must be a JSON object, not a %s",
                        gf_json_type_name(root->type));
        goto fail;
    }
    long dup = gf_json_obj_find_dup(root);
    if (dup >= 0) {
        st = gf_err_set(err, GF_ERR_INVALID, "manifest: field \"%.64s\" appears twice",
                        root->u.obj.m[dup].key);
        goto fail;
    }
    const gf_json *config = NULL;
    for (size_t i = 0; i < root->u.obj.n; i++) {
        const char *k = root->u.obj.m[i].key;
        const gf_json *v = root->u.obj.m[i].value;
        if (strcmp(k, "name") == 0) {
            if ((st = dup_str(v, &m->name, "name", err)) != GF_OK)
                goto fail;
            if (!gf_function_name_valid(m->name)) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: name \"%.80s\" must match "
                                "^[a-z0-9][a-z0-9_.-]{0,62}$", m->name);
                goto fail;
            }
        } else if (strcmp(k, "kind") == 0) {
            if ((st = dup_str(v, &m->kind, "kind", err)) != GF_OK)
                goto fail;
            if (!gf_function_name_valid(m->kind)) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: kind \"%.80s\" is not a valid "
                                "kind name", m->kind);
                goto fail;
            }
        } else if (strcmp(k, "version") == 0) {
            if ((st = get_int(v, 1, INT32_MAX, &m->version, "version", err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "inputs") == 0) {
            if ((st = parse_io_list(v, "inputs", &m->inputs, &m->n_inputs, err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "outputs") == 0) {
            if ((st = parse_io_list(v, "outputs", &m->outputs, &m->n_outputs, err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "max_batch_size") == 0) {
            if ((st = get_int(v, 1, 65536, &m->max_batch_size, "max_batch_size", err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "max_queue_delay_us") == 0) {
            if ((st = get_int(v, 0, 10000000, &m->max_queue_delay_us, "max_queue_delay_us",
                              err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "slo_ms") == 0) {
            if (v->type != GF_JSON_NUMBER || !(v->u.num.d > 0) || v->u.num.d > 3600000.0 ||
                !isfinite(v->u.num.d)) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: \"slo_ms\" must be a number "
                                "between 0 and 3600000");
                goto fail;
            }
            m->slo_ms = v->u.num.d;
        } else if (strcmp(k, "residency") == 0) {
            if ((st = gf_residency_from_json(v, &m->residency, err)) != GF_OK) {
                gf_err_prefix(err, "manifest");
                goto fail;
            }
        } else if (strcmp(k, "admission") == 0) {
            if ((st = parse_admission(v, m, err)) != GF_OK)
                goto fail;
        } else if (strcmp(k, "config") == 0) {
            if (v->type != GF_JSON_OBJECT) {
                st = gf_err_set(err, GF_ERR_INVALID, "manifest: \"config\" must be an object");
                goto fail;
            }
            config = v;
        } else if (strcmp(k, "ignore_weights") == 0) {
            if ((st = parse_ignore(v, m, err)) != GF_OK)
                goto fail;
        } else {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: unknown field \"%.64s\"", k);
            goto fail;
        }
    }
    if (m->admission_max_slo > 0 && m->slo_ms <= 0) {
        st = gf_err_set(err, GF_ERR_INVALID, "manifest: \"admission\" needs \"slo_ms\" (it "
                        "admits by predicted completion against the SLO)");
        goto fail;
    }
    static const char *const required[] = {"name", "kind", "inputs", "outputs"};
    const void *have[] = {m->name, m->kind, m->inputs, m->outputs};
    for (int i = 0; i < 4; i++) {
        if (have[i] == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: missing field \"%s\"", required[i]);
            goto fail;
        }
    }
    st = config != NULL ? gf_json_write(config, &cfg) : gf_buf_append_str(&cfg, "{}");
    if (st != GF_OK) {
        st = gf_err_set(err, st, "manifest: out of memory");
        goto fail;
    }
    m->config_json = gf_buf_steal(&cfg, NULL);
    if (m->config_json == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    gf_json_doc_free(doc);
    *out = m;
    return GF_OK;
fail:
    gf_buf_deinit(&cfg);
    gf_manifest_free(m);
    gf_json_doc_free(doc);
    return st;
}

static gf_status append_io(gf_buf *b, const char *field, const gf_manifest_io *io, size_t n)
{
    gf_status st = gf_buf_printf(b, ",\"%s\":[", field);
    for (size_t i = 0; st == GF_OK && i < n; i++) {
        st = gf_buf_append_str(b, i ? ",{\"name\":" : "{\"name\":");
        if (st == GF_OK)
            st = gf_buf_append_json_str(b, io[i].name, strlen(io[i].name));
        if (st == GF_OK)
            st = gf_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[",
                               gf_dtype_kserve_name(io[i].dtype));
        for (int32_t k = 0; st == GF_OK && k < io[i].rank; k++)
            st = gf_buf_printf(b, k ? ",%lld" : "%lld", (long long)io[i].shape[k]);
        if (st == GF_OK)
            st = gf_buf_append_str(b, "]");
        for (size_t k = 0; st == GF_OK && k < io[i].n_labels; k++) {
            st = gf_buf_append_str(b, k ? "," : ",\"labels\":[");
            if (st == GF_OK)
                st = gf_buf_append_json_str(b, io[i].labels[k], strlen(io[i].labels[k]));
            if (st == GF_OK && k + 1 == io[i].n_labels)
                st = gf_buf_append_str(b, "]");
        }
        if (st == GF_OK)
            st = gf_buf_append_str(b, "}");
    }
    return st != GF_OK ? st : gf_buf_append_str(b, "]");
}

gf_status gf_manifest_to_json(const gf_manifest *m, gf_buf *b)
{
    size_t start = b->len;
    gf_status st = gf_buf_append_str(b, "{\"name\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(b, m->name, strlen(m->name));
    if (st == GF_OK)
        st = gf_buf_append_str(b, ",\"kind\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(b, m->kind, strlen(m->kind));
    if (st == GF_OK && m->version > 0)
        st = gf_buf_printf(b, ",\"version\":%lld", (long long)m->version);
    if (st == GF_OK)
        st = append_io(b, "inputs", m->inputs, m->n_inputs);
    if (st == GF_OK)
        st = append_io(b, "outputs", m->outputs, m->n_outputs);
    if (st == GF_OK)
        st = gf_buf_printf(b, ",\"max_batch_size\":%lld,\"max_queue_delay_us\":%lld",
                           (long long)m->max_batch_size, (long long)m->max_queue_delay_us);
    if (st == GF_OK && m->slo_ms > 0)
        st = gf_buf_printf(b, ",\"slo_ms\":%.17g", m->slo_ms);
    gf_residency dflt = GF_RESIDENCY_DEFAULT;
    if (st == GF_OK && !gf_residency_equal(&m->residency, &dflt)) {
        st = gf_buf_append_str(b, ",\"residency\":");
        if (st == GF_OK)
            st = gf_residency_to_json(&m->residency, b);
    }
    if (st == GF_OK && m->admission_max_slo > 0)
        st = gf_buf_printf(b, ",\"admission\":{\"max_predicted_slo\":%.17g}",
                           m->admission_max_slo);
    for (size_t i = 0; st == GF_OK && i < m->n_ignore_weights; i++) {
        st = gf_buf_append_str(b, i ? "," : ",\"ignore_weights\":[");
        if (st == GF_OK)
            st = gf_buf_append_json_str(b, m->ignore_weights[i], strlen(m->ignore_weights[i]));
        if (st == GF_OK && i + 1 == m->n_ignore_weights)
            st = gf_buf_append_str(b, "]");
    }
    if (st == GF_OK)
        st = gf_buf_printf(b, ",\"config\":%s}", m->config_json);
    if (st != GF_OK) {
        b->len = start;
        if (b->data != NULL)
            b->data[start] = '\0';
    }
    return st;
}

gf_status gf_manifest_clone(const gf_manifest *m, gf_manifest **out, gf_err *err)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_status st = gf_manifest_to_json(m, &b);
    if (st != GF_OK) {
        gf_buf_deinit(&b);
        return gf_err_set(err, st, "out of memory copying a manifest");
    }
    st = gf_manifest_parse(b.data, b.len, out, err);
    gf_buf_deinit(&b);
    return st;
}

static long io_index(const gf_manifest_io *io, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(io[i].name, name) == 0)
            return (long)i;
    return -1;
}

long gf_manifest_input_index(const gf_manifest *m, const char *name)
{
    return io_index(m->inputs, m->n_inputs, name);
}

long gf_manifest_output_index(const gf_manifest *m, const char *name)
{
    return io_index(m->outputs, m->n_outputs, name);
}

gf_status gf_manifest_check_tensor(const gf_manifest *m, const gf_manifest_io *spec,
                                   const gf_tensor *t, gf_err *err)
{
    char want[128], got[128];
    if (t->dtype != spec->dtype)
        return gf_err_set(err, GF_ERR_INVALID, "input '%s': datatype %s, expected %s", spec->name,
                          gf_dtype_kserve_name(t->dtype), gf_dtype_kserve_name(spec->dtype));
    bool ok = t->rank == spec->rank;
    for (int32_t k = 0; ok && k < t->rank; k++)
        ok = spec->shape[k] == -1 ? t->shape[k] >= 0 : t->shape[k] == spec->shape[k];
    if (!ok) {
        gf_shape_str(want, sizeof want, spec->rank, spec->shape);
        gf_shape_str(got, sizeof got, t->rank, t->shape);
        return gf_err_set(err, GF_ERR_INVALID, "input '%s': shape %s does not match %s",
                          spec->name, got, want);
    }
    if (spec->shape[0] == -1 && t->shape[0] > m->max_batch_size)
        return gf_err_set(err, GF_ERR_INVALID, "input '%s': batch of %lld exceeds "
                          "max_batch_size %lld", spec->name, (long long)t->shape[0],
                          (long long)m->max_batch_size);
    gf_status st = t->dtype == GF_DT_BYTES ? gf_tensor_check_data(t, err) : GF_OK;
    if (st != GF_OK)
        gf_err_prefix(err, "input '%s'", spec->name);
    return st;
}
