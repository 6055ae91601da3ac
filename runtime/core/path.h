/* gpufaas — file system paths (runtime/core). */
#ifndef GF_CORE_PATH_H
#define GF_CORE_PATH_H

#ifdef __cplusplus
extern "C" {
#endif

/* dir + "/" + name, malloc'd (the caller frees); NULL when out of memory. */
char *gf_path_join(const char *dir, const char *name);

/* Remove path and, when it is a directory, everything below it, without
 * following symbolic links. Best effort: what cannot be removed stays. */
void gf_path_rmtree(const char *path);

/* The folder of the state directory where workers keep parameters that a
 * kind derives at load (folded batchnorm, widened weights): one file per
 * model key. The gateway removes a version's file with the version and, at
 * start, every file there that no live version owns. */
#define GF_DERIVED_DIR "derived"

/* The name, inside GF_DERIVED_DIR, of the derived file of model key
 * (borrowed; the gateway's "name@version"), malloc'd; NULL when out of
 * memory. A key that is a safe file name (letters, digits, '_', '-', '.',
 * '@', not starting with '.', at most 200 bytes) gives "<key>.safetensors";
 * any other gets its unsafe bytes replaced by '_', cut to 200 bytes and a
 * hash of the whole key appended, so that distinct keys never share a
 * file. The one place both the worker and the gateway take it from. */
char *gf_derived_name(const char *key);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_PATH_H */
