/* gpufaas tests — driving a real gpufaas-worker. See wharness.h. */
#include "wharness.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/safetensors.h"

static int64_t wh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

gf_status gf_wh_spawn(gf_wh *w, const char *exe, const char *state_dir, const char *const *extra,
                      const char *stderr_path, bool wait_ready, int timeout_ms, gf_err *err)
{
    memset(w, 0, sizeof *w);
    w->pid = -1;
    w->fd = -1;
    w->status = -1;
    w->next_id = 1;
    gf_buf_init(&w->out);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return gf_err_set(err, GF_ERR_IO, "socketpair: %s", strerror(errno));
    const char *argv[64];
    int n = 0;
    argv[n++] = exe;
    argv[n++] = "--fd";
    argv[n++] = "3";
    argv[n++] = "--state-dir";
    argv[n++] = state_dir;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return gf_err_set(err, GF_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (sv[1] == 3)
            fcntl(3, F_SETFD, 0);
        else if (dup2(sv[1], 3) != 3)
            _exit(126);
        if (stderr_path != NULL) {
            int e = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (e >= 0)
                dup2(e, STDERR_FILENO);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(sv[1]);
    w->pid = pid;
    w->fd = sv[0];
    gf_status st = gf_ipc_reader_init(&w->rd, w->fd, 0, err);
    if (st != GF_OK || !wait_ready)
        return st;
    gf_ipc_frame f;
    if ((st = gf_wh_recv(w, &f, timeout_ms, err)) != GF_OK) {
        if (st == GF_ERR_CLOSED)
            gf_wh_wait(w, timeout_ms, true);
        return st;
    }
    if (f.h.type != GF_IPC_READY) {
        st = gf_err_set(err, GF_ERR_PROTOCOL, "expected READY, got %s", gf_ipc_type_name(f.h.type));
    } else if ((st = gf_ipc_decode_ready(&f, &w->ready, err)) == GF_OK) {
        snprintf(w->ready_name, sizeof w->ready_name, "%s", w->ready.device_name);
        w->ready.device_name = w->ready_name;
    }
    gf_ipc_frame_deinit(&f);
    return st;
}

uint64_t gf_wh_id(gf_wh *w)
{
    return w->next_id++;
}

gf_status gf_wh_send_raw(gf_wh *w, const void *p, size_t n, gf_err *err)
{
    return gf_ipc_write_all(w->fd, p, n, 10000, err);
}

gf_status gf_wh_send(gf_wh *w, gf_err *err)
{
    gf_status st = gf_wh_send_raw(w, w->out.data, w->out.len, err);
    gf_buf_reset(&w->out);
    return st;
}

gf_status gf_wh_recv(gf_wh *w, gf_ipc_frame *f, int timeout_ms, gf_err *err)
{
    int64_t deadline = wh_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - wh_now_ms();
        gf_status st = gf_ipc_read_frame(&w->rd, f, left > 0 ? (int)left : 0, err);
        if (st != GF_OK)
            return st;
        if (f->h.type != GF_IPC_EVENT)
            return GF_OK;
        gf_ipc_event ev;
        if ((st = gf_ipc_decode_event(f, &ev, err)) != GF_OK) {
            gf_ipc_frame_deinit(f);
            return st;
        }
        if (ev.seq != w->ev_last_seq + 1)
            w->ev_seq_gap = true;
        w->ev_last_seq = ev.seq;
        if (ev.kind == GF_IPC_EV_LOADED)
            w->ev_loaded++;
        else if (ev.kind == GF_IPC_EV_EVICTED)
            w->ev_evicted++;
        else if (ev.kind == GF_IPC_EV_FAILED)
            w->ev_failed++;
        gf_ipc_frame_deinit(f);
    }
}

uint32_t gf_wh_call(gf_wh *w, uint64_t id, int timeout_ms, gf_ipc_frame *f, char *msg,
                    size_t cap)
{
    gf_err e;
    gf_err_clear(&e);
    memset(f, 0, sizeof *f);
    if (gf_wh_send(w, &e) != GF_OK || gf_wh_recv(w, f, timeout_ms, &e) != GF_OK) {
        if (msg != NULL)
            snprintf(msg, cap, "%s", gf_err_msg(&e));
        return (uint32_t)-1;
    }
    if (f->h.request_id != id) {
        if (msg != NULL)
            snprintf(msg, cap, "%s answers request %llu, not %llu", gf_ipc_type_name(f->h.type),
                     (unsigned long long)f->h.request_id, (unsigned long long)id);
        gf_ipc_frame_deinit(f);
        return (uint32_t)-1;
    }
    if (f->h.type != GF_IPC_ERROR)
        return 0;
    gf_ipc_error er;
    uint32_t code = (uint32_t)-1;
    if (gf_ipc_decode_error(f, &er, &e) == GF_OK) {
        code = er.code;
        if (msg != NULL)
            snprintf(msg, cap, "%s", er.message);
    } else if (msg != NULL) {
        snprintf(msg, cap, "%s", gf_err_msg(&e));
    }
    gf_ipc_frame_deinit(f);
    return code;
}

int gf_wh_wait(gf_wh *w, int timeout_ms, bool close_first)
{
    if (close_first && w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->pid < 0)
        return w->status;
    int64_t deadline = wh_now_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid)
            break;
        if (r < 0 && errno != EINTR)
            return -1;
        if (wh_now_ms() >= deadline) {
            kill(w->pid, SIGKILL);
            waitpid(w->pid, &status, 0);
            w->pid = -1;
            w->status = -1;
            return -1;
        }
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    w->pid = -1;
    if (WIFEXITED(status))
        w->status = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        w->status = 128 + WTERMSIG(status);
    return w->status;
}

void gf_wh_free(gf_wh *w)
{
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        gf_wh_wait(w, 10000, true);
    }
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    gf_ipc_reader_deinit(&w->rd);
    gf_buf_deinit(&w->out);
}
