/*
 * spotsim: see spotsim.h. Instances sit in one array in launch order (so "the oldest" is the
 * first match); each step handles the earliest due event first, so actions come out in time
 * order whatever the caller's tick.
 */
#include "spotsim.h"

#include "err.h"
#include "mem.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum inst_state_e { I_BOOTING = 0, I_RUNNING, I_NOTICED } inst_state;

typedef struct inst_s {
    uint64_t id;
    size_t type;
    inst_state st;
    uint64_t due_ms; /* booting: boots then; noticed: killed then */
} inst_t;

struct hv_ss_s {
    const hv_ss_config_t *c;
    uint64_t start_ms;
    uint64_t rng;
    inst_t *inst;
    size_t n;
    uint32_t cap[HV_SS_MAX_TYPES]; /* UINT32_MAX: no limit (a trace's "capacity 0" means none) */
    uint64_t next_random_ms;       /* UINT64_MAX: none */
    size_t trace_i;
};

/* xorshift64*: small, fast and reproducible from the seed. */
static uint64_t rnd(hv_ss_t *s) {
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in (0, 1]. */
static double rnd_unit(hv_ss_t *s) { return ((double)(rnd(s) >> 11) + 1.0) / 9007199254740992.0; }

static uint64_t random_gap_ms(hv_ss_t *s) {
    double gap = -log(rnd_unit(s)) * (double)s->c->interval_s * 1000.0;
    return gap < 1.0 ? 1 : (uint64_t)gap;
}

hv_ss_t *hv_ss_create(const hv_ss_config_t *c, uint64_t start_ms) {
    if (c == NULL || c->ntypes > HV_SS_MAX_TYPES || (c->ntypes > 0 && c->types == NULL) ||
        c->boot_min_ms > c->boot_max_ms || !(c->no_notice_fraction >= 0) ||
        c->no_notice_fraction > 1 || (c->ntrace > 0 && c->trace == NULL)) {
        return NULL;
    }
    hv_ss_t *s = hv_calloc(1, sizeof(*s));
    inst_t *in = hv_calloc(HV_SS_MAX_INSTANCES, sizeof(*in));
    if (s == NULL || in == NULL) {
        hv_free(s);
        hv_free(in);
        return NULL;
    }
    s->c = c;
    s->inst = in;
    s->start_ms = start_ms;
    s->rng = c->seed ^ 0x9E3779B97F4A7C15ULL;
    if (s->rng == 0) {
        s->rng = 1;
    }
    for (size_t t = 0; t < c->ntypes; t++) {
        s->cap[t] = c->types[t].capacity ? c->types[t].capacity : UINT32_MAX; /* 0: no limit */
    }
    s->next_random_ms =
        c->interval_s > 0 && c->ntrace == 0 ? start_ms + random_gap_ms(s) : UINT64_MAX;
    return s;
}

void hv_ss_destroy(hv_ss_t *s) {
    if (s != NULL) {
        hv_free(s->inst);
        hv_free(s);
    }
}

uint32_t hv_ss_count(const hv_ss_t *s, size_t type) {
    uint32_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        n += s->inst[i].type == type;
    }
    return n;
}

static inst_t *find(hv_ss_t *s, uint64_t id) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->inst[i].id == id) {
            return &s->inst[i];
        }
    }
    return NULL;
}

static void remove_inst(hv_ss_t *s, inst_t *in) {
    size_t i = (size_t)(in - s->inst);
    memmove(&s->inst[i], &s->inst[i + 1], (s->n - i - 1) * sizeof(*in));
    s->n--;
}

int hv_ss_launch(hv_ss_t *s, uint64_t instance, size_t type, uint64_t now_ms, char *why,
                 size_t whylen) {
    if (type >= s->c->ntypes || find(s, instance) != NULL || s->n >= HV_SS_MAX_INSTANCES) {
        snprintf(why, whylen, "spot-sim: bad launch (type %zu, instance %llu)", type,
                 (unsigned long long)instance);
        return 0;
    }
    uint32_t have = hv_ss_count(s, type);
    if (have >= s->cap[type]) {
        snprintf(why, whylen, "spot-sim: no capacity for type %s (%u of %u in use)",
                 s->c->types[type].name, have, s->cap[type]);
        return 0;
    }
    uint32_t span = s->c->boot_max_ms - s->c->boot_min_ms;
    uint64_t boot = s->c->boot_min_ms + (span ? rnd(s) % ((uint64_t)span + 1) : 0);
    s->inst[s->n++] =
        (inst_t){.id = instance, .type = type, .st = I_BOOTING, .due_ms = now_ms + boot};
    return 1;
}

int hv_ss_adopt(hv_ss_t *s, uint64_t instance, size_t type) {
    if (type >= s->c->ntypes || find(s, instance) != NULL || s->n >= HV_SS_MAX_INSTANCES) {
        return 0;
    }
    s->inst[s->n++] = (inst_t){.id = instance, .type = type, .st = I_RUNNING};
    /* A restarted head must not replay the random preemptions its predecessor already had:
     * the adopted ids move the stream on (deterministically, so a run stays reproducible). */
    s->rng ^= (instance + 1) * 0x9E3779B97F4A7C15ULL;
    s->rng = s->rng ? s->rng : 1;
    if (s->next_random_ms != UINT64_MAX) {
        s->next_random_ms = s->start_ms + random_gap_ms(s);
    }
    return 1;
}

void hv_ss_terminate(hv_ss_t *s, uint64_t instance) {
    inst_t *in = find(s, instance);
    if (in != NULL) {
        remove_inst(s, in);
    }
}

/* ---- step ----------------------------------------------------------------------------------- */

typedef enum due_kind_e { D_NONE = 0, D_INST, D_RANDOM, D_TRACE } due_kind;

static uint64_t trace_at(const hv_ss_t *s) {
    return s->trace_i < s->c->ntrace ? s->start_ms + s->c->trace[s->trace_i].at_ms : UINT64_MAX;
}

/* The earliest pending event: its kind, time and (D_INST) instance. */
static due_kind earliest(const hv_ss_t *s, uint64_t *at, size_t *which) {
    due_kind k = D_NONE;
    *at = UINT64_MAX;
    for (size_t i = 0; i < s->n; i++) {
        const inst_t *in = &s->inst[i];
        if ((in->st == I_BOOTING || in->st == I_NOTICED) && in->due_ms < *at) {
            *at = in->due_ms;
            *which = i;
            k = D_INST;
        }
    }
    if (s->next_random_ms < *at) {
        *at = s->next_random_ms;
        k = D_RANDOM;
    }
    uint64_t t = trace_at(s);
    if (t < *at) {
        *at = t;
        k = D_TRACE;
    }
    return k;
}

uint64_t hv_ss_next_ms(const hv_ss_t *s) {
    uint64_t at;
    size_t which = 0;
    (void)earliest(s, &at, &which);
    return at;
}

static void say(hv_ss_action_t *a, hv_ss_action_kind kind, uint64_t id, const char *fmt, ...) {
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->instance = id;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->reason, sizeof(a->reason), fmt, ap);
    va_end(ap);
}

static void notice(hv_ss_t *s, inst_t *in, uint64_t at, hv_ss_action_t *a, const char *why) {
    in->st = I_NOTICED;
    in->due_ms = at + (uint64_t)s->c->notice_s * 1000u;
    say(a, HV_SS_NOTICE, in->id, "%s: a preemption notice for instance %llu (%s), taken in %u s",
        why, (unsigned long long)in->id, s->c->types[in->type].name, s->c->notice_s);
}

static void preempt(hv_ss_t *s, inst_t *in, hv_ss_action_t *a, const char *why) {
    int noticed = in->st == I_NOTICED;
    say(a, HV_SS_PREEMPTED, in->id, "%s: instance %llu (%s) preempted%s", why,
        (unsigned long long)in->id, s->c->types[in->type].name,
        noticed ? " after its notice" : " without notice");
    a->with_notice = noticed;
    remove_inst(s, in);
}

static void do_random(hv_ss_t *s, uint64_t at, hv_ss_action_t *a) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        n += s->inst[i].st == I_RUNNING && s->c->types[s->inst[i].type].preemptible;
    }
    s->next_random_ms = at + random_gap_ms(s);
    if (n == 0) {
        say(a, HV_SS_NOTE, 0, "random preemption: no running preemptible instance");
        return;
    }
    size_t pick = (size_t)(rnd(s) % n);
    int without = rnd_unit(s) <= s->c->no_notice_fraction;
    for (size_t i = 0; i < s->n; i++) {
        inst_t *in = &s->inst[i];
        if (in->st == I_RUNNING && s->c->types[in->type].preemptible && pick-- == 0) {
            if (without) {
                preempt(s, in, a, "random preemption");
            } else {
                notice(s, in, at, a, "random preemption");
            }
            return;
        }
    }
}

static void do_trace(hv_ss_t *s, uint64_t at, hv_ss_action_t *a) {
    const hv_ss_trace_event_t *e = &s->c->trace[s->trace_i];
    const char *tn = s->c->types[e->type].name;
    if (e->kind == HV_SS_TRACE_RECLAIM) {
        /* One instance beyond the capacity per call, newest first; the event stays due (the
         * next call takes the next one) until none is left beyond it. */
        s->cap[e->type] = e->arg;
        if (hv_ss_count(s, e->type) > e->arg) {
            for (size_t i = s->n; i-- > 0;) {
                if (s->inst[i].type == e->type) {
                    preempt(s, &s->inst[i], a, "trace: capacity reclaimed");
                    a->with_notice = 0;
                    return;
                }
            }
        }
        s->trace_i++;
        say(a, HV_SS_NOTE, 0, "trace at %llu s: capacity of %s is now %u",
            (unsigned long long)(e->at_ms / 1000u), tn, e->arg);
        return;
    }
    s->trace_i++;
    if (e->kind == HV_SS_TRACE_CAPACITY) {
        s->cap[e->type] = e->arg;
        say(a, HV_SS_NOTE, 0, "trace at %llu s: capacity of %s is now %u",
            (unsigned long long)(e->at_ms / 1000u), tn, e->arg);
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        inst_t *in = &s->inst[i];
        if (in->type != e->type) {
            continue;
        }
        if (e->kind == HV_SS_TRACE_PREEMPT && in->st == I_RUNNING) {
            notice(s, in, at, a, "trace");
            return;
        }
        if (e->kind == HV_SS_TRACE_KILL && (in->st == I_RUNNING || in->st == I_NOTICED)) {
            preempt(s, in, a, "trace");
            return;
        }
    }
    say(a, HV_SS_NOTE, 0, "trace at %llu s: no running %s instance to %s",
        (unsigned long long)(e->at_ms / 1000u), tn,
        e->kind == HV_SS_TRACE_KILL ? "kill" : "preempt");
}

size_t hv_ss_step(hv_ss_t *s, uint64_t now_ms, hv_ss_action_t *out, size_t cap) {
    size_t n = 0;
    while (n < cap) {
        uint64_t at;
        size_t which = 0;
        due_kind k = earliest(s, &at, &which);
        if (k == D_NONE || at > now_ms) {
            break;
        }
        hv_ss_action_t *a = &out[n++];
        if (k == D_RANDOM) {
            do_random(s, at, a);
        } else if (k == D_TRACE) {
            do_trace(s, at, a);
        } else if (s->inst[which].st == I_BOOTING) {
            s->inst[which].st = I_RUNNING;
            say(a, HV_SS_BOOTED, s->inst[which].id, "instance %llu (%s) booted",
                (unsigned long long)s->inst[which].id, s->c->types[s->inst[which].type].name);
        } else {
            preempt(s, &s->inst[which], a, "notice ended");
        }
    }
    return n;
}

/* ---- trace files ---------------------------------------------------------------------------- */

/* Sorts by time keeping the file's order among equal times (insertion sort: traces are short). */
static void sort_events(hv_ss_trace_event_t *ev, size_t n) {
    for (size_t i = 1; i < n; i++) {
        hv_ss_trace_event_t e = ev[i];
        size_t j = i;
        while (j > 0 && ev[j - 1].at_ms > e.at_ms) {
            ev[j] = ev[j - 1];
            j--;
        }
        ev[j] = e;
    }
}

int hv_ss_trace_parse(const char *text, const char *path, const hv_ss_type_t *types, size_t ntypes,
                      hv_ss_trace_event_t **out, size_t *nout, char *err, size_t errlen) {
    *out = NULL;
    *nout = 0;
    size_t cap = 0, n = 0, line = 0;
    hv_ss_trace_event_t *ev = NULL;
    const char *p = text;
    while (*p != '\0') {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[256];
        if (len >= sizeof(buf)) {
            hv_errf(err, errlen, "%s:%zu: line too long (at most %zu bytes)", path, line,
                    sizeof(buf) - 1);
            goto fail;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = eol ? eol + 1 : p + len;
        char *hash = strchr(buf, '#');
        if (hash != NULL) {
            *hash = '\0';
        }
        char *f[5];
        int nf = 0;
        for (char *tok = strtok(buf, " \t\r"); tok != NULL; tok = strtok(NULL, " \t\r")) {
            if (nf == 5) {
                break;
            }
            f[nf++] = tok;
        }
        if (nf == 0) {
            continue;
        }
        if (nf < 3 || nf > 4) {
            hv_errf(err, errlen, "%s:%zu: expected 'TIME_S TYPE EVENT [ARG]', got %d fields", path,
                    line, nf);
            goto fail;
        }
        char *end = NULL;
        errno = 0;
        double at = strtod(f[0], &end);
        if (errno != 0 || end == f[0] || *end != '\0' || !(at >= 0) || at > 1e9) {
            hv_errf(err, errlen, "%s:%zu: time '%s' is not a number of seconds >= 0", path, line,
                    f[0]);
            goto fail;
        }
        size_t t = 0;
        while (t < ntypes && strcmp(types[t].name, f[1]) != 0) {
            t++;
        }
        if (t == ntypes) {
            hv_errf(err, errlen, "%s:%zu: unknown node type '%s'", path, line, f[1]);
            goto fail;
        }
        hv_ss_trace_event_t e = {.at_ms = (uint64_t)(at * 1000.0 + 0.5), .type = t};
        if (strcmp(f[2], "preempt") == 0 || strcmp(f[2], "kill") == 0) {
            if (nf != 3) {
                hv_errf(err, errlen, "%s:%zu: '%s' takes no argument", path, line, f[2]);
                goto fail;
            }
            e.kind = f[2][0] == 'p' ? HV_SS_TRACE_PREEMPT : HV_SS_TRACE_KILL;
        } else if (strcmp(f[2], "capacity") == 0 || strcmp(f[2], "reclaim") == 0) {
            unsigned long v = 0;
            if (nf == 4) {
                errno = 0;
                v = strtoul(f[3], &end, 10);
            }
            if (nf != 4 || errno != 0 || end == f[3] || *end != '\0' ||
                !isdigit((unsigned char)f[3][0]) || v > 1000000) {
                hv_errf(err, errlen, "%s:%zu: '%s' takes a number of instances (0..1000000)", path,
                        line, f[2]);
                goto fail;
            }
            e.kind = f[2][0] == 'c' ? HV_SS_TRACE_CAPACITY : HV_SS_TRACE_RECLAIM;
            e.arg = (uint32_t)v;
        } else {
            hv_errf(err, errlen, "%s:%zu: unknown event '%s' (preempt, kill, capacity or reclaim)",
                    path, line, f[2]);
            goto fail;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            hv_ss_trace_event_t *nv = hv_realloc(ev, nc * sizeof(*ev));
            if (nv == NULL) {
                hv_errf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            ev = nv;
            cap = nc;
        }
        ev[n++] = e;
    }
    sort_events(ev, n);
    *out = ev;
    *nout = n;
    return 1;
fail:
    hv_free(ev);
    return 0;
}
