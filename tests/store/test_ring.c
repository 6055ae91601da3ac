/* Tests for the store's request-path ring (store/ring.c): producers on
 * several threads against the one consumer, every record arriving once and
 * in each producer's order; a full ring drops and counts rather than wait. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "store/ring.h"
#include "testutil.h"

typedef struct {
    uint32_t producer;
    uint32_t seq;
    char pad[40];
} rec;

#define PRODUCERS 4
#define PER_PRODUCER 5000

typedef struct {
    gf_ring *r;
    uint32_t id;
    uint64_t refused;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (uint32_t i = 0; i < PER_PRODUCER;) {
        uint64_t pos;
        rec *x = gf_ring_claim(p->r, &pos);
        if (x == NULL) { /* full: a real producer drops it; this one retries */
            p->refused++;
            sched_yield();
            continue;
        }
        x->producer = p->id;
        x->seq = i++;
        gf_ring_publish(p->r, pos);
    }
    return NULL;
}

START_TEST(test_many_producers_one_consumer)
{
    gf_ring r;
    gf_err err;
    ck_assert_int_eq(gf_ring_init(&r, 50, sizeof(rec), &err), GF_OK);
    ck_assert_uint_eq(gf_ring_capacity(&r), 64);
    producer p[PRODUCERS];
    pthread_t t[PRODUCERS];
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        p[i] = (producer){&r, i, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    }
    uint32_t next[PRODUCERS] = {0};
    uint64_t got = 0;
    while (got < (uint64_t)PRODUCERS * PER_PRODUCER) {
        uint64_t n = gf_ring_pending(&r);
        if (n == 0)
            sched_yield();
        for (uint64_t k = 0; k < n; k++) {
            const rec *x = gf_ring_next(&r);
            ck_assert_uint_lt(x->producer, PRODUCERS);
            ck_assert_uint_eq(x->seq, next[x->producer]); /* once each, in order */
            next[x->producer]++;
            gf_ring_release(&r);
            got++;
        }
        gf_ring_retire(&r);
    }
    uint64_t refused = 0;
    for (uint32_t i = 0; i < PRODUCERS; i++) {
        pthread_join(t[i], NULL);
        refused += p[i].refused;
        ck_assert_uint_eq(next[i], PER_PRODUCER);
    }
    ck_assert_uint_eq(gf_ring_dropped(&r), refused);
    ck_assert_uint_eq(gf_ring_claimed(&r), (uint64_t)PRODUCERS * PER_PRODUCER);
    ck_assert_uint_eq(gf_ring_queued(&r), 0);
    gf_ring_deinit(&r);
}
END_TEST

START_TEST(test_full_ring_drops)
{
    gf_ring r;
    ck_assert_int_eq(gf_ring_init(&r, 4, sizeof(rec), NULL), GF_OK);
    uint64_t pos;
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(gf_ring_claim(&r, &pos));
        ck_assert_uint_eq(gf_ring_publish(&r, pos), (uint64_t)i + 1); /* queued, unretired */
    }
    ck_assert_ptr_null(gf_ring_claim(&r, &pos));
    ck_assert_uint_eq(gf_ring_dropped(&r), 1);
    ck_assert_uint_eq(gf_ring_pending(&r), 4);
    gf_ring_next(&r);
    gf_ring_release(&r);
    ck_assert_ptr_nonnull(gf_ring_claim(&r, &pos)); /* one slot free again */
    gf_ring_publish(&r, pos);
    gf_ring_retire(&r);
    ck_assert_uint_eq(gf_ring_queued(&r), 4);
    gf_ring_deinit(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_ring");
    TCase *tc = tcase_create("ring");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_many_producers_one_consumer);
    tcase_add_test(tc, test_full_ring_drops);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
