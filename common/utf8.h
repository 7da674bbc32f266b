/*
 * utf8: whether bytes are UTF-8 text, as every standard protobuf runtime requires of a proto3
 * `string` (Python's, Go's and Java's refuse to decode one that is not). The head refuses such
 * strings in requests (head/services/validate.c) and repairs them in what agents report; the
 * CLIs check their own input before they send it. Strict: no overlong forms, no UTF-16
 * surrogates, nothing above U+10FFFF. Pure, reentrant.
 */
#ifndef HV_COMMON_UTF8_H
#define HV_COMMON_UTF8_H

#include <stddef.h>

/* The length of the valid UTF-8 sequence that starts at s (1 for an ASCII byte other than NUL,
 * 2 to 4), or 0 when s does not start one: a stray continuation byte, an overlong form, a
 * surrogate, a code point above U+10FFFF, or a sequence cut short (by a NUL). Reads at most 4
 * bytes and never past a NUL. */
size_t hv_utf8_len(const char *s);

/* The offset of the first byte of s (NUL-terminated; NULL is "") that is not part of valid
 * UTF-8 text, or -1 when it all is. */
long hv_utf8_bad_at(const char *s);

/* Replaces, in place, each byte of s that is not part of valid UTF-8 text with '?' (the length
 * stays); returns how many were replaced. NULL: 0. */
size_t hv_utf8_repair(char *s);

#endif
