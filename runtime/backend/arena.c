/* gpufaas — the per-request device arena (see arena.h). */
#include "backend/arena.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"

#define ARENA_ALIGN ((size_t)256)
#define ARENA_MIN_BLOCK ((size_t)64 << 10) /* blocks are multiples of 64 KiB */
#define ARENA_MAX_BLOCKS 32
/* Every this many requests, an arena holding more than 4x the largest of
 * them (and at least 256 KiB more) gives the rest back: a burst of large
 * batches does not keep its memory from the parameter cache for good. */
#define ARENA_WINDOW 256

typedef struct {
    char *base;
    size_t cap;
} arena_block;

struct gf_dev_arena {
    gf_backend *be;
    arena_block blocks[ARENA_MAX_BLOCKS];
    int n;          /* blocks held */
    int cur;        /* the block being bumped (when n > 0) */
    size_t off;     /* bytes taken from blocks[cur] since the reset */
    size_t taken;   /* bytes taken since the reset, every block */
    size_t window_peak; /* the most one request took in this window */
    int window_n;       /* requests reset in this window */
};

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

gf_status gf_dev_arena_new(gf_backend *be, gf_dev_arena **out, gf_err *err)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for the device arena");
    (*out)->be = be;
    return GF_OK;
}

static void arena_drop_blocks(gf_dev_arena *a)
{
    for (int i = 0; i < a->n; i++)
        gf_dev_free(a->be, a->blocks[i].base);
    a->n = 0;
    a->cur = 0;
    a->off = 0;
}

void gf_dev_arena_free(gf_dev_arena *a)
{
    if (a == NULL)
        return;
    arena_drop_blocks(a);
    free(a);
}

gf_status gf_dev_arena_alloc(gf_dev_arena *a, size_t bytes, void **out, gf_err *err)
{
    *out = NULL;
    if (bytes > SIZE_MAX - 2 * ARENA_MIN_BLOCK)
        return gf_err_set(err, GF_ERR_OVERFLOW, "device arena: %zu bytes is too large", bytes);
    size_t need = round_up(bytes ? bytes : 1, ARENA_ALIGN);
    if (a->n == 0 || a->off + need > a->blocks[a->cur].cap) {
        if (a->n == ARENA_MAX_BLOCKS)
            return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "device arena: more than %d blocks "
                              "in one request", ARENA_MAX_BLOCKS);
        /* at least as large as everything held, so blocks stay few */
        size_t cap = need;
        size_t held = gf_dev_arena_held(a);
        if (cap < held)
            cap = held;
        cap = round_up(cap, ARENA_MIN_BLOCK);
        void *p;
        gf_status st = gf_dev_alloc(a->be, cap, &p, err);
        if (st != GF_OK && cap > round_up(need, ARENA_MIN_BLOCK)) {
            cap = round_up(need, ARENA_MIN_BLOCK); /* just what this one needs */
            st = gf_dev_alloc(a->be, cap, &p, err);
        }
        if (st != GF_OK)
            return st;
        /* cur is always the last block: a reset leaves at most one */
        a->blocks[a->n] = (arena_block){p, cap};
        a->cur = a->n++;
        a->off = 0;
    }
    *out = a->blocks[a->cur].base + a->off;
    a->off += need;
    a->taken += need;
    return GF_OK;
}

/* Replace the blocks with one of cap bytes (none when that fails: the arena
 * grows again on use). */
static void arena_rebuild(gf_dev_arena *a, size_t cap)
{
    arena_drop_blocks(a);
    void *p;
    gf_err e;
    if (gf_dev_alloc(a->be, cap, &p, &e) == GF_OK) {
        a->blocks[0] = (arena_block){p, cap};
        a->n = 1;
    } else {
        GF_LOG_D("device arena: a block of %zu bytes failed (%s); it grows again on use", cap,
                 e.msg);
    }
}

void gf_dev_arena_reset(gf_dev_arena *a)
{
    if (a->n > 1) {
        /* the request grew the arena: one block of what it held instead,
         * and a new window from the next request */
        arena_rebuild(a, round_up(gf_dev_arena_held(a), ARENA_MIN_BLOCK));
        a->window_n = 0;
        a->window_peak = 0;
    } else {
        if (a->taken > a->window_peak)
            a->window_peak = a->taken;
        if (++a->window_n >= ARENA_WINDOW) {
            size_t keep = round_up(a->window_peak ? a->window_peak : 1, ARENA_MIN_BLOCK);
            size_t held = gf_dev_arena_held(a);
            if (held / 4 > keep && held - keep >= ((size_t)256 << 10))
                arena_rebuild(a, keep);
            a->window_n = 0;
            a->window_peak = 0;
        }
    }
    a->cur = 0;
    a->off = 0;
    a->taken = 0;
}

size_t gf_dev_arena_held(const gf_dev_arena *a)
{
    size_t held = 0;
    for (int i = 0; i < a->n; i++)
        held += a->blocks[i].cap;
    return held;
}
