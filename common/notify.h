/*
 * notify: the service manager's readiness protocol (systemd's sd_notify), written out in a few
 * lines instead of linking libsystemd. The manager passes $NOTIFY_SOCKET (a path, or "@name" for a
 * Linux abstract socket) and, with WatchdogSec=, $WATCHDOG_USEC (and $WATCHDOG_PID); the daemon
 * sends one datagram per message of newline-separated assignments: "READY=1", "STATUS=...",
 * "WATCHDOG=1", "STOPPING=1". The protocol is a stable interface of systemd
 * (sd_notify(3), "systemd.exec" environment); without $NOTIFY_SOCKET every call does nothing, so
 * the daemons call it unconditionally.
 *
 * It is not a service manager client beyond that: no fd store, no socket activation. Callers:
 * head/main.c and agent/main.c. An hv_notify_t is caller storage (init/fini), used on one thread.
 */
#ifndef HV_COMMON_NOTIFY_H
#define HV_COMMON_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_notify_s {
    char path[108];        /* the socket's address; a leading '\0' for an abstract name */
    size_t path_len;       /* bytes of path used (0: no manager, every send is a no-op) */
    uint64_t watchdog_ms;  /* interval between WATCHDOG=1 pings: half of WATCHDOG_USEC; 0: none */
    uint64_t last_ping_ms; /* monotonic ms of the last ping (hv_notify_watchdog) */
} hv_notify_t;

/* Sets n up from the given values (each may be NULL): socket as in $NOTIFY_SOCKET,
 * watchdog_usec and watchdog_pid as in $WATCHDOG_USEC and $WATCHDOG_PID (a watchdog meant for
 * another pid is ignored). HV_EINVAL when socket or watchdog_usec is malformed (n is then left
 * inactive, or without a watchdog); n is usable in every case. */
hv_err hv_notify_init(hv_notify_t *n, const char *socket, const char *watchdog_usec,
                      const char *watchdog_pid);
/* hv_notify_init from the environment, then removes NOTIFY_SOCKET, WATCHDOG_USEC and
 * WATCHDOG_PID from it, so that the processes this one starts (workers, providers) do not
 * talk to the manager in its name. A malformed value is logged (WARN) and ignored. */
void hv_notify_init_env(hv_notify_t *n);
void hv_notify_fini(hv_notify_t *n);

/* 1 when a manager listens ($NOTIFY_SOCKET was set). */
int hv_notify_active(const hv_notify_t *n);
/* Sends state (e.g. "READY=1\nSTATUS=serving") as one datagram. HV_OK when sent or when no
 * manager listens; HV_EIO (errno in the log at DEBUG) when the datagram could not be sent. Never
 * blocks: the socket is non-blocking and a full queue drops the message. */
hv_err hv_notify_send(hv_notify_t *n, const char *state);
hv_err hv_notify_sendf(hv_notify_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends WATCHDOG=1 when the watchdog is on and its interval passed since the last ping (now_ms:
 * hv_now_ms()). Call it from a timer that fires at least as often as the interval. */
void hv_notify_watchdog(hv_notify_t *n, uint64_t now_ms);

#endif
