/*
 * opt: the command-line options of hv's four tools (hvsubmit, hvctl, hvhead, hvagent), declared
 * as one table per tool (name, one-letter spelling, kind of value and its bounds, the commands
 * that take it, the tool's id, the message for a bad value, the lines of --help) and read by one
 * parser. The parser knows spellings and values, not meaning: it hands each option back with its
 * value checked against the table, and each argument that is no option, and reports a fault as a
 * code (unknown, needs a value, takes none, bad value, wrong command) that the tool turns into
 * its words. What an option means, and checks between options, stay with the tool. Pure: no
 * I/O but hv_opt_help's writes; an iterator belongs to its caller.
 *
 * Spellings every tool takes: --name, --name=value, --name value, -x (the row's short name; -x
 * value, -x=value). "-" alone is an argument, not an option.
 */
#ifndef HV_COMMON_OPT_H
#define HV_COMMON_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* What an option takes. */
typedef enum hv_opt_kind {
    HV_OPT_FLAG = 0, /* nothing: --json (--json=1 is a fault) */
    HV_OPT_TEXT,     /* any text; when max != 0 it must be min..max bytes long */
    HV_OPT_UINT,     /* a whole number from min to max (got->num) */
    HV_OPT_DURATION, /* a number with s, m, h or d (bare: seconds), min..max ms (got->num, ms) */
    HV_OPT_HEADING,  /* no option: a line of --help between options (name NULL) */
} hv_opt_kind;

/* One option: a row of a tool's table. */
typedef struct hv_opt_s {
    const char *name;  /* the long name without dashes ("limit"); NULL for a heading */
    char short_name;   /* the one-letter spelling ('f' for -f), or 0 */
    hv_opt_kind kind;  /* what it takes */
    uint64_t min, max; /* bounds of the value (see hv_opt_kind) */
    uint32_t cmds;     /* the commands that take it, a bit each in the tool's numbering; 0: all */
    int id;            /* the tool's own name for the option */
    const char *bad;   /* a value out of bounds: the message, a printf format with one %s for the
                        * value (or none); NULL: a message made from the bounds */
    const char *help;  /* its lines in the tool's --help (each ending in '\n'), or NULL */
} hv_opt_t;

/* How a tool reads its command line, beside the spellings above. */
enum {
    HV_OPT_ONE_DASH = 1u << 0,  /* -name is --name too (hvsubmit's -np, hvctl's -json) */
    HV_OPT_FIRST_ARG = 1u << 1, /* the first argument ends the options (hvsubmit's program) */
    HV_OPT_DASHDASH = 1u << 2,  /* "--" ends the options; what follows is handed back whole */
};

/* What hv_opt_next found. */
typedef enum hv_opt_res {
    HV_OPT_END = 0, /* no more arguments */
    HV_OPT_OPTION,  /* got->opt, got->value (NULL for a flag), got->num */
    HV_OPT_ARG,     /* an argument that is no option: got->arg */
    HV_OPT_REST,    /* the options ended (HV_OPT_FIRST_ARG, HV_OPT_DASHDASH): the rest of argv
                     * starts at got->index (argc: nothing follows) */
    HV_OPT_FAULT,   /* got->fault; got->opt when the option is known */
} hv_opt_res;

/* Why an argument was refused. */
typedef enum hv_opt_fault {
    HV_OPT_OK = 0,
    HV_OPT_UNKNOWN,     /* no such option */
    HV_OPT_NEEDS_VALUE, /* the last argument, an option that needs a value */
    HV_OPT_NO_VALUE,    /* a flag given a value (--json=1) */
    HV_OPT_BAD_VALUE,   /* a value out of the row's bounds */
    HV_OPT_WRONG_CMD,   /* an option of another command (the iterator's cmd) */
} hv_opt_fault;

/* One step's result. Strings are borrowed from argv. */
typedef struct hv_opt_got_s {
    const hv_opt_t *opt; /* the row (OPTION; FAULT but UNKNOWN) */
    const char *arg;     /* the argument as written ("--limit=5", "-np", "job") */
    const char *value;   /* the option's value text, or NULL */
    uint64_t num;        /* UINT and DURATION: the value (a duration in ms) */
    int index;           /* argv index of arg (REST: where the rest starts) */
    hv_opt_fault fault;  /* FAULT: why */
} hv_opt_got_t;

/* Walks argv[first..argc) against a table. Caller storage, borrowed table and argv. */
typedef struct hv_opt_iter_s {
    const hv_opt_t *opts;
    size_t nopts;
    unsigned flags; /* HV_OPT_ONE_DASH | ... */
    uint32_t cmd;   /* the command's bit when it is known before the options (0: no check) */
    int argc;
    char **argv;
    int next;  /* the next argument to read */
    int ended; /* REST was returned */
} hv_opt_iter_t;

void hv_opt_init(hv_opt_iter_t *it, const hv_opt_t *opts, size_t nopts, unsigned flags,
                 uint32_t cmd, int argc, char **argv, int first);

/* The next option or argument (see hv_opt_res). After a FAULT the iterator may be asked again
 * (the argument, and the value it took, are skipped); after REST it answers END. */
hv_opt_res hv_opt_next(hv_opt_iter_t *it, hv_opt_got_t *got);

/* The row whose long name is name, or NULL. */
const hv_opt_t *hv_opt_find(const hv_opt_t *opts, size_t nopts, const char *name);

/* The words hvsubmit and hvctl use for a fault, into buf: "unknown option '--x'", "option '-np'
 * needs a value", "option '--json' takes no value", the row's bad message for a bad value,
 * "option '--daemon' does not go with 'stop'" (cmd: the command's name). Returns buf. */
const char *hv_opt_fault_msg(const hv_opt_got_t *got, const char *cmd, char *buf, size_t len);

/* Writes the help lines of the rows for the command cmd (a bit; 0: every row), in table order. */
void hv_opt_help(FILE *f, const hv_opt_t *opts, size_t nopts, uint32_t cmd);

/* Parses a duration the way HV_OPT_DURATION does: a number with s, m, h or d (bare: seconds),
 * into ms within min..max. HV_EINVAL otherwise (*ms untouched). */
hv_err hv_opt_parse_duration(const char *v, uint64_t min, uint64_t max, uint64_t *ms);

#endif
