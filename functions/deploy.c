/* gpufaas — checking a deploy: manifest, kind, conversion, validation (run
 * by `gpufaas-worker --validate`). */
#include "functions/deploy.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/path.h"
#include "functions/runtime.h"

void gf_fn_deployed_deinit(gf_fn_deployed *d)
{
    if (d == NULL)
        return;
    gf_manifest_free(d->mf);
    for (size_t i = 0; i < d->n_companions; i++)
        free(d->companions[i]);
    free(d->companions);
    memset(d, 0, sizeof *d);
}

/* The companion files a converter wrote: every "weights.<suffix>" in dir
 * but the weights. Anything else there is the converter's bug. */
static gf_status list_companions(const char *dir, gf_fn_deployed *d, gf_err *err)
{
    DIR *dh = opendir(dir);
    if (dh == NULL)
        return gf_err_set(err, GF_ERR_IO, "opendir(%s) failed", dir);
    gf_status st = GF_OK;
    const size_t base = sizeof GF_CONVERTED_BASE - 1;
    struct dirent *e;
    while (st == GF_OK && (e = readdir(dh)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, GF_CONVERTED_WEIGHTS) == 0)
            continue;
        if (strncmp(n, GF_CONVERTED_BASE ".", base + 1) != 0 ||
            !gf_companion_suffix_valid(n + base + 1)) {
            st = gf_err_set(err, GF_ERR_INTERNAL, "the converter left '%s' in its output "
                            "directory (only %s and %s.<suffix> may be there)", n,
                            GF_CONVERTED_WEIGHTS, GF_CONVERTED_BASE);
            break;
        }
        char **list = realloc(d->companions, (d->n_companions + 1) * sizeof *list);
        char *s = strdup(n + base + 1);
        if (list == NULL || s == NULL) {
            free(s);
            if (list != NULL)
                d->companions = list;
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            break;
        }
        d->companions = list;
        d->companions[d->n_companions++] = s;
    }
    closedir(dh);
    return st;
}

/* "unknown kind 'x' (available: mlp, resnet, bert, y (plugin))" */
static gf_status unknown_kind(const char *kind, gf_err *err)
{
    gf_buf names;
    gf_buf_init(&names);
    for (size_t i = 0; i < gf_fn_kind_count(); i++) {
        const gf_fn_kind *k = gf_fn_kind_at(i);
        gf_buf_printf(&names, "%s%s%s", names.len ? ", " : "", gf_fn_kind_name(k),
                      gf_fn_kind_is_plugin(k) ? " (plugin)" : "");
    }
    gf_status st = gf_err_set(err, GF_ERR_INVALID, "unknown kind '%s' (available: %s)", kind,
                              names.data != NULL ? names.data : "");
    gf_buf_deinit(&names);
    return st;
}

/* The kind a deploy names: in->kind, else the manifest's "kind" (read
 * leniently: the manifest may be partial). Copied into buf. */
static gf_status deploy_kind(const gf_fn_deploy_in *in, char *buf, size_t cap, gf_err *err)
{
    const char *mk = NULL;
    gf_json_doc *doc = NULL;
    if (in->manifest != NULL) {
        if (in->manifest_len > GF_MANIFEST_MAX_BYTES)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "manifest: larger than %u bytes",
                              GF_MANIFEST_MAX_BYTES);
        gf_err e;
        if (gf_json_parse(in->manifest, in->manifest_len, 0, &doc, &e) != GF_OK)
            return gf_err_set(err, GF_ERR_INVALID, "manifest: %s", e.msg);
        const gf_json *k = gf_json_get(gf_json_doc_root(doc), "kind");
        if (k != NULL && k->type == GF_JSON_STRING)
            mk = k->u.str.s;
    }
    gf_status st = GF_OK;
    if (in->kind != NULL && mk != NULL && strcmp(in->kind, mk) != 0)
        st = gf_err_set(err, GF_ERR_INVALID, "the manifest says kind '%.64s' but the upload is "
                        "for kind '%.64s'", mk, in->kind);
    else if (in->kind == NULL && mk == NULL)
        st = gf_err_set(err, GF_ERR_INVALID, "manifest: missing field \"kind\"");
    else
        snprintf(buf, cap, "%s", in->kind != NULL ? in->kind : mk);
    gf_json_doc_free(doc);
    return st;
}

gf_status gf_fn_deploy_check(const gf_fn_deploy_in *in, const char *out_dir, gf_fn_deployed *out,
                             gf_err *err)
{
    memset(out, 0, sizeof *out);
    gf_fn_deployed d = {0};
    char *converted = NULL, *derived = NULL;
    char kname[128];
    if (in->n_uploads < 1 || in->n_uploads > GF_MAX_UPLOADS)
        return gf_err_set(err, GF_ERR_INVALID, "a deploy brings 1 to %d files, not %zu",
                          GF_MAX_UPLOADS, in->n_uploads);
    gf_status st = deploy_kind(in, kname, sizeof kname, err);
    if (st != GF_OK)
        return st;
    const gf_fn_kind *kind = gf_fn_kind_find(kname);
    if (kind == NULL)
        return unknown_kind(kname, err);
    const char *weights = in->uploads[0];
    gf_fn_convert_fn convert = gf_fn_kind_converter(kind);
    if (convert != NULL) {
        gf_fn_convert_req req = {in->manifest, in->manifest_len, in->name, in->uploads,
                                 in->n_uploads, out_dir};
        if ((st = convert(&req, &derived, err)) != GF_OK)
            goto fail;
        if (derived == NULL) {
            st = gf_err_set(err, GF_ERR_INTERNAL, "kind '%s': its converter returned no "
                            "manifest", kname);
            goto fail;
        }
        if ((st = gf_manifest_parse(derived, strlen(derived), &d.mf, err)) != GF_OK) {
            gf_err_prefix(err, "kind '%s': the derived manifest", kname);
            goto fail;
        }
        converted = gf_path_join(out_dir, GF_CONVERTED_WEIGHTS);
        if (converted == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto fail;
        }
        d.converted = access(converted, F_OK) == 0;
        if (d.converted)
            weights = converted;
        if ((st = list_companions(out_dir, &d, err)) != GF_OK)
            goto fail;
    } else {
        if (in->manifest == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "kind '%s' needs a manifest", kname);
            goto fail;
        }
        if (in->n_uploads != 1) {
            st = gf_err_set(err, GF_ERR_INVALID, "kind '%s' takes one weights file, not %zu",
                            kname, in->n_uploads);
            goto fail;
        }
        if ((st = gf_manifest_parse(in->manifest, in->manifest_len, &d.mf, err)) != GF_OK)
            goto fail;
    }
    if (strcmp(d.mf->kind, kname) != 0 || (in->name != NULL && strcmp(d.mf->name, in->name) != 0)) {
        st = gf_err_set(err, convert != NULL ? GF_ERR_INTERNAL : GF_ERR_INVALID,
                        "the manifest names function '%.64s' of kind '%.64s', but the deploy is "
                        "for '%.64s' of kind '%s'", d.mf->name, d.mf->kind,
                        in->name != NULL ? in->name : d.mf->name, kname);
        goto fail;
    }
    st = gf_fn_validate(kind, d.mf, weights, err);
    if (st != GF_OK) {
        /* a file that is not safetensors at all says what it is instead */
        gf_err_prefix(err, st == GF_ERR_FORMAT ? "weights" : "weights do not fit the manifest");
        /* a file that does not fit the manifest is the user's to fix */
        if (err != NULL && err->code != GF_ERR_NOMEM && err->code != GF_ERR_IO) {
            err->code = GF_ERR_INVALID;
            st = GF_ERR_INVALID;
        }
        goto fail;
    }
    free(converted);
    free(derived);
    *out = d;
    return GF_OK;
fail:
    free(converted);
    free(derived);
    gf_fn_deployed_deinit(&d);
    return st;
}
