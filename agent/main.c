/*
 * hvagent: the node agent's entry point. It parses the command line (agent/config.c), then for
 * `join` wires the modules on one libuv loop: the rpc engine and a channel to the head, the
 * artifact cache, the worker table and the session; it turns head orders into worker actions and
 * worker events into session messages, and owns the process-level concerns: pid file, daemon
 * mode, signals, the drain and an orderly shutdown. `stop` (SIGINT) and `drain` (SIGUSR1) signal
 * a running agent through its pid file. There is no logic here that a module could own.
 *
 * Signals and the ways out:
 *   - SIGTERM is the cloud's preemption notice (AWS gives 2 minutes, GCP 30 s). It starts a
 *     drain that ends the process: the DrainNotice (with the --drain-deadline) goes to the head,
 *     heartbeats say draining, the workers keep running (the head moves elastic jobs' workers
 *     off the node at their next commit and they exit on their own), and once no worker is left
 *     and the head confirmed their exits the agent exits 0. An agent with no workers leaves as
 *     soon as the head has read the notice (bounded wait). When the deadline passes first, the
 *     agent stops as below. --drain-deadline 0 makes SIGTERM stop at once.
 *   - SIGINT, a second SIGTERM, a ShutdownOrder: stop at once: SIGTERM to every worker's
 *     process group, SIGKILL after a grace, report the exits, exit. A further signal hurries
 *     the SIGKILL.
 *   - SIGUSR1 (`hvagent drain`) and a DrainOrder drain without ending the process: the node
 *     stays, takes no new work, and a DrainOrder with undrain set takes it back.
 *
 * Threads: the main thread runs the loop; the rpc engine's completion-queue thread hands
 * everything over to it. No other threads.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "artifact.h"
#include "config.h"
#include "hv.pb-c.h"
#include "interp.h"
#include "keeper.h"
#include "log.h"
#include "mem.h"
#include "notify.h"
#include "rpc.h"
#include "session.h"
#include "util.h"
#include "workers.h"

#ifndef HV_AGENT_VERSION
#define HV_AGENT_VERSION "0.0.0"
#endif

#define AGENT_KILL_GRACE_MS 2000  /* SIGTERM -> SIGKILL on shutdown and lease expiry */
#define AGENT_EXIT_WAIT_MS 1000   /* after the grace: how long to wait for the last exits */
#define AGENT_REPORT_WAIT_MS 3000 /* how long to wait for the head to confirm the exits */
#define AGENT_STOP_TICK_MS 50

typedef enum stop_phase {
    STOP_NONE = 0,
    STOP_DRAIN = 1,   /* after SIGTERM: waiting for the workers to leave on their own */
    STOP_WORKERS = 2, /* waiting for killed workers to exit */
    STOP_REPORT = 3,  /* waiting for the head to acknowledge the exits */
} stop_phase;

typedef struct agent_s {
    hv_agent_config_t cfg;
    uv_loop_t loop;
    hv_rpc_engine_t *eng;
    hv_rpc_channel_t *ch;
    hv_artifact_cache_t *cache;
    hv_workers_t *workers;
    hv_session_t *session;
    hv_keeper_t *keeper; /* the Keeper service for peers' state copies (NULL: keeps none) */
    char copy_addr[300]; /* its address, announced in the Join ("" none) */
    uv_signal_t sig_int, sig_term, sig_usr1;
    uv_timer_t stop_timer;
    stop_phase phase;
    uint64_t phase_deadline; /* loop time when the current phase gives up */
    uint64_t notice_wait;    /* STOP_DRAIN: loop time until which an idle node waits for the head
                                to confirm the drain notice */
    int exit_code;
    uint64_t node_id;
    hv_notify_t notify;      /* the service manager (systemd Type=notify), when one listens */
    uv_timer_t notify_timer; /* WATCHDOG=1 pings, when the manager asked for them */
    uint8_t *state;          /* an actor's saved state, between on_state and on_exited (owned) */
    size_t state_len;
    uint64_t state_for; /* its process (0: none) */
    char *big_path;     /* a larger saved state, between on_state_file and on_exited (owned;
                         * NULL with big_why: not sent, and why) */
    char *big_why;      /* owned */
    uint64_t big_size;
    uint64_t big_for; /* its process (0: none) */
    size_t puts;      /* saved states being uploaded: the drain waits for them as for workers */
} agent_t;

/* ---- shutdown ------------------------------------------------------------------------------- */

static void agent_shutdown(agent_t *a, const char *reason, int exit_code);

/* STOP_DRAIN: leaves for STOP_REPORT once the workers are gone, or stops them at the deadline. */
static void agent_drain_tick(agent_t *a, uint64_t now) {
    size_t n = hv_workers_count(a->workers) + a->puts; /* an exit waits for its state's upload */
    if (n > 0) {
        if (now >= a->phase_deadline) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-DRAIN-DEADLINE",
                   "the drain deadline (%u s) passed with %zu workers still running: stopping "
                   "them",
                   a->cfg.drain_deadline_ms / 1000u, n);
            char reason[96];
            snprintf(reason, sizeof(reason), "the node's drain deadline (%u s) passed",
                     a->cfg.drain_deadline_ms / 1000u);
            agent_shutdown(a, reason, 0);
        }
        return;
    }
    int confirmed = hv_session_drain_confirmed(a->session);
    if (!confirmed && now < a->notice_wait) {
        return;
    }
    if (!confirmed) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-DRAIN-UNCONFIRMED",
               "leaving without word from the head that it got the drain notice (%s)",
               hv_session_connected(a->session) ? "no answer" : "not connected");
    }
    HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-DRAIN-DONE", "drained: no worker left; leaving");
    // Spawn orders that still arrive are answered with an exit, which the report phase waits
    // for like any other.
    hv_workers_kill_all(a->workers, 0, "the node is leaving (drained)", 1);
    hv_artifact_cache_stop(a->cache);
    a->phase = STOP_REPORT;
    a->phase_deadline = now + AGENT_REPORT_WAIT_MS;
}

static void agent_stop_tick(uv_timer_t *t) {
    agent_t *a = t->data;
    uint64_t now = uv_now(&a->loop);
    if (a->phase == STOP_DRAIN) {
        agent_drain_tick(a, now);
    }
    if (a->phase == STOP_WORKERS) {
        if (hv_workers_count(a->workers) > 0 && now < a->phase_deadline) {
            return;
        }
        if (hv_workers_count(a->workers) > 0) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-STOP-SLOW",
                   "%zu workers did not exit in time; leaving them to SIGKILL",
                   hv_workers_count(a->workers));
        }
        a->phase = STOP_REPORT;
        a->phase_deadline = now + AGENT_REPORT_WAIT_MS;
    }
    if (a->phase == STOP_REPORT) {
        size_t unacked = hv_session_unacked(a->session);
        if (unacked > 0 && hv_session_connected(a->session) && now < a->phase_deadline) {
            return;
        }
        if (unacked > 0) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-STOP-UNREPORTED",
                   "leaving with %zu events the head has not confirmed", unacked);
        }
        uv_timer_stop(&a->stop_timer);
        uv_stop(&a->loop);
    }
}

/* Kills the workers, then reports and leaves with exit_code. Stops a drain that is under way
 * the same way. A second request hurries. */
static void agent_shutdown(agent_t *a, const char *reason, int exit_code) {
    uint64_t now = uv_now(&a->loop);
    if (a->phase == STOP_WORKERS || a->phase == STOP_REPORT) {
        HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-STOP-NOW", "stopping now: SIGKILL to workers");
        hv_workers_kill_all(a->workers, 0, reason, 1);
        if (a->phase == STOP_WORKERS) {
            a->phase_deadline = now + 200;
        }
        return;
    }
    HV_LOG(exit_code == 0 ? HV_LOG_NOTICE : HV_LOG_INFO, "agent", "HV-AGENT-STOP",
           "stopping: %s (%zu workers)", reason, hv_workers_count(a->workers));
    a->exit_code = exit_code;
    a->phase = STOP_WORKERS;
    hv_notify_sendf(&a->notify, "STOPPING=1\nSTATUS=stopping: %s", reason);
    a->phase_deadline = now + AGENT_KILL_GRACE_MS + AGENT_EXIT_WAIT_MS;
    hv_workers_kill_all(a->workers, AGENT_KILL_GRACE_MS, reason, 1);
    hv_artifact_cache_stop(a->cache);
    uv_timer_start(&a->stop_timer, agent_stop_tick, 0, AGENT_STOP_TICK_MS);
}

/* The first SIGTERM: drain, and leave once the workers are gone (see the file comment). */
static void agent_drain_and_leave(agent_t *a) {
    uint64_t now = uv_now(&a->loop);
    uint32_t deadline_ms = a->cfg.drain_deadline_ms;
    HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-DRAIN-START",
           "preemption notice (SIGTERM): draining with %zu workers; leaving once none is left, "
           "stopping them after %u s",
           hv_workers_count(a->workers), deadline_ms / 1000u);
    a->exit_code = 0;
    a->phase = STOP_DRAIN;
    a->phase_deadline = now + deadline_ms;
    a->notice_wait = now + AGENT_REPORT_WAIT_MS;
    hv_notify_sendf(&a->notify, "STOPPING=1\nSTATUS=draining: %zu workers, %u s to leave",
                    hv_workers_count(a->workers), deadline_ms / 1000u);
    hv_session_drain_notice(a->session, "preemption notice (SIGTERM to the agent)", deadline_ms);
    uv_timer_start(&a->stop_timer, agent_stop_tick, AGENT_STOP_TICK_MS, AGENT_STOP_TICK_MS);
}

static void agent_signal_cb(uv_signal_t *h, int signum) {
    agent_t *a = h->data;
    if (signum == SIGUSR1) {
        if (a->phase != STOP_NONE) {
            HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-DRAIN",
                   "drain requested (SIGUSR1): the agent is already leaving");
            return;
        }
        HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-DRAIN",
               "drain requested (SIGUSR1): the node takes no new work; the agent stays");
        hv_session_drain_notice(a->session, "hvagent drain", 0);
        return;
    }
    if (signum == SIGTERM && a->phase == STOP_NONE && a->cfg.drain_deadline_ms > 0) {
        agent_drain_and_leave(a);
        return;
    }
    char reason[64];
    snprintf(reason, sizeof(reason), "the agent got %s%s", signum == SIGINT ? "SIGINT" : "SIGTERM",
             signum == SIGTERM && a->phase == STOP_DRAIN ? " again" : "");
    agent_shutdown(a, reason, 0);
}

/* ---- session callbacks ---------------------------------------------------------------------- */

/* Overwrites a secret string in place (the compiler may not drop the stores). */
static void secret_wipe(char *p) {
    volatile char *v = p;
    for (size_t i = 0; v != NULL && v[i] != '\0'; i++) {
        v[i] = '\0';
    }
}

/* Keeps the join token out of sight of the processes on this node: the value of HV_TOKEN is
 * overwritten where the kernel shows it (/proc/PID/environ reads the original block, which
 * unsetenv alone leaves intact) and removed from the environment, and a --token value is
 * overwritten in argv (/proc/PID/cmdline, ps), with a warning: it was visible until now. */
static void hide_join_token(int argc, char **argv) {
    char *v = getenv("HV_TOKEN");
    if (v != NULL) {
        char *entry = v - strlen("HV_TOKEN="); // the "HV_TOKEN=value" string environ points to
        size_t len = strlen(entry);
        unsetenv("HV_TOKEN");
        memset(entry, 0, len);
    }
    for (int i = 1; i < argc; i++) {
        char *val = NULL;
        if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
            val = argv[i + 1];
        } else if (strncmp(argv[i], "--token=", 8) == 0) {
            val = argv[i] + 8;
        }
        if (val != NULL) {
            fprintf(stderr, "hvagent: warning: --token puts the join token on the command line, "
                            "where other users of this machine can read it (ps); use "
                            "--token-file FILE (mode 0600) or HV_TOKEN instead\n");
            memset(val, 'x', strlen(val));
        }
    }
}

static void agent_on_joined(hv_session_t *s, int first, uint64_t node_id, const char *cluster,
                            void *ud) {
    agent_t *a = ud;
    (void)first;
    (void)cluster;
    a->node_id = node_id;
    if (a->keeper != NULL) {
        hv_keeper_set_identity(a->keeper, node_id, hv_session_credential(s));
    }
    secret_wipe(a->cfg.token); // the session has the node credential now; the join token goes
}

static void agent_on_connected(hv_session_t *s, int first, void *ud) {
    agent_t *a = ud;
    (void)s;
    if (a->workers != NULL) {
        /* A report sent on the stream that just ended may not have reached the head. */
        hv_workers_figures_again(a->workers);
    }
    if (first) {
        printf("hvagent: joined %s as node %s (id %llu), %u slots\n", a->cfg.head, a->cfg.name,
               (unsigned long long)a->node_id, a->cfg.slots);
        fflush(stdout);
        hv_notify_sendf(&a->notify, "READY=1\nSTATUS=joined %s as node %s (id %llu), %u slots",
                        a->cfg.head, a->cfg.name, (unsigned long long)a->node_id, a->cfg.slots);
    }
}

static void agent_on_order(hv_session_t *s, const Hvpb__V1__HeadMsg *m, void *ud) {
    agent_t *a = ud;
    switch (m->body_case) {
    case HVPB__V1__HEAD_MSG__BODY_SPAWN:
        hv_workers_spawn(a->workers, m->spawn);
        break;
    case HVPB__V1__HEAD_MSG__BODY_KILL:
        hv_workers_kill(a->workers, m->kill->worker_id, m->kill->grace_ms, m->kill->reason);
        break;
    case HVPB__V1__HEAD_MSG__BODY_COPY_RELEASE:
        if (a->keeper != NULL) {
            hv_keeper_release(a->keeper, m->copy_release);
        }
        break;
    case HVPB__V1__HEAD_MSG__BODY_DRAIN:
        if (!m->drain->undrain) {
            HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-DRAIN", "the head drains this node: %s",
                   m->drain->reason);
            hv_session_set_draining(s, 1);
        } else if (a->phase == STOP_DRAIN) {
            // The SIGTERM said this process ends; say so again rather than take work that
            // would be killed at the deadline.
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-UNDRAIN-REFUSED",
                   "the head undrains this node (%s), but the agent is leaving after SIGTERM: "
                   "repeating the drain notice",
                   m->drain->reason);
            uint64_t now = uv_now(&a->loop);
            hv_session_drain_notice(s, "preemption notice (SIGTERM to the agent)",
                                    a->phase_deadline > now ? (uint32_t)(a->phase_deadline - now)
                                                            : 1);
        } else {
            HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-UNDRAIN",
                   "the head takes this node back (undrain)%s%s", m->drain->reason[0] ? ": " : "",
                   m->drain->reason);
            hv_session_set_draining(s, 0);
        }
        break;
    case HVPB__V1__HEAD_MSG__BODY_SHUTDOWN: {
        char reason[300];
        snprintf(reason, sizeof(reason), "shutdown ordered by the head: %.250s",
                 m->shutdown->reason);
        agent_shutdown(a, reason, 0);
        break;
    }
    default:
        break;
    }
}

static void agent_on_fatal(hv_session_t *s, hv_err rc, const char *msg, void *ud) {
    agent_t *a = ud;
    (void)s;
    if (rc == HV_EPERM || rc == HV_EAUTH || rc == HV_EINVAL || rc == HV_ENOTSUP ||
        rc == HV_EEXIST) {
        fprintf(stderr, "hvagent: the head refused to join: %s\n", msg);
    } else {
        fprintf(stderr, "hvagent: %s\n", msg);
    }
    agent_shutdown(a, "could not join the head", 1);
}

static void agent_on_lease_expired(hv_session_t *s, void *ud) {
    agent_t *a = ud;
    (void)s;
    if (!a->cfg.orphan_kill || hv_workers_count(a->workers) == 0) {
        return;
    }
    HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ORPHANS",
           "the head is gone past the lease: killing %zu workers (orphan policy kill)",
           hv_workers_count(a->workers));
    hv_workers_kill_all(a->workers, AGENT_KILL_GRACE_MS,
                        "the head was unreachable for longer than the lease", 0);
}

static size_t agent_running(hv_session_running_t **out, void *ud) {
    agent_t *a = ud;
    hv_worker_pid_t *v = NULL;
    size_t n = hv_workers_running(a->workers, &v);
    *out = NULL;
    if (n == 0) {
        return 0;
    }
    hv_session_running_t *r = hv_calloc(n, sizeof(*r));
    if (r == NULL) {
        hv_free(v);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        r[i].worker_id = v[i].worker_id;
        r[i].pid = v[i].pid;
    }
    hv_free(v);
    *out = r;
    return n;
}

/* ---- worker callbacks ----------------------------------------------------------------------- */

static void agent_on_started(uint64_t worker_id, int pid, void *ud) {
    agent_t *a = ud;
    hv_session_worker_started(a->session, worker_id, pid);
}

static void agent_on_address(uint64_t worker_id, int pid, const char *address, void *ud) {
    agent_t *a = ud;
    hv_session_worker_address(a->session, worker_id, pid, address);
}

/* An exit whose larger saved state is being uploaded: reported once the upload ends. */
typedef struct agent_put_s {
    agent_t *a;
    uint64_t worker_id, size;
    int exit_code, term_signal;
    char *reason, *path; /* owned */
} agent_put_t;

static void agent_put_done(hv_err rc, const char *digest, const char *detail, void *ud) {
    agent_put_t *p = ud;
    agent_t *a = p->a;
    char why[300] = "";
    if (rc != HV_OK) {
        snprintf(why, sizeof(why), "its saved state of %llu bytes could not be uploaded: %.200s",
                 (unsigned long long)p->size, detail);
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-STATE", "actor process %llu: %s",
               (unsigned long long)p->worker_id, why);
    }
    hv_session_actor_exited_ref(a->session, p->worker_id, p->exit_code, p->term_signal, p->reason,
                                digest, p->size, why);
    if (unlink(p->path) != 0 && errno != ENOENT) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-ACTOR-STATE", "cannot remove %s: %s", p->path,
               strerror(errno));
    }
    a->puts--;
    hv_free(p->reason);
    hv_free(p->path);
    hv_free(p);
}

/* The exit of an actor's process with a larger saved state: upload it, then report (or report
 * at once why it is not sent). */
static void agent_exited_big(agent_t *a, uint64_t worker_id, int exit_code, int term_signal,
                             const char *reason) {
    char why[300] = "";
    if (a->big_path != NULL) {
        agent_put_t *p = hv_calloc(1, sizeof(*p));
        char *r = hv_strdup(reason != NULL ? reason : "");
        char err[400] = "out of memory";
        hv_err rc = HV_ENOMEM;
        if (p != NULL && r != NULL) {
            *p = (agent_put_t){.a = a,
                               .worker_id = worker_id,
                               .size = a->big_size,
                               .exit_code = exit_code,
                               .term_signal = term_signal,
                               .reason = r,
                               .path = a->big_path};
            rc = hv_artifact_put(a->cache, a->big_path, agent_put_done, p, err, sizeof(err));
        }
        if (rc == HV_OK) {
            a->big_path = NULL; /* the upload owns it now */
            a->puts++;
            return;
        }
        hv_free(p);
        hv_free(r);
        snprintf(why, sizeof(why), "its saved state of %llu bytes could not be uploaded: %.200s",
                 (unsigned long long)a->big_size, err);
        (void)unlink(a->big_path);
    }
    if (why[0] == '\0') {
        snprintf(why, sizeof(why), "%.290s",
                 a->big_why != NULL ? a->big_why : "the agent ran out of memory");
    }
    hv_session_actor_exited_ref(a->session, worker_id, exit_code, term_signal, reason, NULL,
                                a->big_size, why);
}

static void agent_on_exited(uint64_t worker_id, int exit_code, int term_signal, const char *reason,
                            void *ud) {
    agent_t *a = ud;
    if (a->phase == STOP_DRAIN) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-DRAIN-WORKER",
               "draining: worker %llu left (status %d, signal %d); %zu workers still running",
               (unsigned long long)worker_id, exit_code, term_signal, hv_workers_count(a->workers));
    }
    if (a->big_for == worker_id && a->big_for != 0) {
        agent_exited_big(a, worker_id, exit_code, term_signal, reason);
    } else if (a->state_for == worker_id && a->state_for != 0) {
        hv_session_actor_exited(a->session, worker_id, exit_code, term_signal, reason, a->state,
                                a->state_len);
    } else {
        hv_session_worker_exited(a->session, worker_id, exit_code, term_signal, reason);
    }
    hv_free(a->state);
    a->state = NULL;
    a->state_len = 0;
    a->state_for = 0;
    hv_free(a->big_path);
    hv_free(a->big_why);
    a->big_path = a->big_why = NULL;
    a->big_size = 0;
    a->big_for = 0;
}

/* An actor's process saved a larger state: kept (by path, or why it is not sent) for the exit
 * report that follows at once. */
static void agent_on_state_file(uint64_t worker_id, const char *path, uint64_t size,
                                const char *why, void *ud) {
    agent_t *a = ud;
    hv_free(a->big_path);
    hv_free(a->big_why);
    a->big_path = path != NULL ? hv_strdup(path) : NULL;
    a->big_why = why != NULL ? hv_strdup(why) : NULL;
    a->big_size = size;
    a->big_for = worker_id;
}

/* An actor's process's call figures: its running totals now, or (final) its last ones, queued
 * as a reliable event just before its exit. */
static hv_err agent_on_figures(uint64_t worker_id, const hv_callfig_t *f, int final, void *ud) {
    agent_t *a = ud;
    return hv_session_actor_figures(a->session, worker_id, f, final);
}

/* An actor's process saved its state: kept for the exit report that follows at once. */
static void agent_on_state(uint64_t worker_id, const void *data, size_t len, void *ud) {
    agent_t *a = ud;
    hv_free(a->state);
    a->state = hv_malloc(len > 0 ? len : 1);
    a->state_len = len;
    a->state_for = a->state != NULL ? worker_id : 0;
    if (a->state != NULL && len > 0) {
        memcpy(a->state, data, len);
    }
}

static void agent_on_line(uint64_t worker_id, int stream, const char *line, size_t len, void *ud) {
    agent_t *a = ud;
    hv_session_log(a->session, worker_id, stream, line, len);
}

/* ---- pid file ------------------------------------------------------------------------------- */

/* The agent holds a lock on its pid file while it lives (hv_pidfile_claim): that lock, not the
 * number in the file, says which process is the agent. */
static int pidfile_claim(const char *path) {
    int holder = 0;
    hv_err rc = hv_pidfile_claim(path, &holder);
    if (rc == HV_EEXIST) {
        fprintf(stderr, "hvagent: another agent (pid %d) holds %s\n", holder, path);
        return -1;
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvagent: cannot write the pid file %s: %s\n", path, hv_strerror(rc));
        return -1;
    }
    return 0;
}

/* ---- join ----------------------------------------------------------------------------------- */

static uint64_t agent_incarnation(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        v = hv_wall_ms() ^ ((uint64_t)getpid() << 32) ^ hv_now_ms();
    }
    return v != 0 ? v : 1;
}

/* Marks every descriptor this process inherited (beyond stdio) close-on-exec, so workers do not
 * inherit them: a pipe a shell or test harness left open would otherwise stay open as long as
 * any worker lives. */
static void agent_cloexec_inherited(void) {
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || fd <= 2 || fd == dirfd(d)) {
            continue;
        }
        int flags = fcntl((int)fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) {
            fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC);
        }
    }
    closedir(d);
}

static void walk_close(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

static void agent_watchdog_cb(uv_timer_t *t) {
    agent_t *a = t->data;
    hv_notify_watchdog(&a->notify, hv_now_ms());
}

/* The channel to the head: TLS when the command line gave a CA (with the client certificate for
 * mTLS when given), else plain text (config.c allowed it: loopback, or --insecure, warned). */
static hv_err agent_channel(const hv_agent_config_t *cfg, hv_rpc_channel_t **out) {
    char err[1024] = "";
    hv_err rc;
    if (cfg->ca_file[0] != '\0') {
        hv_rpc_tls_t tls = {.ca_file = cfg->ca_file,
                            .cert_file = cfg->cert_file[0] ? cfg->cert_file : NULL,
                            .key_file = cfg->key_file[0] ? cfg->key_file : NULL};
        rc = hv_rpc_channel_create_tls(cfg->head, &tls, out, err, sizeof(err));
    } else {
        if (!hv_rpc_target_is_loopback(cfg->head)) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-INSECURE",
                   "plain text to the head at %s (--insecure): the join token, node credentials "
                   "and job data cross the network readable by anyone on it",
                   cfg->head);
        }
        rc = hv_rpc_channel_create_tls(cfg->head, NULL, out, err, sizeof(err));
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvagent: %s\n", err[0] ? err : hv_strerror(rc));
    }
    return rc;
}

/* Where the user uid:gid, with no supplementary group (as libuv starts a worker), cannot search
 * on the way to dir: the kernel's own answer, from a child that becomes the user (ACLs and
 * network file systems included). 0 when it can; else the errno, and the first directory it
 * cannot get through in blocked. */
static int agent_reach_as(const char *dir, uid_t uid, gid_t gid, char *blocked, size_t len) {
    int fds[2];
    if (pipe(fds) != 0) {
        return 0; /* no way to ask: the worker's start will say */
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: async-signal-safe calls only (the agent has threads). */
        close(fds[0]);
        int e = 0;
        if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
            e = errno;
        } else {
            char p[PATH_MAX];
            size_t n = strlen(dir);
            for (size_t i = 1; i <= n && n < sizeof(p); i++) {
                if (dir[i] != '/' && dir[i] != '\0') {
                    continue;
                }
                memcpy(p, dir, i);
                p[i] = '\0';
                if (access(p, X_OK) != 0) {
                    e = errno;
                    (void)!write(fds[1], p, i);
                    break;
                }
            }
        }
        _exit(e > 0 && e < 256 ? e : 0);
    }
    close(fds[1]);
    int st = 0;
    ssize_t got = pid > 0 ? read(fds[0], blocked, len - 1) : -1;
    blocked[got > 0 ? (size_t)got : 0] = '\0';
    close(fds[0]);
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

/* --run-as: the user exists, the agent may become it, and it can reach the work dir (its jobs'
 * directories are below); fills wc's run-as fields. 0, or -1 after saying why on stderr. */
static int agent_run_as(const hv_agent_config_t *cfg, hv_workers_config_t *wc) {
    struct passwd *pw = getpwnam(cfg->run_as);
    if (pw == NULL) {
        fprintf(stderr, "hvagent: --run-as %s: no such user\n", cfg->run_as);
        return -1;
    }
    if (geteuid() != 0 && pw->pw_uid != geteuid()) {
        fprintf(stderr,
                "hvagent: --run-as %s: the agent must run as root to start workers "
                "as another user\n",
                cfg->run_as);
        return -1;
    }
    if (pw->pw_uid == 0) {
        fprintf(stderr, "hvagent: warning: --run-as %s runs workers as root\n", cfg->run_as);
    }
    char real[PATH_MAX], blocked[PATH_MAX];
    if (pw->pw_uid != geteuid() && realpath(cfg->work_dir, real) != NULL) {
        int e = agent_reach_as(real, pw->pw_uid, pw->pw_gid, blocked, sizeof(blocked));
        if (e != 0) {
            fprintf(stderr,
                    "hvagent: --run-as %s: user %s (uid %u) cannot reach the work dir %s: %s: "
                    "%s; its workers could not start there. Give --work-dir a directory that "
                    "user can reach (every directory above it searchable by it)\n",
                    cfg->run_as, cfg->run_as, (unsigned)pw->pw_uid, real,
                    blocked[0] ? blocked : real, strerror(e));
            return -1;
        }
    }
    wc->run_as = 1;
    wc->run_uid = (unsigned)pw->pw_uid;
    wc->run_gid = (unsigned)pw->pw_gid;
    wc->run_user = cfg->run_as;
    wc->run_home = pw->pw_dir != NULL ? pw->pw_dir : "/";
    return 0;
}

/* The user the agent's workers run as (--run-as, else the agent's own), as the node label
 * HV_AGENT_RUN_AS_LABEL declares it to the head; "#<uid>" for a uid without a name. */
static const char *agent_run_as_name(const hv_agent_config_t *cfg, char *buf, size_t len) {
    if (cfg->run_as[0] != '\0') {
        return cfg->run_as;
    }
    struct passwd *pw = getpwuid(geteuid());
    if (pw != NULL && pw->pw_name != NULL && pw->pw_name[0] != '\0' &&
        strpbrk(pw->pw_name, ",=") == NULL && strlen(pw->pw_name) < len) {
        snprintf(buf, len, "%s", pw->pw_name);
    } else {
        snprintf(buf, len, "#%u", (unsigned)geteuid());
    }
    return buf;
}

/* ---- join: agent_join's steps, in order ------------------------------------------------------ *
 * Each step returns 0 to go on or 1 (an exit status, the reason printed). agent_close undoes
 * whatever the steps opened, so none repeats the cleanup of the steps before it. */

/* The process: the work directory (and the pid and log files' own), --daemon or the pid file
 * and --log-file in the foreground, SIGPIPE, inherited descriptors, the service manager. */
static int agent_process(agent_t *a) {
    hv_agent_config_t *cfg = &a->cfg;
    hv_err rc = hv_mkdirs(cfg->work_dir, 0755);
    if (rc != HV_OK) {
        fprintf(stderr, "hvagent: cannot create the work dir %s: %s\n", cfg->work_dir,
                hv_strerror(rc));
        return 1;
    }
    // The pid and log files may live in directories of their own.
    const char *files[] = {cfg->pid_file, cfg->log_file};
    for (int i = 0; i < 2; i++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", files[i]);
        char *slash = strrchr(dir, '/');
        if (slash != NULL && slash != dir) {
            *slash = '\0';
            if ((rc = hv_mkdirs(dir, 0755)) != HV_OK) {
                fprintf(stderr, "hvagent: cannot create %s: %s\n", dir, hv_strerror(rc));
                return 1;
            }
        }
    }
    if (cfg->daemon) {
        rc = hv_daemonize(cfg->pid_file, cfg->log_file[0] ? cfg->log_file : NULL);
        if (rc == HV_EEXIST) {
            fprintf(stderr, "hvagent: another agent (pid %d) holds %s\n",
                    hv_lock_holder(cfg->pid_file), cfg->pid_file);
            return 1;
        }
        if (rc != HV_OK) {
            fprintf(stderr, "hvagent: cannot daemonize: %s\n", hv_strerror(rc));
            return 1;
        }
    } else {
        if (cfg->log_file[0] != '\0') {
            int fd = open(cfg->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0) {
                fprintf(stderr, "hvagent: cannot open the log file %s: %s\n", cfg->log_file,
                        strerror(errno));
                return 1;
            }
            dup2(fd, 2);
            close(fd);
        }
        if (pidfile_claim(cfg->pid_file) != 0) {
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    agent_cloexec_inherited();
    hv_notify_init_env(&a->notify); // after --daemon's fork; before any worker inherits it
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-START",
           "hvagent %s: node %s, %u slots (%u GPUs, %u CPUs, %" PRIu64
           " MiB), work dir %s, head %s",
           HV_AGENT_VERSION, cfg->name, cfg->slots, cfg->gpus, cfg->cpus, cfg->memory_mb,
           cfg->work_dir, cfg->head);
    return 0;
}

/* The Keeper service for other nodes' jobs' state copies (--copy-memory; 0: none), on the
 * address peers reach this node at; TLS with the agent's own certificate when it has one. A
 * listener that cannot start leaves the node keeping none (members send to the head). */
static int agent_keeper(agent_t *a) {
    hv_agent_config_t *cfg = &a->cfg;
    if (cfg->copy_mb == 0 || cfg->naddrs == 0) {
        return 0;
    }
    hv_rpc_tls_t tls = {.cert_file = cfg->cert_file, .key_file = cfg->key_file};
    int use_tls = cfg->cert_file[0] != '\0' && cfg->key_file[0] != '\0';
    char err[300] = "";
    hv_err rc = hv_keeper_create(a->eng, cfg->addrs[0], cfg->copy_mb << 20, use_tls ? &tls : NULL,
                                 &a->keeper, a->copy_addr, sizeof(a->copy_addr), err, sizeof(err));
    if (rc != HV_OK) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-KEEPER",
               "keeps no copies of other nodes' jobs' state: %s (%s)", err, hv_strerror(rc));
        a->copy_addr[0] = '\0';
        return 0;
    }
    HV_LOG(HV_LOG_NOTICE, "agent", "HV-AGENT-KEEPER",
           "keeps other nodes' jobs' state copies at %s%s, up to %" PRIu64 " MiB", a->copy_addr,
           use_tls ? " (TLS)" : "", cfg->copy_mb);
    return 0;
}

/* The loop and what runs on it before the session: the watchdog pings, the rpc engine, the
 * channel to the head, the artifact cache and the workers. */
static int agent_open(agent_t *a) {
    hv_agent_config_t *cfg = &a->cfg;
    char path[PATH_MAX + 16];
    hv_err rc;
    uv_loop_init(&a->loop);
    uv_timer_init(&a->loop, &a->stop_timer);
    a->stop_timer.data = a;
    uv_timer_init(&a->loop, &a->notify_timer);
    a->notify_timer.data = a;
    if (a->notify.watchdog_ms > 0 && hv_notify_active(&a->notify)) {
        /* Twice per interval: a timer a little early must not skip a ping. */
        uint64_t every = a->notify.watchdog_ms / 2 > 0 ? a->notify.watchdog_ms / 2 : 1;
        uv_timer_start(&a->notify_timer, agent_watchdog_cb, 0, every);
        uv_unref((uv_handle_t *)&a->notify_timer); // the pings never keep the agent alive
    }
    if ((rc = hv_rpc_engine_create(&a->loop, &a->eng)) != HV_OK) {
        fprintf(stderr, "hvagent: cannot start the rpc layer: %s\n", hv_strerror(rc));
        return 1;
    }
    if (agent_channel(cfg, &a->ch) != HV_OK) {
        return 1;
    }
    snprintf(path, sizeof(path), "%s/cache", cfg->work_dir);
    /* Fetch is authorized by the node credential the channel carries after Join. */
    if ((rc = hv_artifact_cache_create(&a->loop, a->eng, a->ch, path, "", &a->cache)) != HV_OK) {
        fprintf(stderr, "hvagent: cannot open the artifact cache %s: %s\n", path, hv_strerror(rc));
        return 1;
    }
    hv_artifact_cache_set_max(a->cache, cfg->cache_max_mb << 20); // config bounds it below 2^50
    hv_artifact_usage_t cu;
    hv_artifact_cache_usage(a->cache, &cu);
    HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-CACHE",
           "artifact cache %s: %zu files, %" PRIu64 " bytes, bound %" PRIu64 " MiB%s", path,
           cu.files, cu.bytes, cfg->cache_max_mb, cfg->cache_max_mb == 0 ? " (unbounded)" : "");
    hv_workers_config_t wc = {.work_dir = cfg->work_dir,
                              .node_name = cfg->name,
                              .ca_file = cfg->ca_file,
                              .actor_host = cfg->naddrs > 0 ? cfg->addrs[0] : NULL};
    if (cfg->run_as[0] != '\0' && agent_run_as(cfg, &wc) != 0) {
        return 1;
    }
    hv_workers_cbs_t wcb = {.on_started = agent_on_started,
                            .on_exited = agent_on_exited,
                            .on_state = agent_on_state,
                            .on_state_file = agent_on_state_file,
                            .on_figures = agent_on_figures,
                            .on_line = agent_on_line,
                            .on_address = agent_on_address,
                            .ud = a};
    if ((rc = hv_workers_create(&a->loop, &wc, a->cache, &wcb, &a->workers)) != HV_OK) {
        fprintf(stderr, "hvagent: cannot set up workers: %s\n", hv_strerror(rc));
        return 1;
    }
    return agent_keeper(a);
}

/* The session with the head (what the node says about itself: its labels, with the Python
 * interpreters it has, and its size) and the signals that stop or drain the agent. */
static int agent_session(agent_t *a) {
    hv_agent_config_t *cfg = &a->cfg;
    Hvpb__V1__KeyValue kv[HV_AGENT_MAX_LABELS + 2];
    Hvpb__V1__KeyValue *kvp[HV_AGENT_MAX_LABELS + 2];
    char run_as_name[64];
    Hvpb__V1__KeyValue run_as_kv = HVPB__V1__KEY_VALUE__INIT;
    run_as_kv.key = (char *)HV_AGENT_RUN_AS_LABEL;
    run_as_kv.value = (char *)agent_run_as_name(cfg, run_as_name, sizeof(run_as_name));
    kvp[0] = &run_as_kv; /* always there: the head holds job-made actors to it */
    size_t nkv = 1;
    int have_python = 0;
    for (size_t i = 0; i < cfg->nlabels; i++) {
        Hvpb__V1__KeyValue init = HVPB__V1__KEY_VALUE__INIT;
        kv[nkv] = init;
        kv[nkv].key = cfg->label_keys[i];
        kv[nkv].value = cfg->label_values[i];
        kvp[nkv] = &kv[nkv];
        nkv++;
        have_python |= strcmp(cfg->label_keys[i], HV_INTERP_LABEL) == 0;
    }
    /* The node's Python interpreters, for hvsubmit's check (agent/interp.h), unless the operator
     * labelled them or used every label the head takes. */
    char python_names[256];
    if (!have_python && nkv <= HV_AGENT_MAX_LABELS) {
        hv_interp_python_names(getenv("PATH"), python_names, sizeof(python_names));
        Hvpb__V1__KeyValue init = HVPB__V1__KEY_VALUE__INIT;
        kv[nkv] = init;
        kv[nkv].key = (char *)HV_INTERP_LABEL;
        kv[nkv].value = python_names;
        kvp[nkv] = &kv[nkv];
        nkv++;
    }
    Hvpb__V1__NodeInfo ni = HVPB__V1__NODE_INFO__INIT;
    ni.name = cfg->name;
    ni.addrs = cfg->addrs;
    ni.n_addrs = cfg->naddrs;
    ni.slots = cfg->slots;
    ni.gpus = cfg->gpus;
    ni.cpus = cfg->cpus;
    ni.memory_mb = cfg->memory_mb;
    ni.labels = kvp;
    ni.n_labels = nkv;
    ni.preemptible = cfg->preemptible ? 1 : 0;
    ni.instance_id = cfg->instance_id;
    ni.version = "hvagent " HV_AGENT_VERSION;
    ni.copy_addr = a->copy_addr;
    ni.copy_memory = a->keeper != NULL ? a->cfg.copy_mb << 20 : 0;
    hv_session_config_t sc = {.head = cfg->head,
                              .token = cfg->token,
                              .incarnation = agent_incarnation(),
                              .node = &ni, // deep-copied
                              .connect_timeout_ms = cfg->connect_timeout_ms};
    hv_session_cbs_t scb = {.on_joined = agent_on_joined,
                            .on_connected = agent_on_connected,
                            .on_order = agent_on_order,
                            .on_fatal = agent_on_fatal,
                            .on_lease_expired = agent_on_lease_expired,
                            .running = agent_running,
                            .ud = a};
    hv_err rc = hv_session_create(&a->loop, a->eng, a->ch, &sc, &scb, &a->session);
    if (rc != HV_OK) {
        fprintf(stderr, "hvagent: cannot start the session: %s\n", hv_strerror(rc));
        return 1;
    }
    uv_signal_t *sigs[] = {&a->sig_int, &a->sig_term, &a->sig_usr1};
    int signums[] = {SIGINT, SIGTERM, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&a->loop, sigs[i]);
        sigs[i]->data = a;
        uv_signal_start(sigs[i], agent_signal_cb, signums[i]);
    }
    return 0;
}

/* Undoes agent_open and agent_session, whatever part of them ran. */
static void agent_close(agent_t *a) {
    // Order matters: nothing may start new calls, then the engine ends every call (running
    // their callbacks), then the modules free what the callbacks no longer reach.
    hv_session_stop(a->session);
    if (a->cache != NULL) {
        hv_artifact_cache_stop(a->cache);
    }
    hv_keeper_shutdown(a->keeper);
    hv_rpc_engine_destroy(a->eng);
    hv_keeper_destroy(a->keeper);
    hv_workers_destroy(a->workers);
    hv_artifact_cache_destroy(a->cache);
    hv_session_destroy(a->session);
    hv_rpc_channel_destroy(a->ch);
    uv_walk(&a->loop, walk_close, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&a->loop) != 0) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-LOOP", "the loop still had open handles");
    }
    hv_pidfile_remove(a->cfg.pid_file);
}

static int agent_join(agent_t *a) {
    if (agent_process(a) != 0) {
        return 1;
    }
    int code = 1;
    if (agent_open(a) == 0 && agent_session(a) == 0) {
        uv_run(&a->loop, UV_RUN_DEFAULT);
        code = a->exit_code;
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-EXIT", "hvagent exits with status %d", code);
    }
    agent_close(a);
    return code;
}

/* ---- stop / drain --------------------------------------------------------------------------- */

/* No agent holds the pid file's lock: say so, and remove a stale file (whatever process its
 * number names now is not signalled). */
static int agent_not_running(const hv_agent_config_t *cfg, hv_err rc) {
    if (rc == HV_EPERM) {
        fprintf(stderr,
                "hvagent: %s is locked by a process this one cannot see (another pid "
                "namespace); stop that agent where it runs\n",
                cfg->pid_file);
        return 1;
    }
    int stale = hv_pidfile_remove_stale(cfg->pid_file);
    if (stale != 0) {
        fprintf(stderr,
                "hvagent: no agent is running (no agent holds %s); the pid file was stale (it "
                "named pid %d, which is not an agent): removed it, signalled nobody\n",
                cfg->pid_file, stale);
    } else {
        fprintf(stderr, "hvagent: no agent is running (pid file %s)\n", cfg->pid_file);
    }
    return 1;
}

/* `hvagent stop` means "stop now": SIGINT (SIGTERM would start a drain) to the process that
 * holds the pid file's lock, then SIGKILL if it still holds it after --timeout. */
static int agent_stop_cmd(const hv_agent_config_t *cfg) {
    int pid = 0;
    uint64_t t0 = hv_now_ms();
    hv_err rc = hv_stop_locked(cfg->pid_file, SIGINT, cfg->stop_timeout_ms, 1, &pid);
    if (rc == HV_ENOTFOUND || rc == HV_EPERM) {
        return agent_not_running(cfg, rc);
    }
    if (rc != HV_OK) {
        fprintf(stderr, "hvagent: the agent (pid %d) did not stop within %u s, even killed: %s\n",
                pid, cfg->stop_timeout_ms / 1000u + 5u, hv_strerror(rc));
        return 1;
    }
    if (hv_now_ms() - t0 >= cfg->stop_timeout_ms) {
        fprintf(stderr, "hvagent: the agent (pid %d) did not stop within %u s: killed it\n", pid,
                cfg->stop_timeout_ms / 1000u);
        return 0;
    }
    printf("hvagent: stopped the agent (pid %d)\n", pid);
    return 0;
}

static int agent_drain_cmd(const hv_agent_config_t *cfg) {
    int pid = hv_lock_holder(cfg->pid_file);
    if (pid <= 0 || kill(pid, SIGUSR1) != 0) {
        return agent_not_running(cfg, pid < 0 ? HV_EPERM : HV_ENOTFOUND);
    }
    printf("hvagent: asked the agent (pid %d) to drain\n", pid);
    return 0;
}

int main(int argc, char **argv) {
    static agent_t agent;
    char err[512];
    /* The agent's keeper receives peers' state copies in 1 MiB messages (issue 28 §3): kept in
     * the heap, they are not faulted in again at every chunk. */
    hv_malloc_keep_heap();
    hv_log_init("hvagent");
    hv_err rc = hv_agent_config_parse(argc, argv, &agent.cfg, err, sizeof(err));
    hide_join_token(argc, argv);
    int code;
    if (rc == HV_EINVAL) {
        /* A usage error, the same shape in all hv tools. */
        fprintf(stderr, "hvagent: %s (see hvagent --help)\n", err);
        code = 64;
    } else if (rc != HV_OK) {
        fprintf(stderr, "hvagent: %s\n", hv_strerror(rc));
        code = 1;
    } else {
        if (agent.cfg.log_level_set) {
            hv_log_set_level(agent.cfg.log_level);
        }
        switch (agent.cfg.cmd) {
        case HV_AGENT_CMD_HELP:
            hv_agent_usage(stdout);
            code = 0;
            break;
        case HV_AGENT_CMD_VERSION:
            printf("hvagent %s\n", HV_AGENT_VERSION);
            code = 0;
            break;
        case HV_AGENT_CMD_STOP:
            code = agent_stop_cmd(&agent.cfg);
            break;
        case HV_AGENT_CMD_DRAIN:
            code = agent_drain_cmd(&agent.cfg);
            break;
        default:
            code = agent_join(&agent);
            break;
        }
    }
    hv_agent_config_fini(&agent.cfg);
    return code;
}
