#!/bin/sh
# Writes a man page (roff, section 1) for one of hv's programs from what the program itself says:
# `PROG --version`, `PROG --help` and, for each SUBCOMMAND given, `PROG SUBCOMMAND --help`.
# The help text is kept as the program prints it (preformatted: its option columns stay
# aligned), so the page never says more or less than --help. Run at build time by
# deploy/packaging/install.cmake; help2man was tried and rejected: it does not recognise hv's
# lower-case "usage:" lines (no SYNOPSIS; the usage lines run together) and cannot reach
# `hvhead start --help`.
# Usage: man.sh PROG NAME "ONE-LINE SUMMARY" OUT.1 [SUBCOMMAND...]
set -eu
[ $# -ge 4 ] || { echo "usage: man.sh PROG NAME SUMMARY OUT.1 [SUBCOMMAND...]" >&2; exit 64; }
PROG=$1 NAME=$2 SUMMARY=$3 OUT=$4
mkdir -p "$(dirname "$OUT")"
shift 4
# A sanitizer build runs the same binary: its leak report at exit is no part of the help.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export ASAN_OPTIONS
# roff: a backslash is \e, '-' is \- (a real minus: options copy and paste), and a line that
# starts with '.' or "'" would be a request, so \& guards it.
esc() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
VERSION=$("$PROG" --version) || { echo "man.sh: $PROG --version failed" >&2; exit 1; }
HELP=$("$PROG" --help) || { echo "man.sh: $PROG --help failed" >&2; exit 1; }
# shellcheck disable=SC2016 # an awk program
SPLIT='NR == 1 || (syn && /^[ \t]+[^ \t]/) { syn = 1; print "S" $0; next }
       { if (syn && NF == 0) { syn = 0; next } syn = 0; print "B" $0 }'
UPPER=$(printf '%s' "$NAME" | tr '[:lower:]' '[:upper:]')
{
    printf '.TH %s 1 "" "%s" "hv manual"\n' "$UPPER" "$VERSION"
    printf '.nh\n.ad l\n'
    printf '.SH NAME\n%s \\- %s\n' "$NAME" "$(printf '%s' "$SUMMARY" | esc)"
    # SYNOPSIS: the usage lines ("usage: " and the indented lines after it, up to a blank or an
    # unindented line), "usage: " dropped; DESCRIPTION: the rest.
    printf '.SH SYNOPSIS\n.nf\n'
    printf '%s\n' "$HELP" | awk "$SPLIT" | sed -n 's/^S//p' | sed -E 's/^usage: //; s/^       //' | esc
    printf '.fi\n.SH DESCRIPTION\n.nf\n'
    printf '%s\n' "$HELP" | awk "$SPLIT" | sed -n 's/^B//p' | esc
    printf '.fi\n'
    for sub in "$@"; do
        SUBHELP=$("$PROG" "$sub" --help) || { echo "man.sh: $PROG $sub --help failed" >&2; exit 1; }
        printf '.SH "%s %s"\n.nf\n' "$UPPER" "$(printf '%s' "$sub" | tr '[:lower:]' '[:upper:]')"
        printf '%s\n' "$SUBHELP" | esc
        printf '.fi\n'
    done
    printf '.SH SEE ALSO\n'
    others=""
    for p in hvhead hvagent hvsubmit hvctl; do [ "$p" = "$NAME" ] || others="$others $p"; done
    for p in $others; do printf '.BR %s (1),\n' "$p"; done
    printf "the operator's guide /usr/share/doc/hv/operations.md and the configuration\n"
    printf '/usr/share/doc/hv/configuration.md.\n'
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
