/*
 * cli_json: the one JSON writer of the CLIs (hvsubmit, hvctl; protobuf-c has no JSON): objects,
 * arrays, escaped strings, numbers, bools and null, indented two spaces per level, with the
 * commas placed by the writer; a message's fields by name; a JSON text from the head embedded
 * after it is checked, and a top-level field read from one. Single-threaded: a writer belongs to
 * its caller.
 */
#ifndef HV_CLI_CLI_JSON_H
#define HV_CLI_CLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "hv.pb-c.h"

#define HV_CLI_JSON_MAX_DEPTH 16

/* Writes one JSON document to f, indented by two spaces per level. Caller storage. The writer
 * inserts commas and indentation itself; the caller only has to nest begin/end correctly and give
 * a key before each value inside an object. Misuse (too deep, a value where a key is due) sets
 * err and makes later calls no-ops, so the output is never silently invalid. */
typedef struct hv_cli_json_s {
    FILE *f;                                     /* borrowed */
    int depth;                                   /* open containers */
    unsigned char is_obj[HV_CLI_JSON_MAX_DEPTH]; /* per level: 1 object, 0 array */
    unsigned char count[HV_CLI_JSON_MAX_DEPTH];  /* per level: values written (saturates at 1) */
    int want_value;                              /* a key was written, its value is due */
    int err;                                     /* misuse detected */
} hv_cli_json_t;

void hv_cli_json_init(hv_cli_json_t *j, FILE *f);
void hv_cli_json_obj_begin(hv_cli_json_t *j);
void hv_cli_json_obj_end(hv_cli_json_t *j);
void hv_cli_json_arr_begin(hv_cli_json_t *j);
void hv_cli_json_arr_end(hv_cli_json_t *j);
void hv_cli_json_key(hv_cli_json_t *j, const char *key);
void hv_cli_json_str(hv_cli_json_t *j, const char *s);
void hv_cli_json_u64(hv_cli_json_t *j, uint64_t v);
void hv_cli_json_f64(hv_cli_json_t *j, double v); /* NaN and infinities as null */
void hv_cli_json_i64(hv_cli_json_t *j, int64_t v);
void hv_cli_json_bool(hv_cli_json_t *j, int v);
void hv_cli_json_null(hv_cli_json_t *j);
/* A key and its value in one call (the key, then the value, as the two calls above). */
void hv_cli_json_kv_u64(hv_cli_json_t *j, const char *key, uint64_t v);
void hv_cli_json_kv_str(hv_cli_json_t *j, const char *key, const char *s);
/* Ends the document with a newline. HV_EINVAL if containers are still open or misuse occurred. */
hv_err hv_cli_json_finish(hv_cli_json_t *j);

/* Writes fields of the message m as "key": value pairs of the open object, in the order spec
 * names them: words apart by one space, each a field of m's proto ("worker_id"), one of a
 * submessage ("info.slots": its default when the submessage is unset), or key=field to write it
 * under another key ("processes=incarnation"). Integers, bools, doubles and strings (NULL as
 * "") are written as such, an enum as its number, a repeated string as an array; a word that
 * names no such field is misuse (j->err). Other values (states by name, nested messages) the
 * caller writes itself around the call. */
void hv_cli_json_fields(hv_cli_json_t *j, const ProtobufCMessage *m, const char *spec);

/* Writes text, one JSON value that came from elsewhere (an event's data from the head), as the
 * next value: it is checked first (RFC 8259 grammar, valid UTF-8, nesting within what the writer
 * has left) and then written again through the writer, so it is indented like the rest and the
 * document stays valid. Strings and numbers keep their exact spelling. HV_EINVAL, with nothing
 * written, when text is not exactly one valid JSON value (surrounding whitespace aside) or
 * nests too deep; want_object set also refuses a value that is not an object. */
hv_err hv_cli_json_embed(hv_cli_json_t *j, const char *text, int want_object);

/* A top-level field of a JSON object text (an event's data): 1 when json is one valid object
 * with key and its value is of the type asked, 0 otherwise (out untouched). The string is
 * unescaped into buf (cut to len-1 bytes; \u escapes become '?'); the number must be a
 * non-negative integer that fits. Nested objects' keys never match. */
int hv_cli_json_field_str(const char *json, const char *key, char *buf, size_t len);
int hv_cli_json_field_u64(const char *json, const char *key, uint64_t *out);

/* Writes s as a quoted JSON string: escapes '"', '\\' and control characters (C0, DEL and the C1
 * range U+0080..U+009F, which a terminal may obey), U+2028 and U+2029 (line breaks to a
 * JavaScript reader), and replaces bytes that are not valid UTF-8 with U+FFFD so that the output
 * is always valid JSON. Other text, non-ASCII included, is written as the UTF-8 it is. */
void hv_cli_json_write_string(FILE *f, const char *s);

#endif
