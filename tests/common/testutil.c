/* gpufaas tests — small helpers shared by the Check suites. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *gf_test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/gftest.XXXXXX", base);
    ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp(%s): %s", p, strerror(errno));
    return p;
}

static int gf_test_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void gf_test_rmtree(char *path)
{
    if (path == NULL)
        return;
    nftw(path, gf_test_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

char *gf_test_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *gf_test_fixture(const char *name)
{
    const char *src = getenv("GF_SOURCE_ROOT");
    ck_assert_msg(src != NULL, "GF_SOURCE_ROOT must be set (meson)");
    size_t n = strlen(src) + strlen(name) + sizeof "/tests/fixtures/";
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/tests/fixtures/%s", src, name);
    return p;
}

void gf_test_write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(fd >= 0, "open(%s): %s", path, strerror(errno));
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        ck_assert_msg(w > 0, "write(%s): %s", path, strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

char *gf_test_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0)
            break;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL)
        return NULL;
    buf[len] = '\0';
    if (n != NULL)
        *n = len;
    return buf;
}

void gf_test_rng_seed(gf_test_rng *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9e3779b97f4a7c15ull;
}

uint64_t gf_test_rng_u64(gf_test_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t gf_test_rng_below(gf_test_rng *r, uint64_t n)
{
    return n == 0 ? 0 : gf_test_rng_u64(r) % n;
}

float gf_test_rng_float(gf_test_rng *r, float lo, float hi)
{
    double u = (double)(gf_test_rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

int gf_test_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

static void gf_test_append(char **buf, size_t *len, const char *data, size_t n)
{
    char *nb = realloc(*buf, *len + n + 1);
    ck_assert_ptr_nonnull(nb);
    memcpy(nb + *len, data, n);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
}

int gf_test_run_cmd(char *const argv[], char **out, char **err, int timeout_s)
{
    int po[2], pe[2];
    ck_assert_int_eq(pipe2(po, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(pe, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        dup2(po[1], STDOUT_FILENO);
        dup2(pe[1], STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    char *bufs[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    gf_test_append(&bufs[0], &lens[0], "", 0);
    gf_test_append(&bufs[1], &lens[1], "", 0);
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    time_t deadline = time(NULL) + timeout_s;
    while (open_fds > 0) {
        int left = (int)(deadline - time(NULL));
        if (left <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            ck_abort_msg("%s did not finish within %d s", argv[0], timeout_s);
        }
        int r = poll(fds, 2, left * 1000);
        if (r < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || fds[i].revents == 0)
                continue;
            char chunk[4096];
            ssize_t n = read(fds[i].fd, chunk, sizeof chunk);
            if (n > 0) {
                gf_test_append(&bufs[i], &lens[i], chunk, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (out != NULL)
        *out = bufs[0];
    else
        free(bufs[0]);
    if (err != NULL)
        *err = bufs[1];
    else
        free(bufs[1]);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

const char *gf_test_prog(const char *var)
{
    const char *p = getenv(var);
    ck_assert_msg(p != NULL && p[0] != '\0', "environment variable %s is not set", var);
    return p;
}

void gf_test_gate_hook(void *gate, size_t nbytes)
{
    (void)nbytes;
    gf_test_gate *g = gate;
    pthread_mutex_lock(&g->lock);
    g->started++;
    pthread_cond_broadcast(&g->cond);
    while (g->started > g->allowed)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void gf_test_gate_allow(gf_test_gate *g, int n)
{
    pthread_mutex_lock(&g->lock);
    g->allowed += n;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

void gf_test_gate_wait_started(gf_test_gate *g, int n)
{
    pthread_mutex_lock(&g->lock);
    while (g->started < n)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

int gf_test_ask_in_child(int (*fn)(void))
{
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        int n = fn();
        _exit(n < 0 ? 0 : n > 100 ? 100 : n);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 0;
    return WEXITSTATUS(st);
}
