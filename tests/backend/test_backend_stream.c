/* Tests for runtime/backend's copy stream and events: ordering, waits
 * across streams, injected faults, a lost device, the cpu backend's
 * emulated link. Part of the backend suites (test_backend.c runs them on
 * the device it is given). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend_testlib.h"
#include "core/fault.h"
#include "testutil.h"

START_TEST(test_copy_ordering_and_many_in_flight)
{
    gf_backend *be = tb_open_be(16 << 20, NULL, NULL);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_err err;
    enum { N = 2000, SZ = 512 };
    unsigned char *host;
    ck_assert_int_eq(gf_host_alloc_pinned(be, (size_t)N * SZ, (void **)&host, &err), GF_OK);
    unsigned char *dev;
    ck_assert_int_eq(gf_dev_alloc(be, (size_t)N * SZ, (void **)&dev, &err), GF_OK);
    for (int i = 0; i < N; i++)
        memset(host + (size_t)i * SZ, i & 0xff, SZ);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(gf_memcpy_async(be, cs, dev + (size_t)i * SZ, host + (size_t)i * SZ,
                                         SZ, GF_COPY_H2D, &err), GF_OK);
    /* ordering: later copies to one place win, in queue order */
    unsigned char *slot;
    ck_assert_int_eq(gf_dev_alloc(be, 64, (void **)&slot, &err), GF_OK);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(gf_memcpy_async(be, cs, slot, host + (size_t)i * SZ, 64, GF_COPY_H2D,
                                         &err), GF_OK);
    gf_event *ev;
    ck_assert_int_eq(gf_event_new(be, &ev, &err), GF_OK);
    ck_assert(gf_event_query(be, ev)); /* never recorded: done */
    ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_OK);
    ck_assert_int_eq(gf_event_sync(be, ev, &err), GF_OK);
    ck_assert(gf_event_query(be, ev));
    unsigned char *back = malloc((size_t)N * SZ);
    tb_from_dev(be, back, dev, (size_t)N * SZ);
    ck_assert(memcmp(back, host, (size_t)N * SZ) == 0);
    unsigned char last[64];
    tb_from_dev(be, last, slot, 64);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(last[i], 49);
    ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_OK);
    free(back);
    gf_event_free(be, ev);
    gf_dev_free(be, slot);
    gf_dev_free(be, dev);
    gf_host_free_pinned(be, host);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_event_waits_for_its_copy)
{
    if (!tb_is_cpu)
        return; /* the gate hook is a cpu feature */
    gf_test_gate g = GF_TEST_GATE_INIT;
    gf_backend *be = tb_open_be(4 << 20, gf_test_gate_hook, &g);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_stream *comp = gf_backend_stream(be, GF_STREAM_COMPUTE);
    gf_err err;
    float *host, *dev;
    ck_assert_int_eq(gf_host_alloc_pinned(be, 4096, (void **)&host, &err), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 4096, (void **)&dev, &err), GF_OK);
    for (int i = 0; i < 1024; i++) {
        host[i] = (float)i;
        dev[i] = -1.0f; /* cpu device memory is host-addressable */
    }
    gf_event *e1, *e2;
    ck_assert_int_eq(gf_event_new(be, &e1, &err), GF_OK);
    ck_assert_int_eq(gf_event_new(be, &e2, &err), GF_OK);
    ck_assert_int_eq(gf_memcpy_async(be, cs, dev, host, 2048, GF_COPY_H2D, &err), GF_OK);
    ck_assert_int_eq(gf_event_record(be, e1, cs, &err), GF_OK);
    ck_assert_int_eq(gf_memcpy_async(be, cs, dev + 512, host + 512, 2048, GF_COPY_H2D, &err),
                     GF_OK);
    ck_assert_int_eq(gf_event_record(be, e2, cs, &err), GF_OK);
    gf_test_gate_wait_started(&g, 1);
    /* the first copy is held at the gate: neither event is done */
    ck_assert(!gf_event_query(be, e1));
    ck_assert(!gf_event_query(be, e2));
    ck_assert(dev[0] == -1.0f);
    gf_test_gate_allow(&g, 1);
    ck_assert_int_eq(gf_event_sync(be, e1, &err), GF_OK);
    ck_assert(dev[511] == 511.0f);
    gf_test_gate_wait_started(&g, 2);
    ck_assert(!gf_event_query(be, e2)); /* second copy still held */
    ck_assert(dev[512] == -1.0f);
    gf_test_gate_allow(&g, 1);
    ck_assert_int_eq(gf_stream_wait_event(be, comp, e2, &err), GF_OK);
    ck_assert(dev[1023] == 1023.0f); /* compute sees the copied data */
    ck_assert(gf_event_query(be, e2));
    gf_event_free(be, e1);
    gf_event_free(be, e2);
    gf_dev_free(be, dev);
    gf_host_free_pinned(be, host);
    gf_backend_free(be);
}
END_TEST

static void *release_later(void *arg)
{
    gf_test_gate *g = arg;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gf_test_gate_allow(g, 1);
    return NULL;
}

START_TEST(test_compute_wait_blocks_until_copy_done)
{
    if (!tb_is_cpu)
        return;
    gf_test_gate g = GF_TEST_GATE_INIT;
    gf_backend *be = tb_open_be(4 << 20, gf_test_gate_hook, &g);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_stream *comp = gf_backend_stream(be, GF_STREAM_COMPUTE);
    gf_err err;
    int *host, *dev;
    ck_assert_int_eq(gf_host_alloc_pinned(be, 4 << 20, (void **)&host, &err), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 1 << 20, (void **)&dev, &err), GF_OK);
    for (int i = 0; i < (1 << 18); i++)
        host[i] = i;
    gf_event *ev;
    ck_assert_int_eq(gf_event_new(be, &ev, &err), GF_OK);
    ck_assert_int_eq(gf_memcpy_async(be, cs, dev, host, 1 << 20, GF_COPY_H2D, &err), GF_OK);
    ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_later, &g), 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert_int_eq(gf_stream_wait_event(be, comp, ev, &err), GF_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* returned only after the copy finished: every element is there */
    for (int i = 0; i < (1 << 18); i++)
        ck_assert_int_eq(dev[i], i);
    double waited = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    ck_assert_msg(waited >= 0.05, "wait returned after %.3f s, before the gate opened", waited);
    pthread_join(t, NULL);
    /* a copy-stream wait on a compute-stream event (already complete) does
     * not block the copy stream */
    gf_event *ce;
    ck_assert_int_eq(gf_event_new(be, &ce, &err), GF_OK);
    ck_assert_int_eq(gf_event_record(be, ce, comp, &err), GF_OK);
    ck_assert(gf_event_query(be, ce));
    ck_assert_int_eq(gf_stream_wait_event(be, cs, ce, &err), GF_OK);
    gf_test_gate_allow(&g, 1000);
    ck_assert_int_eq(gf_memcpy_async(be, cs, dev, host + 1, 4, GF_COPY_H2D, &err), GF_OK);
    ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_OK);
    ck_assert_int_eq(dev[0], 1);
    gf_event_free(be, ce);
    gf_event_free(be, ev);
    gf_dev_free(be, dev);
    gf_host_free_pinned(be, host);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_copy_stream_waits_on_event)
{
    if (!tb_is_cpu)
        return;
    /* copy stream op order: a WAIT on an event recorded after a held copy
     * holds back a later copy queued behind it */
    gf_test_gate g = GF_TEST_GATE_INIT;
    gf_backend *be = tb_open_be(4 << 20, gf_test_gate_hook, &g);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_err err;
    int *host, *dev;
    ck_assert_int_eq(gf_host_alloc_pinned(be, 64, (void **)&host, &err), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 64, (void **)&dev, &err), GF_OK);
    host[0] = 1;
    host[1] = 2;
    dev[0] = dev[1] = 0;
    gf_event *ev;
    ck_assert_int_eq(gf_event_new(be, &ev, &err), GF_OK);
    ck_assert_int_eq(gf_memcpy_async(be, cs, &dev[0], &host[0], 4, GF_COPY_H2D, &err), GF_OK);
    ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_OK);
    ck_assert_int_eq(gf_stream_wait_event(be, cs, ev, &err), GF_OK);
    ck_assert_int_eq(gf_memcpy_async(be, cs, &dev[1], &host[1], 4, GF_COPY_H2D, &err), GF_OK);
    gf_test_gate_wait_started(&g, 1);
    ck_assert_int_eq(dev[1], 0);
    gf_test_gate_allow(&g, 2);
    ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_OK);
    ck_assert_int_eq(dev[0], 1);
    ck_assert_int_eq(dev[1], 2);
    gf_event_free(be, ev);
    gf_dev_free(be, dev);
    gf_host_free_pinned(be, host);
    gf_backend_free(be);
}
END_TEST

START_TEST(test_faults)
{
    gf_backend *be = tb_open_be(4 << 20, NULL, NULL);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_err err;
    void *p;
    gf_fault_arm("dev_alloc", 1, 1);
    ck_assert_int_eq(gf_dev_alloc(be, 128, &p, &err), GF_ERR_NO_DEVICE_MEM);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(gf_dev_alloc(be, 128, &p, &err), GF_OK); /* only the first failed */
    gf_dev_free(be, p);
    int64_t pg;
    gf_fault_arm("dev_page_alloc", 1, 1);
    ck_assert_int_eq(gf_dev_page_alloc(be, &pg, &err), GF_ERR_NO_DEVICE_MEM);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0); /* a failure leaves no accounting behind */
    gf_fault_arm("host_alloc", 1, 1);
    ck_assert_int_eq(gf_host_alloc_pinned(be, 64, &p, &err), GF_ERR_NOMEM);
    if (tb_is_cpu) {
        /* a copy that fails on the copy stream is reported by the events
         * recorded after it and by the next sync, which clears it */
        char *h, *d;
        ck_assert_int_eq(gf_host_alloc_pinned(be, 64, (void **)&h, &err), GF_OK);
        ck_assert_int_eq(gf_dev_alloc(be, 64, (void **)&d, &err), GF_OK);
        gf_event *ev;
        ck_assert_int_eq(gf_event_new(be, &ev, &err), GF_OK);
        gf_fault_arm("copy_exec", 2, 1);
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(gf_memcpy_async(be, cs, d, h, 64, GF_COPY_H2D, &err), GF_OK);
        ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_OK);
        ck_assert_int_eq(gf_event_sync(be, ev, &err), GF_ERR_DEVICE);
        ck_assert_msg(strstr(err.msg, "injected") != NULL, "%s", err.msg);
        ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_ERR_DEVICE);
        ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_OK);
        ck_assert_int_eq(gf_memcpy_async(be, cs, d, h, 64, GF_COPY_H2D, &err), GF_OK);
        ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_OK);
        ck_assert_int_eq(gf_event_sync(be, ev, &err), GF_OK);
        gf_fault_arm("memcpy_async", 1, 1);
        ck_assert_int_eq(gf_memcpy_async(be, cs, d, h, 64, GF_COPY_H2D, &err), GF_ERR_DEVICE);
        gf_event_free(be, ev);
        gf_dev_free(be, d);
        gf_host_free_pinned(be, h);
    }
    gf_fault_reset();
    gf_backend_free(be);
}
END_TEST

/* A lost device (a CUDA context after an illegal address, an ECC error):
 * gf_backend_lost says so, and every later call fails with the same sticky
 * error; closing still works. On cpu through the "device_lost" fault site,
 * which the compute stream's sync hits. */
START_TEST(test_device_lost)
{
    if (!tb_is_cpu)
        return; /* no fault can be injected into a real GPU from here */
    gf_backend *be = tb_open_be(8 * tb_dev_page(), NULL, NULL);
    gf_stream *comp = gf_backend_stream(be, GF_STREAM_COMPUTE);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    gf_err err;
    char *h, *d;
    ck_assert_int_eq(gf_host_alloc_pinned(be, 64, (void **)&h, &err), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 64, (void **)&d, &err), GF_OK);
    ck_assert(!gf_backend_lost(be));
    ck_assert_int_eq(gf_stream_sync(be, comp, &err), GF_OK);
    ck_assert(!gf_backend_lost(be)); /* a failure alone is not a loss */
    ck_assert_int_eq(gf_memcpy_async(be, comp, NULL, h, 64, GF_COPY_H2D, &err), GF_ERR_INVALID);
    ck_assert(!gf_backend_lost(be));
    gf_fault_arm("device_lost", 1, 1);
    ck_assert_int_eq(gf_stream_sync(be, comp, &err), GF_ERR_DEVICE);
    ck_assert_msg(strstr(err.msg, "lost") != NULL, "%s", err.msg);
    ck_assert(gf_backend_lost(be));
    ck_assert(gf_backend_lost(be));
    /* sticky: every call that reaches the device fails from now on */
    ck_assert_int_eq(gf_stream_sync(be, comp, &err), GF_ERR_DEVICE);
    ck_assert_int_eq(gf_stream_sync(be, cs, &err), GF_ERR_DEVICE);
    ck_assert_int_eq(gf_memcpy_async(be, cs, d, h, 64, GF_COPY_H2D, &err), GF_ERR_DEVICE);
    ck_assert_int_eq(gf_memcpy_async(be, comp, d, h, 64, GF_COPY_H2D, &err), GF_ERR_DEVICE);
    void *p;
    ck_assert_int_eq(gf_dev_alloc(be, 64, &p, &err), GF_ERR_DEVICE);
    int64_t pg;
    ck_assert_int_eq(gf_dev_page_alloc(be, &pg, &err), GF_ERR_DEVICE);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 64); /* the failures left no accounting behind */
    gf_event *ev;
    ck_assert_int_eq(gf_event_new(be, &ev, &err), GF_OK);
    ck_assert_int_eq(gf_event_record(be, ev, cs, &err), GF_ERR_DEVICE);
    ck_assert_int_eq(gf_stream_wait_event(be, comp, ev, &err), GF_ERR_DEVICE);
    const gf_kernels *k = gf_backend_kernels(be);
    ck_assert_int_ne(k->sync(k->ctx, comp), 0);
    gf_event_free(be, ev);
    gf_dev_free(be, d);
    gf_host_free_pinned(be, h);
    gf_fault_reset();
    gf_backend_free(be);
}
END_TEST

START_TEST(test_bandwidth_emulation)
{
    if (!tb_is_cpu)
        return;
    /* 4 MiB at 40 MB/s takes about 0.1 s on the copy stream */
    gf_backend_config cfg = {.device = "cpu", .device_budget = 8 << 20,
                             .cpu_copy_bandwidth = 40 * 1000 * 1000};
    gf_backend *be;
    ck_assert_int_eq(gf_backend_open(&cfg, &be, NULL), GF_OK);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    void *h, *d;
    ck_assert_int_eq(gf_host_alloc_pinned(be, 4 << 20, &h, NULL), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 4 << 20, &d, NULL), GF_OK);
    memset(h, 3, 4 << 20);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert_int_eq(gf_memcpy_async(be, cs, d, h, 4 << 20, GF_COPY_H2D, NULL), GF_OK);
    ck_assert_int_eq(gf_stream_sync(be, cs, NULL), GF_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    ck_assert_msg(t >= 0.09, "emulated link too fast: %.3f s", t);
    ck_assert(((unsigned char *)d)[(4 << 20) - 1] == 3);
    gf_dev_free(be, d);
    gf_host_free_pinned(be, h);
    gf_backend_free(be);
}
END_TEST

void tb_stream_tests(TCase *tc)
{
    tcase_add_test(tc, test_copy_ordering_and_many_in_flight);
    tcase_add_test(tc, test_event_waits_for_its_copy);
    tcase_add_test(tc, test_compute_wait_blocks_until_copy_done);
    tcase_add_test(tc, test_copy_stream_waits_on_event);
    tcase_add_test(tc, test_faults);
    tcase_add_test(tc, test_device_lost);
    tcase_add_test(tc, test_bandwidth_emulation);
}
