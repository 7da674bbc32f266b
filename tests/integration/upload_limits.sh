#!/bin/sh
# Unfinished uploads are bounded: a stale part file is removed when the head starts, one left
# untouched for upload_timeout_s is removed while it runs (a recent one survives a restart, for
# resume), and an upload that would take the parts past upload_quota is refused naming the key;
# the head keeps serving.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
mkdir -p "$TMP/data/uploads"
stale="$TMP/data/uploads/$(printf '%064d' 1).part"
fresh="$TMP/data/uploads/$(printf '%064d' 2).part"
head -c 1000 /dev/zero >"$stale"
head -c 1000 /dev/zero >"$fresh"
touch -d '2 hours ago' "$stale"
write_config "$TMP/head.yaml" "upload_quota: 1MiB" "upload_timeout_s: 3"
start_head
start_agent node-a 1
[ ! -e "$stale" ] || fail "a stale partial upload survived the head's start"
[ -e "$fresh" ] || fail "a recent partial upload was removed at start (no resume possible)"
assert_grep "$TMP/head.err" "HV-UPLOAD-STALE.*$(printf '%064d' 1).part"
wait_for 15 sh -c "[ ! -e '$fresh' ]" || fail "an untouched partial upload was not removed after upload_timeout_s"

# 2.5 MiB: the second 1 MiB chunk would take the parts past the 1 MiB quota.
cp /bin/echo "$TMP/big" # a small ELF, padded (the builds' hello is 1 to 4 MiB)
truncate -s 2621440 "$TMP/big"
"$BIN/hvsubmit" -np 1 "$TMP/big" >"$TMP/big.out" 2>"$TMP/big.err" && fail "an upload over upload_quota was accepted"
assert_grep "$TMP/big.err" "upload_quota is 1.0 MiB"
# Its first chunk counts until it times out; then a normal job uploads and runs.
wait_for 15 sh -c "[ -z \"\$(ls '$TMP/data/uploads')\" ]" || fail "the refused upload's part was not removed"
"$BIN/hvsubmit" -np 1 /bin/echo small-job-ran >"$TMP/s.out" 2>&1 || fail "a job after the refused upload failed: $(cat "$TMP/s.out")"
assert_grep "$TMP/s.out" "small-job-ran"
pass "stale uploads removed at start and after upload_timeout_s; upload_quota enforced"
