/* gpufaas — the shared store: layout, objects and the per-function log
 * (shared.h). The fold of a log into versions is in shared_fold.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/path.h"
#include "functions/manifest.h"
#include "gateway/core/shared.h"

struct gf_shared {
    char *dir;
    char *format;       /* DIR/FORMAT: readable while the store is */
    char *objects;      /* DIR/objects/sha256 */
    char *log;          /* DIR/log */
    char *tmp;          /* DIR/tmp */
    char node[64];
    atomic_uint_fast64_t counter; /* for unique staging names */
    uint64_t nonce;     /* random, per handle: two processes on one host never collide */
};

#define COPY_CHUNK (1u << 20)

/* ---- small file-system helpers ------------------------------------------------------ */

static gf_status io_err(gf_err *err, const char *what, const char *path)
{
    int e = errno;
    return gf_err_set(err, e == ENOENT ? GF_ERR_NOT_FOUND : GF_ERR_IO, "shared store: %s %s: %s",
                      what, path, strerror(e));
}

/* Whether the store itself can be read now (a missing log or object then
 * means absent, not unreachable): GF_ERR_IO when it cannot. */
static gf_status reachable(const gf_shared *s, gf_err *err)
{
    if (access(s->format, R_OK) == 0)
        return GF_OK;
    return gf_err_set(err, GF_ERR_IO, "shared store %s cannot be read: %s", s->dir,
                      strerror(errno));
}

static gf_status mkdir_one(const char *path, gf_err *err)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return io_err(err, "mkdir", path);
    return GF_OK;
}

/* fsync a directory, so that a name just linked into it is durable. */
static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    return strndup(path, (size_t)(slash - path));
}

/* A name in tmp/ no other writer uses: node, pid, this handle's nonce, a counter. */
static char *stage_path(gf_shared *s, const char *what)
{
    char name[160];
    uint64_t k = atomic_fetch_add(&s->counter, 1);
    snprintf(name, sizeof name, "%s.%ld.%016" PRIx64 ".%" PRIu64 ".%s", s->node, (long)getpid(),
             s->nonce, k, what);
    return gf_path_join(s->tmp, name);
}

/* Write all of n bytes to fd. */
static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- open ---------------------------------------------------------------------------- */

static gf_status check_format(const char *path, gf_err *err)
{
    char buf[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return io_err(err, "open", path);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return io_err(err, "read", path);
    buf[n] = '\0';
    if (strcmp(buf, GF_SHARED_FORMAT) != 0)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "shared store: %s says \"%.40s\", expected "
                          "\"%.*s\" (written by another version of gpufaas?)", path, buf,
                          (int)strlen(GF_SHARED_FORMAT) - 1, GF_SHARED_FORMAT);
    return GF_OK;
}

gf_status gf_shared_open(const char *dir, const char *node, gf_shared **out, gf_err *err)
{
    *out = NULL;
    struct stat st;
    if (stat(dir, &st) != 0)
        return io_err(err, "stat", dir);
    if (!S_ISDIR(st.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "shared store: %s is not a directory", dir);
    gf_shared *s = calloc(1, sizeof *s);
    if (s == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_status rc = GF_ERR_NOMEM;
    char *objroot = NULL, *format = NULL, *staged = NULL;
    if (node == NULL || node[0] == '\0') {
        if (gethostname(s->node, sizeof s->node) != 0)
            snprintf(s->node, sizeof s->node, "node");
        s->node[sizeof s->node - 1] = '\0';
    } else {
        snprintf(s->node, sizeof s->node, "%s", node);
    }
    for (char *c = s->node; *c; c++) /* it goes into file names */
        if (*c == '/' || *c == '.' || *c < ' ')
            *c = '_';
    if (getrandom(&s->nonce, sizeof s->nonce, 0) != (ssize_t)sizeof s->nonce)
        s->nonce = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    atomic_init(&s->counter, 0);
    s->dir = strdup(dir);
    objroot = gf_path_join(dir, "objects");
    s->objects = objroot != NULL ? gf_path_join(objroot, "sha256") : NULL;
    s->log = gf_path_join(dir, "log");
    s->tmp = gf_path_join(dir, "tmp");
    format = gf_path_join(dir, "FORMAT");
    s->format = format != NULL ? strdup(format) : NULL;
    if (s->dir == NULL || s->objects == NULL || s->log == NULL || s->tmp == NULL ||
        format == NULL || s->format == NULL)
        goto fail;
    if ((rc = mkdir_one(objroot, err)) != GF_OK || (rc = mkdir_one(s->objects, err)) != GF_OK ||
        (rc = mkdir_one(s->log, err)) != GF_OK || (rc = mkdir_one(s->tmp, err)) != GF_OK)
        goto fail;
    if (access(format, F_OK) != 0) {
        /* the first node writes FORMAT; link(2) makes sure only one version of it exists */
        rc = GF_ERR_NOMEM;
        if ((staged = stage_path(s, "format")) == NULL)
            goto fail;
        int fd = open(staged, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0 || write_all(fd, GF_SHARED_FORMAT, strlen(GF_SHARED_FORMAT)) != 0 ||
            fsync(fd) != 0) {
            rc = io_err(err, "write", staged);
            if (fd >= 0)
                close(fd);
            unlink(staged);
            goto fail;
        }
        close(fd);
        if (link(staged, format) != 0 && errno != EEXIST) {
            rc = io_err(err, "link", format);
            unlink(staged);
            goto fail;
        }
        unlink(staged);
        fsync_dir(dir);
    }
    if ((rc = check_format(format, err)) != GF_OK)
        goto fail;
    free(objroot);
    free(format);
    free(staged);
    *out = s;
    return GF_OK;
fail:
    if (rc == GF_ERR_NOMEM)
        gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    free(objroot);
    free(format);
    free(staged);
    gf_shared_free(s);
    return rc;
}

void gf_shared_free(gf_shared *s)
{
    if (s == NULL)
        return;
    free(s->dir);
    free(s->format);
    free(s->objects);
    free(s->log);
    free(s->tmp);
    free(s);
}

const char *gf_shared_dir(const gf_shared *s)
{
    return s->dir;
}

/* ---- objects ---------------------------------------------------------------------- */

/* DIR/objects/sha256/ab/ab...: NULL when hex is not a sha256 (GF_ERR_INVALID in
 * *st) or out of memory (GF_ERR_NOMEM). */
static char *object_path(const gf_shared *s, const char *hex, gf_status *st, gf_err *err)
{
    if (!gf_sha256_hex_valid(hex)) {
        *st = gf_err_set(err, GF_ERR_INVALID, "shared store: '%.70s' is not a sha256", hex);
        return NULL;
    }
    char rel[GF_SHA256_HEX_LEN + 4];
    snprintf(rel, sizeof rel, "%.2s/%s", hex, hex);
    char *p = gf_path_join(s->objects, rel);
    if (p == NULL)
        *st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    return p;
}

/* Copy fd in to fd out (n bytes expected), hashing when h is not NULL. */
static gf_status copy_fd(int in, int out, uint64_t n, gf_sha256 *h, const char *from,
                         const char *to, gf_err *err)
{
    char *buf = malloc(COPY_CHUNK);
    if (buf == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    uint64_t done = 0;
    gf_status rc = GF_OK;
    for (;;) {
        ssize_t r = read(in, buf, COPY_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = io_err(err, "read", from);
            break;
        }
        if (r == 0)
            break;
        done += (uint64_t)r;
        if (done > n) {
            rc = gf_err_set(err, GF_ERR_FORMAT, "shared store: %s is larger than %" PRIu64
                            " bytes", from, n);
            break;
        }
        if (h != NULL)
            gf_sha256_update(h, buf, (size_t)r);
        if (write_all(out, buf, (size_t)r) != 0) {
            rc = io_err(err, "write", to);
            break;
        }
    }
    free(buf);
    if (rc == GF_OK && done != n)
        rc = gf_err_set(err, GF_ERR_FORMAT, "shared store: %s has %" PRIu64 " bytes, expected %"
                        PRIu64, from, done, n);
    return rc;
}

gf_status gf_shared_object_put(gf_shared *s, const char *src, const gf_shared_blob *b,
                               gf_err *err)
{
    gf_status rc = GF_OK;
    char *dst = object_path(s, b->sha256, &rc, err);
    if (dst == NULL)
        return rc;
    char *staged = stage_path(s, "object");
    char *dir = dir_of(dst);
    int in = -1, out = -1;
    if (staged == NULL || dir == NULL) {
        rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct stat st;
    if (stat(dst, &st) == 0 && (uint64_t)st.st_size == b->bytes)
        goto out; /* already there: content-addressed, so the same bytes */
    if ((rc = mkdir_one(dir, err)) != GF_OK)
        goto out;
    if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = io_err(err, "open", src);
        goto out;
    }
    if ((out = open(staged, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0) {
        rc = io_err(err, "create", staged);
        goto out;
    }
    if ((rc = copy_fd(in, out, b->bytes, NULL, src, staged, err)) != GF_OK)
        goto out;
    if (fsync(out) != 0) {
        rc = io_err(err, "fsync", staged);
        goto out;
    }
    if (link(staged, dst) != 0 && errno != EEXIST) {
        rc = io_err(err, "link", dst);
        goto out;
    }
    fsync_dir(dir);
out:
    if (in >= 0)
        close(in);
    if (out >= 0) {
        close(out);
        unlink(staged);
    }
    free(dst);
    free(staged);
    free(dir);
    return rc;
}

gf_status gf_shared_object_get(gf_shared *s, const gf_shared_blob *b, const char *dst,
                               gf_err *err)
{
    gf_status rc = GF_OK;
    char *src = object_path(s, b->sha256, &rc, err);
    if (src == NULL)
        return rc;
    size_t n = strlen(dst);
    char *tmp = malloc(n + 16);
    char *dir = dir_of(dst);
    int in = -1, out = -1;
    if (tmp == NULL || dir == NULL) {
        rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(tmp, n + 16, "%s.fetch.tmp", dst);
    if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = io_err(err, "open object", src);
        if (rc == GF_ERR_NOT_FOUND && reachable(s, NULL) != GF_OK)
            rc = reachable(s, err);
        goto out;
    }
    if ((out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
        rc = io_err(err, "create", tmp);
        goto out;
    }
    gf_sha256 h = {0};
    char hex[GF_SHA256_HEX_LEN];
    rc = gf_sha256_init(&h, err);
    if (rc == GF_OK)
        rc = copy_fd(in, out, b->bytes, &h, src, tmp, err);
    if (rc == GF_OK)
        rc = gf_sha256_final(&h, hex, err);
    gf_sha256_deinit(&h);
    if (rc != GF_OK)
        goto out;
    if (strcmp(hex, b->sha256) != 0) {
        rc = gf_err_set(err, GF_ERR_FORMAT, "shared store: object %s is corrupt (its content "
                        "hashes to %s)", src, hex);
        goto out;
    }
    if (fsync(out) != 0) {
        rc = io_err(err, "fsync", tmp);
        goto out;
    }
    close(out);
    out = -1;
    if (rename(tmp, dst) != 0) {
        rc = io_err(err, "rename to", dst);
        goto out;
    }
    fsync_dir(dir);
out:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (rc != GF_OK && tmp != NULL)
        unlink(tmp);
    free(src);
    free(tmp);
    free(dir);
    return rc;
}

/* ---- the log ------------------------------------------------------------------------------ */

static char *log_dir(const gf_shared *s, const char *name)
{
    return gf_function_name_valid(name) ? gf_path_join(s->log, name) : NULL;
}

static char *entry_path(const char *dir, uint64_t seq)
{
    char rel[32];
    snprintf(rel, sizeof rel, "%010" PRIu64 ".json", seq);
    return gf_path_join(dir, rel);
}

/* The sequence number a log entry's file name carries, or 0. */
static uint64_t entry_seq(const char *fname)
{
    if (strlen(fname) != 15 || strcmp(fname + 10, ".json") != 0 ||
        strspn(fname, "0123456789") != 10)
        return 0;
    return strtoull(fname, NULL, 10);
}

/* The highest sequence number listed in dir (0 when empty or absent). */
static gf_status log_last(const char *dir, uint64_t *last, gf_err *err)
{
    *last = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOENT)
            return GF_OK;
        return io_err(err, "opendir", dir);
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t q = entry_seq(de->d_name);
        if (q > *last)
            *last = q;
    }
    closedir(d);
    return GF_OK;
}

gf_status gf_shared_append(gf_shared *s, const char *name, gf_shared_entry *e, uint64_t *seq,
                           gf_err *err)
{
    char *dir = log_dir(s, name);
    if (dir == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "shared store: '%.80s' is not a function name",
                          name);
    snprintf(e->node, sizeof e->node, "%s", s->node);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    e->time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    gf_buf b;
    gf_buf_init(&b);
    char *staged = stage_path(s, "entry");
    char *path = NULL;
    int fd = -1;
    gf_status rc = GF_OK;
    if (staged == NULL || gf_shared_entry_encode(e, &b) != GF_OK) {
        rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (b.len > GF_SHARED_ENTRY_MAX) {
        rc = gf_err_set(err, GF_ERR_TOO_LARGE, "shared store: a log entry of %zu bytes (limit %u)",
                        b.len, GF_SHARED_ENTRY_MAX);
        goto out;
    }
    if ((fd = open(staged, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0) {
        rc = io_err(err, "create", staged);
        goto out;
    }
    if (write_all(fd, b.data, b.len) != 0 || fsync(fd) != 0) {
        rc = io_err(err, "write", staged);
        goto out;
    }
    if ((rc = mkdir_one(dir, err)) != GF_OK)
        goto out;
    uint64_t next;
    if ((rc = log_last(dir, &next, err)) != GF_OK)
        goto out;
    for (;;) {
        next++;
        free(path);
        if ((path = entry_path(dir, next)) == NULL) {
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (link(staged, path) == 0)
            break;
        if (errno != EEXIST) {
            rc = io_err(err, "link", path);
            goto out;
        }
        /* taken: by another node, or by us when an NFS client retransmitted a LINK
         * whose reply was lost (then the staged file has a second name) */
        struct stat st;
        if (stat(staged, &st) == 0 && st.st_nlink >= 2)
            break;
    }
    fsync_dir(dir);
    e->seq = next;
    *seq = next;
out:
    if (fd >= 0) {
        close(fd);
        unlink(staged);
    }
    gf_buf_deinit(&b);
    free(staged);
    free(path);
    free(dir);
    return rc;
}

static gf_status read_file(const char *path, char **text, size_t *len, gf_err *err)
{
    *text = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return io_err(err, "open", path);
    struct stat st;
    gf_status rc = GF_OK;
    if (fstat(fd, &st) != 0) {
        rc = io_err(err, "stat", path);
    } else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > GF_SHARED_ENTRY_MAX) {
        rc = gf_err_set(err, GF_ERR_FORMAT, "shared store: %s is not a log entry (a regular "
                        "file of at most %u bytes)", path, GF_SHARED_ENTRY_MAX);
    } else if ((*text = malloc((size_t)st.st_size + 1)) == NULL) {
        rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = read(fd, *text + got, (size_t)st.st_size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != (size_t)st.st_size) {
            rc = io_err(err, "read", path);
            free(*text);
            *text = NULL;
        } else {
            (*text)[got] = '\0';
            *len = got;
        }
    }
    close(fd);
    return rc;
}

gf_status gf_shared_read(gf_shared *s, const char *name, uint64_t after, gf_shared_entry **out,
                         size_t *n, gf_err *err)
{
    *out = NULL;
    *n = 0;
    char *dir = log_dir(s, name);
    if (dir == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "shared store: '%.80s' is not a function name",
                          name);
    uint64_t last = 0;
    gf_status rc = reachable(s, err);
    if (rc == GF_OK)
        rc = log_last(dir, &last, err);
    gf_shared_entry *v = NULL;
    size_t cnt = 0;
    if (rc == GF_OK && last > after) {
        if (last - after > (1u << 20)) {
            rc = gf_err_set(err, GF_ERR_TOO_LARGE, "shared store: %s lists entry %" PRIu64
                            " after %" PRIu64, dir, last, after);
        } else if ((v = calloc((size_t)(last - after), sizeof *v)) == NULL) {
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        }
    }
    for (uint64_t q = after + 1; rc == GF_OK && q <= last; q++) {
        char *path = entry_path(dir, q), *text = NULL;
        size_t len = 0;
        if (path == NULL) {
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            break;
        }
        rc = read_file(path, &text, &len, err);
        if (rc == GF_ERR_NOT_FOUND) { /* not visible here yet: stop before the gap */
            free(path);
            gf_err_clear(err);
            rc = GF_OK;
            break;
        }
        if (rc == GF_OK && (rc = gf_shared_entry_decode(text, len, path, &v[cnt], err)) == GF_OK)
            v[cnt++].seq = q;
        free(text);
        free(path);
    }
    free(dir);
    if (rc != GF_OK) {
        gf_shared_entries_free(v, cnt);
        return rc;
    }
    if (cnt == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    *n = cnt;
    return GF_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

gf_status gf_shared_names(gf_shared *s, char ***names, size_t *n, gf_err *err)
{
    *names = NULL;
    *n = 0;
    gf_status rc0 = reachable(s, err);
    if (rc0 != GF_OK)
        return rc0;
    DIR *d = opendir(s->log);
    if (d == NULL)
        return io_err(err, "opendir", s->log);
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    gf_status rc = GF_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!gf_function_name_valid(de->d_name))
            continue;
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 64;
            char **nv = realloc(v, nc * sizeof *nv);
            if (nv == NULL) {
                rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
                break;
            }
            v = nv;
            cap = nc;
        }
        if ((v[cnt] = strdup(de->d_name)) == NULL) {
            rc = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            break;
        }
        cnt++;
    }
    closedir(d);
    if (rc != GF_OK) {
        for (size_t i = 0; i < cnt; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof *v, cmp_str);
    *names = v;
    *n = cnt;
    return GF_OK;
}
