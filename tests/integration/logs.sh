#!/bin/sh
# Output at volume: every worker prints 100000 lines; hvsubmit receives every line of every
# rank, in order, exactly once, and hvctl logs replays the same lines afterwards. Uses
# /usr/bin/seq as the "training program" (any ELF executable is a valid job), with --env and
# args passed through.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
start_agent node-b 2
N=100000
"$BIN/hvsubmit" -np 4 /usr/bin/seq 1 $N >"$TMP/submit.out" 2>"$TMP/submit.err" || fail "hvsubmit exited $?"
for r in 0 1 2 3; do
    grep "^\[$r\]<stdout>:" "$TMP/submit.out" | sed "s/^\[$r\]<stdout>://" >"$TMP/r$r"
    seq 1 $N | cmp -s - "$TMP/r$r" || fail "rank $r: lines lost, repeated or out of order ($(wc -l <"$TMP/r$r") lines)"
done
"$BIN/hvctl" --head "$HEAD" logs 1 >"$TMP/replay.out" || fail "hvctl logs failed"
[ "$(wc -l <"$TMP/replay.out")" -eq $((4 * N)) ] || fail "hvctl logs replayed $(wc -l <"$TMP/replay.out") lines, want $((4 * N))"
pass "4 x $N lines delivered in order, replayable"
