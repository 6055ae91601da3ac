/* gpufaas tests — driving a real gpufaas-worker over a socketpair, and mlp
 * models with a naive reference. Used by tests/worker and tests/bench/bench_ipc;
 * free of Check so the benchmark can use it too. */
#ifndef GF_WHARNESS_H
#define GF_WHARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/buf.h"
#include "core/error.h"
#include "ipc.h"
#include "mlp.h"

/* A worker process and our end of its socket. */
typedef struct gf_wh {
    pid_t pid; /* -1 once reaped */
    int fd;    /* our end; -1 when closed */
    gf_ipc_reader rd;
    gf_buf out; /* frames are encoded here, then gf_wh_send */
    uint64_t next_id;
    int status;         /* exit code, 128 + signal once reaped, else -1 */
    gf_ipc_ready ready; /* from the first READY (device_name points to ready_name) */
    char ready_name[128];
    /* EVENT frames seen while waiting for answers */
    uint64_t ev_loaded, ev_evicted, ev_failed, ev_last_seq;
    bool ev_seq_gap; /* a sequence number was skipped */
} gf_wh;

/* Start exe with the socket as fd 3 and the given extra arguments
 * (NULL-terminated; may be NULL). stderr goes to stderr_path when non-NULL
 * ("/dev/null" to silence it). With wait_ready, waits up to timeout_ms for
 * READY and returns GF_ERR_CLOSED when the worker exits first (status then
 * holds its exit code). */
gf_status gf_wh_spawn(gf_wh *w, const char *exe, const char *state_dir, const char *const *extra,
                      const char *stderr_path, bool wait_ready, int timeout_ms, gf_err *err);

/* A new request id. */
uint64_t gf_wh_id(gf_wh *w);

/* Write the frame(s) in w->out and empty it. */
gf_status gf_wh_send(gf_wh *w, gf_err *err);
/* Write raw bytes. */
gf_status gf_wh_send_raw(gf_wh *w, const void *p, size_t n, gf_err *err);

/* The next frame that is not an EVENT (EVENTs are counted). GF_ERR_CLOSED at
 * end of stream, GF_ERR_TIMEOUT after timeout_ms. *f is owned by the caller. */
gf_status gf_wh_recv(gf_wh *w, gf_ipc_frame *f, int timeout_ms, gf_err *err);

/* Send what w->out holds and read the answer to request id (EVENTs are
 * counted on the way). Returns 0 with *f the answer (caller-owned), the
 * ERROR's code (its message in msg when non-NULL; *f emptied), or (uint32_t)-1
 * with msg filled when the send or the read failed or the answer is for
 * another id. */
uint32_t gf_wh_call(gf_wh *w, uint64_t id, int timeout_ms, gf_ipc_frame *f, char *msg,
                    size_t cap);

/* Wait for the process to exit, up to timeout_ms; SIGKILL it after that and
 * return -1. Otherwise the exit code, or 128 + signal. Closes our end of the
 * socket first when close_first. */
int gf_wh_wait(gf_wh *w, int timeout_ms, bool close_first);

/* Kill (SIGKILL) if still running, reap, free everything. */
void gf_wh_free(gf_wh *w);

/* The mlp models it serves are tests/common/mlp.h's. */

#endif /* GF_WHARNESS_H */
