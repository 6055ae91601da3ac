/* gpufaas — the shared store (gateway/core): a directory every node of a
 * cluster mounts (NFS, CephFS, a cloud file store), through which deploys
 * and deletes on any node reach every node. No node talks to another; the
 * file system's atomic link(2) and rename(2) are the whole protocol:
 *
 *   DIR/FORMAT                          "gpufaas-shared-store 1"
 *   DIR/objects/sha256/ab/ab12...ef     content-addressed, immutable files
 *                                       (weights, companion files): written to
 *                                       tmp/, fsync'd, then link(2)ed into place
 *   DIR/log/<function>/0000000001.json  the function's log: one entry per
 *                                       deploy, activate, version delete or
 *                                       delete, in the order their sequence
 *                                       numbers were claimed (link(2) of a
 *                                       fully written, fsync'd file to the next
 *                                       free number fails with EEXIST when
 *                                       another node took it: take the next)
 *   DIR/tmp/                            staging, one unique name per write
 *
 * Every node reads the same entries in the same order and folds them with the
 * same rules (gf_shared_fold_*), so every node arrives at the same versions
 * and the same current version. docs/cluster.md explains the protocol and
 * the choices.
 *
 * Threading: a gf_shared handle may be used from several threads at once
 * (each call works on its own files). Nothing here takes a gateway lock.
 */
#ifndef GF_GATEWAY_SHARED_H
#define GF_GATEWAY_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_shared gf_shared;

#define GF_SHARED_FORMAT "gpufaas-shared-store 1\n"
#define GF_SHARED_ENTRY_MAX (4u << 20) /* bytes of one log entry, at most */

/* Open (creating the layout when DIR is empty) the shared store at dir
 * (borrowed). node names this node in the entries it writes (borrowed; may
 * be NULL: the host name). Fails when dir is not a directory, cannot be
 * written, or holds another FORMAT. *out is the caller's (gf_shared_free). */
gf_status gf_shared_open(const char *dir, const char *node, gf_shared **out, gf_err *err);

/* NULL is a no-op. */
void gf_shared_free(gf_shared *s);

/* The directory (lives as long as s). */
const char *gf_shared_dir(const gf_shared *s);

/* ---- objects ---------------------------------------------------------------------- */

/* One file of a version: the weights (suffix "") or a companion file. */
typedef struct gf_shared_blob {
    char suffix[32];                 /* "" for the weights, else the companion's suffix */
    char sha256[GF_SHA256_HEX_LEN];  /* lowercase hex */
    uint64_t bytes;
} gf_shared_blob;

/* Publish the file at src (borrowed) as the object b names: copied to tmp/,
 * fsync'd, linked into objects/. An object already there (same content) is
 * kept. GF_ERR_FORMAT when src's size is not b->bytes. */
gf_status gf_shared_object_put(gf_shared *s, const char *src, const gf_shared_blob *b,
                               gf_err *err);

/* Copy object b into dst (borrowed path; written beside it, fsync'd, renamed
 * into place), checking its size and sha256 on the way: GF_ERR_FORMAT when
 * they do not match (nothing is left at dst), GF_ERR_NOT_FOUND when the
 * object is absent, GF_ERR_IO when the store cannot be read. */
gf_status gf_shared_object_get(gf_shared *s, const gf_shared_blob *b, const char *dst,
                               gf_err *err);

/* ---- the log ------------------------------------------------------------------------- */

typedef enum gf_shared_op {
    GF_SHARED_DEPLOY,          /* a new version (number chosen by the fold unless given) */
    GF_SHARED_ACTIVATE,        /* make a version current */
    GF_SHARED_DELETE_VERSION,  /* delete one version */
    GF_SHARED_DELETE,          /* delete the function (the name becomes free) */
} gf_shared_op;

/* One entry. Strings and arrays are malloc'd and owned by the entry
 * (gf_shared_entry_deinit). */
typedef struct gf_shared_entry {
    uint64_t seq;              /* its sequence number (set by append and read) */
    gf_shared_op op;
    int64_t version;           /* deploy: requested (0 = the next); others: the target */
    char *kind;                /* deploy */
    char *manifest;            /* deploy: the canonical manifest, JSON text */
    gf_shared_blob weights;    /* deploy */
    gf_shared_blob *companions; /* deploy; n_companions of them */
    size_t n_companions;
    bool interface_change;     /* deploy: the request allows changing inputs/outputs */
    char node[64];             /* who wrote it */
    int64_t time_ms;           /* when (Unix ms), for people */
} gf_shared_entry;

void gf_shared_entry_deinit(gf_shared_entry *e);

/* Free n entries and the array. NULL is a no-op. */
void gf_shared_entries_free(gf_shared_entry *e, size_t n);

/* Append e as one line of JSON to b ({"op", "version", "node", "time_ms", and
 * for a deploy "kind", "interface_change", "manifest", "weights",
 * "companions"}). GF_ERR_NOMEM only. */
struct gf_buf;
gf_status gf_shared_entry_encode(const gf_shared_entry *e, struct gf_buf *b);

/* Parse one entry from len bytes of text; path (borrowed) names it in
 * errors. GF_ERR_FORMAT, saying what is wrong, for anything this version
 * does not understand (an unknown op: written by a newer gpufaas). *e is
 * the caller's (gf_shared_entry_deinit) on success, empty on failure. */
gf_status gf_shared_entry_decode(const char *text, size_t len, const char *path,
                                 gf_shared_entry *e, gf_err *err);

/* Append e to the log of function name: the entry is written to tmp/ and
 * fsync'd, then link(2)ed to the first free sequence number (on EEXIST the
 * next is tried; an EEXIST that a retransmitted NFS LINK produced after
 * succeeding is recognised by the staged file's link count). *seq gets the
 * number it took. e->node and e->time_ms are filled in. */
gf_status gf_shared_append(gf_shared *s, const char *name, gf_shared_entry *e, uint64_t *seq,
                           gf_err *err);

/* The entries of name's log after sequence number `after`, in order, up to
 * the first number not (yet) visible. *out (n of them; NULL when none) is the
 * caller's (gf_shared_entries_free). A function without a log has no
 * entries (GF_OK). GF_ERR_IO when the store cannot be read (its FORMAT file
 * is how that is told from a function it does not have); GF_ERR_FORMAT,
 * naming the file, when an entry is not one this version understands. */
gf_status gf_shared_read(gf_shared *s, const char *name, uint64_t after, gf_shared_entry **out,
                         size_t *n, gf_err *err);

/* The names of every function with a log (valid names only), malloc'd
 * strings in a malloc'd array (the caller frees both). */
gf_status gf_shared_names(gf_shared *s, char ***names, size_t *n, gf_err *err);

/* ---- the fold: versions and the current version from the entries ------------------ */

/* One version as the fold knows it: borrows the deploy entry from the fold;
 * owns what the rules compare (the fold frees it). */
struct gf_manifest;
typedef struct gf_shared_version {
    int64_t version;
    bool live;                 /* false once deleted */
    const gf_shared_entry *deploy;
    struct gf_manifest *mf;    /* its manifest, parsed: the interface */
    char *identity;            /* gf_ver_identity of it */
    char *content;             /* its objects: weights sha256 [;suffix=sha256]... */
} gf_shared_version;

/* What the fold made of one entry, for the node that wrote it. */
typedef struct gf_shared_outcome {
    gf_status status;          /* GF_OK: applied; refused with gf_ver_decide's status
                                  (GF_ERR_EXISTS, GF_ERR_NOT_FOUND, GF_ERR_CONFLICT) or
                                  GF_ERR_INVALID for an entry that cannot be applied; the
                                  message says why and how to proceed */
    int64_t version;           /* deploy: the version it became (or the identical one
                                  that exists: then identical is set) */
    bool identical;            /* deploy: same weights and manifest as a live version */
    char message[GF_ERR_MSG_MAX];
} gf_shared_outcome;

/* A function's log folded so far. Caller-owned (init/deinit). */
typedef struct gf_shared_fold {
    char name[128];            /* the function, for messages */
    uint64_t seq;              /* last entry folded */
    uint64_t generation;       /* deletes of the whole function so far */
    int64_t current;           /* 0: none (never deployed, or deleted) */
    int64_t next_version;      /* what a deploy without a version becomes */
    gf_shared_version *versions; /* every version ever deployed, in that order (deleted
                                    ones with live false) */
    size_t n_versions, cap_versions;
    gf_shared_entry **entries; /* every entry folded, each malloc'd (owned), so that
                                  versions can borrow them */
    size_t n_entries, cap_entries;
} gf_shared_fold;

void gf_shared_fold_init(gf_shared_fold *f, const char *name);
void gf_shared_fold_deinit(gf_shared_fold *f);

/* Fold entry e (its contents are moved into f; e is left empty). e->seq must
 * be f->seq + 1. *out (may be NULL) says what became of it. The rules are a
 * single node's, gf_ver_decide (gateway/core/versions.h), applied to the
 * versions folded so far, so a cluster decides as one node would: a deploy
 * without a version gets the next number (numbers continue after a delete of
 * the function), an identical deploy is the existing version (made current),
 * an interface change needs the entry's interface_change, activate needs a
 * live version, delete_version refuses the current one while others live
 * (the last one takes the function with it). Pure: no I/O. */
gf_status gf_shared_fold_apply(gf_shared_fold *f, gf_shared_entry *e, gf_shared_outcome *out,
                               gf_err *err);

/* The live version numbered v (0 = the current one), or NULL. */
const gf_shared_version *gf_shared_fold_find(const gf_shared_fold *f, int64_t v);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_SHARED_H */
