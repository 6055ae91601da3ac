/* gpufaas — what gateway/core/sync.c (the thread, the folds applied here,
 * parked requests) and sync_deploy.c (deploys and deletes through the
 * store's log) share. Locks as sync.c's header says. */
#ifndef GF_GATEWAY_CORE_SYNC_IMPL_H
#define GF_GATEWAY_CORE_SYNC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/core/internal.h"
#include "gateway/core/shared.h"

struct gw_parked;
typedef struct gw_parked gw_parked;

typedef struct gw_sync_fn {
    char name[64];
    gf_shared_fold fold;
    bool dirty;                /* folded entries not yet applied here (or a copy failed) */
    char fetch_err[256];       /* why the last copy failed, "" when none */
} gw_sync_fn;

/* The files of a version deployed on this node, handed to the install. */
typedef struct local_files {
    int64_t version;
    char *weights;             /* moved into place by the install (then NULL) */
    char **companions;         /* paths, updated in place as they are moved */
    char *const *suffixes;
    size_t n;
} local_files;

struct gw_sync {
    gf_gw *gw;
    char *dir;
    gf_shared *sh;             /* NULL until the store could be opened */
    uint32_t scan_ms;
    pthread_mutex_t lock;
    gw_sync_fn **fns;
    size_t n_fns, cap_fns;

    pthread_mutex_t qlock;
    pthread_cond_t qcond;      /* work for the thread */
    pthread_cond_t qdone;      /* a round of lookups finished */
    char (*want)[64];          /* names asked for */
    size_t n_want, cap_want;
    uint64_t asked, answered;  /* lookup rounds requested / finished */
    gw_parked *parked;
    size_t n_parked;
    bool stop;
    pthread_t thread;
    bool running;

    atomic_bool healthy;       /* the last access to the store worked */
    atomic_bool ever_read;     /* it worked once (for the log) */
    char last_err[256];        /* under qlock */
};

/* Function name's fold, created when create and absent; NULL when absent
 * (or out of memory). s->lock held. */
gw_sync_fn *gw_sync_fn_get(gw_sync *s, const char *name, bool create);

/* Note whether the store could be reached: st from an access to it (e its
 * message). A log entry this node cannot understand (GF_ERR_FORMAT) is that
 * function's problem, not the store's. */
void gw_sync_health(gw_sync *s, gf_status st, const gf_err *e);

/* Open the store if it is not open yet. */
gf_status gw_sync_ensure_open(gw_sync *s, gf_err *err);

/* Read and fold f's new entries (s->lock held). When seq > 0, *out gets
 * the outcome of entry seq. */
gf_status gw_sync_fold_new(gw_sync *s, gw_sync_fn *f, uint64_t seq, gf_shared_outcome *out,
                           gf_err *err);

/* Make this node's registry and SQLite agree with f's fold (s->lock held);
 * lf (may be NULL) are the files of a version deployed here. */
void gw_sync_reconcile(gw_sync *s, gw_sync_fn *f, local_files *lf);

#endif /* GF_GATEWAY_CORE_SYNC_IMPL_H */
