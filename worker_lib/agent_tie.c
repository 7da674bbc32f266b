/*
 * agent_tie: a process that hvagent started (a job's worker, an actor) dies with that agent.
 *
 * The agent puts its pid in HV_AGENT_PID. When libhv is loaded into the process the agent
 * started (its direct child), the process asks the kernel for SIGKILL when that parent goes
 * (PR_SET_PDEATHSIG), and kills itself at once when the agent is already gone. Without this a
 * worker whose agent was SIGKILLed, or lost with its machine's hvagent, trains on alone: the head
 * has counted it lost and re-placed its work, nobody reads its output, and it holds its cores
 * and its peers until its program ends. A process further down (a script's child, a worker's
 * own subprocess) has another parent and is left alone while the agent lives. A program that
 * does not link libhv is not covered (docs/RELIABILITY.md, "Agent restart").
 *
 * Runs from a constructor (every process that loads libhv.so) and from hv_init (programs
 * linked with libhv.a); idempotent.
 */
#include "agent_tie.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

int hv__agent_pid_parse(const char *s, pid_t *out) {
    if (s == NULL || *s == '\0') {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 1 || v > (long)0x7fffffff) {
        return 0;
    }
    *out = (pid_t)v;
    return 1;
}

void hv__agent_tie(void) {
    static int done;
    pid_t agent;
    if (done || !hv__agent_pid_parse(getenv("HV_AGENT_PID"), &agent)) {
        return;
    }
    done = 1;
    if (getppid() == agent) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == agent) {
            return; // the kernel now kills us with the agent
        }
    } else if (kill(agent, 0) == 0 || errno == EPERM) {
        return; // a grandchild of a live agent: not ours to tie
    }
    // The agent that started us is gone (we were re-parented before we could tie).
    (void)kill(getpid(), SIGKILL);
}

__attribute__((constructor)) static void agent_tie_at_load(void) { hv__agent_tie(); }
