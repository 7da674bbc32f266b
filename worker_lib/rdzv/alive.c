/*
 * alive: see alive.h. A mark is a small file in /dev/shm holding a robust process-shared mutex,
 * locked by a holder thread that lives as long as the mark; a magic word written after the lock
 * says the mark is ready. A watcher locks the peer's mutex with a bounded wait in a loop:
 * 0 (the holder released it: a clean leave) ends it quietly; EOWNERDEAD or ENOTRECOVERABLE (the
 * holder's process died) fires the callback. The first watcher to see EOWNERDEAD unlocks without
 * making the mutex consistent, so that every other watcher wakes with ENOTRECOVERABLE.
 */
#include "alive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

#define ALIVE_DIR "/dev/shm"
#define ALIVE_PREFIX "hv-alive-"
#define ALIVE_MAGIC 0x68762d616c697665ull /* "hv-alive" */
#define ALIVE_SLICE_MS 200
#define ALIVE_STACK (256u << 10) /* the callback logs (hv_set_logger: the user's sink) */

typedef struct mark_s {
    pthread_mutex_t mu;
    _Atomic uint64_t magic; // ALIVE_MAGIC once mu is held
    int32_t pid;
    _Atomic int32_t exiting; // 1: its process called exit() (atexit): its status is reported
} mark_t;

/* The marks this process holds, for the atexit handler (exit_mark_all). */
#define ALIVE_HELD_MAX 16
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(mark_t *) held_marks[ALIVE_HELD_MAX];
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* At exit(): every mark held says so, so that a watcher can tell an exit (whose status the
 * agent reports) from a death by a signal (a kill, a crash). No lock taken (a thread may hold
 * held_mu when exit() runs): the slots are atomic, and release clears its slot before munmap. */
static void exit_mark_all(void) {
    int32_t me = (int32_t)getpid(); // a forked child that exits inherited the list, not the marks
    for (int i = 0; i < ALIVE_HELD_MAX; i++) {
        mark_t *m = atomic_load(&held_marks[i]);
        if (m != NULL && m->pid == me) {
            atomic_store(&m->exiting, 1);
        }
    }
}

static void exit_register(void) { atexit(exit_mark_all); }

static void held_set(mark_t *m, int on) {
    pthread_mutex_lock(&held_mu);
    for (int i = 0; i < ALIVE_HELD_MAX; i++) {
        mark_t *cur = atomic_load(&held_marks[i]);
        if (on ? cur == NULL : cur == m) {
            atomic_store(&held_marks[i], on ? m : NULL);
            break;
        }
    }
    pthread_mutex_unlock(&held_mu);
}

/* Shared by a hold and its watchers: the last one to let go frees it. */
typedef struct guard_s {
    pthread_mutex_t mu;
    int armed; // 0 after release: callbacks are off
    int refs;
} guard_t;

struct hv__alive_s {
    uint64_t world_id;
    uint32_t generation;
    char path[128];
    mark_t *mark;
    pthread_t holder;
    pthread_mutex_t hmu;
    pthread_cond_t hcv;
    int held, stop; // under hmu
    guard_t *guard;
};

typedef struct watcher_s {
    guard_t *guard;
    mark_t *mark;
    char path[128];
    uint64_t tag;
    hv__alive_cb cb;
    void *ud;
} watcher_t;

static atomic_int n_watchers;

int hv__alive_threads(void) { return atomic_load(&n_watchers); }

static void guard_put(guard_t *g) {
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) {
        pthread_mutex_destroy(&g->mu);
        hv_free(g);
    }
}

/* The port of "ip:port" or "[ip6]:port", or -1. */
static long addr_port(const char *addr) {
    const char *c = addr != NULL ? strrchr(addr, ':') : NULL;
    if (c == NULL || c[1] == '\0') {
        return -1;
    }
    char *end = NULL;
    long p = strtol(c + 1, &end, 10);
    return *end == '\0' && p > 0 && p < 65536 ? p : -1;
}

static int mark_path(char *out, size_t len, uint64_t world_id, uint32_t gen, int rank,
                     const char *addr) {
    long port = addr_port(addr);
    if (port < 0) {
        return -1;
    }
    snprintf(out, len, ALIVE_DIR "/" ALIVE_PREFIX "%u-%llx-%u-%d-%ld", (unsigned)getuid(),
             (unsigned long long)world_id, gen, rank, port);
    return 0;
}

/* Maps an existing mark read-write; NULL when it is absent or not a ready mark. */
static mark_t *mark_open(const char *path) {
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return NULL;
    }
    struct stat st;
    mark_t *m = NULL;
    if (fstat(fd, &st) == 0 && st.st_uid == getuid() && (size_t)st.st_size == sizeof(mark_t)) {
        m = mmap(NULL, sizeof(mark_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            m = NULL;
        } else if (atomic_load(&m->magic) != ALIVE_MAGIC) {
            munmap(m, sizeof(mark_t));
            m = NULL;
        }
    }
    close(fd);
    return m;
}

/* Removes marks of this user whose holder died unwatched (EOWNERDEAD on a try). */
static void sweep_orphans(void) {
    DIR *d = opendir(ALIVE_DIR);
    if (d == NULL) {
        return;
    }
    char mine[64];
    int n = snprintf(mine, sizeof(mine), ALIVE_PREFIX "%u-", (unsigned)getuid());
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, mine, (size_t)n) != 0) {
            continue;
        }
        char path[300];
        snprintf(path, sizeof(path), ALIVE_DIR "/%s", e->d_name);
        mark_t *m = mark_open(path);
        if (m == NULL) {
            continue;
        }
        int rc = pthread_mutex_trylock(&m->mu);
        if (rc == EOWNERDEAD || rc == ENOTRECOVERABLE) {
            unlink(path);
        }
        if (rc == EOWNERDEAD || rc == 0) {
            pthread_mutex_unlock(&m->mu); // not made consistent: stays unrecoverable
        }
        munmap(m, sizeof(mark_t));
    }
    closedir(d);
}

static void *holder_main(void *arg) {
    hv__alive_t *a = arg;
    int rc = pthread_mutex_lock(&a->mark->mu);
    pthread_mutex_lock(&a->hmu);
    a->held = rc == 0 ? 1 : -1;
    if (rc == 0) {
        atomic_store(&a->mark->magic, ALIVE_MAGIC);
    }
    pthread_cond_broadcast(&a->hcv);
    while (!a->stop) {
        pthread_cond_wait(&a->hcv, &a->hmu);
    }
    pthread_mutex_unlock(&a->hmu);
    if (rc == 0) {
        atomic_store(&a->mark->magic, 0);
        pthread_mutex_unlock(&a->mark->mu);
    }
    return NULL;
}

static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg, int detached) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, ALIVE_STACK);
    if (detached) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    }
    int rc = pthread_create(t, &at, fn, arg);
    pthread_attr_destroy(&at);
    return rc;
}

hv_err hv__alive_hold(uint64_t world_id, uint32_t generation, int rank, const char *addr,
                      hv__alive_t **out) {
    *out = NULL;
    hv__alive_t *a = hv_calloc(1, sizeof(*a));
    guard_t *g = hv_calloc(1, sizeof(*g));
    if (a == NULL || g == NULL) {
        hv_free(a);
        hv_free(g);
        return HV_ENOMEM;
    }
    if (mark_path(a->path, sizeof(a->path), world_id, generation, rank, addr) != 0) {
        hv_free(a);
        hv_free(g);
        return HV_EINVAL;
    }
    sweep_orphans();
    a->world_id = world_id;
    a->generation = generation;
    pthread_mutex_init(&g->mu, NULL);
    g->armed = 1;
    g->refs = 1;
    a->guard = g;
    pthread_mutex_init(&a->hmu, NULL);
    pthread_cond_init(&a->hcv, NULL);
    // The port is this process's own, so a file of that name is a dead process's leftover.
    unlink(a->path);
    int fd = open(a->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    hv_err rc = HV_EIO;
    if (fd < 0 || ftruncate(fd, sizeof(mark_t)) != 0) {
        goto fail;
    }
    a->mark = mmap(NULL, sizeof(mark_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fd = -1;
    if (a->mark == MAP_FAILED) {
        a->mark = NULL;
        goto fail;
    }
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    int mrc = pthread_mutex_init(&a->mark->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    a->mark->pid = (int32_t)getpid();
    if (mrc != 0 || start_thread(&a->holder, holder_main, a, 0) != 0) {
        goto fail;
    }
    pthread_mutex_lock(&a->hmu);
    while (a->held == 0) {
        pthread_cond_wait(&a->hcv, &a->hmu); // the holder answers at once (an unheld mutex)
    }
    int held = a->held;
    pthread_mutex_unlock(&a->hmu);
    if (held < 0) {
        a->held = 1; // joined below by release
        hv__alive_release(a);
        return HV_EIO;
    }
    pthread_once(&exit_once, exit_register);
    held_set(a->mark, 1);
    *out = a;
    return HV_OK;
fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(a->path);
    if (a->mark != NULL) {
        munmap(a->mark, sizeof(mark_t));
    }
    pthread_cond_destroy(&a->hcv);
    pthread_mutex_destroy(&a->hmu);
    guard_put(g);
    hv_free(a);
    return rc;
}

static void *watcher_main(void *arg) {
    watcher_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->guard->mu);
        int armed = w->guard->armed;
        pthread_mutex_unlock(&w->guard->mu);
        if (!armed) {
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)ALIVE_SLICE_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        int rc = pthread_mutex_clocklock(&w->mark->mu, CLOCK_MONOTONIC, &ts);
        if (rc == ETIMEDOUT) {
            continue;
        }
        if (rc == 0) {
            pthread_mutex_unlock(&w->mark->mu); // released: the peer left cleanly
            break;
        }
        if (rc == EOWNERDEAD || rc == ENOTRECOVERABLE) {
            if (rc == EOWNERDEAD) {
                pthread_mutex_unlock(&w->mark->mu); // wakes the other watchers, unrecoverable
            }
            unlink(w->path);
            uint64_t how = atomic_load(&w->mark->exiting) ? HV__ALIVE_EXITED : 0;
            pthread_mutex_lock(&w->guard->mu);
            if (w->guard->armed) {
                w->cb(w->ud, w->tag | how);
            }
            pthread_mutex_unlock(&w->guard->mu);
        }
        break;
    }
    munmap(w->mark, sizeof(mark_t));
    guard_put(w->guard);
    hv_free(w);
    atomic_fetch_sub(&n_watchers, 1);
    return NULL;
}

hv_err hv__alive_watch(hv__alive_t *a, int peer_rank, const char *peer_addr, uint64_t tag,
                       hv__alive_cb cb, void *ud) {
    watcher_t *w = hv_calloc(1, sizeof(*w));
    if (w == NULL) {
        return HV_ENOMEM;
    }
    if (mark_path(w->path, sizeof(w->path), a->world_id, a->generation, peer_rank, peer_addr) !=
            0 ||
        (w->mark = mark_open(w->path)) == NULL) {
        hv_free(w);
        return HV_ENOTFOUND;
    }
    w->guard = a->guard;
    w->tag = tag;
    w->cb = cb;
    w->ud = ud;
    pthread_mutex_lock(&a->guard->mu);
    a->guard->refs++;
    pthread_mutex_unlock(&a->guard->mu);
    atomic_fetch_add(&n_watchers, 1);
    pthread_t t;
    if (start_thread(&t, watcher_main, w, 1) != 0) {
        atomic_fetch_sub(&n_watchers, 1);
        munmap(w->mark, sizeof(mark_t));
        guard_put(a->guard);
        hv_free(w);
        return HV_EIO;
    }
    return HV_OK;
}

void hv__alive_release(hv__alive_t *a) {
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->guard->mu);
    a->guard->armed = 0; // waits for a callback running now: none runs after this
    pthread_mutex_unlock(&a->guard->mu);
    unlink(a->path);
    pthread_mutex_lock(&a->hmu);
    a->stop = 1;
    pthread_cond_broadcast(&a->hcv);
    pthread_mutex_unlock(&a->hmu);
    pthread_join(a->holder, NULL);
    held_set(a->mark, 0);
    munmap(a->mark, sizeof(mark_t));
    pthread_cond_destroy(&a->hcv);
    pthread_mutex_destroy(&a->hmu);
    guard_put(a->guard);
    hv_free(a);
}
