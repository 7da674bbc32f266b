/*
 * spawn: child processes for hvagent on a libuv loop (see spawn.h for the contract). This file
 * owns the uv_process_t, the two output pipes and one timer per child, splits output into lines,
 * and kills process groups. It does not decide what to run or where output goes: agent/workers.c
 * does that through the two callbacks.
 */
#include "spawn.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "mem.h"

#define PROC_READ_BUF (64u * 1024u) /* bytes per pipe read */

typedef enum proc_timer_mode {
    PROC_TIMER_NONE = 0, /* timer idle */
    PROC_TIMER_KILL = 1, /* SIGKILL to the group when it fires */
    PROC_TIMER_EOF = 2,  /* the leader is gone; give up on pipe EOF when it fires */
} proc_timer_mode;

/* One output pipe and the line it is assembling. */
typedef struct proc_stream_s {
    uv_pipe_t pipe;           /* read end; the child writes the other end */
    int eof;                  /* 1 once EOF (or a read error) was seen */
    hv_linesplit_t split;     /* the line being assembled */
    char rbuf[PROC_READ_BUF]; /* read buffer handed to libuv */
} proc_stream_t;

static_assert(offsetof(proc_stream_t, pipe) == 0, "proc_alloc_cb relies on the pipe coming first");

struct hv_proc_s {
    uv_loop_t *loop;         /* borrowed */
    uv_process_t proc;       /* the leader */
    proc_stream_t out[2];    /* [0] = stdout, [1] = stderr */
    uv_timer_t timer;        /* kill deadline or EOF wait, see mode */
    proc_timer_mode mode;    /* what the timer is armed for */
    uint64_t kill_at;        /* loop time (ms) of the pending SIGKILL; valid in PROC_TIMER_KILL */
    int pid;                 /* leader pid = process group id; 0 if the spawn failed */
    int exited;              /* the leader was reaped */
    int exit_code;           /* valid once exited */
    int term_signal;         /* valid once exited */
    int kill_requested;      /* hv_proc_kill was called */
    int done;                /* on_exit ran, or hv_proc_close was called */
    int handles;             /* handles initialized and not yet closed */
    hv_proc_line_cb on_line; /* see hv_proc_opts_t */
    hv_proc_exit_cb on_exit;
    void *ud;
};

static void proc_close_cb(uv_handle_t *h) {
    hv_proc_t *p = h->data;
    if (--p->handles == 0) {
        hv_free(p);
    }
}

static void proc_close_handle(hv_proc_t *p, uv_handle_t *h) {
    if (!uv_is_closing(h)) {
        uv_close(h, proc_close_cb);
    }
    (void)p;
}

/* Closes every handle; p is freed when the last close callback ran. */
static void proc_close_all(hv_proc_t *p) {
    proc_close_handle(p, (uv_handle_t *)&p->out[0].pipe);
    proc_close_handle(p, (uv_handle_t *)&p->out[1].pipe);
    proc_close_handle(p, (uv_handle_t *)&p->timer);
    proc_close_handle(p, (uv_handle_t *)&p->proc);
}

/* Signals the whole process group. ESRCH (nobody left) is not an error. */
static void proc_signal_group(hv_proc_t *p, int sig) {
    if (p->pid <= 0) {
        return;
    }
    if (kill(-p->pid, sig) != 0 && errno != ESRCH) {
        HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-KILL", "kill(-%d, %d) failed: %s", p->pid, sig,
               strerror(errno));
    }
}

/* Emits a full buffer as a piece of a long line, cutting before an incomplete UTF-8 sequence
 * when next (the byte that follows) continues it, and keeps the rest for the next piece. */
static void split_emit_piece(hv_linesplit_t *ls, unsigned char next, hv_linesplit_cb cb, void *ud) {
    size_t cut = ls->len;
    if ((next & 0xC0) == 0x80) {
        size_t i = cut;
        while (i > 0 && cut - i < 4 && ((unsigned char)ls->line[i - 1] & 0xC0) == 0x80) {
            i--;
        }
        if (i > 0 && ((unsigned char)ls->line[i - 1] & 0xC0) == 0xC0 && cut - (i - 1) < 4) {
            cut = i - 1;
        }
        if (cut == 0) {
            cut = ls->len;
        }
    }
    cb(ud, ls->line, cut);
    memmove(ls->line, ls->line + cut, ls->len - cut);
    ls->len -= cut;
}

void hv_linesplit_feed(hv_linesplit_t *ls, const char *data, size_t n, hv_linesplit_cb cb, void *ud,
                       const int *stop) {
    while (n > 0 && (stop == NULL || !*stop)) {
        if (ls->len == HV_PROC_LINE_MAX) {
            // The buffer is full: a newline right here ends the line, anything else cuts it.
            if (data[0] == '\n') {
                cb(ud, ls->line, ls->len);
                ls->len = 0;
                data++;
                n--;
            } else {
                split_emit_piece(ls, (unsigned char)data[0], cb, ud);
            }
            continue;
        }
        size_t room = HV_PROC_LINE_MAX - ls->len;
        size_t scan = n < room ? n : room;
        const char *nl = memchr(data, '\n', scan);
        if (nl != NULL) {
            size_t k = (size_t)(nl - data);
            if (ls->len == 0) {
                cb(ud, data, k);
            } else {
                memcpy(ls->line + ls->len, data, k);
                cb(ud, ls->line, ls->len + k);
            }
            ls->len = 0;
            data += k + 1;
            n -= k + 1;
            continue;
        }
        memcpy(ls->line + ls->len, data, scan);
        ls->len += scan;
        data += scan;
        n -= scan;
    }
}

void hv_linesplit_flush(hv_linesplit_t *ls, hv_linesplit_cb cb, void *ud) {
    if (ls->len > 0) {
        cb(ud, ls->line, ls->len);
    }
    ls->len = 0;
}

/* The splitter's callback for stream s of p. */
typedef struct proc_emit_ctx_s {
    hv_proc_t *p;
    int s;
} proc_emit_ctx_t;

static void proc_emit(void *ud, const char *line, size_t len) {
    proc_emit_ctx_t *x = ud;
    x->p->on_line(x->p, x->s + 1, line, len, x->p->ud);
}

/* Feeds n bytes of output of stream s into the line splitter. */
static void proc_feed(hv_proc_t *p, int s, const char *data, size_t n) {
    proc_emit_ctx_t x = {p, s};
    hv_linesplit_feed(&p->out[s].split, data, n, proc_emit, &x, &p->done);
}

/* Delivers the unterminated last line of stream s, if any. */
static void proc_flush(hv_proc_t *p, int s) {
    proc_emit_ctx_t x = {p, s};
    if (p->done) {
        p->out[s].split.len = 0;
        return;
    }
    hv_linesplit_flush(&p->out[s].split, proc_emit, &x);
}

/* The leader is reaped and the pipes are done (or given up on): report once and close. */
static void proc_finish(hv_proc_t *p) {
    if (p->done) {
        return;
    }
    for (int s = 0; s < 2; s++) {
        if (!uv_is_closing((uv_handle_t *)&p->out[s].pipe)) {
            uv_read_stop((uv_stream_t *)&p->out[s].pipe);
        }
        proc_flush(p, s);
    }
    uv_timer_stop(&p->timer);
    p->done = 1;
    p->on_exit(p, p->exit_code, p->term_signal, p->ud);
    proc_close_all(p);
}

static void proc_maybe_finish(hv_proc_t *p) {
    if (p->exited && p->out[0].eof && p->out[1].eof) {
        proc_finish(p);
    }
}

static void proc_timer_cb(uv_timer_t *t) {
    hv_proc_t *p = t->data;
    proc_timer_mode mode = p->mode;
    p->mode = PROC_TIMER_NONE;
    if (mode == PROC_TIMER_KILL && !p->exited) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-SIGKILL",
               "process group %d still alive after the grace period: SIGKILL", p->pid);
        proc_signal_group(p, SIGKILL);
    } else if (mode == PROC_TIMER_EOF) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-EOF-WAIT",
               "process %d exited but its output pipes stay open: closing them", p->pid);
        p->out[0].eof = 1;
        p->out[1].eof = 1;
        proc_finish(p);
    }
}

static void proc_exit_cb(uv_process_t *h, int64_t exit_status, int term_signal) {
    hv_proc_t *p = h->data;
    p->exited = 1;
    p->term_signal = term_signal;
    p->exit_code = term_signal != 0 ? -1 : (int)exit_status;
    // The leader is gone: whatever is left of its group is a straggler of a finished worker.
    proc_signal_group(p, SIGKILL);
    if (p->out[0].eof && p->out[1].eof) {
        proc_finish(p);
        return;
    }
    p->mode = PROC_TIMER_EOF;
    uv_timer_start(&p->timer, proc_timer_cb, HV_PROC_EOF_WAIT_MS, 0);
}

static void proc_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    // The pipe is the first member of proc_stream_t, so the handle address is the stream's.
    proc_stream_t *st = (proc_stream_t *)(void *)h;
    (void)suggested;
    *buf = uv_buf_init(st->rbuf, sizeof(st->rbuf));
}

static void proc_read_cb(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
    hv_proc_t *p = h->data;
    int s = (uv_pipe_t *)h == &p->out[0].pipe ? 0 : 1;
    if (nread > 0) {
        proc_feed(p, s, buf->base, (size_t)nread);
        return;
    }
    if (nread == 0) {
        return; // EAGAIN
    }
    if (nread != UV_EOF) {
        HV_LOG(HV_LOG_INFO, "agent", "HV-AGENT-PIPE", "process %d: %s read error: %s", p->pid,
               s == 0 ? "stdout" : "stderr", uv_strerror((int)nread));
    }
    uv_read_stop(h);
    proc_flush(p, s);
    p->out[s].eof = 1;
    proc_maybe_finish(p);
}

static hv_err proc_err_from_uv(int uvrc) {
    switch (uvrc) {
    case UV_ENOENT:
    case UV_ENOTDIR:
        return HV_ENOTFOUND;
    case UV_EACCES:
    case UV_EPERM:
        return HV_EPERM;
    case UV_ENOMEM:
        return HV_ENOMEM;
    default:
        return HV_EIO;
    }
}

hv_err hv_proc_spawn(uv_loop_t *loop, const hv_proc_opts_t *o, hv_proc_t **out, char *errbuf,
                     size_t errlen) {
    if (errbuf != NULL && errlen > 0) {
        errbuf[0] = '\0';
    }
    if (loop == NULL || o == NULL || o->file == NULL || o->argv == NULL || o->on_line == NULL ||
        o->on_exit == NULL || out == NULL) {
        if (errbuf != NULL && errlen > 0) {
            snprintf(errbuf, errlen, "invalid spawn options");
        }
        return HV_EINVAL;
    }
    hv_proc_t *p = hv_calloc(1, sizeof(*p));
    if (p == NULL) {
        if (errbuf != NULL && errlen > 0) {
            snprintf(errbuf, errlen, "%s", strerror(ENOMEM));
        }
        return HV_ENOMEM;
    }
    p->loop = loop;
    p->on_line = o->on_line;
    p->on_exit = o->on_exit;
    p->ud = o->ud;

    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->handles++;
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE; // libuv puts /dev/null on fds 0-2 it is told to ignore
    for (int s = 0; s < 2; s++) {
        uv_pipe_init(loop, &p->out[s].pipe, 0);
        p->out[s].pipe.data = p;
        p->handles++;
        stdio[s + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        stdio[s + 1].data.stream = (uv_stream_t *)&p->out[s].pipe;
    }

    uv_process_options_t po;
    memset(&po, 0, sizeof(po));
    po.exit_cb = proc_exit_cb;
    po.file = o->file;
    po.args = (char **)o->argv;
    po.env = (char **)o->env;
    po.cwd = o->cwd;
    po.flags = UV_PROCESS_DETACHED;
    if (o->set_user) {
        /* libuv's child drops the supplementary groups, then setgid, then setuid, before exec. */
        po.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
        po.uid = (uv_uid_t)o->uid;
        po.gid = (uv_gid_t)o->gid;
    }
    po.stdio_count = 3;
    po.stdio = stdio;
    p->proc.data = p;
    int uvrc = uv_spawn(loop, &p->proc, &po);
    // uv_spawn initializes the handle even when it fails; it must be closed either way.
    p->handles++;
    if (uvrc != 0) {
        if (errbuf != NULL && errlen > 0) {
            snprintf(errbuf, errlen, "%s", strerror(-uvrc));
        }
        p->done = 1;
        proc_close_all(p);
        return proc_err_from_uv(uvrc);
    }
    p->pid = p->proc.pid;
    for (int s = 0; s < 2; s++) {
        int rc = uv_read_start((uv_stream_t *)&p->out[s].pipe, proc_alloc_cb, proc_read_cb);
        if (rc != 0) {
            HV_LOG(HV_LOG_WARN, "agent", "HV-AGENT-PIPE", "process %d: cannot read %s: %s", p->pid,
                   s == 0 ? "stdout" : "stderr", uv_strerror(rc));
            p->out[s].eof = 1;
        }
    }
    *out = p;
    return HV_OK;
}

int hv_proc_pid(const hv_proc_t *p) { return p->pid; }

int hv_proc_exited(const hv_proc_t *p) { return p->exited; }

void hv_proc_kill(hv_proc_t *p, uint32_t grace_ms) {
    if (p == NULL || p->done || p->exited) {
        // After the leader's exit the group already got SIGKILL.
        return;
    }
    uint64_t now = uv_now(p->loop);
    if (grace_ms == 0) {
        p->kill_requested = 1;
        proc_signal_group(p, SIGKILL);
        return;
    }
    if (!p->kill_requested) {
        p->kill_requested = 1;
        proc_signal_group(p, SIGTERM);
    }
    uint64_t at = now + grace_ms;
    if (p->mode == PROC_TIMER_KILL && p->kill_at <= at) {
        return;
    }
    p->mode = PROC_TIMER_KILL;
    p->kill_at = at;
    uv_timer_start(&p->timer, proc_timer_cb, grace_ms, 0);
}

void hv_proc_close(hv_proc_t *p, int kill_group) {
    if (p == NULL || p->done) {
        return;
    }
    if (kill_group && !p->exited) {
        proc_signal_group(p, SIGKILL);
    }
    p->done = 1;
    uv_timer_stop(&p->timer);
    proc_close_all(p);
}
