/* gpufaas-worker — the worker process's entry point (gf_worker_main): the
 * serving process, or one of the one-shot modes. See worker.h and
 * docs/protocol.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fault.h"
#include "ipc.h"
#include "worker/worker.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gpufaas-worker --fd N --state-dir DIR [options]\n"
            "       gpufaas-worker --probe [--allow-native-functions] [--plugin PATH]...\n"
            "       gpufaas-worker --validate [--manifest FILE] [--name N] [--kind K]\n"
            "                      --upload FILE... --out-dir DIR\n"
            "                      [--allow-native-functions] [--plugin PATH]...\n"
            "\n"
            "Started by the gateway; speaks the worker protocol (docs/protocol.md) on the\n"
            "connected Unix socket N it inherits. --probe (CUDA devices, kinds) and\n"
            "--validate (check a deploy, converting the upload when its kind does) answer\n"
            "one JSON object on stdout and exit: the gateway's short-lived children.\n"
            "\n"
            "  --device cpu|cuda|cuda:N   device to serve (default cpu)\n"
            "  --device-memory SIZE       device budget (K/M/G/T, powers of 1024; default:\n"
            "                             the backend's: 1G on cpu, free memory - 1G on cuda)\n"
            "  --host-memory SIZE         pinned host tier budget (default 2G; 0 = none)\n"
            "  --state-dir DIR            state directory; derived parameters go to DIR/derived\n"
            "  --fd N                     the socket to the gateway\n"
            "  --policy lru|gds|gdsf      device eviction policy (default lru)\n"
            "  --allow-native-functions   allow plugin kinds (shared objects) in LOAD\n"
            "  --worker-id N              worker number for logs and READY (default 0)\n"
            "  --log-level LEVEL          error|warn|info|debug|trace (default: GPUFAAS_LOG, "
            "else info)\n"
            "  --max-frame SIZE           largest frame payload accepted (default 1G)\n"
            "  --blas-threads N           cpu: OpenBLAS threads (default 1)\n"
            "  --copy-bandwidth SIZE      cpu, for tests: emulate a link of SIZE bytes/s\n"
            "  --pin-limit SIZE           device bytes pinned and kept-warm functions may hold\n"
            "                             (default: half the device budget)\n"
            "  --page-size SIZE           device page size, rounded up to a power of two\n"
            "                             (default 2M; benchmarks with small models)\n"
            "  --schedule deadline|ready-first|fifo  the order requests run in (default\n"
            "                             deadline: ready-first, and of those that can run\n"
            "                             the one due soonest)\n"
            "  --swap-order deadline|arrival  the order swap-ins share the link in: the\n"
            "                             earliest due first (default), or as they began\n"
            "\n"
            "Exit codes: %d done (SHUTDOWN, or the gateway closed the socket), %d runtime\n"
            "failure, %d protocol error, %d the device was lost (a CUDA fault; respawn),\n"
            "%d fatal start-up failure: do not respawn.\n"
            "\n"
            "For tests, GPUFAAS_FAULTS=site:nth[:repeat],... arms fault-injection sites\n"
            "(runtime/core/fault.h), e.g. device_lost:1.\n",
            GF_WORKER_EXIT_OK, GF_WORKER_EXIT_FAILURE, GF_WORKER_EXIT_PROTOCOL,
            GF_WORKER_EXIT_DEVICE, GF_WORKER_EXIT_FATAL);
}

int gf_worker_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return GF_WORKER_EXIT_OK;
        }
    }
    /* what a worker writes (derived parameter files, the one-shot modes'
     * outputs) is for the server's user only */
    umask(077);
    gf_err err;
    gf_err_clear(&err);
    if (gf_fault_arm_spec(getenv("GPUFAAS_FAULTS"), &err) != GF_OK) {
        fprintf(stderr, "gpufaas-worker: GPUFAAS_FAULTS: %s\n", gf_err_msg(&err));
        return GF_WORKER_EXIT_FATAL;
    }
    if (gf_worker_is_oneshot(argc, argv))
        return gf_worker_oneshot_main(argc, argv);
    gf_worker_config cfg;
    if (gf_worker_parse_args(argc, argv, &cfg, &err) != GF_OK) {
        fprintf(stderr, "gpufaas-worker: %s (see --help)\n", gf_err_msg(&err));
        return GF_WORKER_EXIT_FATAL;
    }
    char role[32];
    snprintf(role, sizeof role, "worker %d", cfg.worker_id);
    gf_log_init(role, cfg.log_level);
    gf_worker *w = NULL;
    gf_status st = gf_worker_new(&cfg, &w, &err);
    if (st != GF_OK) {
        bool fatal = gf_worker_start_failure_is_fatal(st);
        fprintf(stderr, "gpufaas-worker: cannot start: %s%s\n", gf_err_msg(&err),
                fatal ? " (fatal: not to be respawned)" : "");
        return fatal ? GF_WORKER_EXIT_FATAL : GF_WORKER_EXIT_FAILURE;
    }
    int code = gf_worker_run(w);
    gf_worker_free(w);
    return code;
}
