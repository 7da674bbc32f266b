/*
 * cmdtmpl: the command templates of the user's shell commands (the autoscaler's `command`
 * provider, the durable tier's upload/download/remove): "{key}" is replaced by its value in
 * single quotes (a ' inside written '\''), "{{" is a literal "{", any other "{...}" is an error
 * that names the known keys. Pure: no I/O, no allocation.
 */
#ifndef HV_COMMON_CMDTMPL_H
#define HV_COMMON_CMDTMPL_H

#include <stddef.h>

#include "err.h"

/* Expands tmpl with keys[i] -> vals[i] (n pairs; a NULL value is "") into out (NUL-terminated).
 * HV_ETOOBIG when it does not fit outlen; HV_ENOTFOUND for an unknown or unclosed placeholder
 * (err names it and lists `known`, e.g. "{file} {key}"). */
hv_err hv_cmd_expand(const char *tmpl, const char *const *keys, const char *const *vals, size_t n,
                     const char *known, char *out, size_t outlen, char *err, size_t errlen);

#endif
