/*
 * notify: the sd_notify datagram protocol (see notify.h). One AF_UNIX datagram socket per
 * message, closed at once: messages are rare (readiness, a status line every few seconds, a
 * watchdog ping), and no descriptor stays open for workers to inherit.
 */
#include "notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

_Static_assert(sizeof(((struct sockaddr_un *)0)->sun_path) == sizeof(((hv_notify_t *)0)->path),
               "hv_notify_t.path holds a sun_path");

/* A decimal unsigned value that fills the whole string. */
static int notify_parse_u64(const char *s, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

hv_err hv_notify_init(hv_notify_t *n, const char *socket_name, const char *watchdog_usec,
                      const char *watchdog_pid) {
    memset(n, 0, sizeof(*n));
    hv_err rc = HV_OK;
    if (socket_name != NULL && socket_name[0] != '\0') {
        size_t len = strlen(socket_name);
        if ((socket_name[0] != '/' && socket_name[0] != '@') || len >= sizeof(n->path)) {
            rc = HV_EINVAL;
        } else {
            memcpy(n->path, socket_name, len);
            if (socket_name[0] == '@') {
                n->path[0] = '\0'; // abstract: the name has no terminating NUL
            }
            n->path_len = len;
        }
    }
    if (watchdog_usec != NULL && watchdog_usec[0] != '\0') {
        uint64_t usec = 0, pid = 0;
        if (notify_parse_u64(watchdog_usec, &usec) != 0 || usec == 0) {
            rc = HV_EINVAL;
        } else if (watchdog_pid == NULL || watchdog_pid[0] == '\0' ||
                   (notify_parse_u64(watchdog_pid, &pid) == 0 && pid == (uint64_t)getpid())) {
            /* Half the manager's timeout, as sd_watchdog_enabled(3) advises; at least 1 ms. */
            n->watchdog_ms = usec / 2000u > 0 ? usec / 2000u : 1;
        }
    }
    return rc;
}

void hv_notify_init_env(hv_notify_t *n) {
    const char *sock = getenv("NOTIFY_SOCKET");
    const char *usec = getenv("WATCHDOG_USEC");
    if (hv_notify_init(n, sock, usec, getenv("WATCHDOG_PID")) != HV_OK) {
        HV_LOG(HV_LOG_WARN, "notify", "HV-NOTIFY-ENV",
               "ignoring a malformed NOTIFY_SOCKET '%s' or WATCHDOG_USEC '%s' from the service "
               "manager",
               sock != NULL ? sock : "", usec != NULL ? usec : "");
    }
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

void hv_notify_fini(hv_notify_t *n) { memset(n, 0, sizeof(*n)); }

int hv_notify_active(const hv_notify_t *n) { return n->path_len > 0; }

hv_err hv_notify_send(hv_notify_t *n, const char *state) {
    if (n->path_len == 0) {
        return HV_OK;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        HV_LOG(HV_LOG_DEBUG, "notify", "HV-NOTIFY-SEND", "socket: %s", strerror(errno));
        return HV_EIO;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, n->path, n->path_len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->path_len);
    if (n->path[0] != '\0') {
        salen++; // a path carries its NUL; an abstract name is exactly path_len bytes
    }
    hv_err rc = HV_OK;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0) {
        HV_LOG(HV_LOG_DEBUG, "notify", "HV-NOTIFY-SEND", "sendto %s%s: %s",
               n->path[0] == '\0' ? "@" : "", n->path[0] == '\0' ? n->path + 1 : n->path,
               strerror(errno));
        rc = HV_EIO;
    }
    close(fd);
    return rc;
}

hv_err hv_notify_sendf(hv_notify_t *n, const char *fmt, ...) {
    if (n->path_len == 0) {
        return HV_OK;
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap); // a longer status line is cut, not refused
    va_end(ap);
    return hv_notify_send(n, buf);
}

void hv_notify_watchdog(hv_notify_t *n, uint64_t now_ms) {
    if (n->watchdog_ms == 0 || n->path_len == 0) {
        return;
    }
    if (n->last_ping_ms == 0 || now_ms - n->last_ping_ms >= n->watchdog_ms) {
        n->last_ping_ms = now_ms;
        hv_notify_send(n, "WATCHDOG=1");
    }
}
