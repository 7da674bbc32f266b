/*
 * history_test: the retention on a real store and data directory. The cutoff of an age (none
 * for 0, none before the epoch), the log file's name per epoch, and a prune: of four finished
 * jobs and a running one, with max_jobs 2 and job 2 held by the driver, job 1 goes (rows and log
 * file), job 2 stays while held and goes once it is not, the running job and the newest two
 * stay with their logs, and one history.prune event says how many went. Artifacts: of five
 * (one a pruned job used, one a kept job uses, one both a pruned and a kept job used, one no job
 * uses but uploaded within the grace, one no job uses but used by StatArtifact within the grace)
 * only the first goes, row and file, and once the grace has passed the fourth and fifth go too;
 * a database whose references are not filled in yet removes none.
 */
#include "history.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem.h"

static char tmp[256];

static void case_cutoff(void) {
    hv_history_policy_t p = {0, 0, 0};
    CHECK_EQ(hv_history_cutoff_ms(&p, 1000), 0);
    p.max_age_days = 1;
    CHECK_EQ(hv_history_cutoff_ms(&p, 86400000ull + 5), 5);
    CHECK_EQ(hv_history_cutoff_ms(&p, 86400000ull), 0); /* would be the epoch: no limit */
    CHECK_EQ(hv_history_cutoff_ms(&p, 10), 0);
    char b[200];
    hv_history_log_path("/d", "ab12", 7, b, sizeof(b));
    CHECK_STR(b, "/d/logs/ab12-7.log");
    hv_history_log_path("/d", "", 7, b, sizeof(b));
    CHECK_STR(b, "/d/logs/7.log");
}

static uint64_t held_id;
static int held(void *ud, uint64_t id) {
    (void)ud;
    return id == held_id;
}

/* A store in a new temporary directory (tmp). */
static hv_store_t *open_store(void) {
    hv_check_tmpdir(tmp, sizeof(tmp), "/tmp/hv_history_test.XXXXXX");
    char err[600] = "";
    hv_store_t *s = NULL;
    CHECK_RC_MSG(hv_store_open(tmp, &s, err, sizeof(err)), HV_OK, err);
    return s;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void case_prune(void) {
    char logs[300], path[6][400];
    hv_store_t *s = open_store();
    snprintf(logs, sizeof(logs), "%s/logs", tmp);
    mkdir(logs, 0700);
    static const char *const states[] = {"succeeded", "failed", "cancelled", "succeeded",
                                         "running"};
    uint64_t id[5];
    for (int i = 0; i < 5; i++) {
        hv_job_row_t j = {.name = "j",
                          .state = (char *)states[i],
                          .submitted_ms = 10 + (uint64_t)i,
                          .ended_ms = i < 4 ? 100 + (uint64_t)i : 0};
        CHECK_RC(hv_store_job_insert(s, &j), HV_OK);
        id[i] = j.id;
        hv_history_log_path(tmp, hv_store_epoch(s), j.id, path[i], sizeof(path[i]));
        FILE *f = fopen(path[i], "w");
        CHECK(f != NULL);
        if (f != NULL) {
            fputs("[0]<stdout>:x\n", f);
            fclose(f);
        }
    }
    hv_history_policy_t p = {.max_age_days = 0, .max_jobs = 2};
    held_id = id[1];
    size_t pruned = 0;
    CHECK_RC(hv_history_prune(s, tmp, &p, 1000000, 1, held, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 1);
    hv_job_row_t r;
    memset(&r, 0, sizeof(r));
    CHECK_RC(hv_store_job_get(s, id[0], &r), HV_ENOTFOUND);
    CHECK(!exists(path[0]));
    CHECK(exists(path[1]));
    for (int i = 1; i < 5; i++) {
        CHECK_RC(hv_store_job_get(s, id[i], &r), HV_OK);
        hv_store_job_fini(&r);
    }
    /* No longer held: it goes at the next prune. */
    held_id = 0;
    CHECK_RC(hv_history_prune(s, tmp, &p, 1000000, 1, held, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 1);
    CHECK(!exists(path[1]));
    CHECK(exists(path[2]) && exists(path[3]) && exists(path[4]));
    /* Nothing more beyond the retention: no prune, no event. */
    CHECK_RC(hv_history_prune(s, tmp, &p, 1000000, 1, NULL, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 0);
    uint64_t n = 0;
    CHECK_RC(hv_store_event_count(s, 0, "history.prune", "\"jobs\":1", &n), HV_OK);
    CHECK_EQ(n, 2);
    /* No limits: nothing is pruned. */
    hv_history_policy_t none = {0, 0, 0};
    CHECK_RC(hv_history_prune(s, tmp, &none, 1000000, 1, NULL, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 0);
    hv_store_close(s);
    hv_check_rmtree(tmp);
}

/* An artifact row and its file under <tmp>/artifacts. */
static void put_artifact(hv_store_t *s, const char *digest, uint64_t created, uint64_t used,
                         char *path, size_t len) {
    snprintf(path, len, "%s/artifacts/%s", tmp, digest);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("#!/bin/sh\n", f);
        fclose(f);
    }
    hv_artifact_row_t a = {.digest = (char *)digest,
                           .path = path,
                           .size = 10,
                           .created_ms = created,
                           .last_used_ms = used};
    CHECK_RC(hv_store_artifact_put(s, &a), HV_OK);
}

/* A job that succeeded, submitted at t ms and ended at t + 1, that used the two artifacts. */
static void insert_ended(hv_store_t *s, const char *name, uint64_t t, const char *const uses[2]) {
    hv_job_row_t j = {
        .name = (char *)name, .state = "succeeded", .submitted_ms = t, .ended_ms = t + 1};
    j.artifacts = uses;
    j.nartifacts = 2;
    CHECK_RC(hv_store_job_insert(s, &j), HV_OK);
}

static void case_artifacts(void) {
    char dir[300], path[5][400];
    hv_store_t *s = open_store();
    snprintf(dir, sizeof(dir), "%s/artifacts", tmp);
    mkdir(dir, 0700);
    CHECK_EQ(hv_store_job_artifacts_complete(s), 1); /* a new database: nothing to fill */
    static const char *const dg[5] = {"aa", "bb", "cc", "dd", "ee"};
    const uint64_t hour = 3600000, now = 100 * hour;
    /* aa..cc uploaded long ago; dd uploaded 10 minutes ago; ee uploaded long ago but
     * StatArtifact found it 10 minutes ago (a submit is on its way). */
    put_artifact(s, dg[0], hour, hour, path[0], sizeof(path[0]));
    put_artifact(s, dg[1], hour, 2 * hour, path[1], sizeof(path[1]));
    put_artifact(s, dg[2], hour, hour, path[2], sizeof(path[2]));
    put_artifact(s, dg[3], now - hour / 6, 0, path[3], sizeof(path[3]));
    put_artifact(s, dg[4], hour, now - hour / 6, path[4], sizeof(path[4]));
    /* Job 1 (old, pruned) used aa and cc; job 2 (kept) uses bb and cc. */
    const char *const uses1[] = {dg[0], dg[2]}, *const uses2[] = {dg[1], dg[2]};
    insert_ended(s, "old", 1, uses1);
    insert_ended(s, "kept", 3, uses2);
    hv_history_policy_t p = {.max_jobs = 1, .artifact_grace_s = 3600};
    size_t pruned = 0;
    CHECK_RC(hv_history_prune(s, tmp, &p, now, 1, NULL, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 1);
    static const int kept[5] = {0, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        hv_artifact_row_t r;
        CHECK_RC(hv_store_artifact_get(s, dg[i], &r), kept[i] ? HV_OK : HV_ENOTFOUND);
        if (kept[i]) {
            hv_store_artifact_fini(&r);
        }
        CHECK_EQ(exists(path[i]), kept[i]);
    }
    uint64_t n = 0;
    CHECK_RC(hv_store_event_count(s, 0, "history.artifacts", "\"artifacts\":1", &n), HV_OK);
    CHECK_EQ(n, 1);
    /* The grace is over: dd and ee go; bb and cc stay (job 2 uses them). */
    CHECK_RC(hv_history_prune(s, tmp, &p, now + hour, 1, NULL, NULL, &pruned), HV_OK);
    CHECK_EQ(pruned, 0);
    static const int kept2[5] = {0, 1, 1, 0, 0};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(exists(path[i]), kept2[i]);
    }
    hv_store_close(s);
    hv_check_rmtree(tmp);
}

HV_CHECK_MAIN(NULL, NULL, {"cutoff", case_cutoff}, {"prune", case_prune},
              {"artifacts", case_artifacts})
