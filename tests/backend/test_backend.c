/* Tests for runtime/backend: device memory under a budget and page mapping
 * (here), the copy stream and events (test_backend_stream.c), the PCIe link
 * (test_backend_pcie.c). Runs on the device named by argv[1] ("cpu" by
 * default; "cuda:0" exits 77 without a GPU). Checks that reach into how the
 * cpu backend works (the copy hook) run on cpu only. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/arena.h"
#include "backend/backend.h"
#include "backend_testlib.h"
#include "testutil.h"

const char *tb_device = "cpu";
bool tb_is_cpu = true;

/* Pages of 64 KiB keep the tests small where the device allows it; a GPU's
 * granularity is larger (2 MiB on an H200), so every budget that must hold
 * a number of pages is sized from the page in force (tb_dev_page). */
#define PAGE ((size_t)64 << 10)

gf_backend *tb_open_be(uint64_t budget, gf_cpu_copy_hook hook, void *arg)
{
    gf_backend_config cfg = {.device = tb_device, .device_budget = budget, .page_size = PAGE,
                             .cpu_copy_hook = hook, .cpu_copy_hook_arg = arg};
    gf_backend *be = NULL;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_backend_open(&cfg, &be, &err) == GF_OK, "open %s: %s", tb_device, err.msg);
    /* cuda commits its pool in the background: the tests that count what
     * the backend holds start from the whole pool committed */
    for (int i = 0; i < 30000 && !gf_dev_precommit_done(be); i++)
        usleep(1000);
    ck_assert(gf_dev_precommit_done(be));
    return be;
}

/* The page size the device gives for a request of PAGE (PAGE on cpu, the
 * allocation granularity on a GPU). Asked in each test's own process: a
 * CUDA context must not exist before Check forks. */
size_t tb_dev_page(void)
{
    static size_t page;
    if (page == 0) {
        gf_backend *be = tb_open_be(PAGE, NULL, NULL);
        page = gf_dev_page_size(be);
        gf_backend_free(be);
    }
    return page;
}

/* copy host -> device and back through the compute stream, synchronously */
void tb_to_dev(gf_backend *be, void *dst, const void *src, size_t n)
{
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    ck_assert_int_eq(gf_memcpy_async(be, s, dst, src, n, GF_COPY_H2D, NULL), GF_OK);
    ck_assert_int_eq(gf_stream_sync(be, s, NULL), GF_OK);
}

void tb_from_dev(gf_backend *be, void *dst, const void *src, size_t n)
{
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    ck_assert_int_eq(gf_memcpy_async(be, s, dst, src, n, GF_COPY_D2H, NULL), GF_OK);
    ck_assert_int_eq(gf_stream_sync(be, s, NULL), GF_OK);
}

START_TEST(test_open_errors)
{
    gf_backend *be = (gf_backend *)0x1;
    gf_err err;
    gf_backend_config cfg = {.device = "tpu:0"};
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_ERR_INVALID);
    ck_assert_ptr_null(be);
    ck_assert_msg(strstr(err.msg, "unknown device 'tpu:0'") != NULL, "%s", err.msg);
    cfg.device = "cuda:x";
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_ERR_INVALID);
    if (gf_backend_cuda_device_count() == 0) {
        cfg.device = "cuda:0";
        ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_ERR_NOT_FOUND);
        ck_assert_msg(strstr(err.msg, "cuda:0") != NULL, "%s", err.msg);
    }
    cfg.device = "cuda:99";
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_ERR_NOT_FOUND);
}
END_TEST

START_TEST(test_info)
{
    gf_backend *be = tb_open_be(8 * PAGE, NULL, NULL);
    gf_device_info info;
    gf_backend_info(be, &info);
    ck_assert_int_eq(info.kind, tb_is_cpu ? GF_DEVICE_CPU : GF_DEVICE_CUDA);
    ck_assert(info.name[0] != '\0');
    ck_assert_uint_eq(info.budget, 8 * PAGE);
    ck_assert_uint_ge(info.page_size, PAGE);
    ck_assert_uint_eq(info.page_size % PAGE, 0);
    ck_assert_uint_gt(info.total_memory, 0);
    ck_assert_uint_gt(info.free_memory, 0);
    if (!tb_is_cpu)
        ck_assert_int_ge(info.cc_major, 1);
    ck_assert_ptr_nonnull(gf_backend_kernels(be));
    ck_assert_uint_eq(gf_backend_kernels(be)->version, GF_KERNELS_VERSION);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_budget)
{
    /* a budget of 16 pages; allocations sized in pages too, so the test
     * means the same with 64 KiB and 2 MiB pages */
    size_t page = tb_dev_page();
    size_t bud = 16 * page;
    gf_backend *be = tb_open_be(bud, NULL, NULL);
    ck_assert_uint_eq(gf_dev_page_size(be), page);
    gf_err err;
    void *a, *b, *c;
    size_t sa = 9 * page + page / 2, sb = 6 * page + page / 4;
    ck_assert_int_eq(gf_dev_alloc(be, sa, &a, &err), GF_OK);
    ck_assert_uint_eq((uintptr_t)a % 256, 0);
    uint64_t used, budget;
    gf_dev_usage(be, &used, &budget);
    ck_assert_uint_eq(used, sa);
    ck_assert_uint_eq(budget, bud);
    ck_assert_int_eq(gf_dev_alloc(be, 8 * page, &b, &err), GF_ERR_NO_DEVICE_MEM);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err.msg, "budget exhausted") != NULL, "%s", err.msg);
    ck_assert_int_eq(gf_dev_alloc(be, sb, &b, &err), GF_OK);
    /* pages share the budget: a quarter page left is less than a page */
    int64_t pg;
    ck_assert_int_eq(gf_dev_page_alloc(be, &pg, &err), GF_ERR_NO_DEVICE_MEM);
    gf_dev_free(be, a);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, sb);
    ck_assert_int_eq(gf_dev_page_alloc(be, &pg, &err), GF_OK);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, sb + page);
    gf_dev_page_free(be, pg);
    gf_dev_free(be, b);
    ck_assert_int_eq(gf_dev_alloc(be, 0, &c, &err), GF_OK); /* zero bytes is a valid block */
    gf_dev_free(be, c);
    gf_dev_free(be, NULL);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    /* a real allocation round-trips data */
    ck_assert_int_eq(gf_dev_alloc(be, 1000, &a, &err), GF_OK);
    char src[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (char)(i * 7);
    tb_to_dev(be, a, src, 1000);
    tb_from_dev(be, back, a, 1000);
    ck_assert(memcmp(src, back, 1000) == 0);
    gf_dev_free(be, a);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_pages_scattered)
{
    enum { POOL = 32, MODEL = 9 };
    gf_backend *be = tb_open_be(POOL * tb_dev_page(), NULL, NULL);
    size_t page = gf_dev_page_size(be);
    int pool = POOL;
    ck_assert_uint_eq(page, tb_dev_page());
    gf_err err;
    /* take the whole pool, give back every other page, so free pages are
     * scattered through it */
    int64_t *all = malloc((size_t)pool * sizeof *all);
    for (int i = 0; i < pool; i++)
        ck_assert_msg(gf_dev_page_alloc(be, &all[i], &err) == GF_OK, "%s", err.msg);
    int64_t extra;
    ck_assert_int_eq(gf_dev_page_alloc(be, &extra, &err), GF_ERR_NO_DEVICE_MEM);
    for (int i = 0; i < pool; i += 2)
        gf_dev_page_free(be, all[i]);
    int64_t pages[MODEL];
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_page_alloc(be, &pages[i], &err), GF_OK);
    /* a model-sized contiguous range backed by those pages */
    char *va;
    ck_assert_int_eq(gf_dev_vreserve(be, MODEL * page, (void **)&va, &err), GF_OK);
    ck_assert_uint_eq((uintptr_t)va % page, 0);
    for (int i = 0; i < MODEL; i++)
        ck_assert_msg(gf_dev_map(be, va + (size_t)i * page, pages[MODEL - 1 - i], &err) == GF_OK,
                      "%s", err.msg);
    size_t n = MODEL * page;
    unsigned char *src = malloc(n), *back = malloc(n);
    gf_test_rng r;
    gf_test_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)gf_test_rng_u64(&r);
    tb_to_dev(be, va, src, n); /* one copy across every page boundary */
    tb_from_dev(be, back, va, n);
    ck_assert(memcmp(src, back, n) == 0);
    /* unmap, remap the same physical pages elsewhere in another order: the
     * bytes follow the pages */
    char *vb;
    ck_assert_int_eq(gf_dev_vreserve(be, MODEL * page, (void **)&vb, &err), GF_OK);
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_unmap(be, va + (size_t)i * page, &err), GF_OK);
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_map(be, vb + (size_t)i * page, pages[i], &err), GF_OK);
    /* a page is mapped at one address at a time */
    if (tb_is_cpu)
        ck_assert_int_eq(gf_dev_map(be, va, pages[0], &err), GF_ERR_INVALID);
    tb_from_dev(be, back, vb, n);
    for (int i = 0; i < MODEL; i++) /* vb page i holds va page MODEL-1-i */
        ck_assert(memcmp(back + (size_t)i * page, src + (size_t)(MODEL - 1 - i) * page, page) == 0);
    /* remap different pages into the first range: fresh writes are seen */
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_unmap(be, vb + (size_t)i * page, &err), GF_OK);
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_map(be, va + (size_t)i * page, all[2 * i + 1], &err), GF_OK);
    memset(src, 0xa5, n);
    tb_to_dev(be, va, src, n);
    tb_from_dev(be, back, va, n);
    ck_assert(memcmp(src, back, n) == 0);
    for (int i = 0; i < MODEL; i++)
        ck_assert_int_eq(gf_dev_unmap(be, va + (size_t)i * page, &err), GF_OK);
    gf_dev_vrelease(be, va, MODEL * page);
    gf_dev_vrelease(be, vb, MODEL * page);
    for (int i = 0; i < MODEL; i++)
        gf_dev_page_free(be, pages[i]);
    for (int i = 1; i < pool; i += 2)
        gf_dev_page_free(be, all[i]);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    free(src);
    free(back);
    free(all);
    gf_backend_free(be);
}
END_TEST

/* Bytes of memory behind the cpu backend's page memfd (found through
 * /proc/self/fd), or -1. */
static long long memfd_bytes(void)
{
    for (int fd = 3; fd < 1024; fd++) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strstr(target, "memfd:gpufaas-device-pages") == NULL)
            continue;
        struct stat sb;
        if (fstat(fd, &sb) != 0)
            return -1;
        return (long long)sb.st_blocks * 512;
    }
    return -1;
}

/* Freed pages keep their memory for the next taker, but never beyond the
 * budget: what the backend holds (allocations and every committed page,
 * free ones included) stays within it, an allocation releases free pages to
 * make its room, and a page is committed afresh only when no committed one
 * is free. On cpu the memory itself is measured (the memfd's blocks). */
/* The background commit of the page pool (cuda's at start; cpu when asked):
 * the pool becomes committed while pages are taken and freed beside it,
 * what the backend holds never passes the budget, and closing the backend
 * while it runs stops it. */
START_TEST(test_precommit_in_the_background)
{
    if (!tb_is_cpu)
        return; /* cuda always precommits: tb_open_be waits for it */
    size_t page = tb_dev_page();
    enum { POOL = 64 };
    gf_backend_config cfg = {.device = "cpu", .device_budget = POOL * page, .page_size = PAGE,
                             .precommit = true};
    gf_backend *be = NULL;
    gf_err err;
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_OK);
    int64_t pg[8];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 8; i++)
            ck_assert_msg(gf_dev_page_alloc(be, &pg[i], &err) == GF_OK, "%s", err.msg);
        ck_assert_uint_le(gf_dev_held(be), POOL * page);
        for (int i = 0; i < 8; i++)
            gf_dev_page_free(be, pg[i]);
    }
    for (int i = 0; i < 30000 && !gf_dev_precommit_done(be); i++)
        usleep(1000);
    ck_assert(gf_dev_precommit_done(be));
    ck_assert_uint_eq(gf_dev_held(be), POOL * page); /* every page committed */
    ck_assert_int_eq(memfd_bytes(), (long long)(POOL * page));
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    /* an allocation of half the budget still finds its room */
    void *a;
    ck_assert_msg(gf_dev_alloc(be, POOL / 2 * page, &a, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_dev_held(be), POOL * page);
    gf_dev_free(be, a);
    gf_backend_free(be);
    /* closed at once: the commit stops where it is */
    cfg.device_budget = 4096 * page;
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_OK);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_free_pages_count_against_the_budget)
{
    size_t page = tb_dev_page();
    enum { POOL = 8 };
    gf_backend *be = tb_open_be(POOL * page, NULL, NULL);
    gf_err err;
    int64_t pg[POOL];
    for (int i = 0; i < POOL; i++)
        ck_assert_int_eq(gf_dev_page_alloc(be, &pg[i], &err), GF_OK);
    if (tb_is_cpu)
        ck_assert_int_eq(memfd_bytes(), (long long)(POOL * page));
    for (int i = 0; i < POOL; i++)
        gf_dev_page_free(be, pg[i]);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    ck_assert_uint_eq(gf_dev_held(be), POOL * page); /* kept for reuse */
    /* an allocation of 5 pages: 5 free pages give their memory back */
    void *a;
    ck_assert_msg(gf_dev_alloc(be, 5 * page, &a, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_dev_held(be), POOL * page);
    if (tb_is_cpu)
        ck_assert_int_eq(memfd_bytes(), (long long)(3 * page));
    /* three pages: the three still committed, nothing new */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(gf_dev_page_alloc(be, &pg[i], &err), GF_OK);
    ck_assert_uint_eq(gf_dev_held(be), POOL * page);
    if (tb_is_cpu)
        ck_assert_int_eq(memfd_bytes(), (long long)(3 * page));
    ck_assert_int_eq(gf_dev_page_alloc(be, &pg[3], &err), GF_ERR_NO_DEVICE_MEM);
    /* the allocation gone, three more pages are committed afresh */
    gf_dev_free(be, a);
    ck_assert_uint_eq(gf_dev_held(be), 3 * page);
    for (int i = 3; i < 6; i++)
        ck_assert_int_eq(gf_dev_page_alloc(be, &pg[i], &err), GF_OK);
    ck_assert_uint_eq(gf_dev_held(be), 6 * page);
    if (tb_is_cpu)
        ck_assert_int_eq(memfd_bytes(), (long long)(6 * page));
    /* the bytes of a reused page follow it: write, free, take, map, read */
    char *va;
    ck_assert_int_eq(gf_dev_vreserve(be, page, (void **)&va, &err), GF_OK);
    ck_assert_int_eq(gf_dev_map(be, va, pg[0], &err), GF_OK);
    unsigned char *src = malloc(page), *back = malloc(page);
    memset(src, 0x5a, page);
    tb_to_dev(be, va, src, page);
    ck_assert_int_eq(gf_dev_unmap(be, va, &err), GF_OK);
    ck_assert_int_eq(gf_dev_map(be, va, pg[0], &err), GF_OK);
    tb_from_dev(be, back, va, page);
    ck_assert(memcmp(src, back, page) == 0);
    ck_assert_int_eq(gf_dev_unmap(be, va, &err), GF_OK);
    gf_dev_vrelease(be, va, page);
    for (int i = 0; i < 6; i++)
        gf_dev_page_free(be, pg[i]);
    /* an allocation of the whole budget releases every free page */
    ck_assert_int_eq(gf_dev_alloc(be, POOL * page, &a, &err), GF_OK);
    ck_assert_uint_eq(gf_dev_held(be), POOL * page);
    if (tb_is_cpu)
        ck_assert_int_eq(memfd_bytes(), 0);
    gf_dev_free(be, a);
    free(src);
    free(back);
    gf_backend_free(be);
}
END_TEST

/* Mapping and unmapping a page never leaves a moment where an address range
 * of ours is free: another thread's mmap (malloc, a sanitizer's allocator)
 * could be handed it, and then lose it to our placeholder (a crash far from
 * here). While one thread maps and unmaps pages in a loop, another asks
 * mmap for exactly those addresses: it must never get them. */
typedef struct probe_arg {
    volatile int stop;
    char *va;      /* the reserved range */
    size_t len;    /* its bytes */
    size_t page;
    long probes, stolen;
} probe_arg;

static void *probe_range(void *p)
{
    probe_arg *a = p;
    for (size_t off = 0; !a->stop; off = (off + a->page) % a->len) {
        char *want = a->va + off;
        char *m = mmap(want, a->page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == want)
            a->stolen++; /* it was free; left alone, the test fails */
        else if (m != MAP_FAILED)
            munmap(m, a->page);
        a->probes++;
    }
    return NULL;
}

START_TEST(test_map_unmap_leave_no_hole)
{
    if (!tb_is_cpu)
        return; /* a property of the cpu backend's address-space juggling */
    enum { PAGES = 4 };
    gf_backend *be = tb_open_be(PAGES * PAGE, NULL, NULL);
    size_t page = gf_dev_page_size(be);
    gf_err err;
    int64_t pages[PAGES];
    for (int i = 0; i < PAGES; i++)
        ck_assert_int_eq(gf_dev_page_alloc(be, &pages[i], &err), GF_OK);
    char *va;
    ck_assert_int_eq(gf_dev_vreserve(be, PAGES * page, (void **)&va, &err), GF_OK);
    probe_arg a = {0, va, PAGES * page, page, 0, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, probe_range, &a), 0);
    gf_status st = GF_OK;
    for (int round = 0; round < 3000 && st == GF_OK && a.stolen == 0; round++) {
        for (int i = 0; i < PAGES && st == GF_OK; i++)
            st = gf_dev_map(be, va + (size_t)i * page, pages[i], &err);
        for (int i = 0; i < PAGES && st == GF_OK; i++)
            st = gf_dev_unmap(be, va + (size_t)i * page, &err);
    }
    a.stop = 1;
    pthread_join(t, NULL);
    ck_assert_int_gt(a.probes, 0);
    ck_assert_msg(a.stolen == 0, "mmap was handed one of our ranges %ld times in %ld probes",
                  a.stolen, a.probes);
    ck_assert_msg(st == GF_OK, "%s", err.msg);
    gf_dev_vrelease(be, va, PAGES * page);
    for (int i = 0; i < PAGES; i++)
        gf_dev_page_free(be, pages[i]);
    gf_backend_free(be);
}
END_TEST

/* The request arena: a request that grows it is the last to allocate; the
 * same request again makes no device allocation or free, its blocks do not
 * overlap and hold what is written to them. */
START_TEST(test_arena_warm_requests_allocate_nothing)
{
    size_t page = tb_dev_page();
    gf_backend *be = tb_open_be(16 * page, NULL, NULL);
    gf_dev_arena *a;
    gf_err err;
    ck_assert_int_eq(gf_dev_arena_new(be, &a, &err), GF_OK);
    ck_assert_uint_eq(gf_dev_arena_held(a), 0);
    const size_t sizes[] = {1000, 0, page / 2, 3 * page, 17};
    enum { N = sizeof sizes / sizeof sizes[0] };
    uint64_t a0 = 0, f0 = 0;
    for (int round = 0; round < 3; round++) {
        void *p[N];
        for (int i = 0; i < N; i++) {
            ck_assert_msg(gf_dev_arena_alloc(a, sizes[i], &p[i], &err) == GF_OK, "%s", err.msg);
            ck_assert_ptr_nonnull(p[i]);
            ck_assert_uint_eq((uintptr_t)p[i] % 256, 0);
            for (int j = 0; j < i; j++) /* no two regions overlap */
                ck_assert((char *)p[i] >= (char *)p[j] + sizes[j] ||
                          (char *)p[j] >= (char *)p[i] + (sizes[i] ? sizes[i] : 1));
        }
        char *buf = malloc(3 * page), *back = malloc(3 * page);
        ck_assert(buf != NULL && back != NULL);
        for (size_t k = 0; k < 3 * page; k++)
            buf[k] = (char)(k * 7 + (size_t)round);
        tb_to_dev(be, p[3], buf, 3 * page);
        tb_from_dev(be, back, p[3], 3 * page);
        ck_assert_int_eq(memcmp(buf, back, 3 * page), 0);
        free(buf);
        free(back);
        gf_dev_arena_reset(a);
        uint64_t a1, f1;
        gf_dev_counters(be, &a1, &f1);
        if (round == 0) /* it grew, then merged its blocks into one */
            ck_assert_uint_gt(a1, a0);
        else /* warm: the first round's reset left one block that holds it all */
            ck_assert_msg(a1 == a0 && f1 == f0, "round %d: %llu allocs, %llu frees", round,
                          (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
        a0 = a1;
        f0 = f1;
    }
    /* a big request, then two windows of 256 small ones: the arena gives
     * the rest back (at the end of the first window without the big one) */
    void *big0;
    ck_assert_int_eq(gf_dev_arena_alloc(a, 8 * page, &big0, &err), GF_OK);
    gf_dev_arena_reset(a);
    ck_assert_uint_ge(gf_dev_arena_held(a), 8 * page);
    for (int i = 0; i < 2 * 256; i++) {
        void *small;
        ck_assert_int_eq(gf_dev_arena_alloc(a, 1000, &small, &err), GF_OK);
        gf_dev_arena_reset(a);
    }
    ck_assert_uint_lt(gf_dev_arena_held(a), 8 * page);
    ck_assert_uint_le(gf_dev_arena_held(a), page > (64u << 10) ? page : (64u << 10));
    /* more than the budget: the allocator's error, and the arena still works */
    void *big;
    ck_assert_int_eq(gf_dev_arena_alloc(a, 32 * page, &big, &err), GF_ERR_NO_DEVICE_MEM);
    gf_dev_arena_reset(a);
    ck_assert_int_eq(gf_dev_arena_alloc(a, page, &big, &err), GF_OK);
    gf_dev_arena_free(a);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_vreserve_rejects_partial_pages)
{
    gf_backend *be = tb_open_be(8 * PAGE, NULL, NULL);
    void *va;
    gf_err err;
    ck_assert_int_eq(gf_dev_vreserve(be, gf_dev_page_size(be) + 1, &va, &err), GF_ERR_INVALID);
    ck_assert_int_eq(gf_dev_vreserve(be, 0, &va, &err), GF_ERR_INVALID);
    gf_backend_free(be);
}
END_TEST

/* A page size is a power of two (so a reservation can start on a page:
 * cuMemAddressReserve takes only power-of-two alignments), at least the
 * device's granularity and at least what was asked for. */
START_TEST(test_page_size_is_a_power_of_two)
{
    size_t gran = tb_dev_page(); /* PAGE, or the device's granularity if larger */
    size_t want = 3 * gran;
    gf_backend_config cfg = {.device = tb_device, .device_budget = 16 * want, .page_size = want};
    gf_backend *be;
    gf_err err;
    ck_assert_msg(gf_backend_open(&cfg, &be, &err) == GF_OK, "%s", err.msg);
    size_t page = gf_dev_page_size(be);
    ck_assert_uint_eq(page, 4 * gran);
    ck_assert_uint_eq(page & (page - 1), 0);
    for (int i = 0; i < 4; i++) { /* every reservation starts on a page */
        void *va;
        ck_assert_int_eq(gf_dev_vreserve(be, 3 * page, &va, &err), GF_OK);
        ck_assert_uint_eq((uintptr_t)va % page, 0);
        gf_dev_vrelease(be, va, 3 * page);
    }
    gf_backend_free(be);
    cfg.page_size = ((size_t)1 << 30) + 1;
    ck_assert_int_eq(gf_backend_open(&cfg, &be, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "page size") != NULL, "%s", err.msg);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1)
        tb_device = argv[1];
    tb_is_cpu = strcmp(tb_device, "cpu") == 0;
    /* asked in a child: a CUDA context must not exist before Check forks */
    if (!tb_is_cpu && gf_test_ask_in_child(gf_backend_cuda_device_count) == 0) {
        printf("SKIP: %s: no CUDA GPU on this machine (or the CUDA module is not built)\n",
               tb_device);
        return GF_TEST_SKIP;
    }
    Suite *s = suite_create(tb_is_cpu ? "backend_cpu" : "backend_cuda");
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_info);
    tcase_add_test(tc, test_budget);
    tcase_add_test(tc, test_pages_scattered);
    tcase_add_test(tc, test_free_pages_count_against_the_budget);
    tcase_add_test(tc, test_precommit_in_the_background);
    tcase_add_test(tc, test_map_unmap_leave_no_hole);
    tcase_add_test(tc, test_arena_warm_requests_allocate_nothing);
    tcase_add_test(tc, test_vreserve_rejects_partial_pages);
    tcase_add_test(tc, test_page_size_is_a_power_of_two);
    tb_pcie_tests(tc);
    tb_stream_tests(tc);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
