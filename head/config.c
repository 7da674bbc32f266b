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
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "log.h"
#include "mem.h"

#define CONFIG_MAX_FILE (1024 * 1024) // a config file larger than this is a mistake
#define CONFIG_MAX_TOKEN 4096         // bytes read from a token file
#define CONFIG_TOKEN_BYTES 16         // random bytes in a generated token (32 hex digits)
#define CONFIG_VALUE_SHOW 64          // bytes of a value quoted in an error message

/* What a key holds; decides how its scalar is parsed and checked. */
typedef enum config_type {
    CFG_MAP,      // a section: a mapping of further keys
    CFG_NAME,     // required name: letters, digits, '.', '_', '-'; 1..63 bytes
    CFG_STR,      // required non-empty string
    CFG_STR_OPT,  // string; empty or null = unset (NULL)
    CFG_TOKEN,    // optional secret: no whitespace; never echoed in messages
    CFG_LISTEN,   // required HOST:PORT, port 0..65535 (0 = pick one, for tests)
    CFG_ADDR_OPT, // optional HOST:PORT, port 1..65535
    CFG_U32,      // decimal integer in [min, max]
    CFG_SIZE,     // byte size with optional unit, in [min, max]
    CFG_LOGLEVEL, // error|warn|notice|info|debug
    CFG_PROVIDER, // none|local|command|spot-sim
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
    {"", "log_level", CFG_LOGLEVEL, CFG_OFF(log_level), 0, 0},
    {"", "max_upload", CFG_SIZE, CFG_OFF(max_upload_bytes), 1024, 64ull << 30},
    {"", "kill_grace_ms", CFG_U32, CFG_OFF(kill_grace_ms), 0, 600000},
    {"", "job_wait_timeout_s", CFG_U32, CFG_OFF(job_wait_timeout_s), 1, 604800},
    {"", "elastic", CFG_MAP, 0, 0, 0},
    {"elastic", "elastic_timeout_s", CFG_U32, CFG_OFF(elastic.elastic_timeout_s), 1, 604800},
    {"elastic", "max_resets", CFG_U32, CFG_OFF(elastic.max_resets), 0, 1000000},
    {"elastic", "blacklist_cooldown_s", CFG_U32, CFG_OFF(elastic.blacklist_cooldown_s), 0, 604800},
    {"elastic", "blacklist_max_cooldown_s", CFG_U32, CFG_OFF(elastic.blacklist_max_cooldown_s), 0,
     604800},
    {"elastic", "rendezvous_timeout_s", CFG_U32, CFG_OFF(elastic.rendezvous_timeout_s), 1, 3600},
    {"elastic", "check_every", CFG_U32, CFG_OFF(elastic.check_every), 1, 1000000},
    {"elastic", "blacklist_max_strikes", CFG_U32, CFG_OFF(elastic.blacklist_max_strikes), 0, 1000},
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
};

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
} config_parse_t;

/* ---- messages ------------------------------------------------------------------------------ */

static void config_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void config_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

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
    int overflow = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10) {
            overflow = 1;
        } else {
            v = v * 10 + d;
        }
    }
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
    int overflow = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10) {
            overflow = 1;
        } else {
            v = v * 10 + d;
        }
    }
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

/* Parses the scalar value node n of option o into the config. */
static hv_err config_apply(config_parse_t *p, const config_opt_t *o, const yaml_node_t *n) {
    char key[96], shown[CONFIG_VALUE_SHOW + 8];
    config_key_name(o->section, o->name, key, sizeof(key));
    if (n->type != YAML_SCALAR_NODE) {
        return config_fail(p, n->start_mark, "key '%s': expected a scalar, got %s", key,
                           config_node_kind(n));
    }
    int null = config_is_null(n);
    const char *v = null ? "" : (const char *)n->data.scalar.value;
    config_show(v, shown, sizeof(shown));
    yaml_mark_t at = n->start_mark;
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
        r = config_parse_uint(v, &num);
        if (r < 0) {
            return config_fail(p, at, "key '%s': value '%s' is not an integer", key, shown);
        }
        if (r > 0 || num < o->min || num > o->max) {
            return config_fail(p, at, "key '%s': value '%s' is out of range (%llu..%llu)", key,
                               shown, (unsigned long long)o->min, (unsigned long long)o->max);
        }
        *(uint32_t *)((char *)p->cfg + o->off) = (uint32_t)num;
        return HV_OK;
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
    case CFG_MAP:
        break;
    }
    return HV_EINTERNAL;
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

        for (yaml_node_pair_t *prev = map->data.mapping.pairs.start; prev < pair; prev++) {
            yaml_node_t *pk = yaml_document_get_node(p->doc, prev->key);
            if (pk != NULL && pk->type == YAML_SCALAR_NODE &&
                strcmp((const char *)pk->data.scalar.value, name) == 0) {
                return config_fail(p, k->start_mark, "duplicate key '%s' (first given at line %zu)",
                                   key, pk->start_mark.line + 1);
            }
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

/* Rules that involve more than one key. Run after the whole file is applied. */
static hv_err config_cross_check(config_parse_t *p) {
    hv_head_config_t *c = p->cfg;
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

/* Turns a libyaml parser failure into a positioned message. */
static hv_err config_yaml_error(config_parse_t *p, yaml_parser_t *parser, const char *buf,
                                size_t len) {
    switch (parser->error) {
    case YAML_MEMORY_ERROR:
        config_errf(p->err, p->errlen, "%s: out of memory while parsing", p->path);
        return HV_ENOMEM;
    case YAML_READER_ERROR:
        return config_fail(p, config_offset_mark(buf, len, parser->problem_offset),
                           "YAML error: %s", parser->problem ? parser->problem : "bad input");
    case YAML_SCANNER_ERROR:
    case YAML_PARSER_ERROR:
    case YAML_COMPOSER_ERROR:
        if (parser->context != NULL) {
            return config_fail(p, parser->problem_mark, "YAML syntax error: %s (%s at line %zu)",
                               parser->problem ? parser->problem : "bad input", parser->context,
                               parser->context_mark.line + 1);
        }
        return config_fail(p, parser->problem_mark, "YAML syntax error: %s",
                           parser->problem ? parser->problem : "bad input");
    default:
        return config_fail(p, parser->problem_mark, "YAML error");
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
        config_errf(err, errlen, "%s: cannot open: %s", what, strerror(e));
        return e == ENOENT ? HV_ENOTFOUND : HV_EIO;
    }
    if (fstat(fd, &st) != 0) {
        config_errf(err, errlen, "%s: cannot read: %s", what, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        config_errf(err, errlen, "%s: cannot read: %s", what,
                    S_ISDIR(st.st_mode) ? "Is a directory" : "not a regular file");
        rc = HV_EIO;
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        config_errf(err, errlen, "%s: file is larger than %zu bytes", what, max);
        rc = HV_EINVAL;
        goto out;
    }
    if ((buf = hv_malloc((size_t)st.st_size + 1)) == NULL) {
        config_errf(err, errlen, "%s: out of memory", what);
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
            config_errf(err, errlen, "%s: cannot read: %s", what, strerror(errno));
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
static hv_err config_parse_file(config_parse_t *p) {
    hv_err rc;
    char *buf = NULL;
    size_t len = 0;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_parser = 0, have_doc = 0;

    if ((rc = config_slurp(p->path, CONFIG_MAX_FILE, p->path, &buf, &len, NULL, p->err,
                           p->errlen)) != HV_OK) {
        return rc;
    }
    if (!yaml_parser_initialize(&parser)) {
        config_errf(p->err, p->errlen, "%s: out of memory", p->path);
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
    cfg->listen = hv_strdup("0.0.0.0:7000");
    cfg->data_dir = hv_strdup("./hv-data");
    cfg->heartbeat_ms = 1000;
    cfg->lease_ms = 10000;
    cfg->log_level = HV_LOG_NOTICE;
    cfg->max_upload_bytes = 1ull << 30;
    cfg->kill_grace_ms = 5000;
    cfg->job_wait_timeout_s = 600;
    cfg->elastic.elastic_timeout_s = 600;
    cfg->elastic.max_resets = 3;
    cfg->elastic.blacklist_cooldown_s = 60;
    cfg->elastic.blacklist_max_cooldown_s = 3600;
    cfg->elastic.rendezvous_timeout_s = 60;
    cfg->elastic.check_every = 1;
    cfg->elastic.blacklist_max_strikes = 5;
    cfg->autoscaler.provider = hv_strdup("none");
    cfg->autoscaler.min_nodes = 0;
    cfg->autoscaler.max_nodes = 0;
    cfg->autoscaler.idle_timeout_s = 300;
    cfg->autoscaler.local_slots = 2;
}

hv_err hv_head_config_load(const char *path, hv_head_config_t *cfg, char *err, size_t errlen) {
    hv_err rc = HV_OK;
    hv_head_config_t tmp;
    config_parse_t *p = NULL;

    hv_head_config_defaults(&tmp);
    if (tmp.cluster_name == NULL || tmp.listen == NULL || tmp.data_dir == NULL ||
        tmp.autoscaler.provider == NULL) {
        config_errf(err, errlen, "%s: out of memory", path != NULL ? path : "config");
        rc = HV_ENOMEM;
        goto fail;
    }
    if (path != NULL) {
        /* The walk state holds a mark per key: keep it off the stack. */
        if ((tmp.path = hv_strdup(path)) == NULL || (p = hv_calloc(1, sizeof(*p))) == NULL) {
            config_errf(err, errlen, "%s: out of memory", path);
            rc = HV_ENOMEM;
            goto fail;
        }
        p->path = path;
        p->err = err;
        p->errlen = errlen;
        p->cfg = &tmp;
        if ((rc = config_parse_file(p)) != HV_OK) {
            goto fail;
        }
        hv_free(p);
    }
    *cfg = tmp;
    return HV_OK;
fail:
    hv_free(p);
    hv_head_config_fini(&tmp);
    return rc;
}

/* Reads a token file: one token, surrounding whitespace trimmed. what names it in messages. */
static hv_err config_read_token(const char *path, const char *what, char **out, char *err,
                                size_t errlen) {
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
        config_errf(err, errlen, "%s: the file is empty; put the join token in it", what);
        rc = HV_EINVAL;
        goto out;
    }
    for (size_t i = b; i < e; i++) {
        if ((unsigned char)buf[i] <= 0x20 || buf[i] == 0x7f) {
            config_errf(err, errlen,
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
        config_errf(err, errlen, "%s: out of memory", what);
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
        config_errf(err, errlen, "data_dir '%s': out of memory", path);
        return HV_ENOMEM;
    }
    for (char *s = dup + 1;; s++) {
        if (*s != '/' && *s != '\0') {
            continue;
        }
        char c = *s;
        *s = '\0';
        if (mkdir(dup, mode) != 0 && errno != EEXIST) {
            config_errf(err, errlen, "data_dir '%s': cannot create '%s': %s", path, dup,
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
        config_errf(err, errlen, "data_dir '%s': not a directory", path);
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
        config_errf(err, errlen, "token file '%s': out of memory", path);
        return HV_ENOMEM;
    }
    for (size_t got = 0; got < sizeof(raw);) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            config_errf(err, errlen, "token file '%s': no random bytes: %s", path, strerror(errno));
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
        config_errf(err, errlen, "token file '%s': cannot create: %s", tmp, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    size_t want = strlen(text);
    if (write(fd, text, want) != (ssize_t)want || fsync(fd) != 0) {
        config_errf(err, errlen, "token file '%s': cannot write: %s", tmp, strerror(errno));
        rc = HV_EIO;
        goto out;
    }
    if (link(tmp, path) != 0 && errno != EEXIST) {
        config_errf(err, errlen, "token file '%s': cannot create: %s", path, strerror(errno));
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
        if ((rc = config_read_token(cfg->token_file, what, &tok, err, errlen)) != HV_OK) {
            return rc;
        }
        cfg->token = tok;
        return HV_OK;
    }

    size_t plen = strlen(cfg->data_dir) + sizeof("/token");
    if ((path = hv_malloc(plen)) == NULL) {
        config_errf(err, errlen, "%s: out of memory", src);
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
    if ((rc = config_read_token(path, what, &tok, err, errlen)) != HV_OK) {
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
    memset(cfg, 0, sizeof(*cfg));
}
