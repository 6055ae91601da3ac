/* libFuzzer target: the worker protocol's frame reader and every message
 * decoder (runtime/ipc.c), on a byte stream a hostile peer could send. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int p[2];
    if (size > 60000 || pipe(p) != 0) /* within one pipe buffer: no blocking */
        return 0;
    if (write(p[1], data, size) != (ssize_t)size)
        abort();
    close(p[1]);
    gf_ipc_reader r;
    gf_err err;
    if (gf_ipc_reader_init(&r, p[0], 1u << 20, &err) != GF_OK)
        abort();
    for (int n = 0; n < 64; n++) {
        gf_ipc_frame f;
        memset(&f, 0, sizeof f);
        if (gf_ipc_reader_next(&r, &f, &err) != GF_OK)
            break;
        union {
            gf_ipc_ready ready;
            gf_ipc_load load;
            gf_ipc_loaded loaded;
            gf_ipc_unload unload;
            gf_ipc_infer infer;
            gf_ipc_result result;
            gf_ipc_error error;
            gf_ipc_event event;
            gf_ipc_stats stats;
        } u;
        /* every decoder on every frame: each checks the type and the bounds */
        (void)gf_ipc_decode_ready(&f, &u.ready, &err); /* borrows the payload */
        (void)gf_ipc_decode_load(&f, &u.load, &err); /* borrows the payload */
        (void)gf_ipc_decode_loaded(&f, &u.loaded, &err); /* borrows the payload */
        (void)gf_ipc_decode_unload(&f, &u.unload, &err); /* borrows the payload */
        (void)gf_ipc_decode_infer(&f, &u.infer, &err);
        gf_ipc_infer_deinit(&u.infer); /* after a failure too */
        (void)gf_ipc_decode_result(&f, &u.result, &err);
        gf_ipc_result_deinit(&u.result);
        (void)gf_ipc_decode_error(&f, &u.error, &err); /* borrows the payload */
        (void)gf_ipc_decode_event(&f, &u.event, &err); /* borrows the payload */
        (void)gf_ipc_decode_stats(&f, &u.stats, &err); /* borrows the payload */
        gf_ipc_frame_deinit(&f);
    }
    gf_ipc_reader_deinit(&r);
    close(p[0]);
    return 0;
}
