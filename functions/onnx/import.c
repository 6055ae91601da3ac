/* gpufaas — importing an ONNX model at deploy: check, derive the manifest,
 * write the version's weights file (functions/onnx). */
#include "functions/onnx/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/filetype.h"
#include "core/json.h"
#include "core/path.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "functions/manifest.h"
#include "functions/onnx/plan.h"
#include "functions/runtime.h"

/* Probe size for symbolic dims other than the batch dimension. */
#define PROBE_DIM 32

/* Shapes of the graph inputs for a probe compile: the manifest's fixed dims
 * where it has them, else the graph's, else batch (dim 0) or other. */
static void probe_shapes(const gf_onnx_graph *g, const gf_manifest *mf, int64_t batch,
                         int64_t other, int64_t (*shapes)[GF_MAX_RANK])
{
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        long mi = mf != NULL ? gf_manifest_input_index(mf, v->name) : -1;
        for (int32_t k = 0; k < v->rank; k++) {
            int64_t d = mi >= 0 && mf->inputs[mi].shape[k] >= 0 ? mf->inputs[mi].shape[k]
                                                                : v->shape[k];
            shapes[i][k] = d >= 0 ? d : k == 0 ? batch : other;
        }
    }
}

static gf_status compile_probe(const gf_onnx_model *m, const gf_manifest *mf, int64_t batch,
                               int64_t other, gf_onnx_plan **out, gf_err *err)
{
    const gf_onnx_graph *g = gf_onnx_model_graph(m);
    int64_t (*shapes)[GF_MAX_RANK] = calloc((size_t)g->n_inputs + 1, sizeof *shapes);
    if (shapes == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    probe_shapes(g, mf, batch, other, shapes);
    gf_status st = gf_onnx_plan_compile(m, (const int64_t(*)[GF_MAX_RANK])shapes, out, err);
    free(shapes);
    return st;
}

static void put_io(gf_buf *b, const char *name, gf_dtype dt, int32_t rank, const int64_t *shape)
{
    gf_buf_append_str(b, "{\"name\":");
    gf_buf_append_json_str(b, name, strlen(name));
    gf_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", gf_dtype_kserve_name(dt));
    for (int32_t k = 0; k < rank; k++) /* a manifest has no 0 dims: any size then */
        gf_buf_printf(b, "%s%" PRId64, k ? "," : "", shape[k] == 0 ? -1 : shape[k]);
    gf_buf_append_str(b, "]}");
}

/* A graph whose plan needs the values of an input (a Reshape target given
 * as input host_in) cannot be compiled before a request brings them: the
 * manifest's outputs are the graph's declared ones, and it is not batched. */
static gf_status derive_declared(const gf_onnx_graph *g, const char *name, int32_t host_in,
                                 gf_buf *b, gf_err *err)
{
    gf_buf_append_str(b, "{\"name\":");
    gf_buf_append_json_str(b, name, strlen(name));
    gf_buf_append_str(b, ",\"kind\":\"onnx\",\"inputs\":[");
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        put_io(b, v->name, v->dtype, v->rank, v->shape);
        gf_buf_append_str(b, i + 1 < g->n_inputs ? "," : "");
    }
    gf_buf_append_str(b, "],\"outputs\":[");
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_onnx_value *v = &g->values[g->outputs[i]];
        gf_dtype dt = gf_onnx_graph_out_dtype(g, i, v->dtype);
        if (v->rank < 0 || gf_dtype_kserve_name(dt) == NULL)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "output '%.200s': the graph declares no "
                              "type and rank for it, and they cannot be inferred "
                              "before a request brings input '%.200s' (its values shape the "
                              "graph)", v->name, g->values[g->inputs[host_in]].name);
        put_io(b, v->name, dt, v->rank, v->shape);
        gf_buf_append_str(b, i + 1 < g->n_outputs ? "," : "");
    }
    gf_buf_append_str(b, "],\"max_batch_size\":1,\"max_queue_delay_us\":0}");
    return b->data != NULL ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
}

/* The manifest derived from the graph, as JSON text. */
static gf_status derive_manifest(const gf_onnx_model *m, const char *name, gf_buf *b,
                                 gf_err *err)
{
    const gf_onnx_graph *g = gf_onnx_model_graph(m);
    bool batchable = g->n_inputs > 0;
    bool other_sym = false, any_batch = false;
    if (g->n_inputs == 0)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "the graph has no inputs: a function takes "
                          "at least one");
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        if (gf_dtype_kserve_name(v->dtype) == NULL)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "input '%.200s' is %s, which KServe "
                              "cannot carry", v->name, gf_dtype_st_name(v->dtype));
        batchable = batchable && v->rank >= 1 && v->shape[0] < 0;
        any_batch = any_batch || (v->rank >= 1 && v->shape[0] < 0);
        for (int32_t k = 1; k < v->rank; k++)
            other_sym = other_sym || v->shape[k] < 0;
    }
    int32_t host_in = -1;
    for (int32_t i = 0; i < g->n_inputs && host_in < 0; i++)
        if (gf_onnx_model_host_input(m, i))
            host_in = i;
    if (host_in >= 0)
        return derive_declared(g, name, host_in, b, err);
    gf_onnx_plan *p1 = NULL, *p2 = NULL, *p3 = NULL;
    gf_status st = compile_probe(m, NULL, 1, PROBE_DIM, &p1, err);
    if (st == GF_OK && any_batch)
        st = compile_probe(m, NULL, 2, PROBE_DIM, &p2, err);
    if (st == GF_OK && other_sym)
        st = compile_probe(m, NULL, 1, PROBE_DIM + 1, &p3, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "shapes cannot be inferred for the graph's inputs (free dims taken "
                      "as 1 for the batch and %d otherwise; a manifest can fix them)", PROBE_DIM);
        goto done;
    }
    gf_buf_append_str(b, "{\"name\":");
    gf_buf_append_json_str(b, name, strlen(name));
    gf_buf_append_str(b, ",\"kind\":\"onnx\",\"inputs\":[");
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        if (i)
            gf_buf_append_str(b, ",");
        put_io(b, v->name, v->dtype, v->rank, v->shape);
    }
    gf_buf_append_str(b, "],\"outputs\":[");
    bool out_batch = true;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_onnx_value *v = &g->values[g->outputs[i]];
        const gf_onnx_tinfo *t1 = gf_onnx_plan_output(p1, i);
        gf_dtype dt = gf_onnx_graph_out_dtype(g, i, t1->dtype);
        int64_t shape[GF_MAX_RANK];
        if (gf_dtype_kserve_name(dt) == NULL) {
            st = gf_err_set(err, GF_ERR_UNSUPPORTED, "output '%.200s' is %s, which KServe "
                            "cannot carry", v->name, gf_dtype_st_name(dt));
            goto done;
        }
        for (int32_t k = 0; k < t1->rank; k++) {
            shape[k] = t1->shape[k];
            if (p2 != NULL && gf_onnx_plan_output(p2, i)->shape[k] != shape[k])
                shape[k] = -1;
            if (p3 != NULL && gf_onnx_plan_output(p3, i)->shape[k] != shape[k])
                shape[k] = -1;
            if (v->rank == t1->rank && v->shape[k] < 0)
                shape[k] = -1;
        }
        bool varies = p2 != NULL && t1->rank >= 1 && gf_onnx_plan_output(p2, i)->shape[0] == 2 &&
                      t1->shape[0] == 1;
        out_batch = out_batch && varies;
        if (i)
            gf_buf_append_str(b, ",");
        put_io(b, v->name, dt, t1->rank, shape);
    }
    /* a leading -1 is a batch dimension, bounded by max_batch_size; requests
     * are batched together only when every input and output has one */
    gf_buf_printf(b, "],\"max_batch_size\":%d,\"max_queue_delay_us\":0}",
                  (batchable && out_batch) || any_batch ? GF_ONNX_DEFAULT_MAX_BATCH : 1);
    if (b->data == NULL)
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
done:
    gf_onnx_plan_free(p1);
    gf_onnx_plan_free(p2);
    gf_onnx_plan_free(p3);
    return st;
}

/* derived, overridden member by member by the partial manifest. */
static gf_status merge_manifest(const char *derived, const char *partial, size_t partial_len,
                                gf_buf *out, gf_err *err)
{
    gf_json_doc *dd = NULL, *pd = NULL;
    gf_status st = gf_json_parse(derived, strlen(derived), 0, &dd, err);
    if (st != GF_OK)
        return st;
    const gf_json *d = gf_json_doc_root(dd), *p = NULL;
    if (partial != NULL) {
        if ((st = gf_json_parse(partial, partial_len, 0, &pd, err)) != GF_OK) {
            gf_err_prefix(err, "manifest");
            goto done;
        }
        p = gf_json_doc_root(pd);
        if (p->type != GF_JSON_OBJECT) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: must be a JSON object");
            goto done;
        }
        const gf_json *kind = gf_json_get(p, "kind");
        if (kind != NULL && (kind->type != GF_JSON_STRING || strcmp(kind->u.str.s, "onnx") != 0)) {
            st = gf_err_set(err, GF_ERR_INVALID, "manifest: \"kind\" must be \"onnx\" for a "
                            "model part (an .onnx file)");
            goto done;
        }
    }
    gf_buf_append_str(out, "{");
    size_t written = 0;
    for (size_t i = 0; i < d->u.obj.n; i++) {
        const gf_json_member *mm = &d->u.obj.m[i];
        const gf_json *v = p != NULL && gf_json_get(p, mm->key) != NULL ? gf_json_get(p, mm->key)
                                                                        : mm->value;
        gf_buf_append_str(out, written++ ? "," : "");
        gf_buf_append_json_str(out, mm->key, strlen(mm->key));
        gf_buf_append_str(out, ":");
        gf_json_write(v, out);
    }
    for (size_t i = 0; p != NULL && i < p->u.obj.n; i++) {
        const gf_json_member *mm = &p->u.obj.m[i];
        if (gf_json_get(d, mm->key) != NULL)
            continue;
        gf_buf_append_str(out, ",");
        gf_buf_append_json_str(out, mm->key, mm->key_len);
        gf_buf_append_str(out, ":");
        gf_json_write(mm->value, out);
    }
    gf_buf_append_str(out, "}");
    if (out->data == NULL)
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
done:
    gf_json_doc_free(dd);
    gf_json_doc_free(pd);
    return st;
}

/* The manifest must describe the graph's inputs and outputs. */
static gf_status check_manifest(const gf_onnx_graph *g, const gf_manifest *mf, gf_err *err)
{
    if (mf->n_inputs != (size_t)g->n_inputs)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: %zu inputs; the graph has %d",
                          mf->n_inputs, g->n_inputs);
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        long mi = gf_manifest_input_index(mf, v->name);
        if (mi < 0)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: no input '%.200s' (the graph's "
                              "input %d)", v->name, i);
        const gf_manifest_io *io = &mf->inputs[mi];
        if (io->dtype != v->dtype || io->rank != v->rank)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: input '%.200s' is %s of rank %d; "
                              "the graph has %s of rank %d", v->name,
                              gf_dtype_kserve_name(io->dtype), io->rank,
                              gf_dtype_kserve_name(v->dtype), v->rank);
        for (int32_t k = 0; k < v->rank; k++)
            if (v->shape[k] > 0 && io->shape[k] != v->shape[k])
                return gf_err_set(err, GF_ERR_INVALID, "manifest: input '%.200s' dim %d is %"
                                  PRId64 "; the graph fixes it at %" PRId64, v->name, k,
                                  io->shape[k], v->shape[k]);
    }
    if (mf->n_outputs != (size_t)g->n_outputs)
        return gf_err_set(err, GF_ERR_INVALID, "manifest: %zu outputs; the graph has %d",
                          mf->n_outputs, g->n_outputs);
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_onnx_value *v = &g->values[g->outputs[i]];
        if (strcmp(mf->outputs[i].name, v->name) != 0)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: output %d is '%.200s'; the "
                              "graph's is '%.200s'", i, mf->outputs[i].name, v->name);
    }
    return GF_OK;
}

/* Compile with the manifest's shapes at batch 1 and max_batch_size: shapes
 * and dtypes of the outputs must agree with the manifest. */
static gf_status check_compile(const gf_onnx_model *m, const gf_manifest *mf, gf_err *err)
{
    const gf_onnx_graph *g = gf_onnx_model_graph(m);
    for (int32_t i = 0; i < g->n_inputs; i++)
        if (gf_onnx_model_host_input(m, i))
            return GF_OK; /* compiled per request, with the input's values */
    int64_t batches[2] = {1, mf->max_batch_size};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && batches[1] == 1)
            break;
        gf_onnx_plan *p;
        gf_status st = compile_probe(m, mf, batches[b], PROBE_DIM, &p, err);
        if (st != GF_OK) {
            gf_err_prefix(err, "at batch size %" PRId64, batches[b]);
            return st;
        }
        for (size_t i = 0; i < mf->n_outputs && st == GF_OK; i++) {
            const gf_onnx_tinfo *t = gf_onnx_plan_output(p, (int32_t)i);
            const gf_manifest_io *io = &mf->outputs[i];
            gf_dtype dt = gf_onnx_graph_out_dtype(g, (int32_t)i, t->dtype);
            bool ok = dt == io->dtype && t->rank == io->rank;
            for (int32_t k = 0; ok && k < t->rank; k++)
                ok = io->shape[k] < 0 || io->shape[k] == t->shape[k];
            if (!ok) {
                char got[128], want[128];
                gf_shape_str(got, sizeof got, t->rank, t->shape);
                gf_shape_str(want, sizeof want, io->rank, io->shape);
                st = gf_err_set(err, GF_ERR_INVALID, "output '%.200s' is %s %s at batch size %"
                                PRId64 "; the manifest says %s %s", io->name,
                                gf_dtype_kserve_name(dt), got, batches[b],
                                gf_dtype_kserve_name(io->dtype), want);
            }
        }
        gf_onnx_plan_free(p);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}

gf_status gf_onnx_import(const gf_onnx_import_req *req, char **manifest_json, gf_err *err)
{
    *manifest_json = NULL;
    gf_onnx_parsed *parsed = NULL;
    gf_onnx_model *m = NULL;
    gf_manifest *mf = NULL;
    int32_t *order = NULL;
    gf_st_wtensor *wt = NULL;
    gf_buf derived, merged, gj;
    gf_buf_init(&derived);
    gf_buf_init(&merged);
    gf_buf_init(&gj);
    gf_status st = gf_onnx_parse_file(req->model_path, req->data_path, &parsed, err);
    if (st != GF_OK)
        goto done;
    if ((st = gf_onnx_model_new(gf_onnx_parsed_take_graph(parsed), &m, err)) != GF_OK)
        goto done;
    const gf_onnx_graph *g = gf_onnx_model_graph(m);
    order = malloc(((size_t)g->n_values + 1) * sizeof *order);
    if (order == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    int32_t n_init = gf_onnx_init_order(g, order);
    for (int32_t i = 0; i < n_init && st == GF_OK; i++) {
        int32_t v = order[i];
        size_t nbytes;
        const void *data = gf_onnx_parsed_init(parsed, v, &nbytes);
        gf_onnx_model_set_param(m, v, (size_t)i);
        if (nbytes / (gf_dtype_size(g->values[v].dtype) ? gf_dtype_size(g->values[v].dtype) : 1) <=
            GF_ONNX_HOST_INIT_MAX)
            st = gf_onnx_model_set_host(m, v, data, nbytes, err);
    }
    if (st != GF_OK)
        goto done;
    /* the manifest: derived from the graph, then the user's fields; the
     * name from the manifest or given apart (both: they must agree) */
    const char *name = req->name;
    char namebuf[GF_ONNX_MAX_NAME + 1];
    if (req->manifest != NULL) {
        gf_json_doc *pd;
        if ((st = gf_json_parse(req->manifest, req->manifest_len, 0, &pd, err)) != GF_OK) {
            gf_err_prefix(err, "manifest");
            goto done;
        }
        const gf_json *nm = gf_json_get(gf_json_doc_root(pd), "name");
        if (nm != NULL && nm->type == GF_JSON_STRING && nm->u.str.len < sizeof namebuf) {
            if (name != NULL && strcmp(name, nm->u.str.s) != 0)
                st = gf_err_set(err, GF_ERR_INVALID, "the manifest names the function '%.64s' "
                                "and the deploy '%.64s'", nm->u.str.s, name);
            snprintf(namebuf, sizeof namebuf, "%s", nm->u.str.s);
            name = namebuf;
        }
        gf_json_doc_free(pd);
        if (st != GF_OK)
            goto done;
    }
    if (name == NULL || name[0] == '\0') {
        st = gf_err_set(err, GF_ERR_INVALID, "the function needs a name (a \"name\" part or a "
                        "manifest with \"name\")");
        goto done;
    }
    if ((st = derive_manifest(m, name, &derived, err)) != GF_OK ||
        (st = merge_manifest(derived.data, req->manifest, req->manifest_len, &merged, err)) !=
            GF_OK ||
        (st = gf_manifest_parse(merged.data, merged.len, &mf, err)) != GF_OK ||
        (st = check_manifest(g, mf, err)) != GF_OK || (st = check_compile(m, mf, err)) != GF_OK)
        goto done;
    /* the weights file: initializers in first-use order, then the graph */
    if ((st = gf_onnx_graph_to_json(g, &gj, err)) != GF_OK)
        goto done;
    wt = calloc((size_t)n_init + 1, sizeof *wt);
    if (wt == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n_init; i++) {
        const gf_onnx_value *v = &g->values[order[i]];
        size_t nbytes;
        wt[i] = (gf_st_wtensor){v->name, v->dtype, v->rank, v->shape,
                                gf_onnx_parsed_init(parsed, order[i], &nbytes)};
    }
    int64_t glen = (int64_t)gj.len;
    wt[n_init] = (gf_st_wtensor){GF_ONNX_GRAPH_TENSOR, GF_DT_U8, 1, &glen, gj.data};
    const char *meta[] = {"gpufaas.kind", "onnx", "gpufaas.onnx.producer",
                          g->producer != NULL ? g->producer : ""};
    if ((st = gf_st_write(req->out_path, wt, (size_t)n_init + 1, meta, 2, err)) != GF_OK)
        goto done;
    gf_buf mj;
    gf_buf_init(&mj);
    if (gf_manifest_to_json(mf, &mj) != GF_OK || mj.data == NULL) {
        gf_buf_deinit(&mj);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    *manifest_json = gf_buf_steal(&mj, NULL);
done:
    gf_buf_deinit(&derived);
    gf_buf_deinit(&merged);
    gf_buf_deinit(&gj);
    free(wt);
    free(order);
    gf_manifest_free(mf);
    gf_onnx_model_free(m);
    gf_onnx_parsed_free(parsed);
    return st;
}

gf_status gf_onnx_convert(const gf_fn_convert_req *req, char **manifest_json, gf_err *err)
{
    *manifest_json = NULL;
    if (req->n_uploads < 1 || req->n_uploads > 2)
        return gf_err_set(err, GF_ERR_INVALID, "kind 'onnx' takes a model and at most one "
                          "external data file, not %zu files", req->n_uploads);
    /* weights sent to the onnx kind: say where the model goes instead */
    unsigned char head[64];
    size_t n = 0;
    FILE *f = fopen(req->uploads[0], "rb");
    if (f != NULL) {
        n = fread(head, 1, sizeof head, f);
        fclose(f);
    }
    if (gf_filetype_sniff(head, n) == GF_FILE_SAFETENSORS)
        return gf_err_set(err, GF_ERR_INVALID, "kind 'onnx' runs an ONNX model, and this is a "
                          "safetensors file: send the .onnx file as the part 'model' (curl -F "
                          "model=@model.onnx -F name=NAME)");
    char *out = gf_path_join(req->out_dir, GF_CONVERTED_WEIGHTS);
    if (out == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_onnx_import_req ir = {
        .model_path = req->uploads[0],
        .data_path = req->n_uploads > 1 ? req->uploads[1] : NULL,
        .manifest = req->manifest,
        .manifest_len = req->manifest_len,
        .name = req->name,
        .out_path = out,
    };
    gf_status st = gf_onnx_import(&ir, manifest_json, err);
    free(out);
    return st;
}
