/* gpufaas — the worker process: its command line, start-up (backend, cache,
 * signals), the run (the reader loop and the threads it starts), shutdown
 * and freeing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "core/units.h"
#include "worker/worker_impl.h"

/* ---- configuration ---------------------------------------------------------------- */

void gf_worker_config_init(gf_worker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = "cpu";
    cfg->host_memory = (uint64_t)2 << 30;
    cfg->fd = -1;
    cfg->policy = GF_EVICT_LRU;
    cfg->log_level = GF_LOG_DEFAULT;
    cfg->max_frame = GF_IPC_DEFAULT_MAX_FRAME;
    cfg->blas_threads = 1;
    cfg->by_deadline = true;
}

static gf_status parse_int(const char *flag, const char *s, long lo, long hi, long *out,
                           gf_err *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return gf_err_set(err, GF_ERR_INVALID, "%s: '%s' is not an integer in [%ld, %ld]", flag, s,
                          lo, hi);
    *out = v;
    return GF_OK;
}

gf_status gf_worker_parse_args(int argc, char **argv, gf_worker_config *cfg, gf_err *err)
{
    gf_worker_config_init(cfg);
    bool have_fd = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            return gf_err_set(err, GF_ERR_INVALID, "unexpected argument '%s'", a);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        size_t nl = eq != NULL ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            return gf_err_set(err, GF_ERR_INVALID, "unknown flag '%s'", a);
        memcpy(name, a, nl);
        name[nl] = '\0';
        if (strcmp(name, "--allow-native-functions") == 0) {
            if (eq != NULL)
                return gf_err_set(err, GF_ERR_INVALID, "%s takes no value", name);
            cfg->allow_native = true;
            continue;
        }
        if (eq != NULL) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return gf_err_set(err, GF_ERR_INVALID, "%s needs a value", name);
            val = argv[++i];
        }
        long v;
        gf_status st = GF_OK;
        if (strcmp(name, "--device") == 0) {
            cfg->device = val;
        } else if (strcmp(name, "--device-memory") == 0) {
            st = gf_size_parse(val, &cfg->device_memory, err);
        } else if (strcmp(name, "--host-memory") == 0) {
            st = gf_size_parse(val, &cfg->host_memory, err);
        } else if (strcmp(name, "--max-frame") == 0) {
            st = gf_size_parse(val, &cfg->max_frame, err);
            if (st == GF_OK && (cfg->max_frame < 4096 || cfg->max_frame > ((uint64_t)1 << 40)))
                st = gf_err_set(err, GF_ERR_INVALID, "between 4K and 1T");
        } else if (strcmp(name, "--copy-bandwidth") == 0) {
            st = gf_size_parse(val, &cfg->copy_bandwidth, err);
        } else if (strcmp(name, "--pin-limit") == 0) {
            st = gf_size_parse(val, &cfg->pin_limit, err);
        } else if (strcmp(name, "--page-size") == 0) {
            st = gf_size_parse(val, &cfg->page_size, err);
            if (st == GF_OK && (cfg->page_size < 4096 || cfg->page_size > ((uint64_t)1 << 30)))
                st = gf_err_set(err, GF_ERR_INVALID, "between 4K and 1G");
        } else if (strcmp(name, "--swap-order") == 0) {
            if (strcmp(val, "arrival") == 0 || strcmp(val, "deadline") == 0)
                cfg->swaps_in_order = strcmp(val, "arrival") == 0;
            else
                st = gf_err_set(err, GF_ERR_INVALID, "'%s' is not deadline or arrival", val);
        } else if (strcmp(name, "--schedule") == 0) {
            if (strcmp(val, "fifo") == 0 || strcmp(val, "ready-first") == 0 ||
                strcmp(val, "deadline") == 0) {
                cfg->fifo = strcmp(val, "fifo") == 0;
                cfg->by_deadline = strcmp(val, "deadline") == 0;
            } else {
                st = gf_err_set(err, GF_ERR_INVALID, "'%s' is not deadline, ready-first or fifo",
                                val);
            }
        } else if (strcmp(name, "--state-dir") == 0) {
            cfg->state_dir = val;
        } else if (strcmp(name, "--fd") == 0) {
            if ((st = parse_int(name, val, 0, INT_MAX, &v, err)) == GF_OK) {
                cfg->fd = (int)v;
                have_fd = true;
            }
        } else if (strcmp(name, "--worker-id") == 0) {
            if ((st = parse_int(name, val, 0, 1000000, &v, err)) == GF_OK)
                cfg->worker_id = (int)v;
        } else if (strcmp(name, "--blas-threads") == 0) {
            if ((st = parse_int(name, val, 1, 256, &v, err)) == GF_OK)
                cfg->blas_threads = (int)v;
        } else if (strcmp(name, "--policy") == 0) {
            st = gf_evict_policy_parse(val, &cfg->policy, err);
        } else if (strcmp(name, "--log-level") == 0) {
            gf_log_level lv;
            if (gf_log_level_parse(val, &lv) != 0)
                st = gf_err_set(err, GF_ERR_INVALID,
                                "'%s' is not error, warn, info, debug "
                                "or trace",
                                val);
            else
                cfg->log_level = lv;
        } else {
            return gf_err_set(err, GF_ERR_INVALID, "unknown flag '%s'", name);
        }
        if (st != GF_OK)
            return gf_err_prefix(err, "%s", name);
    }
    if (!have_fd)
        return gf_err_set(err, GF_ERR_INVALID, "--fd is required (the socket to the gateway)");
    if (cfg->state_dir == NULL || cfg->state_dir[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "--state-dir is required");
    return GF_OK;
}

/* ---- lifetime ---------------------------------------------------------------------- */

bool gf_worker_start_failure_is_fatal(gf_status st)
{
    switch (st) {
    case GF_ERR_INVALID:
    case GF_ERR_NOT_FOUND:
    case GF_ERR_UNSUPPORTED:
    case GF_ERR_TOO_LARGE:
    case GF_ERR_PERMISSION:
    case GF_ERR_OVERFLOW:
    case GF_ERR_NO_DEVICE_MEM:
        return true;
    default:
        return false;
    }
}

/* SIGTERM and SIGINT mean "finish the work in flight, then exit", as
 * SHUTDOWN does. Threads started before main (OpenBLAS's pool) cannot have
 * the signals blocked, so a handler catches them on whichever thread and
 * wakes the reader through an eventfd (write(2) is async-signal-safe). */
static volatile sig_atomic_t gf_worker_signo;

static int gf_worker_sig_fd = -1;

static void on_signal(int signo)
{
    int saved = errno;
    gf_worker_signo = signo;
    uint64_t one = 1;
    ssize_t n = write(gf_worker_sig_fd, &one, sizeof one);
    (void)n;
    errno = saved;
}

static gf_status setup_signals(gf_worker *w, gf_err *err)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    if ((w->sig_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return gf_err_set(err, GF_ERR_IO, "eventfd: %s", strerror(errno));
    gf_worker_sig_fd = w->sig_fd;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, &w->old_term) != 0 || sigaction(SIGINT, &sa, &w->old_int) != 0)
        return gf_err_set(err, GF_ERR_IO, "sigaction: %s", strerror(errno));
    w->handlers_set = true;
    return GF_OK;
}

gf_status gf_worker_new(const gf_worker_config *cfg, gf_worker **out, gf_err *err)
{
    *out = NULL;
    gf_status st;
    struct stat sb;
    if (cfg->fd < 0 || fstat(cfg->fd, &sb) != 0)
        return gf_err_set(err, GF_ERR_INVALID, "--fd %d is not an open descriptor", cfg->fd);
    if (!S_ISSOCK(sb.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "--fd %d is not a socket", cfg->fd);
    if (stat(cfg->state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "--state-dir %s is not a directory", cfg->state_dir);
    gf_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    w->cfg = *cfg;
    w->fd = cfg->fd;
    w->sig_fd = w->wake_fd = -1;
    w->t_start_us = gf_mono_us();
    if (w->cfg.max_frame == 0)
        w->cfg.max_frame = GF_IPC_DEFAULT_MAX_FRAME;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->wlock, NULL);
    pthread_mutex_init(&w->ev_lock, NULL);
    wk_shm_init(&w->shm);
    pthread_cond_init(&w->exec_cond, NULL);
    pthread_cond_init(&w->admin_cond, NULL);
    pthread_cond_init(&w->progress_cond, NULL);
    pthread_cond_init(&w->ev_cond, NULL);
    w->device = wk_dup_str(cfg->device != NULL ? cfg->device : "cpu");
    w->state_dir = wk_dup_str(cfg->state_dir);
    size_t dl = strlen(cfg->state_dir) + sizeof "/" GF_DERIVED_DIR;
    w->derived_dir = malloc(dl);
    w->evq = calloc(GF_WORKER_EVQ_MAX, sizeof *w->evq);
    if (w->device == NULL || w->state_dir == NULL || w->derived_dir == NULL || w->evq == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    w->cfg.device = w->device;
    w->cfg.state_dir = w->state_dir;
    snprintf(w->derived_dir, dl, "%s/" GF_DERIVED_DIR, cfg->state_dir);
    if (mkdir(w->derived_dir, 0700) != 0 && errno != EEXIST) {
        st = gf_err_set(err, GF_ERR_INVALID, "mkdir(%s): %s", w->derived_dir, strerror(errno));
        goto fail;
    }
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(w->fd, F_SETFD, FD_CLOEXEC) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "fcntl(fd %d): %s", w->fd, strerror(errno));
        goto fail;
    }
    if ((st = setup_signals(w, err)) != GF_OK)
        goto fail;
    if ((w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        st = gf_err_set(err, GF_ERR_IO, "eventfd: %s", strerror(errno));
        goto fail;
    }
    gf_backend_config bc = {
        .device = w->device,
        .device_budget = (size_t)cfg->device_memory,
        .blas_threads = cfg->blas_threads,
        .cpu_copy_bandwidth = cfg->copy_bandwidth,
        .page_size = (size_t)cfg->page_size,
    };
    if ((st = gf_backend_open(&bc, &w->be, err)) != GF_OK) {
        gf_err_prefix(err, "device '%s'", w->device);
        goto fail;
    }
    gf_cache_config cc = {
        .host_budget = cfg->host_memory,
        .policy = cfg->policy,
        .pin_limit = cfg->pin_limit,
        .loads_in_order = cfg->swaps_in_order,
        .on_event = wk_on_cache_event,
        .event_arg = w,
    };
    wk_pinned_init(&w->pinned, w->be, GF_WORKER_PINNED_LIMIT);
    w->pinned_init = true;
    if ((st = gf_cache_new(w->be, &cc, &w->cache, err)) != GF_OK) {
        gf_err_prefix(err, "parameter cache");
        goto fail;
    }
    gf_device_info info;
    gf_backend_info(w->be, &info);
    GF_LOG_I("ready: %s, device budget %llu bytes, host tier %llu bytes, policy %s", info.name,
             (unsigned long long)info.budget, (unsigned long long)cfg->host_memory,
             gf_evict_policy_name(cfg->policy));
    *out = w;
    return GF_OK;
fail:
    gf_worker_free(w);
    return st;
}

static bool start_thread(pthread_t *t, void *(*fn)(void *), gf_worker *w, bool *started)
{
    *started = pthread_create(t, NULL, fn, w) == 0;
    if (!*started)
        GF_LOG_E("pthread_create failed");
    return *started;
}

int gf_worker_run(gf_worker *w)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    b.limit = (size_t)(GF_IPC_HEADER_SIZE + w->cfg.max_frame); /* RESULTs of quick requests */
    gf_ipc_reader rd;
    int code = GF_WORKER_EXIT_FAILURE;
    if (gf_ipc_reader_init(&rd, w->fd, w->cfg.max_frame, &err) != GF_OK) {
        GF_LOG_E("%s", gf_err_msg(&err));
        gf_ipc_reader_deinit(&rd);
        return GF_WORKER_EXIT_FAILURE;
    }
    rd.pa = (gf_ipc_payload_alloc){wk_pinned_alloc, wk_pinned_free, &w->pinned};
    if (!start_thread(&w->ev_thread, wk_events_main, w, &w->ev_started) ||
        !start_thread(&w->exec_thread, wk_exec_main, w, &w->exec_started) ||
        !start_thread(&w->admin_thread, wk_admin_main, w, &w->admin_started)) {
        wk_begin_stop(w, GF_WORKER_EXIT_FAILURE);
        goto out;
    }
    wk_send_ready(w, &b, 0);

    bool reading = true;
    for (;;) {
        struct pollfd p[3] = {
            {reading ? w->fd : -1, POLLIN, 0},
            {w->sig_fd, POLLIN, 0},
            {w->wake_fd, POLLIN, 0},
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            GF_LOG_E("poll: %s", strerror(errno));
            wk_begin_stop(w, GF_WORKER_EXIT_FAILURE);
            break;
        }
        if (p[1].revents != 0) {
            uint64_t v;
            if (read(w->sig_fd, &v, sizeof v) == (ssize_t)sizeof v) {
                GF_LOG_I("signal %d: finishing the work in flight", (int)gf_worker_signo);
                wk_begin_drain(w);
            }
        }
        if (reading && p[0].revents != 0) {
            int rc = wk_read_frames(w, &rd, &b);
            if (rc != RD_CONTINUE) {
                reading = false;
                /* end of stream after SHUTDOWN: the gateway may have closed
                 * only its writing half and still wants the results (if it
                 * is gone, the next write fails and stops us) */
                pthread_mutex_lock(&w->lock);
                bool drain_on = rc == GF_WORKER_EXIT_OK && w->draining;
                pthread_mutex_unlock(&w->lock);
                if (!drain_on)
                    wk_begin_stop(w, rc);
            }
        }
        if (p[2].revents != 0) {
            uint64_t v;
            ssize_t n = read(w->wake_fd, &v, sizeof v);
            (void)n;
        }
        pthread_mutex_lock(&w->lock);
        bool done = w->exec_done && w->admin_done;
        pthread_mutex_unlock(&w->lock);
        if (done)
            break;
    }
out:
    if (w->exec_started)
        pthread_join(w->exec_thread, NULL);
    if (w->admin_started)
        pthread_join(w->admin_thread, NULL);
    w->exec_started = w->admin_started = false;
    pthread_mutex_lock(&w->lock);
    code = w->exit_code;
    pthread_mutex_unlock(&w->lock);
    gf_ipc_reader_deinit(&rd);
    gf_buf_deinit(&b);
    GF_LOG_I("exiting with code %d", code);
    return code;
}

void gf_worker_free(gf_worker *w)
{
    if (w == NULL)
        return;
    if (w->exec_started || w->admin_started) {
        wk_begin_stop(w, GF_WORKER_EXIT_FAILURE);
        if (w->exec_started)
            pthread_join(w->exec_thread, NULL);
        if (w->admin_started)
            pthread_join(w->admin_thread, NULL);
    }
    /* flush the events queued so far, then stop forwarding */
    pthread_mutex_lock(&w->ev_lock);
    w->ev_stop = true;
    pthread_cond_broadcast(&w->ev_cond);
    pthread_mutex_unlock(&w->ev_lock);
    if (w->ev_started)
        pthread_join(w->ev_thread, NULL);
    if (w->cache != NULL)
        gf_cache_drain(w->cache);
    for (size_t i = 0; i < GF_WORKER_BUCKETS; i++) {
        while (w->buckets[i] != NULL) {
            wmodel *m = w->buckets[i];
            wk_release_model_state(w, m);
            wk_table_remove(w, m);
        }
    }
    gf_cache_free(w->cache);
    if (w->pinned_init)
        wk_pinned_deinit(&w->pinned);
    gf_backend_free(w->be);
    if (w->evq != NULL) {
        for (size_t i = 0; i < w->ev_count; i++) {
            wevent *e = &w->evq[(w->ev_head + i) % GF_WORKER_EVQ_MAX];
            free(e->key);
            free(e->msg);
        }
        free(w->evq);
    }
    if (w->handlers_set) {
        sigaction(SIGTERM, &w->old_term, NULL);
        sigaction(SIGINT, &w->old_int, NULL);
    }
    if (w->sig_fd >= 0) {
        gf_worker_sig_fd = -1;
        close(w->sig_fd);
    }
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->fd >= 0)
        close(w->fd);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->wlock);
    pthread_mutex_destroy(&w->ev_lock);
    wk_shm_deinit(&w->shm);
    pthread_cond_destroy(&w->exec_cond);
    pthread_cond_destroy(&w->admin_cond);
    pthread_cond_destroy(&w->progress_cond);
    pthread_cond_destroy(&w->ev_cond);
    free(w->device);
    free(w->state_dir);
    free(w->derived_dir);
    free(w);
}
