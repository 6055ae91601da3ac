/* gpufaas — the kind registry: the built-in kinds, kinds linked in by a
 * program, and plugins loaded from shared objects. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "functions/kinds/kinds.h"
#include "functions/runtime.h"
#ifdef GF_HAVE_ONNX_IMPORT
#include "functions/onnx/import.h"
#else
/* Built without protobuf-c (the GPU machine): models cannot be imported
 * here, though the onnx kind runs those imported elsewhere. */
static gf_status gf_onnx_convert(const gf_fn_convert_req *req, char **manifest_json,
                                 gf_err *err)
{
    (void)req;
    *manifest_json = NULL;
    return gf_err_set(err, GF_ERR_UNSUPPORTED, "this gpufaas-worker was built without the ONNX "
                      "importer (protobuf-c and libonnx-dev were missing when it was built)");
}
#endif

/* ---- kinds ------------------------------------------------------------------- */

struct gf_fn_kind {
    const gf_fn_desc *desc;
    char *path;               /* plugin path, NULL for a built-in or linked-in kind */
    void *handle;             /* the plugin's dlopen handle */
    gf_fn_convert_fn convert; /* deploy-time converter, NULL for most kinds */
};

/* The built-in kinds: one line each, with the deploy-time converter of
 * those whose uploads are not safetensors weights (functions/deploy.h). */
static const struct {
    const char *name;
    const gf_fn_desc *(*entry)(void);
    gf_fn_convert_fn convert;
} gf_builtin_table[] = {
    {"mlp", gf_fn_kind_mlp, NULL},
    {"resnet", gf_fn_kind_resnet, NULL},
    {"bert", gf_fn_kind_bert, NULL},
    {"onnx", gf_fn_kind_onnx, gf_onnx_convert},
};
#define GF_N_BUILTIN (sizeof gf_builtin_table / sizeof gf_builtin_table[0])

static pthread_mutex_t gf_kinds_lock = PTHREAD_MUTEX_INITIALIZER;
static gf_fn_kind gf_builtins[GF_N_BUILTIN];
static bool gf_builtins_ready;
static gf_fn_kind **gf_plugins;
static size_t gf_n_plugins;

static void builtins_init(void)
{
    /* lock held */
    if (gf_builtins_ready)
        return;
    for (size_t i = 0; i < GF_N_BUILTIN; i++) {
        gf_builtins[i].desc = gf_builtin_table[i].entry();
        gf_builtins[i].convert = gf_builtin_table[i].convert;
    }
    gf_builtins_ready = true;
}

const char *const *gf_fn_builtin_kinds(void)
{
    static const char *names[GF_N_BUILTIN + 1];
    for (size_t i = 0; i < GF_N_BUILTIN; i++)
        names[i] = gf_builtin_table[i].name;
    names[GF_N_BUILTIN] = NULL;
    return names;
}

const gf_fn_kind *gf_fn_kind_find(const char *name)
{
    const gf_fn_kind *found = NULL;
    pthread_mutex_lock(&gf_kinds_lock);
    builtins_init();
    for (size_t i = 0; i < GF_N_BUILTIN && found == NULL; i++)
        if (strcmp(gf_builtins[i].desc->name, name) == 0)
            found = &gf_builtins[i];
    for (size_t i = 0; i < gf_n_plugins && found == NULL; i++)
        if (strcmp(gf_plugins[i]->desc->name, name) == 0)
            found = gf_plugins[i];
    pthread_mutex_unlock(&gf_kinds_lock);
    return found;
}

const char *gf_fn_kind_name(const gf_fn_kind *k) { return k->desc->name; }
bool gf_fn_kind_is_plugin(const gf_fn_kind *k) { return k->path != NULL; }
const char *gf_fn_kind_path(const gf_fn_kind *k) { return k->path; }

size_t gf_fn_kind_count(void)
{
    pthread_mutex_lock(&gf_kinds_lock);
    size_t n = GF_N_BUILTIN + gf_n_plugins;
    pthread_mutex_unlock(&gf_kinds_lock);
    return n;
}

const gf_fn_kind *gf_fn_kind_at(size_t i)
{
    const gf_fn_kind *k = NULL;
    pthread_mutex_lock(&gf_kinds_lock);
    builtins_init();
    if (i < GF_N_BUILTIN)
        k = &gf_builtins[i];
    else if (i - GF_N_BUILTIN < gf_n_plugins)
        k = gf_plugins[i - GF_N_BUILTIN];
    pthread_mutex_unlock(&gf_kinds_lock);
    return k;
}

gf_fn_convert_fn gf_fn_kind_converter(const gf_fn_kind *k) { return k->convert; }
const gf_fn_desc *gf_fn_kind_desc(const gf_fn_kind *k) { return k->desc; }

/* Register a kind after the built-ins (lock held): refused when its name is
 * taken. path (copied) is the plugin's, NULL for a linked-in kind. */
static gf_status add_kind(const gf_fn_desc *d, const char *path, gf_fn_convert_fn convert,
                          gf_fn_kind **out, gf_err *err)
{
    const char *pre = path != NULL ? "plugin " : "", *who = path != NULL ? path : "linked-in kind";
    for (size_t i = 0; i < GF_N_BUILTIN; i++)
        if (strcmp(gf_builtins[i].desc->name, d->name) == 0)
            return gf_err_set(err, GF_ERR_EXISTS, "%s%s: kind '%s' is a built-in kind", pre, who,
                              d->name);
    for (size_t i = 0; i < gf_n_plugins; i++)
        if (strcmp(gf_plugins[i]->desc->name, d->name) == 0)
            return gf_err_set(err, GF_ERR_EXISTS, "%s%s: kind '%s' already comes from %s", pre,
                              who, d->name,
                              gf_plugins[i]->path != NULL ? gf_plugins[i]->path : "the program");
    gf_fn_kind *k = calloc(1, sizeof *k);
    gf_fn_kind **list = realloc(gf_plugins, (gf_n_plugins + 1) * sizeof *list);
    if (list != NULL)
        gf_plugins = list;
    if (k == NULL || list == NULL || (path != NULL && (k->path = strdup(path)) == NULL)) {
        free(k);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    k->desc = d;
    k->convert = convert;
    gf_plugins[gf_n_plugins++] = k;
    *out = k;
    return GF_OK;
}

gf_status gf_fn_plugin_load(const char *path, bool allow_native, const gf_fn_kind **out,
                            gf_err *err)
{
    *out = NULL;
    if (!allow_native)
        return gf_err_set(err, GF_ERR_PERMISSION,
                          "native function plugins are disabled (start the server with "
                          "--allow-native-functions to load %s)", path);
    pthread_mutex_lock(&gf_kinds_lock);
    builtins_init();
    for (size_t i = 0; i < gf_n_plugins; i++) {
        if (gf_plugins[i]->path != NULL && strcmp(gf_plugins[i]->path, path) == 0) {
            *out = gf_plugins[i];
            pthread_mutex_unlock(&gf_kinds_lock);
            return GF_OK;
        }
    }
    gf_status st;
    gf_fn_kind *k;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND, "cannot load plugin: %s", dlerror());
        goto fail;
    }
    gf_fn_entry_fn entry = (gf_fn_entry_fn)(uintptr_t)dlsym(h, GF_FN_ENTRY_SYMBOL);
    if (entry == NULL) {
        st = gf_err_set(err, GF_ERR_INVALID, "plugin %s does not export %s", path,
                        GF_FN_ENTRY_SYMBOL);
        goto fail;
    }
    const gf_fn_desc *d = entry();
    if (d == NULL || d->size < offsetof(gf_fn_desc, unload) + sizeof d->unload) {
        st = gf_err_set(err, GF_ERR_INVALID, "plugin %s: %s returned no valid descriptor", path,
                        GF_FN_ENTRY_SYMBOL);
        goto fail;
    }
    uint32_t major = d->abi_version >> 16, minor = d->abi_version & 0xffffu;
    if (major != GF_FN_ABI_MAJOR || minor > GF_FN_ABI_MINOR) {
        st = gf_err_set(err, GF_ERR_UNSUPPORTED,
                        "plugin %s was built for function ABI %u.%u; this runtime provides "
                        "%d.%d (the major must match and the minor must not be newer)",
                        path, major, minor, GF_FN_ABI_MAJOR, GF_FN_ABI_MINOR);
        goto fail;
    }
    if (d->name == NULL || !gf_function_name_valid(d->name) || d->load == NULL ||
        d->infer == NULL) {
        st = gf_err_set(err, GF_ERR_INVALID, "plugin %s: descriptor lacks a valid name, load "
                        "or infer", path);
        goto fail;
    }
    if ((st = add_kind(d, path, NULL, &k, err)) != GF_OK)
        goto fail;
    k->handle = h; /* plugins stay loaded for the life of the process */
    pthread_mutex_unlock(&gf_kinds_lock);
    GF_LOG_I("loaded plugin kind '%s' from %s", d->name, path);
    *out = k;
    return GF_OK;
fail:
    if (h != NULL)
        dlclose(h);
    pthread_mutex_unlock(&gf_kinds_lock);
    return st;
}

gf_status gf_fn_kind_register(const gf_fn_desc *desc, gf_fn_convert_fn convert, gf_err *err)
{
    if (desc == NULL || desc->name == NULL || !gf_function_name_valid(desc->name) ||
        desc->load == NULL || desc->infer == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "a kind needs a valid name, load and infer");
    pthread_mutex_lock(&gf_kinds_lock);
    builtins_init();
    gf_fn_kind *k;
    gf_status st = add_kind(desc, NULL, convert, &k, err);
    pthread_mutex_unlock(&gf_kinds_lock);
    return st;
}

