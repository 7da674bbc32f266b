/*
 * agent_tie: a process that hvagent started dies with that agent (HV_AGENT_PID,
 * PR_SET_PDEATHSIG). Not the public API. See agent_tie.c.
 */
#ifndef HV_WORKER_LIB_AGENT_TIE_H
#define HV_WORKER_LIB_AGENT_TIE_H

#include <sys/types.h>

/* 1 and *out when s is a pid (a decimal above 1), else 0. */
int hv__agent_pid_parse(const char *s, pid_t *out);

/* Ties this process to the agent named by HV_AGENT_PID (see agent_tie.c). Idempotent. */
void hv__agent_tie(void);

#endif
