/*
 * fleetsim: many jobs on one cluster, simulated, under three policies side by side (issue 26):
 *   fcfs    today's queue: first come, first served, a waiting job blocks the ones behind it,
 *           running elastic jobs grow to --max-np on whatever is free (head/core/cluster.c's
 *           hv_cl_start and hv_cl_grow, called as head/driver/driver.c's schedule_jobs does);
 *   static  the cluster split among the namespaces by weight (all 1), fcfs inside each part;
 *   fleet   head/core/fleet.c's policy, each job's throughput model fitted by head/core/tput.c
 *           from what the job measured so far (with --noise), namespaces of equal weight with
 *           no quota (--fleet-quota partition: each namespace's part of the static partition as
 *           its guaranteed quota, borrowing unlimited);
 *   fleet-reserve  the same with fleet.h's rule 8, a reserve of --reserve-pct (25) percent for
 *           priority 1 (the head's default is no reserve);
 *   oracle  not hv's, a reference: shortest remaining time first knowing every job's remaining
 *           steps (no scheduler does), floors where they fit, then growth to each job's fastest
 *           size in that order; it never stops a job nor shrinks a fixed one, as hv's policy.
 *           What knowing the lengths would buy on the same workload without preemption.
 *   oracle-stop  the same, also stopping any running elastic job (preemptible or not) at its
 *           next commit when a shorter waiting job's floor needs its slots, longest first, and
 *           resuming it later (a preemption's costs): knowing lengths and stopping at will.
 * The workload is seeded and printed (--print-workload) as lines of hvsubmit arguments with
 * their arrival times, for a run through the binaries. tests/perf/bench_fleet.sh is this
 * program's table with the goals checked.
 *
 * The simulated cluster: --nodes nodes of --slots slots. A job of elastic_train with a global
 * batch of 64 and --compute-ms-per-sample c takes T(n) = c*64/n + o0 + o1*(n-1) ms a step at n
 * workers (--overhead-ms o0:o1: the step's fixed part and what each worker more adds to the
 * ring). A job starts in 0.5 s (spawn and first round; a resume 0.3 s more); a growth spawns
 * its workers (0.3 s) while the job runs on, then at the next commit the job pauses for a reset
 * (uniform in --reset-ms, docs/PERFORMANCE.md's 40-60 ms) and runs at the new size; a shrink
 * waits for the next commit, pauses for a reset, and frees the leaving workers' slots after it
 * (make before break). A preemption (fleet only) stops the job at its next commit with its state
 * copied (0.1 s), and its resume starts from that commit. Every resize and stop is at a commit,
 * so no step is lost here by construction; the end-to-end tests show it for the real driver.
 *
 * Per policy and seed: average and p95 job completion time (arrival to end), makespan (first
 * arrival to last end), utilization while any job wants more (slots computing / all slots, over
 * the time some job waits or an elastic job is below its --max-np), the highest-priority jobs'
 * queue wait (arrival to first start: median and worst), resets per job and preemptions. Over
 * the seeds: median and worst of each, the average JCT against fcfs per seed, and the
 * workload's own bound (every job alone on the cluster at its best size). With --rows, per seed,
 * the diagnosis: how long jobs waited "bound by floors" (the smallest waiting floor did not fit
 * beside the running jobs' floors that nothing may take back without a stop: no order of the
 * queue and no shrink could admit anyone then), what share of all waiting (job-seconds) that
 * was, and how many top-priority jobs started late, of them how many found less room than their
 * floor at their arrival (the floors in their way were admitted before they came).
 *
 *   fleetsim [--seeds N (5) | --seed S] [--first-seed S] [--jobs 48] [--nodes 4] [--slots 2]
 *            [--namespaces 2] [--load 1.0] [--elastic 0.6] [--preemptible 0.33]
 *            [--steps 20:5000]
 *            [--compute-ms 0.5:4]
 *            [--overhead-ms 8:3] [--reset-ms 40:60] [--noise 0.05]
 *            [--policies "fcfs static fleet fleet-reserve oracle oracle-stop"]
 *            [--interval-ms 3000]
 *            [--starve-ms 60000] [--keep-pct 10] [--min-gain-pm 20] [--reserve-pct 25]
 *            [--fleet-quota none|partition]
 *            [--print-workload] [--rows] [--per-job] [--trace]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "fleet.h"
#include "tput.h"
#include "jobsize.h"

#define MAXJ 256
#define MAXN 64
#define MAXNS 8
#define BATCH 64
#define MAXSAMP 32

/* ---- settings -------------------------------------------------------------------------------- */

typedef struct opts_s {
    uint64_t seed;
    int seeds;
    int jobs, nodes, slots, nns;
    double load;
    const char *policies;
    uint32_t interval_ms, starve_ms, keep_pct, min_gain_pm, reserve_pct;
    int quota; /* fleet: quotas = the static partition (1) or none (0) */
    double start_s, resume_s, spawn_s, stop_s, reset_lo, reset_hi, o0_ms, o1_ms, noise;
    double tick_s, steps_lo, steps_hi, elastic, c_lo, c_hi, preempt_share;
    int print_workload, rows, trace, per_job;
} opts_t;

/* ---- the workload ---------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) { return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }
static double rng_exp(uint64_t *s, double mean) { return -mean * log(1.0 - rng_unit(s)); }

typedef struct spec_s {
    int id, ns, prio, elastic, preempt;
    uint32_t np, min, max;
    double at, c_ms;
    uint32_t epochs, limit;
} spec_t;

static double step_ms(const opts_t *o, double c_ms, uint32_t n) {
    return c_ms * BATCH / n + o->o0_ms + o->o1_ms * (n - 1);
}
static uint32_t steps_of(const spec_t *s) { return s->epochs * ((s->limit + BATCH - 1) / BATCH); }

/* The seeded mix: Poisson arrivals at a rate that offers --load x the cluster's slot-seconds
 * (each job's work counted at its starting size); 60% elastic (--min-np np/2, --max-np 2-4 x
 * np), 40% fixed; -np 1, 2 or 4 (at most a namespace's part, so that the static partition can
 * run it); 15% of priority 1 (high), the rest 0; a share (--preemptible, a third) of the elastic
 * low-priority ones --preemptible; lengths heavy-tailed as in the Philly and PAI traces (most
 * jobs short, a few long): steps log-uniform in [--steps lo:hi] (20-5000: median 316, mean 900,
 * coefficient of variation 1.3), as epochs of up to 900 steps of 64 samples; --compute-ms lo:hi
 * (0.5-4) ms a sample, so the part of a step that divides among workers is 80-97% at one worker
 * (Amdahl) and each job's marginal gains differ. */
static int workload(const opts_t *o, uint64_t seed, spec_t *js) {
    uint64_t r = seed * 7919 + 17;
    uint32_t part = (uint32_t)(o->nodes * o->slots / o->nns);
    double work = 0;
    for (int i = 0; i < o->jobs; i++) {
        spec_t *s = &js[i];
        static const uint32_t nps[] = {1, 2, 2, 4};
        *s = (spec_t){.id = i + 1, .ns = (int)(rng_next(&r) % (uint64_t)o->nns)};
        s->prio = rng_unit(&r) < 0.15;
        s->elastic = rng_unit(&r) < o->elastic;
        s->np = nps[rng_next(&r) % 4];
        s->np = s->np < part ? s->np : part;
        /* hvsubmit refuses --preemptible for a fixed-size job (no state copy to resume from). */
        s->preempt = !s->prio && rng_unit(&r) < o->preempt_share && s->elastic;
        s->min = s->elastic ? (s->np + 1) / 2 : s->np;
        s->max = s->elastic ? s->np * (2 + (uint32_t)(rng_next(&r) % 3)) : s->np;
        uint32_t all = (uint32_t)(o->nodes * o->slots);
        s->max = s->max < all ? s->max : all;
        double steps = o->steps_lo * exp(log(o->steps_hi / o->steps_lo) * rng_unit(&r));
        s->epochs = 1 + (uint32_t)(steps / 900);
        s->limit = BATCH * (uint32_t)ceil(steps / s->epochs);
        s->c_ms = o->c_lo + (o->c_hi - o->c_lo) * rng_unit(&r);
        s->c_ms = floor(s->c_ms * 100 + 0.5) / 100;
        work += steps_of(s) * step_ms(o, s->c_ms, s->np) / 1000.0 * s->np;
    }
    double gap = work / (o->nodes * o->slots * o->load) / o->jobs, t = 0;
    for (int i = 0; i < o->jobs; i++) {
        js[i].at = i == 0 ? 0 : (t += rng_exp(&r, gap));
        js[i].at = floor(js[i].at * 1000 + 0.5) / 1000;
    }
    return o->jobs;
}

static void print_workload(const opts_t *o, uint64_t seed, const spec_t *js, int n) {
    printf("# fleetsim workload: seed %llu, %d jobs, %d nodes x %d slots, %d namespaces, load %.2f,"
           " batch %d\n",
           (unsigned long long)seed, n, o->nodes, o->slots, o->nns, o->load, BATCH);
    printf("# at_s\tjob\thvsubmit arguments -- elastic_train arguments\n");
    for (int i = 0; i < n; i++) {
        const spec_t *s = &js[i];
        printf("%.3f\t%d\t--namespace team-%c --priority %d%s -np %u", s->at, s->id, 'a' + s->ns,
               s->prio, s->preempt ? " --preemptible" : "", s->np);
        if (s->elastic) {
            printf(" --min-np %u --max-np %u", s->min, s->max);
        }
        printf(" -- elastic_train --epochs %u --train-limit %u --batch %d"
               " --compute-ms-per-sample %.2f\n",
               s->epochs, s->limit, BATCH, s->c_ms);
    }
}

/* ---- the simulated cluster ------------------------------------------------------------------- */

enum { S_FUTURE, S_WAIT, S_START, S_RUN, S_DONE };
enum { P_NONE, P_SPAWN, P_COMMIT, P_RESET, P_STOP };
enum { POL_FCFS, POL_STATIC, POL_FLEET, POL_RESERVE, POL_SRPT, POL_SRPT_STOP, POL__N };
static const char *const pol_names[] = {"fcfs",          "static", "fleet",
                                        "fleet-reserve", "oracle", "oracle-stop"};

typedef struct job_s {
    const spec_t *s;
    int state, phase;
    uint32_t size;   /* members computing */
    uint32_t held;   /* slots held: members, newcomers spawning, leavers not gone yet */
    uint32_t target; /* the size the pending change makes */
    uint32_t on[MAXN], leave[MAXN];
    double steps, progress, ev;
    double first_start, done, last_resize, since;
    int room; /* at its arrival: the slots not held by floors nothing may take back (hard_room) */
    int stopping; /* the pending commit ends in a stop (a preemption) */
    int resets, preempts;
    double noise; /* this segment's measurement error */
    hv_tput_sample_t samp[MAXSAMP];
    size_t nsamp;
    hv_tput_model_t model;
} job_t;

typedef struct sim_s {
    const opts_t *o;
    int pol;
    job_t j[MAXJ];
    int nj;
    uint32_t used[MAXN];
    double t, next_tick;
    uint64_t rng;
    double want_s, busy_slot_s, held_slot_s;
    double bound_s, wait_js, bound_js; /* the diagnosis: see hard_room() */
} sim_t;

static void trace(const sim_t *m, const job_t *j, const char *what) {
    if (m->o->trace) {
        fprintf(stderr, "%9.3f %-6s job %2d %-10s size %u held %u target %u prog %.1f/%.0f\n", m->t,
                pol_names[m->pol], j->s->id, what, j->size, j->held, j->target, j->progress,
                j->steps);
    }
}

static double tstep(const sim_t *m, const job_t *j) {
    return step_ms(m->o, j->s->c_ms, j->size) / 1000.0;
}
static int progressing(const job_t *j) {
    return j->state == S_RUN && (j->phase == P_NONE || j->phase == P_SPAWN || j->phase == P_COMMIT);
}
static uint32_t node_free(const sim_t *m, int n) { return (uint32_t)m->o->slots - m->used[n]; }
static double new_noise(sim_t *m) { return m->o->noise * (2 * rng_unit(&m->rng) - 1); }

/* The job measured work at its size (with its segment's error), as libhv's reports would say. */
static void measure(job_t *j, double secs, double steps) {
    size_t k = 0;
    while (k < j->nsamp && j->samp[k].size != j->size) {
        k++;
    }
    if (k == j->nsamp) {
        if (j->nsamp == MAXSAMP) {
            return;
        }
        j->samp[j->nsamp++] = (hv_tput_sample_t){.size = j->size};
    }
    j->samp[k].work += steps * (1 + j->noise);
    j->samp[k].seconds += secs;
}

/* The diagnosis: the slots left once every running job is at the floor no policy keeping
 * fleet.h's rules 1 and 3 may take from it without a stop (a fixed job's gang, a non-preemptible
 * elastic job's --min-np; a preemptible job's counted as 0, so this is the most room there could
 * be). A job waits "bound by floors" when the smallest waiting floor does not fit that room: no
 * order of the queue, no shrink admits anyone then; only a job's end does. */
static int hard_room(const sim_t *m) {
    int room = m->o->nodes * m->o->slots;
    for (int i = 0; i < m->nj; i++) {
        const job_t *j = &m->j[i];
        if (j->state == S_START || j->state == S_RUN) {
            uint32_t h = !j->s->elastic ? j->held : j->s->preempt ? 0 : j->s->min;
            room -= (int)(h < j->held ? h : j->held);
        }
    }
    return room;
}

static void advance(sim_t *m, double to) {
    double dt = to - m->t;
    if (dt <= 0) {
        return;
    }
    int want = 0;
    double busy = 0, held = 0;
    for (int i = 0; i < m->nj; i++) {
        job_t *j = &m->j[i];
        held += j->held;
        want |= j->state == S_WAIT ||
                ((j->state == S_START || j->state == S_RUN) && j->held < j->s->max);
        if (progressing(j)) {
            double p = dt / tstep(m, j);
            j->progress += p;
            measure(j, dt, p);
            busy += j->size;
        }
    }
    int waiting = 0, least = INT32_MAX;
    for (int i = 0; i < m->nj; i++) {
        const job_t *j = &m->j[i];
        if (j->state == S_WAIT) {
            waiting++;
            least = (int)j->s->min < least ? (int)j->s->min : least;
        }
    }
    m->wait_js += waiting * dt;
    if (waiting > 0 && hard_room(m) < least) {
        m->bound_s += dt;
        m->bound_js += waiting * dt;
    }
    if (want) {
        m->want_s += dt;
        m->busy_slot_s += busy * dt;
        m->held_slot_s += held * dt;
    }
    m->t = to;
}

/* Places n workers of job j, the nodes with the most free slots first (sched.c's order). */
static void take_slots(sim_t *m, job_t *j, uint32_t n) {
    while (n > 0) {
        int best = -1;
        for (int k = 0; k < m->o->nodes; k++) {
            if (node_free(m, k) > 0 && (best < 0 || node_free(m, k) > node_free(m, best))) {
                best = k;
            }
        }
        if (best < 0) {
            return;
        }
        uint32_t take = node_free(m, best) < n ? node_free(m, best) : n;
        j->on[best] += take;
        m->used[best] += take;
        j->held += take;
        n -= take;
    }
}

static void free_all(sim_t *m, job_t *j) {
    for (int k = 0; k < m->o->nodes; k++) {
        m->used[k] -= j->on[k];
        j->on[k] = j->leave[k] = 0;
    }
    j->held = j->size = j->target = 0;
}

static void start(sim_t *m, job_t *j) {
    j->state = S_START;
    j->phase = P_NONE;
    j->ev = m->t + m->o->start_s + (j->preempts > 0 ? m->o->resume_s : 0);
    if (j->first_start < 0) {
        j->first_start = m->t;
    }
    trace(m, j, "start");
}

/* A change of size (or of nodes) at the next commit: newcomers' slots are taken now (they spawn
 * first), leavers go after the reset. */
static void resize(sim_t *m, job_t *j, uint32_t target) {
    j->target = target;
    if (j->held > j->size) {
        j->phase = P_SPAWN;
        j->ev = m->t + m->o->spawn_s;
    } else {
        j->phase = P_COMMIT;
        j->ev = m->t + (ceil(j->progress - 1e-9) - j->progress) * tstep(m, j);
    }
    trace(m, j, target > j->size ? "grow" : target < j->size ? "shrink" : "move");
}

static void preempt(sim_t *m, job_t *j) {
    j->stopping = 1;
    j->phase = P_COMMIT;
    j->ev = m->t + (ceil(j->progress - 1e-9) - j->progress) * tstep(m, j);
    trace(m, j, "preempt");
}

/* ---- the events ------------------------------------------------------------------------------ */

static double job_next(const sim_t *m, const job_t *j) {
    double n = INFINITY;
    if (j->state == S_START || (j->state == S_RUN && j->phase != P_NONE)) {
        n = j->ev;
    }
    if (progressing(j)) {
        double end = m->t + (j->steps - j->progress) * tstep(m, j);
        n = end < n ? end : n;
    }
    return n;
}

static double next_event(const sim_t *m) {
    double n = m->pol == POL_FLEET || m->pol == POL_RESERVE ? m->next_tick : INFINITY;
    for (int i = 0; i < m->nj; i++) {
        const job_t *j = &m->j[i];
        double e = j->state == S_FUTURE ? j->s->at : job_next(m, j);
        n = e < n ? e : n;
    }
    return n;
}

/* The pending change's commit came: pause for a reset (or stop). */
static void at_commit(sim_t *m, job_t *j) {
    j->progress = floor(j->progress + 0.5); /* at a commit: a whole step (rounding only) */
    if (j->stopping) {
        j->phase = P_STOP;
        j->ev = m->t + m->o->stop_s;
        return;
    }
    j->phase = P_RESET;
    j->ev = m->t + m->o->reset_lo + (m->o->reset_hi - m->o->reset_lo) * rng_unit(&m->rng);
}

static void at_reset_end(sim_t *m, job_t *j) {
    for (int k = 0; k < m->o->nodes; k++) {
        j->on[k] -= j->leave[k];
        m->used[k] -= j->leave[k];
        j->held -= j->leave[k];
        j->leave[k] = 0;
    }
    j->size = j->target;
    j->target = 0;
    j->phase = P_NONE;
    j->resets++;
    j->last_resize = m->t;
    j->noise = new_noise(m);
    trace(m, j, "resized");
}

/* Every event due at m->t; returns how many. */
static int fire(sim_t *m) {
    int fired = 0;
    for (int i = 0; i < m->nj; i++) {
        job_t *j = &m->j[i];
        if (j->state == S_FUTURE && j->s->at <= m->t + 1e-9) {
            j->state = S_WAIT;
            j->since = m->t;
            j->room = hard_room(m);
            fired++;
            continue;
        }
        if (progressing(j) && j->progress >= j->steps - 1e-6) {
            j->state = S_DONE;
            j->done = m->t;
            free_all(m, j);
            trace(m, j, "done");
            fired++;
            continue;
        }
        if (job_next(m, j) > m->t + 1e-9) {
            continue;
        }
        fired++;
        if (j->state == S_START) {
            j->state = S_RUN;
            j->size = j->held;
            j->last_resize = m->t;
            j->noise = new_noise(m);
            trace(m, j, "running");
        } else if (j->phase == P_SPAWN) {
            j->phase = P_COMMIT;
            j->ev = m->t + (ceil(j->progress - 1e-9) - j->progress) * tstep(m, j);
        } else if (j->phase == P_COMMIT) {
            at_commit(m, j);
        } else if (j->phase == P_RESET) {
            at_reset_end(m, j);
        } else if (j->phase == P_STOP) {
            free_all(m, j);
            j->state = S_WAIT;
            j->phase = P_NONE;
            j->stopping = 0;
            j->since = m->t;
            j->preempts++;
            trace(m, j, "stopped");
        }
    }
    return fired;
}

/* ---- the policies ---------------------------------------------------------------------------- */

/* fcfs over the jobs of namespace ns (-1: all) with cap slots for them: driver.c's
 * schedule_jobs with cluster.c's rules: the waiting jobs in order, each blocking the ones behind
 * it when it does not fit, then growth toward --max-np while nobody is blocked. */
static void sched_fcfs(sim_t *m, int ns, uint32_t cap) {
    uint32_t held = 0;
    for (int i = 0; i < m->nj; i++) {
        held += (ns < 0 || m->j[i].s->ns == ns) ? m->j[i].held : 0;
    }
    uint32_t free = cap > held ? cap - held : 0;
    hv_cl_pass_t pass = {0};
    for (int i = 0; i < m->nj && !pass.blocked; i++) {
        job_t *j = &m->j[i];
        if (j->state != S_WAIT || (ns >= 0 && j->s->ns != ns)) {
            continue;
        }
        uint32_t n =
            hv_cl_start(&pass, j->s->np, hv_np_least(j->s->elastic, j->s->np, j->s->min), free);
        if (n > 0) {
            take_slots(m, j, n);
            free -= n;
            start(m, j);
        }
    }
    for (int i = 0; i < m->nj && !pass.blocked; i++) {
        job_t *j = &m->j[i];
        if (j->state != S_RUN || j->phase != P_NONE || !j->s->elastic ||
            (ns >= 0 && j->s->ns != ns) || j->held >= j->s->max) {
            continue;
        }
        uint32_t n = hv_cl_grow(&pass, j->s->max - j->held, free);
        if (n > 0) {
            take_slots(m, j, n);
            free -= n;
            resize(m, j, j->held);
        }
    }
}

/* The static partition: namespace k gets its part of the slots (by weight, all 1 here). */
static uint32_t part_of(const opts_t *o, int k) {
    uint32_t all = (uint32_t)(o->nodes * o->slots), base = all / (uint32_t)o->nns;
    return base + ((uint32_t)k < all % (uint32_t)o->nns ? 1 : 0);
}

typedef struct fleet_io_s {
    hv_fl_ns_t ns[MAXNS];
    hv_fl_job_t jobs[MAXJ];
    int idx[MAXJ]; /* the sim's job of each input job */
    hv_fl_node_t nodes[MAXN];
    hv_fl_use_t use[MAXJ * 8];
    size_t nj, nuse;
} fleet_io_t;

static void fleet_inputs(sim_t *m, fleet_io_t *io) {
    const opts_t *o = m->o;
    for (int k = 0; k < o->nns; k++) {
        io->ns[k] = (hv_fl_ns_t){.weight = 1,
                                 .quota = {{o->quota ? part_of(o, k) : 0, 0, 0}},
                                 .borrow = {{HV_FL_UNLIMITED, HV_FL_UNLIMITED, HV_FL_UNLIMITED}}};
    }
    for (int n = 0; n < o->nodes; n++) {
        io->nodes[n] = (hv_fl_node_t){
            .id = (uint64_t)n + 1, .cap = {{(uint64_t)o->slots, 0, 0}}, .schedulable = 1};
    }
    io->nj = io->nuse = 0;
    for (int i = 0; i < m->nj; i++) {
        job_t *j = &m->j[i];
        if (j->state == S_FUTURE || j->state == S_DONE) {
            continue;
        }
        hv_tput_fit(j->samp, j->nsamp, &j->model);
        hv_fl_job_t *f = &io->jobs[io->nj];
        *f = (hv_fl_job_t){.id = (uint64_t)j->s->id,
                           .ns = (uint32_t)j->s->ns,
                           .priority = j->s->prio,
                           .elastic = j->s->elastic,
                           .preemptible = j->s->preempt,
                           .np = j->s->np,
                           .min_np = j->s->min,
                           .max_np = j->s->max,
                           .tput = &j->model};
        if (j->state == S_WAIT) {
            f->state = HV_FL_WAITING;
            f->waiting_since_ms = (uint64_t)(j->since * 1000);
        } else {
            f->state = j->state == S_RUN && j->phase == P_NONE ? HV_FL_RUNNING : HV_FL_FROZEN;
            f->size = j->state == S_RUN && j->phase == P_NONE ? j->size : j->held;
            f->resized_ms = (uint64_t)(j->last_resize * 1000);
        }
        for (int n = 0; n < o->nodes; n++) {
            if (j->on[n] > 0) {
                io->use[io->nuse++] = (hv_fl_use_t){.job = io->nj,
                                                    .node = (size_t)n,
                                                    .workers = j->on[n],
                                                    .leaving = j->stopping ? j->on[n]
                                                               : j->target ? j->leave[n]
                                                                           : 0};
            }
        }
        io->idx[io->nj++] = i;
    }
}

/* Carries out one job's decision where it can be now: a start or a growth needs its slots free
 * on the nodes the decision names (a shrink frees them only after its reset: the next decision,
 * at that reset's end, admits again). */
static void fleet_apply(sim_t *m, job_t *j, const hv_fl_dec_t *d, const hv_fl_out_t *out) {
    int add[MAXN] = {0}, rem[MAXN] = {0}, any = 0;
    for (size_t k = 0; k < out->nmoves; k++) {
        if (out->moves[k].job_id == (uint64_t)j->s->id) {
            int n = (int)out->moves[k].node_id - 1;
            if (out->moves[k].delta > 0) {
                add[n] = out->moves[k].delta;
                any |= (uint32_t)add[n] > node_free(m, n);
            } else {
                rem[n] = -out->moves[k].delta;
            }
        }
    }
    if (any) {
        return; /* not free yet */
    }
    int waiting = j->state == S_WAIT;
    if (d->reason == HV_FL_PREEMPTED) {
        preempt(m, j);
        return;
    }
    if (!(waiting && d->target > 0) && !(j->state == S_RUN && j->phase == P_NONE)) {
        return;
    }
    int changed = 0;
    for (int n = 0; n < m->o->nodes; n++) {
        changed |= add[n] || rem[n];
        j->on[n] += (uint32_t)add[n];
        m->used[n] += (uint32_t)add[n];
        j->held += (uint32_t)add[n];
        j->leave[n] = (uint32_t)rem[n];
    }
    if (waiting) {
        start(m, j);
    } else if (changed) {
        resize(m, j, d->target);
    }
}

static void sched_fleet(sim_t *m) {
    static fleet_io_t io;
    fleet_inputs(m, &io);
    hv_fl_settings_t set;
    hv_fl_settings_default(&set);
    set.resize_interval_ms = m->o->interval_ms;
    set.starve_ms = m->o->starve_ms;
    set.keep_pct = m->o->keep_pct;
    set.min_gain_pm = m->o->min_gain_pm;
    set.reserve_pct = m->pol == POL_RESERVE ? m->o->reserve_pct : 0;
    hv_fl_in_t in = {.now_ms = (uint64_t)(m->t * 1000),
                     .set = &set,
                     .ns = io.ns,
                     .nns = (size_t)m->o->nns,
                     .jobs = io.jobs,
                     .njobs = io.nj,
                     .nodes = io.nodes,
                     .nnodes = (size_t)m->o->nodes,
                     .use = io.use,
                     .nuse = io.nuse};
    hv_fl_out_t out;
    char err[256];
    if (hv_fl_decide(&in, &out, err, sizeof(err)) != HV_OK) {
        fprintf(stderr, "fleetsim: the fleet policy refused its input: %s\n", err);
        exit(1);
    }
    for (int pass = 0; pass < 2; pass++) { /* shrinks and stops first, then what takes slots */
        for (size_t k = 0; k < out.ndec; k++) {
            job_t *j = &m->j[io.idx[k]];
            const hv_fl_dec_t *d = &out.dec[k];
            int takes = d->target > (j->state == S_WAIT ? 0 : j->size);
            if (takes == pass && d->reason != HV_FL_BUSY) {
                fleet_apply(m, j, d, &out);
            }
        }
    }
    hv_fl_out_fini(&out);
}

/* The job's fastest size within its bounds (fixed: -np). */
static uint32_t best_size(const opts_t *o, const spec_t *s) {
    uint32_t best = s->np;
    for (uint32_t k = s->min; k <= s->max; k++) {
        best = step_ms(o, s->c_ms, k) < step_ms(o, s->c_ms, best) ? k : best;
    }
    return best;
}

static double left_s(const sim_t *m, const job_t *j) {
    return (j->steps - j->progress) * step_ms(m->o, j->s->c_ms, best_size(m->o, j->s)) / 1000;
}

/* Job j gives back k workers at its next commit, from the nodes where it has the most. */
static void shrink_by(sim_t *m, job_t *j, uint32_t k) {
    while (k-- > 0) {
        int best = -1;
        for (int n = 0; n < m->o->nodes; n++) {
            if (j->on[n] > j->leave[n] &&
                (best < 0 || j->on[n] - j->leave[n] > j->on[best] - j->leave[best])) {
                best = n;
            }
        }
        j->leave[best]++;
    }
}

/* The clairvoyant references, not hv's: they know every job's remaining steps (no scheduler
 * does) and serve the shortest remaining time first: the waiting jobs' floors in that order
 * where they fit (no blocking), then each job grows toward its fastest size in that order,
 * shrinking the jobs behind it to their floors. "oracle" never stops a job and never shrinks a
 * fixed one, as hv's policy; it has no resize hold. Its row is a reference for what knowing
 * lengths would buy, not a goal: what no length-blind policy can be expected to reach.
 * "oracle-stop" (stop) may also stop any running elastic job at its next commit, preemptible or
 * not, whenever a shorter job's floor needs its slots (it pays the stop and the resume as a
 * preemption does): what knowing lengths and stopping at will would buy; only fixed jobs, which
 * have no state copy to resume from, keep their gang. */
static void sched_oracle(sim_t *m, int stop) {
    int ord[MAXJ], no = 0;
    uint32_t target[MAXJ] = {0};
    int32_t free = m->o->nodes * m->o->slots;
    for (int i = 0; i < m->nj; i++) {
        job_t *j = &m->j[i];
        int idle = j->state == S_RUN && j->phase == P_NONE;
        if (j->state == S_START || (j->state == S_RUN && !idle)) {
            free -= j->stopping ? 0 : (int32_t)j->held; /* a change in progress: as it is */
        } else if (idle || j->state == S_WAIT) {
            target[i] = idle ? (j->s->elastic ? j->s->min : j->s->np) : 0;
            free -= (int32_t)target[i];
            int k = no++;
            while (k > 0 && left_s(m, &m->j[ord[k - 1]]) > left_s(m, j)) {
                ord[k] = ord[k - 1];
                k--;
            }
            ord[k] = i;
        }
    }
    for (int k = 0; k < no; k++) {
        job_t *j = &m->j[ord[k]];
        uint32_t fl = j->s->elastic ? j->s->min : j->s->np;
        if (j->state != S_WAIT) {
            continue;
        }
        int32_t more = 0; /* what stopping the running elastic jobs behind it would free */
        for (int q = k + 1; stop && q < no; q++) {
            job_t *b = &m->j[ord[q]];
            more += b->state == S_RUN && b->s->elastic ? (int32_t)target[ord[q]] : 0;
        }
        if ((int32_t)fl > free + more) {
            continue;
        }
        for (int q = no - 1; q > k && (int32_t)fl > free; q--) { /* the longest first */
            job_t *b = &m->j[ord[q]];
            if (b->state == S_RUN && b->s->elastic && target[ord[q]] > 0) {
                free += (int32_t)target[ord[q]];
                target[ord[q]] = 0;
            }
        }
        target[ord[k]] = fl;
        free -= (int32_t)fl;
    }
    for (int k = 0; k < no && free > 0; k++) {
        job_t *j = &m->j[ord[k]];
        uint32_t b = best_size(m->o, j->s), *t = &target[ord[k]];
        if (*t > 0 && j->s->elastic && b > *t) {
            uint32_t add = b - *t < (uint32_t)free ? b - *t : (uint32_t)free;
            *t += add;
            free -= (int32_t)add;
        }
    }
    for (int k = 0; k < no; k++) { /* stops and shrinks first: their slots free after it */
        job_t *j = &m->j[ord[k]];
        if (j->state == S_RUN && target[ord[k]] == 0) {
            preempt(m, j);
        } else if (j->state == S_RUN && target[ord[k]] < j->size) {
            shrink_by(m, j, j->size - target[ord[k]]);
            resize(m, j, target[ord[k]]);
        }
    }
    uint32_t now = 0;
    for (int n = 0; n < m->o->nodes; n++) {
        now += node_free(m, n);
    }
    for (int k = 0; k < no; k++) {
        job_t *j = &m->j[ord[k]];
        uint32_t t = target[ord[k]];
        if (j->state == S_WAIT && t > 0 && t <= now) {
            take_slots(m, j, t);
            now -= t;
            start(m, j);
        } else if (j->state == S_RUN && j->phase == P_NONE && t > j->size && now > 0) {
            uint32_t add = t - j->size < now ? t - j->size : now;
            take_slots(m, j, add);
            now -= add;
            resize(m, j, j->held);
        }
    }
}

static void schedule(sim_t *m) {
    if (m->pol == POL_SRPT || m->pol == POL_SRPT_STOP) {
        sched_oracle(m, m->pol == POL_SRPT_STOP);
    } else if (m->pol == POL_FCFS) {
        sched_fcfs(m, -1, (uint32_t)(m->o->nodes * m->o->slots));
    } else if (m->pol == POL_STATIC) {
        for (int k = 0; k < m->o->nns; k++) {
            sched_fcfs(m, k, part_of(m->o, k));
        }
    } else {
        sched_fleet(m);
    }
}

/* ---- one run, the figures -------------------------------------------------------------------- */

typedef struct result_s {
    int ok;
    double alone; /* the average JCT if every job ran alone, at its best size, from its arrival */
    double avg_jct, p95_jct, makespan, util, held, hi_wait_med, hi_wait_max, hi_in_bound, resets,
        preempts;
    /* the diagnosis (--rows): the seconds some job waited bound by floors (hard_room), the job-
     * seconds of waiting in all and of them bound by floors, the top-priority jobs that did not
     * start within interval + 1 s and of them those that found less room than their floor at
     * their arrival (floors admitted before they came held the cluster) */
    double bound_s, wait_js, bound_js;
    int hi_late, hi_late_bound;
} result_t;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of n sorted values (nearest rank). */
static double quantile(const double *v, int n, double q) {
    int k = (int)ceil(q * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static result_t figures(const sim_t *m) {
    result_t r = {.ok = 1};
    double jct[MAXJ], wait[MAXJ], first = INFINITY, last = 0, sum = 0;
    int nw = 0, top = 0;
    for (int i = 0; i < m->nj; i++) {
        top = m->j[i].s->prio > top ? m->j[i].s->prio : top;
    }
    for (int i = 0; i < m->nj; i++) {
        const job_t *j = &m->j[i];
        jct[i] = j->done - j->s->at;
        sum += jct[i];
        first = j->s->at < first ? j->s->at : first;
        last = j->done > last ? j->done : last;
        r.resets += j->resets;
        r.preempts += j->preempts;
        if (j->s->prio == top) {
            wait[nw++] = j->first_start - j->s->at;
        }
    }
    qsort(jct, (size_t)m->nj, sizeof(double), cmp_double);
    qsort(wait, (size_t)nw, sizeof(double), cmp_double);
    r.avg_jct = sum / m->nj;
    r.p95_jct = quantile(jct, m->nj, 0.95);
    r.makespan = last - first;
    r.util = m->want_s > 0 ? m->busy_slot_s / (m->want_s * m->o->nodes * m->o->slots) : 1;
    r.held = m->want_s > 0 ? m->held_slot_s / (m->want_s * m->o->nodes * m->o->slots) : 1;
    r.hi_wait_med = nw ? quantile(wait, nw, 0.5) : 0;
    r.hi_wait_max = nw ? wait[nw - 1] : 0;
    int in = 0; /* started within one resize interval + 1 s */
    for (int k = 0; k < nw; k++) {
        in += wait[k] <= m->o->interval_ms / 1000.0 + 1;
    }
    for (int i = 0; i < m->nj; i++) {
        const job_t *j = &m->j[i];
        if (j->s->prio == top && j->first_start - j->s->at > m->o->interval_ms / 1000.0 + 1) {
            r.hi_late++;
            r.hi_late_bound += j->room < (int)j->s->min;
        }
    }
    r.bound_s = m->bound_s;
    r.wait_js = m->wait_js;
    r.bound_js = m->bound_js;
    r.hi_in_bound = nw ? (double)in / nw : 1;
    r.resets /= m->nj;
    return r;
}

/* The workload's own bound: each job alone on the cluster at its fastest size (fixed: -np),
 * started at its arrival. No policy beats it; contention is what a policy adds to it. */
static double alone(const opts_t *o, const spec_t *js, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        uint32_t best = js[i].np;
        for (uint32_t k = js[i].min; k <= js[i].max; k++) {
            best = step_ms(o, js[i].c_ms, k) < step_ms(o, js[i].c_ms, best) ? k : best;
        }
        sum += o->start_s + steps_of(&js[i]) * step_ms(o, js[i].c_ms, best) / 1000;
    }
    return sum / n;
}

static result_t run(const opts_t *o, int pol, uint64_t seed) {
    static spec_t js[MAXJ];
    static sim_t m;
    int n = workload(o, seed, js);
    memset(&m, 0, sizeof(m));
    m.o = o;
    m.pol = pol;
    m.nj = n;
    m.rng = seed * 31 + 7;
    for (int i = 0; i < n; i++) {
        m.j[i] = (job_t){.s = &js[i], .steps = steps_of(&js[i]), .first_start = -1};
        hv_tput_default(&m.j[i].model);
    }
    for (int left = n; left > 0;) {
        double t = next_event(&m);
        if (t == INFINITY || t > 1e7) {
            break;
        }
        advance(&m, t);
        while (fire(&m) > 0) {
        }
        if ((pol == POL_FLEET || pol == POL_RESERVE) && m.t >= m.next_tick - 1e-9) {
            m.next_tick = m.t + o->tick_s;
        }
        schedule(&m);
        left = 0;
        for (int i = 0; i < n; i++) {
            left += m.j[i].state != S_DONE;
        }
    }
    result_t r = figures(&m);
    r.alone = alone(o, js, n);
    for (int i = 0; i < n && o->per_job; i++) {
        const job_t *j = &m.j[i];
        printf("%s\tseed %llu\tjob %d\tat %.1f\tprio %d\tns %d\t%s -np %u %u-%u\tsteps %.0f\t"
               "c %.2f\tT1 %.0f ms\twait %.1f\tjct %.1f\tresets %d\tpreempts %d\troom %d\n",
               pol_names[pol], (unsigned long long)seed, j->s->id, j->s->at, j->s->prio, j->s->ns,
               j->s->elastic ? "elastic" : "fixed", j->s->np, j->s->min, j->s->max, j->steps,
               j->s->c_ms, step_ms(o, j->s->c_ms, 1), j->first_start - j->s->at, j->done - j->s->at,
               j->resets, j->preempts, j->room);
    }
    for (int i = 0; i < n; i++) {
        if (m.j[i].state != S_DONE) {
            fprintf(stderr, "fleetsim: %s seed %llu: job %d never ended\n", pol_names[pol],
                    (unsigned long long)seed, m.j[i].s->id);
            r.ok = 0;
        }
    }
    return r;
}

/* ---- the table ------------------------------------------------------------------------------- */

static double med(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
static double worst(const double *v, int n, int low_is_bad) {
    double w = v[0];
    for (int i = 1; i < n; i++) {
        w = low_is_bad ? (v[i] < w ? v[i] : w) : (v[i] > w ? v[i] : w);
    }
    return w;
}

#define MAXSEEDS 256

/* Median and worst over the seeds of one figure: "m / w". */
static void cell(double *v, int n, int low_is_bad, const char *fmt, double scale) {
    double w = worst(v, n, low_is_bad), md = med(v, n);
    printf(" | ");
    printf(fmt, md * scale);
    printf(" / ");
    printf(fmt, w * scale);
}

/* The top-priority jobs started within one resize interval + 1 s: median and worst seed. */
static void cell_hi(const result_t *r, int n) {
    double v[MAXSEEDS];
    for (int s = 0; s < n; s++) {
        v[s] = r[s].hi_in_bound;
    }
    cell(v, n, 1, "%.0f%%", 100);
}

static void table(const opts_t *o, const int *pols, int np, result_t (*res)[MAXSEEDS]) {
    int n = o->seeds;
    printf("Fleet simulation: %d jobs per seed (%.0f%% elastic, %.0f-%.0f steps, step %.0f ms + "
           "%.0f ms per extra worker + 64 x %.2g-%.2g ms / n), %d nodes x %d slots, %d namespaces, "
           "load %.2f, seeds %llu..%llu, resize interval %u ms, reset %.0f-%.0f ms, fleet quotas "
           "%s; median / worst over the seeds.\n\n",
           o->jobs, o->elastic * 100, o->steps_lo, o->steps_hi, o->o0_ms, o->o1_ms, o->c_lo,
           o->c_hi, o->nodes, o->slots, o->nns, o->load, (unsigned long long)o->seed,
           (unsigned long long)(o->seed + (uint64_t)n - 1), o->interval_ms, o->reset_lo * 1000,
           o->reset_hi * 1000, o->quota ? "= the static partition, borrowing unlimited" : "none");
    printf(
        "| policy | avg JCT s | p95 JCT s | makespan s | utilization while wanted | "
        "top-priority wait s (median) | top-priority wait s (worst) | resets per job | "
        "preemptions | steps lost | avg JCT vs fcfs | top-priority started within interval + 1 s "
        "|\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int base = -1;
    for (int p = 0; p < np; p++) {
        base = pols[p] == POL_FCFS ? p : base;
    }
    for (int p = 0; p < np; p++) {
        double v[MAXSEEDS];
        printf("| %s", pol_names[pols[p]]);
#define COL(field, low, fmt, scale)                                                                \
    do {                                                                                           \
        for (int s = 0; s < n; s++) {                                                              \
            v[s] = res[p][s].field;                                                                \
        }                                                                                          \
        cell(v, n, low, fmt, scale);                                                               \
    } while (0)
        COL(avg_jct, 0, "%.1f", 1);
        COL(p95_jct, 0, "%.1f", 1);
        COL(makespan, 0, "%.1f", 1);
        COL(util, 1, "%.1f%%", 100);
        COL(hi_wait_med, 0, "%.2f", 1);
        COL(hi_wait_max, 0, "%.2f", 1);
        COL(resets, 0, "%.2f", 1);
        COL(preempts, 0, "%.0f", 1);
#undef COL
        printf(" | 0");
        if (base >= 0) {
            for (int s = 0; s < n; s++) {
                v[s] = res[p][s].avg_jct / res[base][s].avg_jct - 1;
            }
            cell(v, n, 0, "%+.1f%%", 100);
        } else {
            printf(" | -");
        }
        cell_hi(res[p], n);
        printf(" |\n");
    }
    if (np > 0) {
        double v[MAXSEEDS];
        for (int s = 0; s < n; s++) {
            v[s] = res[0][s].alone;
        }
        printf("| (each job alone, best size)");
        cell(v, n, 0, "%.1f", 1);
        printf(" | - | - | - | - | - | - | - | -");
        if (base >= 0) { /* the most any policy could cut on each seed */
            for (int s = 0; s < n; s++) {
                v[s] = res[0][s].alone / res[base][s].avg_jct - 1;
            }
            cell(v, n, 0, "%+.1f%%", 100);
        } else {
            printf(" | -");
        }
        printf(" | - |\n");
    }
    printf(
        "\nWorst over seeds: the highest JCT, makespan, wait, resets and preemptions, the lowest "
        "utilization, the smallest JCT reduction against fcfs (per seed: avg JCT / fcfs avg "
        "JCT - 1). The last row's cell in that column is the bound on the reduction (per seed: "
        "every job alone at its best size from its arrival, against fcfs): no policy reaches "
        "it. Steps lost: 0 by construction (every resize and stop is at a commit); the "
        "end-to-end tests through the binaries show it for the real driver.\n");
}

static void rows(const opts_t *o, int pol, uint64_t seed, const result_t *r) {
    (void)o;
    printf("%s\tseed %llu\tavg %.2f\tp95 %.2f\tmakespan %.2f\tutil %.3f (held %.3f)\t"
           "hiwait %.2f/%.2f\tresets %.2f\tpreempts %.0f\tbound by floors %.0f s\t"
           "waiting %.0f job-s (%.0f%% bound by floors)\ttop-priority late %d (%d found no room)\n",
           pol_names[pol], (unsigned long long)seed, r->avg_jct, r->p95_jct, r->makespan, r->util,
           r->held, r->hi_wait_med, r->hi_wait_max, r->resets, r->preempts, r->bound_s, r->wait_js,
           r->wait_js > 0 ? 100 * r->bound_js / r->wait_js : 0, r->hi_late, r->hi_late_bound);
}

static int parse_range(const char *s, double *lo, double *hi) {
    char *end;
    *lo = strtod(s, &end) / 1000;
    *hi = *end == ':' ? strtod(end + 1, &end) / 1000 : *lo;
    return *end == '\0' && *lo >= 0 && *hi >= *lo;
}

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.seed = 1,
                  .seeds = 5,
                  .jobs = 48,
                  .nodes = 4,
                  .slots = 2,
                  .nns = 2,
                  .load = 1.0,
                  .policies = "fcfs static fleet",
                  .interval_ms = HV_FL_INTERVAL_MS,
                  .starve_ms = HV_FL_STARVE_MS,
                  .keep_pct = 10,
                  .min_gain_pm = 20,
                  .reserve_pct = 25,
                  .quota = 0,
                  .start_s = 0.5,
                  .resume_s = 0.3,
                  .spawn_s = 0.3,
                  .stop_s = 0.1,
                  .reset_lo = 0.040,
                  .reset_hi = 0.060,
                  .o0_ms = 8,
                  .o1_ms = 3,
                  .noise = 0.05,
                  .tick_s = 1.0,
                  .steps_lo = 20,
                  .steps_hi = 5000,
                  .elastic = 0.6,
                  .preempt_share = 1.0 / 3,
                  .c_lo = 0.5,
                  .c_hi = 4.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, flag = 1;
        if (strcmp(a, "--print-workload") == 0) {
            o->print_workload = 1;
        } else if (strcmp(a, "--rows") == 0) {
            o->rows = 1;
        } else if (strcmp(a, "--trace") == 0) {
            o->trace = 1;
        } else if (strcmp(a, "--per-job") == 0) {
            o->per_job = 1;
        } else if (v == NULL) {
            ok = 0;
        } else {
            flag = 0;
            if (strcmp(a, "--seed") == 0) {
                o->seed = strtoull(v, NULL, 10), o->seeds = 1;
            } else if (strcmp(a, "--seeds") == 0) {
                o->seeds = atoi(v);
            } else if (strcmp(a, "--first-seed") == 0) {
                o->seed = strtoull(v, NULL, 10);
            } else if (strcmp(a, "--jobs") == 0) {
                o->jobs = atoi(v);
            } else if (strcmp(a, "--nodes") == 0) {
                o->nodes = atoi(v);
            } else if (strcmp(a, "--slots") == 0) {
                o->slots = atoi(v);
            } else if (strcmp(a, "--namespaces") == 0) {
                o->nns = atoi(v);
            } else if (strcmp(a, "--load") == 0) {
                o->load = atof(v);
            } else if (strcmp(a, "--policies") == 0) {
                o->policies = v;
            } else if (strcmp(a, "--interval-ms") == 0) {
                o->interval_ms = (uint32_t)atoi(v);
            } else if (strcmp(a, "--starve-ms") == 0) {
                o->starve_ms = (uint32_t)atoi(v);
            } else if (strcmp(a, "--keep-pct") == 0) {
                o->keep_pct = (uint32_t)atoi(v);
            } else if (strcmp(a, "--reserve-pct") == 0) {
                o->reserve_pct = (uint32_t)atoi(v);
                ok = o->reserve_pct <= 100;
            } else if (strcmp(a, "--min-gain-pm") == 0) {
                o->min_gain_pm = (uint32_t)atoi(v);
            } else if (strcmp(a, "--fleet-quota") == 0) {
                o->quota = strcmp(v, "partition") == 0 ? 1 : strcmp(v, "none") == 0 ? 0 : -1;
                ok = o->quota >= 0;
            } else if (strcmp(a, "--reset-ms") == 0) {
                ok = parse_range(v, &o->reset_lo, &o->reset_hi);
            } else if (strcmp(a, "--overhead-ms") == 0) {
                ok = sscanf(v, "%lf:%lf", &o->o0_ms, &o->o1_ms) == 2;
            } else if (strcmp(a, "--steps") == 0) {
                ok = sscanf(v, "%lf:%lf", &o->steps_lo, &o->steps_hi) == 2 && o->steps_lo >= 1 &&
                     o->steps_hi >= o->steps_lo;
            } else if (strcmp(a, "--compute-ms") == 0) {
                ok = sscanf(v, "%lf:%lf", &o->c_lo, &o->c_hi) == 2 && o->c_lo > 0 &&
                     o->c_hi >= o->c_lo;
            } else if (strcmp(a, "--preemptible") == 0) {
                o->preempt_share = atof(v);
                ok = o->preempt_share >= 0 && o->preempt_share <= 1;
            } else if (strcmp(a, "--elastic") == 0) {
                o->elastic = atof(v);
            } else if (strcmp(a, "--noise") == 0) {
                o->noise = atof(v);
            } else {
                ok = 0;
            }
        }
        if (!ok) {
            fprintf(stderr,
                    "fleetsim: bad option %s%s%s (see the comment at the top of "
                    "tests/perf/fleetsim.c)\n",
                    a, v && !flag ? " " : "", v && !flag ? v : "");
            return 0;
        }
        i += !flag;
    }
    if (o->jobs < 1 || o->jobs > MAXJ || o->nodes < 1 || o->nodes > MAXN || o->slots < 1 ||
        o->nns < 1 || o->nns > MAXNS || o->nns > o->nodes * o->slots || o->seeds < 1 ||
        o->seeds > MAXSEEDS || o->load <= 0) {
        fprintf(stderr,
                "fleetsim: need 1..%d jobs, 1..%d nodes, 1..%d namespaces (at most one "
                "per slot), 1..%d seeds, a load above 0\n",
                MAXJ, MAXN, MAXNS, MAXSEEDS);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    static result_t res[POL__N][MAXSEEDS];
    opts_t o;
    if (!parse(argc, argv, &o)) {
        return 2;
    }
    if (o.print_workload) {
        spec_t js[MAXJ];
        for (int s = 0; s < o.seeds; s++) {
            print_workload(&o, o.seed + (uint64_t)s, js, workload(&o, o.seed + (uint64_t)s, js));
        }
        return 0;
    }
    int pols[POL__N], np = 0;
    for (int p = 0; p < POL__N; p++) {
        size_t len = strlen(pol_names[p]);
        for (const char *at = o.policies; (at = strstr(at, pol_names[p])) != NULL; at += len) {
            if ((at == o.policies || at[-1] == ' ') && (at[len] == ' ' || at[len] == '\0')) {
                pols[np++] = p;
                break;
            }
        }
    }
    int ok = np > 0;
    for (int p = 0; p < np; p++) {
        for (int s = 0; s < o.seeds; s++) {
            res[p][s] = run(&o, pols[p], o.seed + (uint64_t)s);
            ok &= res[p][s].ok;
            if (o.rows) {
                rows(&o, pols[p], o.seed + (uint64_t)s, &res[p][s]);
            }
        }
    }
    table(&o, pols, np, res);
    return ok ? 0 : 1;
}
