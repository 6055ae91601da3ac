/* gpufaas — the gateway's worker processes: spawning them, the supervisor
 * (reaping, restarts with backoff, heartbeats), the devices they serve, start
 * and stop. Their connections are conn.c's, their answers answers.c's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "gateway/core/internal.h"

/* ---- processes -------------------------------------------------------------------- */

static void join_threads(gw_worker *w)
{
    if (w->writer_running) {
        pthread_mutex_lock(&w->slock);
        w->sq_stop = true;
        pthread_cond_signal(&w->scond);
        pthread_mutex_unlock(&w->slock);
        pthread_join(w->writer, NULL);
        w->writer_running = false;
    }
    if (w->reader_running) {
        pthread_join(w->reader, NULL);
        w->reader_running = false;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
}

/* Start worker w's process and threads. Lock NOT held. */
static gf_status spawn(gf_gw *gw, gw_worker *w, gf_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return gf_err_set(err, GF_ERR_IO, "socketpair: %s", strerror(errno));
    /* everything the child needs is built before fork: after it, only
     * async-signal-safe calls */
    char fdbuf[16], idbuf[16], dmem[32], hmem[32], bw[32], pgs[32], pin[32];
    snprintf(fdbuf, sizeof fdbuf, "%d", 3);
    snprintf(idbuf, sizeof idbuf, "%d", w->id);
    snprintf(dmem, sizeof dmem, "%llu", (unsigned long long)gw->cfg.device_memory);
    snprintf(hmem, sizeof hmem, "%llu", (unsigned long long)gw->cfg.host_memory);
    snprintf(bw, sizeof bw, "%llu", (unsigned long long)gw->cfg.cpu_copy_bandwidth);
    snprintf(pgs, sizeof pgs, "%llu", (unsigned long long)gw->cfg.page_size);
    snprintf(pin, sizeof pin, "%llu", (unsigned long long)gw->cfg.pin_limit);
    static const char *const lv[] = {"error", "warn", "info", "debug", "trace"};
    int t = gf_log_threshold < 0 ? 0 : gf_log_threshold > 4 ? 4 : gf_log_threshold;
    const char *dev = strncmp(w->device, "cpu", 3) == 0 ? "cpu" : w->device;
    const char *argv[32];
    int a = 0;
    argv[a++] = gw->worker_path;
    argv[a++] = "--device";
    argv[a++] = dev;
    argv[a++] = "--fd";
    argv[a++] = fdbuf;
    argv[a++] = "--worker-id";
    argv[a++] = idbuf;
    argv[a++] = "--state-dir";
    argv[a++] = gw->state_dir;
    argv[a++] = "--policy";
    argv[a++] = gf_evict_policy_name(gw->cfg.policy);
    argv[a++] = "--log-level";
    argv[a++] = lv[t];
    if (gw->cfg.device_memory > 0) {
        argv[a++] = "--device-memory";
        argv[a++] = dmem;
    }
    if (gw->cfg.host_memory > 0) {
        argv[a++] = "--host-memory";
        argv[a++] = hmem;
    }
    if (gw->cfg.allow_native)
        argv[a++] = "--allow-native-functions";
    if (gw->cfg.cpu_copy_bandwidth > 0 && strcmp(dev, "cpu") == 0) {
        argv[a++] = "--copy-bandwidth";
        argv[a++] = bw;
    }
    if (gw->cfg.page_size > 0) {
        argv[a++] = "--page-size";
        argv[a++] = pgs;
    }
    if (gw->cfg.pin_limit > 0) {
        argv[a++] = "--pin-limit";
        argv[a++] = pin;
    }
    if (gw->cfg.schedule != NULL) {
        argv[a++] = "--schedule";
        argv[a++] = gw->cfg.schedule;
    }
    if (gw->cfg.swap_order_arrival) {
        argv[a++] = "--swap-order";
        argv[a++] = "arrival";
    }
    argv[a] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return gf_err_set(err, GF_ERR_IO, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (sv[1] == 3) {
            fcntl(3, F_SETFD, 0);
        } else {
            dup2(sv[1], 3); /* the copy does not inherit close-on-exec */
        }
        execv(gw->worker_path, (char *const *)argv);
        _exit(127);
    }
    close(sv[1]);
    pthread_mutex_lock(&gw->lock);
    w->fd = sv[0];
    w->pid = pid;
    w->state = GW_W_STARTING;
    w->exited = false;
    w->conn_closed = false;
    w->started_us = gf_mono_us();
    w->have_stats = false;
    pthread_mutex_unlock(&gw->lock);
    pthread_mutex_lock(&w->slock); /* gw_worker_send reads it to decide it may write */
    while (w->sq_head != NULL) { /* nothing meant for the previous process goes out */
        gw_send *s = w->sq_head;
        w->sq_head = s->next;
        gw_frame_unref(s->frame);
        free(s);
    }
    w->sq_tail = NULL;
    w->sq_stop = false;
    w->sq_dead = false;
    pthread_mutex_unlock(&w->slock);
    int rc = pthread_create(&w->writer, NULL, gw_writer_main, w);
    if (rc == 0) {
        w->writer_running = true;
        rc = pthread_create(&w->reader, NULL, gw_reader_main, w);
        w->reader_running = rc == 0;
    }
    if (rc != 0) {
        kill(pid, SIGKILL);
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create: %s", strerror(rc));
    }
    gf_store_worker_spec spec = {w->id, w->device, pid, gw->cfg.device_memory,
                                 gw->cfg.host_memory};
    gf_err e2;
    if (gf_store_worker_register(gw->store, &spec, &e2) != GF_OK)
        GF_LOG_W("worker %d: recording it: %s", w->id, e2.msg);
    return GF_OK;
}

static void *supervisor_main(void *arg)
{
    gf_gw *gw = arg;
    uint64_t last_stats = 0;
    pthread_mutex_lock(&gw->lock);
    while (gw->supervisor_running) {
        uint64_t now = gf_mono_us();
        /* reap */
        for (int i = 0; i < gw->n_workers; i++) {
            gw_worker *w = &gw->workers[i];
            if (w->pid <= 0 || w->exited)
                continue;
            int status;
            pid_t r = waitpid(w->pid, &status, WNOHANG);
            if (r != w->pid)
                continue;
            w->exited = true;
            w->exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                         : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
            bool stopping = atomic_load(&gw->stopping);
            if (w->exit_code == GF_WORKER_EXIT_FATAL || stopping) {
                if (!stopping)
                    GF_LOG_E("worker %d (%s) exited with the do-not-respawn code %d: it will not "
                             "be restarted (see its message above)", w->id, w->device,
                             w->exit_code);
                w->state = GW_W_FAILED;
            } else {
                if (now - w->started_us > 60u * 1000000u)
                    w->backoff_ms = 0;
                w->backoff_ms = w->backoff_ms == 0 ? 500 : w->backoff_ms * 2;
                if (w->backoff_ms > 30000)
                    w->backoff_ms = 30000;
                w->restart_at_us = now + w->backoff_ms * 1000u;
                w->state = GW_W_DOWN;
                GF_LOG_W("worker %d (%s) down (exit %d); restarting in %llu ms", w->id,
                         w->device, w->exit_code, (unsigned long long)w->backoff_ms);
            }
            gf_store_log_worker_state(gw->store, w->id, GF_STORE_WORKER_DEAD, -1);
            pthread_cond_broadcast(&gw->cond);
        }
        /* restart */
        for (int i = 0; i < gw->n_workers && !atomic_load(&gw->stopping); i++) {
            gw_worker *w = &gw->workers[i];
            if (w->state != GW_W_DOWN || !w->exited || now < w->restart_at_us)
                continue;
            pthread_mutex_unlock(&gw->lock);
            join_threads(w);
            gf_err err;
            gf_status st = spawn(gw, w, &err);
            pthread_mutex_lock(&gw->lock);
            if (st != GF_OK) {
                GF_LOG_E("worker %d: restart failed: %s", w->id, err.msg);
                w->restart_at_us = now + 5000000u;
                continue;
            }
            w->restarts++;
            char wid[16];
            snprintf(wid, sizeof wid, "%d", w->id);
            const char *l1[1] = {wid};
            gw_metric_add(gw->metrics, GW_M_WORKER_RESTARTS, l1, 1);
            gf_store_log_restart(gw->store, w->id, w->pid, 0);
        }
        /* hits and last uses of the placements, for SQLite */
        if (now - gw->last_hits_flush_us >= GW_HITS_FLUSH_US)
            gw_copies_flush_hits(gw);
        /* heartbeats: a worker's reader answers GET_STATS at once, whatever
         * it computes; one that has not for the heartbeat timeout (stopped,
         * wedged) is killed, and its death is handled as any other: its
         * requests retried once elsewhere or answered, a restart */
        uint64_t hb_us = (uint64_t)(gw->cfg.heartbeat_timeout_ms
                                        ? gw->cfg.heartbeat_timeout_ms
                                        : GF_GW_DEFAULT_HEARTBEAT_TIMEOUT_MS) * 1000u;
        for (int i = 0; i < gw->n_workers; i++) {
            gw_worker *w = &gw->workers[i];
            uint64_t seen = w->last_stats_us > w->up_us ? w->last_stats_us : w->up_us;
            if (w->state != GW_W_UP || w->exited || w->pid <= 0 || now - seen <= hb_us)
                continue;
            GF_LOG_W("worker %d (%s) answered no heartbeat for %.1f s (--heartbeat-timeout): "
                     "killing it", w->id, w->device, (double)(now - seen) / 1e6);
            kill(w->pid, SIGKILL);
            w->state = GW_W_DOWN; /* routed to no more; reaped and restarted below */
            char wid[16];
            snprintf(wid, sizeof wid, "%d", w->id);
            const char *l1[1] = {wid};
            gw_metric_add(gw->metrics, GW_M_WORKER_HUNG, l1, 1);
        }
        if (now - last_stats >= 1000000u) {
            last_stats = now;
            for (int i = 0; i < gw->n_workers; i++)
                if (gw->workers[i].state == GW_W_UP)
                    gw_send_empty(&gw->workers[i], GF_IPC_GET_STATS,
                               atomic_fetch_add(&gw->next_id, 1));
        }
        /* deadlines of requests in batches (waiting for a LOAD, in flight) */
        gw_expired exp[64];
        size_t n_exp = gw_expire_collect(gw, now, exp, sizeof exp / sizeof exp[0]);
        if (n_exp > 0) {
            pthread_mutex_unlock(&gw->lock);
            gw_expire_answer(gw, exp, n_exp);
            pthread_mutex_lock(&gw->lock);
        }
        struct timespec ts;
        gf_deadline_after(CLOCK_REALTIME, 100u * 1000000u, &ts);
        pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
    }
    pthread_mutex_unlock(&gw->lock);
    return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

/* "auto", "cpu", "cpu:N", "cuda:0,cuda:1" -> the device of each worker. */
static gf_status parse_devices(gf_gw *gw, const char *spec, gf_err *err)
{
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, GF_GW_DEFAULT_DEVICES) == 0) {
        int n = gw->probe.cuda_devices; /* asked of gpufaas-worker --probe */
        if (n > GW_MAX_WORKERS)
            n = GW_MAX_WORKERS;
        for (int i = 0; i < n; i++)
            snprintf(gw->workers[i].device, sizeof gw->workers[i].device, "cuda:%d", i);
        if (n == 0) {
            snprintf(gw->workers[0].device, sizeof gw->workers[0].device, "cpu:0");
            n = 1;
        }
        gw->n_workers = n;
        return GF_OK;
    }
    if (strcmp(spec, "cpu") == 0)
        spec = "cpu:1";
    if (strncmp(spec, "cpu:", 4) == 0) {
        char *end;
        long n = strtol(spec + 4, &end, 10);
        if (*end != '\0' || n < 1 || n > GW_MAX_WORKERS)
            return gf_err_set(err, GF_ERR_INVALID, "--devices %s: the number of cpu workers must "
                              "be 1..%d", spec, GW_MAX_WORKERS);
        for (long i = 0; i < n; i++)
            snprintf(gw->workers[i].device, sizeof gw->workers[i].device, "cpu:%ld", i);
        gw->n_workers = (int)n;
        return GF_OK;
    }
    const char *p = spec;
    int n = 0;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item || n == GW_MAX_WORKERS)
            return gf_err_set(err, GF_ERR_INVALID, "--devices %s: malformed list", spec);
        memcpy(item, p, len);
        item[len] = '\0';
        char *end;
        if (strncmp(item, "cuda:", 5) != 0 || item[5] < '0' || item[5] > '9' ||
            (strtol(item + 5, &end, 10), *end != '\0'))
            return gf_err_set(err, GF_ERR_INVALID, "--devices: '%s' is not cuda:N (use auto, "
                              "cpu:N or a list such as cuda:0,cuda:1)", item);
        snprintf(gw->workers[n].device, sizeof gw->workers[n].device, "%s", item);
        n++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        return gf_err_set(err, GF_ERR_INVALID, "--devices: empty list");
    gw->n_workers = n;
    return GF_OK;
}

gf_status gw_workers_start(gf_gw *gw, gf_err *err)
{
    gf_status st = parse_devices(gw, gw->cfg.devices, err);
    if (st != GF_OK)
        return st;
    if (gw->cfg.replicate_auto) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        gw->cfg.no_replicate = !gw_replicas_add_compute(gw, cores);
        if (gw->cfg.no_replicate)
            GF_LOG_I("replication off (--replicate auto): %d cpu workers on %ld cores", gw->n_workers,
                     cores);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        w->gw = gw;
        w->id = i;
        w->fd = -1;
        char wid[16];
        snprintf(wid, sizeof wid, "%d", i);
        const char *l1[1] = {wid};
        gw_metric_add(gw->metrics, GW_M_WORKER_RESTARTS, l1, 0); /* the series exists from 0 */
        pthread_mutex_init(&w->wlock, NULL);
        pthread_mutex_init(&w->slock, NULL);
        pthread_cond_init(&w->scond, NULL);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        st = spawn(gw, &gw->workers[i], err);
        if (st != GF_OK)
            return st;
    }
    gw->supervisor_running = true;
    int rc = pthread_create(&gw->supervisor, NULL, supervisor_main, gw);
    if (rc != 0) {
        gw->supervisor_running = false;
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create(supervisor): %s", strerror(rc));
    }
    /* wait until every worker is up or has failed, at most 60 s */
    uint64_t deadline = gf_mono_us() + 60u * 1000000u;
    pthread_mutex_lock(&gw->lock);
    for (;;) {
        int up = 0, settled = 0;
        for (int i = 0; i < gw->n_workers; i++) {
            up += gw->workers[i].state == GW_W_UP;
            settled += gw->workers[i].state == GW_W_UP || gw->workers[i].state == GW_W_FAILED;
        }
        if (settled == gw->n_workers || gf_mono_us() > deadline) {
            pthread_mutex_unlock(&gw->lock);
            if (up == 0)
                return gf_err_set(err, GF_ERR_DEVICE,
                                  "no worker came up (%d tried; see the workers' messages "
                                  "above)", gw->n_workers);
            return GF_OK;
        }
        struct timespec ts;
        gf_deadline_after(CLOCK_REALTIME, 50u * 1000000u, &ts);
        pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
    }
}

void gw_workers_stop(gf_gw *gw)
{
    /* ask politely, then insist */
    for (int i = 0; i < gw->n_workers; i++)
        if (gw->workers[i].pid > 0 && !gw->workers[i].exited)
            gw_send_empty(&gw->workers[i], GF_IPC_SHUTDOWN, atomic_fetch_add(&gw->next_id, 1));
    static const struct {
        int sig;
        uint64_t wait_ms;
    } steps[] = {{0, 5000}, {SIGTERM, 2000}, {SIGKILL, 2000}};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        pthread_mutex_lock(&gw->lock);
        if (steps[s].sig != 0)
            for (int i = 0; i < gw->n_workers; i++)
                if (gw->workers[i].pid > 0 && !gw->workers[i].exited)
                    kill(gw->workers[i].pid, steps[s].sig);
        uint64_t deadline = gf_mono_us() + steps[s].wait_ms * 1000u;
        for (;;) {
            int alive = 0;
            for (int i = 0; i < gw->n_workers; i++)
                alive += gw->workers[i].pid > 0 && !gw->workers[i].exited;
            if (alive == 0 || gf_mono_us() > deadline)
                break;
            struct timespec ts;
            gf_deadline_after(CLOCK_REALTIME, 20u * 1000000u, &ts);
            pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
        }
        pthread_mutex_unlock(&gw->lock);
    }
    if (gw->supervisor_running) {
        pthread_mutex_lock(&gw->lock);
        gw->supervisor_running = false;
        pthread_cond_broadcast(&gw->cond);
        pthread_mutex_unlock(&gw->lock);
        pthread_join(gw->supervisor, NULL);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        if (w->pid > 0 && !w->exited)
            waitpid(w->pid, NULL, 0);
        join_threads(w);
        pthread_mutex_destroy(&w->wlock);
        pthread_mutex_destroy(&w->slock);
        pthread_cond_destroy(&w->scond);
    }
}
