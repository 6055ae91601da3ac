/* gpufaas — checking a deploy: manifest, kind, conversion, validation (run
 * by `gpufaas-worker --validate`). */
#include "functions/deploy.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
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

gf_status gf_fn_deploy_check(const char *manifest, size_t len, const char *upload_path,
                             const char *out_dir, gf_fn_deployed *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    gf_fn_deployed d = {0};
    char *converted = NULL;
    gf_status st = gf_manifest_parse(manifest, len, &d.mf, err);
    if (st != GF_OK)
        return st;
    const gf_fn_kind *kind = gf_fn_kind_find(d.mf->kind);
    if (kind == NULL) {
        st = unknown_kind(d.mf->kind, err);
        goto fail;
    }
    const char *weights = upload_path;
    gf_fn_convert_fn convert = gf_fn_kind_converter(kind);
    if (convert != NULL) {
        gf_manifest *derived = NULL;
        if ((st = convert(d.mf, upload_path, out_dir, &derived, err)) != GF_OK) {
            gf_manifest_free(derived);
            goto fail;
        }
        if (derived != NULL) {
            if (strcmp(derived->name, d.mf->name) != 0 || strcmp(derived->kind, d.mf->kind) != 0 ||
                derived->version != d.mf->version) {
                gf_manifest_free(derived);
                st = gf_err_set(err, GF_ERR_INTERNAL, "kind '%s': the derived manifest changed "
                                "the function's name, kind or version", d.mf->kind);
                goto fail;
            }
            gf_manifest_free(d.mf);
            d.mf = derived;
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
    *out = d;
    return GF_OK;
fail:
    free(converted);
    gf_fn_deployed_deinit(&d);
    return st;
}
