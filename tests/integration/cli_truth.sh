#!/bin/sh
# The CLIs say what is true, through the real binaries: exit statuses (a rank's own 200, the
# sysexits codes of hvsubmit's and hvctl's own errors), a file that only starts with \x7fELF
# refused before any upload, a bad host name and a dead port in the user's terms, a pending job
# that says what it waits for, hvctl status (text and JSON), SIGTERM detaching with a way to
# follow the job, a head that stays gone given up on after --head-timeout, --version/--help on
# every binary and subcommand, and one shape for usage errors in all four tools.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
PY=/usr/bin/python3

# ---- --version, --help, usage errors: no head needed ----------------------------------------
for t in hvhead hvagent hvsubmit hvctl; do
    "$BIN/$t" --version >"$TMP/v.out" 2>&1 || fail "$t --version: exit $?"
    grep -Eq "^$t [0-9]+\.[0-9]+" "$TMP/v.out" || fail "$t --version printed: $(cat "$TMP/v.out")"
    "$BIN/$t" --help >"$TMP/h.out" 2>&1 || fail "$t --help: exit $?"
    assert_grep "$TMP/h.out" "usage: $t"
    "$BIN/$t" --no-such-option >"$TMP/u.out" 2>"$TMP/u.err"; ec=$?
    [ $ec -eq 64 ] || fail "$t --no-such-option: exit $ec, want 64"
    # hvhead and hvagent want a command first; their subcommands give the same shape below
    case $t in hvhead | hvagent) ;; *)
        grep -qx "$t: unknown option '--no-such-option' (see $t --help)" "$TMP/u.err" ||
            fail "$t usage error: $(cat "$TMP/u.err")" ;;
    esac
    [ "$(wc -l <"$TMP/u.err")" -eq 1 ] || fail "$t: a usage error is one line, got: $(cat "$TMP/u.err")"
done
"$BIN/hvhead" start --help >"$TMP/h.out" 2>&1 || fail "hvhead start --help: exit $?"
assert_grep "$TMP/h.out" "usage: hvhead start"
assert_grep "$TMP/h.out" "--config FILE"
"$BIN/hvhead" stop --help >"$TMP/h.out" 2>&1 || fail "hvhead stop --help: exit $?"
assert_grep "$TMP/h.out" "usage: hvhead stop"
"$BIN/hvhead" backup --help >"$TMP/h.out" 2>&1 || fail "hvhead backup --help: exit $?"
assert_grep "$TMP/h.out" "usage: hvhead backup \[--config FILE\] \[--data-dir DIR\] --to NEW_DIR"
"$BIN/hvhead" token --version >"$TMP/v.out" 2>&1 || fail "hvhead token --version: exit $?"
grep -Eq "^hvhead [0-9]+\.[0-9]+" "$TMP/v.out" || fail "hvhead token --version printed: $(cat "$TMP/v.out")"
# Each hvhead command takes only its own options: none is ignored silently.
for c in "stop --daemon" "stop --listen 127.0.0.1:1" "stop --log-file x" "backup --pid-file x"; do
    # shellcheck disable=SC2086 # the command, its option and a value are separate arguments
    set -- $c
    "$BIN/hvhead" "$@" 2>"$TMP/u.err"; ec=$?
    [ $ec -eq 64 ] || fail "hvhead $c: exit $ec, want 64"
    grep -qx "hvhead: option '$2' does not go with '$1' (see hvhead --help)" "$TMP/u.err" ||
        fail "hvhead $c: $(cat "$TMP/u.err")"
done
"$BIN/hvhead" start --bogus 2>"$TMP/u.err"; ec=$?
[ $ec -eq 64 ] || fail "hvhead start --bogus: exit $ec, want 64"
grep -qx "hvhead: unknown option '--bogus' (see hvhead --help)" "$TMP/u.err" || fail "hvhead: $(cat "$TMP/u.err")"
"$BIN/hvhead" start --listen nohost 2>"$TMP/u.err"; ec=$?
[ $ec -eq 64 ] || fail "hvhead start --listen nohost: exit $ec, want 64"
grep -qx "hvhead: --listen: value 'nohost' is not HOST:PORT (see hvhead --help)" "$TMP/u.err" ||
    fail "hvhead --listen: $(cat "$TMP/u.err")"
"$BIN/hvagent" join --help >"$TMP/h.out" 2>&1 || fail "hvagent join --help: exit $?"
assert_grep "$TMP/h.out" "join options:"
"$BIN/hvagent" join 127.0.0.1:1 --bogus 2>"$TMP/u.err"; ec=$?
[ $ec -eq 64 ] || fail "hvagent join --bogus: exit $ec, want 64"
grep -qx "hvagent: unknown option '--bogus' for 'hvagent join' (see hvagent --help)" "$TMP/u.err" ||
    fail "hvagent: $(cat "$TMP/u.err")"
for c in status nodes jobs job logs cancel events cost drain undrain audit "node revoke" \
    "token create" "token list" "token revoke"; do
    # shellcheck disable=SC2086 # a command of two words is two arguments
    "$BIN/hvctl" $c --help >"$TMP/h.out" 2>&1 || fail "hvctl $c --help: exit $?"
    assert_grep "$TMP/h.out" "usage: hvctl \[--head HOST:PORT\] \[--json\] $c"
done
# The actor commands answer --version and -V as every other command does.
for c in actors "actor x" "actor create" "kill-actor x"; do
    for v in --version -V; do
        # shellcheck disable=SC2086 # a command of two words is two arguments
        "$BIN/hvctl" $c $v >"$TMP/v.out" 2>&1 || fail "hvctl $c $v: exit $?: $(cat "$TMP/v.out")"
        grep -Eq "^hvctl [0-9]+\.[0-9]+" "$TMP/v.out" || fail "hvctl $c $v printed: $(cat "$TMP/v.out")"
    done
done
# One option parser (common/opt.c) reads every tool and every hvctl command: the same mistake
# in the same words, and --name=value spelt as everywhere else (the actor commands had a
# parser of their own that took neither).
for c in "hvsubmit --detach=yes x|hvsubmit: option '--detach' takes no value (see hvsubmit --help)" \
    "hvctl jobs --json=1|hvctl: option '--json' takes no value (see hvctl --help)" \
    "hvctl kill-actor a --restart=1|hvctl: option '--restart' takes no value (see hvctl actor --help)" \
    "hvctl actor create --slots=65|hvctl: --slots needs a number from 0 to 64 (see hvctl actor --help)"; do
    # shellcheck disable=SC2086 # the tool and its arguments are separate words
    set -- ${c%%|*}
    t=$1
    shift
    "$BIN/$t" "$@" >/dev/null 2>"$TMP/u.err"; ec=$?
    [ $ec -eq 64 ] || fail "${c%%|*}: exit $ec, want 64"
    grep -qxF "${c#*|}" "$TMP/u.err" || fail "${c%%|*}: $(cat "$TMP/u.err")"
done
# A revocation keeps no reason: --reason is refused, not silently dropped.
"$BIN/hvctl" --head 127.0.0.1:1 node revoke node-a --reason why 2>"$TMP/u.err"; ec=$?
[ $ec -eq 64 ] || fail "hvctl node revoke --reason: exit $ec, want 64"
assert_grep "$TMP/u.err" "--reason goes with 'drain' or 'undrain', not 'revoke'"

# ---- a malformed config: the file's terms, not libyaml's ---------------------------------------
printf 'listen: [127.0.0.1:0\ndata_dir: %s\n' "$TMP/x" >"$TMP/bad.yaml"
"$BIN/hvhead" start --config "$TMP/bad.yaml" 2>"$TMP/bad.err"; ec=$?
[ $ec -ne 0 ] || fail "a malformed config started a head"
assert_grep "$TMP/bad.err" "bad.yaml:2:[0-9]*: not valid YAML: a '\[' list that is not closed with '\]'"
assert_no_grep "$TMP/bad.err" "flow sequence" "libyaml's own words reached the user"

# ---- no head: a bad host name and a dead port, in plain words ---------------------------------
# (a client token of the right shape: the CLIs read it before they dial)
printf 'hvc_%s\n' 0123456789abcdef0123456789abcdef >"$TMP/dummy.token"
chmod 600 "$TMP/dummy.token"
real_token_file=$HV_TOKEN_FILE
export HV_TOKEN_FILE="$TMP/dummy.token"
HV_INSECURE=1 "$BIN/hvsubmit" --head no-such-host.invalid:7000 "$EX/hello" 2>"$TMP/dns.err"; ec=$?
[ $ec -eq 69 ] || fail "bad host name: exit $ec, want 69"
grep -qx "hvsubmit: cannot reach the head at no-such-host.invalid:7000: cannot resolve host 'no-such-host.invalid'" \
    "$TMP/dns.err" || fail "bad host name said: $(cat "$TMP/dns.err")"
HV_INSECURE=1 "$BIN/hvctl" --head no-such-host.invalid:7000 status 2>"$TMP/dns2.err"; ec=$?
[ $ec -eq 69 ] || fail "hvctl, bad host name: exit $ec, want 69"
assert_grep "$TMP/dns2.err" "cannot resolve host 'no-such-host.invalid'"
"$BIN/hvctl" --head 127.0.0.1:1 nodes 2>"$TMP/ref.err"; ec=$?
[ $ec -eq 69 ] || fail "dead port: exit $ec, want 69"
assert_grep "$TMP/ref.err" "cannot reach the head at 127.0.0.1:1: connection refused"
HV_INSECURE=1 "$BIN/hvagent" join no-such-host.invalid:7000 --token x --name zz --work-dir "$TMP/agz" \
    --connect-timeout 1 >/dev/null 2>"$TMP/dns3.err"; ec=$?
[ $ec -ne 0 ] || fail "hvagent joined a host that does not exist"
assert_grep "$TMP/dns3.err" "cannot reach the head at no-such-host.invalid:7000 after [0-9]* s: cannot resolve host 'no-such-host.invalid'"
for f in "$TMP/dns.err" "$TMP/dns2.err" "$TMP/dns3.err" "$TMP/ref.err"; do
    for w in ARES C-ares "failed to connect to all addresses" "DNS resolution" ipv4: grpc_status; do
        assert_no_grep "$f" "$w" "gRPC's '$w' reached the user"
    done
done
export HV_TOKEN_FILE="$real_token_file"

start_head
start_agent node-a 2

# ---- ELF: only the magic is not enough, and nothing is uploaded -------------------------------
printf '\177ELF this is not a program' >"$TMP/fake.bin"; chmod 755 "$TMP/fake.bin"
"$BIN/hvsubmit" "$TMP/fake.bin" 2>"$TMP/elf.err"; ec=$?
[ $ec -eq 65 ] || fail "fake ELF: exit $ec, want 65"
assert_grep "$TMP/elf.err" "fake.bin is not a valid ELF file"
[ -z "$(ls "$TMP/data/uploads" 2>/dev/null)" ] || fail "a fake ELF was uploaded"
"$BIN/hvsubmit" "$TMP/missing.bin" 2>/dev/null; ec=$?
[ $ec -eq 66 ] || fail "missing program: exit $ec, want 66"
"$BIN/hvsubmit" -np 0 "$EX/hello" 2>/dev/null; ec=$?
[ $ec -eq 64 ] || fail "-np 0: exit $ec, want 64"

# ---- an upload on a terminal shows a progress bar (script(1) gives hvsubmit a pty) ----------
if command -v script >/dev/null 2>&1; then
    head -c 3000000 /dev/urandom >"$TMP/blob.dat"
    script -qec "'$BIN/hvsubmit' -np 1 --file '$TMP/blob.dat' '$EX/hello'" /dev/null \
        >"$TMP/tty.out" 2>&1 || fail "hvsubmit on a pty: exit $?"
    grep -q "hvsubmit: blob.dat \[#*\] 100%  2.9 MiB of 2.9 MiB" "$TMP/tty.out" ||
        fail "no progress bar on a terminal: $(tr '\r' '\n' <"$TMP/tty.out" | head -5)"
fi

# ---- a rank's own status: 200 stays 200, 2 stays 2 --------------------------------------------
"$BIN/hvsubmit" -np 2 "$EX/fail" 200 1 >"$TMP/f200.out" 2>"$TMP/f200.err"; ec=$?
[ $ec -eq 200 ] || fail "rank exit 200: hvsubmit exited $ec"
[ "$(grep -cx 'hvsubmit: rank 1 on node-a exited with status 200' "$TMP/f200.err")" -eq 1 ] ||
    fail "the failure of rank 1 should be told exactly once"
assert_no_grep "$TMP/f200.err" "rank 1 on node node-a" "the end repeated rank 1's failure"
[ "$(grep -c 'submitted' "$TMP/f200.err")" -eq 1 ] || fail "'submitted' should be said once"
"$BIN/hvsubmit" -np 1 "$EX/fail" 2 0 >/dev/null 2>&1; ec=$?
[ $ec -eq 2 ] || fail "rank exit 2: hvsubmit exited $ec"

# ---- a pending job says what it waits for; hvctl status shows the demand ----------------------
"$BIN/hvsubmit" --detach -np 2 "$EX/sleeper" 60 >"$TMP/busy.id" 2>/dev/null || fail "submit sleeper"
BUSY=$(cat "$TMP/busy.id")
wait_for 15 workers_at_least "$BUSY" 2 || fail "sleeper workers did not start"
"$BIN/hvsubmit" -np 1 "$EX/hello" >"$TMP/wait.out" 2>"$TMP/wait.err" &
SUB=$!
PIDS="$PIDS $SUB"
wait_for 15 grep -q "is waiting for 1 free slot: 0 of 2 free now (1 node alive, 0 draining, 0 dead)" \
    "$TMP/wait.err" || fail "the pending job did not say what it waits for"
"$BIN/hvctl" status >"$TMP/status.out" || fail "hvctl status: exit $?"
assert_grep "$TMP/status.out" "^cluster: test at $HEAD$"
assert_grep "$TMP/status.out" "^nodes:   1 alive, 0 draining, 0 dead$"
assert_grep "$TMP/status.out" "^slots:   2 used, 0 free (2 on alive nodes)$"
assert_grep "$TMP/status.out" "^jobs:    1 pending, 0 placing, 1 running, [01] succeeded, 2 failed, 0 cancelled$"
assert_grep "$TMP/status.out" "^demand:  1 job waiting for 1 slot (0 free now)$"
"$BIN/hvctl" --json status >"$TMP/status.json" || fail "hvctl --json status: exit $?"
$PY - "$TMP/status.json" <<'EOF' || fail "hvctl --json status: wrong document"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cluster_name"] == "test", d
assert d["nodes"] == {"alive": 1, "draining": 0, "dead": 0}, d["nodes"]
assert d["slots"]["used"] == 2 and d["slots"]["free"] == 0, d["slots"]
assert d["jobs"]["pending"] == 1 and d["jobs"]["running"] == 1, d["jobs"]
assert d["pending_demand"]["slots"] == 1 and len(d["pending_demand"]["waiting"]) == 1, d
assert d["pending_demand"]["waiting"][0]["np"] == 1
EOF
# drain shows in status; undrain takes it back
"$BIN/hvctl" drain node-a --reason test >/dev/null || fail "hvctl drain"
"$BIN/hvctl" status >"$TMP/status2.out" || fail "hvctl status after drain"
assert_grep "$TMP/status2.out" "^nodes:   0 alive, 1 draining, 0 dead$"
"$BIN/hvctl" undrain node-a >/dev/null || fail "hvctl undrain"
"$BIN/hvctl" drain no-such-node 2>"$TMP/drain.err"; ec=$?
[ $ec -eq 66 ] || fail "drain of an unknown node: exit $ec, want 66"

# ---- SIGTERM detaches and says how to follow the job ------------------------------------------
kill -TERM "$SUB"; wait "$SUB"; ec=$?
[ $ec -eq 75 ] || fail "hvsubmit after SIGTERM: exit $ec, want 75"
assert_grep "$TMP/wait.err" "SIGTERM: detached; job [0-9]* goes on: follow it with 'hvctl logs -f [0-9]*'"
WAITING=$(sed -nE "s/.*detached; job ([0-9]+) goes on.*/\1/p" "$TMP/wait.err")
[ "$(job_state "$WAITING")" = pending ] || fail "the detached job should still be pending"
"$BIN/hvctl" cancel "$WAITING" >/dev/null || fail "cancel the detached job"
# SIGHUP (a closed terminal) does the same
"$BIN/hvsubmit" -np 1 "$EX/hello" >/dev/null 2>"$TMP/hup.err" &
SUB=$!
PIDS="$PIDS $SUB"
wait_for 15 grep -q "submitted" "$TMP/hup.err" || fail "the second pending job was not submitted"
kill -HUP "$SUB"; wait "$SUB"; ec=$?
[ $ec -eq 75 ] || fail "hvsubmit after SIGHUP: exit $ec, want 75"
assert_grep "$TMP/hup.err" "SIGHUP: detached; job [0-9]* goes on: follow it with 'hvctl logs -f [0-9]*'"
HUPJOB=$(sed -nE "s/.*detached; job ([0-9]+) goes on.*/\1/p" "$TMP/hup.err")
"$BIN/hvctl" cancel "$HUPJOB" >/dev/null || fail "cancel the job detached by SIGHUP"
"$BIN/hvctl" cancel "$BUSY" >/dev/null || fail "cancel the sleeper"
wait_for 15 no_workers "$BUSY" || fail "the sleeper's workers did not stop"

# ---- a head that stays gone: given up on after --head-timeout, with exit 69 ----------------------
"$BIN/hvsubmit" --head-timeout 3 -np 1 "$EX/sleeper" 60 >/dev/null 2>"$TMP/gone.err" &
SUB=$!
PIDS="$PIDS $SUB"
wait_for 15 grep -q "running" "$TMP/gone.err" || fail "the job did not start"
kill -KILL "$HEAD_PID"
t0=$(date +%s)
wait "$SUB"; ec=$?
t1=$(date +%s)
[ $ec -eq 69 ] || fail "head gone: exit $ec, want 69"
[ $((t1 - t0)) -le $((10 * T_MULT)) ] || fail "head gone: hvsubmit waited $((t1 - t0)) s with --head-timeout 3"
assert_grep "$TMP/gone.err" "gave up after 3 s: the head at .* did not come back (connection refused)"
assert_grep "$TMP/gone.err" "--head-timeout S sets this wait"
pass "exit codes, ELF check, errors in plain words, pending, status, detach, head timeout, help"
