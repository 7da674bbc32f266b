#!/bin/sh
# The autoscaler with the command provider and the templates in deploy/providers/local/ (the
# head runs launch.sh, terminate.sh and list.sh with its own environment, as a site would run
# its cloud's CLI):
#  - launch.sh starts an agent that enrolls by itself with its instance's credential file
#    ({token_file}); the head keeps the cluster at its minimum (1 node);
#  - an elastic job (-np 2, max-np 4) makes the head launch another node; the job grows onto it
#    and trains every sample exactly once per epoch;
#  - after the job the idle node is given back through terminate.sh, and its agent exits;
#  - an agent killed behind the head's back is dropped from list.sh's output; the head counts its
#    instance as gone and launches a replacement to keep the minimum (here the lost lease tells
#    it first: the head runs list every 10 s with a 60 s grace, longer than this test);
#  - a launch command that fails shows in `hvctl events` with the last line it wrote on stderr.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
P=$HV_SRC_DIR/deploy/providers/local
# The templates read these; the head runs its commands with its own environment.
export HV_AGENT="$BIN/hvagent" HV_LOCAL_DIR="$TMP/instances"
D=$TMP/data/instances # the head's instance credentials ({token_file})
start_elastic_head "autoscaler:" "  provider: command" "  min_nodes: 1" "  max_nodes: 3" \
    "  idle_timeout_s: 4" "  launch_timeout_s: 5" "  node_types:" "    small: {slots: 2}" \
    "  command:" \
    "    launch: \"$P/launch.sh {name} {head} {token_file} {slots}\"" \
    "    terminate: \"$P/terminate.sh {name}\"" \
    "    list: \"$P/list.sh\""
has_e() { ev | grep -E -q -- "$1"; }
launches() { ev | grep -c "autoscaler.launch "; }
alive_names() { "$BIN/hvctl" --head "$HEAD" nodes 2>/dev/null | awk '$3 == "alive" { print $1 }'; }
# agents: how many agent processes the templates started are running now.
agents() { pgrep -f -- "--work-dir $HV_LOCAL_DIR/" | wc -l; }
agents_are() { [ "$(agents)" -eq "$1" ]; }
listed() { HV_LOCAL_DIR="$HV_LOCAL_DIR" "$P/list.sh"; }

# 1. The minimum: launch.sh starts an agent that joins with its own instance credential.
wait_for 20 alive_nodes_is 1 || fail "the autoscaler did not bring the cluster to its minimum"
wait_for 10 has "autoscaler.joined .*joined as node small-1" || fail "no autoscaler.joined event for small-1"
ev >"$TMP/ev1.txt"
assert_grep "$TMP/ev1.txt" "autoscaler.launch .*instance 1 (small, node small-1, 2 slots.*keeps at least 1 nodes" \
    "the launch must name the node and say why"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes1.txt" 2>&1
assert_grep "$TMP/nodes1.txt" "^small-1 .* alive" "hvctl nodes must show small-1 alive"
[ -f "$HV_LOCAL_DIR/small-1/pid" ] || fail "launch.sh did not record small-1's pid"
pid1=$(cat "$HV_LOCAL_DIR/small-1/pid")
kill -0 "$pid1" 2>/dev/null || fail "small-1's agent (pid $pid1) does not run"
cmd1=$(tr '\0' ' ' <"/proc/$pid1/cmdline")
case "$cmd1" in
*"--token-file $D/1.token "*) ;;
*) fail "small-1's agent was not given its instance credential file: $cmd1" ;;
esac
case "$cmd1" in *"$TOKEN"*) fail "small-1's agent was given the cluster token: $cmd1" ;; esac
[ "$(stat -c %a "$D/1.token")" = 600 ] || fail "the instance credential file must be 0600"
assert_grep "$HV_LOCAL_DIR/small-1/agent.log" "joined" "small-1's agent log must say it joined"
[ "$(listed)" = small-1 ] || fail "list.sh must print small-1, printed: $(listed)"
# Steady at the minimum: no further launch while nothing waits.
sleep 2
[ "$(launches)" -eq 1 ] || fail "1 launch expected at the minimum, saw $(launches)"

# 2. An elastic job grows the cluster through launch.sh, and itself onto the new node.
submit grow -np 2 --min-np 2 --max-np 4 -- --epochs 3 --step-delay-ms 15
wait_for 30 alive_nodes_is 2 || fail "the autoscaler did not grow the cluster to 2 nodes"
wait_for 60 grep -q "size=4 " "$TMP/grow.out" || fail "the job did not grow to 4 workers"
ran_exact grow 3 120 "the growing job failed"
[ "$(launches)" -eq 2 ] || fail "2 launches expected for the job, saw $(launches)"
ev >"$TMP/ev2.txt"
assert_grep "$TMP/ev2.txt" "autoscaler.launch .*instance 2 (small, node small-2, .*job 1" \
    "the second launch must be for job 1"
assert_grep "$TMP/ev2.txt" "autoscaler.joined .*joined as node small-2" "small-2 did not join"

# 3. Idle nodes go back through terminate.sh after the idle timeout; their agents exit.
wait_for 30 alive_nodes_is 1 || fail "the idle node was not given back"
wait_for 20 agents_are 1 || fail "the given-back agent still runs: $(pgrep -a -f -- "--work-dir $HV_LOCAL_DIR/")"
wait_for 10 has "autoscaler.gone .*is gone: terminated" || fail "no autoscaler.gone event after terminate.sh"
ev >"$TMP/ev3.txt"
assert_grep "$TMP/ev3.txt" "autoscaler.terminate .*idle for .* (idle timeout 4 s)" "the termination must say why"
keep=$(alive_names)
[ "$(echo "$keep" | wc -w)" -eq 1 ] || fail "one alive node expected, saw: $keep"
gone=small-1; [ "$keep" = small-1 ] && gone=small-2
[ -f "$HV_LOCAL_DIR/$gone/pid" ] && fail "terminate.sh left $gone's pid file"
idn=${gone#small-}
[ -f "$D/$idn.token" ] && fail "the given-back instance's credential file is still there"
[ "$(listed)" = "$keep" ] || fail "list.sh must print only $keep, printed: $(listed)"

# 4. An agent killed behind the head's back: list.sh drops it, the head sees the instance gone
#    (its node lost for launch_timeout_s, or no longer listed) and launches a replacement.
kpid=$(cat "$HV_LOCAL_DIR/$keep/pid")
kill -KILL "$kpid"
wait_for 10 sh -c "[ -z \"\$(HV_LOCAL_DIR='$HV_LOCAL_DIR' '$P/list.sh')\" ]" \
    || fail "list.sh still prints the killed instance: $(listed)"
wait_for 30 has_e "autoscaler\.(gone|preempted) .*node $keep\) is gone" \
    || fail "the head did not notice that $keep is gone"
wait_for 30 sh -c "[ \$(\"$BIN/hvctl\" --head '$HEAD' events --limit 1000 | grep -c 'autoscaler.joined') -ge 3 ]" \
    || fail "no replacement joined"
wait_for 10 alive_nodes_is 1 || fail "the cluster is not back at its minimum"
new=$(alive_names)
[ "$new" = small-3 ] || fail "the replacement should be small-3, alive: $new"
[ "$(launches)" -eq 3 ] || fail "3 launches expected, saw $(launches)"
agents_are 1 || fail "one agent expected, running: $(pgrep -a -f -- "--work-dir $HV_LOCAL_DIR/")"
ev >"$TMP/ev4.txt"
assert_grep "$TMP/ev4.txt" "autoscaler.launch .*instance 3 (small, node small-3, .*keeps at least 1 nodes" \
    "the replacement's launch must say why"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes4.txt" 2>&1
assert_no_grep "$TMP/nodes4.txt" "^$keep .* alive" "the killed node must not show alive"

# 5. A launch command that fails: its last stderr line is in hvctl events. A second head, with
#    its own data dir, whose launch command is a wrapper that fails.
kill -INT "$HEAD_PID"; wait "$HEAD_PID" 2>/dev/null
cat >"$TMP/bad-launch.sh" <<'EOF'
#!/bin/sh
echo "asking zone test-z for a small instance" >&2
echo "error: zone test-z has no capacity for small" >&2
exit 1
EOF
chmod +x "$TMP/bad-launch.sh"
mv "$TMP/head.yaml" "$TMP/head1.yaml"
write_config "$TMP/head.yaml" "autoscaler:" "  provider: command" "  min_nodes: 1" \
    "  max_nodes: 2" "  launch_timeout_s: 5" "  max_launch_failures: 1" "  set_aside_s: 600" \
    "  node_types:" "    small: {slots: 2}" "  command:" \
    "    launch: \"$TMP/bad-launch.sh {name} {head} {token_file} {slots}\"" \
    "    terminate: \"$P/terminate.sh {name}\""
sed -i "s|^data_dir: .*|data_dir: $TMP/data2|" "$TMP/head.yaml"
export HV_TOKEN_FILE="$TMP/data2/client.token"
start_head
wait_for 20 has "autoscaler.launch_failed" || fail "no autoscaler.launch_failed event"
ev >"$TMP/ev5.txt"
assert_grep "$TMP/ev5.txt" "autoscaler.launch_failed .*instance 1 (small): launch failed: the launch command exited with status 1: error: zone test-z has no capacity for small" \
    "the failed launch must show the command's last stderr line"
alive_nodes_is 0 || fail "no node should have joined the second head"
pass "the command provider launches, grows, gives back, replaces a lost agent through deploy/providers/local, and reports a failed launch"
