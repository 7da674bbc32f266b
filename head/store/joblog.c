/* joblog: see joblog.h. */
#include "joblog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

#define LINE_MAX_TEXT 16384 /* a line is cut here (the agent sends at most this much) */
#define LINE_PREFIX_MAX 32  /* "[4294967295]<stdout>:" and the newline */
#define NOTE_MAX 512        /* one "[hv] ..." marker line */
#define JOBLOG_WHO(l) ((l)->actor ? "actor" : "job") /* whose output a log holds, for messages */

struct hv_joblogs_s {
    char *dir;   /* owned */
    char *epoch; /* owned; "" = the legacy names <job>.log */
    hv_joblog_limits_t lim;
    hv_joblog_statfs_fn statfs;
    uint64_t total;   /* bytes of every *.log in dir, as counted */
    uint64_t fs_size; /* file system size at the last reading; 0 = unknown */
    uint64_t fs_free; /* free bytes at the last reading, less what was written since */
    int fs_known;     /* the last reading worked */
    uint64_t read_at; /* monotonic ms of the last reading; 0 = never */
    char *buf;        /* scratch for one batch (owned) */
    size_t buf_cap;
};

/* ---- the rule (pure) ------------------------------------------------------------------------ */

hv_joblog_limits_t hv_joblog_effective(const hv_joblog_limits_t *lim, uint64_t fs_size) {
    hv_joblog_limits_t e = *lim;
    if (fs_size > 0) {
        if (e.max_total_bytes > fs_size / 2) {
            e.max_total_bytes = fs_size / 2;
        }
        if (e.reserve_free_bytes > fs_size / 4) {
            e.reserve_free_bytes = fs_size / 4;
        }
    }
    return e;
}

hv_joblog_verdict_t hv_joblog_decide(const hv_joblog_limits_t *eff, uint64_t job_bytes,
                                     uint64_t total, uint64_t fs_free, uint64_t len) {
    if (job_bytes + len > eff->max_job_bytes) {
        return HV_JOBLOG_CAPPED;
    }
    if (total + len > eff->max_total_bytes) {
        return HV_JOBLOG_NOSPACE;
    }
    if (fs_free != UINT64_MAX && (fs_free < len || fs_free - len < eff->reserve_free_bytes)) {
        return HV_JOBLOG_NOSPACE;
    }
    return HV_JOBLOG_WRITE;
}

/* ---- the directory -------------------------------------------------------------------------- */

static int joblogs_statvfs(const char *dir, uint64_t *size, uint64_t *avail) {
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0) {
        return -1;
    }
    *size = (uint64_t)sv.f_blocks * sv.f_frsize;
    *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    return 0;
}

/* Sums the sizes of the *.log files in ls->dir. */
static uint64_t joblogs_scan(const hv_joblogs_t *ls) {
    uint64_t sum = 0;
    DIR *dp = opendir(ls->dir);
    if (dp == NULL) {
        return 0;
    }
    int dfd = dirfd(dp);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        struct stat sb;
        if (len > 4 && strcmp(e->d_name + len - 4, ".log") == 0 &&
            fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
            sum += (uint64_t)sb.st_size;
        }
    }
    closedir(dp);
    return sum;
}

/* Reads the file system's space again when the last reading is older than
 * HV_JOBLOG_STATFS_MS; while the logs are over their cap, counts them again too (an operator may
 * have deleted old ones). */
static void joblogs_refresh(hv_joblogs_t *ls, uint64_t now_ms) {
    if (ls->read_at != 0 && now_ms - ls->read_at < HV_JOBLOG_STATFS_MS) {
        return;
    }
    ls->read_at = now_ms != 0 ? now_ms : 1;
    uint64_t size = 0, avail = 0;
    ls->fs_known = ls->statfs(ls->dir, &size, &avail) == 0;
    ls->fs_size = ls->fs_known ? size : 0;
    ls->fs_free = ls->fs_known ? avail : UINT64_MAX;
    hv_joblog_limits_t eff = hv_joblog_effective(&ls->lim, ls->fs_size);
    if (ls->total > eff.max_total_bytes) {
        ls->total = joblogs_scan(ls);
    }
}

hv_err hv_joblogs_create(const char *dir, const char *epoch, const hv_joblog_limits_t *lim,
                         hv_joblog_statfs_fn statfs, hv_joblogs_t **out) {
    hv_joblogs_t *ls = hv_calloc(1, sizeof(*ls));
    if (ls == NULL) {
        return HV_ENOMEM;
    }
    ls->dir = hv_strdup(dir);
    ls->epoch = hv_strdup(epoch);
    if (ls->dir == NULL || ls->epoch == NULL) {
        hv_free(ls->dir);
        hv_free(ls->epoch);
        hv_free(ls);
        return HV_ENOMEM;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        HV_LOG(HV_LOG_ERROR, "joblog", "HV-LOG-DIR", "cannot create %s: %s", dir, strerror(errno));
    }
    ls->lim = *lim;
    ls->statfs = statfs != NULL ? statfs : joblogs_statvfs;
    ls->fs_free = UINT64_MAX;
    ls->total = joblogs_scan(ls);
    *out = ls;
    return HV_OK;
}

void hv_joblogs_destroy(hv_joblogs_t *ls) {
    if (ls == NULL) {
        return;
    }
    hv_free(ls->buf);
    hv_free(ls->dir);
    hv_free(ls->epoch);
    hv_free(ls);
}

uint64_t hv_joblogs_free_bytes(hv_joblogs_t *ls, uint64_t now_ms, int fresh) {
    if (fresh) {
        ls->read_at = 0;
    }
    joblogs_refresh(ls, now_ms);
    return ls->fs_free;
}

uint64_t hv_joblogs_total(const hv_joblogs_t *ls) { return ls->total; }

/* ---- one job's log -------------------------------------------------------------------------- */

void hv_joblog_path(const hv_joblogs_t *ls, uint64_t job_id, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s%s%llu.log", ls->dir, ls->epoch, ls->epoch[0] ? "-" : "",
             (unsigned long long)job_id);
}

void hv_joblog_actor_path(const hv_joblogs_t *ls, uint64_t actor_id, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s%sactor-%llu.log", ls->dir, ls->epoch, ls->epoch[0] ? "-" : "",
             (unsigned long long)actor_id);
}

/* Opens the log at path for id (a job's, or an actor's). */
static void joblog_open_path(hv_joblogs_t *ls, hv_joblog_t *l, uint64_t id, int actor,
                             const char *path) {
    memset(l, 0, sizeof(*l));
    l->job_id = id;
    l->actor = actor;
    l->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (l->fd < 0) {
        HV_LOG(HV_LOG_ERROR, "joblog", "HV-LOG-OPEN", "cannot open %s: %s: %s output is not kept",
               path, strerror(errno), JOBLOG_WHO(l));
        return;
    }
    struct stat sb;
    l->bytes = fstat(l->fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    l->capped = l->bytes >= ls->lim.max_job_bytes; /* its marker was written before a restart */
}

void hv_joblog_open(hv_joblogs_t *ls, hv_joblog_t *l, uint64_t job_id) {
    char path[4096];
    hv_joblog_path(ls, job_id, path, sizeof(path));
    joblog_open_path(ls, l, job_id, 0, path);
}

void hv_joblog_open_actor(hv_joblogs_t *ls, hv_joblog_t *l, uint64_t actor_id) {
    char path[4096];
    hv_joblog_actor_path(ls, actor_id, path, sizeof(path));
    joblog_open_path(ls, l, actor_id, 1, path);
}

void hv_joblog_close(hv_joblog_t *l) {
    if (l->fd >= 0) {
        close(l->fd);
    }
    l->fd = -1;
}

static int joblog_grow(hv_joblogs_t *ls, size_t need) {
    if (need <= ls->buf_cap) {
        return 0;
    }
    char *b = hv_malloc(need);
    if (b == NULL) {
        return -1;
    }
    hv_free(ls->buf);
    ls->buf = b;
    ls->buf_cap = need;
    return 0;
}

/* Appends one marker line "[rank]<stderr>:[hv] <text>" to the batch at buf + *used. */
static void joblog_put_note(char *buf, size_t *used, uint32_t rank, const char *text) {
    int n = snprintf(buf + *used, NOTE_MAX, "[%u]<stderr>:[hv] %s\n", rank, text);
    if (n > 0) {
        *used += (size_t)n < NOTE_MAX ? (size_t)n : NOTE_MAX - 1;
    }
}

/* Writes buf[0..len) with one write(2) (retried on EINTR and short counts). On failure the file
 * is cut back to l->bytes so it still ends with a whole line. Returns 0 when all was written. */
static int joblog_write(hv_joblogs_t *ls, hv_joblog_t *l, const char *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(l->fd, buf + done, len - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (done > 0 && ftruncate(l->fd, (off_t)l->bytes) != 0) {
                HV_LOG(HV_LOG_WARN, "joblog", "HV-LOG-CUT", "%s %llu: cannot cut its log back: %s",
                       JOBLOG_WHO(l), (unsigned long long)l->job_id, strerror(errno));
            }
            if (!l->paused) {
                HV_LOG(HV_LOG_WARN, "joblog", "HV-LOG-WRITE",
                       "%s %llu: cannot append to its log: %s; output is dropped until it can",
                       JOBLOG_WHO(l), (unsigned long long)l->job_id, strerror(e));
            }
            return -1;
        }
        done += (size_t)w;
    }
    l->bytes += len;
    ls->total += len;
    if (ls->fs_known) {
        ls->fs_free = ls->fs_free > len ? ls->fs_free - len : 0;
    }
    return 0;
}

int hv_joblog_append(hv_joblogs_t *ls, hv_joblog_t *l, uint32_t rank, uint32_t stream,
                     char *const *lines, size_t n, uint64_t now_ms) {
    size_t need = 2 * NOTE_MAX;
    for (size_t i = 0; i < n; i++) {
        need += LINE_PREFIX_MAX + strnlen(lines[i], LINE_MAX_TEXT) + 1;
    }
    if (l->fd < 0 || l->capped || joblog_grow(ls, need) != 0) {
        for (size_t i = 0; i < n; i++) {
            l->dropped += strnlen(lines[i], LINE_MAX_TEXT) + 1;
        }
        return 0;
    }
    joblogs_refresh(ls, now_ms);
    hv_joblog_limits_t eff = hv_joblog_effective(&ls->lim, ls->fs_size);
    const char *sname = stream == 2 ? "stderr" : "stdout";
    char note[NOTE_MAX];
    size_t used = 0;
    uint64_t dropped0 = l->dropped;
    int was_paused = l->paused;
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(lines[i], LINE_MAX_TEXT);
        if (l->capped) {
            l->dropped += len + 1;
            continue;
        }
        char prefix[LINE_PREFIX_MAX];
        int plen = snprintf(prefix, sizeof(prefix), "[%u]<%s>:", rank, sname);
        uint64_t add = (uint64_t)plen + len + 1;
        uint64_t fs_free = ls->fs_free == UINT64_MAX ? UINT64_MAX
                           : ls->fs_free > used      ? ls->fs_free - used
                                                     : 0;
        switch (hv_joblog_decide(&eff, l->bytes + used, ls->total + used, fs_free, add)) {
        case HV_JOBLOG_CAPPED:
            snprintf(note, sizeof(note),
                     "log truncated: %s %llu wrote more than %llu bytes; further output dropped",
                     JOBLOG_WHO(l), (unsigned long long)l->job_id,
                     (unsigned long long)eff.max_job_bytes);
            joblog_put_note(ls->buf, &used, rank, note);
            l->capped = 1;
            l->dropped += len + 1;
            HV_LOG(HV_LOG_WARN, "joblog", "HV-LOG-CAP",
                   "%s %llu: its log reached logs.max_job_bytes (%llu); further output is "
                   "dropped",
                   JOBLOG_WHO(l), (unsigned long long)l->job_id,
                   (unsigned long long)eff.max_job_bytes);
            continue;
        case HV_JOBLOG_NOSPACE:
            if (!l->paused) {
                snprintf(note, sizeof(note),
                         "log paused: the logs hold %llu bytes (cap %llu) and the data "
                         "directory's file system has %llu bytes free (kept for state: %llu); "
                         "output is dropped until there is room",
                         (unsigned long long)ls->total, (unsigned long long)eff.max_total_bytes,
                         (unsigned long long)(ls->fs_free == UINT64_MAX ? 0 : ls->fs_free),
                         (unsigned long long)eff.reserve_free_bytes);
                joblog_put_note(ls->buf, &used, rank, note);
                l->paused = 1;
                l->paused_b = l->dropped;
                HV_LOG(HV_LOG_WARN, "joblog", "HV-LOG-PAUSE", "%s %llu: %s", JOBLOG_WHO(l),
                       (unsigned long long)l->job_id, note);
            }
            l->dropped += len + 1;
            continue;
        case HV_JOBLOG_WRITE:
            break;
        }
        if (l->paused) {
            snprintf(note, sizeof(note), "log resumed: %llu bytes of output were dropped",
                     (unsigned long long)(l->dropped - l->paused_b));
            joblog_put_note(ls->buf, &used, rank, note);
            l->paused = 0;
        }
        memcpy(ls->buf + used, prefix, (size_t)plen);
        used += (size_t)plen;
        for (size_t k = 0; k < len; k++) {
            char c = lines[i][k];
            ls->buf[used++] = c == '\n' || c == '\r' ? ' ' : c;
        }
        ls->buf[used++] = '\n';
    }
    if (used == 0) {
        return 0;
    }
    if (joblog_write(ls, l, ls->buf, used) != 0) {
        /* Nothing of the batch is kept: count its output lines as dropped, and pause so that a
         * later batch says how much was lost. */
        l->dropped = dropped0;
        l->paused_b = was_paused ? l->paused_b : dropped0;
        for (size_t i = 0; i < n; i++) {
            l->dropped += strnlen(lines[i], LINE_MAX_TEXT) + 1;
        }
        l->paused = 1;
        l->capped = 0;
        return 0;
    }
    return 1;
}

int hv_joblog_note(hv_joblogs_t *ls, hv_joblog_t *l, uint32_t rank, const char *text) {
    if (l->fd < 0 || joblog_grow(ls, NOTE_MAX) != 0) {
        return 0;
    }
    size_t used = 0;
    joblog_put_note(ls->buf, &used, rank, text);
    if (ls->fs_known && ls->fs_free < used) {
        return 0;
    }
    return joblog_write(ls, l, ls->buf, used) == 0;
}

/* ---- reading ------------------------------------------------------------------------------- */

int hv_joblog_parse_line(char *line, uint32_t *rank, uint32_t *stream, char **text) {
    if (line[0] != '[') {
        return -1;
    }
    char *end;
    unsigned long r = strtoul(line + 1, &end, 10);
    if (*end != ']' || r > UINT32_MAX) {
        return -1;
    }
    if (strncmp(end, "]<stdout>:", 10) == 0) {
        *stream = 1;
    } else if (strncmp(end, "]<stderr>:", 10) == 0) {
        *stream = 2;
    } else {
        return -1;
    }
    *rank = (uint32_t)r;
    *text = end + 10;
    return 0;
}

void hv_joblog_page_free(hv_joblog_page_t *p) {
    hv_free(p->buf);
    hv_free(p->lines);
    memset(p, 0, sizeof(*p));
}

hv_err hv_joblog_read_page(const char *path, uint64_t offset, size_t max_lines, size_t max_bytes,
                           hv_joblog_page_t *out) {
    memset(out, 0, sizeof(*out));
    out->next_offset = offset;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return errno == ENOENT ? HV_OK : HV_EIO; /* nothing printed yet, or kept no longer */
    }
    size_t cap = max_bytes + LINE_MAX_TEXT + LINE_PREFIX_MAX + 2;
    out->buf = hv_malloc(cap);
    out->lines = hv_calloc(max_lines > 0 ? max_lines : 1, sizeof(*out->lines));
    if (out->buf == NULL || out->lines == NULL || fseeko(f, (off_t)offset, SEEK_SET) != 0) {
        fclose(f);
        hv_err rc = out->buf == NULL || out->lines == NULL ? HV_ENOMEM : HV_EIO;
        hv_joblog_page_free(out);
        return rc;
    }
    size_t used = 0;
    while (out->n < max_lines && used < max_bytes) {
        char *line = out->buf + used;
        if (fgets(line, (int)(cap - used), f) == NULL) {
            break;
        }
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') {
            break; /* a partial line: the writer is mid-line; it comes with the next page */
        }
        out->next_offset += len;
        line[len - 1] = '\0';
        hv_joblog_line_t *l = &out->lines[out->n];
        if (hv_joblog_parse_line(line, &l->rank, &l->stream, &l->text) == 0) {
            out->n++;
            used += len;
        }
    }
    int c = fgetc(f);
    out->more = c != EOF && (out->n == max_lines || used >= max_bytes);
    fclose(f);
    return HV_OK;
}
