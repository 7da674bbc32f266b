/*
 * interp: which Python interpreters a node offers, as hvagent reports them to the head. At join
 * the agent adds the node label HV_INTERP_LABEL ("hv.python") whose value lists, space-separated
 * and sorted, the distinct names python, python3 and python3.N found as executable files in the
 * directories of its PATH ("python3 python3.11"), or "none". hvsubmit reads the label to refuse
 * `hvsubmit -- python3.12 train.py` before anything is uploaded or placed when no node has that
 * interpreter (head/cli/cli_common.h, hv_cli_interp_missing). An operator label of that key
 * (--labels hv.python=...) takes its place. Pure apart from reading directories; no state.
 */
#ifndef HV_AGENT_INTERP_H
#define HV_AGENT_INTERP_H

#include <stddef.h>

#define HV_INTERP_LABEL "hv.python"

/* Writes the label value for the directories of path (a PATH string: ':'-separated, empty entries
 * skipped; NULL is no directory) into out (len bytes; 256 holds the value a label may carry).
 * Names that do not fit whole are left out. */
void hv_interp_python_names(const char *path, char *out, size_t len);

#endif
