/* Benchmark: host-to-device copy bandwidth from pinned memory on the copy
 * stream, chunk sizes 64 KiB .. 64 MiB.
 *
 *   bench_copy [cpu|cuda:N]
 *
 * cpu: the bandwidth as a fraction of plain memcpy between the same buffers,
 * measured in the same run (the copy stream is a thread, so this is the cost
 * of queueing, waking and event bookkeeping). cuda: GB/s and the fraction of
 * the PCIe link's theoretical peak. Prints key=value lines; the headline is
 * copy_efficiency = the lowest fraction over chunks >= 4 MiB (target >= 0.9),
 * with h2d_gbps (the best chunk) and, on cuda, link_peak_gbps (the link's
 * maximum). map_us_per_page: mapping 64 pages of the device pool into a
 * reserved range as the cache does, with gf_dev_map_range (cuda: cuMemMap
 * per page, one cuMemSetAccess for the range), per page; map_one_us_per_page:
 * the same pages mapped one by one (a cuMemSetAccess each); unmap_us_per_page
 * (cuMemUnmap); best of three rounds.
 * Never fails on speed. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define BUF ((size_t)64 << 20)
#define MAP_PAGES 64

/* Mapping and unmapping pool pages in a reserved range, per page. */
static int bench_map(gf_backend *be)
{
    size_t page = gf_dev_page_size(be);
    int64_t pages[MAP_PAGES];
    bool mapped[MAP_PAGES] = {false};
    gf_err err;
    char *va = NULL;
    int n = 0, rc = 1;
    for (; n < MAP_PAGES; n++)
        if (gf_dev_page_alloc(be, &pages[n], &err) != GF_OK)
            goto out;
    if (gf_dev_vreserve(be, MAP_PAGES * page, (void **)&va, &err) != GF_OK)
        goto out;
    /* as the cache maps a model: the whole range at once (cuda: one
     * cuMemSetAccess for it), then page by page (one each) */
    double best_map = 1e9, best_unmap = 1e9, best_one = 1e9;
    for (int round = 0; round < 3; round++) {
        double t0 = now();
        if (gf_dev_map_range(be, va, pages, MAP_PAGES, &err) != GF_OK)
            goto out;
        for (int i = 0; i < MAP_PAGES; i++)
            mapped[i] = true;
        double t1 = now();
        for (int i = 0; i < MAP_PAGES; i++) {
            if (gf_dev_unmap(be, va + (size_t)i * page, &err) != GF_OK)
                goto out;
            mapped[i] = false;
        }
        double t2 = now();
        for (int i = 0; i < MAP_PAGES; i++) {
            if (gf_dev_map(be, va + (size_t)i * page, pages[i], &err) != GF_OK)
                goto out;
            mapped[i] = true;
        }
        double t3 = now();
        gf_dev_unmap_range(be, va, MAP_PAGES);
        for (int i = 0; i < MAP_PAGES; i++)
            mapped[i] = false;
        if (t1 - t0 < best_map)
            best_map = t1 - t0;
        if (t2 - t1 < best_unmap)
            best_unmap = t2 - t1;
        if (t3 - t2 < best_one)
            best_one = t3 - t2;
    }
    printf("map_page_bytes=%zu\n", page);
    printf("map_us_per_page=%.2f\n", best_map / MAP_PAGES * 1e6);
    printf("map_one_us_per_page=%.2f\n", best_one / MAP_PAGES * 1e6);
    printf("unmap_us_per_page=%.2f\n", best_unmap / MAP_PAGES * 1e6);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_copy: mapping pages: %s\n", err.msg);
    for (int i = 0; i < MAP_PAGES; i++)
        if (mapped[i])
            gf_dev_unmap(be, va + (size_t)i * page, NULL);
    if (va != NULL)
        gf_dev_vrelease(be, va, MAP_PAGES * page);
    for (int i = 0; i < n; i++)
        gf_dev_page_free(be, pages[i]);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "cpu";
    /* 1 GiB on a GPU: the cuda backend commits its whole budget at open */
    gf_backend_config cfg = {.device = dev,
                             .device_budget = strcmp(dev, "cpu") == 0 ? 256u << 20 : 1u << 30};
    gf_backend *be;
    gf_err err;
    if (gf_backend_open(&cfg, &be, &err) != GF_OK) {
        fprintf(stderr, "bench_copy: %s\n", err.msg);
        return strcmp(dev, "cpu") == 0 ? 1 : 77;
    }
    gf_device_info info;
    gf_backend_info(be, &info);
    bool cpu = info.kind == GF_DEVICE_CPU;
    void *host, *devbuf;
    if (gf_host_alloc_pinned(be, BUF, &host, &err) != GF_OK ||
        gf_dev_alloc(be, BUF, &devbuf, &err) != GF_OK) {
        fprintf(stderr, "bench_copy: %s\n", err.msg);
        return 1;
    }
    memset(host, 1, BUF);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    printf("device=%s\n", info.name);

    /* reference: plain memcpy (cpu) or the link's peak (cuda) */
    double ref_gbps = 0;
    if (cpu) {
        memcpy(devbuf, host, BUF); /* warm both buffers */
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            memcpy(devbuf, host, BUF);
            double t = now() - t0;
            if (t < best)
                best = t;
        }
        ref_gbps = (double)BUF / best / 1e9;
        printf("memcpy_gbps=%.2f\n", ref_gbps);
    } else {
        ref_gbps = info.link_peak_gbps;
        printf("pcie_gen=%d pcie_width=%d\n", info.pcie_gen, info.pcie_width);
        printf("link_peak_gbps=%.1f\n", ref_gbps);
    }
    static const size_t chunks[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    double worst_big = 1e9, best_gbps = 0;
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        size_t chunk = chunks[ci];
        size_t per_pass = BUF / chunk;
        int passes = 4;
        /* warm-up pass */
        for (size_t i = 0; i < per_pass; i++)
            gf_memcpy_async(be, cs, (char *)devbuf + i * chunk, (char *)host + i * chunk, chunk,
                            GF_COPY_H2D, NULL);
        gf_stream_sync(be, cs, NULL);
        double best = 1e9;
        for (int p = 0; p < passes; p++) {
            double t0 = now();
            for (size_t i = 0; i < per_pass; i++)
                gf_memcpy_async(be, cs, (char *)devbuf + i * chunk, (char *)host + i * chunk,
                                chunk, GF_COPY_H2D, NULL);
            if (gf_stream_sync(be, cs, &err) != GF_OK) {
                fprintf(stderr, "bench_copy: %s\n", err.msg);
                return 1;
            }
            double t = now() - t0;
            if (t < best)
                best = t;
        }
        double gbps = (double)BUF / best / 1e9;
        if (gbps > best_gbps)
            best_gbps = gbps;
        double frac = ref_gbps > 0 ? gbps / ref_gbps : 0;
        printf("chunk_bytes=%zu copy_gbps=%.2f fraction=%.3f\n", chunk, gbps, frac);
        if (chunk >= (4u << 20) && frac < worst_big)
            worst_big = frac;
    }
    if (ref_gbps <= 0) /* link peak unknown: report against the best chunk */
        printf("note=link peak unknown; fractions are relative to the best chunk\n");
    printf("h2d_gbps=%.2f\n", best_gbps);
    printf("copy_efficiency=%.3f\n", ref_gbps > 0 ? worst_big : 1.0);
    gf_dev_free(be, devbuf);
    gf_host_free_pinned(be, host);
    int rc = bench_map(be);
    gf_backend_free(be);
    return rc;
}
