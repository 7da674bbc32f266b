/*
 * log: leveled, subsystem-tagged logging with stable message ids.
 *   HV_LOG(HV_LOG_WARN, "rdzv", "HV-RDZV-TIMEOUT", "job %llu: ...", ...)
 * The level is checked before formatting. Levels follow syslog. HV_LOG_LEVEL (error, warn,
 * notice, info, debug) and HV_LOG_SUBSYS (comma list, e.g. "ring,rdzv") are read once from the
 * environment by hv_log_init(); a daemon may override the level from its config. Output goes to a
 * sink (default: stderr, one line per record). Control characters (C0 and DEL) in the formatted
 * text reach the sink escaped (\n, \r, \t, \xNN), so a logged field cannot forge a record.
 * Thread-safe: records are written whole.
 * Not for per-chunk paths: those use HV_TRACE, compiled out unless HV_ENABLE_TRACE is defined.
 */
#ifndef HV_COMMON_LOG_H
#define HV_COMMON_LOG_H

#include <stdarg.h>

typedef enum hv_log_level {
    HV_LOG_ERROR = 3,
    HV_LOG_WARN = 4,
    HV_LOG_NOTICE = 5,
    HV_LOG_INFO = 6,
    HV_LOG_DEBUG = 7,
} hv_log_level;

/* A sink receives one formatted record (no trailing newline). Borrowed pointers. */
typedef void (*hv_log_sink_fn)(hv_log_level level, const char *subsys, const char *msgid,
                               const char *text, void *ud);

/* Reads HV_LOG_LEVEL / HV_LOG_SUBSYS; sets the program name shown in records. Idempotent. */
void hv_log_init(const char *prog);
void hv_log_set_level(hv_log_level level);
hv_log_level hv_log_get_level(void);
/* Parses "error|warn|notice|info|debug"; returns 0 on success, -1 if unknown. */
int hv_log_parse_level(const char *s, hv_log_level *out);
/* Replaces the sink; NULL restores stderr. */
void hv_log_set_sink(hv_log_sink_fn fn, void *ud);
/* True when a record of this level and subsystem would be emitted. */
int hv_log_enabled(hv_log_level level, const char *subsys);

void hv_log_write(hv_log_level level, const char *subsys, const char *msgid, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define HV_LOG(level, subsys, msgid, ...)                                                          \
    do {                                                                                           \
        if (hv_log_enabled((level), (subsys))) {                                                   \
            hv_log_write((level), (subsys), (msgid), __VA_ARGS__);                                 \
        }                                                                                          \
    } while (0)

#ifdef HV_ENABLE_TRACE
#define HV_TRACE(subsys, ...) HV_LOG(HV_LOG_DEBUG, subsys, "HV-TRACE", __VA_ARGS__)
#else
#define HV_TRACE(subsys, ...)                                                                      \
    do {                                                                                           \
    } while (0)
#endif

#endif
