/*
 * spawn_test: runs real `sh -c` children through agent/spawn.c and checks what an operator of
 * hvagent would see: every line of output (including a last line without newline and a line
 * longer than 16 KiB cut into pieces), exit codes and signals, that a kill takes the whole
 * process group (grandchildren included), and that a child ignoring SIGTERM gets SIGKILL after
 * the grace period. Every case is bounded by a loop timer. `spawn_test <case>` runs one case.
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_test.h"
#include "mem.h"

#define MAX_LINES 64

/* What one child did, as the callbacks saw it. */
typedef struct run_s {
    uv_loop_t loop;
    uv_timer_t guard; /* bounds the case */
    hv_proc_t *proc;  /* NULL once exited */
    int exited;       /* on_exit ran */
    int exit_code;
    int term_signal;
    int nlines;
    int stream[MAX_LINES];
    char *line[MAX_LINES]; /* owned copies */
    size_t len[MAX_LINES];
    uint64_t start_ms;
    uint64_t exit_ms; /* loop time of on_exit */
    int timed_out;
    int kill_on_line; /* kill the child when line number kill_on_line arrives (1-based) */
    uint32_t kill_grace;
    uint64_t kill_ms; /* loop time of the kill */
} run_t;

static void on_line(hv_proc_t *p, int stream, const char *line, size_t len, void *ud) {
    run_t *r = ud;
    if (r->nlines < MAX_LINES) {
        r->stream[r->nlines] = stream;
        r->line[r->nlines] = hv_strndup(line, len);
        r->len[r->nlines] = len;
    }
    r->nlines++;
    if (r->kill_on_line == r->nlines) {
        r->kill_ms = uv_now(&r->loop);
        hv_proc_kill(p, r->kill_grace);
    }
}

static void on_exit_cb(hv_proc_t *p, int exit_code, int term_signal, void *ud) {
    run_t *r = ud;
    (void)p;
    r->exited = 1;
    r->exit_code = exit_code;
    r->term_signal = term_signal;
    r->exit_ms = uv_now(&r->loop);
    r->proc = NULL;
    uv_stop(&r->loop);
}

static void guard_cb(uv_timer_t *t) {
    run_t *r = t->data;
    r->timed_out = 1;
    uv_stop(&r->loop);
}

static void run_init(run_t *r) {
    memset(r, 0, sizeof(*r));
    uv_loop_init(&r->loop);
    uv_timer_init(&r->loop, &r->guard);
    r->guard.data = r;
    r->start_ms = uv_now(&r->loop);
}

/* Starts `sh -c script`; returns the spawn result. */
static hv_err run_start(run_t *r, const char *script, char *const *env, const char *cwd) {
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    hv_proc_opts_t o = {.file = "/bin/sh",
                        .argv = argv,
                        .env = env,
                        .cwd = cwd,
                        .on_line = on_line,
                        .on_exit = on_exit_cb,
                        .ud = r};
    char err[128];
    return hv_proc_spawn(&r->loop, &o, &r->proc, err, sizeof(err));
}

/* Runs the loop until the child is over or timeout_ms passed. */
static void run_wait(run_t *r, uint64_t timeout_ms) {
    uv_timer_start(&r->guard, guard_cb, timeout_ms, 0);
    while (!r->exited && !r->timed_out) {
        uv_run(&r->loop, UV_RUN_DEFAULT);
    }
    uv_timer_stop(&r->guard);
    if (r->timed_out) {
        fprintf(stderr, "  (the child did not finish within %llu ms)\n",
                (unsigned long long)timeout_ms);
    }
}

static void walk_close(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

static void run_fini(run_t *r) {
    if (r->proc != NULL) {
        hv_proc_close(r->proc, 1);
        r->proc = NULL;
    }
    uv_close((uv_handle_t *)&r->guard, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_walk(&r->loop, walk_close, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&r->loop), 0);
    for (int i = 0; i < r->nlines && i < MAX_LINES; i++) {
        hv_free(r->line[i]);
    }
}

/* Waits up to ms for pid to be gone. */
static int gone_within(int pid, int ms) {
    for (int i = 0; i < ms / 10; i++) {
        if (!test_pid_alive(pid)) {
            return 1;
        }
        usleep(10000);
    }
    return !test_pid_alive(pid);
}

/* Starts script (sh -c) in r with env and cwd (NULL: the test's), kills its group at its first
 * line when kill_grace >= 0 (with that grace in ms), and runs the loop until it ended or wait_ms
 * passed. */
static void run_to_end(run_t *r, const char *script, char *const *env, const char *cwd,
                       int kill_grace, uint64_t wait_ms) {
    run_init(r);
    CHECK_RC(run_start(r, script, env, cwd), HV_OK);
    if (kill_grace >= 0) {
        r->kill_on_line = 1;
        r->kill_grace = (uint32_t)kill_grace;
    }
    run_wait(r, wait_ms);
}

/* r's process ended, with this exit code (-1: by a signal) and signal (0: none). */
static void check_end(const run_t *r, int exit_code, int term_signal) {
    CHECK(r->exited);
    CHECK_EQ(r->exit_code, exit_code);
    CHECK_EQ(r->term_signal, term_signal);
}

/* The grandchild whose pid was r's first line is gone within 2 s (else killed, not left). */
static void grandchild_gone(run_t *r) {
    int gpid = r->nlines >= 1 ? atoi(r->line[0]) : 0;
    CHECK(gpid > 0);
    if (gpid > 0) {
        CHECK(gone_within(gpid, 2000));
        if (test_pid_alive(gpid)) {
            kill(gpid, SIGKILL);
        }
    }
}

static void case_lines(void) {
    run_t r;
    run_to_end(&r, "printf 'a\\nbb\\n\\nlast'; printf 'err1\\nerr-last' >&2", NULL, NULL, -1, 5000);
    check_end(&r, 0, 0);
    CHECK_EQ(r.nlines, 6);
    const char *out[] = {"a", "bb", "", "last"};
    const char *err[] = {"err1", "err-last"};
    int no = 0, ne = 0;
    for (int i = 0; i < r.nlines && i < MAX_LINES; i++) {
        if (r.stream[i] == 1 && no < 4) {
            CHECK_STR(r.line[i], out[no++]);
        } else if (r.stream[i] == 2 && ne < 2) {
            CHECK_STR(r.line[i], err[ne++]);
        } else {
            fprintf(stderr, "  unexpected line %d on stream %d: \"%s\"\n", i, r.stream[i],
                    r.line[i]);
            hv_check_failures++;
        }
    }
    CHECK_EQ(no, 4);
    CHECK_EQ(ne, 2);
    run_fini(&r);
}

static void case_exit_code(void) {
    run_t r;
    run_to_end(&r, "echo bye; exit 3", NULL, NULL, -1, 5000);
    check_end(&r, 3, 0);
    CHECK_EQ(r.nlines, 1);
    if (r.nlines >= 1) {
        CHECK_STR(r.line[0], "bye");
    }
    run_fini(&r);
}

static void case_long_line(void) {
    run_t r;
    // 40000 'x' then newline; exactly 16384 'y' then newline (no empty piece); then "tail".
    run_to_end(&r,
               "head -c 40000 /dev/zero | tr '\\0' x; echo;"
               "head -c 16384 /dev/zero | tr '\\0' y; echo; echo tail",
               NULL, NULL, -1, 5000);
    CHECK(r.exited);
    CHECK_EQ(r.exit_code, 0);
    CHECK_EQ(r.nlines, 5);
    if (r.nlines == 5) {
        CHECK_EQ(r.len[0], 16384);
        CHECK_EQ(r.len[1], 16384);
        CHECK_EQ(r.len[2], 40000 - 2 * 16384);
        CHECK_EQ(r.len[3], 16384);
        CHECK(r.line[0][0] == 'x' && r.line[2][r.len[2] - 1] == 'x');
        CHECK(r.line[3][0] == 'y' && r.line[3][16383] == 'y');
        CHECK_STR(r.line[4], "tail");
    }
    run_fini(&r);
}

static void case_utf8_cut(void) {
    run_t r;
    // 16383 ASCII bytes then "é" (2 bytes): the cut must not split the character.
    run_to_end(&r, "head -c 16383 /dev/zero | tr '\\0' a; printf '\\303\\251z\\n'", NULL, NULL, -1,
               5000);
    CHECK_EQ(r.nlines, 2);
    if (r.nlines == 2) {
        CHECK_EQ(r.len[0], 16383);
        CHECK_STR(r.line[1], "\xc3\xa9z");
    }
    run_fini(&r);
}

static void case_signal(void) {
    run_t r;
    run_to_end(&r, "echo x; kill -USR1 $$; sleep 5", NULL, NULL, -1, 5000);
    check_end(&r, -1, SIGUSR1);
    run_fini(&r);
}

static void case_env_cwd(void) {
    run_t r;
    run_init(&r);
    char *env[] = {"FOO=bar baz", "PATH=/usr/bin:/bin", NULL};
    CHECK_RC(run_start(&r, "echo \"$FOO\"; pwd; echo \"${HOME:-unset}\"", env, "/tmp"), HV_OK);
    run_wait(&r, 5000);
    CHECK_EQ(r.nlines, 3);
    if (r.nlines == 3) {
        CHECK_STR(r.line[0], "bar baz");
        CHECK_STR(r.line[1], "/tmp");
        CHECK_STR(r.line[2], "unset");
    }
    run_fini(&r);
}

static void case_kill_group(void) {
    run_t r;
    // The grandchild prints its pid; a SIGTERM to the group must take it down with the leader.
    run_to_end(&r, "sleep 1000 & echo $!; wait", NULL, NULL, 5000, 5000);
    check_end(&r, -1, SIGTERM);
    CHECK(r.exit_ms - r.kill_ms < 2000);
    grandchild_gone(&r);
    run_fini(&r);
}

static void case_grace_sigkill(void) {
    run_t r;
    // Ignores SIGTERM (and so does the grandchild, which inherits SIG_IGN).
    run_to_end(&r, "trap '' TERM; sleep 1000 & echo $!; while :; do sleep 0.05; done", NULL, NULL,
               400, 5000);
    check_end(&r, -1, SIGKILL);
    uint64_t took = r.exit_ms - r.kill_ms;
    if (took < 350 || took > 2500) {
        fprintf(stderr, "  SIGKILL came %llu ms after the kill; want about 400\n",
                (unsigned long long)took);
        hv_check_failures++;
    }
    grandchild_gone(&r);
    run_fini(&r);
}

static void case_kill_now(void) {
    run_t r;
    run_to_end(&r, "trap '' TERM; echo up; sleep 1000", NULL, NULL, 0, 5000);
    check_end(&r, -1, SIGKILL);
    CHECK(r.exit_ms - r.kill_ms < 1000);
    run_fini(&r);
}

static void case_stragglers_killed(void) {
    run_t r;
    // The leader exits at once; its background child holds stdout and must not keep the
    // worker "running".
    run_to_end(&r, "sleep 1000 & echo $!; exit 7", NULL, NULL, -1, 5000);
    check_end(&r, 7, 0);
    CHECK(r.exit_ms - r.start_ms < 1500);
    grandchild_gone(&r);
    run_fini(&r);
}

static void case_escaped_pipe_holder(void) {
    run_t r;
    // A grandchild in its own session keeps stdout open: exit is reported after the EOF wait.
    run_to_end(&r, "setsid sleep 30 & echo $!; sleep 0.3; exit 0", NULL, NULL, -1,
               3 * HV_PROC_EOF_WAIT_MS + 2000);
    CHECK(r.exited);
    CHECK_EQ(r.exit_code, 0);
    uint64_t took = r.exit_ms - r.start_ms;
    CHECK(took >= HV_PROC_EOF_WAIT_MS - 100 && took < HV_PROC_EOF_WAIT_MS + 2000);
    int gpid = r.nlines >= 1 ? atoi(r.line[0]) : 0;
    if (gpid > 0) {
        kill(gpid, SIGKILL);
    }
    run_fini(&r);
}

static void case_spawn_errors(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    char *argv[] = {"x", NULL};
    char err[128];
    hv_proc_t *p = NULL;
    hv_proc_opts_t o = {.file = "/nonexistent/hv-no-such-program",
                        .argv = argv,
                        .on_line = on_line,
                        .on_exit = on_exit_cb,
                        .ud = NULL};
    CHECK_RC(hv_proc_spawn(&loop, &o, &p, err, sizeof(err)), HV_ENOTFOUND);
    CHECK_STR(err, "No such file or directory");
    CHECK(p == NULL);
    // A file that is not executable.
    char path[] = "/tmp/hv-spawn-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_EQ(write(fd, "#!/bin/sh\n", 10), 10);
        close(fd);
        o.file = path;
        CHECK_RC(hv_proc_spawn(&loop, &o, &p, err, sizeof(err)), HV_EPERM);
        CHECK_STR(err, "Permission denied");
        unlink(path);
    }
    // A working directory that does not exist.
    o.file = "/bin/sh";
    o.cwd = "/nonexistent-dir-hv";
    CHECK(hv_proc_spawn(&loop, &o, &p, err, sizeof(err)) != HV_OK);
    CHECK(err[0] != '\0');
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static void case_close_running(void) {
    run_t r;
    run_init(&r);
    CHECK_RC(run_start(&r, "echo $$; exec sleep 1000", NULL, NULL), HV_OK);
    // Wait for the first line, then close without waiting.
    uv_timer_start(&r.guard, guard_cb, 3000, 0);
    while (r.nlines == 0 && !r.timed_out) {
        uv_run(&r.loop, UV_RUN_ONCE);
    }
    int pid = r.nlines > 0 ? atoi(r.line[0]) : 0;
    CHECK(pid > 0);
    run_fini(&r); // hv_proc_close(kill_group = 1)
    CHECK(!r.exited);
    if (pid > 0) {
        CHECK(gone_within(pid, 2000));
    }
}

static void case_many_lines(void) {
    run_t r;
    // Lines cross pipe read boundaries; count them all and check the last.
    run_to_end(&r, "i=0; while [ $i -lt 20000 ]; do echo line$i; i=$((i+1)); done", NULL, NULL, -1,
               20000);
    CHECK(r.exited);
    CHECK_EQ(r.nlines, 20000);
    run_fini(&r);
}

static const test_case_t cases[] = {
    {"lines", case_lines},
    {"exit_code", case_exit_code},
    {"long_line", case_long_line},
    {"utf8_cut", case_utf8_cut},
    {"signal", case_signal},
    {"env_cwd", case_env_cwd},
    {"kill_group", case_kill_group},
    {"grace_sigkill", case_grace_sigkill},
    {"kill_now", case_kill_now},
    {"stragglers_killed", case_stragglers_killed},
    {"escaped_pipe_holder", case_escaped_pipe_holder},
    {"spawn_errors", case_spawn_errors},
    {"close_running", case_close_running},
    {"many_lines", case_many_lines},
    {NULL, NULL},
};

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    return test_run(cases, argc, argv);
}
