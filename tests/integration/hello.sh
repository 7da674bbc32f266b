#!/bin/sh
# A head and 2 agents run hello with -np 4: every rank's line arrives with its prefix, ranks are
# placed host by host (contiguous ranks, local ranks 0..1 on each node), and hvsubmit exits 0.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
start_head
start_agent node-a 2
start_agent node-b 2
"$BIN/hvsubmit" -np 4 "$EX/hello" >"$TMP/submit.out" 2>"$TMP/submit.err" || fail "hvsubmit exited $?"
for r in 0 1 2 3; do
    assert_grep "$TMP/submit.out" "^\[$r\]<stdout>:hello from rank $r of 4 " "rank $r's line is missing"
done
[ "$(wc -l <"$TMP/submit.out")" -eq 4 ] || fail "expected exactly 4 output lines"
# host by host: ranks 0,1 share a host with local ranks 0,1; ranks 2,3 share the other
h0=$(sed -nE 's/^\[0\].*local rank 0 of 2\) on host (.*)$/\1/p' "$TMP/submit.out")
h1=$(sed -nE 's/^\[1\].*local rank 1 of 2\) on host (.*)$/\1/p' "$TMP/submit.out")
h2=$(sed -nE 's/^\[2\].*local rank 0 of 2\) on host (.*)$/\1/p' "$TMP/submit.out")
h3=$(sed -nE 's/^\[3\].*local rank 1 of 2\) on host (.*)$/\1/p' "$TMP/submit.out")
[ -n "$h0" ] && [ "$h0" = "$h1" ] && [ -n "$h2" ] && [ "$h2" = "$h3" ] && [ "$h0" != "$h2" ] \
    || fail "placement is not host by host: '$h0' '$h1' '$h2' '$h3'"
assert_grep "$TMP/submit.err" "succeeded" "hvsubmit should report the job succeeded"
# the job is recorded as succeeded, and hvctl agrees
st=$(job_state 1)
[ "$st" = succeeded ] || fail "job 1 state is '$st', want succeeded"
# plain hvsubmit (no -np) takes every free slot: 4
"$BIN/hvsubmit" "$EX/hello" >"$TMP/submit2.out" 2>"$TMP/submit2.err" || fail "plain hvsubmit exited $?"
assert_grep "$TMP/submit2.err" "4 workers" "plain hvsubmit should say it took 4 workers"
[ "$(grep -c 'hello from rank' "$TMP/submit2.out")" -eq 4 ] || fail "plain hvsubmit: expected 4 lines"
# the binary was uploaded once: the second submission found it on the head
[ "$(ls "$TMP/data/artifacts" | wc -l)" -eq 1 ] || fail "expected one stored artifact"
pass "hello -np 4 on 2 agents"
