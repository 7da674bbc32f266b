/* opt: one parser for the option tables of hv's tools (opt.h). */
#include "opt.h"

#include <string.h>

#include "util.h"

void hv_opt_init(hv_opt_iter_t *it, const hv_opt_t *opts, size_t nopts, unsigned flags,
                 uint32_t cmd, int argc, char **argv, int first) {
    memset(it, 0, sizeof(*it));
    it->opts = opts;
    it->nopts = nopts;
    it->flags = flags;
    it->cmd = cmd;
    it->argc = argc;
    it->argv = argv;
    it->next = first;
}

const hv_opt_t *hv_opt_find(const hv_opt_t *opts, size_t nopts, const char *name) {
    for (size_t i = 0; i < nopts; i++) {
        if (opts[i].name != NULL && strcmp(opts[i].name, name) == 0) {
            return &opts[i];
        }
    }
    return NULL;
}

/* The row named by the len bytes at name: a short name after one dash, else a long name (after
 * two dashes, or one with HV_OPT_ONE_DASH). */
static const hv_opt_t *opt_lookup(const hv_opt_iter_t *it, const char *name, size_t len,
                                  int two_dashes) {
    for (size_t i = 0; !two_dashes && len == 1 && i < it->nopts; i++) {
        if (it->opts[i].name != NULL && it->opts[i].short_name == name[0]) {
            return &it->opts[i];
        }
    }
    if (!two_dashes && !(it->flags & HV_OPT_ONE_DASH)) {
        return NULL;
    }
    for (size_t i = 0; len > 0 && i < it->nopts; i++) {
        const char *n = it->opts[i].name;
        if (n != NULL && strlen(n) == len && strncmp(n, name, len) == 0) {
            return &it->opts[i];
        }
    }
    return NULL;
}

hv_err hv_opt_parse_duration(const char *v, uint64_t min, uint64_t max, uint64_t *ms) {
    static const struct {
        char unit;
        uint64_t ms;
    } units[] = {{'s', 1000}, {'m', 60000}, {'h', 3600000}, {'d', 86400000}};
    char num[24];
    size_t n = strlen(v);
    uint64_t per = 1000, k = 0;
    if (n == 0 || n >= sizeof(num)) {
        return HV_EINVAL;
    }
    memcpy(num, v, n + 1);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (num[n - 1] == units[i].unit) {
            per = units[i].ms;
            num[--n] = '\0';
            break;
        }
    }
    if (hv_parse_u64(num, 0, max / per, &k) != HV_OK || k * per < min) {
        return HV_EINVAL;
    }
    *ms = k * per;
    return HV_OK;
}

/* Checks got->value against the row's bounds; fills got->num. */
static int opt_value_ok(const hv_opt_t *o, hv_opt_got_t *got) {
    const char *v = got->value;
    switch (o->kind) {
    case HV_OPT_TEXT: {
        size_t n = strlen(v);
        return o->max == 0 || (n >= o->min && n <= o->max);
    }
    case HV_OPT_UINT:
        return hv_parse_u64(v, o->min, o->max, &got->num) == HV_OK;
    case HV_OPT_DURATION:
        return hv_opt_parse_duration(v, o->min, o->max, &got->num) == HV_OK;
    default:
        return 1;
    }
}

static hv_opt_res opt_fault(hv_opt_got_t *got, hv_opt_fault why) {
    got->fault = why;
    return HV_OPT_FAULT;
}

hv_opt_res hv_opt_next(hv_opt_iter_t *it, hv_opt_got_t *got) {
    memset(got, 0, sizeof(*got));
    got->index = it->next;
    if (it->ended || it->next >= it->argc) {
        return HV_OPT_END;
    }
    const char *a = it->argv[it->next];
    got->arg = a;
    if (a[0] != '-' || a[1] == '\0') {
        if (it->flags & HV_OPT_FIRST_ARG) {
            it->ended = 1;
            return HV_OPT_REST;
        }
        it->next++;
        return HV_OPT_ARG;
    }
    it->next++;
    if (strcmp(a, "--") == 0 && (it->flags & HV_OPT_DASHDASH)) {
        it->ended = 1;
        got->index = it->next;
        return HV_OPT_REST;
    }
    int two = a[1] == '-';
    const char *name = a + (two ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    const hv_opt_t *o = opt_lookup(it, name, len, two);
    if (o == NULL) {
        return opt_fault(got, HV_OPT_UNKNOWN);
    }
    got->opt = o;
    if (it->cmd != 0 && o->cmds != 0 && !(o->cmds & it->cmd)) {
        return opt_fault(got, HV_OPT_WRONG_CMD);
    }
    if (o->kind == HV_OPT_FLAG) {
        return eq != NULL ? opt_fault(got, HV_OPT_NO_VALUE) : HV_OPT_OPTION;
    }
    if (eq != NULL) {
        got->value = eq + 1;
    } else if (it->next < it->argc) {
        got->value = it->argv[it->next++];
    } else {
        return opt_fault(got, HV_OPT_NEEDS_VALUE);
    }
    return opt_value_ok(o, got) ? HV_OPT_OPTION : opt_fault(got, HV_OPT_BAD_VALUE);
}

/* A bad value's message when the row gives none: made from its bounds. */
static void opt_bad_default(const hv_opt_got_t *got, char *buf, size_t len) {
    const hv_opt_t *o = got->opt;
    switch (o->kind) {
    case HV_OPT_TEXT:
        snprintf(buf, len, "--%s: expected %llu to %llu characters", o->name,
                 (unsigned long long)o->min, (unsigned long long)o->max);
        break;
    case HV_OPT_DURATION:
        snprintf(buf, len, "--%s '%s': expected a duration like 30s, 10m, 2h or 7d", o->name,
                 got->value);
        break;
    default:
        snprintf(buf, len, "--%s '%s': expected a number from %llu to %llu", o->name, got->value,
                 (unsigned long long)o->min, (unsigned long long)o->max);
        break;
    }
}

const char *hv_opt_fault_msg(const hv_opt_got_t *got, const char *cmd, char *buf, size_t len) {
    switch (got->fault) {
    case HV_OPT_UNKNOWN:
        snprintf(buf, len, "unknown option '%s'", got->arg);
        break;
    case HV_OPT_NEEDS_VALUE:
        snprintf(buf, len, "option '%s' needs a value", got->arg);
        break;
    case HV_OPT_NO_VALUE:
        snprintf(buf, len, "option '--%s' takes no value", got->opt->name);
        break;
    case HV_OPT_WRONG_CMD:
        snprintf(buf, len, "option '%s' does not go with '%s'", got->arg, cmd ? cmd : "");
        break;
    case HV_OPT_BAD_VALUE:
        if (got->opt->bad != NULL) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
            snprintf(buf, len, got->opt->bad, got->value); // the tool's own table
#pragma GCC diagnostic pop
        } else {
            opt_bad_default(got, buf, len);
        }
        break;
    default:
        snprintf(buf, len, "bad argument '%s'", got->arg ? got->arg : "");
        break;
    }
    return buf;
}

void hv_opt_help(FILE *f, const hv_opt_t *opts, size_t nopts, uint32_t cmd) {
    for (size_t i = 0; i < nopts; i++) {
        const hv_opt_t *o = &opts[i];
        if (o->help != NULL && (cmd == 0 || o->cmds == 0 || (o->cmds & cmd))) {
            fputs(o->help, f);
        }
    }
}
