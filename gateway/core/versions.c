/* gpufaas — the rules of a function's versions (see versions.h). */
#include "gateway/core/versions.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"

/* Append "DTYPE [d0,d1,...]" of io to buf at *off. */
static void io_str(const gf_manifest_io *io, char *buf, size_t cap, size_t *off)
{
    int n = snprintf(buf + *off, cap - *off, "%s [", gf_dtype_kserve_name(io->dtype));
    for (int32_t k = 0; n >= 0 && *off + (size_t)n < cap && k < io->rank; k++) {
        *off += (size_t)n;
        n = snprintf(buf + *off, cap - *off, "%s%lld", k ? "," : "", (long long)io->shape[k]);
    }
    if (n >= 0 && *off + (size_t)n < cap) {
        *off += (size_t)n;
        n = snprintf(buf + *off, cap - *off, "]");
    }
    if (n >= 0 && *off + (size_t)n < cap)
        *off += (size_t)n;
    else
        *off = cap - 1;
}

static bool io_equal(const gf_manifest_io *a, const gf_manifest_io *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int32_t k = 0; k < a->rank; k++)
        if (a->shape[k] != b->shape[k])
            return false;
    return true;
}

/* The first difference between the lists a (old) and b (new) of what ("input"
 * or "output"), written to why; false when there is one. */
static bool ios_same(const char *what, const gf_manifest_io *a, size_t na,
                     const gf_manifest_io *b, size_t nb, char *why, size_t cap)
{
    for (size_t i = 0; i < na; i++) {
        const gf_manifest_io *match = NULL;
        for (size_t k = 0; k < nb && match == NULL; k++)
            if (strcmp(a[i].name, b[k].name) == 0)
                match = &b[k];
        if (match != NULL && io_equal(&a[i], match))
            continue;
        if (why != NULL && cap > 0) {
            size_t off = 0;
            int n = snprintf(why, cap, "%s '%s': ", what, a[i].name);
            off = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
            io_str(&a[i], why, cap, &off);
            if (match != NULL) {
                n = snprintf(why + off, cap - off, " -> ");
                off = n < 0 ? off : off + (size_t)n < cap ? off + (size_t)n : cap - 1;
                io_str(match, why, cap, &off);
            } else {
                snprintf(why + off, cap - off, " is gone");
            }
        }
        return false;
    }
    for (size_t k = 0; k < nb; k++) {
        bool known = false;
        for (size_t i = 0; i < na && !known; i++)
            known = strcmp(a[i].name, b[k].name) == 0;
        if (known)
            continue;
        if (why != NULL && cap > 0) {
            size_t off = 0;
            int n = snprintf(why, cap, "a new %s '%s' ", what, b[k].name);
            off = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
            io_str(&b[k], why, cap, &off);
        }
        return false;
    }
    return true;
}

bool gf_ver_same_interface(const gf_manifest *a, const gf_manifest *b, char *why, size_t cap)
{
    if (why != NULL && cap > 0)
        why[0] = '\0';
    return ios_same("input", a->inputs, a->n_inputs, b->inputs, b->n_inputs, why, cap) &&
           ios_same("output", a->outputs, a->n_outputs, b->outputs, b->n_outputs, why, cap);
}

gf_status gf_ver_identity(const gf_manifest *mf, gf_buf *out)
{
    gf_manifest m = *mf; /* a shallow copy: only the version differs */
    m.version = 0;
    return gf_manifest_to_json(&m, out);
}

/* "1, 3, 4" (the live versions), into buf. */
static void list_versions(const gf_ver_state *s, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    /* ascending, whatever order the entries come in */
    int64_t last = 0;
    for (size_t round = 0; round < s->n_live; round++) {
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < s->n_live; i++)
            if (s->live[i].version > last && s->live[i].version < next)
                next = s->live[i].version;
        if (next == INT64_MAX)
            break;
        int n = snprintf(buf + off, cap - off, "%s%lld", off ? ", " : "", (long long)next);
        if (n < 0 || off + (size_t)n >= cap)
            break;
        off += (size_t)n;
        last = next;
    }
}

static const gf_ver_entry *find(const gf_ver_state *s, int64_t version)
{
    for (size_t i = 0; i < s->n_live; i++)
        if (s->live[i].version == version)
            return &s->live[i];
    return NULL;
}

static const gf_ver_entry *current_of(const gf_ver_state *s)
{
    for (size_t i = 0; i < s->n_live; i++)
        if (s->live[i].current)
            return &s->live[i];
    return NULL;
}

static void fail(gf_ver_decision *d, gf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(gf_ver_decision *d, gf_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
    d->status = st;
}

static void decide_deploy(const gf_ver_state *s, const gf_ver_request *r, gf_ver_decision *d)
{
    const char *fn = s->function;
    int64_t next = s->max_version + 1;
    /* identical to a live, ready version: that one */
    const gf_ver_entry *same = NULL;
    for (size_t i = 0; i < s->n_live && same == NULL; i++) {
        const gf_ver_entry *e = &s->live[i];
        if (e->ready && strcmp(e->sha256, r->sha256) == 0 &&
            strcmp(e->identity, r->identity) == 0 && (r->version == 0 || r->version == e->version))
            same = e;
    }
    if (same == NULL && r->version > 0) {
        const gf_ver_entry *held = find(s, r->version);
        if (held != NULL) {
            fail(d, GF_ERR_EXISTS,
                 "function '%s' already has version %lld, with other weights or another "
                 "manifest: leave \"version\" out of the manifest to deploy this as version "
                 "%lld, or give a number that was never used (%lld or more)",
                 fn, (long long)r->version, (long long)next, (long long)next);
            return;
        }
        if (r->version <= s->max_version) {
            fail(d, GF_ERR_EXISTS,
                 "version %lld of function '%s' was used before (and deleted); version "
                 "numbers are never reused: leave \"version\" out of the manifest to deploy "
                 "this as version %lld, or give %lld or more",
                 (long long)r->version, fn, (long long)next, (long long)next);
            return;
        }
    }
    const gf_ver_entry *cur = current_of(s);
    if (cur != NULL && same != cur && !r->allow_interface_change && cur->mf != NULL &&
        r->mf != NULL) {
        char diff[256];
        if (!gf_ver_same_interface(cur->mf, r->mf, diff, sizeof diff)) {
            fail(d, GF_ERR_CONFLICT,
                 "this deploy changes the interface of function '%s' (%s), so the clients "
                 "of its current version %lld would break; if that is meant, deploy with "
                 "?interface_change=allow (gpufaas deploy --allow-interface-change)",
                 fn, diff, (long long)cur->version);
            return;
        }
    }
    d->status = GF_OK;
    if (same != NULL) {
        d->outcome = GF_VER_EXISTING;
        d->version = same->version;
        d->changes_current = !same->current;
        return;
    }
    d->outcome = GF_VER_CREATE;
    d->version = r->version > 0 ? r->version : next;
    d->changes_current = true;
}

#define VER_LIST_MAX 160 /* "1, 3, 4" in a message */

/* The live version r names, with s's versions listed into list for the
 * messages; NULL after failing d (GF_ERR_NOT_FOUND) when there is none. */
static const gf_ver_entry *named_version(const gf_ver_state *s, const gf_ver_request *r,
                                         gf_ver_decision *d, char list[VER_LIST_MAX])
{
    list_versions(s, list, VER_LIST_MAX);
    const gf_ver_entry *e = find(s, r->version);
    if (e == NULL)
        fail(d, GF_ERR_NOT_FOUND, "function '%s' has no version %lld (its versions: %s)",
             s->function, (long long)r->version, list);
    return e;
}

static void decide_activate(const gf_ver_state *s, const gf_ver_request *r, gf_ver_decision *d)
{
    char list[VER_LIST_MAX];
    const gf_ver_entry *e = named_version(s, r, d, list);
    if (e == NULL)
        return;
    if (!e->ready) {
        fail(d, GF_ERR_CONFLICT,
             "version %lld of function '%s' is broken (see its reason in GET "
             "/v1/functions/%s) and cannot be served: deploy its weights again, or activate "
             "another version (its versions: %s)",
             (long long)r->version, s->function, s->function, list);
        return;
    }
    d->status = GF_OK;
    d->outcome = GF_VER_CURRENT;
    d->version = e->version;
    d->changes_current = !e->current;
}

static void decide_delete_version(const gf_ver_state *s, const gf_ver_request *r,
                                  gf_ver_decision *d)
{
    char list[VER_LIST_MAX];
    const gf_ver_entry *e = named_version(s, r, d, list);
    if (e == NULL)
        return;
    d->status = GF_OK;
    d->version = e->version;
    if (s->n_live == 1) {
        d->outcome = GF_VER_REMOVE_ALL; /* the last one: the function goes with it */
        d->changes_current = e->current;
        return;
    }
    if (e->current) {
        fail(d, GF_ERR_CONFLICT,
             "version %lld is the current version of function '%s': activate another one "
             "first (POST /v1/functions/%s/versions/N/activate, gpufaas activate %s N; its "
             "versions: %s), or delete the whole function",
             (long long)e->version, s->function, s->function, s->function, list);
        return;
    }
    d->outcome = GF_VER_REMOVE;
    d->changes_current = false;
}

void gf_ver_decide(const gf_ver_state *s, const gf_ver_request *r, gf_ver_decision *out)
{
    memset(out, 0, sizeof *out);
    if (r->op != GF_VER_DEPLOY && s->n_live == 0) {
        fail(out, GF_ERR_NOT_FOUND, "function '%s' not found", s->function);
        return;
    }
    switch (r->op) {
    case GF_VER_DEPLOY:
        decide_deploy(s, r, out);
        return;
    case GF_VER_ACTIVATE:
        decide_activate(s, r, out);
        return;
    case GF_VER_DELETE_VERSION:
        decide_delete_version(s, r, out);
        return;
    case GF_VER_DELETE:
        out->status = GF_OK;
        out->outcome = GF_VER_REMOVE_ALL;
        out->changes_current = current_of(s) != NULL;
        return;
    }
    fail(out, GF_ERR_INTERNAL, "unknown version operation %d", (int)r->op);
}
