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
#include "gateway/core/versions.h"

static void version_deinit(gf_shared_version *v)
{
    gf_manifest_free(v->mf);
    free(v->identity);
    free(v->content);
}

void gf_shared_fold_init(gf_shared_fold *f, const char *name)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name != NULL ? name : "");
    f->next_version = 1;
}

void gf_shared_fold_deinit(gf_shared_fold *f)
{
    for (size_t i = 0; i < f->n_entries; i++) {
        gf_shared_entry_deinit(f->entries[i]);
        free(f->entries[i]);
    }
    free(f->entries);
    for (size_t i = 0; i < f->n_versions; i++)
        version_deinit(&f->versions[i]);
    free(f->versions);
    memset(f, 0, sizeof *f);
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

/* What the rules compare as "the same files": the weights' sha256, then each
 * companion's suffix and sha256, so that two deploys are identical only when
 * every object they name is (malloc'd; NULL when out of memory). */
static char *content_key(const gf_shared_entry *e)
{
    gf_buf b;
    gf_buf_init(&b);
    bool ok = gf_buf_append(&b, e->weights.sha256, strlen(e->weights.sha256)) == GF_OK;
    for (size_t i = 0; ok && i < e->n_companions; i++)
        ok = gf_buf_printf(&b, ";%s=%s", e->companions[i].suffix, e->companions[i].sha256) ==
             GF_OK;
    char *key = ok && b.data != NULL ? strdup(b.data) : NULL;
    gf_buf_deinit(&b);
    return key;
}

/* A deploy entry's manifest, identity and content key into v (which owns
 * them). GF_ERR_FORMAT when its manifest does not parse. */
static gf_status version_prepare(const gf_shared_entry *e, gf_shared_version *v, gf_err *err)
{
    memset(v, 0, sizeof *v);
    v->deploy = e;
    gf_err pe;
    gf_err_clear(&pe);
    if (e->manifest == NULL ||
        gf_manifest_parse(e->manifest, strlen(e->manifest), &v->mf, &pe) != GF_OK)
        return gf_err_set(err, GF_ERR_FORMAT, "its manifest does not parse: %s", gf_err_msg(&pe));
    gf_buf id;
    gf_buf_init(&id);
    if (gf_ver_identity(v->mf, &id) != GF_OK || id.data == NULL ||
        (v->identity = strdup(id.data)) == NULL ||
        (v->content = content_key(e)) == NULL) {
        gf_buf_deinit(&id);
        version_deinit(v);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    gf_buf_deinit(&id);
    return GF_OK;
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

/* The function as the rules see it: its live versions (every one ready: a
 * file broken on one node is that node's matter, not the log's). The
 * entries borrow from f; *entries is malloc'd (the caller frees it). */
static gf_status ver_state(const gf_shared_fold *f, const char *name, gf_ver_state *s,
                           gf_ver_entry **entries, gf_err *err)
{
    gf_ver_entry *live = calloc(f->n_versions ? f->n_versions : 1, sizeof *live);
    if (live == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < f->n_versions; i++) {
        const gf_shared_version *v = &f->versions[i];
        if (v->live)
            live[n++] = (gf_ver_entry){v->version, true, v->version == f->current,
                                       v->content, v->identity, v->mf};
    }
    *s = (gf_ver_state){name, live, n, f->next_version - 1};
    *entries = live;
    return GF_OK;
}

static gf_status add_version(gf_shared_fold *f, gf_shared_version *v, gf_err *err)
{
    if (f->n_versions == f->cap_versions) {
        size_t nc = f->cap_versions ? 2 * f->cap_versions : 8;
        gf_shared_version *nv = realloc(f->versions, nc * sizeof *nv);
        if (nv == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        f->versions = nv;
        f->cap_versions = nc;
    }
    f->versions[f->n_versions++] = *v;
    if (v->version >= f->next_version)
        f->next_version = v->version + 1;
    return GF_OK;
}

/* Apply entry e (stored in f already) by the rules of gateway/core/versions.h. */
static gf_status fold_rules(gf_shared_fold *f, const gf_shared_entry *e, gf_shared_outcome *o,
                            gf_err *err)
{
    static const gf_ver_op ops[] = {
        [GF_SHARED_DEPLOY] = GF_VER_DEPLOY,
        [GF_SHARED_ACTIVATE] = GF_VER_ACTIVATE,
        [GF_SHARED_DELETE_VERSION] = GF_VER_DELETE_VERSION,
        [GF_SHARED_DELETE] = GF_VER_DELETE,
    };
    if ((size_t)e->op >= sizeof ops / sizeof ops[0])
        return gf_err_set(err, GF_ERR_INTERNAL, "shared store: op %d", (int)e->op);
    gf_shared_version nv;
    memset(&nv, 0, sizeof nv);
    gf_ver_request r = {.op = ops[e->op], .version = e->version};
    if (e->op == GF_SHARED_DEPLOY) {
        gf_err pe;
        gf_err_clear(&pe);
        gf_status st = version_prepare(e, &nv, &pe);
        if (st == GF_ERR_NOMEM)
            return gf_err_set(err, st, "%s", gf_err_msg(&pe));
        if (st != GF_OK) {
            refuse(o, GF_ERR_INVALID, "a deploy entry that cannot be applied: %s",
                   gf_err_msg(&pe));
            return GF_OK;
        }
        r.sha256 = nv.content;
        r.identity = nv.identity;
        r.mf = nv.mf;
        r.allow_interface_change = e->interface_change;
    }
    gf_ver_state s;
    gf_ver_entry *live = NULL;
    gf_status st = ver_state(f, f->name, &s, &live, err);
    gf_ver_decision d;
    if (st == GF_OK)
        gf_ver_decide(&s, &r, &d);
    free(live);
    if (st != GF_OK || d.status != GF_OK) {
        version_deinit(&nv);
        if (st == GF_OK)
            refuse(o, d.status, "%s", d.why);
        return st;
    }
    o->version = d.version;
    switch (d.outcome) {
    case GF_VER_CREATE:
        nv.version = d.version;
        nv.live = true;
        if ((st = add_version(f, &nv, err)) != GF_OK) {
            version_deinit(&nv);
            return st;
        }
        f->current = d.version;
        return GF_OK;
    case GF_VER_EXISTING:
        version_deinit(&nv);
        o->identical = true;
        f->current = d.version;
        return GF_OK;
    case GF_VER_CURRENT:
        f->current = d.version;
        return GF_OK;
    case GF_VER_REMOVE:
        for (size_t i = 0; i < f->n_versions; i++)
            if (f->versions[i].version == d.version)
                f->versions[i].live = false;
        return GF_OK;
    case GF_VER_REMOVE_ALL:
        /* the name is free again; numbers go on from where they were, so a number
         * never names two different uploads of one name (SQLite keeps the deleted
         * ones' history under their numbers) */
        f->generation++;
        for (size_t i = 0; i < f->n_versions; i++)
            f->versions[i].live = false;
        f->current = 0;
        return GF_OK;
    }
    version_deinit(&nv);
    return gf_err_set(err, GF_ERR_INTERNAL, "shared store: outcome %d", (int)d.outcome);
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
    return fold_rules(f, e, o, err);
}
