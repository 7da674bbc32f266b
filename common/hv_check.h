/*
 * hv_check: the assertions and case runner shared by hv's unit tests (never by production code).
 * A test file includes this header once, writes its cases as void functions and ends with
 * HV_CHECK_MAIN(setup, teardown, {"name", fn}, ...) (or, when its main does more, lists them in
 * an hv_check_case_t table and returns hv_check_main(cases, N, argc, argv, setup, teardown)).
 * A failed check prints both operands and counts; the case goes on. `test CASE` runs one case.
 * Header-only with static definitions, so each test executable has its own counter. A test whose
 * later steps cannot run once a check failed (a server that did not start) defines HV_CHECK_FATAL
 * before including it: the first failed check then ends the process with status 1.
 */
#ifndef HV_COMMON_HV_CHECK_H
#define HV_COMMON_HV_CHECK_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"

static int hv_check_failures; /* checks failed so far in this process */

/* Counts a failed check (already printed); under HV_CHECK_FATAL, exits. */
#ifdef HV_CHECK_FATAL
#define HV__CHECK_FAILED() (hv_check_failures++, exit(1))
#else
#define HV__CHECK_FAILED() hv_check_failures++
#endif

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(got, want)                                                                        \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s == %s\n  got:  %lld\n  want: %lld\n", __FILE__, __LINE__,   \
                    #got, #want, g_, w_);                                                          \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

/* Equal strings; NULL equals only NULL. */
#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        if ((g_ == NULL) != (w_ == NULL) || (g_ != NULL && strcmp(g_, w_) != 0)) {                 \
            fprintf(stderr, "%s:%d: %s\n  got:  \"%s\"\n  want: \"%s\"\n", __FILE__, __LINE__,     \
                    #got, g_ ? g_ : "(null)", w_ ? w_ : "(null)");                                 \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

/* An hv_err result, with a detail message printed on mismatch (the module's error text). */
#define CHECK_RC_MSG(got, want, msg)                                                               \
    do {                                                                                           \
        hv_err g_ = (got), w_ = (want);                                                            \
        if (g_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s\n  got:  %s (%s)\n  want: %s\n  message: %s\n", __FILE__,   \
                    __LINE__, #got, hv_errname(g_), hv_strerror(g_), hv_errname(w_), (msg));       \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

#define CHECK_RC(got, want) CHECK_RC_MSG(got, want, "-")

/* got (a string, NULL fails) contains sub. */
#define CHECK_HAS(got, sub)                                                                        \
    do {                                                                                           \
        const char *g_ = (got), *s_ = (sub);                                                       \
        if (g_ == NULL || strstr(g_, s_) == NULL) {                                                \
            fprintf(stderr, "%s:%d: %s\n  got:  \"%s\"\n  does not contain: \"%s\"\n", __FILE__,   \
                    __LINE__, #got, g_ ? g_ : "(null)", s_);                                       \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

/* got (a string; NULL passes) does not contain sub. */
#define CHECK_LACKS(got, sub)                                                                      \
    do {                                                                                           \
        const char *g_ = (got), *s_ = (sub);                                                       \
        if (g_ != NULL && strstr(g_, s_) != NULL) {                                                \
            fprintf(stderr, "%s:%d: %s\n  got:  \"%s\"\n  contains: \"%s\"\n", __FILE__, __LINE__, \
                    #got, g_, s_);                                                                 \
            HV__CHECK_FAILED();                                                                    \
        }                                                                                          \
    } while (0)

typedef struct hv_check_case_s {
    const char *name;
    void (*fn)(void);
} hv_check_case_t;

/* Runs every case, or only the one named by argv[1], each between setup and teardown (both
 * optional). Prints "PASS name" / "FAIL name" per case and a summary. Returns the exit status:
 * 0 all passed, 1 a check failed, 2 no case has that name. */
static inline int hv_check_main(const hv_check_case_t *cases, size_t n, int argc, char **argv,
                                void (*setup)(void), void (*teardown)(void)) {
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) {
            continue;
        }
        int before = hv_check_failures;
        if (setup != NULL) {
            setup();
        }
        cases[i].fn();
        if (teardown != NULL) {
            teardown();
        }
        printf("%s %s\n", hv_check_failures == before ? "PASS" : "FAIL", cases[i].name);
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no case named '%s'; cases:", argc > 1 ? argv[1] : "");
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, " %s", cases[i].name);
        }
        fprintf(stderr, "\n");
        return 2;
    }
    printf("%d case(s), %d failure(s)\n", ran, hv_check_failures);
    return hv_check_failures == 0 ? 0 : 1;
}

/* Runs fn with a memory stream and returns what it wrote (owned, free()); exits on no memory. */
static inline char *hv_check_capture(void (*fn)(FILE *f, void *ud), void *ud) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) {
        fprintf(stderr, "open_memstream failed\n");
        exit(1);
    }
    fn(f, ud);
    fclose(f);
    return buf;
}

/* A fresh directory made from a mkdtemp template ("/tmp/hv_x_test.XXXXXX") into dir (len bytes);
 * the test cannot go on without it: exits 2. */
static inline void hv_check_tmpdir(char *dir, size_t len, const char *templ) {
    snprintf(dir, len, "%s", templ);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
}

/* Writes text into the file dir/rel (made, or emptied) and gives it mode; a failure is a failed
 * check. */
static inline void hv_check_put(const char *dir, const char *rel, const char *text, mode_t mode) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs(text, f);
        CHECK(fclose(f) == 0);
    }
    CHECK(chmod(p, mode) == 0);
}

static inline int hv__check_rm_entry(const char *path, const struct stat *st, int flag,
                                     struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag == FTW_DP) {
        /* a directory a case left unwritable can still be emptied; never chmod anything else:
         * chmod follows a symbolic link (a test's link to /etc/passwd made it 0700 once) */
        chmod(path, 0700);
    }
    return remove(path);
}

/* Removes dir and everything under it (links not followed); nothing for "". */
static inline void hv_check_rmtree(const char *dir) {
    if (dir[0] != '\0') {
        chmod(dir, 0700);
        nftw(dir, hv__check_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* A test file's main: runs the cases given as {"name", fn} rows, each between setup and teardown
 * (NULL for none), through hv_check_main:
 *   HV_CHECK_MAIN(NULL, NULL, {"parse", case_parse}, {"size_at", case_size_at})
 */
#define HV_CHECK_MAIN(setup, teardown, ...)                                                        \
    int main(int argc, char **argv) {                                                              \
        static const hv_check_case_t hv__cases[] = {__VA_ARGS__};                                  \
        return hv_check_main(hv__cases, sizeof(hv__cases) / sizeof(hv__cases[0]), argc, argv,      \
                             setup, teardown);                                                     \
    }

#endif
