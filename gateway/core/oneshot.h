/* gpufaas — the gateway's side of gpufaas-worker's one-shot modes
 * (gateway/core).
 *
 * The gateway runs no function code and touches no device. What needs
 * either runs in a short-lived gpufaas-worker child that answers one JSON
 * object on stdout and exits (runtime/ipc.h, "One-shot modes"):
 *   --probe     how many CUDA devices there are, and which kind each plugin
 *               shared object provides (dlopen happens there, not here);
 *   --validate  a deploy's manifest against its upload, converting the upload
 *               when its kind does (functions/deploy.h).
 * A child that crashes, hangs past its deadline or answers nonsense fails
 * the one call that started it, with a message saying so; the gateway goes
 * on. Used by the core (gf_gw_new, gf_gw_deploy) and by `gpufaas mkmodel`.
 *
 * Threading: every function here may be called from any thread; each call
 * runs its own child.
 */
#ifndef GF_GATEWAY_ONESHOT_H
#define GF_GATEWAY_ONESHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "functions/deploy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where gpufaas-worker is: `configured` when not NULL, else $GPUFAAS_WORKER,
 * else next to the running program, in the build tree beside it, or in the
 * build directory this binary was built in. malloc'd (the caller frees);
 * NULL when there is none. */
char *gf_worker_program_find(const char *configured);

/* How to run the children. Strings are borrowed for the call. */
typedef struct gf_oneshot_cfg {
    const char *worker_path;     /* gpufaas-worker */
    bool allow_native;           /* pass --allow-native-functions */
    const char *const *plugins;  /* shared objects of plugin kinds, or NULL */
    size_t n_plugins;
    uint32_t timeout_ms;         /* deadline of one child (0 = GF_GW_DEFAULT_VALIDATE_TIMEOUT_MS);
                                    then SIGKILL */
} gf_oneshot_cfg;

/* What --probe found. */
typedef struct gf_probe {
    int cuda_devices;            /* usable CUDA devices (0 without a driver or GPU) */
    size_t n_plugins;
    char **plugin_kinds;         /* kind name of each configured plugin, in cfg order */
    char **plugin_paths;         /* its absolute path, as the workers get it in LOAD */
} gf_probe;

/* Run --probe. Fails when a plugin cannot be loaded (the child's message) or
 * the child could not answer. *out is filled on success (gf_probe_deinit). */
gf_status gf_oneshot_probe(const gf_oneshot_cfg *cfg, gf_probe *out, gf_err *err);
void gf_probe_deinit(gf_probe *p);

/* What --validate decided about a deploy. */
typedef struct gf_validation {
    char *work_dir;              /* made under the caller's directory; removed by deinit */
    char *manifest_json;         /* the manifest to store, canonical (possibly derived) */
    char *weights;               /* the converted weights to publish instead of the upload,
                                    or NULL: the upload is the weights */
    size_t n_companions;
    char **companions;           /* suffixes of the companion files to publish */
    char **companion_files;      /* where each is now (in work_dir) */
} gf_validation;

/* Validate a deploy (what it brings: functions/deploy.h, as the child gets
 * it) in a child. The child works in a fresh directory made in
 * parent_dir (on the function store's file system, so that what it writes can
 * be published with rename). On success *out says what to publish; a refusal
 * comes back with the child's code and message (GF_ERR_INVALID naming the
 * tensor, ...); a child that crashed is GF_ERR_INTERNAL, one past its
 * deadline GF_ERR_TIMEOUT. */
gf_status gf_oneshot_validate(const gf_oneshot_cfg *cfg, const gf_fn_deploy_in *d,
                              const char *parent_dir, gf_validation *out, gf_err *err);

/* Remove the work directory (with whatever is still in it) and free. NULL
 * is a no-op. */
void gf_validation_deinit(gf_validation *v);

/* Remove what validations cut short by a crash left in dir (their work
 * directories). Returns how many it removed. */
int gf_oneshot_clean(const char *dir);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_ONESHOT_H */
