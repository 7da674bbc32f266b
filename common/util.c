/* util: see util.h. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

uint64_t hv_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t hv_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct timespec hv_realtime_in_ms(uint32_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000u);
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

const char *hv_fmt_time(uint64_t wall_ms, char *buf, size_t len) {
    if (wall_ms == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

hv_err hv_mkdirs(const char *path, unsigned mode) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp)) {
        return HV_EINVAL;
    }
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, mode) != 0 && errno != EEXIST) {
                return hv_err_from_errno(errno);
            }
            *p = '/';
        }
    }
    if (mkdir(tmp, mode) != 0 && errno != EEXIST) {
        return hv_err_from_errno(errno);
    }
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return HV_EEXIST;
    }
    return HV_OK;
}

hv_err hv_mkdirs_msg(const char *path, unsigned mode, char *err, size_t errlen) {
    hv_err rc = hv_mkdirs(path, mode);
    int e = errno;
    if (rc == HV_OK) {
        return HV_OK;
    }
    /* The first level that is there but no directory: the path itself or a parent. */
    char tmp[4096];
    size_t n = strlen(path);
    if (n < sizeof(tmp)) {
        memcpy(tmp, path, n + 1);
        for (char *p = tmp + 1;; p++) {
            if (*p != '/' && *p != '\0') {
                continue;
            }
            char c = *p;
            *p = '\0';
            struct stat st;
            if (stat(tmp, &st) == 0 && !S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "%s exists and is not a directory", c == '\0' ? "it" : tmp);
                return HV_EEXIST;
            }
            *p = c;
            if (c == '\0') {
                break;
            }
        }
    }
    snprintf(err, errlen, "%s", rc == HV_EEXIST ? "it exists and is not a directory" : strerror(e));
    return rc;
}

hv_err hv_read_file(const char *path, size_t max, char **out, size_t *len_out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return hv_err_from_errno(errno);
    }
    hv_err rc = HV_OK;
    size_t cap = 4096, len = 0;
    char *buf = hv_malloc(cap + 1);
    if (buf == NULL) {
        close(fd);
        return HV_ENOMEM;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= max) {
                rc = HV_ETOOBIG;
                break;
            }
            size_t ncap = cap * 2 > max ? max : cap * 2;
            char *nb = hv_realloc(buf, ncap + 1);
            if (nb == NULL) {
                rc = HV_ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            rc = hv_err_from_errno(errno);
            break;
        }
        if (r == 0) {
            break;
        }
        len += (size_t)r;
    }
    close(fd);
    if (rc != HV_OK) {
        hv_free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    if (len_out != NULL) {
        *len_out = len;
    }
    return HV_OK;
}

hv_err hv_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp)) {
        return HV_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        return hv_err_from_errno(errno);
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            hv_err rc = hv_err_from_errno(errno);
            close(fd);
            unlink(tmp);
            return rc;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        hv_err rc = hv_err_from_errno(errno);
        unlink(tmp);
        return rc;
    }
    if (rename(tmp, path) != 0) {
        hv_err rc = hv_err_from_errno(errno);
        unlink(tmp);
        return rc;
    }
    return HV_OK;
}

static pid_t pidfile_read(const char *pid_path) {
    char *txt = NULL;
    if (hv_read_file(pid_path, 64, &txt, NULL) != HV_OK) {
        return 0;
    }
    long v = strtol(txt, NULL, 10);
    hv_free(txt);
    return v > 0 ? (pid_t)v : 0;
}

/* The pid file this process holds (hv_pidfile_claim): the open descriptor is what keeps its
 * lock, so nothing else in the process may open and close that file (closing any descriptor of
 * a file drops the process's fcntl locks on it). */
static int pidfile_fd = -1;
static char pidfile_held[4096];

/* The write end of the pipe to the waiting parent (hv_daemonize_wait), -1 once answered. */
static int daemon_notify_fd = -1;

static void notify_write(char kind, const char *text) {
    if (daemon_notify_fd < 0) {
        return;
    }
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), "%c%s", kind, text != NULL ? text : "");
    if (n < 0) {
        n = 1;
    }
    size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(daemon_notify_fd, p, len);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            break;
        }
        p += w;
        len -= (size_t)w;
    }
    close(daemon_notify_fd);
    daemon_notify_fd = -1;
}

void hv_daemon_ready(const char *line) { notify_write('k', line); }

void hv_daemon_failed(const char *why) {
    /* A daemon that could not start gives its pid file back before the command that started it
     * returns, so nobody finds the file of a daemon that never ran. */
    if (daemon_notify_fd >= 0 && pidfile_fd >= 0) {
        hv_pidfile_remove(pidfile_held);
    }
    notify_write('e', why);
}

/* Parent side: reads the daemon's answer until EOF or wait_ms, then exits. */
static void daemon_parent_wait(int fd, pid_t child, const char *pid_path, const char *log_path,
                               uint32_t wait_ms) {
    char msg[2048];
    size_t got = 0;
    uint64_t deadline = hv_now_ms() + wait_ms;
    int eof = 0;
    while (!eof && got < sizeof(msg) - 1) {
        uint64_t now = hv_now_ms();
        if (now >= deadline) {
            break;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - now));
        if (pr < 0 && errno == EINTR) {
            continue;
        }
        if (pr <= 0) {
            break;
        }
        ssize_t r = read(fd, msg + got, sizeof(msg) - 1 - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            eof = 1;
        } else {
            got += (size_t)r;
        }
    }
    msg[got] = '\0';
    waitpid(child, NULL, 0);
    if (got > 0 && msg[0] == 'k') {
        if (msg[1] != '\0') {
            printf("%s\n", msg + 1);
        }
        fflush(stdout);
        _exit(0);
    }
    if (got > 0 && msg[0] == 'e') {
        fprintf(stderr, "%s\n", msg + 1);
    } else if (eof) {
        fprintf(stderr, "the daemon exited before it was ready%s%s\n", log_path ? "; see " : "",
                log_path ? log_path : "");
    } else {
        pid_t pid = pidfile_read(pid_path);
        fprintf(stderr, "the daemon (pid %d) did not report ready within %u s%s%s\n", (int)pid,
                (unsigned)(wait_ms / 1000), log_path ? "; see " : "", log_path ? log_path : "");
    }
    _exit(1);
}

static hv_err daemonize(const char *pid_path, const char *log_path, uint32_t wait_ms) {
    /* Only the lock says a daemon runs: a pid file left by a killed one may name a live stranger
     * (pids are reused), and that must not keep a new daemon from starting. */
    if (hv_lock_holder(pid_path) != 0) {
        return HV_EEXIST;
    }
    int sync_pipe[2];
    if (pipe2(sync_pipe, O_CLOEXEC) != 0) {
        return hv_err_from_errno(errno);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        hv_err rc = hv_err_from_errno(errno);
        close(sync_pipe[0]);
        close(sync_pipe[1]);
        return rc;
    }
    if (pid > 0) {
        close(sync_pipe[1]);
        if (wait_ms > 0) {
            daemon_parent_wait(sync_pipe[0], pid, pid_path, log_path, wait_ms);
        }
        /* Wait for the daemon to confirm the pid file, then leave. */
        char c = 0;
        ssize_t r;
        do {
            r = read(sync_pipe[0], &c, 1);
        } while (r < 0 && errno == EINTR);
        waitpid(pid, NULL, 0);
        _exit(r == 1 && c == 'k' ? 0 : 1);
    }
    close(sync_pipe[0]);
    setsid();
    pid = fork();
    if (pid < 0) {
        _exit(1);
    }
    if (pid > 0) {
        _exit(0);
    }
    int nullfd = open("/dev/null", O_RDWR);
    int logfd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    if (nullfd >= 0) {
        dup2(nullfd, 0);
        dup2(logfd >= 0 ? logfd : nullfd, 1);
        dup2(logfd >= 0 ? logfd : nullfd, 2);
        if (nullfd > 2) {
            close(nullfd);
        }
    }
    if (logfd > 2) {
        close(logfd);
    }
    int holder = 0;
    hv_err rc = hv_pidfile_claim(pid_path, &holder);
    daemon_notify_fd = sync_pipe[1];
    if (rc != HV_OK) {
        char why[4200];
        if (rc == HV_EEXIST) {
            snprintf(why, sizeof(why), "the pid file %s is held by another daemon (pid %d)",
                     pid_path, holder);
        } else {
            snprintf(why, sizeof(why), "cannot write the pid file %s: %s", pid_path,
                     hv_strerror(rc));
        }
        hv_daemon_failed(why);
    } else if (wait_ms == 0) {
        hv_daemon_ready(NULL);
    }
    return rc;
}

hv_err hv_daemonize(const char *pid_path, const char *log_path) {
    return daemonize(pid_path, log_path, 0);
}

hv_err hv_daemonize_wait(const char *pid_path, const char *log_path, uint32_t wait_ms) {
    return daemonize(pid_path, log_path, wait_ms > 0 ? wait_ms : 1);
}

/* ---- exclusive lock files --------------------------------------------------------------------- */

int hv_lock_holder(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int pid = 0;
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
        pid = fl.l_pid > 0 ? (int)fl.l_pid : -1;
    }
    close(fd);
    return pid;
}

hv_err hv_lock_take(const char *path, int *fd_out, int *holder_out) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return hv_err_from_errno(errno);
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EACCES) {
            struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (holder_out != NULL) {
                *holder_out = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (int)q.l_pid : 0;
            }
            close(fd);
            return HV_EEXIST;
        }
        close(fd);
        return hv_err_from_errno(e);
    }
    /* For people reading the directory; the lock, not this text, is what counts. */
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)n, 0) < 0) {
        /* informational only */
    }
    *fd_out = fd;
    return HV_OK;
}

/* ---- pid files -------------------------------------------------------------------------------- */

/* Whether fd still is the file at path (not unlinked or replaced since it was opened). */
static int fd_is_path(int fd, const char *path) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

hv_err hv_pidfile_claim(const char *pid_path, int *holder_out) {
    if (strlen(pid_path) >= sizeof(pidfile_held)) {
        return HV_EINVAL;
    }
    /* A stop that removes a stale file may unlink it between our open and our lock: then the
     * lock is on a file nobody will find, so try again (a few times; it cannot race forever). */
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = -1;
        int holder = 0;
        hv_err rc = hv_lock_take(pid_path, &fd, &holder);
        if (rc == HV_EEXIST && holder_out != NULL) {
            *holder_out = holder;
        }
        if (rc != HV_OK) {
            return rc;
        }
        if (!fd_is_path(fd, pid_path)) {
            close(fd);
            continue;
        }
        if (pidfile_fd >= 0) {
            close(pidfile_fd);
        }
        pidfile_fd = fd;
        snprintf(pidfile_held, sizeof(pidfile_held), "%s", pid_path);
        return HV_OK;
    }
    return HV_ESTATE;
}

void hv_pidfile_remove(const char *pid_path) {
    if (pidfile_fd < 0 || strcmp(pid_path, pidfile_held) != 0) {
        return;
    }
    /* Unlinked while still locked, so a starting daemon never locks the file we remove. */
    if (fd_is_path(pidfile_fd, pid_path)) {
        unlink(pid_path);
    }
    close(pidfile_fd);
    pidfile_fd = -1;
    pidfile_held[0] = '\0';
}

int hv_pidfile_remove_stale(const char *pid_path) {
    int fd = open(pid_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int named = 0;
    if (fcntl(fd, F_SETLK, &fl) == 0 && fd_is_path(fd, pid_path)) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        long v = n > 0 ? strtol(buf, NULL, 10) : 0;
        named = v > 0 && v < 1L << 30 ? (int)v : -1;
        unlink(pid_path);
    }
    close(fd);
    return named;
}

int hv_pid_state(int pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return 0;
    }
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : 1;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 1;
    }
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
    return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X') ? 2 : 1;
}

hv_err hv_stop_locked(const char *lock_path, int sig, uint32_t timeout_ms, int kill_after,
                      int *pid_out) {
    int pid = hv_lock_holder(lock_path);
    if (pid == 0) {
        return HV_ENOTFOUND;
    }
    if (pid < 0) {
        return HV_EPERM; /* held from another pid namespace: nobody we can name */
    }
    if (pid_out != NULL) {
        *pid_out = pid;
    }
    if (kill(pid, sig) != 0) {
        return errno == ESRCH ? HV_ENOTFOUND : hv_err_from_errno(errno);
    }
    uint64_t deadline = hv_now_ms() + timeout_ms;
    int killed = 0;
    for (;;) {
        /* Once the lock is free the daemon has let go; it exits right after. Never signal a
         * pid whose lock is gone: it may already belong to someone else. */
        if (hv_lock_holder(lock_path) != pid) {
            /* Its exit follows; wait for the pid to be gone (reaped), within the same bound. A
             * parent may be slow to reap (a container's init): a zombie for 3 s is gone enough. */
            uint64_t until = deadline > hv_now_ms() + 2000 ? deadline : hv_now_ms() + 2000;
            uint64_t zombie_since = 0;
            int st;
            while ((st = hv_pid_state(pid)) != 0 && hv_now_ms() < until) {
                if (st == 2 && zombie_since == 0) {
                    zombie_since = hv_now_ms();
                }
                if (st == 2 && hv_now_ms() - zombie_since >= 3000) {
                    break;
                }
                usleep(10000);
            }
            return HV_OK;
        }
        uint64_t now = hv_now_ms();
        if (now >= deadline) {
            if (!kill_after || killed) {
                return HV_ETIMEDOUT;
            }
            kill(pid, SIGKILL); /* it still holds the lock: it is the daemon */
            killed = 1;
            deadline = now + 5000;
        }
        usleep(20000);
    }
}

hv_err hv_parse_hostport(const char *s, char *host, size_t hostlen, int *port) {
    const char *colon;
    const char *hstart = s;
    size_t hlen;
    if (s == NULL || *s == '\0') {
        return HV_EINVAL;
    }
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || end[1] != ':') {
            return HV_EINVAL;
        }
        hstart = s + 1;
        hlen = (size_t)(end - hstart);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            return HV_EINVAL;
        }
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= hostlen) {
        return HV_EINVAL;
    }
    uint64_t p;
    if (hv_parse_u64(colon + 1, 0, 65535, &p) != HV_OK) {
        return HV_EINVAL;
    }
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return HV_OK;
}

hv_err hv_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') {
        return HV_EINVAL;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return HV_EINVAL;
    }
    *out = v;
    return HV_OK;
}

hv_err hv_parse_size(const char *s, uint64_t *out) {
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"K", 1000},
                 {"KB", 1000},
                 {"KiB", 1u << 10},
                 {"M", 1000000},
                 {"MB", 1000000},
                 {"MiB", 1u << 20},
                 {"G", 1000000000},
                 {"GB", 1000000000},
                 {"GiB", 1u << 30},
                 {"T", 1000000000000},
                 {"TB", 1000000000000},
                 {"TiB", 1ull << 40}};
    if (s == NULL || *s < '0' || *s > '9') {
        return HV_EINVAL;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) {
        return HV_EINVAL;
    }
    while (*end == ' ') {
        end++;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult) {
                return HV_EINVAL;
            }
            *out = v * units[i].mult;
            return HV_OK;
        }
    }
    return HV_EINVAL;
}

const char *hv_fmt_size(uint64_t bytes, char *buf, size_t len) {
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t i = 0;
    while (v >= 1024.0 && i + 1 < sizeof(names) / sizeof(names[0])) {
        v /= 1024.0;
        i++;
    }
    if (i == 0) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    } else {
        snprintf(buf, len, "%.1f %s", v, names[i]);
    }
    return buf;
}
