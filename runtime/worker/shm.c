/* gpufaas — the worker process: its mappings of system shared memory
 * objects, for tensors that travel by reference (docs/protocol.md, "shm
 * tensor"): an INFER input read from an object, an output written into one.
 *
 * Every use opens the object by name and fstat's it, so a span is checked
 * against the object's size now (not at registration), and an object
 * unlinked and created again under the same name (another inode) is mapped
 * afresh. Mappings are cached per name, at most WK_SHM_MAPS, least recently
 * used first out; one in use by the running request is never unmapped.
 * The gateway's SHM_FORGET (the region was unregistered) unmaps at once, or
 * when the last request using it is done. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/worker_impl.h"

void wk_shm_init(wk_shm_cache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
}

static void unmap(wk_shm_map *m)
{
    if (m->base != NULL)
        munmap(m->base, m->len);
    memset(m, 0, sizeof *m);
}

void wk_shm_deinit(wk_shm_cache *c)
{
    for (int i = 0; i < WK_SHM_MAPS; i++)
        unmap(&c->m[i]);
    pthread_mutex_destroy(&c->lock);
}

/* The slot mapping key's object (dev, ino, size from sb; fd open on it),
 * mapped now if no slot does; NULL with *st set when none can. c->lock held. */
static wk_shm_map *slot_for(wk_shm_cache *c, const char *key, const struct stat *sb, int fd,
                            gf_status *st, gf_err *err)
{
    wk_shm_map *stale = NULL, *lru = NULL;
    for (int i = 0; i < WK_SHM_MAPS; i++) {
        wk_shm_map *m = &c->m[i];
        if (m->base != NULL && !m->forgotten && strcmp(m->key, key) == 0) {
            if (m->dev == sb->st_dev && m->ino == sb->st_ino && m->len == (size_t)sb->st_size)
                return m;
            if (m->users == 0)
                stale = m; /* recreated or resized since: mapped again below */
        } else if (m->users == 0 &&
                   (lru == NULL || (lru->base != NULL && (m->base == NULL || m->used < lru->used)))) {
            lru = m;
        }
    }
    wk_shm_map *m = stale != NULL ? stale : lru;
    if (m == NULL) {
        *st = gf_err_set(err, GF_ERR_BUSY, "shared memory '%s': more than %d objects in use at "
                         "once", key, WK_SHM_MAPS);
        return NULL;
    }
    void *base = mmap(NULL, (size_t)sb->st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        *st = gf_err_set(err, GF_ERR_INVALID, "shared memory '%s': cannot map it: %s", key,
                         strerror(errno));
        return NULL;
    }
    unmap(m);
    snprintf(m->key, sizeof m->key, "%s", key);
    m->dev = sb->st_dev;
    m->ino = sb->st_ino;
    m->base = base;
    m->len = (size_t)sb->st_size;
    return m;
}

gf_status wk_shm_span(wk_shm_cache *c, const char *what, const char *key, uint64_t offset,
                      uint64_t size, void **out, wk_shm_map **held, gf_err *err)
{
    *out = NULL;
    *held = NULL;
    int fd = shm_open(key, O_RDWR, 0);
    if (fd < 0)
        return gf_err_set(err, GF_ERR_INVALID, "%s: cannot open shared memory object '%s': %s "
                          "(unlinked since it was registered?)", what, key, strerror(errno));
    struct stat sb;
    gf_status st = GF_OK;
    uint64_t end;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = gf_err_set(err, GF_ERR_INVALID, "%s: '%s' is not a shared memory object", what,
                        key);
    else if (__builtin_add_overflow(offset, size, &end) || end > (uint64_t)sb.st_size)
        st = gf_err_set(err, GF_ERR_INVALID, "%s: offset %" PRIu64 " + %" PRIu64 " bytes lies "
                        "past the end of shared memory object '%s' (%lld bytes now)", what,
                        offset, size, key, (long long)sb.st_size);
    else if (sb.st_size == 0) { /* an empty span of an empty object: nothing to map */
        static unsigned char none[1];
        *out = none;
    }
    if (st != GF_OK || *out != NULL) {
        close(fd);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    wk_shm_map *m = slot_for(c, key, &sb, fd, &st, err);
    if (m != NULL) {
        m->users++;
        m->used = ++c->tick;
        *out = (unsigned char *)m->base + offset;
        *held = m;
    }
    pthread_mutex_unlock(&c->lock);
    close(fd);
    return st;
}

void wk_shm_release(wk_shm_cache *c, wk_shm_map *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    if (--m->users == 0 && m->forgotten)
        unmap(m);
    pthread_mutex_unlock(&c->lock);
}

void wk_shm_forget(wk_shm_cache *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < WK_SHM_MAPS; i++) {
        wk_shm_map *m = &c->m[i];
        if (m->base == NULL || strcmp(m->key, key) != 0)
            continue;
        if (m->users == 0)
            unmap(m);
        else
            m->forgotten = true;
    }
    pthread_mutex_unlock(&c->lock);
}

uint64_t wk_shm_count(wk_shm_cache *c)
{
    uint64_t n = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < WK_SHM_MAPS; i++)
        n += c->m[i].base != NULL;
    pthread_mutex_unlock(&c->lock);
    return n;
}
