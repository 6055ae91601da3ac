/* gpufaas tests — a real `gpufaas serve` process and an HTTP client for it
 * (see httpharness.h). */
#include "httpharness.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the server process ------------------------------------------------------------ */

void gf_hh_server_init(gf_hh_server *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    snprintf(s->state, sizeof s->state, "%s/var", dir);
    snprintf(s->log, sizeof s->log, "%s/serve.log", dir);
}

void gf_hh_server_dump_log(const gf_hh_server *s, size_t tail)
{
    FILE *f = fopen(s->log, "rb");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    if (n > (long)tail)
        fseek(f, n - (long)tail, SEEK_SET);
    else
        rewind(f);
    fprintf(stderr, "---- %s (last %zu bytes) ----\n", s->log, tail);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, k, stderr);
    fprintf(stderr, "\n----\n");
    fclose(f);
}

/* Kill and reap a child that did not come up. */
static int start_failed(gf_hh_server *s, int fd, char *msg, size_t cap, const char *why)
{
    close(fd);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    snprintf(msg, cap, "%s", why);
    return -1;
}

int gf_hh_server_start(gf_hh_server *s, const char *exe, const char *const *args, int timeout_s,
                       char *msg, size_t cap)
{
    const char *argv[64];
    int a = 0;
    argv[a++] = exe;
    argv[a++] = "serve";
    argv[a++] = "--listen";
    argv[a++] = "127.0.0.1:0";
    argv[a++] = "--state-dir";
    argv[a++] = s->state;
    for (; args != NULL && *args != NULL; args++) {
        if (a >= 63) {
            snprintf(msg, cap, "too many arguments");
            return -1;
        }
        argv[a++] = *args;
    }
    argv[a] = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(msg, cap, "pipe2 failed");
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        snprintf(msg, cap, "fork failed");
        return -1;
    }
    if (pid == 0) {
        /* a test that fails ends without its teardown: take the server down too */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        dup2(p[1], STDOUT_FILENO);
        if (logfd >= 0)
            dup2(logfd, STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    s->pid = pid;
    char line[200];
    size_t n = 0;
    time_t deadline = time(NULL) + timeout_s;
    while (n == 0 || line[n - 1] != '\n') {
        struct pollfd pf = {p[0], POLLIN, 0};
        int left = (int)(deadline - time(NULL));
        if (left <= 0 || poll(&pf, 1, left * 1000) <= 0)
            return start_failed(s, p[0], msg, cap, "gpufaas serve did not say where it listens");
        if (read(p[0], line + n, 1) != 1)
            return start_failed(s, p[0], msg, cap, "gpufaas serve exited before listening");
        if (++n == sizeof line - 1)
            return start_failed(s, p[0], msg, cap, "gpufaas serve printed an overlong line");
    }
    line[n - 1] = '\0';
    close(p[0]);
    const char *pre = "gpufaas: serving on ";
    if (strncmp(line, pre, strlen(pre)) != 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
        snprintf(msg, cap, "unexpected first line: %s", line);
        return -1;
    }
    snprintf(s->url, sizeof s->url, "%s", line + strlen(pre));
    return 0;
}

int gf_hh_server_stop(gf_hh_server *s, int timeout_s)
{
    if (s->pid <= 0)
        return 0;
    kill(s->pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < timeout_s * 20; i++) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    return -1;
}

/* ---- the client ---------------------------------------------------------------------- */

static size_t on_body(char *p, size_t s, size_t n, void *u)
{
    gf_hh_resp *r = u;
    return gf_buf_append(&r->body, p, s * n) == GF_OK ? s * n : 0;
}

static void header_value(const char *line, size_t n, const char *name, char *dst, size_t cap)
{
    size_t k = strlen(name);
    if (n <= k + 1 || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    const char *v = line + k + 1;
    size_t vl = n - k - 1;
    while (vl > 0 && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
        vl--;
    snprintf(dst, cap, "%.*s", (int)vl, v);
}

static size_t on_header(char *p, size_t s, size_t n, void *u)
{
    gf_hh_resp *r = u;
    size_t len = s * n;
    header_value(p, len, "Inference-Header-Content-Length", r->ihcl, sizeof r->ihcl);
    header_value(p, len, "Content-Type", r->ctype, sizeof r->ctype);
    header_value(p, len, "Location", r->location, sizeof r->location);
    header_value(p, len, "Retry-After", r->retry_after, sizeof r->retry_after);
    header_value(p, len, "Connection", r->conn, sizeof r->conn);
    return len;
}

static __thread CURL *tl_curl; /* one per thread: keep-alive */

static void resp_begin(CURL *c, gf_hh_resp *r)
{
    memset(r, 0, sizeof *r);
    gf_buf_init(&r->body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
}

static long resp_end(CURL *c, gf_hh_resp *r)
{
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    return r->rc == CURLE_OK ? r->status : -(long)r->rc;
}

long gf_hh_http(const char *base, const char *method, const char *path, const char *const *headers,
                const void *body, size_t len, bool chunked, gf_hh_resp *r)
{
    if (tl_curl == NULL)
        tl_curl = curl_easy_init();
    CURL *c = tl_curl;
    curl_easy_reset(c);
    resp_begin(c, r);
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    struct curl_slist *hl = NULL;
    for (; headers != NULL && *headers != NULL; headers++)
        hl = curl_slist_append(hl, *headers);
    if (body != NULL) {
        if (chunked)
            hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        hl = curl_slist_append(hl, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    r->rc = curl_easy_perform(c);
    long st = resp_end(c, r);
    curl_slist_free_all(hl);
    return st;
}

long gf_hh_deploy(const char *base, const char *manifest_path, const char *weights_path,
                  const char *token, gf_hh_resp *r)
{
    return gf_hh_deploy_query(base, NULL, manifest_path, weights_path, token, r);
}

long gf_hh_deploy_query(const char *base, const char *query, const char *manifest_path,
                        const char *weights_path, const char *token, gf_hh_resp *r)
{
    CURL *c = curl_easy_init();
    resp_begin(c, r);
    curl_mime *mime = curl_mime_init(c);
    curl_mimepart *p = curl_mime_addpart(mime);
    curl_mime_name(p, "manifest");
    curl_mime_filedata(p, manifest_path);
    if (weights_path != NULL) {
        p = curl_mime_addpart(mime);
        curl_mime_name(p, "weights");
        curl_mime_filedata(p, weights_path);
    }
    char url[512], auth[300];
    snprintf(url, sizeof url, "%s/v1/functions%s%s", base, query != NULL ? "?" : "",
             query != NULL ? query : "");
    struct curl_slist *hl = NULL;
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hl = curl_slist_append(hl, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    r->rc = curl_easy_perform(c);
    long st = resp_end(c, r);
    curl_slist_free_all(hl);
    curl_mime_free(mime);
    curl_easy_cleanup(c);
    return st;
}

void gf_hh_resp_free(gf_hh_resp *r)
{
    gf_buf_deinit(&r->body);
}

void gf_hh_thread_end(void)
{
    if (tl_curl != NULL)
        curl_easy_cleanup(tl_curl);
    tl_curl = NULL;
}

bool gf_hh_is_json_error(const gf_hh_resp *r, const char *want, char *why, size_t cap)
{
    const char *body = r->body.data != NULL ? r->body.data : "";
    if (strcmp(r->ctype, "application/json") != 0) {
        snprintf(why, cap, "Content-Type '%s', not application/json: %.300s", r->ctype, body);
        return false;
    }
    json_t *j = json_loadb(body, r->body.len, 0, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    bool ok = msg != NULL && strstr(msg, want) != NULL;
    if (!ok)
        snprintf(why, cap, "%s: %.300s",
                 j == NULL     ? "not JSON"
                 : msg == NULL ? "no \"error\" member"
                               : "the error does not say what it should",
                 body);
    if (!ok && msg != NULL)
        snprintf(why + strlen(why), cap - strlen(why), " (wanted '%s')", want);
    json_decref(j);
    return ok;
}
