/*
 * copykeep_test: the peers' copies an agent keeps in memory (issue 28 §3): a copy arrives in
 * chunks and is checked, read back exactly; a full keeper drops the least recently used copy that
 * is not its job's only one, never a job's only copy nor one in progress, and refuses (dropping
 * nothing) when that is not enough; the head's release drops a job's older copies only once the
 * newer one is here. `agent_copykeep_test <case>` runs one case.
 */
#include "copykeep.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agent_test.h"
#include "mem.h"
#include "sha256.h"

/* Puts a whole copy of size bytes (filled with fill) in chunks of 3 bytes. */
static hv_err put_all(hv_copykeep_t *k, uint64_t job, uint32_t gen, uint64_t commit, size_t size,
                      uint8_t fill, uint64_t now) {
    uint8_t data[64];
    memset(data, fill, sizeof(data));
    char hex[65];
    hv_sha256_hex_of(data, size, hex);
    char err[256] = "";
    int complete = 0;
    for (size_t off = 0; off < size; off += 3) {
        size_t len = size - off < 3 ? size - off : 3;
        hv_err rc = hv_copykeep_put(k, job, gen, commit, size, off, data + off, len, hex, now,
                                    &complete, err, sizeof(err));
        if (rc != HV_OK) {
            return rc;
        }
    }
    CHECK_EQ(complete, 1);
    return HV_OK;
}

static int holds(hv_copykeep_t *k, uint64_t job, uint32_t gen, uint64_t commit) {
    uint8_t b[1];
    size_t n;
    return hv_copykeep_read(k, job, gen, commit, 0, b, 1, &n, NULL, 0) == HV_OK;
}

static void case_roundtrip(void) {
    hv_copykeep_t *k = NULL;
    CHECK_EQ(hv_copykeep_create(100, &k), HV_OK);
    CHECK_EQ(put_all(k, 7, 2, 40, 10, 0xab, 1), HV_OK);
    uint8_t got[16];
    size_t n = 0;
    hv_copykeep_info_t info;
    CHECK_EQ(hv_copykeep_read(k, 7, 2, 40, 4, got, sizeof(got), &n, &info, 2), HV_OK);
    CHECK_EQ(n, 6);
    CHECK_EQ(got[0], 0xab);
    CHECK_EQ(info.size, 10);
    CHECK_EQ(info.complete, 1);
    char hex[65];
    uint8_t want[10];
    memset(want, 0xab, sizeof(want));
    hv_sha256_hex_of(want, sizeof(want), hex);
    CHECK_STR(info.sha256, hex);
    CHECK_EQ(hv_copykeep_read(k, 7, 2, 41, 0, got, sizeof(got), &n, NULL, 2), HV_ENOTFOUND);
    hv_copykeep_stats_t st;
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 10);
    CHECK_EQ(st.copies, 1);
    CHECK_EQ(st.bytes_in, 10);
    CHECK_EQ(st.bytes_out, 6);
    hv_copykeep_destroy(k);
}

static void case_bad_chunks(void) {
    hv_copykeep_t *k = NULL;
    CHECK_EQ(hv_copykeep_create(100, &k), HV_OK);
    char err[256] = "";
    int complete = 0;
    uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_EQ(hv_copykeep_put(k, 0, 1, 1, 8, 0, d, 8, "", 0, &complete, err, sizeof(err)),
             HV_EINVAL);
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 4, 0, d, 8, "", 0, &complete, err, sizeof(err)),
             HV_EINVAL);
    /* A chunk that continues nothing, or skips bytes. */
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 8, 4, d, 4, "", 0, &complete, err, sizeof(err)),
             HV_ESTATE);
    CHECK(strstr(err, "continues no copy in progress of job 1") != NULL);
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 8, 0, d, 2, "", 0, &complete, err, sizeof(err)), HV_OK);
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 8, 4, d, 4, "", 0, &complete, err, sizeof(err)),
             HV_ESTATE);
    /* A wrong digest drops the copy and its memory. */
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 8, 2, d + 2, 6, "00", 0, &complete, err, sizeof(err)),
             HV_EPROTO);
    CHECK(strstr(err, "the sender said 00") != NULL);
    CHECK_EQ(complete, 0);
    hv_copykeep_stats_t st;
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.copies, 0);
    /* Over the whole bound: refused. A bound of 0 keeps none. */
    CHECK_EQ(hv_copykeep_put(k, 1, 1, 1, 101, 0, d, 8, "", 0, &complete, err, sizeof(err)),
             HV_ETOOBIG);
    CHECK(strstr(err, "over this agent's copy memory") != NULL);
    hv_copykeep_destroy(k);
    CHECK_EQ(hv_copykeep_create(0, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 1, 1, 0, 0), HV_ETOOBIG);
    hv_copykeep_destroy(k);
}

/* A full keeper: the least recently used spare copy goes first; a job's only copy never. */
static void case_evict(void) {
    hv_copykeep_t *k = NULL;
    CHECK_EQ(hv_copykeep_create(40, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 1, 1), HV_OK); /* job 1 g1: spare once g2 is here */
    CHECK_EQ(put_all(k, 2, 1, 10, 10, 2, 2), HV_OK); /* job 2's only copy */
    CHECK_EQ(put_all(k, 1, 2, 20, 10, 3, 3), HV_OK); /* job 1 g2 */
    CHECK_EQ(put_all(k, 3, 1, 10, 10, 4, 4), HV_OK); /* full: 40 of 40 */
    /* Job 4's copy needs 10: only job 1 g1 may go. */
    CHECK_EQ(put_all(k, 4, 1, 10, 10, 5, 5), HV_OK);
    CHECK(!holds(k, 1, 1, 10));
    CHECK(holds(k, 1, 2, 20));
    CHECK(holds(k, 2, 1, 10));
    CHECK(holds(k, 3, 1, 10));
    CHECK(holds(k, 4, 1, 10));
    /* Now every copy is its job's only one: a new one is refused, nothing dropped. */
    CHECK_EQ(put_all(k, 5, 1, 10, 10, 6, 6), HV_ETOOBIG);
    hv_copykeep_stats_t st;
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.copies, 4);
    CHECK_EQ(st.used, 40);
    CHECK_EQ(st.refused, 1);
    CHECK_EQ(st.evicted, 1);
    /* Two spare copies: the least recently used goes (job 2's g1 was read last). */
    hv_copykeep_destroy(k);
    CHECK_EQ(hv_copykeep_create(40, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 1, 1), HV_OK);
    CHECK_EQ(put_all(k, 2, 1, 10, 10, 2, 2), HV_OK);
    CHECK_EQ(put_all(k, 1, 2, 20, 10, 3, 3), HV_OK);
    CHECK_EQ(put_all(k, 2, 2, 20, 10, 4, 4), HV_OK);
    uint8_t b[1];
    size_t n;
    CHECK_EQ(hv_copykeep_read(k, 1, 1, 10, 0, b, 1, &n, NULL, 9), HV_OK); /* job 1 g1 used */
    CHECK_EQ(put_all(k, 3, 1, 10, 10, 5, 10), HV_OK);
    CHECK(holds(k, 1, 1, 10));
    CHECK(!holds(k, 2, 1, 10));
    hv_copykeep_destroy(k);
    /* A copy as large as the whole bound: every copy here must be spare, else it is refused. */
    CHECK_EQ(hv_copykeep_create(20, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 1, 1), HV_OK);
    CHECK_EQ(put_all(k, 2, 1, 10, 20, 2, 2), HV_ETOOBIG);
    CHECK(holds(k, 1, 1, 10));
    CHECK_EQ(put_all(k, 1, 2, 20, 10, 3, 3), HV_OK);
    CHECK_EQ(put_all(k, 1, 3, 30, 20, 4, 4), HV_ETOOBIG); /* g2 is job 1's newest: pinned */
    hv_copykeep_destroy(k);
    CHECK_EQ(hv_copykeep_create(20, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 20, 1, 1), HV_OK); /* exactly the bound, empty keeper */
    hv_copykeep_stats_t st2;
    hv_copykeep_stats(k, &st2);
    CHECK_EQ(st2.used, 20);
    hv_copykeep_destroy(k);
}

/* A copy in progress is neither dropped for room nor counted as its job's copy. */
static void case_in_progress(void) {
    hv_copykeep_t *k = NULL;
    CHECK_EQ(hv_copykeep_create(20, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 1, 1), HV_OK);
    char err[256];
    int complete = 0;
    uint8_t d[4] = {0};
    CHECK_EQ(hv_copykeep_put(k, 1, 2, 20, 10, 0, d, 4, "", 2, &complete, err, sizeof(err)),
             HV_OK); /* job 1 g2 in progress: g1 is still its only complete copy */
    CHECK_EQ(put_all(k, 2, 1, 10, 10, 2, 3), HV_ETOOBIG);
    CHECK(holds(k, 1, 1, 10));
    size_t gone = 9;
    hv_copykeep_release(k, 1, 2, 20, &gone); /* g2 not complete: g1 stays */
    CHECK_EQ(gone, 0);
    CHECK(holds(k, 1, 1, 10));
    hv_copykeep_destroy(k);
}

static void case_release(void) {
    hv_copykeep_t *k = NULL;
    CHECK_EQ(hv_copykeep_create(100, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 1, 1), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 12, 10, 1, 1), HV_OK);
    CHECK_EQ(put_all(k, 1, 2, 20, 10, 1, 1), HV_OK);
    CHECK_EQ(put_all(k, 2, 1, 5, 10, 1, 1), HV_OK);
    size_t gone = 0;
    hv_copykeep_release(k, 1, 1, 12, &gone); /* g1 c10 goes; g2 (newer) and job 2 stay */
    CHECK_EQ(gone, 1);
    CHECK(!holds(k, 1, 1, 10));
    CHECK(holds(k, 1, 1, 12));
    CHECK(holds(k, 1, 2, 20));
    hv_copykeep_release(k, 1, 2, 20, &gone);
    CHECK_EQ(gone, 1);
    hv_copykeep_release(k, 1, 9, 90, &gone); /* not here: nothing goes */
    CHECK_EQ(gone, 0);
    CHECK(holds(k, 1, 2, 20));
    hv_copykeep_info_t *list = NULL;
    size_t n = 0;
    CHECK_EQ(hv_copykeep_list(k, &list, &n), HV_OK);
    CHECK_EQ(n, 2);
    hv_free(list);
    hv_copykeep_drop_job(k, 1);
    CHECK(!holds(k, 1, 2, 20));
    CHECK(holds(k, 2, 1, 5));
    hv_copykeep_stats_t st;
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 10);
    hv_copykeep_destroy(k);
}

/* A copy released for its job's newer one leaves its buffer as the spare, which the job's next
 * copy (its size) takes; the copies and the spare stay under the bound: a spare that would not
 * fit is freed, and so is one of another size when a copy needs a buffer. */
static void case_spare(void) {
    hv_copykeep_t *k = NULL;
    hv_copykeep_stats_t st;
    CHECK_EQ(hv_copykeep_create(25, &k), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 10, 10, 0x11, 1), HV_OK);
    CHECK_EQ(put_all(k, 1, 1, 11, 10, 0x22, 2), HV_OK);
    hv_copykeep_release(k, 1, 1, 11, NULL);
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 10);
    CHECK_EQ(st.spare, 10);
    CHECK_EQ(put_all(k, 1, 1, 12, 10, 0x33, 3), HV_OK); /* takes the spare */
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 20);
    CHECK_EQ(st.spare, 0);
    uint8_t got[10];
    size_t n = 0;
    CHECK_EQ(hv_copykeep_read(k, 1, 1, 12, 0, got, sizeof(got), &n, NULL, 4), HV_OK);
    CHECK_EQ(n, 10);
    CHECK_EQ(got[0], 0x33);
    CHECK_EQ(got[9], 0x33);
    CHECK_EQ(hv_copykeep_read(k, 1, 1, 11, 0, got, sizeof(got), &n, NULL, 4), HV_OK);
    CHECK_EQ(got[9], 0x22); /* the copy kept is untouched by its successor's arrival */
    hv_copykeep_release(k, 1, 1, 12, NULL); /* 10 used + 10 spare: fits under 25 */
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.spare, 10);
    CHECK_EQ(put_all(k, 2, 1, 5, 12, 0x44, 5), HV_OK); /* another size: the spare is freed */
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 22);
    CHECK_EQ(st.spare, 0);
    hv_copykeep_drop_job(k, 2);
    CHECK_EQ(put_all(k, 1, 1, 13, 10, 0x55, 6), HV_OK);
    hv_copykeep_release(k, 1, 1, 13, NULL); /* 10 used + 10 spare */
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used + st.spare, 20);
    hv_copykeep_drop_job(k, 1); /* the job ended: no spare kept for it */
    hv_copykeep_stats(k, &st);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.spare, 0);
    hv_copykeep_destroy(k);
}

static const test_case_t cases[] = {
    {"roundtrip", case_roundtrip},
    {"bad_chunks", case_bad_chunks},
    {"evict", case_evict},
    {"in_progress", case_in_progress},
    {"release", case_release},
    {"spare", case_spare},
    {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
