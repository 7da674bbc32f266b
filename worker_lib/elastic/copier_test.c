/*
 * copier_test: when a copy of the state is due (the pure rule, case by case) and the copier's
 * thread: a copy is sent off the caller's thread, one offered while another is in flight is
 * skipped (not queued) and freed, a failed send is counted, and destroy waits for the copy in
 * flight. `copier_test <case>` runs one case.
 */
#include "copier.h"
#include "hvtest.h"

#include <pthread.h>
#include <string.h>

#include "mem.h"
#include "util.h"

static void test_due(void) {
    hv__copy_policy_t p = {.cost_factor = 20, .min_interval_ms = 1000, .max_interval_ms = 0};
    static const struct {
        int first;
        uint64_t since, cost;
        int want;
    } t[] = {
        {1, 0, 0, 1},      /* the first commit always */
        {0, 999, 0, 0},    /* never more often than the floor */
        {0, 1000, 10, 1},  /* cheap: at the floor */
        {0, 1000, 100, 0}, /* 100 ms a copy: 2 s apart at least */
        {0, 1999, 100, 0}, {0, 2000, 100, 1}, {0, 100000, 6000, 0}, /* a copy of 6 s: 120 s apart */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        ASSERT_EQ_INT(hv__copy_due(&p, t[i].first, t[i].since, t[i].cost), t[i].want);
    }
    p.max_interval_ms = 60000; /* ... unless a bound forces one */
    ASSERT_EQ_INT(hv__copy_due(&p, 0, 60000, 6000), 1);
    ASSERT_EQ_INT(hv__copy_due(&p, 0, 59999, 6000), 0);
}

/* A send that blocks until the test lets it go, and records what it got. */
typedef struct gate_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, calls;
    pthread_t thread;
    uint32_t gen;
    uint64_t commit;
    size_t len;
    hv_err rc;
} gate_t;

static hv_err gate_send(void *ud, uint32_t generation, uint64_t commit, const void *data,
                        size_t len) {
    gate_t *g = ud;
    pthread_mutex_lock(&g->mu);
    g->calls++;
    g->thread = pthread_self();
    g->gen = generation;
    g->commit = commit;
    g->len = len;
    (void)data;
    while (!g->open) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    hv_err rc = g->rc;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static void gate_open(gate_t *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void *copy_of(size_t n) {
    void *p = hv_malloc(n);
    memset(p, 7, n);
    return p;
}

static void test_skip_while_in_flight(void) {
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    hv__copy_policy_t p = {.cost_factor = 20};
    hv__copier_t *c = NULL;
    ASSERT_OK(hv__copier_create(gate_send, &g, &p, &c));
    uint64_t now = hv_now_ms();
    ASSERT_EQ_INT(hv__copier_want(c, now), 1);
    hv__copier_offer(c, 3, 41, copy_of(100), 100, 1, now);
    /* In flight (the gate holds it): the next due copy is skipped, and one offered anyway is
     * freed, not queued (LeakSanitizer checks the free). */
    ASSERT_EQ_INT(hv__copier_want(c, now + 100000), 0);
    hv__copier_offer(c, 3, 42, copy_of(100), 100, 1, now + 100000);
    ASSERT_RC(hv__copier_flush(c, 50), HV_ETIMEDOUT);
    gate_open(&g);
    ASSERT_OK(hv__copier_flush(c, (uint32_t)hvtest_scale(5000)));
    hv__copier_stats_t st;
    hv__copier_stats(c, &st);
    ASSERT_EQ_INT(st.sent, 1);
    ASSERT_EQ_INT(st.skipped, 2);
    ASSERT_EQ_INT(st.bytes_sent, 100);
    ASSERT_EQ_INT(g.calls, 1);
    ASSERT_EQ_INT(g.gen, 3);
    ASSERT_EQ_INT(g.commit, 41);
    ASSERT_TRUE(!pthread_equal(g.thread, pthread_self())); /* not the caller's thread */
    hv__copier_destroy(c);
}

static void test_failure_and_destroy(void) {
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER,
                .cv = PTHREAD_COND_INITIALIZER,
                .open = 1,
                .rc = HV_EUNAVAIL};
    hv__copy_policy_t p = {.cost_factor = 20};
    hv__copier_t *c = NULL;
    ASSERT_OK(hv__copier_create(gate_send, &g, &p, &c));
    hv__copier_offer(c, 1, 1, copy_of(10), 10, 0, hv_now_ms());
    ASSERT_OK(hv__copier_flush(c, (uint32_t)hvtest_scale(5000)));
    hv__copier_stats_t st;
    hv__copier_stats(c, &st);
    ASSERT_EQ_INT(st.failed, 1);
    ASSERT_EQ_INT(st.sent, 0);
    /* destroy right after an offer: the copy is sent (or freed), never leaked, and destroy
     * returns once the send has. */
    g.rc = HV_OK;
    hv__copier_offer(c, 1, 2, copy_of(10), 10, 0, hv_now_ms());
    hv__copier_destroy(c);
    ASSERT_EQ_INT(g.calls, 2);
    hv__copier_destroy(NULL);
}

/* The next copy is serialised into the last sent one's buffer when it is the same size (its pages
 * are there already); another size gets a new buffer. */
static void test_buffer_reused(void) {
    gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .open = 1};
    hv__copy_policy_t p = {.cost_factor = 20};
    hv__copier_t *c = NULL;
    ASSERT_OK(hv__copier_create(gate_send, &g, &p, &c));
    void *a = hv__copier_buffer(c, 64);
    ASSERT_TRUE(a != NULL);
    memset(a, 7, 64);
    hv__copier_offer(c, 1, 1, a, 64, 0, hv_now_ms());
    ASSERT_OK(hv__copier_flush(c, (uint32_t)hvtest_scale(5000)));
    void *b = hv__copier_buffer(c, 64);
    ASSERT_TRUE(b == a);
    void *d = hv__copier_buffer(c, 64); /* the spare is taken: a new one */
    ASSERT_TRUE(d != NULL && d != a);
    hv_free(d);
    hv__copier_offer(c, 1, 2, b, 64, 0, hv_now_ms());
    ASSERT_OK(hv__copier_flush(c, (uint32_t)hvtest_scale(5000)));
    void *e = hv__copier_buffer(c, 32);
    ASSERT_TRUE(e != NULL && e != a);
    hv_free(e);
    ASSERT_EQ_INT(g.calls, 2);
    hv__copier_destroy(c); /* frees the spare (ASan's leak check) */
}

static const hvtest_case_t cases[] = {
    {"buffer_reused", test_buffer_reused},
    {"due", test_due},
    {"skip_while_in_flight", test_skip_while_in_flight},
    {"failure_and_destroy", test_failure_and_destroy},
};

HVTEST_MAIN(cases)
