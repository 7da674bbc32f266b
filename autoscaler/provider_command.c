/*
 * provider_command: see provider_command.h. Each command runs as `/bin/sh -c EXPANDED` in its own
 * process group with stdout and stderr in memory files (so a grandchild that keeps them open does
 * not hold the command up), under a timer that kills the group at the timeout. When it exits the
 * files are read (64 KiB at most) and the command's completion handler decides.
 */
#include "provider_command.h"

#include "cmdtmpl.h"
#include "mem.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PC_OUT_MAX (64u * 1024u)
#define PC_CMD_MAX 8192
#define PC_NAME 128
#define PC_STR 512

typedef struct pc_inst_s {
    struct pc_inst_s *next;
    uint64_t id;
    char name[PC_NAME];
    char type_name[PC_NAME];
    char head[PC_STR];
    char token_file[PC_STR];
    char handle[PC_STR];
    uint32_t slots, gpus;
    int preemptible;
    uint64_t seen_ms; /* launched, adopted or last listed (uv_now) */
    int launching;    /* the launch command runs */
    int term_wanted;  /* terminate asked */
    int term_running; /* the terminate command runs */
} pc_inst_t;

typedef enum pc_kind_e { PC_LAUNCH = 0, PC_TERMINATE, PC_LIST } pc_kind;

typedef struct pc_run_s {
    struct hv_prov_command_s *pc;
    pc_kind kind;
    uint64_t instance; /* PC_LAUNCH, PC_TERMINATE */
    uv_process_t proc;
    uv_timer_t timer;
    int out_fd, err_fd;
    int open_handles;
    int started; /* uv_spawn succeeded: a completion is due */
    int exited, timed_out;
    int64_t status;
    int term_signal;
} pc_run_t;

typedef struct hv_prov_command_s {
    hv_provider_t base;
    uv_loop_t *loop;
    char *launch_t, *terminate_t, *list_t;
    uint32_t timeout_ms, list_every_ms, list_grace_ms;
    uv_timer_t tick;
    pc_inst_t *insts;
    int list_running;
    int list_failed; /* a NOTE went out for the current run of failures */
    int destroyed;
    int runs; /* commands in flight */
} hv_prov_command_t;

static void emit(hv_prov_command_t *pc, hv_prov_event ev, uint64_t id, hv_prov_cause cause,
                 const char *why) {
    if (!pc->destroyed) {
        pc->base.on_event(&pc->base, ev, id, cause, why, pc->base.ud);
    }
}

/* ---- templates ------------------------------------------------------------------------------ */

hv_err hv_prov_command_expand(const char *tmpl, const char *const *keys, const char *const *vals,
                              size_t n, char *out, size_t outlen, char *err, size_t errlen) {
    return hv_cmd_expand(tmpl, keys, vals, n,
                         "{name} {instance} {type} {slots} {gpus} {head} {token_file} {handle} "
                         "{preemptible}",
                         out, outlen, err, errlen);
}

static hv_err expand_for(const char *tmpl, const pc_inst_t *in, char *out, size_t outlen, char *err,
                         size_t errlen) {
    char id[24], slots[16], gpus[16];
    snprintf(id, sizeof(id), "%" PRIu64, in ? in->id : 0);
    snprintf(slots, sizeof(slots), "%u", in ? in->slots : 0);
    snprintf(gpus, sizeof(gpus), "%u", in ? in->gpus : 0);
    const char *keys[] = {"name", "instance",   "type",   "slots",      "gpus",
                          "head", "token_file", "handle", "preemptible"};
    const char *vals[] = {in ? in->name : "",
                          id,
                          in ? in->type_name : "",
                          slots,
                          gpus,
                          in ? in->head : "",
                          in ? in->token_file : "",
                          in ? in->handle : "",
                          in && in->preemptible ? "1" : "0"};
    return hv_prov_command_expand(tmpl, keys, vals, sizeof(keys) / sizeof(keys[0]), out, outlen,
                                  err, errlen);
}

/* ---- instances ------------------------------------------------------------------------------ */

static pc_inst_t *pc_find(hv_prov_command_t *pc, uint64_t id) {
    for (pc_inst_t *in = pc->insts; in != NULL; in = in->next) {
        if (in->id == id) {
            return in;
        }
    }
    return NULL;
}

static void pc_remove(hv_prov_command_t *pc, pc_inst_t *in) {
    for (pc_inst_t **pp = &pc->insts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == in) {
            *pp = in->next;
            hv_free(in);
            return;
        }
    }
}

/* ---- running a command ---------------------------------------------------------------------- */

/* Reads up to PC_OUT_MAX bytes of fd from its start into buf (NUL-terminated). */
static size_t read_all(int fd, char *buf, size_t len) {
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = pread(fd, buf + n, len - 1 - n, (off_t)n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) {
                continue;
            }
            break;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

/* The last non-empty line of s (in place), or "". */
static const char *last_line(char *s) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) {
        s[--n] = '\0';
    }
    char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

static void run_finish(pc_run_t *r, char *out, char *errs);

static void run_free(pc_run_t *r) {
    if (r->out_fd >= 0) {
        close(r->out_fd);
    }
    if (r->err_fd >= 0) {
        close(r->err_fd);
    }
    r->pc->runs--;
    hv_free(r);
}

static void on_run_closed(uv_handle_t *h) {
    pc_run_t *r = h->data;
    if (--r->open_handles > 0) {
        return;
    }
    hv_prov_command_t *pc = r->pc;
    if (!pc->destroyed) {
        char *out = hv_malloc(PC_OUT_MAX), *errs = hv_malloc(PC_OUT_MAX);
        if (out != NULL && errs != NULL) {
            read_all(r->out_fd, out, PC_OUT_MAX);
            read_all(r->err_fd, errs, PC_OUT_MAX);
            run_finish(r, out, errs);
        }
        hv_free(out);
        hv_free(errs);
    }
    int last = pc->destroyed && pc->runs == 1 && pc->tick.data == NULL;
    run_free(r);
    if (last) {
        hv_free(pc->launch_t);
        hv_free(pc->terminate_t);
        hv_free(pc->list_t);
        hv_free(pc);
    }
}

static void on_run_exit(uv_process_t *p, int64_t status, int term_signal) {
    pc_run_t *r = p->data;
    r->exited = 1;
    r->status = status;
    r->term_signal = term_signal;
    (void)kill(-p->pid, SIGKILL); /* whatever it left in its group goes with it */
    uv_close((uv_handle_t *)&r->proc, on_run_closed);
    uv_close((uv_handle_t *)&r->timer, on_run_closed);
}

static void on_run_timeout(uv_timer_t *t) {
    pc_run_t *r = t->data;
    r->timed_out = 1;
    (void)kill(-r->proc.pid, SIGKILL); /* the exit callback follows */
}

/* Starts cmd. Returns HV_OK, or an error with err filled (nothing is running then). */
static hv_err run_start(hv_prov_command_t *pc, pc_kind kind, uint64_t instance, const char *cmd,
                        char *err, size_t errlen) {
    pc_run_t *r = hv_calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return HV_ENOMEM;
    }
    r->pc = pc;
    r->kind = kind;
    r->instance = instance;
    r->out_fd = memfd_create("hv-cmd-out", MFD_CLOEXEC);
    r->err_fd = memfd_create("hv-cmd-err", MFD_CLOEXEC);
    pc->runs++;
    if (r->out_fd < 0 || r->err_fd < 0) {
        snprintf(err, errlen, "cannot make output files: %s", strerror(errno));
        run_free(r);
        return HV_EIO;
    }
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = r->out_fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = r->err_fd;
    uv_process_options_t po;
    memset(&po, 0, sizeof(po));
    po.file = "/bin/sh";
    po.args = argv;
    po.exit_cb = on_run_exit;
    po.stdio = stdio;
    po.stdio_count = 3;
    po.flags = UV_PROCESS_DETACHED;
    r->proc.data = r;
    int rc = uv_spawn(pc->loop, &r->proc, &po);
    if (rc != 0) {
        snprintf(err, errlen, "cannot run /bin/sh: %s", uv_strerror(rc));
        r->open_handles = 1; /* uv_spawn initialized the handle even so; no completion */
        uv_close((uv_handle_t *)&r->proc, on_run_closed);
        return HV_EIO;
    }
    uv_timer_init(pc->loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_run_timeout, pc->timeout_ms, 0);
    r->open_handles = 2;
    r->started = 1;
    return HV_OK;
}

/* "exited with status 3: no capacity" / "was killed by signal 9" / "timed out after 120 s". */
static void describe(const pc_run_t *r, char *errs, char *buf, size_t len) {
    const char *line = last_line(errs);
    if (r->timed_out) {
        snprintf(buf, len, "timed out after %g s", r->pc->timeout_ms / 1000.0);
    } else if (r->term_signal != 0) {
        snprintf(buf, len, "was killed by signal %d%s%s", r->term_signal, line[0] ? ": " : "",
                 line);
    } else {
        snprintf(buf, len, "exited with status %" PRId64 "%s%s", r->status, line[0] ? ": " : "",
                 line);
    }
}

static void start_terminate(hv_prov_command_t *pc, pc_inst_t *in);

static void run_finish(pc_run_t *r, char *out, char *errs) {
    hv_prov_command_t *pc = r->pc;
    char why[600];
    if (!r->started) {
        return;
    }
    int ok = r->exited && !r->timed_out && r->term_signal == 0 && r->status == 0;
    if (r->kind == PC_LIST) {
        pc->list_running = 0;
        if (!ok) {
            if (!pc->list_failed) {
                pc->list_failed = 1;
                char d[400];
                describe(r, errs, d, sizeof(d));
                snprintf(why, sizeof(why), "the list command %s", d);
                emit(pc, HV_PROV_NOTE, 0, HV_PROV_CAUSE_NONE, why);
            }
            return;
        }
        pc->list_failed = 0;
        uint64_t now = uv_now(pc->loop);
        pc_inst_t *next;
        for (pc_inst_t *in = pc->insts; in != NULL; in = next) {
            next = in->next;
            if (in->launching || in->term_running) {
                continue;
            }
            int listed = 0;
            for (char *line = out; line != NULL && *line != '\0' && !listed;) {
                char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ')) {
                    len--;
                }
                listed = (len == strlen(in->name) && strncmp(line, in->name, len) == 0) ||
                         (in->handle[0] != '\0' && len == strlen(in->handle) &&
                          strncmp(line, in->handle, len) == 0);
                line = nl ? nl + 1 : NULL;
            }
            if (listed) {
                in->seen_ms = now;
            } else if (now - in->seen_ms >= pc->list_grace_ms) {
                uint64_t id = in->id;
                pc_remove(pc, in);
                emit(pc, HV_PROV_GONE, id, HV_PROV_CAUSE_LOST, "no longer listed by the provider");
            }
        }
        return;
    }
    pc_inst_t *in = pc_find(pc, r->instance);
    if (in == NULL) {
        return;
    }
    char d[400];
    describe(r, errs, d, sizeof(d));
    if (r->kind == PC_LAUNCH) {
        in->launching = 0;
        in->seen_ms = uv_now(pc->loop);
        if (!ok) {
            snprintf(why, sizeof(why), "the launch command %s", d);
            if (r->timed_out) {
                /* it may have created the instance: give it back, best effort */
                in->term_wanted = 1;
                emit(pc, HV_PROV_LAUNCH_FAILED, in->id, HV_PROV_CAUSE_NONE, why);
                start_terminate(pc, in);
                return;
            }
            uint64_t id = in->id;
            pc_remove(pc, in);
            emit(pc, HV_PROV_LAUNCH_FAILED, id, HV_PROV_CAUSE_NONE, why);
            return;
        }
        char *first = out;
        first[strcspn(first, "\r\n")] = '\0';
        while (*first == ' ' || *first == '\t') {
            first++;
        }
        snprintf(in->handle, sizeof(in->handle), "%s", first[0] ? first : in->name);
        if (in->term_wanted) {
            start_terminate(pc, in);
        }
        return;
    }
    /* PC_TERMINATE */
    in->term_running = 0;
    if (ok) {
        uint64_t id = in->id;
        pc_remove(pc, in);
        emit(pc, HV_PROV_GONE, id, HV_PROV_CAUSE_TERMINATED, "terminated");
        return;
    }
    snprintf(why, sizeof(why), "the terminate command for %s %s; it is tried again", in->name, d);
    emit(pc, HV_PROV_NOTE, in->id, HV_PROV_CAUSE_NONE, why);
}

static void start_terminate(hv_prov_command_t *pc, pc_inst_t *in) {
    if (in->term_running || in->launching) {
        return;
    }
    char cmd[PC_CMD_MAX], err[300];
    if (expand_for(pc->terminate_t, in, cmd, sizeof(cmd), err, sizeof(err)) != HV_OK ||
        run_start(pc, PC_TERMINATE, in->id, cmd, err, sizeof(err)) != HV_OK) {
        char why[512];
        snprintf(why, sizeof(why), "cannot run the terminate command for %s: %.200s", in->name,
                 err);
        emit(pc, HV_PROV_NOTE, in->id, HV_PROV_CAUSE_NONE, why);
        return;
    }
    in->term_running = 1;
}

/* ---- the interface -------------------------------------------------------------------------- */

static pc_inst_t *pc_new(hv_prov_command_t *pc, const hv_prov_launch_t *l, char *err,
                         size_t errlen) {
    if (l->name == NULL || l->name[0] == '\0' || strlen(l->name) >= PC_NAME ||
        (l->type_name && strlen(l->type_name) >= PC_NAME) || l->head == NULL ||
        strlen(l->head) >= PC_STR || l->token_file == NULL || strlen(l->token_file) >= PC_STR) {
        snprintf(err, errlen, "bad launch request for instance %" PRIu64, l->instance);
        return NULL;
    }
    if (pc_find(pc, l->instance) != NULL) {
        snprintf(err, errlen, "instance %" PRIu64 " exists already", l->instance);
        return NULL;
    }
    pc_inst_t *in = hv_calloc(1, sizeof(*in));
    if (in == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    in->id = l->instance;
    snprintf(in->name, sizeof(in->name), "%s", l->name);
    snprintf(in->type_name, sizeof(in->type_name), "%s", l->type_name ? l->type_name : "");
    snprintf(in->head, sizeof(in->head), "%s", l->head);
    snprintf(in->token_file, sizeof(in->token_file), "%s", l->token_file);
    in->slots = l->slots;
    in->gpus = l->gpus;
    in->preemptible = l->preemptible;
    in->seen_ms = uv_now(pc->loop);
    return in;
}

static hv_err pc_launch(hv_provider_t *p, const hv_prov_launch_t *l, char *err, size_t errlen) {
    hv_prov_command_t *pc = (hv_prov_command_t *)p;
    pc_inst_t *in = pc_new(pc, l, err, errlen);
    if (in == NULL) {
        return HV_EINVAL;
    }
    char cmd[PC_CMD_MAX];
    hv_err rc = expand_for(pc->launch_t, in, cmd, sizeof(cmd), err, errlen);
    if (rc == HV_OK) {
        rc = run_start(pc, PC_LAUNCH, in->id, cmd, err, errlen);
    }
    if (rc != HV_OK) {
        hv_free(in);
        return rc;
    }
    in->launching = 1;
    in->next = pc->insts;
    pc->insts = in;
    return HV_OK;
}

static hv_err pc_terminate(hv_provider_t *p, uint64_t instance) {
    hv_prov_command_t *pc = (hv_prov_command_t *)p;
    pc_inst_t *in = pc_find(pc, instance);
    if (in == NULL) {
        return HV_ENOTFOUND;
    }
    in->term_wanted = 1;
    start_terminate(pc, in); /* after the launch command, if it still runs */
    return HV_OK;
}

static hv_err pc_adopt(hv_provider_t *p, const hv_prov_launch_t *l, const char *handle) {
    hv_prov_command_t *pc = (hv_prov_command_t *)p;
    char err[200];
    pc_inst_t *in = pc_new(pc, l, err, sizeof(err));
    if (in == NULL) {
        return HV_EINVAL;
    }
    snprintf(in->handle, sizeof(in->handle), "%s", handle && handle[0] ? handle : l->name);
    in->next = pc->insts;
    pc->insts = in;
    return HV_OK;
}

static const char *pc_handle(hv_provider_t *p, uint64_t instance) {
    pc_inst_t *in = pc_find((hv_prov_command_t *)p, instance);
    return in != NULL && in->handle[0] != '\0' ? in->handle : NULL;
}

static void on_tick(uv_timer_t *t) {
    hv_prov_command_t *pc = t->data;
    for (pc_inst_t *in = pc->insts; in != NULL; in = in->next) {
        if (in->term_wanted && !in->term_running && !in->launching) {
            start_terminate(pc, in); /* a retry */
        }
    }
    if (pc->list_t != NULL && !pc->list_running) {
        char cmd[PC_CMD_MAX], err[300];
        if (expand_for(pc->list_t, NULL, cmd, sizeof(cmd), err, sizeof(err)) == HV_OK &&
            run_start(pc, PC_LIST, 0, cmd, err, sizeof(err)) == HV_OK) {
            pc->list_running = 1;
        }
    }
}

static void on_tick_closed(uv_handle_t *h) {
    hv_prov_command_t *pc = h->data;
    pc->tick.data = NULL;
    if (pc->runs == 0) {
        hv_free(pc->launch_t);
        hv_free(pc->terminate_t);
        hv_free(pc->list_t);
        hv_free(pc);
    }
}

static void pc_destroy(hv_provider_t *p) {
    hv_prov_command_t *pc = (hv_prov_command_t *)p;
    pc->destroyed = 1;
    while (pc->insts != NULL) {
        pc_inst_t *in = pc->insts;
        pc->insts = in->next;
        hv_free(in);
    }
    /* commands in flight finish on their own (bounded by their timers); the last frees pc */
    uv_close((uv_handle_t *)&pc->tick, on_tick_closed);
}

static const hv_provider_vtbl_t command_vtbl = {
    .name = "command",
    .launch = pc_launch,
    .terminate = pc_terminate,
    .adopt = pc_adopt,
    .handle = pc_handle,
    .destroy = pc_destroy,
};

hv_err hv_provider_command_create(uv_loop_t *loop, const hv_prov_command_opts_t *o,
                                  hv_prov_event_cb on_event, void *ud, hv_provider_t **out) {
    *out = NULL;
    if (loop == NULL || o == NULL || o->launch == NULL || o->terminate == NULL ||
        on_event == NULL) {
        return HV_EINVAL;
    }
    hv_prov_command_t *pc = hv_calloc(1, sizeof(*pc));
    if (pc == NULL) {
        return HV_ENOMEM;
    }
    pc->base.v = &command_vtbl;
    pc->base.on_event = on_event;
    pc->base.ud = ud;
    pc->loop = loop;
    pc->launch_t = hv_strdup(o->launch);
    pc->terminate_t = hv_strdup(o->terminate);
    pc->list_t = o->list ? hv_strdup(o->list) : NULL;
    if (pc->launch_t == NULL || pc->terminate_t == NULL || (o->list && pc->list_t == NULL)) {
        hv_free(pc->launch_t);
        hv_free(pc->terminate_t);
        hv_free(pc->list_t);
        hv_free(pc);
        return HV_ENOMEM;
    }
    pc->timeout_ms = o->timeout_ms ? o->timeout_ms : 120000;
    pc->list_every_ms = o->list_every_ms ? o->list_every_ms : 10000;
    pc->list_grace_ms = o->list_grace_ms ? o->list_grace_ms : 60000;
    uv_timer_init(loop, &pc->tick);
    pc->tick.data = pc;
    uv_timer_start(&pc->tick, on_tick, pc->list_every_ms, pc->list_every_ms);
    *out = &pc->base;
    return HV_OK;
}
