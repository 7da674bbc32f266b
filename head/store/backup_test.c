/*
 * backup_test: hvhead backup on a real data directory: a store with a job, written and still
 * open (as under a running head, its WAL not checkpointed), the key and tokens (0600), logs,
 * artifacts, an unfinished upload, the lock and a symbolic link. The copy opens as a store with
 * the job, holds every file with its mode and content, and leaves out the side files, the lock,
 * the upload and the link; a second backup to the same directory is refused.
 */
#include "backup.h"
#include "hv_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"

static char tmp[256];

static void put(const char *rel, const char *text, mode_t mode) {
    hv_check_put(tmp, rel, text, mode);
}

/* The content of dir/rel ("" when missing) and its mode (0 when missing). */
static const char *get(const char *dir, const char *rel, mode_t *mode) {
    static char buf[256];
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    struct stat st;
    buf[0] = '\0';
    *mode = lstat(p, &st) == 0 ? st.st_mode & 07777 : 0;
    FILE *f = fopen(p, "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static void case_skip(void) {
    CHECK(hv_backup_skip("state.db"));
    CHECK(hv_backup_skip("state.db-wal"));
    CHECK(hv_backup_skip("state.db-shm"));
    CHECK(hv_backup_skip("hvhead.lock"));
    CHECK(hv_backup_skip("uploads"));
    CHECK(!hv_backup_skip("auth.key"));
    CHECK(!hv_backup_skip("logs"));
    CHECK(!hv_backup_skip("logs/state.db")); /* only the top's */
}

static void case_backup(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/hv_backup_test.XXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    char data[300], to[300], err[1200] = "";
    snprintf(data, sizeof(data), "%s/data", tmp);
    snprintf(to, sizeof(to), "%s/copy", tmp);
    hv_store_t *s = NULL;
    CHECK_RC_MSG(hv_store_open(data, &s, err, sizeof(err)), HV_OK, err);
    hv_job_row_t job = {.name = "kept", .state = "succeeded", .np = 2, .ended_ms = 5};
    CHECK_RC(hv_store_job_insert(s, &job), HV_OK);
    /* The store stays open: the job may sit in the WAL only. */
    char d[320];
    snprintf(d, sizeof(d), "%s/logs", data);
    mkdir(d, 0700);
    snprintf(d, sizeof(d), "%s/clients", data);
    mkdir(d, 0700);
    snprintf(d, sizeof(d), "%s/uploads", data);
    mkdir(d, 0700);
    snprintf(d, sizeof(d), "%s/artifacts", data);
    mkdir(d, 0755);
    put("data/auth.key", "KEY", 0600);
    put("data/client.token", "hvc_x", 0600);
    put("data/clients/ci.token", "hvc_y", 0600);
    put("data/logs/e-1.log", "line 1\n", 0644);
    put("data/artifacts/abc", "ELF", 0644);
    put("data/uploads/partial", "half", 0600);
    put("data/hvhead.lock", "", 0600);
    char link[320];
    snprintf(link, sizeof(link), "%s/link", data);
    CHECK(symlink("/etc/passwd", link) == 0);

    hv_backup_stats_t st;
    CHECK_RC_MSG(hv_backup_data_dir(data, to, &st, err, sizeof(err)), HV_OK, err);
    CHECK(st.db_pages > 0);
    CHECK_EQ(st.files, 5);
    CHECK_EQ(st.skipped, 1);
    mode_t m;
    CHECK_STR(get(to, "auth.key", &m), "KEY");
    CHECK_EQ(m, 0600);
    CHECK_STR(get(to, "client.token", &m), "hvc_x");
    CHECK_EQ(m, 0600);
    CHECK_STR(get(to, "clients/ci.token", &m), "hvc_y");
    CHECK_STR(get(to, "logs/e-1.log", &m), "line 1\n");
    CHECK_EQ(m, 0644);
    CHECK_STR(get(to, "artifacts/abc", &m), "ELF");
    /* The copy's own modes; what it leaves out is not there (mode 0). */
    static const struct {
        const char *rel;
        mode_t mode;
    } modes[] = {{"", 0700},  {"uploads", 0},      {"hvhead.lock", 0},
                 {"link", 0}, {"state.db-wal", 0}, {"state.db", 0600}};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        get(to, modes[i].rel, &m);
        if (m != modes[i].mode) {
            fprintf(stderr, "  %s/%s\n", to, modes[i].rel);
        }
        CHECK_EQ(m, modes[i].mode);
    }

    /* The copy is a head's state: the job is there, with the same epoch. */
    hv_store_t *c = NULL;
    CHECK_RC_MSG(hv_store_open(to, &c, err, sizeof(err)), HV_OK, err);
    hv_job_row_t got;
    memset(&got, 0, sizeof(got));
    CHECK_RC(hv_store_job_get(c, job.id, &got), HV_OK);
    CHECK_STR(got.name, "kept");
    CHECK_STR(got.state, "succeeded");
    CHECK_STR(hv_store_epoch(c), hv_store_epoch(s));
    hv_store_job_fini(&got);
    hv_store_close(c);

    /* Never over an existing backup; a directory with no state.db is not a data directory. */
    CHECK_RC(hv_backup_data_dir(data, to, &st, err, sizeof(err)), HV_EEXIST);
    CHECK(strstr(err, "exists already") != NULL);
    char nodb[320];
    snprintf(nodb, sizeof(nodb), "%s/logs", data);
    snprintf(to, sizeof(to), "%s/copy2", tmp);
    CHECK_RC(hv_backup_data_dir(nodb, to, &st, err, sizeof(err)), HV_ENOTFOUND);
    CHECK(strstr(err, "no state.db") != NULL);
    hv_store_close(s);
    hv_check_rmtree(tmp);
}

HV_CHECK_MAIN(NULL, NULL, {"skip", case_skip}, {"backup", case_backup})
