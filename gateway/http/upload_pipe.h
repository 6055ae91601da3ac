/* gpufaas — the pipeline that hashes and writes an upload's main file part
 * (gateway/http).
 *
 * The request's thread feeds the bytes libmicrohttpd hands over to the
 * running SHA-256 as they come (they are still in its cache) and copies them
 * into a ring of GF_UPIPE_BUFS buffers; a writer thread writes each full one
 * to the staged file, so receiving and hashing overlap the disk's work.
 * (A hasher thread of its own, between the two, was measured slower on the
 * shared 2-core machine: 203-299 MB/s against 339-529 in the same runs; each
 * hand-over waited for the scheduler.)
 *
 * The writer writes with O_DIRECT where the file system takes it: the disk
 * reads the buffer itself, where a write through the page cache costs a copy
 * into freshly allocated pages (measured: about 40% of the gateway's CPU time
 * during a 2 GB upload) and pushes whatever else is cached out. A full buffer
 * is a multiple of GF_UPIPE_ALIGN at an offset that is one too; the last,
 * partial one goes through the page cache. gf_upload_finish's fsync then
 * makes the file durable, one sync for the whole file.
 *
 * One request thread calls put and finish; the writer is the pipe's own.
 * Memory: GF_UPIPE_BUFS * GF_UPIPE_CHUNK bytes a pipe (8 MiB).
 */
#ifndef GF_GATEWAY_HTTP_UPLOAD_PIPE_H
#define GF_GATEWAY_HTTP_UPLOAD_PIPE_H

#include <stddef.h>

#include "core/error.h"
#include "store/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_UPIPE_BUFS 4
#define GF_UPIPE_CHUNK ((size_t)2 << 20)
/* The alignment O_DIRECT asks of buffers, offsets and sizes (the largest
 * logical block size in use: a page). */
#define GF_UPIPE_ALIGN ((size_t)4096)

typedef struct gf_upipe gf_upipe;

/* Start hashing into sha (borrowed, initialised; updated by put) and writing to fd (borrowed, open for writing at offset 0;
 * path names it in messages). Switches fd to O_DIRECT where that works.
 * *out is the caller's (gf_upipe_free). */
gf_status gf_upipe_start(int fd, const char *path, gf_sha256 *sha, gf_upipe **out, gf_err *err);

/* Hash size bytes and take them (copied: data is the caller's again on
 * return), waiting while every buffer is in use. Fails with the writer's failure
 * (GF_ERR_NO_SPACE for a full disk, GF_ERR_IO) once it had one. */
gf_status gf_upipe_put(gf_upipe *p, const char *data, size_t size, gf_err *err);

/* Hand the last bytes over and wait until everything is written (not
 * synced); the writer ends. The writer's failure, if any. */
gf_status gf_upipe_finish(gf_upipe *p, gf_err *err);

/* Stop the writer (what is still pending is dropped) and free. NULL is a
 * no-op. */
void gf_upipe_free(gf_upipe *p);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_HTTP_UPLOAD_PIPE_H */
