/*
 * provider_local: see provider_local.h. Instances live in a list; a child we started is watched
 * by its uv_process_t exit callback, an adopted one by polling kill(pid, 0) on the tick. Events
 * found inside a call (an adopted pid that is gone, a booting instance terminated) are delivered
 * on the next tick, never from inside the caller's own call.
 */
#include "provider_local.h"

#include "log.h"
#include "mem.h"
#include "util.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LP_NAME 128
#define LP_PATH 1024

typedef enum lp_state_e {
    LP_BOOTING = 0, /* gated: accepted, the agent not started yet */
    LP_RUNNING,     /* the agent process exists */
    LP_GONE,        /* reported or to be reported on the next tick */
} lp_state;

typedef struct lp_inst_s {
    struct lp_inst_s *next;
    struct hv_prov_local_s *lp;
    uint64_t id;
    char name[LP_NAME];
    size_t type;
    uint32_t slots;
    int preemptible;
    char labels[1024];  /* hvagent --labels ("" none) */
    uint64_t memory_mb; /* hvagent --memory-mb (0: the machine's) */
    char head[256];
    char token_file[LP_PATH];
    lp_state st;
    int pid;
    int child;           /* 1: our child, watched by proc; 0: adopted, polled */
    uv_process_t proc;   /* valid when child */
    int terminating;     /* terminate asked */
    int preempted;       /* the gate took it (1: after a notice, 2: without) */
    uint64_t kill_at;    /* uv_now when SIGKILL is due (0: none) */
    char why[200];       /* LP_GONE: the reason to report */
    hv_prov_cause cause; /* LP_GONE: its code */
    int reported;        /* LP_GONE: the event went out */
    char handle[24];
} lp_inst_t;

typedef struct hv_prov_local_s {
    hv_provider_t base;
    hv_provider_vtbl_t vt; /* local_vtbl under the gate's name */
    uv_loop_t *loop;
    hv_prov_local_opts_t o;
    char agent[LP_PATH];
    char work_dir[LP_PATH];
    uv_timer_t tick;
    hv_prov_local_gate_t gate; /* all NULL: none */
    lp_inst_t *insts;
} hv_prov_local_t;

static lp_inst_t *lp_find(hv_prov_local_t *lp, uint64_t id) {
    for (lp_inst_t *in = lp->insts; in != NULL; in = in->next) {
        if (in->id == id && in->st != LP_GONE) {
            return in;
        }
    }
    return NULL;
}

static void lp_free_inst(hv_prov_local_t *lp, lp_inst_t *in) {
    for (lp_inst_t **pp = &lp->insts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == in) {
            *pp = in->next;
            break;
        }
    }
    hv_free(in);
}

/* A closed agent handle: the instance goes (in->lp is NULL when it is in no list). */
static void on_proc_closed(uv_handle_t *h) {
    lp_inst_t *in = h->data;
    if (in->lp != NULL) {
        lp_free_inst(in->lp, in);
    } else {
        hv_free(in);
    }
}

/* Marks the instance gone for cause, with why; the tick reports it. */
static void lp_gone(lp_inst_t *in, hv_prov_cause cause, const char *why) {
    if (in->st == LP_GONE) {
        return;
    }
    in->st = LP_GONE;
    in->cause = cause;
    snprintf(in->why, sizeof(in->why), "%s", why);
}

static void lp_signal_group(lp_inst_t *in, int sig) {
    if (in->pid > 0) {
        /* the agent leads its own process group (UV_PROCESS_DETACHED: a new session); never
         * the bare pid, which may belong to another process once the agent was reaped */
        (void)kill(-in->pid, sig);
    }
}

/* The instance is gone as a machine goes: its agent's group and every process that runs in its
 * directory (the workers, which the agent starts in sessions of their own under <dir>/jobs)
 * are killed, so no worker of a preempted instance lives on. */
static void lp_kill_instance(lp_inst_t *in) {
    lp_signal_group(in, SIGKILL);
    char rel[LP_PATH + LP_NAME + 2], dir[PATH_MAX + 2];
    snprintf(rel, sizeof(rel), "%s/%s", in->lp->work_dir, in->name);
    if (realpath(rel, dir) == NULL) { /* the cwd links hold absolute, resolved paths */
        return;
    }
    int dl = (int)strlen(dir);
    if (dl + 2 > (int)sizeof(dir)) {
        return;
    }
    dir[dl++] = '/';
    dir[dl] = '\0';
    DIR *d = opendir("/proc");
    if (d == NULL || dl <= 0 || dl >= (int)sizeof(dir)) {
        if (d != NULL) {
            closedir(d);
        }
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 1 || end == NULL || *end != '\0' || pid == (long)getpid()) {
            continue;
        }
        char link[64], cwd[PATH_MAX + 2];
        snprintf(link, sizeof(link), "/proc/%ld/cwd", pid);
        ssize_t n = readlink(link, cwd, sizeof(cwd) - 2);
        if (n <= 0) {
            continue;
        }
        cwd[n] = '/';
        cwd[n + 1] = '\0';
        if (strncmp(cwd, dir, (size_t)dl) == 0) {
            (void)kill((pid_t)pid, SIGKILL);
        }
    }
    closedir(d);
}

static void lp_on_exit(uv_process_t *p, int64_t status, int term_signal) {
    lp_inst_t *in = p->data;
    char why[200];
    hv_prov_cause cause = HV_PROV_CAUSE_LOST;
    if (in->preempted) {
        snprintf(why, sizeof(why), "preempted %s",
                 in->preempted == 1 ? "after its notice" : "without notice");
        cause = HV_PROV_CAUSE_PREEMPTED;
    } else if (in->terminating) {
        snprintf(why, sizeof(why), "terminated");
        cause = HV_PROV_CAUSE_TERMINATED;
    } else if (term_signal != 0) {
        snprintf(why, sizeof(why), "its agent was killed by signal %d", term_signal);
    } else {
        snprintf(why, sizeof(why), "its agent exited with status %" PRId64, status);
    }
    /* workers the agent left behind go with the instance */
    lp_kill_instance(in);
    in->pid = 0;
    lp_gone(in, cause, why);
}

/* Makes dir (and its parents) with mode 0700. */
static int mkdirs(const char *dir) {
    char tmp[LP_PATH];
    if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
        return -1;
    }
    return chmod(tmp, 0700);
}

/* Starts the agent of in. On failure *closing is 1 when in now belongs to a closing handle
 * (taken out of the list, freed by the close callback): the caller must drop it. */
static hv_err lp_start(hv_prov_local_t *lp, lp_inst_t *in, int *closing, char *err, size_t errlen) {
    *closing = 0;
    char dir[LP_PATH], log_path[LP_PATH + 16], slots[16], id[24];
    if (snprintf(dir, sizeof(dir), "%s/%s", lp->work_dir, in->name) >= (int)sizeof(dir)) {
        snprintf(err, errlen, "instance directory under %s: path too long", lp->work_dir);
        return HV_EINVAL;
    }
    if (mkdirs(dir) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return HV_EIO;
    }
    snprintf(log_path, sizeof(log_path), "%s/agent.log", dir);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", log_path, strerror(errno));
        return HV_EIO;
    }
    snprintf(slots, sizeof(slots), "%u", in->slots);
    snprintf(id, sizeof(id), "%" PRIu64, in->id);
    char *argv[28];
    int n = 0;
    argv[n++] = lp->agent;
    argv[n++] = "join";
    argv[n++] = in->head;
    argv[n++] = "--name";
    argv[n++] = in->name;
    argv[n++] = "--slots";
    argv[n++] = slots;
    argv[n++] = "--token-file";
    argv[n++] = in->token_file;
    argv[n++] = "--work-dir";
    argv[n++] = dir;
    argv[n++] = "--instance-id";
    argv[n++] = id;
    if (in->preemptible) {
        argv[n++] = "--preemptible";
    }
    char mem[24];
    if (in->labels[0] != '\0') {
        argv[n++] = "--labels";
        argv[n++] = in->labels;
    }
    if (in->memory_mb > 0) {
        snprintf(mem, sizeof(mem), "%" PRIu64, in->memory_mb);
        argv[n++] = "--memory-mb";
        argv[n++] = mem;
    }
    char deadline[24];
    if (lp->gate.notice_s > 0) {
        /* the gate's notice: the agent tells the head how long its node has */
        snprintf(deadline, sizeof(deadline), "%u", lp->gate.notice_s);
        argv[n++] = "--drain-deadline";
        argv[n++] = deadline;
    }
    argv[n] = NULL;
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = fd;
    uv_process_options_t po;
    memset(&po, 0, sizeof(po));
    po.file = lp->agent;
    po.args = argv;
    po.exit_cb = lp_on_exit;
    po.stdio = stdio;
    po.stdio_count = 3;
    po.flags = UV_PROCESS_DETACHED;
    in->proc.data = in;
    int rc = uv_spawn(lp->loop, &in->proc, &po);
    close(fd);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start %s: %s", lp->agent, uv_strerror(rc));
        /* uv_spawn initialized the handle even so: the instance goes when it is closed */
        for (lp_inst_t **pp = &lp->insts; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == in) {
                *pp = in->next;
                break;
            }
        }
        in->lp = NULL;
        in->st = LP_GONE;
        in->reported = 1;
        uv_close((uv_handle_t *)&in->proc, on_proc_closed);
        *closing = 1;
        return HV_EIO;
    }
    in->child = 1;
    in->pid = in->proc.pid;
    in->st = LP_RUNNING;
    snprintf(in->handle, sizeof(in->handle), "%d", in->pid);
    return HV_OK;
}

static lp_inst_t *lp_new(hv_prov_local_t *lp, const hv_prov_launch_t *l, char *err, size_t errlen) {
    if (l->name == NULL || l->name[0] == '\0' || strchr(l->name, '/') != NULL ||
        strlen(l->name) >= LP_NAME || l->head == NULL || strlen(l->head) >= 256 ||
        l->token_file == NULL || strlen(l->token_file) >= LP_PATH || l->slots == 0) {
        snprintf(err, errlen, "bad launch request for instance %" PRIu64, l->instance);
        return NULL;
    }
    if (lp_find(lp, l->instance) != NULL) {
        snprintf(err, errlen, "instance %" PRIu64 " exists already", l->instance);
        return NULL;
    }
    lp_inst_t *in = hv_calloc(1, sizeof(*in));
    if (in == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    in->lp = lp;
    in->id = l->instance;
    snprintf(in->name, sizeof(in->name), "%s", l->name);
    in->type = l->type;
    in->slots = l->slots;
    in->preemptible = l->preemptible;
    if (l->labels != NULL && strlen(l->labels) >= sizeof(in->labels)) {
        hv_free(in);
        snprintf(err, errlen, "labels of type %s: over %zu bytes", l->type_name,
                 sizeof(in->labels) - 1);
        return NULL;
    }
    snprintf(in->labels, sizeof(in->labels), "%s", l->labels != NULL ? l->labels : "");
    in->memory_mb = l->memory_mb;
    snprintf(in->head, sizeof(in->head), "%s", l->head);
    snprintf(in->token_file, sizeof(in->token_file), "%s", l->token_file);
    return in;
}

static hv_err lp_launch(hv_provider_t *p, const hv_prov_launch_t *l, char *err, size_t errlen) {
    hv_prov_local_t *lp = (hv_prov_local_t *)p;
    lp_inst_t *in = lp_new(lp, l, err, errlen);
    if (in == NULL) {
        return HV_EINVAL;
    }
    if (lp->gate.launch != NULL) {
        if (!lp->gate.launch(lp->gate.g, l, uv_now(lp->loop), err, errlen)) {
            hv_free(in);
            return HV_EUNAVAIL;
        }
        in->st = LP_BOOTING;
        in->next = lp->insts;
        lp->insts = in;
        return HV_OK;
    }
    int closing = 0;
    hv_err rc = lp_start(lp, in, &closing, err, errlen);
    if (rc != HV_OK) {
        if (!closing) {
            hv_free(in);
        }
        return rc;
    }
    in->next = lp->insts;
    lp->insts = in;
    return HV_OK;
}

static hv_err lp_terminate(hv_provider_t *p, uint64_t instance) {
    hv_prov_local_t *lp = (hv_prov_local_t *)p;
    lp_inst_t *in = lp_find(lp, instance);
    if (in == NULL) {
        return HV_ENOTFOUND;
    }
    if (lp->gate.gone != NULL) {
        lp->gate.gone(lp->gate.g, instance);
    }
    if (in->st == LP_BOOTING) {
        lp_gone(in, HV_PROV_CAUSE_TERMINATED, "terminated before it booted");
        return HV_OK;
    }
    if (!in->terminating) {
        in->terminating = 1;
        lp_signal_group(in, SIGTERM);
        in->kill_at = uv_now(lp->loop) + lp->o.stop_grace_ms;
    }
    return HV_OK;
}

/* Reads /proc/PID/WHAT into buf (NUL-terminated); returns the bytes read, or -1. */
static long read_proc(int pid, const char *what, char *buf, size_t len) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return -1;
    }
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* 1 when pid exists and is not a zombie (an exited agent whose parent has not reaped it). */
static int pid_alive(int pid) { return pid > 0 && kill(pid, 0) == 0 && hv_pid_state(pid) == 1; }

/* 1 when pid is alive and its command line names the instance. */
static int pid_is(int pid, const char *name) {
    char buf[4096];
    long got = pid_alive(pid) ? read_proc(pid, "cmdline", buf, sizeof(buf)) : -1;
    if (got < 0) {
        return 0;
    }
    size_t n = (size_t)got;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\0') {
            buf[i] = '\n';
        }
    }
    buf[n] = '\0';
    char want[LP_NAME + 16];
    snprintf(want, sizeof(want), "\n--name\n%s\n", name);
    return strstr(buf, want) != NULL;
}

static hv_err lp_adopt(hv_provider_t *p, const hv_prov_launch_t *l, const char *handle) {
    hv_prov_local_t *lp = (hv_prov_local_t *)p;
    char err[200];
    lp_inst_t *in = lp_new(lp, l, err, sizeof(err));
    if (in == NULL) {
        return HV_EINVAL;
    }
    in->next = lp->insts;
    lp->insts = in;
    char *end = NULL;
    long pid = handle ? strtol(handle, &end, 10) : 0;
    if (handle == NULL || end == handle || *end != '\0' || pid <= 0 || pid > INT32_MAX ||
        !pid_is((int)pid, l->name)) {
        lp_gone(in, HV_PROV_CAUSE_LOST, "its agent was gone when the head restarted");
        return HV_OK;
    }
    in->pid = (int)pid;
    in->st = LP_RUNNING;
    snprintf(in->handle, sizeof(in->handle), "%ld", pid);
    if (lp->gate.adopt != NULL) {
        lp->gate.adopt(lp->gate.g, l);
    }
    return HV_OK;
}

static const char *lp_handle(hv_provider_t *p, uint64_t instance) {
    lp_inst_t *in = lp_find((hv_prov_local_t *)p, instance);
    return in != NULL && in->handle[0] != '\0' ? in->handle : NULL;
}

/* ---- the tick ------------------------------------------------------------------------------- */

void hv_prov_local_note(hv_provider_t *p, const char *why) {
    p->on_event(p, HV_PROV_NOTE, 0, HV_PROV_CAUSE_NONE, why, p->ud);
}

void hv_prov_local_boot(hv_provider_t *p, uint64_t instance) {
    hv_prov_local_t *lp = (hv_prov_local_t *)p;
    lp_inst_t *in = lp_find(lp, instance);
    if (in == NULL || in->st != LP_BOOTING) {
        return;
    }
    char err[300];
    int closing = 0;
    if (lp_start(lp, in, &closing, err, sizeof(err)) != HV_OK) {
        if (lp->gate.gone != NULL) {
            lp->gate.gone(lp->gate.g, instance);
        }
        if (!closing) {
            lp_free_inst(lp, in);
        }
        p->on_event(p, HV_PROV_LAUNCH_FAILED, instance, HV_PROV_CAUSE_NONE, err, p->ud);
    }
}

void hv_prov_local_notice(hv_provider_t *p, uint64_t instance, const char *why) {
    lp_inst_t *in = lp_find((hv_prov_local_t *)p, instance);
    if (in != NULL) {
        lp_signal_group(in, SIGTERM);
        p->on_event(p, HV_PROV_NOTICE, instance, HV_PROV_CAUSE_NONE, why, p->ud);
    }
}

void hv_prov_local_preempt(hv_provider_t *p, uint64_t instance, int with_notice) {
    lp_inst_t *in = lp_find((hv_prov_local_t *)p, instance);
    if (in == NULL) {
        return;
    }
    in->preempted = with_notice ? 1 : 2;
    if (in->pid > 0) {
        lp_kill_instance(in);
        if (!in->child) { /* a child is reported by its exit callback */
            lp_gone(in, HV_PROV_CAUSE_PREEMPTED,
                    with_notice ? "preempted after its notice" : "preempted without notice");
        }
    } else {
        lp_gone(in, HV_PROV_CAUSE_PREEMPTED, "preempted");
    }
}

static void lp_on_tick(uv_timer_t *t) {
    hv_prov_local_t *lp = t->data;
    uint64_t now = uv_now(lp->loop);
    if (lp->gate.tick != NULL) {
        lp->gate.tick(lp->gate.g, &lp->base, now);
    }
    lp_inst_t *next;
    for (lp_inst_t *in = lp->insts; in != NULL; in = next) {
        next = in->next;
        if (in->st == LP_RUNNING) {
            if (in->kill_at != 0 && now >= in->kill_at) {
                lp_kill_instance(in);
                in->kill_at = 0;
            }
            if (!in->child && !pid_alive(in->pid)) {
                lp_gone(in, in->terminating ? HV_PROV_CAUSE_TERMINATED : HV_PROV_CAUSE_LOST,
                        in->terminating ? "terminated" : "its agent is gone");
            }
        }
        if (in->st == LP_GONE && !in->reported) {
            in->reported = 1;
            if (lp->gate.gone != NULL) {
                lp->gate.gone(lp->gate.g, in->id);
            }
            lp->base.on_event(&lp->base, HV_PROV_GONE, in->id, in->cause, in->why, lp->base.ud);
            if (in->child) {
                uv_close((uv_handle_t *)&in->proc, on_proc_closed);
            } else {
                lp_free_inst(lp, in);
            }
        }
    }
}

static void on_timer_closed(uv_handle_t *h) {
    hv_prov_local_t *lp = h->data;
    if (lp->gate.destroy != NULL) {
        lp->gate.destroy(lp->gate.g);
    }
    hv_free(lp);
}

static void lp_destroy(hv_provider_t *p) {
    hv_prov_local_t *lp = (hv_prov_local_t *)p;
    lp_inst_t *in = lp->insts;
    lp->insts = NULL;
    while (in != NULL) {
        lp_inst_t *next = in->next;
        in->next = NULL;
        if (in->child) {
            /* the agent keeps running; we stop watching it (a handle already closing frees
             * the instance in its callback) */
            in->lp = NULL;
            if (!uv_is_closing((uv_handle_t *)&in->proc)) {
                uv_close((uv_handle_t *)&in->proc, on_proc_closed);
            }
        } else {
            hv_free(in);
        }
        in = next;
    }
    uv_close((uv_handle_t *)&lp->tick, on_timer_closed);
}

/* A gated provider (spot-sim) is the same one under the gate's name. */
static const hv_provider_vtbl_t local_vtbl = {.name = "local",
                                              .launch = lp_launch,
                                              .terminate = lp_terminate,
                                              .adopt = lp_adopt,
                                              .handle = lp_handle,
                                              .destroy = lp_destroy};

hv_err hv_provider_local_create(uv_loop_t *loop, const hv_prov_local_opts_t *o,
                                hv_prov_event_cb on_event, void *ud, hv_provider_t **out) {
    *out = NULL;
    if (loop == NULL || o == NULL || o->agent == NULL || o->work_dir == NULL || on_event == NULL ||
        strlen(o->agent) >= LP_PATH || strlen(o->work_dir) >= LP_PATH) {
        return HV_EINVAL;
    }
    hv_prov_local_t *lp = hv_calloc(1, sizeof(*lp));
    if (lp == NULL) {
        return HV_ENOMEM;
    }
    lp->vt = local_vtbl;
    if (o->gate != NULL) {
        lp->gate = *o->gate;
        lp->vt.name = o->gate->name != NULL ? o->gate->name : "local";
    }
    lp->base.v = &lp->vt;
    lp->base.on_event = on_event;
    lp->base.ud = ud;
    lp->loop = loop;
    lp->o = *o;
    snprintf(lp->agent, sizeof(lp->agent), "%s", o->agent);
    snprintf(lp->work_dir, sizeof(lp->work_dir), "%s", o->work_dir);
    if (mkdirs(lp->work_dir) != 0) {
        HV_LOG(HV_LOG_ERROR, "autoscaler", "HV-AS-DIR", "cannot create %s: %s", lp->work_dir,
               strerror(errno));
        hv_free(lp);
        return HV_EIO;
    }
    uv_timer_init(loop, &lp->tick);
    lp->tick.data = lp;
    uint32_t every = o->tick_ms ? o->tick_ms : 100;
    uv_timer_start(&lp->tick, lp_on_tick, every, every);
    *out = &lp->base;
    return HV_OK;
}
