/*
 * interp_test: the hv.python label hvagent reports. Real directories with real files: python,
 * python3 and python3.N that are executable regular files (or links to one) are listed once,
 * sorted, across PATH's directories; look-alikes (python3.11-config, python3-dbg, pythonx), files
 * without the x bit, directories and missing PATH entries are not; no interpreter gives "none";
 * a value that does not fit whole leaves names out. `interp_test <case>` runs one case.
 */
#include "interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_test.h"

static char tmp_a[64], tmp_b[64];

static void touch(const char *dir, const char *name, int mode) {
    hv_check_put(dir, name, "", (mode_t)mode);
}

static void make_dirs(void) {
    snprintf(tmp_a, sizeof(tmp_a), "/tmp/interp_test.a.XXXXXX");
    snprintf(tmp_b, sizeof(tmp_b), "/tmp/interp_test.b.XXXXXX");
    CHECK(mkdtemp(tmp_a) != NULL);
    CHECK(mkdtemp(tmp_b) != NULL);
}

static void rm_dirs(void) {
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", tmp_a, tmp_b);
    CHECK_EQ(system(cmd), 0);
}

static void case_found(void) {
    make_dirs();
    touch(tmp_a, "python3.11", 0755);
    touch(tmp_a, "python3.11-config", 0755);
    touch(tmp_a, "python3-dbg", 0755);
    touch(tmp_a, "pythonx", 0755);
    touch(tmp_a, "python", 0644);     /* not executable */
    touch(tmp_b, "python3.11", 0755); /* a second time, in the next directory */
    char link[256], dir[256];
    snprintf(link, sizeof(link), "%s/python3", tmp_b);
    snprintf(dir, sizeof(dir), "%s/python3.11", tmp_a);
    CHECK_EQ(symlink(dir, link), 0); /* a link to an interpreter counts */
    snprintf(dir, sizeof(dir), "%s/python3.9", tmp_b);
    CHECK_EQ(mkdir(dir, 0755), 0); /* a directory does not */
    char path[512], out[256];
    snprintf(path, sizeof(path), "::%s:/nonexistent/hv:%s:", tmp_a, tmp_b);
    hv_interp_python_names(path, out, sizeof(out));
    CHECK_STR(out, "python3 python3.11");
    /* too small for both names: the first that fits whole */
    hv_interp_python_names(path, out, 12);
    CHECK_STR(out, "python3");
    rm_dirs();
}

static void case_none(void) {
    make_dirs();
    touch(tmp_a, "perl", 0755);
    char out[256];
    hv_interp_python_names(tmp_a, out, sizeof(out));
    CHECK_STR(out, "none");
    hv_interp_python_names(NULL, out, sizeof(out));
    CHECK_STR(out, "none");
    hv_interp_python_names("", out, sizeof(out));
    CHECK_STR(out, "none");
    rm_dirs();
}

static const test_case_t cases[] = {
    {"found", case_found},
    {"none", case_none},
    {NULL, NULL},
};

int main(int argc, char **argv) { return test_run(cases, argc, argv); }
