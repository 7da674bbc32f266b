/*
 * notify_test: the sd_notify messages reach a real AF_UNIX datagram socket, by path and by
 * abstract name ("@..."), one datagram per message, byte for byte; without NOTIFY_SOCKET nothing
 * is sent and nothing fails; the watchdog pings at half WATCHDOG_USEC and only for its own pid;
 * malformed values are refused; the environment is cleared for children. Each case can run
 * alone: `notify_test <case>`.
 */
#include "notify.h"
#include "hv_check.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int rx = -1;       /* the "manager's" socket */
static char rx_name[108]; /* its name as NOTIFY_SOCKET says it */
static char rx_dir[] = "/tmp/notify_test.XXXXXX";

/* Binds rx to a path (abstract = 0) or an abstract name; fills rx_name. */
static void listen_on(int abstract) {
    rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    socklen_t len;
    if (abstract) {
        snprintf(rx_name, sizeof(rx_name), "@hv-notify-test-%d", (int)getpid());
        size_t n = strlen(rx_name);
        memcpy(sa.sun_path, rx_name, n);
        sa.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        snprintf(rx_name, sizeof(rx_name), "%s/notify", rx_dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", rx_name);
        len = sizeof(sa);
    }
    CHECK(rx >= 0 && bind(rx, (struct sockaddr *)&sa, len) == 0);
}

/* The next datagram within 1 s ("" when none came). */
static const char *next_msg(void) {
    static char buf[2048];
    buf[0] = '\0';
    struct pollfd p = {.fd = rx, .events = POLLIN};
    if (poll(&p, 1, 1000) == 1) {
        ssize_t n = recv(rx, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
    }
    return buf;
}

/* 1 when no datagram is waiting. */
static int nothing_waiting(void) {
    struct pollfd p = {.fd = rx, .events = POLLIN};
    return poll(&p, 1, 50) == 0;
}

static void setup(void) { CHECK(mkdtemp(rx_dir) != NULL); }

static void teardown(void) {
    if (rx >= 0) {
        close(rx);
        rx = -1;
    }
    char p[200];
    snprintf(p, sizeof(p), "%s/notify", rx_dir);
    unlink(p);
    rmdir(rx_dir);
    strcpy(rx_dir, "/tmp/notify_test.XXXXXX");
}

static void case_path(void) {
    listen_on(0);
    hv_notify_t n;
    CHECK_RC(hv_notify_init(&n, rx_name, NULL, NULL), HV_OK);
    CHECK(hv_notify_active(&n));
    CHECK_RC(hv_notify_send(&n, "READY=1\nSTATUS=serving"), HV_OK);
    CHECK_STR(next_msg(), "READY=1\nSTATUS=serving");
    CHECK_RC(hv_notify_sendf(&n, "STATUS=nodes %d, jobs %d", 3, 1), HV_OK);
    CHECK_STR(next_msg(), "STATUS=nodes 3, jobs 1");
    CHECK_RC(hv_notify_send(&n, "STOPPING=1"), HV_OK);
    CHECK_STR(next_msg(), "STOPPING=1");
    hv_notify_fini(&n);
}

static void case_abstract(void) {
    listen_on(1);
    hv_notify_t n;
    CHECK_RC(hv_notify_init(&n, rx_name, NULL, NULL), HV_OK);
    CHECK_RC(hv_notify_send(&n, "READY=1"), HV_OK);
    CHECK_STR(next_msg(), "READY=1");
}

static void case_no_manager(void) {
    hv_notify_t n;
    CHECK_RC(hv_notify_init(&n, NULL, "1000000", NULL), HV_OK);
    CHECK(!hv_notify_active(&n));
    CHECK_RC(hv_notify_send(&n, "READY=1"), HV_OK);
    hv_notify_watchdog(&n, 5000); // no socket: nothing to do, nothing fails
}

static void case_gone_manager(void) {
    /* A socket path nobody listens on: the send fails softly, the caller goes on. */
    char p[200];
    snprintf(p, sizeof(p), "%s/nobody", rx_dir);
    hv_notify_t n;
    CHECK_RC(hv_notify_init(&n, p, NULL, NULL), HV_OK);
    CHECK_RC(hv_notify_send(&n, "READY=1"), HV_EIO);
}

static void case_watchdog(void) {
    listen_on(0);
    hv_notify_t n;
    char pid[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    CHECK_RC(hv_notify_init(&n, rx_name, "2000000", pid), HV_OK); // 2 s: a ping each second
    CHECK_EQ(n.watchdog_ms, 1000);
    hv_notify_watchdog(&n, 10000);
    CHECK_STR(next_msg(), "WATCHDOG=1");
    hv_notify_watchdog(&n, 10999);
    CHECK(nothing_waiting());
    hv_notify_watchdog(&n, 11000);
    CHECK_STR(next_msg(), "WATCHDOG=1");
    /* A watchdog meant for another process (the manager's WATCHDOG_PID) is not ours to ping. */
    CHECK_RC(hv_notify_init(&n, rx_name, "2000000", "1"), HV_OK);
    CHECK_EQ(n.watchdog_ms, 0);
    hv_notify_watchdog(&n, 20000);
    CHECK(nothing_waiting());
}

static void case_malformed(void) {
    hv_notify_t n;
    CHECK_RC(hv_notify_init(&n, "relative/path", NULL, NULL), HV_EINVAL);
    CHECK(!hv_notify_active(&n));
    char longp[200];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    CHECK_RC(hv_notify_init(&n, longp, NULL, NULL), HV_EINVAL);
    CHECK(!hv_notify_active(&n));
    CHECK_RC(hv_notify_init(&n, "/run/x", "12s", NULL), HV_EINVAL);
    CHECK_EQ(n.watchdog_ms, 0);
    CHECK_RC(hv_notify_init(&n, "/run/x", "-5", NULL), HV_EINVAL);
    CHECK_RC(hv_notify_init(&n, "/run/x", "0", NULL), HV_EINVAL);
}

static void case_env_cleared(void) {
    listen_on(0);
    setenv("NOTIFY_SOCKET", rx_name, 1);
    setenv("WATCHDOG_USEC", "3000000", 1);
    unsetenv("WATCHDOG_PID");
    hv_notify_t n;
    hv_notify_init_env(&n);
    CHECK(hv_notify_active(&n));
    CHECK_EQ(n.watchdog_ms, 1500);
    CHECK(getenv("NOTIFY_SOCKET") == NULL);
    CHECK(getenv("WATCHDOG_USEC") == NULL);
    CHECK_RC(hv_notify_send(&n, "READY=1"), HV_OK);
    CHECK_STR(next_msg(), "READY=1");
}

HV_CHECK_MAIN(setup, teardown, {"path", case_path}, {"abstract", case_abstract},
              {"no_manager", case_no_manager}, {"gone_manager", case_gone_manager},
              {"watchdog", case_watchdog}, {"malformed", case_malformed},
              {"env_cleared", case_env_cleared})
