/*
 * spawn_watch: times "command started" to "N worker processes running" from outside hv. It
 * starts a command (normally hvsubmit), then polls /proc every millisecond for new processes
 * whose working directory starts with a given prefix (the agents' work dirs) and that have
 * finished execve (their comm is no longer the agent's: between fork and exec the child is still
 * "hvagent"). Processes that existed before the command started are ignored. When the Nth such
 * process is seen it stops polling, waits for the command to exit (bounded) and prints
 * key=value lines: wall-clock ms of the start and of each sighting (same clock as the head's
 * event times) and durations measured on CLOCK_MONOTONIC.
 * It knows nothing about hv's wire or files; tests/perf/submit_latency.sh calls it. Polling
 * costs some CPU (one /proc scan per ms); that is part of the measurement's noise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

#define WATCH_MAX_PIDS 65536
#define WATCH_MAX_COUNT 1024

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* A sorted set of pids, small and fixed. */
typedef struct pidset_s {
    int *v;
    size_t n, cap;
} pidset_t;

static int pidset_has(const pidset_t *s, int pid) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[mid] == pid) {
            return 1;
        }
        if (s->v[mid] < pid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

static int pidset_add(pidset_t *s, int pid) {
    if (pidset_has(s, pid)) {
        return 0;
    }
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        if (ncap > WATCH_MAX_PIDS) {
            return -1;
        }
        int *nv = hv_realloc(s->v, ncap * sizeof(*nv));
        if (nv == NULL) {
            return -1;
        }
        s->v = nv;
        s->cap = ncap;
    }
    size_t i = s->n;
    while (i > 0 && s->v[i - 1] > pid) {
        s->v[i] = s->v[i - 1];
        i--;
    }
    s->v[i] = pid;
    s->n++;
    return 0;
}

static int parse_pid(const char *name) {
    int pid = 0;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9' || pid > 100000000) {
            return -1;
        }
        pid = pid * 10 + (*p - '0');
    }
    return pid > 0 ? pid : -1;
}

/* Calls fn(pid, ud) for each process in /proc. */
static void proc_each(void (*fn)(int pid, void *ud), void *ud) {
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int pid = parse_pid(de->d_name);
        if (pid > 0) {
            fn(pid, ud);
        }
    }
    closedir(d);
}

typedef struct watch_s {
    const char *prefix; /* cwd prefix */
    size_t prefix_len;
    const char *not_comm; /* a process with this comm has not exec'd yet */
    pidset_t before;      /* pids present at the start */
    pidset_t seen;        /* matching pids counted */
    int count;            /* how many to wait for */
    uint64_t t0_ns;
    uint64_t seen_ns[WATCH_MAX_COUNT];
    uint64_t seen_wall_us[WATCH_MAX_COUNT];
    int seen_pid[WATCH_MAX_COUNT];
    int n_seen;
} watch_t;

static void watch_baseline(int pid, void *ud) {
    watch_t *w = ud;
    pidset_add(&w->before, pid);
}

static void watch_check(int pid, void *ud) {
    watch_t *w = ud;
    if (w->n_seen >= w->count || pidset_has(&w->before, pid) || pidset_has(&w->seen, pid)) {
        return;
    }
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    if (n <= 0) {
        return;
    }
    buf[n] = '\0';
    if ((size_t)n < w->prefix_len || memcmp(buf, w->prefix, w->prefix_len) != 0) {
        return;
    }
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    char comm[64] = "";
    if (fgets(comm, sizeof(comm), f) == NULL) {
        comm[0] = '\0';
    }
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    if (comm[0] == '\0' || strcmp(comm, w->not_comm) == 0) {
        return; // forked, not exec'd yet: look again next time
    }
    if (pidset_add(&w->seen, pid) != 0) {
        return;
    }
    w->seen_ns[w->n_seen] = mono_ns() - w->t0_ns;
    w->seen_wall_us[w->n_seen] = wall_us();
    w->seen_pid[w->n_seen] = pid;
    w->n_seen++;
}

static void usage(FILE *f) {
    fprintf(f, "usage: spawn_watch --cwd-prefix DIR --count N [--timeout S] [--not-comm NAME]\n"
               "                   [--cmd-out FILE] -- COMMAND [ARGS...]\n"
               "Starts COMMAND and reports when N new processes that exec'd run with a working\n"
               "directory under DIR. COMMAND's stdout and stderr go to FILE if given. Prints\n"
               "key=value lines; exit status is COMMAND's (124 if it ran past the timeout and\n"
               "was killed, 125 on usage or start errors).\n");
}

int main(int argc, char **argv) {
    watch_t w;
    memset(&w, 0, sizeof(w));
    w.not_comm = "hvagent";
    double timeout_s = 60;
    const char *cmd_out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (v == NULL) {
            usage(stderr);
            return 125;
        }
        if (strcmp(a, "--cwd-prefix") == 0) {
            w.prefix = v;
        } else if (strcmp(a, "--count") == 0) {
            w.count = atoi(v);
        } else if (strcmp(a, "--timeout") == 0) {
            timeout_s = atof(v);
        } else if (strcmp(a, "--not-comm") == 0) {
            w.not_comm = v;
        } else if (strcmp(a, "--cmd-out") == 0) {
            cmd_out = v;
        } else {
            usage(stderr);
            return 125;
        }
        i++;
    }
    if (w.prefix == NULL || w.prefix[0] == '\0' || w.count < 1 || w.count > WATCH_MAX_COUNT ||
        i >= argc || timeout_s <= 0 || timeout_s > 3600) {
        usage(stderr);
        return 125;
    }
    w.prefix_len = strlen(w.prefix);
    proc_each(watch_baseline, &w);

    fflush(stdout);
    uint64_t t0_wall = wall_us();
    w.t0_ns = mono_ns();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "spawn_watch: fork: %s\n", strerror(errno));
        return 125;
    }
    if (child == 0) {
        if (cmd_out != NULL) {
            int fd = open(cmd_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
                fprintf(stderr, "spawn_watch: cannot write %s: %s\n", cmd_out, strerror(errno));
                _exit(127);
            }
        }
        execvp(argv[i], argv + i);
        fprintf(stderr, "spawn_watch: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    uint64_t limit_ns = (uint64_t)(timeout_s * 1e9);
    int status = 0, exited = 0;
    uint64_t exit_ns = 0;
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
    for (;;) {
        if (!exited) {
            pid_t r = waitpid(child, &status, WNOHANG);
            if (r == child) {
                exited = 1;
                exit_ns = mono_ns() - w.t0_ns;
            }
        }
        if (w.n_seen < w.count) {
            proc_each(watch_check, &w);
        }
        if (exited) {
            break;
        }
        if (mono_ns() - w.t0_ns > limit_ns) {
            break;
        }
        // After the Nth sighting only the command's exit matters: poll it less often.
        if (w.n_seen >= w.count) {
            struct timespec ten = {.tv_sec = 0, .tv_nsec = 10000000};
            nanosleep(&ten, NULL);
        } else {
            nanosleep(&ms, NULL);
        }
    }
    int rc;
    if (!exited) {
        // Past the timeout: SIGINT first (hvsubmit cancels its job), then SIGKILL.
        kill(child, SIGINT);
        for (int k = 0; k < 500 && waitpid(child, &status, WNOHANG) != child; k++) {
            nanosleep(&ms, NULL);
        }
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        rc = 124;
    } else {
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    printf("t0_wall_ms=%.3f\n", (double)t0_wall / 1000.0);
    printf("want=%d seen=%d\n", w.count, w.n_seen);
    for (int k = 0; k < w.n_seen; k++) {
        printf("proc=%d pid=%d ms=%.3f wall_ms=%.3f\n", k + 1, w.seen_pid[k],
               (double)w.seen_ns[k] / 1e6, (double)w.seen_wall_us[k] / 1000.0);
    }
    if (w.n_seen >= w.count) {
        printf("first_ms=%.3f\nall_ms=%.3f\n", (double)w.seen_ns[0] / 1e6,
               (double)w.seen_ns[w.count - 1] / 1e6);
    } else {
        printf("first_ms=-1\nall_ms=-1\n");
    }
    printf("cmd_exit=%d cmd_ms=%.3f\n", rc, (double)exit_ns / 1e6);
    hv_free(w.before.v);
    hv_free(w.seen.v);
    return rc;
}
