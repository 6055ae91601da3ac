/* gpufaas — system shared memory regions (gateway/http; see shm.h). */
#include "gateway/http/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gf_shm_region {
    char name[GF_SHM_NAME_MAX + 1];
    char *key;
    uint64_t offset, byte_size;
    void *map;       /* the mapping: from offset rounded down to a page */
    size_t map_len;
    unsigned char *base; /* offset's byte in it */
    atomic_int refs; /* the table's + one per request */
};

struct gf_shm_table {
    pthread_mutex_t lock;
    gf_shm_region *r[GF_SHM_MAX_REGIONS];
    size_t n;
    gf_gw *gw; /* whose workers forget the objects unregistered */
};

gf_status gf_shm_table_new(gf_gw *gw, gf_shm_table **out)
{
    gf_shm_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return GF_ERR_NOMEM;
    t->gw = gw;
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return GF_OK;
}

void gf_shm_put(gf_shm_region *r)
{
    if (r == NULL || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    munmap(r->map, r->map_len);
    free(r->key);
    free(r);
}

void gf_shm_table_free(gf_shm_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        gf_shm_put(t->r[i]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

bool gf_shm_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > GF_SHM_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static long find(const gf_shm_table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->r[i]->name, name) == 0)
            return (long)i;
    return -1;
}

/* Map the region; the table is not touched. */
static gf_status map_region(const char *name, const char *key, uint64_t offset,
                            uint64_t byte_size, gf_shm_region **out, gf_err *err)
{
    if (byte_size == 0)
        return gf_err_set(err, GF_ERR_INVALID, "shared memory region '%s': byte_size must be > 0",
                          name);
    if (key[0] == '\0' || strlen(key) > 255)
        return gf_err_set(err, GF_ERR_INVALID, "shared memory region '%s': bad key", name);
    int fd = shm_open(key, O_RDWR, 0);
    if (fd < 0)
        return gf_err_set(err, GF_ERR_INVALID,
                          "Unable to open shared memory region '%s': key '%.100s': %s", name, key,
                          strerror(errno));
    struct stat sb;
    uint64_t end = 0;
    gf_status st = GF_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = gf_err_set(err, GF_ERR_INVALID, "shared memory region '%s': key '%.100s' is not a "
                        "shared memory object", name, key);
    else if (__builtin_add_overflow(offset, byte_size, &end) || end > (uint64_t)sb.st_size)
        st = gf_err_set(err, GF_ERR_INVALID,
                        "shared memory region '%s': offset %" PRIu64 " + byte_size %" PRIu64
                        " lies past the end of '%.100s' (%lld bytes)",
                        name, offset, byte_size, key, (long long)sb.st_size);
    gf_shm_region *r = st == GF_OK ? calloc(1, sizeof *r) : NULL;
    if (st == GF_OK && (r == NULL || (r->key = strdup(key)) == NULL))
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    if (st == GF_OK) {
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t start = offset - offset % page;
        r->map_len = (size_t)(end - start);
        r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
        if (r->map == MAP_FAILED)
            st = gf_err_set(err, GF_ERR_INVALID, "shared memory region '%s': cannot map "
                            "'%.100s': %s", name, key, strerror(errno));
        else
            r->base = (unsigned char *)r->map + (offset - start);
    }
    close(fd);
    if (st != GF_OK) {
        if (r != NULL)
            free(r->key);
        free(r);
        return st;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->offset = offset;
    r->byte_size = byte_size;
    atomic_init(&r->refs, 1);
    *out = r;
    return GF_OK;
}

gf_status gf_shm_register(gf_shm_table *t, const char *name, const char *key, uint64_t offset,
                          uint64_t byte_size, gf_err *err)
{
    if (!gf_shm_name_valid(name))
        return gf_err_set(err, GF_ERR_INVALID, "invalid shared memory region name '%.64s'", name);
    gf_shm_region *r = NULL;
    gf_status st = map_region(name, key, offset, byte_size, &r, err);
    if (st != GF_OK)
        return st;
    pthread_mutex_lock(&t->lock);
    if (find(t, name) >= 0)
        st = gf_err_set(err, GF_ERR_INVALID, "shared memory region '%s' is already registered",
                        name);
    else if (t->n == GF_SHM_MAX_REGIONS)
        st = gf_err_set(err, GF_ERR_TOO_LARGE, "%d shared memory regions are registered: "
                        "unregister one first", GF_SHM_MAX_REGIONS);
    else
        t->r[t->n++] = r;
    pthread_mutex_unlock(&t->lock);
    if (st != GF_OK)
        gf_shm_put(r);
    return st;
}

gf_status gf_shm_unregister(gf_shm_table *t, const char *name, gf_err *err)
{
    gf_shm_region *gone[GF_SHM_MAX_REGIONS];
    size_t n_gone = 0;
    gf_status st = GF_OK;
    pthread_mutex_lock(&t->lock);
    if (name == NULL) {
        memcpy(gone, t->r, t->n * sizeof t->r[0]);
        n_gone = t->n;
        t->n = 0;
    } else {
        long i = find(t, name);
        if (i < 0) {
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "no shared memory region '%.64s' is "
                            "registered", name);
        } else {
            gone[n_gone++] = t->r[i];
            t->r[i] = t->r[--t->n];
        }
    }
    pthread_mutex_unlock(&t->lock);
    for (size_t i = 0; i < n_gone; i++) {
        if (t->gw != NULL) /* the workers unmap it (once no request uses it) */
            gf_gw_shm_forget(t->gw, gone[i]->key);
        gf_shm_put(gone[i]);
    }
    return st;
}

gf_status gf_shm_status_json(gf_shm_table *t, const char *name, gf_buf *out, gf_err *err)
{
    json_t *arr = json_array();
    gf_status st = GF_OK;
    pthread_mutex_lock(&t->lock);
    if (name != NULL && find(t, name) < 0)
        st = gf_err_set(err, GF_ERR_NOT_FOUND, "no shared memory region '%.64s' is registered",
                        name);
    for (size_t i = 0; i < t->n && st == GF_OK; i++) {
        const gf_shm_region *r = t->r[i];
        if (name == NULL || strcmp(r->name, name) == 0)
            json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I}", "name", r->name, "key",
                                                 r->key, "offset", (json_int_t)r->offset,
                                                 "byte_size", (json_int_t)r->byte_size));
    }
    pthread_mutex_unlock(&t->lock);
    char *text = st == GF_OK ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    if (st == GF_OK && (text == NULL || gf_buf_append_str(out, text) != GF_OK))
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    free(text);
    return st;
}

gf_shm_region *gf_shm_get(gf_shm_table *t, const char *name)
{
    gf_shm_region *r = NULL;
    pthread_mutex_lock(&t->lock);
    long i = find(t, name);
    if (i >= 0) {
        r = t->r[i];
        atomic_fetch_add(&r->refs, 1);
    }
    pthread_mutex_unlock(&t->lock);
    return r;
}

void *gf_shm_span(gf_shm_region *r, uint64_t offset, uint64_t size, const char *what,
                  gf_err *err)
{
    uint64_t end = 0;
    if (__builtin_add_overflow(offset, size, &end) || end > r->byte_size) {
        gf_err_set(err, GF_ERR_INVALID,
                   "%s: shared_memory_offset %" PRIu64 " + %" PRIu64 " bytes lies past the end "
                   "of shared memory region '%s' (%" PRIu64 " bytes)",
                   what, offset, size, r->name, r->byte_size);
        return NULL;
    }
    return r->base + offset;
}

static void put_hold(void *hold)
{
    gf_shm_put(hold);
}

gf_gw_shm gf_shm_tensor_ref(gf_shm_region *r, uint64_t offset, uint64_t size, bool hold)
{
    return (gf_gw_shm){.key = r->key,
                       .offset = r->offset + offset, /* both checked against the object */
                       .size = size,
                       .hold = hold ? r : NULL,
                       .put = hold ? put_hold : NULL};
}
