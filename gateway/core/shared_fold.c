/* gpufaas — the shared store's fold: a function's log entries, in sequence
 * order, become its versions and its current version (shared.h). Pure: no
 * I/O, so every node that folds the same entries gets the same answer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "functions/manifest.h"
#include "gateway/core/shared.h"

void gf_shared_fold_init(gf_shared_fold *f)
{
    memset(f, 0, sizeof *f);
    f->next_version = 1;
}

void gf_shared_fold_deinit(gf_shared_fold *f)
{
    for (size_t i = 0; i < f->n_entries; i++) {
        gf_shared_entry_deinit(f->entries[i]);
        free(f->entries[i]);
    }
    free(f->entries);
    free(f->versions);
    memset(f, 0, sizeof *f);
}

static gf_shared_version *find_any(gf_shared_fold *f, int64_t v)
{
    for (size_t i = 0; i < f->n_versions; i++)
        if (f->versions[i].version == v)
            return &f->versions[i];
    return NULL;
}

const gf_shared_version *gf_shared_fold_find(const gf_shared_fold *f, int64_t v)
{
    if (v == 0)
        v = f->current;
    for (size_t i = 0; v > 0 && i < f->n_versions; i++)
        if (f->versions[i].version == v && f->versions[i].live)
            return &f->versions[i];
    return NULL;
}

static bool io_same(const gf_manifest_io *a, size_t na, const gf_manifest_io *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].dtype != b[i].dtype ||
            a[i].rank != b[i].rank)
            return false;
        for (int32_t d = 0; d < a[i].rank; d++)
            if (a[i].shape[d] != b[i].shape[d])
                return false;
    }
    return true;
}

/* Compare two canonical manifests: *same when equal but for the version;
 * *same_io when their inputs and outputs agree. Unparsable = different. */
static void compare(const char *a, const char *b, bool *same, bool *same_io)
{
    *same = *same_io = false;
    gf_manifest *ma = NULL, *mb = NULL;
    if (gf_manifest_parse(a, strlen(a), &ma, NULL) == GF_OK &&
        gf_manifest_parse(b, strlen(b), &mb, NULL) == GF_OK) {
        *same_io = io_same(ma->inputs, ma->n_inputs, mb->inputs, mb->n_inputs) &&
                   io_same(ma->outputs, ma->n_outputs, mb->outputs, mb->n_outputs);
        ma->version = mb->version = 0;
        gf_buf ja, jb;
        gf_buf_init(&ja);
        gf_buf_init(&jb);
        if (gf_manifest_to_json(ma, &ja) == GF_OK && gf_manifest_to_json(mb, &jb) == GF_OK)
            *same = ja.len == jb.len && memcmp(ja.data, jb.data, ja.len) == 0;
        gf_buf_deinit(&ja);
        gf_buf_deinit(&jb);
    }
    gf_manifest_free(ma);
    gf_manifest_free(mb);
}

static bool files_same(const gf_shared_entry *a, const gf_shared_entry *b)
{
    if (strcmp(a->weights.sha256, b->weights.sha256) != 0 || a->n_companions != b->n_companions)
        return false;
    for (size_t i = 0; i < a->n_companions; i++)
        if (strcmp(a->companions[i].suffix, b->companions[i].suffix) != 0 ||
            strcmp(a->companions[i].sha256, b->companions[i].sha256) != 0)
            return false;
    return true;
}

static void refuse(gf_shared_outcome *o, gf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void refuse(gf_shared_outcome *o, gf_status st, const char *fmt, ...)
{
    o->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->message, sizeof o->message, fmt, ap);
    va_end(ap);
}

/* The rules of one deploy entry e (already stored in the fold). */
static gf_status fold_deploy(gf_shared_fold *f, const gf_shared_entry *e, gf_shared_outcome *o,
                             gf_err *err)
{
    if (e->version > 0 && find_any(f, e->version) != NULL) {
        refuse(o, GF_ERR_EXISTS, "version %lld exists (deploy without a version to get the "
               "next one, %lld)", (long long)e->version, (long long)f->next_version);
        return GF_OK;
    }
    const gf_shared_version *cur = gf_shared_fold_find(f, 0);
    for (size_t i = 0; e->version == 0 && i < f->n_versions; i++) {
        const gf_shared_version *v = &f->versions[i];
        bool same, same_io;
        if (!v->live || !files_same(v->deploy, e))
            continue;
        compare(v->deploy->manifest, e->manifest, &same, &same_io);
        if (same) {
            o->identical = true;
            o->version = v->version;
            return GF_OK;
        }
    }
    if (cur != NULL && !e->interface_change) {
        bool same, same_io;
        compare(cur->deploy->manifest, e->manifest, &same, &same_io);
        if (!same_io) {
            refuse(o, GF_ERR_STATE, "the inputs or outputs differ from version %lld's (allow "
                   "it with interface_change=allow)", (long long)cur->version);
            return GF_OK;
        }
    }
    if (f->n_versions == f->cap_versions) {
        size_t nc = f->cap_versions ? 2 * f->cap_versions : 8;
        gf_shared_version *nv = realloc(f->versions, nc * sizeof *nv);
        if (nv == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        f->versions = nv;
        f->cap_versions = nc;
    }
    int64_t v = e->version > 0 ? e->version : f->next_version;
    f->versions[f->n_versions++] = (gf_shared_version){v, true, e};
    if (v >= f->next_version)
        f->next_version = v + 1;
    f->current = v;
    o->version = v;
    return GF_OK;
}

gf_status gf_shared_fold_apply(gf_shared_fold *f, gf_shared_entry *in, gf_shared_outcome *out,
                               gf_err *err)
{
    gf_shared_outcome scratch;
    gf_shared_outcome *o = out != NULL ? out : &scratch;
    memset(o, 0, sizeof *o);
    if (in->seq != f->seq + 1)
        return gf_err_set(err, GF_ERR_INTERNAL, "shared store: entry %llu folded after %llu",
                          (unsigned long long)in->seq, (unsigned long long)f->seq);
    if (f->n_entries == f->cap_entries) {
        size_t nc = f->cap_entries ? 2 * f->cap_entries : 16;
        gf_shared_entry **ne = realloc(f->entries, nc * sizeof *ne);
        if (ne == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        f->entries = ne;
        f->cap_entries = nc;
    }
    gf_shared_entry *e = malloc(sizeof *e);
    if (e == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    *e = *in; /* moved */
    memset(in, 0, sizeof *in);
    f->entries[f->n_entries++] = e;
    f->seq = e->seq;
    o->version = e->version;
    gf_shared_version *v = e->op == GF_SHARED_DEPLOY || e->op == GF_SHARED_DELETE
                               ? NULL
                               : find_any(f, e->version);
    switch (e->op) {
    case GF_SHARED_DEPLOY:
        return fold_deploy(f, e, o, err);
    case GF_SHARED_ACTIVATE:
        if (v == NULL || !v->live)
            refuse(o, GF_ERR_NOT_FOUND, "no version %lld", (long long)e->version);
        else
            f->current = v->version;
        return GF_OK;
    case GF_SHARED_DELETE_VERSION:
        if (v == NULL || !v->live) {
            refuse(o, GF_ERR_NOT_FOUND, "no version %lld", (long long)e->version);
            return GF_OK;
        }
        if (v->version == f->current) {
            for (size_t i = 0; i < f->n_versions; i++)
                if (f->versions[i].live && f->versions[i].version != v->version) {
                    refuse(o, GF_ERR_STATE, "version %lld is current: activate another first",
                           (long long)v->version);
                    return GF_OK;
                }
            f->current = 0;
        }
        v->live = false;
        return GF_OK;
    case GF_SHARED_DELETE:
        if (f->current == 0) {
            refuse(o, GF_ERR_NOT_FOUND, "nothing to delete");
            return GF_OK;
        }
        /* the name is free again; version numbers go on from where they were, so a
         * number never names two different versions of one name (the node's SQLite
         * keeps the deleted ones' history under their numbers) */
        f->generation++;
        for (size_t i = 0; i < f->n_versions; i++)
            f->versions[i].live = false;
        f->current = 0;
        return GF_OK;
    }
    return gf_err_set(err, GF_ERR_INTERNAL, "shared store: op %d", (int)e->op);
}
