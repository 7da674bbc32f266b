/*
 * config: loads and validates hvhead's YAML configuration (see config.h). The only module that
 * includes yaml.h. The file is read whole, composed into a libyaml document (so anchors and
 * aliases work and every node carries its line and column), and walked against one table of
 * known keys (config_opts) that gives each key its section, type, field and range. Errors stop
 * at the first problem and name it as FILE:LINE:COL with key and value. Cross-field rules run
 * after the walk. The join-token helpers at the end do the only other I/O. Not a settings
 * store: nothing is reloaded or written back, except a generated token file.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "copies.h"
#include "err.h"
#include "fleet.h"
#include "log.h"
#include "mem.h"
#include "rpc.h"

#define CONFIG_MAX_FILE (1024 * 1024) // a config file larger than this is a mistake
#define CONFIG_MAX_TOKEN 4096         // bytes read from a token file
#define CONFIG_TOKEN_BYTES 16         // random bytes in a generated token (32 hex digits)
#define CONFIG_VALUE_SHOW 64          // bytes of a value quoted in an error message

/* What a key holds; decides how its scalar is parsed and checked. */
typedef enum config_type {
    CFG_MAP,        // a section: a mapping of further keys
    CFG_NAME,       // required name: letters, digits, '.', '_', '-'; 1..63 bytes
    CFG_STR,        // required non-empty string
    CFG_STR_OPT,    // string; empty or null = unset (NULL)
    CFG_TOKEN,      // optional secret: no whitespace; never echoed in messages
    CFG_LISTEN,     // required HOST:PORT, port 0..65535 (0 = pick one, for tests)
    CFG_ADDR_OPT,   // optional HOST:PORT, port 1..65535
    CFG_U32,        // decimal integer in [min, max]
    CFG_SIZE,       // byte size with optional unit, in [min, max]
    CFG_LOGLEVEL,   // error|warn|notice|info|debug
    CFG_PROVIDER,   // none|local|command|spot-sim
    CFG_NUM,        // decimal number in [min/1000, max/1000] (a double)
    CFG_NODE_TYPES, // autoscaler.node_types: NAME -> mapping of node-type keys
    CFG_NAME_LIST,  // a sequence of names (autoscaler.fallback), checked after the walk
    CFG_BOOL,       // true|false (also yes|no|on|off), into an int
    CFG_NAMESPACES, // fleet.namespaces: a list of {name, weight, quota, borrow, priority}
    CFG_POLICY,     // fleet|fcfs, into an int (1: fcfs)
} config_type;

/* One known key. */
typedef struct config_opt_s {
    const char *section; // "" at the top level, else the dotted path of the enclosing mapping
    const char *name;    // the key inside its section
    config_type type;
    size_t off;        // field offset in hv_head_config_t (unused for CFG_MAP)
    uint64_t min, max; // range for CFG_U32 and CFG_SIZE
} config_opt_t;

#define CFG_OFF(f) offsetof(hv_head_config_t, f)

/* Every key hvhead understands. docs/configuration.md documents the same table. */
static const config_opt_t config_opts[] = {
    {"", "cluster_name", CFG_NAME, CFG_OFF(cluster_name), 0, 0},
    {"", "listen", CFG_LISTEN, CFG_OFF(listen), 0, 0},
    {"", "advertise", CFG_ADDR_OPT, CFG_OFF(advertise), 0, 0},
    {"", "data_dir", CFG_STR, CFG_OFF(data_dir), 0, 0},
    {"", "token", CFG_TOKEN, CFG_OFF(token), 0, 0},
    {"", "token_file", CFG_STR_OPT, CFG_OFF(token_file), 0, 0},
    {"", "heartbeat_ms", CFG_U32, CFG_OFF(heartbeat_ms), 50, 60000},
    {"", "lease_ms", CFG_U32, CFG_OFF(lease_ms), 1, 3600000}, // min: 3 x heartbeat_ms
    {"", "suspect_grace_ms", CFG_U32, CFG_OFF(suspect_grace_ms), 0, 3600000},
    {"", "log_level", CFG_LOGLEVEL, CFG_OFF(log_level), 0, 0},
    {"", "max_upload", CFG_SIZE, CFG_OFF(max_upload_bytes), 1024, 64ull << 30},
    {"", "actor_state_max", CFG_SIZE, CFG_OFF(actor_state_max), 1024, 64ull << 30},
    {"", "upload_quota", CFG_SIZE, CFG_OFF(upload_quota_bytes), 1024, 1ull << 40},
    {"", "upload_timeout_s", CFG_U32, CFG_OFF(upload_timeout_s), 1, 604800},
    {"", "kill_grace_ms", CFG_U32, CFG_OFF(kill_grace_ms), 0, 600000},
    {"", "job_wait_timeout_s", CFG_U32, CFG_OFF(job_wait_timeout_s), 1, 604800},
    {"", "logs", CFG_MAP, 0, 0, 0},
    {"logs", "max_job_bytes", CFG_SIZE, CFG_OFF(logs.max_job_bytes), 1024, 1ull << 40},
    {"logs", "max_total_bytes", CFG_SIZE, CFG_OFF(logs.max_total_bytes), 1024, 64ull << 40},
    {"logs", "reserve_free_bytes", CFG_SIZE, CFG_OFF(logs.reserve_free_bytes), 0, 1ull << 40},
    {"", "history", CFG_MAP, 0, 0, 0},
    {"history", "max_age_days", CFG_U32, CFG_OFF(history.max_age_days), 0, 36500},
    {"history", "max_jobs", CFG_U32, CFG_OFF(history.max_jobs), 0, 100000000},
    {"history", "prune_interval_s", CFG_U32, CFG_OFF(history.prune_interval_s), 1, 86400},
    {"history", "artifact_grace_s", CFG_U32, CFG_OFF(history.artifact_grace_s), 1, 31536000},
    {"", "elastic", CFG_MAP, 0, 0, 0},
    {"elastic", "elastic_timeout_s", CFG_U32, CFG_OFF(elastic.elastic_timeout_s), 1, 604800},
    {"elastic", "max_resets", CFG_U32, CFG_OFF(elastic.max_resets), 0, 1000000},
    {"elastic", "blacklist_cooldown_s", CFG_U32, CFG_OFF(elastic.blacklist_cooldown_s), 0, 604800},
    {"elastic", "blacklist_max_cooldown_s", CFG_U32, CFG_OFF(elastic.blacklist_max_cooldown_s), 0,
     604800},
    {"elastic", "rendezvous_timeout_s", CFG_U32, CFG_OFF(elastic.rendezvous_timeout_s), 1, 3600},
    {"elastic", "check_every", CFG_U32, CFG_OFF(elastic.check_every), 1, 1000000},
    {"elastic", "blacklist_max_strikes", CFG_U32, CFG_OFF(elastic.blacklist_max_strikes), 0, 1000},
    {"", "fleet", CFG_MAP, 0, 0, 0},
    {"fleet", "resize_interval_ms", CFG_U32, CFG_OFF(fleet.resize_interval_ms), 0, 3600000},
    {"fleet", "reset_ms", CFG_U32, CFG_OFF(fleet.reset_ms), 1, 600000},
    {"fleet", "starve_ms", CFG_U32, CFG_OFF(fleet.starve_ms), 1000, 86400000},
    {"fleet", "age_ms", CFG_U32, CFG_OFF(fleet.age_ms), 0, 2000000000},
    {"fleet", "reserve_pct", CFG_U32, CFG_OFF(fleet.reserve_pct), 0, 90},
    {"fleet", "reserve_priority", CFG_U32, CFG_OFF(fleet.reserve_priority), 1, 1000},
    {"fleet", "namespaces", CFG_NAMESPACES, 0, 0, 0},
    {"fleet", "policy", CFG_POLICY, CFG_OFF(fleet.fcfs), 0, 0},
    {"", "autoscaler", CFG_MAP, 0, 0, 0},
    {"autoscaler", "provider", CFG_PROVIDER, CFG_OFF(autoscaler.provider), 0, 0},
    {"autoscaler", "min_nodes", CFG_U32, CFG_OFF(autoscaler.min_nodes), 0, 100000},
    {"autoscaler", "max_nodes", CFG_U32, CFG_OFF(autoscaler.max_nodes), 0, 100000},
    {"autoscaler", "idle_timeout_s", CFG_U32, CFG_OFF(autoscaler.idle_timeout_s), 1, 604800},
    {"autoscaler", "local", CFG_MAP, 0, 0, 0},
    {"autoscaler.local", "slots", CFG_U32, CFG_OFF(autoscaler.local_slots), 1, 4096},
    {"autoscaler", "command", CFG_MAP, 0, 0, 0},
    {"autoscaler.command", "launch", CFG_STR_OPT, CFG_OFF(autoscaler.command_launch), 0, 0},
    {"autoscaler.command", "terminate", CFG_STR_OPT, CFG_OFF(autoscaler.command_terminate), 0, 0},
    {"autoscaler.command", "list", CFG_STR_OPT, CFG_OFF(autoscaler.command_list), 0, 0},
    {"autoscaler", "upscaling_speed", CFG_NUM, CFG_OFF(autoscaler.upscaling_speed), 1, 1000000},
    {"autoscaler", "launch_timeout_s", CFG_U32, CFG_OFF(autoscaler.launch_timeout_s), 1, 86400},
    {"autoscaler", "max_launch_failures", CFG_U32, CFG_OFF(autoscaler.max_launch_failures), 1,
     1000},
    {"autoscaler", "set_aside_s", CFG_U32, CFG_OFF(autoscaler.set_aside_s), 0, 604800},
    {"autoscaler", "handback", CFG_BOOL, CFG_OFF(autoscaler.handback), 0, 0},
    {"autoscaler", "spare_preemptions_per_hour", CFG_NUM, CFG_OFF(autoscaler.spare_per_hour), 0,
     2000000000},
    {"autoscaler", "spare_nodes", CFG_U32, CFG_OFF(autoscaler.spare_nodes), 1, 100000},
    {"autoscaler", "spare_window_s", CFG_U32, CFG_OFF(autoscaler.spare_window_s), 1, 604800},
    {"autoscaler", "fallback_delay_s", CFG_U32, CFG_OFF(autoscaler.fallback_delay_s), 0, 604800},
    {"autoscaler", "node_types", CFG_NODE_TYPES, 0, 0, 0},
    {"autoscaler", "fallback", CFG_NAME_LIST, 0, 0, 0},
    {"autoscaler", "spot_sim", CFG_MAP, 0, 0, 0},
    {"autoscaler.spot_sim", "seed", CFG_U32, CFG_OFF(autoscaler.spot_sim.seed), 0, UINT32_MAX},
    {"autoscaler.spot_sim", "boot_min_ms", CFG_U32, CFG_OFF(autoscaler.spot_sim.boot_min_ms), 0,
     3600000},
    {"autoscaler.spot_sim", "boot_max_ms", CFG_U32, CFG_OFF(autoscaler.spot_sim.boot_max_ms), 0,
     3600000},
    {"autoscaler.spot_sim", "preempt_every_s", CFG_U32,
     CFG_OFF(autoscaler.spot_sim.preempt_every_s), 0, 604800},
    {"autoscaler.spot_sim", "notice_s", CFG_U32, CFG_OFF(autoscaler.spot_sim.notice_s), 0, 3600},
    {"autoscaler.spot_sim", "no_notice_fraction", CFG_NUM,
     CFG_OFF(autoscaler.spot_sim.no_notice_fraction), 0, 1000},
    {"autoscaler.spot_sim", "trace", CFG_STR_OPT, CFG_OFF(autoscaler.spot_sim.trace), 0, 0},
    {"", "state_copies", CFG_MAP, 0, 0, 0},
    {"state_copies", "durable", CFG_MAP, 0, 0, 0},
    {"state_copies.durable", "dir", CFG_STR_OPT, CFG_OFF(durable.dir), 0, 0},
    {"state_copies.durable", "upload", CFG_STR_OPT, CFG_OFF(durable.upload), 0, 0},
    {"state_copies.durable", "download", CFG_STR_OPT, CFG_OFF(durable.download), 0, 0},
    {"state_copies.durable", "remove", CFG_STR_OPT, CFG_OFF(durable.remove), 0, 0},
    {"state_copies.durable", "interval_s", CFG_U32, CFG_OFF(durable.interval_s), 1, 86400},
    {"state_copies.durable", "timeout_s", CFG_U32, CFG_OFF(durable.timeout_s), 1, 86400},
    {"", "allow_insecure", CFG_BOOL, CFG_OFF(allow_insecure), 0, 0},
    {"", "tls", CFG_MAP, 0, 0, 0},
    {"tls", "cert", CFG_STR_OPT, CFG_OFF(tls.cert), 0, 0},
    {"tls", "key", CFG_STR_OPT, CFG_OFF(tls.key), 0, 0},
    {"tls", "ca", CFG_STR_OPT, CFG_OFF(tls.ca), 0, 0},
    {"tls", "require_client_cert", CFG_BOOL, CFG_OFF(tls.require_client_cert), 0, 0},
    {"", "limits", CFG_MAP, 0, 0, 0},
    {"limits", "handshake_timeout_ms", CFG_U32, CFG_OFF(limits.handshake_timeout_ms), 100, 600000},
    {"limits", "max_watch_streams", CFG_U32, CFG_OFF(limits.max_watch_streams), 0, 1000000},
    {"limits", "max_watch_streams_per_client", CFG_U32,
     CFG_OFF(limits.max_watch_streams_per_client), 0, 1000000},
    {"limits", "max_connections", CFG_U32, CFG_OFF(limits.max_connections), 0, 1000000},
    {"limits", "max_connections_per_client", CFG_U32, CFG_OFF(limits.max_connections_per_client), 0,
     1000000},
    {"", "metrics", CFG_MAP, 0, 0, 0},
    {"metrics", "listen", CFG_ADDR_OPT, CFG_OFF(metrics.listen), 0, 0},
    {"metrics", "token_file", CFG_STR_OPT, CFG_OFF(metrics.token_file), 0, 0},
};

/* The keys of one node type (autoscaler.node_types.NAME.KEY); parsed by config_node_types. */
static const char *const config_type_keys[] = {
    "slots",     "gpus",      "preemptible", "price_per_hour", "ondemand_price_per_hour",
    "min_nodes", "max_nodes", "capacity",    "labels",         "memory_mb"};

#define CONFIG_NOPTS (sizeof(config_opts) / sizeof(config_opts[0]))

static const char *const config_providers[] = {"none", "local", "command", "spot-sim"};

/* State of one file walk. */
typedef struct config_parse_s {
    const char *path; // the file, as the caller named it (borrowed)
    char *err;        // caller's message buffer (borrowed)
    size_t errlen;
    hv_head_config_t *cfg;          // the config being filled (borrowed)
    yaml_document_t *doc;           // the composed document (borrowed)
    int set[CONFIG_NOPTS];          // 1 when the file gave this key
    yaml_mark_t mark[CONFIG_NOPTS]; // where the file gave its value
    const yaml_node_t *fallback;    // autoscaler.fallback, applied after the walk
    yaml_mark_t *type_marks;        // where each node type was given (cfg->autoscaler.types)
} config_parse_t;

/* ---- messages ------------------------------------------------------------------------------ */

static hv_err config_fail(config_parse_t *p, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "FILE:LINE:COL: <message>" (libyaml marks are 0-based) and returns HV_EINVAL. */
static hv_err config_fail(config_parse_t *p, yaml_mark_t mark, const char *fmt, ...) {
    if (p->err == NULL || p->errlen == 0) {
        return HV_EINVAL;
    }
    int n = snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->path, mark.line + 1, mark.column + 1);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return HV_EINVAL;
}

/* The dotted name of a key, as messages and docs show it ("elastic.max_resets"). */
static const char *config_key_name(const char *section, const char *name, char *buf, size_t len) {
    if (section[0] == '\0') {
        snprintf(buf, len, "%s", name);
    } else {
        snprintf(buf, len, "%s.%s", section, name);
    }
    return buf;
}

/* A value made safe to quote: at most CONFIG_VALUE_SHOW bytes, control characters as '?'. */
static const char *config_show(const char *v, char *buf, size_t len) {
    size_t i = 0, o = 0;
    for (; v[i] != '\0' && i < CONFIG_VALUE_SHOW && o + 1 < len; i++) {
        unsigned char c = (unsigned char)v[i];
        buf[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (v[i] != '\0' && o + 4 < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static const char *config_node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* Levenshtein distance of two short strings, or a large number when either is too long. */
static size_t config_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    size_t row[65];
    if (la > 64 || lb > 64) {
        return 1000;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best) {
                best = up + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The known key an unknown one was probably meant to be, or NULL. A key from another section
 * with the same name wins ("max_resets" at the top level means "elastic.max_resets"); then the
 * closest spelling, preferring the same section. */
static const config_opt_t *config_suggest(const char *section, const char *name) {
    const config_opt_t *best = NULL;
    size_t best_d = 0;
    for (size_t i = 0; i < CONFIG_NOPTS; i++) {
        const config_opt_t *o = &config_opts[i];
        size_t d = config_distance(name, o->name) * 2 + (strcmp(o->section, section) != 0);
        if (best == NULL || d < best_d) {
            best = o;
            best_d = d;
        }
    }
    size_t len = strlen(name);
    size_t limit = len >= 8 ? 2 : (len >= 4 ? 1 : 0);
    return best != NULL && best_d / 2 <= limit ? best : NULL;
}

/* ---- scalar parsing ------------------------------------------------------------------------ */

/* A plain empty, "~" or "null" scalar: YAML's null. */
static int config_is_null(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return 0;
    }
    const char *v = (const char *)n->data.scalar.value;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Reads the decimal digits at *s into *out and moves *s past them. Returns 1 when the number
 * does not fit in 64 bits (*out is then not the number), else 0. */
static int config_parse_digits(const char **s, uint64_t *out) {
    uint64_t v = 0;
    int overflow = 0;
    const char *q = *s;
    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10) {
            overflow = 1;
        } else {
            v = v * 10 + d;
        }
    }
    *s = q;
    *out = v;
    return overflow;
}

/* Parses a decimal integer. Returns 0 on success, -1 when s is not an integer, 1 when it is
 * an integer outside [0, UINT64_MAX] (negative or too large). */
static int config_parse_uint(const char *s, uint64_t *out) {
    const char *q = s;
    int neg = 0;
    if (*q == '-' || *q == '+') {
        neg = *q == '-';
        q++;
    }
    if (*q < '0' || *q > '9') {
        return -1;
    }
    uint64_t v = 0;
    int overflow = config_parse_digits(&q, &v);
    if (*q != '\0') {
        return -1;
    }
    if (overflow || (neg && v != 0)) {
        return 1;
    }
    *out = v;
    return 0;
}

/* Parses "1024", "64KiB", "512 MiB", "10MB", "1G" (K/KB/M/MB/G/GB/T/TB are powers of 1000,
 * KiB/MiB/GiB/TiB powers of 1024, units case-insensitive, as util.h's hv_parse_size). Returns
 * 0, -1 (not a size) or 1 (too large). */
static int config_parse_size(const char *s, uint64_t *out) {
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"K", 1000},
                 {"KB", 1000},
                 {"KiB", 1ull << 10},
                 {"M", 1000000},
                 {"MB", 1000000},
                 {"MiB", 1ull << 20},
                 {"G", 1000000000},
                 {"GB", 1000000000},
                 {"GiB", 1ull << 30},
                 {"T", 1000000000000ull},
                 {"TB", 1000000000000ull},
                 {"TiB", 1ull << 40}};
    const char *q = s;
    if (*q < '0' || *q > '9') {
        return -1;
    }
    uint64_t v = 0;
    int overflow = config_parse_digits(&q, &v);
    while (*q == ' ') {
        q++;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(q, units[i].unit) == 0) {
            if (overflow || v > UINT64_MAX / units[i].mult) {
                return 1;
            }
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

/* Parses a plain decimal number ("0.25", "3", "1e-3"); 0 on success, -1 when it is not one. */
static int config_parse_num(const char *s, double *out) {
    if (s[0] == '\0' || strchr("0123456789.-+", s[0]) == NULL) {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(d)) {
        return -1;
    }
    *out = d;
    return 0;
}

/* Formats a byte count for a range message: "1KiB", "64GiB", or plain bytes. */
static const char *config_fmt_size(uint64_t v, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu%s", (unsigned long long)v, u == 0 ? "" : units[u]);
    return buf;
}

/* Checks "HOST:PORT" or "[V6]:PORT". Returns NULL when valid, else a short reason ("" when
 * the shape itself is wrong). */
static const char *config_check_hostport(const char *s, int allow_port0) {
    const char *port;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || end == s + 1 || end[1] != ':') {
            return "";
        }
        for (const char *c = s + 1; c < end; c++) {
            if (!(((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') ||
                   (*c >= 'A' && *c <= 'F') || *c == ':' || *c == '.'))) {
                return "bad IPv6 address";
            }
        }
        port = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL || colon == s) {
            return "";
        }
        if (memchr(s, ':', (size_t)(colon - s)) != NULL) {
            return "an IPv6 address needs brackets, as in [::1]:7000";
        }
        for (const char *c = s; c < colon; c++) {
            if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
                  (*c >= 'A' && *c <= 'Z') || *c == '.' || *c == '-' || *c == '_')) {
                return "the host may contain only letters, digits, '.', '-' and '_'";
            }
        }
        port = colon + 1;
    }
    uint64_t p;
    if (config_parse_uint(port, &p) != 0 || port[0] == '+' || port[0] == '-' || p > 65535 ||
        (p == 0 && !allow_port0)) {
        return allow_port0 ? "the port must be 0..65535" : "the port must be 1..65535";
    }
    return NULL;
}

/* ---- the walk ------------------------------------------------------------------------------ */

static char **config_str_field(hv_head_config_t *cfg, const config_opt_t *o) {
    return (char **)((char *)cfg + o->off);
}

/* Replaces a string field with a copy of v (NULL = unset). */
static hv_err config_set_str(hv_head_config_t *cfg, const config_opt_t *o, const char *v) {
    char **field = config_str_field(cfg, o);
    char *copy = NULL;
    if (v != NULL && (copy = hv_strdup(v)) == NULL) {
        return HV_ENOMEM;
    }
    hv_free(*field);
    *field = copy;
    return HV_OK;
}

/* One scalar value as it is checked: its text and what an error message says of it. */
typedef struct config_val_s {
    yaml_mark_t at;                    // where the value stands in the file
    const char *key;                   // the dotted key it belongs to (borrowed)
    const char *v;                     // the text ("" for null; borrowed from the document)
    char shown[CONFIG_VALUE_SHOW + 8]; // v, cut and escaped for quoting
} config_val_t;

/* Reads the scalar node n of key into *out; fails when n is not a scalar. */
static hv_err config_scalar(config_parse_t *p, const yaml_node_t *n, const char *key,
                            config_val_t *out) {
    if (n->type != YAML_SCALAR_NODE) {
        return config_fail(p, n->start_mark, "key '%s': expected a scalar, got %s", key,
                           config_node_kind(n));
    }
    out->at = n->start_mark;
    out->key = key;
    out->v = config_is_null(n) ? "" : (const char *)n->data.scalar.value;
    config_show(out->v, out->shown, sizeof(out->shown));
    return HV_OK;
}

/* An integer in [lo, hi] (a top-level key or a node type's). */
static hv_err config_u32(config_parse_t *p, const config_val_t *val, uint32_t lo, uint32_t hi,
                         uint32_t *out) {
    uint64_t num = 0;
    int r = config_parse_uint(val->v, &num);
    if (r < 0) {
        return config_fail(p, val->at, "key '%s': value '%s' is not an integer", val->key,
                           val->shown);
    }
    if (r > 0 || num < lo || num > hi) {
        return config_fail(p, val->at, "key '%s': value '%s' is out of range (%u..%u)", val->key,
                           val->shown, lo, hi);
    }
    *out = (uint32_t)num;
    return HV_OK;
}

/* YAML 1.1 booleans as people write them. */
static hv_err config_bool(config_parse_t *p, const config_val_t *val, int *out) {
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcmp(val->v, yes[i]) == 0 || strcmp(val->v, no[i]) == 0) {
            *out = strcmp(val->v, yes[i]) == 0;
            return HV_OK;
        }
    }
    return config_fail(p, val->at, "key '%s': value '%s' is not true or false", val->key,
                       val->shown);
}

/* Fails with "duplicate key" when a pair before pair in the mapping map has the key name (key:
 * its dotted form for the message). */
static hv_err config_check_dup(config_parse_t *p, const yaml_node_t *map,
                               const yaml_node_pair_t *pair, const char *name, const char *key) {
    for (yaml_node_pair_t *prev = map->data.mapping.pairs.start; prev < pair; prev++) {
        yaml_node_t *pk = yaml_document_get_node(p->doc, prev->key);
        if (pk != NULL && pk->type == YAML_SCALAR_NODE &&
            strcmp((const char *)pk->data.scalar.value, name) == 0) {
            yaml_node_t *k = yaml_document_get_node(p->doc, pair->key);
            return config_fail(p, k->start_mark, "duplicate key '%s' (first given at line %zu)",
                               key, pk->start_mark.line + 1);
        }
    }
    return HV_OK;
}

/* Parses the scalar value node n of option o into the config. */
static hv_err config_apply(config_parse_t *p, const config_opt_t *o, const yaml_node_t *n) {
    char key[96];
    config_key_name(o->section, o->name, key, sizeof(key));
    config_val_t val;
    hv_err rc = config_scalar(p, n, key, &val);
    if (rc != HV_OK) {
        return rc;
    }
    const char *v = val.v, *shown = val.shown;
    yaml_mark_t at = val.at;
    uint64_t num = 0;
    int r;

    switch (o->type) {
    case CFG_NAME: {
        size_t len = strlen(v);
        if (len == 0 || len > 63 ||
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789._-") != len) {
            return config_fail(p, at,
                               "key '%s': value '%s' must be 1..63 letters, digits, '.', '_' "
                               "or '-'",
                               key, shown);
        }
        return config_set_str(p->cfg, o, v);
    }
    case CFG_STR:
        if (v[0] == '\0') {
            return config_fail(p, at, "key '%s': value must not be empty", key);
        }
        return config_set_str(p->cfg, o, v);
    case CFG_STR_OPT:
        return config_set_str(p->cfg, o, v[0] == '\0' ? NULL : v);
    case CFG_TOKEN:
        /* The token is a secret: describe the problem, never quote the value. */
        for (const char *c = v; *c != '\0'; c++) {
            if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
                return config_fail(p, at,
                                   "key '%s': the token must not contain whitespace or control "
                                   "characters",
                                   key);
            }
        }
        return config_set_str(p->cfg, o, v[0] == '\0' ? NULL : v);
    case CFG_LISTEN:
    case CFG_ADDR_OPT: {
        if (o->type == CFG_ADDR_OPT && v[0] == '\0') {
            return config_set_str(p->cfg, o, NULL);
        }
        const char *why = config_check_hostport(v, o->type == CFG_LISTEN);
        if (why != NULL) {
            return config_fail(p, at, "key '%s': value '%s' is not HOST:PORT%s%s%s", key, shown,
                               why[0] ? " (" : "", why, why[0] ? ")" : "");
        }
        return config_set_str(p->cfg, o, v);
    }
    case CFG_U32:
        return config_u32(p, &val, (uint32_t)o->min, (uint32_t)o->max,
                          (uint32_t *)((char *)p->cfg + o->off));
    case CFG_SIZE: {
        char lo[32], hi[32];
        r = config_parse_size(v, &num);
        if (r < 0) {
            return config_fail(p, at,
                               "key '%s': value '%s' is not a size (examples: 1048576, 64KiB, "
                               "512MiB, 1GiB)",
                               key, shown);
        }
        if (r > 0 || num < o->min || num > o->max) {
            return config_fail(p, at, "key '%s': value '%s' is out of range (%s..%s)", key, shown,
                               config_fmt_size(o->min, lo, sizeof(lo)),
                               config_fmt_size(o->max, hi, sizeof(hi)));
        }
        *(uint64_t *)((char *)p->cfg + o->off) = num;
        return HV_OK;
    }
    case CFG_LOGLEVEL: {
        hv_log_level level;
        if (v[0] == '\0' || hv_log_parse_level(v, &level) != 0) {
            return config_fail(p, at,
                               "key '%s': value '%s' is not one of error, warn, notice, info, "
                               "debug",
                               key, shown);
        }
        *(int *)((char *)p->cfg + o->off) = (int)level;
        return HV_OK;
    }
    case CFG_PROVIDER:
        for (size_t i = 0; i < sizeof(config_providers) / sizeof(config_providers[0]); i++) {
            if (strcmp(v, config_providers[i]) == 0) {
                return config_set_str(p->cfg, o, v);
            }
        }
        return config_fail(p, at,
                           "key '%s': value '%s' is not one of none, local, command, "
                           "spot-sim",
                           key, shown);
    case CFG_BOOL:
        return config_bool(p, &val, (int *)((char *)p->cfg + o->off));
    case CFG_POLICY:
        if (strcmp(v, "fleet") != 0 && strcmp(v, "fcfs") != 0) {
            return config_fail(p, at, "key '%s': value '%s' is not one of fleet, fcfs", key, shown);
        }
        *(int *)((char *)p->cfg + o->off) = strcmp(v, "fcfs") == 0;
        return HV_OK;
    case CFG_NUM: {
        double d = 0;
        if (config_parse_num(v, &d) != 0) {
            return config_fail(p, at, "key '%s': value '%s' is not a number", key, shown);
        }
        if (d < (double)o->min / 1000.0 || d > (double)o->max / 1000.0) {
            return config_fail(p, at, "key '%s': value '%s' is out of range (%g..%g)", key, shown,
                               (double)o->min / 1000.0, (double)o->max / 1000.0);
        }
        *(double *)((char *)p->cfg + o->off) = d;
        return HV_OK;
    }
    case CFG_MAP:
    case CFG_NODE_TYPES:
    case CFG_NAME_LIST:
    case CFG_NAMESPACES:
        break;
    }
    return HV_EINTERNAL;
}

/* ---- autoscaler.node_types ------------------------------------------------------------------ */

/* A node type's price (a number >= 0). */
static hv_err config_type_price(config_parse_t *p, const config_val_t *val, double *out) {
    double d = 0;
    if (config_parse_num(val->v, &d) != 0 || d < 0 || d > 1e6) {
        return config_fail(p, val->at,
                           "key '%s': value '%s' is not a price per hour (a number, 0..1000000)",
                           val->key, val->shown);
    }
    *out = d;
    return HV_OK;
}

/* labels: a mapping of names to scalars, kept as "k=v,k=v". */
static hv_err config_type_labels(config_parse_t *p, const yaml_node_t *n, const char *key,
                                 char **out) {
    if (config_is_null(n)) {
        return HV_OK;
    }
    if (n->type != YAML_MAPPING_NODE) {
        return config_fail(p, n->start_mark, "key '%s': expected a mapping (name: value), got %s",
                           key, config_node_kind(n));
    }
    char buf[1024] = "";
    size_t used = 0;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (k == NULL || v == NULL || k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE) {
            return config_fail(p, (k ? k : n)->start_mark,
                               "key '%s': each label is name: value (scalars)", key);
        }
        const char *kn = (const char *)k->data.scalar.value;
        const char *vv = config_is_null(v) ? "" : (const char *)v->data.scalar.value;
        size_t kl = strlen(kn), vl = strlen(vv);
        if (kl == 0 ||
            strspn(kn, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
                kl ||
            strpbrk(vv, ",=\n") != NULL) {
            char shown[CONFIG_VALUE_SHOW + 8];
            return config_fail(p, k->start_mark,
                               "key '%s': label '%s': names are letters, digits, '.', '_', '-', "
                               "'/'; values may not contain ',' or '='",
                               key, config_show(kn, shown, sizeof(shown)));
        }
        int w = snprintf(buf + used, sizeof(buf) - used, "%s%s=%s", used ? "," : "", kn, vv);
        if (w < 0 || (size_t)w >= sizeof(buf) - used || kl + vl > 512) {
            return config_fail(p, n->start_mark, "key '%s': the labels are longer than %zu bytes",
                               key, sizeof(buf) - 1);
        }
        used += (size_t)w;
    }
    if (used > 0 && (*out = hv_strdup(buf)) == NULL) {
        return HV_ENOMEM;
    }
    return HV_OK;
}

/* autoscaler.node_types: NAME: {slots: N, ...}, in the file's order. */
static hv_err config_node_types(config_parse_t *p, const yaml_node_t *v) {
    hv_head_config_t *c = p->cfg;
    if (config_is_null(v)) {
        return HV_OK;
    }
    if (v->type != YAML_MAPPING_NODE) {
        return config_fail(p, v->start_mark,
                           "key 'autoscaler.node_types': expected a mapping of node type names "
                           "to their settings, got %s",
                           config_node_kind(v));
    }
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n > 64) {
        return config_fail(p, v->start_mark, "key 'autoscaler.node_types': %zu types; at most 64",
                           n);
    }
    if (n == 0) {
        return HV_OK;
    }
    c->autoscaler.types = hv_calloc(n, sizeof(*c->autoscaler.types));
    p->type_marks = hv_calloc(n, sizeof(*p->type_marks));
    if (c->autoscaler.types == NULL || p->type_marks == NULL) {
        return HV_ENOMEM;
    }
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *tv = yaml_document_get_node(p->doc, pr->value);
        if (k == NULL || tv == NULL) {
            return HV_EINTERNAL;
        }
        char shown[CONFIG_VALUE_SHOW + 8], key[160];
        const char *name = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
        size_t len = strlen(name);
        if (k->type != YAML_SCALAR_NODE || len == 0 || len > 40 ||
            strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                len) {
            return config_fail(p, k->start_mark,
                               "key 'autoscaler.node_types': type name '%s' must be 1..40 "
                               "letters, digits, '.', '_' or '-'",
                               config_show(name, shown, sizeof(shown)));
        }
        for (size_t j = 0; j < c->autoscaler.ntypes; j++) {
            if (strcmp(c->autoscaler.types[j].name, name) == 0) {
                return config_fail(p, k->start_mark,
                                   "duplicate key 'autoscaler.node_types.%s' (first given at line "
                                   "%zu)",
                                   name, p->type_marks[j].line + 1);
            }
        }
        hv_head_node_type_t *t = &c->autoscaler.types[c->autoscaler.ntypes];
        p->type_marks[c->autoscaler.ntypes] = k->start_mark;
        c->autoscaler.ntypes++;
        if ((t->name = hv_strdup(name)) == NULL) {
            return HV_ENOMEM;
        }
        t->max_nodes = UINT32_MAX; /* not given: autoscaler.max_nodes, set after the walk */
        t->ondemand_price_per_hour = -1;
        if (tv->type != YAML_MAPPING_NODE) {
            return config_fail(p, tv->start_mark,
                               "key 'autoscaler.node_types.%s': expected a mapping (slots: N, "
                               "...), got %s",
                               name, config_node_kind(tv));
        }
        int have_slots = 0;
        for (yaml_node_pair_t *q = tv->data.mapping.pairs.start; q < tv->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(p->doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(p->doc, q->value);
            if (kk == NULL || vv == NULL) {
                return HV_EINTERNAL;
            }
            const char *kn =
                kk->type == YAML_SCALAR_NODE ? (const char *)kk->data.scalar.value : "";
            snprintf(key, sizeof(key), "autoscaler.node_types.%s.%s", name,
                     config_show(kn, shown, sizeof(shown)));
            size_t ki = 0, nk = sizeof(config_type_keys) / sizeof(config_type_keys[0]);
            while (ki < nk && strcmp(config_type_keys[ki], kn) != 0) {
                ki++;
            }
            if (ki == nk) {
                return config_fail(p, kk->start_mark,
                                   "unknown key '%s' (a node type has slots, gpus, preemptible, "
                                   "price_per_hour, ondemand_price_per_hour, min_nodes, "
                                   "max_nodes, capacity, labels, memory_mb)",
                                   key);
            }
            hv_err rc = config_check_dup(p, tv, q, kn, key);
            config_val_t val = {.key = key};
            if (rc == HV_OK && ki != 8) { // every key but labels holds a scalar
                rc = config_scalar(p, vv, key, &val);
            }
            if (rc != HV_OK) {
                return rc;
            }
            switch (ki) {
            case 0:
                rc = config_u32(p, &val, 1, 4096, &t->slots);
                have_slots = 1;
                break;
            case 1:
                rc = config_u32(p, &val, 0, 64, &t->gpus);
                break;
            case 2:
                rc = config_bool(p, &val, &t->preemptible);
                break;
            case 3:
                rc = config_type_price(p, &val, &t->price_per_hour);
                break;
            case 4:
                rc = config_type_price(p, &val, &t->ondemand_price_per_hour);
                break;
            case 5:
                rc = config_u32(p, &val, 0, 100000, &t->min_nodes);
                break;
            case 6:
                rc = config_u32(p, &val, 0, 100000, &t->max_nodes);
                break;
            case 7:
                rc = config_u32(p, &val, 0, 100000, &t->capacity);
                break;
            case 8:
                rc = config_type_labels(p, vv, key, &t->labels);
                break;
            default: {
                uint32_t mb = 0;
                rc = config_u32(p, &val, 1, 1u << 30, &mb);
                t->memory_mb = mb;
                break;
            }
            }
            if (rc != HV_OK) {
                return rc;
            }
        }
        if (!have_slots) {
            return config_fail(p, k->start_mark,
                               "key 'autoscaler.node_types.%s': 'slots' is required", name);
        }
    }
    return HV_OK;
}

/* autoscaler.fallback: the listed types first, in that order, then the rest in file order. */
static hv_err config_apply_fallback(config_parse_t *p) {
    hv_head_config_t *c = p->cfg;
    const yaml_node_t *f = p->fallback;
    size_t n = c->autoscaler.ntypes, placed = 0;
    for (yaml_node_item_t *it = f->data.sequence.items.start; it < f->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(p->doc, *it);
        char shown[CONFIG_VALUE_SHOW + 8];
        const char *name =
            e != NULL && e->type == YAML_SCALAR_NODE ? (const char *)e->data.scalar.value : NULL;
        if (name == NULL) {
            return config_fail(p, e ? e->start_mark : f->start_mark,
                               "key 'autoscaler.fallback': each entry is a node type name");
        }
        size_t j = placed;
        while (j < n && strcmp(c->autoscaler.types[j].name, name) != 0) {
            j++;
        }
        if (j == n) {
            for (size_t i = 0; i < placed; i++) {
                if (strcmp(c->autoscaler.types[i].name, name) == 0) {
                    return config_fail(p, e->start_mark,
                                       "key 'autoscaler.fallback': '%s' is listed twice",
                                       config_show(name, shown, sizeof(shown)));
                }
            }
            return config_fail(p, e->start_mark,
                               "key 'autoscaler.fallback': '%s' is not a type under "
                               "autoscaler.node_types",
                               config_show(name, shown, sizeof(shown)));
        }
        /* move type j to position placed, keeping the others' order */
        hv_head_node_type_t t = c->autoscaler.types[j];
        yaml_mark_t m = p->type_marks[j];
        memmove(&c->autoscaler.types[placed + 1], &c->autoscaler.types[placed],
                (j - placed) * sizeof(t));
        memmove(&p->type_marks[placed + 1], &p->type_marks[placed], (j - placed) * sizeof(m));
        c->autoscaler.types[placed] = t;
        p->type_marks[placed] = m;
        placed++;
    }
    return HV_OK;
}

/* ---- fleet.namespaces ----------------------------------------------------------------------- */

#define CONFIG_MAX_NS 256

/* quota or borrow of namespace key: {slots: N, gpus: N, memory: SIZE}; keys not given keep
 * their value in res. */
static hv_err config_ns_res(config_parse_t *p, const yaml_node_t *n, const char *key,
                            uint64_t res[3]) {
    static const char *const names[] = {"slots", "gpus", "memory"};
    if (config_is_null(n)) {
        return HV_OK;
    }
    if (n->type != YAML_MAPPING_NODE) {
        return config_fail(p, n->start_mark,
                           "key '%s': expected a mapping (slots: N, gpus: N, memory: SIZE), got %s",
                           key, config_node_kind(n));
    }
    for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < n->data.mapping.pairs.top; q++) {
        yaml_node_t *kk = yaml_document_get_node(p->doc, q->key);
        yaml_node_t *vv = yaml_document_get_node(p->doc, q->value);
        if (kk == NULL || vv == NULL) {
            return HV_EINTERNAL;
        }
        char shown[CONFIG_VALUE_SHOW + 8], sub[192];
        const char *kn = kk->type == YAML_SCALAR_NODE ? (const char *)kk->data.scalar.value : "";
        snprintf(sub, sizeof(sub), "%s.%s", key, config_show(kn, shown, sizeof(shown)));
        size_t ri = 0;
        while (ri < 3 && strcmp(names[ri], kn) != 0) {
            ri++;
        }
        if (ri == 3) {
            return config_fail(p, kk->start_mark,
                               "unknown key '%s' (a quota or a borrowing limit has slots, gpus, "
                               "memory)",
                               sub);
        }
        config_val_t val;
        hv_err rc = config_check_dup(p, n, q, kn, sub);
        if (rc == HV_OK) {
            rc = config_scalar(p, vv, sub, &val);
        }
        if (rc != HV_OK) {
            return rc;
        }
        if (strcmp(val.v, "unlimited") == 0) {
            res[ri] = UINT64_MAX;
            continue;
        }
        if (ri < 2) {
            uint32_t u = 0;
            if ((rc = config_u32(p, &val, 0, 1000000, &u)) != HV_OK) {
                return rc;
            }
            res[ri] = u;
            continue;
        }
        uint64_t bytes = 0;
        int r = config_parse_size(val.v, &bytes);
        if (r < 0) {
            return config_fail(p, val.at,
                               "key '%s': value '%s' is not a size (examples: 512MiB, 64GiB)", sub,
                               val.shown);
        }
        if (r > 0 || bytes % (1u << 20) != 0 || bytes > (1ull << 50)) {
            return config_fail(p, val.at,
                               "key '%s': value '%s' must be a whole number of MiB up to 1PiB "
                               "(write a unit: 512MiB, 64GiB)",
                               sub, val.shown);
        }
        res[ri] = bytes >> 20;
    }
    return HV_OK;
}

/* fleet.namespaces: - {name: N, weight: W, quota: {...}, borrow: {...}, priority: P}. */
static hv_err config_namespaces(config_parse_t *p, const yaml_node_t *v) {
    static const char *const keys[] = {"name", "weight", "quota", "borrow", "priority"};
    hv_head_config_t *c = p->cfg;
    if (config_is_null(v)) {
        return HV_OK;
    }
    if (v->type != YAML_SEQUENCE_NODE) {
        return config_fail(p, v->start_mark,
                           "key 'fleet.namespaces': expected a list of namespaces (- name: N, "
                           "weight: W, quota: {...}, borrow: {...}, priority: P), got %s",
                           config_node_kind(v));
    }
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n > CONFIG_MAX_NS) {
        return config_fail(p, v->start_mark, "key 'fleet.namespaces': %zu namespaces; at most %d",
                           n, CONFIG_MAX_NS);
    }
    if (n == 0) {
        return HV_OK;
    }
    c->fleet.ns = hv_calloc(n, sizeof(*c->fleet.ns));
    yaml_mark_t *marks = hv_calloc(n, sizeof(*marks));
    if (c->fleet.ns == NULL || marks == NULL) {
        hv_free(marks);
        return HV_ENOMEM;
    }
    hv_err rc = HV_OK;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        size_t i = (size_t)(it - v->data.sequence.items.start);
        yaml_node_t *e = yaml_document_get_node(p->doc, *it);
        char key[96], sub[160], shown[CONFIG_VALUE_SHOW + 8];
        snprintf(key, sizeof(key), "fleet.namespaces[%zu]", i);
        if (e == NULL) {
            rc = HV_EINTERNAL;
            break;
        }
        if (e->type != YAML_MAPPING_NODE) {
            rc =
                config_fail(p, e->start_mark, "key '%s': expected a mapping (name: N, ...), got %s",
                            key, config_node_kind(e));
            break;
        }
        hv_head_ns_t *ns = &c->fleet.ns[c->fleet.nns++];
        ns->weight = 1;
        for (int r = 0; r < 3; r++) {
            ns->borrow[r] = UINT64_MAX;
        }
        marks[i] = e->start_mark;
        for (yaml_node_pair_t *q = e->data.mapping.pairs.start;
             rc == HV_OK && q < e->data.mapping.pairs.top; q++) {
            yaml_node_t *kk = yaml_document_get_node(p->doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(p->doc, q->value);
            if (kk == NULL || vv == NULL) {
                rc = HV_EINTERNAL;
                break;
            }
            const char *kn =
                kk->type == YAML_SCALAR_NODE ? (const char *)kk->data.scalar.value : "";
            snprintf(sub, sizeof(sub), "%s.%s", key, config_show(kn, shown, sizeof(shown)));
            size_t ki = 0, nk = sizeof(keys) / sizeof(keys[0]);
            while (ki < nk && strcmp(keys[ki], kn) != 0) {
                ki++;
            }
            if (ki == nk) {
                rc = config_fail(p, kk->start_mark,
                                 "unknown key '%s' (a namespace has name, weight, quota, borrow, "
                                 "priority)",
                                 sub);
                break;
            }
            if ((rc = config_check_dup(p, e, q, kn, sub)) != HV_OK) {
                break;
            }
            if (ki == 2 || ki == 3) {
                rc = config_ns_res(p, vv, sub, ki == 2 ? ns->quota : ns->borrow);
                continue;
            }
            config_val_t val;
            if ((rc = config_scalar(p, vv, sub, &val)) != HV_OK) {
                break;
            }
            if (ki == 0) {
                size_t len = strlen(val.v);
                if (len == 0 || len > 63 || val.v[0] == '.' || val.v[0] == '-' ||
                    strspn(val.v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789._-") != len) {
                    rc = config_fail(p, val.at,
                                     "key '%s': value '%s' must be 1..63 letters, digits, '.', "
                                     "'_' or '-' (not first '.' or '-'), as hvsubmit --namespace",
                                     sub, val.shown);
                    break;
                }
                for (size_t j = 0; j + 1 < c->fleet.nns; j++) {
                    if (strcmp(c->fleet.ns[j].name, val.v) == 0) {
                        rc = config_fail(p, val.at,
                                         "key '%s': namespace '%s' is listed twice (first at line "
                                         "%zu)",
                                         sub, val.shown, marks[j].line + 1);
                        break;
                    }
                }
                if (rc == HV_OK && (ns->name = hv_strdup(val.v)) == NULL) {
                    rc = HV_ENOMEM;
                }
            } else if (ki == 1) {
                rc = config_u32(p, &val, 1, 1000, &ns->weight);
            } else {
                char *end = NULL;
                errno = 0;
                long pr = strtol(val.v, &end, 10);
                if (val.v[0] == '\0' || end == NULL || *end != '\0' || errno != 0 || pr < -1000 ||
                    pr > 1000) {
                    rc = config_fail(p, val.at,
                                     "key '%s': value '%s' is not a whole number from -1000 to "
                                     "1000",
                                     sub, val.shown);
                    break;
                }
                ns->priority = (int32_t)pr;
            }
        }
        if (rc != HV_OK) {
            break;
        }
        if (ns->name == NULL) {
            rc = config_fail(p, e->start_mark, "key '%s': 'name' is required", key);
            break;
        }
    }
    hv_free(marks);
    return rc;
}

/* Walks one mapping node whose keys belong to section. */
static hv_err config_walk(config_parse_t *p, const yaml_node_t *map, const char *section) {
    hv_err rc;
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
        if (k == NULL || v == NULL) {
            return HV_EINTERNAL;
        }
        if (k->type != YAML_SCALAR_NODE) {
            return config_fail(p, k->start_mark, "expected a key name, got %s",
                               config_node_kind(k));
        }
        const char *name = (const char *)k->data.scalar.value;
        char key[96], shown[CONFIG_VALUE_SHOW + 8];
        config_key_name(section, config_show(name, shown, sizeof(shown)), key, sizeof(key));

        if ((rc = config_check_dup(p, map, pair, name, key)) != HV_OK) {
            return rc;
        }

        size_t idx = CONFIG_NOPTS;
        for (size_t i = 0; i < CONFIG_NOPTS; i++) {
            if (strcmp(config_opts[i].section, section) == 0 &&
                strcmp(config_opts[i].name, name) == 0) {
                idx = i;
                break;
            }
        }
        if (idx == CONFIG_NOPTS) {
            const config_opt_t *s = config_suggest(section, name);
            char sugg[96];
            if (s != NULL) {
                return config_fail(p, k->start_mark, "unknown key '%s' (did you mean '%s'?)", key,
                                   config_key_name(s->section, s->name, sugg, sizeof(sugg)));
            }
            return config_fail(p, k->start_mark, "unknown key '%s'", key);
        }

        const config_opt_t *o = &config_opts[idx];
        p->set[idx] = 1;
        p->mark[idx] = v->start_mark;
        if (o->type == CFG_MAP) {
            if (config_is_null(v)) {
                continue; // "elastic:" with nothing under it: all defaults
            }
            if (v->type != YAML_MAPPING_NODE) {
                return config_fail(p, v->start_mark, "key '%s': expected a mapping, got %s", key,
                                   config_node_kind(v));
            }
            char sub[96];
            config_key_name(section, o->name, sub, sizeof(sub));
            if ((rc = config_walk(p, v, sub)) != HV_OK) {
                return rc;
            }
            continue;
        }
        if (o->type == CFG_NODE_TYPES) {
            if ((rc = config_node_types(p, v)) != HV_OK) {
                return rc;
            }
            continue;
        }
        if (o->type == CFG_NAMESPACES) {
            if ((rc = config_namespaces(p, v)) != HV_OK) {
                return rc;
            }
            continue;
        }
        if (o->type == CFG_NAME_LIST) {
            if (!config_is_null(v) && v->type != YAML_SEQUENCE_NODE) {
                return config_fail(p, v->start_mark,
                                   "key '%s': expected a list of node type names, got %s", key,
                                   config_node_kind(v));
            }
            p->fallback = config_is_null(v) ? NULL : v;
            continue;
        }
        if ((rc = config_apply(p, o, v)) != HV_OK) {
            return rc;
        }
    }
    return HV_OK;
}

static size_t config_opt_index(const char *section, const char *name) {
    for (size_t i = 0; i < CONFIG_NOPTS; i++) {
        if (strcmp(config_opts[i].section, section) == 0 &&
            strcmp(config_opts[i].name, name) == 0) {
            return i;
        }
    }
    return CONFIG_NOPTS; // not reached for names taken from the table
}

/* Of two related keys, the one to blame for a cross-field problem: the one the file set (the
 * preferred one a when both were), or -1 when neither came from the file. */
static long config_blame(const config_parse_t *p, size_t a, size_t b) {
    if (a < CONFIG_NOPTS && p->set[a]) {
        return (long)a;
    }
    if (b < CONFIG_NOPTS && p->set[b]) {
        return (long)b;
    }
    return -1;
}

/* The transport: TLS material that gRPC can load (checked now, so a bad file is reported at
 * its key instead of when the first agent connects), and plain text only on loopback unless the
 * file says allow_insecure. */
static hv_err config_check_transport(config_parse_t *p) {
    hv_head_config_t *c = p->cfg;
    size_t sec = config_opt_index("", "tls"), cert = config_opt_index("tls", "cert");
    size_t key = config_opt_index("tls", "key"), ca = config_opt_index("tls", "ca");
    size_t rcc = config_opt_index("tls", "require_client_cert");
    /* "tls:" with nothing under it is plain text, as without the section. */
    size_t listen = config_opt_index("", "listen");
    if (p->set[sec] &&
        (c->tls.cert != NULL || c->tls.key != NULL || c->tls.ca != NULL || p->set[rcc])) {
        if (c->tls.cert == NULL || c->tls.key == NULL) {
            return config_fail(p, p->mark[sec],
                               "key 'tls': needs 'cert' (the head's certificate) and 'key' (its "
                               "private key), as PEM files; see docs/tls.md");
        }
        if (c->tls.require_client_cert && c->tls.ca == NULL) {
            return config_fail(p, p->mark[rcc],
                               "key 'tls.require_client_cert': needs 'tls.ca', the CA that "
                               "signs the agents' client certificates");
        }
        hv_rpc_tls_t tls = {.ca_file = c->tls.ca, .cert_file = c->tls.cert, .key_file = c->tls.key};
        const char *which = NULL;
        char why[600];
        hv_err rc = hv_rpc_tls_check(&tls, &which, why, sizeof(why));
        if (rc != HV_OK) {
            size_t at = which == NULL               ? sec
                        : strcmp(which, "ca") == 0  ? ca
                        : strcmp(which, "key") == 0 ? key
                                                    : cert;
            return config_fail(
                p, p->mark[at], "key '%s': %s",
                at == sec ? "tls" : (at == ca ? "tls.ca" : (at == key ? "tls.key" : "tls.cert")),
                why);
        }
        return HV_OK;
    }
    if (!c->allow_insecure && !hv_rpc_target_is_loopback(c->listen) && p->set[listen]) {
        char shown[CONFIG_VALUE_SHOW + 8];
        return config_fail(p, p->mark[listen],
                           "key 'listen': value '%s' is not a loopback address and there is no "
                           "'tls:' section: tokens and jobs would cross the network in plain "
                           "text; configure tls (docs/tls.md) or set 'allow_insecure: true'",
                           config_show(c->listen, shown, sizeof(shown)));
    }
    return HV_OK;
}

/* The durable tier: a directory or a pair of commands, not both; every template's placeholders
 * known (checked now, so a typo is reported at its key instead of at the first copy). */
static hv_err config_check_durable(config_parse_t *p) {
    hv_head_config_t *c = p->cfg;
    size_t dir = config_opt_index("state_copies.durable", "dir");
    size_t up = config_opt_index("state_copies.durable", "upload");
    size_t down = config_opt_index("state_copies.durable", "download");
    size_t rm = config_opt_index("state_copies.durable", "remove");
    if (c->durable.dir != NULL && c->durable.upload != NULL) {
        size_t at = p->mark[dir].index > p->mark[up].index ? dir : up;
        return config_fail(p, p->mark[at],
                           "key 'state_copies.durable.%s': 'dir' and 'upload' are both set; the "
                           "durable tier is a directory or a pair of commands, not both",
                           config_opts[at].name);
    }
    if (c->durable.dir != NULL && c->durable.dir[0] != '/') {
        char shown[CONFIG_VALUE_SHOW + 8];
        return config_fail(p, p->mark[dir],
                           "key 'state_copies.durable.dir': value '%s' is not an absolute path",
                           config_show(c->durable.dir, shown, sizeof(shown)));
    }
    if ((c->durable.upload != NULL) != (c->durable.download != NULL)) {
        size_t at = c->durable.upload != NULL ? up : down;
        return config_fail(p, p->mark[at],
                           "key 'state_copies.durable.%s': needs state_copies.durable.%s too (a "
                           "copy that is uploaded must be downloadable to resume from it)",
                           config_opts[at].name, at == up ? "download" : "upload");
    }
    if (c->durable.remove != NULL && c->durable.upload == NULL) {
        return config_fail(p, p->mark[rm],
                           "key 'state_copies.durable.remove': is only used with 'upload' and "
                           "'download'");
    }
    const size_t tmpl[] = {up, down, rm};
    const char *const vals[] = {c->durable.upload, c->durable.download, c->durable.remove};
    for (size_t i = 0; i < 3; i++) {
        char out[4096], why[200];
        if (vals[i] != NULL &&
            hv_durable_expand(vals[i], NULL, out, sizeof(out), why, sizeof(why)) != HV_OK) {
            return config_fail(p, p->mark[tmpl[i]], "key 'state_copies.durable.%s': %s",
                               config_opts[tmpl[i]].name, why);
        }
    }
    return HV_OK;
}

/* Rules that involve more than one key. Run after the whole file is applied. */
static hv_err config_cross_check(config_parse_t *p) {
    hv_head_config_t *c = p->cfg;
    hv_err rc;
    size_t hb = config_opt_index("", "heartbeat_ms"), lease = config_opt_index("", "lease_ms");
    long who;

    uint64_t need = 3ull * c->heartbeat_ms;
    if (c->lease_ms < need && (who = config_blame(p, lease, hb)) >= 0) {
        if ((size_t)who == lease) {
            return config_fail(p, p->mark[lease],
                               "key 'lease_ms': value '%u' must be at least 3 x heartbeat_ms "
                               "(%llu)",
                               c->lease_ms, (unsigned long long)need);
        }
        return config_fail(p, p->mark[hb],
                           "key 'heartbeat_ms': value '%u' needs lease_ms of at least %llu "
                           "(3 x heartbeat_ms), but lease_ms is %u; raise lease_ms",
                           c->heartbeat_ms, (unsigned long long)need, c->lease_ms);
    }

    size_t tok = config_opt_index("", "token"), tokf = config_opt_index("", "token_file");
    if (c->token != NULL && c->token_file != NULL) {
        /* Point at whichever of the two comes later in the file. */
        size_t at = p->mark[tok].index > p->mark[tokf].index ? tok : tokf;
        return config_fail(p, p->mark[at],
                           "key '%s': 'token' and 'token_file' are both set; use one of them",
                           config_opts[at].name);
    }

    size_t bc = config_opt_index("elastic", "blacklist_cooldown_s");
    size_t bm = config_opt_index("elastic", "blacklist_max_cooldown_s");
    if (c->elastic.blacklist_max_cooldown_s < c->elastic.blacklist_cooldown_s &&
        (who = config_blame(p, bm, bc)) >= 0) {
        return config_fail(p, p->mark[who],
                           "key 'elastic.%s': value '%u' conflicts: blacklist_max_cooldown_s "
                           "(%u) must be at least blacklist_cooldown_s (%u)",
                           config_opts[who].name,
                           (size_t)who == bm ? c->elastic.blacklist_max_cooldown_s
                                             : c->elastic.blacklist_cooldown_s,
                           c->elastic.blacklist_max_cooldown_s, c->elastic.blacklist_cooldown_s);
    }

    if ((rc = config_check_transport(p)) != HV_OK) {
        return rc;
    }
    /* The metrics listener has no TLS: beyond loopback, only with a token (docs/metrics.md). */
    size_t ml = config_opt_index("metrics", "listen"),
           mt = config_opt_index("metrics", "token_file");
    if (c->metrics.token_file != NULL && c->metrics.listen == NULL) {
        return config_fail(p, p->mark[mt],
                           "key 'metrics.token_file': needs 'metrics.listen', the address to "
                           "serve /metrics on");
    }
    if (c->metrics.listen != NULL && c->metrics.token_file == NULL &&
        !hv_rpc_target_is_loopback(c->metrics.listen)) {
        char shown[CONFIG_VALUE_SHOW + 8];
        return config_fail(p, p->mark[ml],
                           "key 'metrics.listen': value '%s' is not a loopback address and there "
                           "is no 'metrics.token_file': anyone on the network could read the "
                           "cluster's metrics; set a token file (scrapers send 'Authorization: "
                           "Bearer <token>') or listen on 127.0.0.1",
                           config_show(c->metrics.listen, shown, sizeof(shown)));
    }

    size_t prov = config_opt_index("autoscaler", "provider");
    size_t mn = config_opt_index("autoscaler", "min_nodes");
    size_t mx = config_opt_index("autoscaler", "max_nodes");
    if (c->autoscaler.max_nodes < c->autoscaler.min_nodes && (who = config_blame(p, mx, mn)) >= 0) {
        return config_fail(p, p->mark[who],
                           "key 'autoscaler.%s': value '%u' conflicts: max_nodes (%u) must be at "
                           "least min_nodes (%u)",
                           config_opts[who].name,
                           (size_t)who == mx ? c->autoscaler.max_nodes : c->autoscaler.min_nodes,
                           c->autoscaler.max_nodes, c->autoscaler.min_nodes);
    }
    int active = strcmp(c->autoscaler.provider, "none") != 0;
    if (active && c->autoscaler.max_nodes == 0 && (who = config_blame(p, mx, prov)) >= 0) {
        return config_fail(p, p->mark[who],
                           "key 'autoscaler.max_nodes': must be at least 1 when provider is "
                           "'%s' (it is %u)",
                           c->autoscaler.provider, c->autoscaler.max_nodes);
    }
    if (strcmp(c->autoscaler.provider, "command") == 0) {
        const char *missing = c->autoscaler.command_launch == NULL      ? "launch"
                              : c->autoscaler.command_terminate == NULL ? "terminate"
                                                                        : NULL;
        if (missing != NULL) {
            return config_fail(p, p->mark[prov],
                               "key 'autoscaler.provider': value 'command' needs "
                               "autoscaler.command.%s",
                               missing);
        }
    }
    if (p->fallback != NULL) {
        if (c->autoscaler.ntypes == 0) {
            return config_fail(p, p->fallback->start_mark,
                               "key 'autoscaler.fallback': there are no autoscaler.node_types "
                               "to order");
        }
        hv_err rc = config_apply_fallback(p);
        if (rc != HV_OK) {
            return rc;
        }
    }
    uint64_t mins = 0;
    for (size_t i = 0; i < c->autoscaler.ntypes; i++) {
        hv_head_node_type_t *t = &c->autoscaler.types[i];
        if (t->max_nodes != UINT32_MAX && t->min_nodes > t->max_nodes) {
            return config_fail(p, p->type_marks[i],
                               "key 'autoscaler.node_types.%s': min_nodes (%u) is above "
                               "max_nodes (%u)",
                               t->name, t->min_nodes, t->max_nodes);
        }
        mins += t->min_nodes;
    }
    if (mins > c->autoscaler.max_nodes && c->autoscaler.ntypes > 0) {
        return config_fail(p, p->mark[config_opt_index("autoscaler", "node_types")],
                           "key 'autoscaler.node_types': the types' min_nodes add up to %llu, "
                           "above autoscaler.max_nodes (%u)",
                           (unsigned long long)mins, c->autoscaler.max_nodes);
    }
    if ((rc = config_check_durable(p)) != HV_OK) {
        return rc;
    }
    size_t bmin = config_opt_index("autoscaler.spot_sim", "boot_min_ms");
    size_t bmax = config_opt_index("autoscaler.spot_sim", "boot_max_ms");
    if (c->autoscaler.spot_sim.boot_max_ms < c->autoscaler.spot_sim.boot_min_ms &&
        (who = config_blame(p, bmax, bmin)) >= 0) {
        return config_fail(p, p->mark[who],
                           "key 'autoscaler.spot_sim.%s': boot_max_ms (%u) must be at least "
                           "boot_min_ms (%u)",
                           config_opts[who].name, c->autoscaler.spot_sim.boot_max_ms,
                           c->autoscaler.spot_sim.boot_min_ms);
    }
    return HV_OK;
}

/* After the file (or with no file): each type's defaults that depend on other keys, and the one
 * implicit type when node_types was not given. */
static hv_err config_finish_types(hv_head_config_t *c) {
    if (c->autoscaler.ntypes == 0) {
        int spot = strcmp(c->autoscaler.provider, "spot-sim") == 0;
        c->autoscaler.types = hv_calloc(1, sizeof(*c->autoscaler.types));
        if (c->autoscaler.types == NULL ||
            (c->autoscaler.types[0].name = hv_strdup(spot ? "spot" : "local")) == NULL) {
            return HV_ENOMEM;
        }
        c->autoscaler.ntypes = 1;
        c->autoscaler.types[0].slots = c->autoscaler.local_slots;
        c->autoscaler.types[0].preemptible = spot;
        c->autoscaler.types[0].max_nodes = UINT32_MAX;
        c->autoscaler.types[0].ondemand_price_per_hour = -1;
    }
    for (size_t i = 0; i < c->autoscaler.ntypes; i++) {
        hv_head_node_type_t *t = &c->autoscaler.types[i];
        if (t->max_nodes == UINT32_MAX) {
            t->max_nodes = c->autoscaler.max_nodes;
            if (t->max_nodes < t->min_nodes) {
                t->max_nodes = t->min_nodes;
            }
        }
        if (t->ondemand_price_per_hour < 0) {
            t->ondemand_price_per_hour = t->preemptible ? 0 : t->price_per_hour;
        }
    }
    return HV_OK;
}

/* Line and column (0-based) of a byte offset, for libyaml reader errors that give only one. */
static yaml_mark_t config_offset_mark(const char *buf, size_t len, size_t off) {
    yaml_mark_t m = {0};
    for (size_t i = 0; i < off && i < len; i++) {
        if (buf[i] == '\n') {
            m.line++;
            m.column = 0;
        } else {
            m.column++;
        }
    }
    m.index = off;
    return m;
}

/* libyaml's problem texts (its own terms: tokens, scalars, indicators) and what they mean to
 * someone editing the file. Matched by prefix; the first match wins. */
static const struct {
    const char *problem;
    const char *context; /* NULL: any */
    const char *words;
} config_yaml_words[] = {
    {"found character that cannot start any token", NULL,
     "a character that cannot start a value here (YAML indents with spaces, not tabs; quote "
     "values that start with '@', '`' or '%')"},
    {"found a tab character", NULL, "a tab character: YAML indents with spaces only"},
    {"mapping values are not allowed", NULL,
     "a ':' where no 'key: value' can start (a missing line break, or a value containing ': ' "
     "that needs quotes)"},
    {"block sequence entries are not allowed", NULL,
     "a '- item' where it cannot start (put a list on its own lines under its key)"},
    {"did not find expected ',' or ']'", NULL, "a '[' list that is not closed with ']'"},
    {"did not find expected ',' or '}'", NULL, "a '{' map that is not closed with '}'"},
    {"did not find expected '-' indicator", NULL,
     "bad indentation: a list item without '-', or a line indented differently from the items "
     "above it"},
    {"did not find expected key", NULL,
     "bad indentation: expected a 'key: value' line indented like the keys above it"},
    {"could not find expected ':'", NULL, "a key without ':' (expected 'key: value')"},
    {"found unexpected end of stream", "while scanning a quoted scalar",
     "a quoted string that is never closed"},
    {"found unexpected end of stream", NULL, "the file ends in the middle of a value"},
    {"found undefined alias", NULL, "an alias (*name) without a matching anchor (&name) before it"},
    {"found unknown escape character", NULL,
     "an unknown escape sequence ('\\' followed by a letter) in a double-quoted string"},
    {"found unexpected document indicator", NULL, "a '---' or '...' line inside a quoted string"},
    {"did not find URI escaped octet", NULL, "a bad '%' escape in a tag"},
    {"found undefined tag handle", NULL, "an unknown '!' tag"},
    {"control characters are not allowed", NULL, "a control character (not text)"},
    {"invalid leading UTF-8 octet", NULL, "bytes that are not UTF-8 text"},
    {"invalid trailing UTF-8 octet", NULL, "bytes that are not UTF-8 text"},
    {"incomplete UTF-8 octet sequence", NULL, "bytes that are not UTF-8 text"},
    {"invalid Unicode character", NULL, "bytes that are not UTF-8 text"},
    {"found incompatible YAML document", NULL, "a %YAML directive for an unsupported version"},
};

/* What a libyaml problem means in the file's terms, or NULL when it is not one we know. */
static const char *config_yaml_words_for(const char *problem, const char *context) {
    if (problem == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(config_yaml_words) / sizeof(config_yaml_words[0]); i++) {
        if (strncmp(problem, config_yaml_words[i].problem, strlen(config_yaml_words[i].problem)) ==
                0 &&
            (config_yaml_words[i].context == NULL ||
             (context != NULL && strcmp(context, config_yaml_words[i].context) == 0))) {
            return config_yaml_words[i].words;
        }
    }
    return NULL;
}

/* Turns a libyaml parser failure into a positioned message in the user's terms: what is wrong
 * at FILE:LINE:COL and, when the construct that is broken began earlier, where it began. Only a
 * problem libyaml reports that the table above does not know keeps libyaml's own text. */
static hv_err config_yaml_error(config_parse_t *p, yaml_parser_t *parser, const char *buf,
                                size_t len) {
    const char *words = config_yaml_words_for(parser->problem, parser->context);
    size_t at = parser->problem_mark.index;
    if (parser->error == YAML_SCANNER_ERROR && at < len && buf[at] == '\t') {
        words = "a tab character: YAML indents with spaces only";
    }
    const char *what = words != NULL ? words : parser->problem ? parser->problem : "bad input";
    switch (parser->error) {
    case YAML_MEMORY_ERROR:
        hv_errf(p->err, p->errlen, "%s: out of memory while parsing", p->path);
        return HV_ENOMEM;
    case YAML_READER_ERROR:
        return config_fail(p, config_offset_mark(buf, len, parser->problem_offset),
                           "not valid YAML: %s", what);
    case YAML_SCANNER_ERROR:
    case YAML_PARSER_ERROR:
    case YAML_COMPOSER_ERROR:
        if (parser->context != NULL && parser->context_mark.line != parser->problem_mark.line) {
            return config_fail(p, parser->problem_mark,
                               "not valid YAML: %s (it starts at line %zu)", what,
                               parser->context_mark.line + 1);
        }
        return config_fail(p, parser->problem_mark, "not valid YAML: %s", what);
    default:
        return config_fail(p, parser->problem_mark, "not valid YAML");
    }
}

/* Reads a whole small file into an owned NUL-terminated buffer. what names it in messages
 * ("cluster.yaml" or "key 'token_file': file '/etc/hv/token'"). */
static hv_err config_slurp(const char *path, size_t max, const char *what, char **out,
                           size_t *len_out, struct stat *st_out, char *err, size_t errlen) {
    hv_err rc = HV_OK;
    char *buf = NULL;
    size_t len = 0;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        hv_errf(err, errlen, "%s: cannot open: %s", what, strerror(e));
        return e == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    if (fstat(fd, &st) != 0) {
        hv_errf(err, errlen, "%s: cannot read: %s", what, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        hv_errf(err, errlen, "%s: cannot read: %s", what,
                S_ISDIR(st.st_mode) ? "Is a directory" : "not a regular file");
        rc = HV_EIO;
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        hv_errf(err, errlen, "%s: file is larger than %zu bytes", what, max);
        rc = HV_EINVAL;
        goto out;
    }
    if ((buf = hv_malloc((size_t)st.st_size + 1)) == NULL) {
        hv_errf(err, errlen, "%s: out of memory", what);
        rc = HV_ENOMEM;
        goto out;
    }
    /* Read what is there now; a file growing under us is cut at the size fstat saw. */
    while (len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            hv_errf(err, errlen, "%s: cannot read: %s", what, strerror(errno));
            rc = HV_EIO;
            goto out;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
    *len_out = len;
    if (st_out != NULL) {
        *st_out = st;
    }
out:
    hv_free(buf);
    close(fd);
    return rc;
}

/* Parses the file at p->path into p->cfg. */
/* Parses the file p->path, or text/text_len when text is not NULL (p->path names it). */
static hv_err config_parse_file(config_parse_t *p, const char *text, size_t text_len) {
    hv_err rc;
    char *buf = NULL;
    size_t len = 0;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_parser = 0, have_doc = 0;

    if (text != NULL) {
        if (text_len > CONFIG_MAX_FILE) {
            hv_errf(p->err, p->errlen, "%s: larger than %u bytes", p->path,
                    (unsigned)CONFIG_MAX_FILE);
            return HV_ETOOBIG;
        }
        if ((buf = hv_malloc(text_len + 1)) == NULL) {
            hv_errf(p->err, p->errlen, "%s: out of memory", p->path);
            return HV_ENOMEM;
        }
        memcpy(buf, text, text_len);
        buf[text_len] = '\0';
        len = text_len;
    } else if ((rc = config_slurp(p->path, CONFIG_MAX_FILE, p->path, &buf, &len, NULL, p->err,
                                  p->errlen)) != HV_OK) {
        return rc;
    }
    if (!yaml_parser_initialize(&parser)) {
        hv_errf(p->err, p->errlen, "%s: out of memory", p->path);
        rc = HV_ENOMEM;
        goto out;
    }
    have_parser = 1;
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = config_yaml_error(p, &parser, buf, len);
        goto out;
    }
    have_doc = 1;
    p->doc = &doc;

    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root == NULL || config_is_null(root)) {
        rc = HV_OK; // an empty file (or only comments): all defaults
    } else if (root->type != YAML_MAPPING_NODE) {
        rc = config_fail(p, root->start_mark,
                         "expected a mapping of settings (key: value) at the top level, got %s",
                         config_node_kind(root));
        goto out;
    } else if ((rc = config_walk(p, root, "")) != HV_OK) {
        goto out;
    }

    /* A second document would be silently ignored by a reader that stops at the first. */
    if (!yaml_parser_load(&parser, &extra)) {
        rc = config_yaml_error(p, &parser, buf, len);
        goto out;
    }
    yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
    if (extra_root != NULL) {
        rc = config_fail(p, extra.start_mark, "only one YAML document is allowed");
    }
    yaml_document_delete(&extra);
    if (rc != HV_OK) {
        goto out;
    }
    rc = config_cross_check(p);
out:
    if (have_doc) {
        yaml_document_delete(&doc);
    }
    if (have_parser) {
        yaml_parser_delete(&parser);
    }
    hv_free(buf);
    return rc;
}

/* ---- public -------------------------------------------------------------------------------- */

void hv_head_config_defaults(hv_head_config_t *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->cluster_name = hv_strdup("hv");
    cfg->listen = hv_strdup("127.0.0.1:7000");
    cfg->data_dir = hv_strdup("./hv-data");
    cfg->heartbeat_ms = 1000;
    cfg->lease_ms = 10000;
    cfg->suspect_grace_ms = 500;
    cfg->log_level = HV_LOG_NOTICE;
    cfg->max_upload_bytes = 1ull << 30;
    cfg->actor_state_max = 256ull << 20;
    cfg->upload_quota_bytes = 4ull << 30;
    cfg->upload_timeout_s = 3600;
    cfg->kill_grace_ms = 5000;
    cfg->job_wait_timeout_s = 600;
    cfg->logs.max_job_bytes = 256ull << 20;
    cfg->logs.max_total_bytes = 4ull << 30;
    cfg->logs.reserve_free_bytes = 256ull << 20;
    cfg->history.prune_interval_s = 600;
    cfg->history.artifact_grace_s = 3600;
    cfg->limits.handshake_timeout_ms = 10000;
    cfg->elastic.elastic_timeout_s = 600;
    cfg->elastic.max_resets = 100;
    cfg->elastic.blacklist_cooldown_s = 60;
    cfg->elastic.blacklist_max_cooldown_s = 3600;
    cfg->elastic.rendezvous_timeout_s = 60;
    cfg->elastic.check_every = 1;
    cfg->elastic.blacklist_max_strikes = 5;
    cfg->fleet.resize_interval_ms = HV_FL_INTERVAL_MS;
    cfg->fleet.reset_ms = HV_FL_RESET_MS;
    cfg->fleet.starve_ms = HV_FL_STARVE_MS;
    cfg->fleet.age_ms = HV_FL_AGE_MS;
    cfg->fleet.reserve_pct = 0;
    cfg->fleet.reserve_priority = 1;
    cfg->autoscaler.provider = hv_strdup("none");
    cfg->autoscaler.min_nodes = 0;
    cfg->autoscaler.max_nodes = 0;
    cfg->autoscaler.idle_timeout_s = 300;
    cfg->autoscaler.local_slots = 2;
    cfg->autoscaler.upscaling_speed = 1.0;
    cfg->autoscaler.launch_timeout_s = 300;
    cfg->autoscaler.max_launch_failures = 3;
    cfg->autoscaler.set_aside_s = 300;
    cfg->autoscaler.handback = 1;
    cfg->autoscaler.spare_nodes = 1;
    cfg->autoscaler.spare_window_s = 3600;
    cfg->autoscaler.spot_sim.seed = 1;
    cfg->autoscaler.spot_sim.boot_min_ms = 1000;
    cfg->autoscaler.spot_sim.boot_max_ms = 3000;
    cfg->autoscaler.spot_sim.notice_s = 30;
    cfg->durable.interval_s = 60;
    cfg->durable.timeout_s = 600;
}

static hv_err config_load(const char *path, const char *text, size_t text_len,
                          hv_head_config_t *cfg, char *err, size_t errlen) {
    hv_err rc = HV_OK;
    hv_head_config_t tmp;
    config_parse_t *p = NULL;

    hv_head_config_defaults(&tmp);
    if (tmp.cluster_name == NULL || tmp.listen == NULL || tmp.data_dir == NULL ||
        tmp.autoscaler.provider == NULL) {
        hv_errf(err, errlen, "%s: out of memory", path != NULL ? path : "config");
        rc = HV_ENOMEM;
        goto fail;
    }
    if (path != NULL) {
        /* The walk state holds a mark per key: keep it off the stack. */
        if ((tmp.path = hv_strdup(path)) == NULL || (p = hv_calloc(1, sizeof(*p))) == NULL) {
            hv_errf(err, errlen, "%s: out of memory", path);
            rc = HV_ENOMEM;
            goto fail;
        }
        p->path = path;
        p->err = err;
        p->errlen = errlen;
        p->cfg = &tmp;
        if ((rc = config_parse_file(p, text, text_len)) != HV_OK) {
            goto fail;
        }
        hv_free(p->type_marks);
        hv_free(p);
        p = NULL;
    }
    if ((rc = config_finish_types(&tmp)) != HV_OK) {
        hv_errf(err, errlen, "%s: out of memory", path != NULL ? path : "config");
        goto fail;
    }
    *cfg = tmp;
    return HV_OK;
fail:
    if (p != NULL) {
        hv_free(p->type_marks);
    }
    hv_free(p);
    hv_head_config_fini(&tmp);
    return rc;
}

hv_err hv_head_config_load(const char *path, hv_head_config_t *cfg, char *err, size_t errlen) {
    return config_load(path, NULL, 0, cfg, err, errlen);
}

hv_err hv_head_config_parse(const char *name, const char *text, size_t len, hv_head_config_t *cfg,
                            char *err, size_t errlen) {
    return config_load(name != NULL ? name : "config", text != NULL ? text : "", len, cfg, err,
                       errlen);
}

/* Reads a token file: one token, surrounding whitespace trimmed. what names it in messages. */
static hv_err config_read_token(const char *path, const char *what, const char *noun, char **out,
                                char *err, size_t errlen) {
    hv_err rc;
    char *buf = NULL;
    size_t len = 0;
    struct stat st;
    if ((rc = config_slurp(path, CONFIG_MAX_TOKEN, what, &buf, &len, &st, err, errlen)) != HV_OK) {
        return rc;
    }
    size_t b = 0, e = len;
    while (b < e && (buf[b] == ' ' || buf[b] == '\t' || buf[b] == '\r' || buf[b] == '\n')) {
        b++;
    }
    while (e > b &&
           (buf[e - 1] == ' ' || buf[e - 1] == '\t' || buf[e - 1] == '\r' || buf[e - 1] == '\n')) {
        e--;
    }
    if (b == e) {
        hv_errf(err, errlen, "%s: the file is empty; put the %s in it", what, noun);
        rc = HV_EINVAL;
        goto out;
    }
    for (size_t i = b; i < e; i++) {
        if ((unsigned char)buf[i] <= 0x20 || buf[i] == 0x7f) {
            hv_errf(err, errlen,
                    "%s: the token must be one word without whitespace or control "
                    "characters",
                    what);
            rc = HV_EINVAL;
            goto out;
        }
    }
    if ((st.st_mode & 077) != 0) {
        HV_LOG(HV_LOG_WARN, "config", "HV-CFG-TOKEN-PERMS",
               "token file %s is readable by group or others (mode %03o); chmod 600 it", path,
               (unsigned)(st.st_mode & 0777));
    }
    char *tok = hv_strndup(buf + b, e - b);
    if (tok == NULL) {
        hv_errf(err, errlen, "%s: out of memory", what);
        rc = HV_ENOMEM;
        goto out;
    }
    *out = tok;
out:
    if (buf != NULL) {
        memset(buf, 0, len); // the token is a secret: do not leave copies in freed memory
    }
    hv_free(buf);
    return rc;
}

/* mkdir -p path, each created level with mode. */
static hv_err config_mkdirs(const char *path, mode_t mode, char *err, size_t errlen) {
    char *dup = hv_strdup(path);
    hv_err rc = HV_OK;
    if (dup == NULL) {
        hv_errf(err, errlen, "data_dir '%s': out of memory", path);
        return HV_ENOMEM;
    }
    for (char *s = dup + 1;; s++) {
        if (*s != '/' && *s != '\0') {
            continue;
        }
        char c = *s;
        *s = '\0';
        if (mkdir(dup, mode) != 0 && errno != EEXIST) {
            hv_errf(err, errlen, "data_dir '%s': cannot create '%s': %s", path, dup,
                    strerror(errno));
            rc = HV_EIO;
            break;
        }
        *s = c;
        if (c == '\0') {
            break;
        }
    }
    struct stat st;
    if (rc == HV_OK && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        hv_errf(err, errlen, "data_dir '%s': not a directory", path);
        rc = HV_EIO;
    }
    hv_free(dup);
    return rc;
}

/* Writes a new random token to path unless a token file is already there. Creation is atomic:
 * the token goes to a temporary file first and is linked into place, so two heads starting at
 * once agree on one token and a reader never sees a half-written file. */
static hv_err config_create_token(const char *path, char *err, size_t errlen) {
    hv_err rc = HV_OK;
    uint8_t raw[CONFIG_TOKEN_BYTES];
    char text[2 * CONFIG_TOKEN_BYTES + 2];
    size_t tmplen = strlen(path) + 32;
    char *tmp = hv_malloc(tmplen);
    int fd = -1;

    if (tmp == NULL) {
        hv_errf(err, errlen, "token file '%s': out of memory", path);
        return HV_ENOMEM;
    }
    for (size_t got = 0; got < sizeof(raw);) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            hv_errf(err, errlen, "token file '%s': no random bytes: %s", path, strerror(errno));
            rc = HV_EIO;
            goto out;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++) {
        snprintf(text + 2 * i, 3, "%02x", raw[i]);
    }
    text[2 * sizeof(raw)] = '\n';
    text[2 * sizeof(raw) + 1] = '\0';

    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp); // a leftover from a crashed start of this pid
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
        hv_errf(err, errlen, "token file '%s': cannot create: %s", tmp, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    size_t want = strlen(text);
    if (write(fd, text, want) != (ssize_t)want || fsync(fd) != 0) {
        hv_errf(err, errlen, "token file '%s': cannot write: %s", tmp, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    if (link(tmp, path) != 0 && errno != EEXIST) {
        hv_errf(err, errlen, "token file '%s': cannot create: %s", path, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
out:
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    memset(raw, 0, sizeof(raw));
    memset(text, 0, sizeof(text));
    hv_free(tmp);
    return rc;
}

hv_err hv_head_config_resolve_token(hv_head_config_t *cfg, char *err, size_t errlen) {
    hv_err rc;
    char what[512];
    char *tok = NULL;
    char *path = NULL;
    const char *src = cfg->path != NULL ? cfg->path : "config";

    if (cfg->token != NULL) {
        return HV_OK;
    }
    if (cfg->token_file != NULL) {
        snprintf(what, sizeof(what), "%s: key 'token_file': file '%s'", src, cfg->token_file);
        if ((rc = config_read_token(cfg->token_file, what, "join token", &tok, err, errlen)) !=
            HV_OK) {
            return rc;
        }
        cfg->token = tok;
        return HV_OK;
    }

    size_t plen = strlen(cfg->data_dir) + sizeof("/token");
    if ((path = hv_malloc(plen)) == NULL) {
        hv_errf(err, errlen, "%s: out of memory", src);
        return HV_ENOMEM;
    }
    snprintf(path, plen, "%s/token", cfg->data_dir);
    snprintf(what, sizeof(what), "token file '%s'", path);
    struct stat st;
    int existed = stat(path, &st) == 0;
    if (!existed) {
        if ((rc = config_mkdirs(cfg->data_dir, 0700, err, errlen)) != HV_OK ||
            (rc = config_create_token(path, err, errlen)) != HV_OK) {
            goto fail;
        }
    }
    if ((rc = config_read_token(path, what, "join token", &tok, err, errlen)) != HV_OK) {
        goto fail;
    }
    if (!existed) {
        HV_LOG(HV_LOG_NOTICE, "config", "HV-CFG-TOKEN-NEW",
               "no token configured: generated a join token in %s", path);
    }
    cfg->token = tok;
    cfg->token_file = path;
    return HV_OK;
fail:
    hv_free(path);
    return rc;
}

hv_err hv_head_config_metrics_token(const hv_head_config_t *cfg, char **out, char *err,
                                    size_t errlen) {
    *out = NULL;
    if (cfg->metrics.token_file == NULL) {
        return HV_OK;
    }
    char what[CONFIG_VALUE_SHOW + 64];
    char shown[CONFIG_VALUE_SHOW + 8];
    snprintf(what, sizeof(what), "key 'metrics.token_file': file '%s'",
             config_show(cfg->metrics.token_file, shown, sizeof(shown)));
    return config_read_token(cfg->metrics.token_file, what, "metrics token", out, err, errlen);
}

int hv_head_config_plain_text_exposed(const hv_head_config_t *cfg) {
    return cfg->tls.cert == NULL && !hv_rpc_target_is_loopback(cfg->listen);
}

const hv_head_ns_t *hv_head_config_ns(const hv_head_config_t *cfg, const char *name) {
    if (name == NULL || name[0] == '\0') {
        name = "default";
    }
    for (size_t i = 0; i < cfg->fleet.nns; i++) {
        if (strcmp(cfg->fleet.ns[i].name, name) == 0) {
            return &cfg->fleet.ns[i];
        }
    }
    return NULL;
}

size_t hv_head_config_ns_index(const hv_head_config_t *cfg, const char *name) {
    const hv_head_ns_t *n = hv_head_config_ns(cfg, name);
    if (n == NULL) {
        n = hv_head_config_ns(cfg, "default");
    }
    return n != NULL ? (size_t)(n - cfg->fleet.ns) : cfg->fleet.nns;
}

const char *hv_head_config_ns_name(const hv_head_config_t *cfg, size_t i) {
    return i < cfg->fleet.nns ? cfg->fleet.ns[i].name : "default";
}

void hv_head_config_fini(hv_head_config_t *cfg) {
    if (cfg == NULL) {
        return;
    }
    if (cfg->token != NULL) {
        memset(cfg->token, 0, strlen(cfg->token));
    }
    hv_free(cfg->path);
    hv_free(cfg->cluster_name);
    hv_free(cfg->listen);
    hv_free(cfg->advertise);
    hv_free(cfg->data_dir);
    hv_free(cfg->token);
    hv_free(cfg->token_file);
    hv_free(cfg->autoscaler.provider);
    hv_free(cfg->autoscaler.command_launch);
    hv_free(cfg->autoscaler.command_terminate);
    hv_free(cfg->autoscaler.command_list);
    hv_free(cfg->autoscaler.spot_sim.trace);
    hv_free(cfg->durable.dir);
    hv_free(cfg->durable.upload);
    hv_free(cfg->durable.download);
    hv_free(cfg->durable.remove);
    for (size_t i = 0; i < cfg->autoscaler.ntypes; i++) {
        hv_free(cfg->autoscaler.types[i].name);
        hv_free(cfg->autoscaler.types[i].labels);
    }
    hv_free(cfg->autoscaler.types);
    for (size_t i = 0; i < cfg->fleet.nns; i++) {
        hv_free(cfg->fleet.ns[i].name);
    }
    hv_free(cfg->fleet.ns);
    hv_free(cfg->metrics.listen);
    hv_free(cfg->metrics.token_file);
    hv_free(cfg->tls.cert);
    hv_free(cfg->tls.key);
    hv_free(cfg->tls.ca);
    memset(cfg, 0, sizeof(*cfg));
}
