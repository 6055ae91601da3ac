/* gpufaas — the shared store's log entries as JSON (shared.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "gateway/core/shared.h"

/* ---- entries as JSON ------------------------------------------------------------------ */

static const char *const op_names[] = {
    [GF_SHARED_DEPLOY] = "deploy",
    [GF_SHARED_ACTIVATE] = "activate",
    [GF_SHARED_DELETE_VERSION] = "delete_version",
    [GF_SHARED_DELETE] = "delete",
};

void gf_shared_entry_deinit(gf_shared_entry *e)
{
    if (e == NULL)
        return;
    free(e->kind);
    free(e->manifest);
    free(e->companions);
    memset(e, 0, sizeof *e);
}

void gf_shared_entries_free(gf_shared_entry *e, size_t n)
{
    if (e == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        gf_shared_entry_deinit(&e[i]);
    free(e);
}

static gf_status blob_json(gf_buf *b, const gf_shared_blob *x)
{
    return gf_buf_printf(b, "{\"sha256\":\"%s\",\"bytes\":%" PRIu64 "}", x->sha256, x->bytes);
}

gf_status gf_shared_entry_encode(const gf_shared_entry *e, gf_buf *b)
{
    gf_status rc = gf_buf_printf(b, "{\"op\":\"%s\",\"version\":%" PRId64 ",\"node\":", op_names[e->op],
                                 e->version);
    if (rc == GF_OK)
        rc = gf_buf_append_json_str(b, e->node, strlen(e->node));
    if (rc == GF_OK)
        rc = gf_buf_printf(b, ",\"time_ms\":%" PRId64, e->time_ms);
    if (rc == GF_OK && e->op == GF_SHARED_DEPLOY) {
        rc = gf_buf_append_str(b, ",\"kind\":");
        if (rc == GF_OK)
            rc = gf_buf_append_json_str(b, e->kind, strlen(e->kind));
        if (rc == GF_OK)
            rc = gf_buf_printf(b, ",\"interface_change\":%s,\"manifest\":",
                               e->interface_change ? "true" : "false");
        if (rc == GF_OK)
            rc = gf_buf_append_str(b, e->manifest); /* canonical JSON already */
        if (rc == GF_OK)
            rc = gf_buf_append_str(b, ",\"weights\":");
        if (rc == GF_OK)
            rc = blob_json(b, &e->weights);
        if (rc == GF_OK)
            rc = gf_buf_append_str(b, ",\"companions\":{");
        for (size_t i = 0; rc == GF_OK && i < e->n_companions; i++) {
            if (i > 0)
                rc = gf_buf_append_str(b, ",");
            if (rc == GF_OK)
                rc = gf_buf_append_json_str(b, e->companions[i].suffix,
                                            strlen(e->companions[i].suffix));
            if (rc == GF_OK)
                rc = gf_buf_append_str(b, ":");
            if (rc == GF_OK)
                rc = blob_json(b, &e->companions[i]);
        }
        if (rc == GF_OK)
            rc = gf_buf_append_str(b, "}");
    }
    if (rc == GF_OK)
        rc = gf_buf_append_str(b, "}\n");
    return rc;
}

static gf_status bad_entry(gf_err *err, const char *path, const char *what)
{
    return gf_err_set(err, GF_ERR_FORMAT, "shared store: %s: %s", path, what);
}

static gf_status blob_decode(const gf_json *j, gf_shared_blob *x, const char *path, gf_err *err)
{
    const gf_json *h = gf_json_get(j, "sha256"), *n = gf_json_get(j, "bytes");
    if (h == NULL || h->type != GF_JSON_STRING || !gf_sha256_hex_valid(h->u.str.s) ||
        n == NULL || n->type != GF_JSON_NUMBER || !n->u.num.is_uint)
        return bad_entry(err, path, "a file needs \"sha256\" (64 hex digits) and \"bytes\"");
    snprintf(x->sha256, sizeof x->sha256, "%s", h->u.str.s);
    x->bytes = n->u.num.u;
    return GF_OK;
}

gf_status gf_shared_entry_decode(const char *text, size_t len, const char *path, gf_shared_entry *e,
                              gf_err *err)
{
    memset(e, 0, sizeof *e);
    gf_json_doc *doc = NULL;
    gf_status rc = gf_json_parse(text, len, 0, &doc, err);
    if (rc != GF_OK) {
        gf_err_prefix(err, "shared store: %s", path);
        return GF_ERR_FORMAT;
    }
    const gf_json *r = gf_json_doc_root(doc);
    const gf_json *op = gf_json_get(r, "op"), *v = gf_json_get(r, "version");
    const gf_json *node = gf_json_get(r, "node"), *t = gf_json_get(r, "time_ms");
    rc = GF_ERR_FORMAT;
    if (op == NULL || op->type != GF_JSON_STRING) {
        bad_entry(err, path, "no \"op\"");
        goto out;
    }
    size_t k = 0;
    while (k < sizeof op_names / sizeof op_names[0] && strcmp(op_names[k], op->u.str.s) != 0)
        k++;
    if (k == sizeof op_names / sizeof op_names[0]) {
        gf_err_set(err, GF_ERR_FORMAT, "shared store: %s: unknown op \"%.40s\" (written by a "
                   "newer gpufaas?)", path, op->u.str.s);
        goto out;
    }
    e->op = (gf_shared_op)k;
    if (v == NULL || v->type != GF_JSON_NUMBER || !v->u.num.is_int || v->u.num.i < 0) {
        bad_entry(err, path, "\"version\" must be an integer >= 0");
        goto out;
    }
    e->version = v->u.num.i;
    if (node != NULL && node->type == GF_JSON_STRING)
        snprintf(e->node, sizeof e->node, "%s", node->u.str.s);
    if (t != NULL && t->type == GF_JSON_NUMBER && t->u.num.is_int)
        e->time_ms = t->u.num.i;
    if (e->op != GF_SHARED_DEPLOY && e->version == 0) {
        bad_entry(err, path, "this op needs a \"version\" > 0");
        goto out;
    }
    if (e->op == GF_SHARED_DEPLOY) {
        const gf_json *kind = gf_json_get(r, "kind"), *m = gf_json_get(r, "manifest");
        const gf_json *w = gf_json_get(r, "weights"), *c = gf_json_get(r, "companions");
        const gf_json *ic = gf_json_get(r, "interface_change");
        if (kind == NULL || kind->type != GF_JSON_STRING || m == NULL ||
            m->type != GF_JSON_OBJECT || w == NULL || (c != NULL && c->type != GF_JSON_OBJECT)) {
            bad_entry(err, path, "a deploy needs \"kind\", \"manifest\" and \"weights\"");
            goto out;
        }
        e->interface_change = ic != NULL && ic->type == GF_JSON_BOOL && ic->u.b;
        gf_buf mb;
        gf_buf_init(&mb);
        e->kind = strdup(kind->u.str.s);
        if (e->kind == NULL || gf_json_write(m, &mb) != GF_OK ||
            (e->manifest = gf_buf_steal(&mb, NULL)) == NULL) {
            gf_buf_deinit(&mb);
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((rc = blob_decode(w, &e->weights, path, err)) != GF_OK)
            goto out;
        rc = GF_ERR_FORMAT;
        size_t nc = c != NULL ? c->u.obj.n : 0;
        if (nc > 64) {
            bad_entry(err, path, "more than 64 companion files");
            goto out;
        }
        if (nc > 0 && (e->companions = calloc(nc, sizeof *e->companions)) == NULL) {
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nc; i++) {
            const gf_json_member *mm = &c->u.obj.m[i];
            if (mm->key_len == 0 || mm->key_len >= sizeof e->companions[i].suffix ||
                strspn(mm->key, "abcdefghijklmnopqrstuvwxyz0123456789_-") != mm->key_len) {
                bad_entry(err, path, "a companion's suffix must be [a-z0-9_-]{1,31}");
                goto out;
            }
            snprintf(e->companions[i].suffix, sizeof e->companions[i].suffix, "%s", mm->key);
            if ((rc = blob_decode(mm->value, &e->companions[i], path, err)) != GF_OK)
                goto out;
            e->n_companions = i + 1;
        }
    }
    rc = GF_OK;
out:
    gf_json_doc_free(doc);
    if (rc != GF_OK)
        gf_shared_entry_deinit(e);
    return rc;
}

