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

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_PATH_H */
