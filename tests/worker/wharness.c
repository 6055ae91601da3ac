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

/* ---- mlp ---- */

static uint64_t wh_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static float wh_uniform(uint64_t *s, float lo, float hi)
{
    double u = (double)(wh_rng(s) >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

void gf_wh_mlp_make(gf_wh_mlp *m, uint64_t seed, int layers, const int64_t *dims, bool softmax,
                    int max_batch)
{
    memset(m, 0, sizeof *m);
    uint64_t s = seed ? seed : 1;
    m->layers = layers;
    m->softmax = softmax;
    m->max_batch = max_batch;
    for (int i = 0; i <= layers; i++)
        m->dims[i] = dims[i];
    for (int i = 0; i < layers; i++) {
        size_t nw = (size_t)(dims[i + 1] * dims[i]);
        float bound = 1.0f / sqrtf((float)dims[i]);
        m->w[i] = malloc(nw * sizeof(float));
        m->b[i] = malloc((size_t)dims[i + 1] * sizeof(float));
        if (m->w[i] == NULL || m->b[i] == NULL)
            abort();
        for (size_t k = 0; k < nw; k++)
            m->w[i][k] = wh_uniform(&s, -bound, bound);
        for (int64_t k = 0; k < dims[i + 1]; k++)
            m->b[i][k] = wh_uniform(&s, -bound, bound);
    }
}

void gf_wh_mlp_free(gf_wh_mlp *m)
{
    for (int i = 0; i < m->layers; i++) {
        free(m->w[i]);
        free(m->b[i]);
    }
    memset(m, 0, sizeof *m);
}

gf_status gf_wh_mlp_write(const gf_wh_mlp *m, const char *path, gf_err *err)
{
    gf_st_wtensor t[2 * GF_WH_MAX_LAYERS];
    char names[2 * GF_WH_MAX_LAYERS][32];
    int64_t shapes[2 * GF_WH_MAX_LAYERS][2];
    for (int i = 0; i < m->layers; i++) {
        /* nn.Sequential(Linear, ReLU, Linear, ...): Linear modules at even indices */
        snprintf(names[2 * i], sizeof names[0], "%d.weight", 2 * i);
        snprintf(names[2 * i + 1], sizeof names[0], "%d.bias", 2 * i);
        shapes[2 * i][0] = m->dims[i + 1];
        shapes[2 * i][1] = m->dims[i];
        shapes[2 * i + 1][0] = m->dims[i + 1];
        t[2 * i] = (gf_st_wtensor){names[2 * i], GF_DT_F32, 2, shapes[2 * i], m->w[i]};
        t[2 * i + 1] = (gf_st_wtensor){names[2 * i + 1], GF_DT_F32, 1, shapes[2 * i + 1], m->b[i]};
    }
    return gf_st_write(path, t, (size_t)(2 * m->layers), NULL, 0, err);
}

char *gf_wh_mlp_manifest(const gf_wh_mlp *m, const char *name)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_buf_printf(&b,
                  "{\"name\":\"%s\",\"kind\":\"mlp\",\"version\":1,"
                  "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,%lld]}],"
                  "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,%lld]}],"
                  "\"max_batch_size\":%d,\"config\":{\"activations\":[",
                  name, (long long)m->dims[0], (long long)m->dims[m->layers], m->max_batch);
    for (int i = 0; i < m->layers; i++)
        gf_buf_printf(&b, "%s\"%s\"", i ? "," : "", i + 1 < m->layers ? "relu" : "identity");
    gf_buf_printf(&b, "],\"softmax\":%s}}", m->softmax ? "true" : "false");
    return gf_buf_steal(&b, NULL);
}

void gf_wh_mlp_ref(const gf_wh_mlp *m, const float *x, int64_t batch, float *y)
{
    int64_t width = 0;
    for (int i = 0; i <= m->layers; i++)
        if (m->dims[i] > width)
            width = m->dims[i];
    double *a = malloc((size_t)width * sizeof(double));
    double *o = malloc((size_t)width * sizeof(double));
    if (a == NULL || o == NULL)
        abort();
    for (int64_t r = 0; r < batch; r++) {
        for (int64_t k = 0; k < m->dims[0]; k++)
            a[k] = x[r * m->dims[0] + k];
        for (int l = 0; l < m->layers; l++) {
            int64_t in = m->dims[l], out = m->dims[l + 1];
            for (int64_t j = 0; j < out; j++) {
                double s = m->b[l][j];
                for (int64_t k = 0; k < in; k++)
                    s += (double)m->w[l][j * in + k] * a[k];
                o[j] = (l + 1 < m->layers && s < 0) ? 0 : s;
            }
            memcpy(a, o, (size_t)out * sizeof(double));
        }
        int64_t out = m->dims[m->layers];
        if (m->softmax) {
            double mx = a[0], sum = 0;
            for (int64_t j = 1; j < out; j++)
                mx = a[j] > mx ? a[j] : mx;
            for (int64_t j = 0; j < out; j++)
                sum += exp(a[j] - mx);
            for (int64_t j = 0; j < out; j++)
                a[j] = exp(a[j] - mx) / sum;
        }
        for (int64_t j = 0; j < out; j++)
            y[r * out + j] = (float)a[j];
    }
    free(a);
    free(o);
}

double gf_wh_max_rel_err(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return NAN;
        double e = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (e > worst)
            worst = e;
    }
    return worst;
}
