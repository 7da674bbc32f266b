#!/bin/sh
# The GPU path through the real binaries, on the CPU stand-in for CUDA and NCCL
# (tests/gpusim/libhv_gpusim.so, preloaded into the workers; its "device" memory faults on any
# host access, as a real device pointer would). hvsubmit ships examples/gpu_allreduce, which
# averages a cudaMalloc'ed buffer with hv_allreduce, broadcasts and allgathers device buffers.
#  1. a node with two GPUs, two ranks: they agree on NCCL (one GPU each), rank 0's NCCL id
#     travels through the head's rendezvous KV to rank 1, and every result is right;
#  2. the same node seeing one GPU: NCCL would refuse two ranks on one GPU, so both ranks stage
#     through host memory, say so, and the results are still right.
# Skips when hv was built without CUDA/NCCL. A real GPU runs the same program (label gpu tests).
. "$HV_SRC_DIR/tests/lib.sh"
SIM=$(cd "$BIN/../lib" 2>/dev/null && pwd)/libhv_gpusim.so
if [ ! -f "$SIM" ] || [ ! -x "$EX/gpu_allreduce" ]; then
    echo "SKIP: hv was built without CUDA/NCCL (no libhv_gpusim.so or gpu_allreduce)"
    exit 77
fi
hv_setup
start_head
start_agent node-a 2
# ASan builds: the preloaded stand-in comes before the ASan runtime; that is intended here.
SIMENV="-e LD_PRELOAD=$SIM -e HV_LOG_LEVEL=info -e ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
# gpu_run NAME GPUS WHAT: 2 ranks of gpu_allreduce on node-a, which sees GPUS stand-in GPUs; the
# job must end 0 (else fails: WHAT); its output and errors together in $TMP/NAME.all.
gpu_run() {
    # shellcheck disable=SC2086
    "$BIN/hvsubmit" -np 2 $SIMENV -e "HV_GPUSIM_DEVICES=$2" "$EX/gpu_allreduce" 300000 >"$TMP/$1.out" \
        2>"$TMP/$1.err" || fail "hvsubmit ($3) exited $?"
    cat "$TMP/$1.out" "$TMP/$1.err" >"$TMP/$1.all"
}
gpu_run nccl 2 "one GPU per rank"
for r in 0 1; do
    assert_grep "$TMP/nccl.all" "^\[$r\]<stdout>:gpu_allreduce: rank $r of 2 on GPU $r: average of 300000 floats, broadcast and allgather on device buffers correct" \
        "rank $r did not report correct device results"
    assert_grep "$TMP/nccl.all" "^\[$r\].*HV-NCCL-UP: rank $r of 2: NCCL communicator on device $r (id hv.nccl." \
        "rank $r did not bring up an NCCL communicator"
done
assert_no_grep "$TMP/nccl.all" "HV-WORLD-NCCL-OFF" "with a GPU per rank nothing should be staged"
# Rank 0's NCCL id went through the head's rendezvous KV (rank 1 can only join rank 0's
# communicator with that id: the stand-in, like NCCL, meets ranks by it).
assert_grep "$TMP/head.err" "HV-RDZV-KV: job 1: 'hv.nccl.[0-9]*' set (128 bytes)" \
    "the head did not receive the NCCL id"
[ "$(job_state 1)" = succeeded ] || fail "job 1 is '$(job_state 1)', want succeeded"

# 2. Two ranks on one host with one GPU: staged, and said.
gpu_run shared 1 "two ranks, one GPU"
for r in 0 1; do
    assert_grep "$TMP/shared.all" "^\[$r\]<stdout>:gpu_allreduce: rank $r of 2 on GPU 0: average of 300000 floats" \
        "rank $r (shared GPU) did not report correct device results"
    assert_grep "$TMP/shared.all" "^\[$r\].*HV-WORLD-NCCL-OFF: rank $r: device tensors are staged through host memory, not NCCL: ranks 0 and 1 share the GPU" \
        "rank $r did not say why NCCL is off"
done
assert_no_grep "$TMP/shared.all" "HV-NCCL-UP" "two ranks on one GPU must not start NCCL"
pass "device buffers through hvsubmit: NCCL with a GPU per rank, staging on a shared GPU"
