/*
 * alive_test: the death-watch marks over real processes (fork) and real files in /dev/shm: a
 * SIGKILLed holder is seen by both of its watchers within milliseconds and its file is gone; a
 * clean release is no death; a peer on no mark here is HV_ENOTFOUND; an orphaned mark is swept;
 * many holds and releases leak no thread and no file.
 */
#include "alive.h"

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hvtest.h"
#include "util.h"

typedef struct seen_s {
    atomic_int n;
    atomic_ullong at_ms;
    atomic_ullong tag;
} seen_t;

static void on_dead(void *ud, uint64_t tag) {
    seen_t *s = ud;
    atomic_store(&s->tag, tag);
    atomic_store(&s->at_ms, hv_now_ms());
    atomic_fetch_add(&s->n, 1);
}

static int port_base; // set by test_world, inherited by the forked holders

/* A world id of this test run: no other process uses it. */
static uint64_t test_world(void) {
    port_base = 20000 + (int)(getpid() % 20000);
    return ((uint64_t)getpid() << 20) ^ hv_now_ms();
}

static void addr_of(char *buf, size_t len, int rank) {
    snprintf(buf, len, "127.0.0.1:%d", port_base + rank);
}

/* Files of this user's marks with world id wid. */
static int marks_of(uint64_t wid) {
    char pre[64];
    int n = snprintf(pre, sizeof(pre), "hv-alive-%u-%llx-", (unsigned)getuid(),
                     (unsigned long long)wid);
    DIR *d = opendir("/dev/shm");
    int count = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        count += strncmp(e->d_name, pre, (size_t)n) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return count;
}

static int wait_threads_zero(int ms) {
    for (int i = 0; i < ms && hv__alive_threads() != 0; i++) {
        usleep(1000);
    }
    return hv__alive_threads();
}

/* Forks a child holding the mark of rank 1; it releases and exits 0 when the pipe closes (or is
 * killed; or exit(3)s without a release when 'x' comes). Returns its pid; *wfd: the pipe's write end. */
static pid_t child_holding(uint64_t wid, int *wfd) {
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        char addr[64];
        addr_of(addr, sizeof(addr), 1);
        hv__alive_t *a = NULL;
        char ok = hv__alive_hold(wid, 1, 1, addr, &a) == HV_OK ? 'y' : 'n';
        (void)!write(ready[1], &ok, 1);
        char c = 0;
        (void)!read(go[0], &c, 1); // until the parent closes it
        if (c == 'x') {
            exit(3); // an exit without a release: its atexit marks it
        }
        hv__alive_release(a);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c = 'n';
    (void)!read(ready[0], &c, 1);
    close(ready[0]);
    *wfd = go[1];
    return c == 'y' ? pid : -1;
}

static void killed_holder_is_seen(void) {
    uint64_t wid = test_world();
    int go = -1;
    pid_t pid = child_holding(wid, &go);
    ASSERT_TRUE(pid > 0);
    char a0[64], a1[64], a2[64];
    addr_of(a0, sizeof(a0), 0);
    addr_of(a1, sizeof(a1), 1);
    addr_of(a2, sizeof(a2), 2);
    hv__alive_t *left = NULL, *right = NULL; // ranks 0 and 2: rank 1's two neighbours
    ASSERT_OK(hv__alive_hold(wid, 1, 0, a0, &left));
    ASSERT_OK(hv__alive_hold(wid, 1, 2, a2, &right));
    seen_t s0 = {0}, s2 = {0};
    ASSERT_OK(hv__alive_watch(left, 1, a1, 2, on_dead, &s0));
    ASSERT_OK(hv__alive_watch(right, 1, a1, 1, on_dead, &s2));
    ASSERT_EQ_INT(marks_of(wid), 3);
    usleep(20000); // the watchers are waiting on the mutex
    uint64_t t0 = hv_now_ms();
    kill(pid, SIGKILL);
    for (int i = 0; i < 5000 && (atomic_load(&s0.n) == 0 || atomic_load(&s2.n) == 0); i++) {
        usleep(1000);
    }
    ASSERT_EQ_INT(atomic_load(&s0.n), 1);
    ASSERT_EQ_INT(atomic_load(&s2.n), 1);
    ASSERT_EQ_INT((int)atomic_load(&s0.tag), 2);
    ASSERT_EQ_INT((int)atomic_load(&s2.tag), 1);
    uint64_t d0 = atomic_load(&s0.at_ms) - t0, d2 = atomic_load(&s2.at_ms) - t0;
    fprintf(stderr, "  kill -> seen: %llu ms and %llu ms\n", (unsigned long long)d0,
            (unsigned long long)d2);
    // The kernel hands a dead owner's robust mutex on at its exit: well under the sockets' close
    // of a large process, bounded loosely here for a loaded machine.
    ASSERT_TRUE(d0 < 1000 && d2 < 1000);
    waitpid(pid, NULL, 0);
    close(go);
    ASSERT_EQ_INT(wait_threads_zero(2000), 0);
    ASSERT_EQ_INT(marks_of(wid), 2); // the dead one's file is gone
    hv__alive_release(left);
    hv__alive_release(right);
    ASSERT_EQ_INT(marks_of(wid), 0);
}

/* A holder that exit()s without releasing dies too, but its watchers are told it exited
 * (HV__ALIVE_EXITED: its status is its agent's to report), unlike a SIGKILL above. */
static void exit_is_told(void) {
    uint64_t wid = test_world();
    int go = -1;
    pid_t pid = child_holding(wid, &go);
    ASSERT_TRUE(pid > 0);
    char a0[64], a1[64];
    addr_of(a0, sizeof(a0), 0);
    addr_of(a1, sizeof(a1), 1);
    hv__alive_t *left = NULL;
    ASSERT_OK(hv__alive_hold(wid, 1, 0, a0, &left));
    seen_t s0 = {0};
    ASSERT_OK(hv__alive_watch(left, 1, a1, 2, on_dead, &s0));
    usleep(20000);
    ASSERT_TRUE(write(go, "x", 1) == 1);
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    for (int i = 0; i < 5000 && atomic_load(&s0.n) == 0; i++) {
        usleep(1000);
    }
    ASSERT_EQ_INT(atomic_load(&s0.n), 1);
    ASSERT_TRUE(atomic_load(&s0.tag) == (2 | HV__ALIVE_EXITED));
    close(go);
    ASSERT_EQ_INT(wait_threads_zero(2000), 0);
    hv__alive_release(left);
    ASSERT_EQ_INT(marks_of(wid), 0);
}

static void clean_release_is_quiet(void) {
    uint64_t wid = test_world();
    int go = -1;
    pid_t pid = child_holding(wid, &go);
    ASSERT_TRUE(pid > 0);
    char a0[64], a1[64];
    addr_of(a0, sizeof(a0), 0);
    addr_of(a1, sizeof(a1), 1);
    hv__alive_t *me = NULL;
    ASSERT_OK(hv__alive_hold(wid, 1, 0, a0, &me));
    seen_t s = {0};
    ASSERT_OK(hv__alive_watch(me, 1, a1, 1, on_dead, &s));
    close(go); // the child releases its mark and exits
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_EQ_INT(wait_threads_zero(2000), 0); // the watcher saw the release and ended
    ASSERT_EQ_INT(atomic_load(&s.n), 0);
    hv__alive_release(me);
    ASSERT_EQ_INT(marks_of(wid), 0);
}

static void not_on_this_machine(void) {
    uint64_t wid = test_world();
    char a0[64], a1[64];
    addr_of(a0, sizeof(a0), 0);
    addr_of(a1, sizeof(a1), 1);
    hv__alive_t *me = NULL;
    ASSERT_OK(hv__alive_hold(wid, 1, 0, a0, &me));
    seen_t s = {0};
    ASSERT_RC(hv__alive_watch(me, 1, a1, 1, on_dead, &s), HV_ENOTFOUND);
    ASSERT_RC(hv__alive_hold(wid, 1, 0, "127.0.0.1", &(hv__alive_t *){NULL}), HV_EINVAL);
    hv__alive_release(me);
    hv__alive_release(NULL);
}

static void orphan_is_swept(void) {
    uint64_t wid = test_world();
    int go = -1;
    pid_t pid = child_holding(wid, &go);
    ASSERT_TRUE(pid > 0);
    kill(pid, SIGKILL); // nobody watches it: its file stays
    waitpid(pid, NULL, 0);
    close(go);
    ASSERT_EQ_INT(marks_of(wid), 1);
    char a0[64];
    addr_of(a0, sizeof(a0), 0);
    hv__alive_t *me = NULL;
    ASSERT_OK(hv__alive_hold(wid, 2, 0, a0, &me)); // the next hold sweeps it
    ASSERT_EQ_INT(marks_of(wid), 1);
    hv__alive_release(me);
    ASSERT_EQ_INT(marks_of(wid), 0);
}

static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Like a world per round: two neighbours hold and watch each other, then both leave. */
static void many_rounds_leak_nothing(void) {
    uint64_t wid = test_world();
    int tasks = task_count();
    char a0[64], a1[64];
    addr_of(a0, sizeof(a0), 0);
    addr_of(a1, sizeof(a1), 1);
    seen_t s = {0};
    for (uint32_t g = 1; g <= 300; g++) {
        hv__alive_t *x = NULL, *y = NULL;
        ASSERT_OK(hv__alive_hold(wid, g, 0, a0, &x));
        ASSERT_OK(hv__alive_hold(wid, g, 1, a1, &y));
        ASSERT_OK(hv__alive_watch(x, 1, a1, 2, on_dead, &s));
        ASSERT_OK(hv__alive_watch(y, 0, a0, 1, on_dead, &s));
        hv__alive_release(x);
        hv__alive_release(y);
    }
    ASSERT_EQ_INT(wait_threads_zero(2000), 0);
    for (int i = 0; i < 2000 && task_count() > tasks; i++) {
        usleep(1000); // a detached thread's task goes a moment after its function returned
    }
    ASSERT_EQ_INT(task_count(), tasks);
    ASSERT_EQ_INT(marks_of(wid), 0);
    ASSERT_EQ_INT(atomic_load(&s.n), 0);
}

static const hvtest_case_t cases[] = {
    {"killed_holder_is_seen", killed_holder_is_seen},
    {"exit_is_told", exit_is_told},
    {"clean_release_is_quiet", clean_release_is_quiet},
    {"not_on_this_machine", not_on_this_machine},
    {"orphan_is_swept", orphan_is_swept},
    {"many_rounds_leak_nothing", many_rounds_leak_nothing},
};

HVTEST_MAIN(cases)
