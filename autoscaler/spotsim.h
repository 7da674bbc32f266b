/*
 * spotsim: a simulated preemptible cloud, as pure code, for tests and cost studies. It decides
 * when a launched instance has booted, when it gets a preemption notice, when it is taken away,
 * and whether a launch fails for lack of capacity; the spot-sim provider carries that out with
 * real hvagent processes (booted: start the agent; notice: SIGTERM, which the agent turns into a
 * drain; preempted: SIGKILL). No I/O, no clock: the caller passes the time; the random numbers
 * come from a seeded generator inside, so a run is reproducible from its seed.
 *
 * Preemptions come either at random, one every interval_s on average across the running
 * preemptible instances (exponentially distributed gaps; a uniformly chosen victim; a fraction
 * of them without notice), or from a trace: a text file of lines `TIME_S TYPE EVENT [ARG]`,
 * where EVENT is `preempt` (a notice now, the kill notice_s later), `kill` (no notice) or
 * `capacity N` (at most N instances of TYPE at once from then on) or `reclaim N` (the same, and
 * the cloud takes back at once, without notice, the newest instances beyond N, booting ones
 * included: a real trace's drop, whose notices went out before); `#` starts a comment.
 * A trace preempts the oldest running instance of the type that has no notice yet.
 */
#ifndef HV_AUTOSCALER_SPOTSIM_H
#define HV_AUTOSCALER_SPOTSIM_H

#include <stddef.h>
#include <stdint.h>

#define HV_SS_MAX_TYPES 64
#define HV_SS_MAX_INSTANCES 1024

typedef struct hv_ss_type_s {
    const char *name;  /* borrowed */
    int preemptible;   /* only preemptible instances are preempted at random */
    uint32_t capacity; /* instances of the type at once; 0 = no limit */
} hv_ss_type_t;

typedef enum hv_ss_event_kind_e {
    HV_SS_TRACE_PREEMPT = 0,
    HV_SS_TRACE_KILL,
    HV_SS_TRACE_CAPACITY,
    HV_SS_TRACE_RECLAIM,
} hv_ss_event_kind;

typedef struct hv_ss_trace_event_s {
    uint64_t at_ms;
    size_t type;
    hv_ss_event_kind kind;
    uint32_t arg; /* capacity, reclaim */
} hv_ss_trace_event_t;

typedef struct hv_ss_config_s {
    const hv_ss_type_t *types; /* borrowed; indexes match the autoscaler's types */
    size_t ntypes;
    uint64_t seed;
    uint32_t boot_min_ms, boot_max_ms; /* boot delay, uniform in [min, max] */
    uint32_t interval_s;               /* mean time between random preemptions; 0 = none */
    uint32_t notice_s;                 /* lead time of a notice */
    double no_notice_fraction;         /* of random preemptions, in [0, 1] */
    const hv_ss_trace_event_t *trace;  /* sorted by time (borrowed); with a trace, no random
                                        * preemptions */
    size_t ntrace;
} hv_ss_config_t;

typedef enum hv_ss_action_kind_e {
    HV_SS_BOOTED = 0, /* start the instance's agent */
    HV_SS_NOTICE,     /* deliver the preemption notice (drain) */
    HV_SS_PREEMPTED,  /* the instance is gone: kill its agent */
    HV_SS_NOTE,       /* nothing to carry out; reason says what happened (a trace no-op) */
} hv_ss_action_kind;

typedef struct hv_ss_action_s {
    hv_ss_action_kind kind;
    uint64_t instance;
    int with_notice; /* PREEMPTED: a notice came before */
    char reason[160];
} hv_ss_action_t;

typedef struct hv_ss_s hv_ss_t;

/* Starts a simulation at time start_ms (the trace's times count from it). The config is
 * borrowed for the simulation's life. Returns NULL on a bad config or no memory. */
hv_ss_t *hv_ss_create(const hv_ss_config_t *c, uint64_t start_ms);
void hv_ss_destroy(hv_ss_t *s);

/* A launch of type at now_ms under the caller's instance id. Returns 1 when it is accepted (it
 * boots later), 0 when the type is out of capacity (why says so) or the id is in use. */
int hv_ss_launch(hv_ss_t *s, uint64_t instance, size_t type, uint64_t now_ms, char *why,
                 size_t whylen);

/* After a head restart: an instance that was running before joins the simulation as running
 * (no boot, no capacity check). Adopting moves the random stream on by the instance's id, so a
 * restarted head does not replay its predecessor's preemptions (a trace is replayed from the
 * new start). Returns 0 when the id is in use or the table is full. */
int hv_ss_adopt(hv_ss_t *s, uint64_t instance, size_t type);

/* The autoscaler gave the instance back (or its agent ended): it no longer exists. */
void hv_ss_terminate(hv_ss_t *s, uint64_t instance);

/* Advances to now_ms; writes at most cap actions in time order and returns how many (what does
 * not fit is returned by the next call). */
size_t hv_ss_step(hv_ss_t *s, uint64_t now_ms, hv_ss_action_t *out, size_t cap);

/* When the next action is due (UINT64_MAX when nothing is pending): the caller's timer. */
uint64_t hv_ss_next_ms(const hv_ss_t *s);

/* Instances of type that exist now (booting or running). */
uint32_t hv_ss_count(const hv_ss_t *s, size_t type);

/* Parses a trace (text, NUL-terminated) naming types of c. On success fills an array (free with
 * hv_free) sorted by time, the file's order kept among equal times, and returns 1; on error writes "PATH:LINE: ..." to err and
 * returns 0. */
int hv_ss_trace_parse(const char *text, const char *path, const hv_ss_type_t *types, size_t ntypes,
                      hv_ss_trace_event_t **out, size_t *nout, char *err, size_t errlen);

#endif
