#!/bin/sh
# Copies of several jobs' training state at once on a small data directory (a real 200 MiB tmpfs;
# skipped where mount is not permitted; issue 24). Four elastic jobs with 40 MiB of state each
# (tests/tools/state_bulk.c) send their first copy to the head at the same moment. The head counts
# each copy whole, with what the copies it already accepted have still to write, and keeps twice
# logs.reserve_free_bytes free (the reserve scaled to a quarter of this small disk, as for the
# logs: 2 x 50 MiB): two copies are stored and two refused, each refusal said to its job (the
# worker's line reaches its hvsubmit, naming the free space and what is kept) and in the head's
# log; the disk keeps its reserve, and every job's output after the copies reaches its hvsubmit
# whole (no "[hv] log paused").
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
data_on_tmpfs 200m hvtest-copies
MIB=1048576
LINES=300
start_head "elastic: {rendezvous_timeout_s: 30}"
start_agent node-a 4
for j in 1 2 3 4; do
    "$BIN/hvsubmit" -np 1 --min-np 1 --max-np 1 --name "bulk$j" \
        "$BIN/state_bulk" 40 "$TMP/go" "$TMP/after" $LINES >"$TMP/bulk$j.out" 2>"$TMP/bulk$j.err" &
    PIDS="$PIDS $!"
    eval "SUB$j=$!"
done
all_ready() { for j in 1 2 3 4; do grep -q "state_bulk: ready" "$TMP/bulk$j.out" || return 1; done; }
wait_for 60 all_ready || fail "the four jobs did not start"
touch "$TMP/go"

# Each copy ends stored (its file in DATA/states) or refused (its worker says so).
stored() { ls "$TMP"/data/states/*.bin 2>/dev/null | wc -l; }
refused() { cat "$TMP"/bulk*.err | grep -c "copy of generation .* was not stored"; }
parts() { ls "$TMP"/data/states/*.part 2>/dev/null | wc -l; }
settled() { [ "$(parts)" -eq 0 ] && [ $(($(stored) + $(refused))) -ge 4 ]; }
wait_for 60 settled || fail "the copies did not settle: $(stored) stored, $(refused) refused, $(parts) in progress; $(df -k "$TMP/data" | tail -n 1)"
free=$(($(stat -f -c '%a * %S' "$TMP/data")))
echo "copies: $(stored) stored, $(refused) refused; $((free / MIB)) MiB free of 200"
[ "$free" -ge $((50 * MIB)) ] || fail "the copies left $((free / MIB)) MiB free, less than the 50 MiB reserve"
[ "$(stored)" -eq 2 ] || fail "want 2 copies stored (each leaving 100 MiB free), got $(stored)"
[ "$(refused)" -eq 2 ] || fail "want 2 copies refused, got $(refused)"
# The refusal, as the job's owner reads it: the head's disk, the sizes, and what is kept.
grep -h "was not stored" "$TMP"/bulk*.err | head -n 1 >"$TMP/refusal.txt"
assert_grep "$TMP/refusal.txt" "the head's disk ($TMP/data/states) has [0-9.]* [KMG]*i*B free and [0-9.]* [KMG]*i*B of other jobs' copies still arriving: this copy of 40.0 MiB would leave less than the 100.0 MiB it keeps free"
[ "$(grep -c "HV-COPY-FULL" "$TMP/head.err")" -eq 2 ] || fail "the head's log must name each refused copy: $(grep HV-COPY "$TMP/head.err")"

# Every job's output after the copies reaches its hvsubmit, whole.
touch "$TMP/after"
for j in 1 2 3 4; do
    eval "pid=\$SUB$j"
    wait "$pid" || fail "job bulk$j's hvsubmit exited $?"
    n=$(grep -c "state_bulk: line [0-9]* of $LINES" "$TMP/bulk$j.out")
    [ "$n" -eq $LINES ] || fail "job bulk$j's output lost $((LINES - n)) of its $LINES lines"
    assert_no_grep "$TMP/bulk$j.err" "log paused" "job bulk$j's output was paused: $(grep "log paused" "$TMP/bulk$j.err")"
done
pass "parallel copies keep the data directory's reserve; refused copies are said; no output lost"
