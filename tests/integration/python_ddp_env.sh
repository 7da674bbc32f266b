#!/bin/sh
# A DDP script's workers get the variables torchrun sets (issue 27, section 2): 2 agents (node-a
# with 2 slots, node-b with 1), `hvsubmit -np 3 -- python3 ddp_env_job.py`. Every rank's RANK,
# WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE equal hv.torch's rank, size, local_rank and
# local_size; the ranks are 0, 1 and 2 once each; node-a's two workers say LOCAL_WORLD_SIZE=2;
# MASTER_ADDR is not set (nothing of hv listens there); the script passes RANK and WORLD_SIZE to
# hv.torch.parallel.init_process_group as it would to torch's, and its DDP step averages the
# gradient over the 3 ranks ((1 + 2 + 3) / 3 = 2 on every rank).
. "$HV_SRC_DIR/tests/lib.sh"
python_env
JOB=$HV_SRC_DIR/tests/python/ddp_env_job.py
hv_setup
start_head
start_agent node-a 2
start_agent node-b 1
"$BIN/hvsubmit" -np 3 $PY_ENV -- $PY "$JOB" >"$TMP/env.out" 2>"$TMP/env.err" || {
    cat "$TMP/env.err" >&2
    fail "the DDP job failed: exit $?"
}
cat "$TMP/env.out" >&2
sed -n 's/^\[[0-9]*\]<stdout>:env //p' "$TMP/env.out" >"$TMP/env.lines"
[ "$(wc -l <"$TMP/env.lines")" -eq 3 ] || fail "expected 3 env lines"
# RANK=r WORLD_SIZE=w LOCAL_RANK=l LOCAL_WORLD_SIZE=lw MASTER_ADDR=x hv=r/w/l/lw node=N
awk '{
    split($0, f, /[ =\/]/)
    # f: RANK r WORLD_SIZE w LOCAL_RANK l LOCAL_WORLD_SIZE lw MASTER_ADDR x hv r w l lw node N
    if (f[2] != f[12] || f[4] != f[13] || f[6] != f[14] || f[8] != f[15]) { print "mismatch: " $0; bad = 1 }
    if (f[4] != 3) { print "WORLD_SIZE: " $0; bad = 1 }
    if (f[10] != "unset") { print "MASTER_ADDR set: " $0; bad = 1 }
    ranks[f[2]]++
    if (f[17] == "node-a" && f[8] != 2) { print "node-a LOCAL_WORLD_SIZE: " $0; bad = 1 }
    if (f[17] == "node-b" && (f[8] != 1 || f[6] != 0)) { print "node-b LOCAL_*: " $0; bad = 1 }
} END {
    if (ranks[0] != 1 || ranks[1] != 1 || ranks[2] != 1) { print "ranks not 0, 1, 2 once each"; bad = 1 }
    exit bad
}' "$TMP/env.lines" >&2 || fail "torchrun's variables do not match hv's view"
[ "$(grep -c '^\[[0-9]*\]<stdout>:grad 2$' "$TMP/env.out")" -eq 3 ] \
    || fail "every rank's DDP gradient should be the average 2"
assert_no_grep "$TMP/env.err" "Traceback"
pass "DDP script: torchrun's variables set, init_process_group and DDP on 3 ranks"
