/* gpufaas — the rules of a function's versions (gateway/core): one pure
 * decision (no I/O, no locks, no allocation) that the gateway's deploy,
 * activate and delete follow, and that the shared store's fold applies to
 * each log entry, so that the nodes of a cluster and a single node decide
 * alike.
 *
 * The rules:
 *  - Numbers. A deploy without a version gets max_version + 1, where
 *    max_version is the highest number the name ever had, deleted versions
 *    and deleted incarnations of the name included: a (name, version) names
 *    one upload forever, so the history rows (function_versions,
 *    invocations, swap_events) of a deleted function and of its redeploy
 *    never share a key, and a URL /v2/models/N/versions/V never meant two
 *    models. After DELETE /v1/functions/N the name is free: the same
 *    manifest deploys again and continues the numbers.
 *  - A deploy naming a version: a free number that was never used is taken;
 *    one held by a live version with the same weights and manifest is the
 *    idempotent case below; any other is GF_ERR_EXISTS (409) saying which
 *    number to use instead.
 *  - Identical redeploy: the same weights (sha256) and manifest (canonical,
 *    its version aside) as a live, ready version makes no new version: that
 *    one is returned, and made current if it is not.
 *  - Interface: a deploy that would change the inputs or outputs clients of
 *    the current version see (names, datatypes, shapes) is GF_ERR_CONFLICT
 *    (409) unless the request allows it (?interface_change=allow,
 *    `gpufaas deploy --allow-interface-change`). Activating a version is an
 *    explicit choice and is never refused for its interface.
 *  - Activate: a live, ready version becomes current; a broken one is
 *    GF_ERR_CONFLICT; an unknown or deleted one GF_ERR_NOT_FOUND.
 *  - Delete a version: not the current one while other live versions exist
 *    (GF_ERR_CONFLICT: activate another first); deleting the only live
 *    version deletes the function.
 *  - Delete the function: every live version goes; the name is free.
 */
#ifndef GF_GATEWAY_CORE_VERSIONS_H
#define GF_GATEWAY_CORE_VERSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "functions/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One live (not deleted) version of the function. Strings borrowed. */
typedef struct gf_ver_entry {
    int64_t version;
    bool ready;            /* false: broken (its file failed a check) */
    bool current;          /* the one served */
    const char *sha256;    /* of its weights file */
    const char *identity;  /* its canonical manifest with no version (gf_ver_identity) */
    const gf_manifest *mf; /* its interface: inputs and outputs */
} gf_ver_entry;

/* What a function is now. */
typedef struct gf_ver_state {
    const char *function;       /* the name, for messages */
    const gf_ver_entry *live;   /* its live versions, in any order; NULL when none */
    size_t n_live;              /* 0: the function does not exist (never, or deleted) */
    int64_t max_version;        /* the highest number the name ever had; 0 = never deployed */
} gf_ver_state;

typedef enum gf_ver_op {
    GF_VER_DEPLOY = 0,         /* a new upload */
    GF_VER_ACTIVATE = 1,       /* make a version current */
    GF_VER_DELETE_VERSION = 2, /* delete one version */
    GF_VER_DELETE = 3,         /* delete the function */
} gf_ver_op;

typedef struct gf_ver_request {
    gf_ver_op op;
    int64_t version;           /* DEPLOY: the manifest's (0 = the next number);
                                  ACTIVATE, DELETE_VERSION: which one */
    const char *sha256;        /* DEPLOY: of the weights */
    const char *identity;      /* DEPLOY: gf_ver_identity of the manifest */
    const gf_manifest *mf;     /* DEPLOY: the interface */
    bool allow_interface_change; /* DEPLOY */
} gf_ver_request;

typedef enum gf_ver_outcome {
    GF_VER_CREATE = 0,     /* record the new version `version` and make it current */
    GF_VER_EXISTING = 1,   /* deploy of what `version` already is: no new version; it is
                              made current when it is not (changes_current) */
    GF_VER_CURRENT = 2,    /* activate: `version` becomes current (changes_current) */
    GF_VER_REMOVE = 3,     /* delete version `version`; the current one stays */
    GF_VER_REMOVE_ALL = 4, /* the function goes: every live version is deleted */
} gf_ver_outcome;

typedef struct gf_ver_decision {
    gf_status status;       /* GF_OK, or GF_ERR_NOT_FOUND / GF_ERR_EXISTS / GF_ERR_CONFLICT */
    gf_ver_outcome outcome; /* when GF_OK */
    int64_t version;        /* the version the outcome is about */
    bool changes_current;   /* the current version is another one afterwards */
    char why[GF_ERR_MSG_MAX]; /* when not GF_OK: what is wrong and how to proceed */
} gf_ver_decision;

/* Decide what request r does to a function in state s (both borrowed).
 * Always fills *out. */
void gf_ver_decide(const gf_ver_state *s, const gf_ver_request *r, gf_ver_decision *out);

/* The identity of a manifest for the identical-redeploy rule: its canonical
 * JSON with no version, appended to out. */
gf_status gf_ver_identity(const gf_manifest *mf, gf_buf *out);

/* True when a and b have the same interface: the same inputs and outputs
 * (by name) with the same datatypes and shapes. When they differ, why (may
 * be NULL) names the first difference, as "input 'x': FP32 [-1,64] ->
 * FP32 [-1,32]". */
bool gf_ver_same_interface(const gf_manifest *a, const gf_manifest *b, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_CORE_VERSIONS_H */
