/*
 * sched_test: unit tests of the pure placement function. Each case builds a node snapshot,
 * places a request, and checks what an operator would check: which hosts got ranks, that
 * ranks on a host are contiguous with local ranks 0..k-1, GPU choice, and the refusals.
 * `sched_test <case>` runs one case.
 */
#include "sched.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hv_sched_node_t node(uint64_t id, uint32_t total, uint32_t used) {
    hv_sched_node_t nd = {.id = id, .slots_total = total, .slots_used = used, .schedulable = 1};
    return nd;
}

/* Checks the invariants every placement must hold; returns the number of hosts used. */
static int check_layout(const hv_sched_node_t *nodes, size_t n, const hv_sched_req_t *req,
                        const hv_sched_slot_t *out) {
    int hosts = 0;
    uint32_t r = 0;
    while (r < req->np) {
        size_t nd = out[r].node;
        uint32_t k = out[r].local_size;
        if (nd >= n || k == 0 || r + k > req->np) {
            fprintf(stderr, "rank %u: node %zu local_size %u out of range\n", r, nd, k);
            hv_check_failures++;
            return -1;
        }
        hosts++;
        CHECK(nodes[nd].schedulable);
        CHECK(k <= nodes[nd].slots_total - nodes[nd].slots_used);
        if (req->slots_per_host > 0) {
            CHECK(k <= req->slots_per_host);
        }
        uint64_t gpus_seen = 0;
        for (uint32_t j = 0; j < k; j++) {
            const hv_sched_slot_t *s = &out[r + j];
            CHECK_EQ(s->rank, r + j);
            CHECK_EQ(s->node, nd);
            CHECK_EQ(s->local_rank, j);
            CHECK_EQ(s->local_size, k);
            if (nodes[nd].gpus == 0) {
                CHECK_EQ(s->gpu, -1);
            } else {
                CHECK(s->gpu >= 0 && (uint32_t)s->gpu < nodes[nd].gpus);
                uint64_t bit = (uint64_t)1 << s->gpu;
                CHECK((nodes[nd].gpus_used_mask & bit) == 0);
                CHECK((gpus_seen & bit) == 0);
                gpus_seen |= bit;
            }
        }
        /* A node appears as one contiguous run only. */
        for (uint32_t q = 0; q < r; q++) {
            CHECK(out[q].node != nd);
        }
        r += k;
    }
    return hosts;
}

static void test_fills_hosts(void) {
    hv_sched_node_t nodes[] = {node(1, 4, 0), node(2, 4, 0), node(3, 4, 0)};
    hv_sched_req_t req = {.np = 6};
    hv_sched_slot_t out[6];
    CHECK_RC(hv_sched_place(nodes, 3, &req, out), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req, out), 2);
    /* Equal free slots: lower id first, filled completely. */
    for (int r = 0; r < 4; r++) {
        CHECK_EQ(out[r].node, 0);
        CHECK_EQ(out[r].local_size, 4);
    }
    for (int r = 4; r < 6; r++) {
        CHECK_EQ(out[r].node, 1);
        CHECK_EQ(out[r].local_rank, r - 4);
        CHECK_EQ(out[r].local_size, 2);
    }
}

static void test_most_free_first(void) {
    /* Node 2 alone can hold all six: one host beats two. */
    hv_sched_node_t nodes[] = {node(1, 4, 0), node(2, 8, 1), node(3, 8, 4)};
    hv_sched_req_t req = {.np = 6};
    hv_sched_slot_t out[6];
    CHECK_RC(hv_sched_place(nodes, 3, &req, out), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req, out), 1);
    CHECK_EQ(out[0].node, 1);
    CHECK_EQ(out[5].node, 1);
    CHECK_EQ(out[5].local_rank, 5);

    /* 9 ranks: 7 on node index 1, then 2 on the next most free (index 0 and 2 both have 4
     * free; id 1 < id 3). */
    hv_sched_req_t req9 = {.np = 9};
    hv_sched_slot_t out9[9];
    CHECK_RC(hv_sched_place(nodes, 3, &req9, out9), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req9, out9), 2);
    CHECK_EQ(out9[0].node, 1);
    CHECK_EQ(out9[0].local_size, 7);
    CHECK_EQ(out9[7].node, 0);
    CHECK_EQ(out9[7].local_size, 2);
    CHECK_EQ(out9[8].local_rank, 1);
}

static void test_slots_per_host(void) {
    hv_sched_node_t nodes[] = {node(1, 8, 0), node(2, 8, 0), node(3, 8, 0)};
    hv_sched_req_t req = {.np = 8, .slots_per_host = 3};
    hv_sched_slot_t out[8];
    CHECK_EQ(hv_sched_free(nodes, 3, 3), 9);
    CHECK_RC(hv_sched_place(nodes, 3, &req, out), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req, out), 3);
    CHECK_EQ(out[0].local_size, 3);
    CHECK_EQ(out[3].local_size, 3);
    CHECK_EQ(out[6].local_size, 2);
    CHECK_EQ(out[6].node, 2);
    req.np = 10;
    hv_sched_slot_t out10[10];
    CHECK_RC(hv_sched_place(nodes, 3, &req, out10), HV_EUNAVAIL);
}

static void test_unschedulable_skipped(void) {
    hv_sched_node_t nodes[] = {node(1, 16, 0), node(2, 4, 0), node(3, 4, 2)};
    nodes[0].schedulable = 0; // draining or blacklisted: the biggest node must not be used
    hv_sched_req_t req = {.np = 5};
    hv_sched_slot_t out[5];
    CHECK_EQ(hv_sched_free(nodes, 3, 0), 6);
    CHECK_EQ(hv_sched_capacity(nodes, 3, 0), 8);
    CHECK_RC(hv_sched_place(nodes, 3, &req, out), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req, out), 2);
    for (int r = 0; r < 5; r++) {
        CHECK(out[r].node != 0);
    }
    CHECK_EQ(out[0].node, 1);
    CHECK_EQ(out[4].node, 2);
}

static void test_gpu_assignment(void) {
    /* Node 1: 4 GPUs, 1 and 2 busy; node 2: 2 GPUs, none busy, but 8 slots. */
    hv_sched_node_t nodes[] = {node(1, 8, 2), node(2, 8, 0), node(3, 4, 0)};
    nodes[0].gpus = 4;
    nodes[0].gpus_used_mask = 0x6;
    nodes[1].gpus = 2;
    /* Free per node: min(6 slots, 2 GPUs) = 2, min(8, 2) = 2, CPU node 4. */
    CHECK_EQ(hv_sched_free(nodes, 3, 0), 8);
    CHECK_EQ(hv_sched_capacity(nodes, 3, 0), 4 + 2 + 4);
    hv_sched_req_t req = {.np = 8};
    hv_sched_slot_t out[8];
    CHECK_RC(hv_sched_place(nodes, 3, &req, out), HV_OK);
    CHECK_EQ(check_layout(nodes, 3, &req, out), 3);
    /* CPU node first (4 free), then the two GPU nodes by id. */
    CHECK_EQ(out[0].node, 2);
    CHECK_EQ(out[0].gpu, -1);
    CHECK_EQ(out[4].node, 0);
    CHECK_EQ(out[4].gpu, 0);
    CHECK_EQ(out[5].gpu, 3);
    CHECK_EQ(out[6].node, 1);
    CHECK_EQ(out[6].gpu, 0);
    CHECK_EQ(out[7].gpu, 1);

    /* All GPUs busy: the node takes nothing, even with free slots. */
    hv_sched_node_t full = node(7, 8, 0);
    full.gpus = 2;
    full.gpus_used_mask = 0x3;
    hv_sched_req_t one = {.np = 1};
    hv_sched_slot_t o1;
    CHECK_EQ(hv_sched_free(&full, 1, 0), 0);
    CHECK_RC(hv_sched_place(&full, 1, &one, &o1), HV_EUNAVAIL);

    /* Bits above the node's GPU count are ignored. */
    hv_sched_node_t odd = node(8, 4, 0);
    odd.gpus = 2;
    odd.gpus_used_mask = 0xF0;
    hv_sched_req_t two = {.np = 2};
    hv_sched_slot_t o2[2];
    CHECK_RC(hv_sched_place(&odd, 1, &two, o2), HV_OK);
    CHECK_EQ(o2[0].gpu, 0);
    CHECK_EQ(o2[1].gpu, 1);
}

static void test_not_enough(void) {
    hv_sched_node_t nodes[] = {node(1, 4, 3), node(2, 2, 0)};
    hv_sched_req_t req = {.np = 4};
    hv_sched_slot_t out[4];
    memset(out, 0xAB, sizeof(out));
    hv_sched_slot_t before[4];
    memcpy(before, out, sizeof(out));
    CHECK_RC(hv_sched_place(nodes, 2, &req, out), HV_EUNAVAIL);
    CHECK(memcmp(before, out, sizeof(out)) == 0); // out untouched on failure
    CHECK_RC(hv_sched_place(NULL, 0, &req, out), HV_EUNAVAIL);
    req.np = 3;
    CHECK_RC(hv_sched_place(nodes, 2, &req, out), HV_OK);
    req.np = 0;
    CHECK_RC(hv_sched_place(nodes, 2, &req, out), HV_EINVAL);
    req.np = 1;
    CHECK_RC(hv_sched_place(nodes, 2, NULL, out), HV_EINVAL);
    CHECK_RC(hv_sched_place(nodes, 2, &req, NULL), HV_EINVAL);
    CHECK_RC(hv_sched_place(NULL, 2, &req, out), HV_EINVAL);
}

static void test_capacity_vs_free(void) {
    hv_sched_node_t nodes[] = {node(1, 4, 4), node(2, 4, 1), node(3, 6, 0), node(4, 2, 5)};
    nodes[2].schedulable = 0;
    /* slots_used above slots_total (a shrunk node) counts as zero free, never wraps. */
    CHECK_EQ(hv_sched_free(nodes, 4, 0), 3);
    CHECK_EQ(hv_sched_capacity(nodes, 4, 0), 10);
    CHECK_EQ(hv_sched_free(nodes, 4, 2), 2);
    CHECK_EQ(hv_sched_capacity(nodes, 4, 2), 6);
    CHECK_EQ(hv_sched_free(NULL, 0, 0), 0);
    CHECK_EQ(hv_sched_capacity(NULL, 0, 0), 0);
    hv_sched_node_t big[3] = {node(1, UINT32_MAX, 0), node(2, UINT32_MAX, 0), node(3, 1, 0)};
    CHECK_EQ(hv_sched_free(big, 3, 0), UINT32_MAX);
    CHECK_EQ(hv_sched_capacity(big, 3, 0), UINT32_MAX);
}

static void test_tie_break(void) {
    /* Same free slots everywhere: ids decide, not array order. */
    hv_sched_node_t nodes[] = {node(9, 2, 0), node(3, 2, 0), node(5, 2, 0), node(3, 2, 0)};
    hv_sched_req_t req = {.np = 8};
    hv_sched_slot_t a[8], b[8];
    CHECK_RC(hv_sched_place(nodes, 4, &req, a), HV_OK);
    CHECK_RC(hv_sched_place(nodes, 4, &req, b), HV_OK);
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    CHECK_EQ(check_layout(nodes, 4, &req, a), 4);
    /* id 3 (index 1), id 3 (index 3: duplicate ids fall back to index), id 5, id 9. */
    CHECK_EQ(a[0].node, 1);
    CHECK_EQ(a[2].node, 3);
    CHECK_EQ(a[4].node, 2);
    CHECK_EQ(a[6].node, 0);
}

static int cmp_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void test_hundred_nodes(void) {
    enum { N = 100 };
    hv_sched_node_t nodes[N];
    uint32_t usable[N];
    uint32_t sum = 0;
    for (int i = 0; i < N; i++) {
        /* Mixed sizes, some busy, every 7th unschedulable, every 5th with GPUs. */
        nodes[i] = node((uint64_t)(1000 - i * 3), 1 + (uint32_t)(i * 37 % 16), 0);
        nodes[i].slots_used = (uint32_t)(i * 11 % 5);
        if (nodes[i].slots_used > nodes[i].slots_total) {
            nodes[i].slots_used = nodes[i].slots_total;
        }
        nodes[i].schedulable = (i % 7) != 3;
        if (i % 5 == 0) {
            nodes[i].gpus = 8;
            nodes[i].gpus_used_mask = (uint64_t)(i * 13 % 256);
        }
        usable[i] = hv_sched_free(&nodes[i], 1, 6);
        sum += usable[i];
    }
    CHECK_EQ(hv_sched_free(nodes, N, 6), sum);
    /* The fewest hosts that can hold np: the largest nodes first. */
    qsort(usable, N, sizeof(usable[0]), cmp_desc);
    uint32_t nps[] = {1, 7, 50, sum / 2, sum};
    for (size_t t = 0; t < sizeof(nps) / sizeof(nps[0]); t++) {
        hv_sched_req_t req = {.np = nps[t], .slots_per_host = 6};
        hv_sched_slot_t *out = calloc(req.np, sizeof(*out));
        CHECK(out != NULL);
        if (out == NULL) {
            return;
        }
        CHECK_RC(hv_sched_place(nodes, N, &req, out), HV_OK);
        int min_hosts = 0;
        for (uint32_t acc = 0; acc < req.np; min_hosts++) {
            acc += usable[min_hosts];
        }
        int hosts = check_layout(nodes, N, &req, out);
        if (hosts != min_hosts) {
            fprintf(stderr, "np %u: used %d hosts, minimum is %d\n", req.np, hosts, min_hosts);
            hv_check_failures++;
        }
        free(out);
    }
    hv_sched_req_t over = {.np = sum + 1, .slots_per_host = 6};
    hv_sched_slot_t *out = calloc(over.np, sizeof(*out));
    CHECK_RC(hv_sched_place(nodes, N, &over, out), HV_EUNAVAIL);
    free(out);
}

/* An actor's demand against one node, table by table: labels, memory, slots, GPUs; whether it
 * fits now, once what runs there ends, or never (and what is missing). */
static void test_fit_table(void) {
    static const struct {
        const char *name;
        hv_sched_node_t nd;
        hv_sched_demand_t d;
        hv_sched_fit_t want;
        const char *why;
    } rows[] = {
        {"empty demand, free node",
         {.id = 1, .slots_total = 2, .schedulable = 1},
         {0},
         HV_SCHED_FIT_NOW,
         NULL},
        {"labels present",
         {.id = 1, .slots_total = 2, .schedulable = 1, .labels = "zone=a,disk=ssd"},
         {.slots = 1, .labels = "disk=ssd"},
         HV_SCHED_FIT_NOW,
         NULL},
        {"two labels, both present",
         {.id = 1, .slots_total = 2, .schedulable = 1, .labels = "zone=a,disk=ssd"},
         {.slots = 1, .labels = "disk=ssd,zone=a"},
         HV_SCHED_FIT_NOW,
         NULL},
        {"label value differs",
         {.id = 1, .slots_total = 2, .schedulable = 1, .labels = "zone=a"},
         {.slots = 1, .labels = "zone=b"},
         HV_SCHED_FIT_NEVER,
         "labels"},
        {"label prefix is not the label",
         {.id = 1, .slots_total = 2, .schedulable = 1, .labels = "zone=ab"},
         {.slots = 1, .labels = "zone=a"},
         HV_SCHED_FIT_NEVER,
         "labels"},
        {"node without labels",
         {.id = 1, .slots_total = 2, .schedulable = 1},
         {.slots = 1, .labels = "zone=a"},
         HV_SCHED_FIT_NEVER,
         "labels"},
        {"memory fits",
         {.id = 1, .slots_total = 2, .schedulable = 1, .memory_mb = 4096, .mem_used_mb = 1024},
         {.slots = 1, .memory_mb = 3072},
         HV_SCHED_FIT_NOW,
         NULL},
        {"memory taken: later",
         {.id = 1, .slots_total = 2, .schedulable = 1, .memory_mb = 4096, .mem_used_mb = 1025},
         {.slots = 1, .memory_mb = 3072},
         HV_SCHED_FIT_LATER,
         "memory"},
        {"memory over the node's: never",
         {.id = 1, .slots_total = 2, .schedulable = 1, .memory_mb = 4096},
         {.slots = 1, .memory_mb = 4097},
         HV_SCHED_FIT_NEVER,
         "memory"},
        {"memory unknown meets no demand",
         {.id = 1, .slots_total = 2, .schedulable = 1},
         {.slots = 1, .memory_mb = 1},
         HV_SCHED_FIT_NEVER,
         "memory"},
        {"slots taken: later",
         {.id = 1, .slots_total = 2, .slots_used = 1, .schedulable = 1},
         {.slots = 2},
         HV_SCHED_FIT_LATER,
         "slots"},
        {"more slots than the node has: never",
         {.id = 1, .slots_total = 2, .schedulable = 1},
         {.slots = 3},
         HV_SCHED_FIT_NEVER,
         "slots"},
        {"GPU demand on a CPU node",
         {.id = 1, .slots_total = 8, .schedulable = 1},
         {.slots = 1, .gpus = 1},
         HV_SCHED_FIT_NEVER,
         "GPUs"},
        {"CPU demand on a GPU node",
         {.id = 1, .slots_total = 8, .gpus = 8, .schedulable = 1},
         {.slots = 1},
         HV_SCHED_FIT_NEVER,
         "a CPU node"},
        {"GPUs taken: later",
         {.id = 1, .slots_total = 2, .gpus = 2, .gpus_used_mask = 1, .schedulable = 1},
         {.slots = 2, .gpus = 2},
         HV_SCHED_FIT_LATER,
         "slots"},
        {"more GPUs than the node has: never",
         {.id = 1, .slots_total = 4, .gpus = 2, .schedulable = 1},
         {.slots = 3, .gpus = 3},
         HV_SCHED_FIT_NEVER,
         "GPUs"},
        {"draining node",
         {.id = 1, .slots_total = 2},
         {.slots = 1},
         HV_SCHED_FIT_NEVER,
         "takes no work"},
        {"labels checked before memory",
         {.id = 1, .slots_total = 2, .schedulable = 1, .labels = "zone=a"},
         {.slots = 1, .labels = "zone=b", .memory_mb = 10},
         HV_SCHED_FIT_NEVER,
         "labels"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *why = "unset";
        hv_sched_fit_t got = hv_sched_fit(&rows[i].nd, &rows[i].d, &why);
        if (got != rows[i].want ||
            (rows[i].why == NULL ? why != NULL : (why == NULL || strcmp(why, rows[i].why) != 0))) {
            fprintf(stderr, "%s: fit %d (%s), want %d (%s)\n", rows[i].name, (int)got,
                    why ? why : "NULL", (int)rows[i].want, rows[i].why ? rows[i].why : "NULL");
            hv_check_failures++;
        }
    }
}

static void test_labels(void) {
    static const struct {
        const char *have, *want;
        int ok;
    } rows[] = {
        {"zone=a", "", 1},
        {"", "", 1},
        {NULL, NULL, 1},
        {"zone=a", "zone=a", 1},
        {"a=1,b=2,c=3", "c=3,a=1", 1},
        {"a=1,b=2", "b=3", 0},
        {"a=1", "a=1,b=2", 0},
        {"ab=1", "a=1", 0},
        {"a=1", "ab=1", 0},
        {"a=", "a=", 1},
        {"a=1", "a=", 0},
        {NULL, "a=1", 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (hv_sched_labels_have(rows[i].have, rows[i].want) != rows[i].ok) {
            fprintf(stderr, "labels_have(%s, %s) != %d\n", rows[i].have ? rows[i].have : "NULL",
                    rows[i].want ? rows[i].want : "NULL", rows[i].ok);
            hv_check_failures++;
        }
    }
    CHECK(hv_sched_labels_ok("zone=a"));
    CHECK(hv_sched_labels_ok("zone=a,disk=ssd"));
    CHECK(hv_sched_labels_ok("zone="));
    CHECK(!hv_sched_labels_ok(""));
    CHECK(!hv_sched_labels_ok("zone"));
    CHECK(!hv_sched_labels_ok("=a"));
    CHECK(!hv_sched_labels_ok("zone=a,"));
    CHECK(!hv_sched_labels_ok("zone=a=b"));
}

HV_CHECK_MAIN(NULL, NULL, {"fills_hosts", test_fills_hosts},
              {"most_free_first", test_most_free_first}, {"slots_per_host", test_slots_per_host},
              {"unschedulable_skipped", test_unschedulable_skipped},
              {"gpu_assignment", test_gpu_assignment}, {"not_enough", test_not_enough},
              {"capacity_vs_free", test_capacity_vs_free}, {"tie_break", test_tie_break},
              {"hundred_nodes", test_hundred_nodes}, {"fit_table", test_fit_table},
              {"labels", test_labels})
