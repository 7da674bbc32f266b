/*
 * bench_elastic_exit: where the Python reset's extra detection time goes, and what could take it
 * out (issue 27, §3: the reset from Python within 1.3x of C's). A peer learns of a SIGKILLed
 * worker from its sockets, which the kernel closes (exit_files) only after it has torn down the
 * worker's memory (exit_mm -> mmput); a torch worker holds ~230 MB and 1,900 mappings. But the
 * kernel wakes the waiters of a robust futex the dying thread holds (exit_mm_release: the robust
 * list) before that teardown. This program kills a victim that holds both a socket to us and a
 * robust process-shared mutex in a /dev/shm file, and times, from the kill:
 *   mutex    our thread blocked in pthread_mutex_lock gets EOWNERDEAD
 *   socket   our end of the socket reads EOF (what libhv's ring sees today)
 *   waitpid  the victim's exit status (what hvagent sees)
 *
 *   bench_elastic_exit [--python] [--mb MB] [--kills N]
 *
 * --python: the victim is /usr/bin/python3 after `import torch` (a torch worker); otherwise a C
 * process holding --mb MB of written memory (default 230). Prints one line per kill and the
 * medians. Same host only: a robust futex needs memory both processes map.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *VICTIM_PY =
    "import ctypes, mmap, os, sys, signal\n"
    "import torch\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.pthread_mutex_lock.argtypes = [ctypes.c_void_p]\n"
    "buf = (ctypes.c_char * 4096).from_buffer(m)\n"
    "assert libc.pthread_mutex_lock(ctypes.addressof(buf)) == 0\n"
    "os.write(int(sys.argv[2]), b'x')\n"
    "while True:\n"
    "    signal.pause()\n";

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct watch_s {
    pthread_mutex_t *mu;
    double t; /* when the lock returned */
    int rc;
} watch_t;

static void *watch(void *arg) {
    watch_t *w = arg;
    w->rc = pthread_mutex_lock(w->mu);
    w->t = now_ms();
    if (w->rc == EOWNERDEAD) {
        pthread_mutex_consistent(w->mu);
    }
    if (w->rc == 0 || w->rc == EOWNERDEAD) {
        pthread_mutex_unlock(w->mu);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One kill; fills the three delays (ms). Returns 0 or -1. */
static int one_kill(int python, size_t mb, const char *path, double out[3]) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return -1;
    }
    pthread_mutex_t *mu = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mu == MAP_FAILED) {
        perror("mmap");
        return -1;
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
    int sv[2], ready[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(ready) != 0) {
        perror("socketpair");
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        close(ready[0]);
        if (python) {
            char wfd[16];
            snprintf(wfd, sizeof(wfd), "%d", ready[1]);
            execl("/usr/bin/python3", "python3", "-c", VICTIM_PY, path, wfd, (char *)NULL);
            _exit(127);
        }
        char *p = malloc(mb << 20);
        if (p != NULL) {
            memset(p, 1, mb << 20);
        }
        pthread_mutex_lock(mu);
        if (write(ready[1], "x", 1) != 1) {
            _exit(1);
        }
        for (;;) {
            pause();
        }
    }
    close(sv[1]);
    close(ready[1]);
    char c;
    int ok = pid > 0 && read(ready[0], &c, 1) == 1;
    close(ready[0]);
    if (!ok) {
        fprintf(stderr, "bench_elastic_exit: the victim did not start\n");
        close(sv[0]);
        return -1;
    }
    watch_t w = {.mu = mu};
    pthread_t th;
    pthread_create(&th, NULL, watch, &w);
    usleep(50000); // the watcher is blocked in the lock
    double t0 = now_ms();
    kill(pid, SIGKILL);
    struct pollfd pf = {.fd = sv[0], .events = POLLIN};
    poll(&pf, 1, 30000);
    double t_sock = now_ms();
    pthread_join(th, NULL);
    waitpid(pid, NULL, 0);
    double t_wait = now_ms();
    close(sv[0]);
    munmap(mu, 4096);
    unlink(path);
    if (w.rc != EOWNERDEAD) {
        fprintf(stderr, "bench_elastic_exit: the lock returned %d, not EOWNERDEAD\n", w.rc);
        return -1;
    }
    out[0] = w.t - t0;
    out[1] = t_sock - t0;
    out[2] = t_wait - t0;
    return 0;
}

int main(int argc, char **argv) {
    int python = 0, kills = 7;
    size_t mb = 230;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--python") == 0) {
            python = 1;
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--kills") == 0 && i + 1 < argc) {
            kills = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_elastic_exit [--python] [--mb MB] [--kills N]\n");
            return 2;
        }
    }
    if (kills < 1 || kills > 1000) {
        fprintf(stderr, "bench_elastic_exit: --kills must be 1..1000\n");
        return 2;
    }
    char path[64];
    snprintf(path, sizeof(path), "/dev/shm/hv-bench-exit.%d", (int)getpid());
    double *v[3];
    for (int k = 0; k < 3; k++) {
        v[k] = calloc((size_t)kills, sizeof(double));
    }
    for (int i = 0; i < kills; i++) {
        double d[3];
        if (one_kill(python, mb, path, d) != 0) {
            return 1;
        }
        for (int k = 0; k < 3; k++) {
            v[k][i] = d[k];
        }
        printf("kill %d: mutex %.2f ms, socket EOF %.2f ms, waitpid %.2f ms\n", i + 1, d[0], d[1],
               d[2]);
        fflush(stdout);
    }
    printf("victim %s: median over %d kills: mutex %.2f ms, socket EOF %.2f ms, waitpid %.2f ms\n",
           python ? "python3 + torch" : "C process", kills, median(v[0], kills),
           median(v[1], kills), median(v[2], kills));
    for (int k = 0; k < 3; k++) {
        free(v[k]);
    }
    return 0;
}
