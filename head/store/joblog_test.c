/*
 * joblog_test: the job log caps, table by table (the pure rule, the scaling to small file
 * systems) and on real files in a temporary directory with a fake free-space reading: the
 * per-job cap and its marker, the pause for want of room and the resumed marker with the count,
 * the total cap, existing logs counted at start, and statvfs read at most once a second.
 * `joblog_test <case>` runs one case.
 */
#include "hv_check.h"
#include "joblog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)

static char tmpdir[256];
static uint64_t fake_size, fake_avail; /* the fake file system */
static int fake_calls;

static int fake_statfs(const char *dir, uint64_t *size, uint64_t *avail) {
    (void)dir;
    fake_calls++;
    *size = fake_size;
    *avail = fake_avail;
    return 0;
}

static void setup(void) {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/joblog_test.XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    fake_size = 1024 * MIB;
    fake_avail = 512 * MIB;
    fake_calls = 0;
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", tmpdir);
    }
}

/* The whole log of job 1 into buf (NUL-terminated). */
static size_t read_log(char *buf, size_t len) {
    char path[300];
    snprintf(path, sizeof(path), "%s/1.log", tmpdir);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        buf[0] = '\0';
        return 0;
    }
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

static void case_decide(void) {
    const hv_joblog_limits_t eff = {
        .max_job_bytes = 100, .max_total_bytes = 1000, .reserve_free_bytes = 50};
    static const struct {
        const char *name;
        uint64_t job, total, fs_free, len;
        hv_joblog_verdict_t want;
    } t[] = {
        {"fits", 0, 0, 1000, 10, HV_JOBLOG_WRITE},
        {"job cap exactly", 90, 90, 1000, 10, HV_JOBLOG_WRITE},
        {"job cap crossed", 91, 91, 1000, 10, HV_JOBLOG_CAPPED},
        {"total cap crossed", 0, 995, 1000, 10, HV_JOBLOG_NOSPACE},
        {"floor reached", 0, 0, 59, 10, HV_JOBLOG_NOSPACE},
        {"floor exactly", 0, 0, 60, 10, HV_JOBLOG_WRITE},
        {"disk full", 0, 0, 0, 10, HV_JOBLOG_NOSPACE},
        {"free unknown", 0, 0, UINT64_MAX, 10, HV_JOBLOG_WRITE},
        {"job cap before space", 95, 995, 0, 10, HV_JOBLOG_CAPPED},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        hv_joblog_verdict_t got =
            hv_joblog_decide(&eff, t[i].job, t[i].total, t[i].fs_free, t[i].len);
        if (got != t[i].want) {
            fprintf(stderr, "decide: %s\n", t[i].name);
        }
        CHECK_EQ(got, t[i].want);
    }
}

/* The total cap is at most half the file system, the reserve at most a quarter. */
static void case_effective(void) {
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 256 * MIB, .max_total_bytes = 4096 * MIB, .reserve_free_bytes = 256 * MIB};
    hv_joblog_limits_t e = hv_joblog_effective(&lim, 100ull * 1024 * MIB);
    CHECK_EQ(e.max_total_bytes, 4096 * MIB);
    CHECK_EQ(e.reserve_free_bytes, 256 * MIB);
    CHECK_EQ(e.max_job_bytes, 256 * MIB);
    e = hv_joblog_effective(&lim, 24 * MIB);
    CHECK_EQ(e.max_total_bytes, 12 * MIB);
    CHECK_EQ(e.reserve_free_bytes, 6 * MIB);
    CHECK_EQ(e.max_job_bytes, 256 * MIB);
    e = hv_joblog_effective(&lim, 0); /* unknown: as configured */
    CHECK_EQ(e.max_total_bytes, 4096 * MIB);
    CHECK_EQ(e.reserve_free_bytes, 256 * MIB);
}

/* Past max_job_bytes: one marker, nothing more, every dropped byte counted. */
static void case_job_cap(void) {
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 100, .max_total_bytes = 4096 * MIB, .reserve_free_bytes = 0};
    hv_joblogs_t *ls = NULL;
    CHECK_RC(hv_joblogs_create(tmpdir, "", &lim, fake_statfs, &ls), HV_OK);
    hv_joblog_t l;
    hv_joblog_open(ls, &l, 1);
    char *lines[] = {"0123456789012345678901234567890123456789", /* 40 + 13 = 53 bytes */
                     "abcdefghijabcdefghijabcdefghijabcdefghij", /* 106 > 100: the cap */
                     "dropped"};
    CHECK_EQ(hv_joblog_append(ls, &l, 0, 1, lines, 3, 1), 1);
    CHECK_EQ(hv_joblog_append(ls, &l, 0, 1, lines, 1, 2), 0);
    CHECK(l.capped);
    CHECK_EQ(l.dropped, 41 + 8 + 41);
    char buf[4096];
    read_log(buf, sizeof(buf));
    CHECK_STR(buf, "[0]<stdout>:0123456789012345678901234567890123456789\n"
                   "[0]<stderr>:[hv] log truncated: job 1 wrote more than 100 bytes; further "
                   "output dropped\n");
    CHECK_EQ(l.bytes, strlen(buf));
    CHECK_EQ(hv_joblogs_total(ls), strlen(buf));
    hv_joblog_close(&l);
    hv_joblogs_destroy(ls);
}

/* Below the floor kept for state: a paused marker once, then a resumed marker with the count
 * when room is back. */
static void case_floor(void) {
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 256 * MIB, .max_total_bytes = 4096 * MIB, .reserve_free_bytes = 1 * MIB};
    hv_joblogs_t *ls = NULL;
    CHECK_RC(hv_joblogs_create(tmpdir, "", &lim, fake_statfs, &ls), HV_OK);
    hv_joblog_t l;
    hv_joblog_open(ls, &l, 1);
    char *line[] = {"hello"};
    fake_avail = MIB / 2;
    CHECK_EQ(hv_joblog_append(ls, &l, 2, 2, line, 1, 1000), 1); /* the marker only */
    CHECK_EQ(hv_joblog_append(ls, &l, 2, 2, line, 1, 1001), 0);
    CHECK(l.paused);
    CHECK_EQ(l.dropped, 12);
    fake_avail = 100 * MIB; /* read again only a second later */
    CHECK_EQ(hv_joblog_append(ls, &l, 2, 2, line, 1, 1500), 0);
    CHECK_EQ(hv_joblog_append(ls, &l, 2, 2, line, 1, 2000), 1);
    CHECK(!l.paused);
    char buf[4096];
    read_log(buf, sizeof(buf));
    CHECK(strstr(buf, "[2]<stderr>:[hv] log paused: ") == buf);
    CHECK(strstr(buf, "(kept for state: 1048576)") != NULL);
    CHECK(strstr(buf, "\n[2]<stderr>:[hv] log resumed: 18 bytes of output were dropped\n"
                      "[2]<stderr>:hello\n") != NULL);
    CHECK_EQ(fake_calls, 2);
    hv_joblog_close(&l);
    hv_joblogs_destroy(ls);
}

/* Every log together may not pass max_total_bytes; logs already there count. */
static void case_total(void) {
    char path[300];
    snprintf(path, sizeof(path), "%s/7.log", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        char old[271];
        memset(old, 'a', sizeof(old) - 2);
        old[269] = '\n';
        old[270] = '\0';
        fputs(old, f); /* 270 bytes */
        fclose(f);
    }
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 256 * MIB, .max_total_bytes = 300, .reserve_free_bytes = 0};
    hv_joblogs_t *ls = NULL;
    CHECK_RC(hv_joblogs_create(tmpdir, "", &lim, fake_statfs, &ls), HV_OK);
    CHECK_EQ(hv_joblogs_total(ls), 270);
    hv_joblog_t l;
    hv_joblog_open(ls, &l, 1);
    char *lines[] = {"1234567890", "second line"}; /* 23 bytes fit, 24 more do not */
    CHECK_EQ(hv_joblog_append(ls, &l, 0, 1, lines, 2, 1), 1);
    CHECK(l.paused);
    CHECK_EQ(l.dropped, 12);
    /* The operator deletes the old log: counted again at the next reading. */
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(hv_joblog_append(ls, &l, 0, 1, lines + 1, 1, 5000), 1);
    CHECK(!l.paused);
    hv_joblog_close(&l);
    hv_joblogs_destroy(ls);
}

/* Many batches within a second ask the file system once. */
static void case_statfs_cached(void) {
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 256 * MIB, .max_total_bytes = 4096 * MIB, .reserve_free_bytes = MIB};
    hv_joblogs_t *ls = NULL;
    CHECK_RC(hv_joblogs_create(tmpdir, "", &lim, fake_statfs, &ls), HV_OK);
    hv_joblog_t l;
    hv_joblog_open(ls, &l, 1);
    char *line[] = {"x"};
    for (uint64_t t = 10000; t < 10999; t++) {
        hv_joblog_append(ls, &l, 0, 1, line, 1, t);
    }
    CHECK_EQ(fake_calls, 1);
    CHECK_EQ(l.bytes, 999 * 14);
    CHECK_EQ(hv_joblogs_free_bytes(ls, 10999, 0), 512 * MIB - 999 * 14);
    CHECK_EQ(hv_joblogs_free_bytes(ls, 11000, 0), 512 * MIB);
    CHECK_EQ(fake_calls, 2);
    fake_avail = 0;
    CHECK_EQ(hv_joblogs_free_bytes(ls, 11001, 1), 0); /* fresh: read now */
    CHECK_EQ(fake_calls, 3);
    hv_joblog_close(&l);
    hv_joblogs_destroy(ls);
}

/* An actor's log: its own file name, its markers say "actor", and it reads back a page at a
 * time (whole lines only, every line once across pages, a missing file an empty page). */
static void case_actor_pages(void) {
    const hv_joblog_limits_t lim = {
        .max_job_bytes = 160, .max_total_bytes = 4096 * MIB, .reserve_free_bytes = 0};
    hv_joblogs_t *ls = NULL;
    CHECK_RC(hv_joblogs_create(tmpdir, "e1", &lim, fake_statfs, &ls), HV_OK);
    char path[512], want[512];
    hv_joblog_actor_path(ls, 7, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/e1-actor-7.log", tmpdir);
    CHECK_STR(path, want);
    hv_joblog_page_t pg;
    CHECK_RC(hv_joblog_read_page(path, 0, 10, 1000, &pg), HV_OK); /* not written yet */
    CHECK_EQ(pg.n, 0);
    CHECK_EQ(pg.more, 0);
    hv_joblog_page_free(&pg);
    hv_joblog_t l;
    hv_joblog_open_actor(ls, &l, 7);
    char *out1[] = {"one", "two"}, *err2[] = {"three", "0123456789012345678901234567890123456789"
                                                       "0123456789012345678901234567890123456789"
                                                       "0123456789012345678901234567890123456789"};
    CHECK_EQ(hv_joblog_append(ls, &l, 1, 1, out1, 2, 1), 1);
    CHECK_EQ(hv_joblog_append(ls, &l, 2, 2, err2, 2, 2), 1); /* the second one hits the cap */
    CHECK(l.capped);
    CHECK_RC(hv_joblog_read_page(path, 0, 2, 1000, &pg), HV_OK);
    CHECK_EQ(pg.n, 2);
    CHECK(pg.more);
    CHECK_EQ(pg.lines[0].rank, 1);
    CHECK_EQ(pg.lines[0].stream, 1);
    CHECK_STR(pg.lines[0].text, "one");
    CHECK_STR(pg.lines[1].text, "two");
    uint64_t next = pg.next_offset;
    CHECK_EQ(next, strlen("[1]<stdout>:one\n[1]<stdout>:two\n"));
    hv_joblog_page_free(&pg);
    CHECK_RC(hv_joblog_read_page(path, next, 10, 1000, &pg), HV_OK);
    CHECK_EQ(pg.n, 2);
    CHECK_EQ(pg.more, 0);
    CHECK_EQ(pg.lines[0].rank, 2);
    CHECK_EQ(pg.lines[0].stream, 2);
    CHECK_STR(pg.lines[0].text, "three");
    CHECK_STR(pg.lines[1].text, "[hv] log truncated: actor 7 wrote more than 160 bytes; further "
                                "output dropped");
    CHECK_EQ(pg.next_offset, l.bytes);
    hv_joblog_page_free(&pg);
    /* A line still being written is left for the next page. */
    FILE *f = fopen(path, "a");
    CHECK(f != NULL);
    fputs("[2]<stdout>:half", f);
    fclose(f);
    CHECK_RC(hv_joblog_read_page(path, l.bytes, 10, 1000, &pg), HV_OK);
    CHECK_EQ(pg.n, 0);
    CHECK_EQ(pg.next_offset, l.bytes);
    hv_joblog_page_free(&pg);
    hv_joblog_close(&l);
    hv_joblogs_destroy(ls);
    unlink(path);
}

static void case_parse_line(void) {
    static const struct {
        const char *line;
        int ok;
        uint32_t rank, stream;
        const char *text;
    } rows[] = {
        {"[0]<stdout>:hello", 0, 0, 1, "hello"},
        {"[12]<stderr>:", 0, 12, 2, ""},
        {"[4294967295]<stdout>:x", 0, 4294967295u, 1, "x"},
        {"[4294967296]<stdout>:x", -1, 0, 0, NULL},
        {"[1]<stdin>:x", -1, 0, 0, NULL},
        {"1]<stdout>:x", -1, 0, 0, NULL},
        {"[1<stdout>:x", -1, 0, 0, NULL},
        {"", -1, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char buf[64];
        uint32_t rank = 99, stream = 99;
        char *text = NULL;
        snprintf(buf, sizeof(buf), "%s", rows[i].line);
        CHECK_EQ(hv_joblog_parse_line(buf, &rank, &stream, &text), rows[i].ok);
        if (rows[i].ok == 0) {
            CHECK_EQ(rank, rows[i].rank);
            CHECK_EQ(stream, rows[i].stream);
            CHECK_STR(text, rows[i].text);
        }
    }
}

HV_CHECK_MAIN(setup, teardown, {"decide", case_decide}, {"effective", case_effective},
              {"job_cap", case_job_cap}, {"floor", case_floor}, {"total", case_total},
              {"statfs_cached", case_statfs_cached}, {"actor_pages", case_actor_pages},
              {"parse_line", case_parse_line})
