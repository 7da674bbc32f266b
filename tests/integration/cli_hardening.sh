#!/bin/sh
# What the CLIs show cannot act on the terminal, and their words and exit statuses name the
# right thing, through the real binaries:
#  - control characters in a job's name come out of `hvctl job ID` on a terminal as \xNN;
#  - an escape sequence in worker output is shown as \x1b on a terminal (hvctl logs, hvsubmit),
#    passed through with --raw, and always passed as is into a pipe;
#  - `hvctl node revoke` takes a node id, as drain does;
#  - `hvctl --json logs 999` prints no [] and exits 66;
#  - `hvctl logs -f` follows a job across a restart of the head, each line once;
#  - a full upload_quota exits 75 ("try again later"), not 65;
#  - a data dir whose logs/ is a file is reported as logs/, not artifacts/; states/ a file, and
#    a data dir that is a file, are named with the problem.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
ESC=$(printf '\033')
LEASE_MS=8000
start_head
pin_head_port # a restart keeps the address
start_agent node-a 2
start_agent node-x 1
# on_tty CMD...: runs CMD on a pseudo-terminal (script(1)), its output in $TMP/tty.out.
on_tty() { script -qec "$*" /dev/null >"$TMP/tty.out" 2>&1; }

# ---- a job the head does not know, --json ------------------------------------------------------
"$BIN/hvctl" --json logs 999 >"$TMP/j.out" 2>"$TMP/j.err"; ec=$?
[ $ec -eq 66 ] || fail "hvctl --json logs 999: exit $ec, want 66"
[ ! -s "$TMP/j.out" ] || fail "hvctl --json logs 999 printed on stdout: $(cat "$TMP/j.out")"
grep -qx "hvctl: no job 999" "$TMP/j.err" || fail "hvctl --json logs 999 said: $(cat "$TMP/j.err")"

# ---- control characters: a job's name, worker output -------------------------------------------
name=$(printf 'ev\033]0;pwned\007il\nFAKE: line')
"$BIN/hvsubmit" --name "$name" -np 1 /usr/bin/printf 'a\033[2Jb\tc\n' >"$TMP/p.out" 2>"$TMP/p.err" ||
    fail "the printf job failed: $(cat "$TMP/p.err")"
grep -q "a${ESC}\[2Jb" "$TMP/p.out" || fail "hvsubmit into a pipe changed the output: $(od -c "$TMP/p.out")"
on_tty "'$BIN/hvctl' job 1" || fail "hvctl job 1 on a tty: $(cat "$TMP/tty.out")"
grep -qF 'NAME:       ev\x1b]0;pwned\x07il\nFAKE: line' "$TMP/tty.out" ||
    fail "hvctl job on a tty did not show the name's controls: $(cat -v "$TMP/tty.out")"
assert_no_grep "$TMP/tty.out" "$ESC" "hvctl job wrote an ESC to the terminal"
on_tty "'$BIN/hvctl' logs 1" || fail "hvctl logs 1 on a tty"
grep -qF "$(printf '[0]<stdout>:a\\x1b[2Jb\tc')" "$TMP/tty.out" ||
    fail "hvctl logs on a tty did not escape the output: $(cat -v "$TMP/tty.out")"
on_tty "'$BIN/hvctl' logs --raw 1" || fail "hvctl logs --raw 1 on a tty"
grep -q "a${ESC}\[2Jb" "$TMP/tty.out" || fail "hvctl logs --raw changed the output: $(cat -v "$TMP/tty.out")"
"$BIN/hvctl" logs 1 >"$TMP/l.out" || fail "hvctl logs 1 into a file"
grep -q "a${ESC}\[2Jb" "$TMP/l.out" || fail "hvctl logs into a file changed the output: $(cat -v "$TMP/l.out")"
on_tty "'$BIN/hvsubmit' -np 1 /usr/bin/printf 'x\\033[2Jy\\n'" || fail "hvsubmit on a tty: $(cat "$TMP/tty.out")"
grep -qF '[0]<stdout>:x\x1b[2Jy' "$TMP/tty.out" || fail "hvsubmit on a tty did not escape: $(cat -v "$TMP/tty.out")"
assert_no_grep "$TMP/tty.out" "$ESC" "hvsubmit wrote a worker's ESC to the terminal"
on_tty "'$BIN/hvsubmit' --raw -np 1 /usr/bin/printf 'x\\033[2Jy\\n'" || fail "hvsubmit --raw on a tty"
grep -q "x${ESC}\[2Jy" "$TMP/tty.out" || fail "hvsubmit --raw changed the output: $(cat -v "$TMP/tty.out")"

# ---- node revoke by id -------------------------------------------------------------------------
xid=$("$BIN/hvctl" nodes | awk '$1 == "node-x" { print $2 }')
[ -n "$xid" ] || fail "node-x has no id in hvctl nodes"
"$BIN/hvctl" node revoke "$xid" >"$TMP/rv.out" 2>&1 || fail "hvctl node revoke $xid: $(cat "$TMP/rv.out")"
grep -qx "node node-x (id $xid): credential revoked, session ended" "$TMP/rv.out" ||
    fail "hvctl node revoke by id said: $(cat "$TMP/rv.out")"

# ---- logs -f across a head restart -------------------------------------------------------------
jid=$("$BIN/hvsubmit" -d -np 1 "$EX/sleeper" 4 2>/dev/null) || fail "submit sleeper"
"$BIN/hvctl" logs -f --head-timeout 20 "$jid" >"$TMP/f.out" 2>"$TMP/f.err" &
follow=$!
wait_for 10 grep -q "started" "$TMP/f.out" || fail "hvctl logs -f showed no start"
kill -KILL "$HEAD_PID"
sleep 1
start_head
wait $follow; ec=$?
[ $ec -eq 0 ] || fail "hvctl logs -f exited $ec across a head restart, want 0: $(cat "$TMP/f.err")"
[ "$(grep -c 'rank 0 started' "$TMP/f.out")" -eq 1 ] || fail "'started' not shown once: $(cat "$TMP/f.out")"
[ "$(grep -c 'rank 0 done' "$TMP/f.out")" -eq 1 ] || fail "'done' not shown once: $(cat "$TMP/f.out")"
assert_grep "$TMP/f.err" "reconnected to the head"

# ---- a full upload_quota: try again later (the head again, with a quota below the file) --------
kill -KILL "$HEAD_PID"
echo "upload_quota: 1MiB" >>"$TMP/head.yaml"
start_head
cp /bin/echo "$TMP/big" # a small ELF, padded past the 1 MiB quota
truncate -s 2621440 "$TMP/big"
"$BIN/hvsubmit" -np 1 "$TMP/big" >/dev/null 2>"$TMP/q.err"; ec=$?
[ $ec -eq 75 ] || fail "a full upload_quota: exit $ec, want 75: $(cat "$TMP/q.err")"
assert_grep "$TMP/q.err" "upload_quota is 1.0 MiB.*try again later"

# ---- a data dir whose logs is a file -----------------------------------------------------------
mkdir -p "$TMP/d2" && : >"$TMP/d2/logs"
sed -e "s|^data_dir: .*|data_dir: $TMP/d2|" -e "s|^listen: .*|listen: 127.0.0.1:0|" \
    "$TMP/head.yaml" >"$TMP/d2.yaml"
"$BIN/hvhead" start --config "$TMP/d2.yaml" >"$TMP/d2.out" 2>"$TMP/d2.err" && fail "a head started with a file for logs/"
assert_grep "$TMP/d2.err" "$TMP/d2/logs: it exists and is not a directory"
assert_no_grep "$TMP/d2.err" "artifacts"
# states/ a file, and the data directory itself a file: each named, with the problem (issue 24;
# they said "cannot load state from DATA/state.db: already exists" and "already exists").
mkdir -p "$TMP/d3" && : >"$TMP/d3/states"
sed -e "s|^data_dir: .*|data_dir: $TMP/d3|" "$TMP/d2.yaml" >"$TMP/d3.yaml"
"$BIN/hvhead" start --config "$TMP/d3.yaml" >"$TMP/d3.out" 2>"$TMP/d3.err" && fail "a head started with a file for states/"
assert_grep "$TMP/d3.err" "^hvhead: cannot prepare $TMP/d3/states: it exists and is not a directory$"
assert_no_grep "$TMP/d3.err" "cannot load state"
: >"$TMP/d4"
sed -e "s|^data_dir: .*|data_dir: $TMP/d4|" "$TMP/d2.yaml" >"$TMP/d4.yaml"
"$BIN/hvhead" start --config "$TMP/d4.yaml" >"$TMP/d4.out" 2>"$TMP/d4.err" && fail "a head started on a file for its data directory"
assert_grep "$TMP/d4.err" "^hvhead: cannot create data directory $TMP/d4: it exists and is not a directory$"
pass "controls escaped on a terminal, raw on a pipe or --raw; revoke by id; logs -f survives a restart; exit codes"
