/* log: see log.h. State is process-global and guarded by one mutex for the sink. Every record is
 * one line: control characters in the formatted text are escaped before it reaches the sink. */
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static hv_log_level log_level = HV_LOG_NOTICE;
static char log_subsys[256]; // empty = all subsystems
static char log_prog[32] = "hv";
static hv_log_sink_fn log_sink;
static void *log_sink_ud;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

int hv_log_parse_level(const char *s, hv_log_level *out) {
    static const struct {
        const char *name;
        hv_log_level level;
    } names[] = {{"error", HV_LOG_ERROR},   {"warn", HV_LOG_WARN}, {"warning", HV_LOG_WARN},
                 {"notice", HV_LOG_NOTICE}, {"info", HV_LOG_INFO}, {"debug", HV_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return -1;
}

void hv_log_init(const char *prog) {
    if (prog != NULL) {
        snprintf(log_prog, sizeof(log_prog), "%s", prog);
    }
    const char *lv = getenv("HV_LOG_LEVEL");
    hv_log_level parsed;
    if (lv != NULL && hv_log_parse_level(lv, &parsed) == 0) {
        log_level = parsed;
    }
    const char *ss = getenv("HV_LOG_SUBSYS");
    if (ss != NULL) {
        snprintf(log_subsys, sizeof(log_subsys), "%s", ss);
    }
}

void hv_log_set_level(hv_log_level level) { log_level = level; }
hv_log_level hv_log_get_level(void) { return log_level; }

void hv_log_set_sink(hv_log_sink_fn fn, void *ud) {
    pthread_mutex_lock(&log_mu);
    log_sink = fn;
    log_sink_ud = ud;
    pthread_mutex_unlock(&log_mu);
}

int hv_log_enabled(hv_log_level level, const char *subsys) {
    if (level > log_level) {
        return 0;
    }
    if (log_subsys[0] == '\0' || level <= HV_LOG_WARN) {
        return 1; // warnings and errors are never filtered by subsystem
    }
    size_t n = strlen(subsys);
    for (const char *p = log_subsys; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, subsys, n) == 0) {
            return 1;
        }
        p += len + (end ? 1 : 0);
    }
    return 0;
}

static const char *level_name(hv_log_level l) {
    switch (l) {
    case HV_LOG_ERROR:
        return "ERROR";
    case HV_LOG_WARN:
        return "WARN";
    case HV_LOG_NOTICE:
        return "NOTICE";
    case HV_LOG_INFO:
        return "INFO";
    default:
        return "DEBUG";
    }
}

/* Copies src into dst (cap > 0) with every C0 control character and DEL written as an escape
 * (\n, \r, \t, else \xNN), so that no field a peer chose (a key, a node name, a reason) can
 * end the record early and forge a line of its own, or send a terminal escape sequence. An escape
 * that does not fit whole is left out: the record is cut short, never split. */
static void log_escape(char *dst, size_t cap, const char *src) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p != '\0'; p++) {
        char esc[5];
        size_t n;
        if (*p >= 0x20 && *p != 0x7f) {
            esc[0] = (char)*p;
            n = 1;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            n = 2;
        } else {
            snprintf(esc, sizeof(esc), "\\x%02x", *p);
            n = 4;
        }
        if (o + n >= cap) {
            break;
        }
        memcpy(dst + o, esc, n);
        o += n;
    }
    dst[o] = '\0';
}

void hv_log_write(hv_log_level level, const char *subsys, const char *msgid, const char *fmt, ...) {
    char raw[2048], text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    log_escape(text, sizeof(text), raw);
    pthread_mutex_lock(&log_mu);
    if (log_sink != NULL) {
        log_sink(level, subsys, msgid, text, log_sink_ud);
    } else {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        struct tm tm;
        gmtime_r(&tv.tv_sec, &tm);
        char ts[32];
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        fprintf(stderr, "%s.%03dZ %s[%d] %s %s %s: %s\n", ts, (int)(tv.tv_usec / 1000), log_prog,
                (int)getpid(), level_name(level), subsys, msgid, text);
    }
    pthread_mutex_unlock(&log_mu);
}
