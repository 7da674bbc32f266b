#!/bin/sh
# Multi-host: the head and two agents each run in their own network namespace with their own
# address on a bridge (10.201.0.0/24, inside namespaces this test creates). hello -np 4 runs
# across them; nodes report their own addresses. Beyond loopback the head serves TLS: its
# certificate names 10.201.0.1, agents verify it and present client certificates (mTLS), the
# workers' rendezvous verifies it too, and a plain-text client is refused before it sends
# anything. Skipped (exit 77) where ip netns is not allowed or there is no openssl command.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/netns_lib.sh"
hv_setup
command -v openssl >/dev/null 2>&1 || { echo "SKIP: no openssl command"; exit 77; }
P=hvt$$
netns_test_hosts $P 10.201.0 2 # node-a at 10.201.0.2, node-b at .3
H=${P}h A=${P}1 B=${P}2
C=$TMP/pki
HV_CERT_EXTRA_SAN=IP:10.201.0.1 sh "$HV_SRC_DIR/tests/make_certs.sh" "$C" || fail "cannot make certificates"
HV_LISTEN=0.0.0.0:7000 write_config "$TMP/head.yaml" "tls:" "  cert: $C/server.pem" \
    "  key: $C/server.key" "  ca: $C/ca.pem" "  require_client_cert: true"
TLS="--ca $C/ca.pem --cert $C/client.pem --key $C/client.key"
ip netns exec $H "$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/head.out" 2>"$TMP/head.err" &
wait_for 10 grep -q 'listening on' "$TMP/head.out" || fail "head did not start in its namespace"
assert_grep "$TMP/head.out" "advertised 10.201.0.1:7000"
for n in a b; do
    ns=$(eval echo \$$(echo $n | tr a-z A-Z))
    ip netns exec $ns "$BIN/hvagent" join 10.201.0.1:7000 --token "$TOKEN" --name node-$n --slots 2 $TLS \
        --work-dir "$TMP/agent-node-$n" >"$TMP/agent-$n.out" 2>"$TMP/agent-$n.err" &
    wait_for 15 grep -q joined "$TMP/agent-$n.out" || fail "agent node-$n did not join across namespaces"
done
HEAD=10.201.0.1:7000
# Plain text beyond loopback is refused by the client itself (exit 2), before anything is sent.
ip netns exec $A "$BIN/hvctl" --head $HEAD nodes >"$TMP/plain.out" 2>"$TMP/plain.err"; ec=$?
[ $ec -eq 64 ] || fail "plain-text hvctl to a remote head: exit $ec, want 64 (usage)"
assert_grep "$TMP/plain.err" "refusing plain text to the head at $HEAD"
export HV_CA_FILE=$C/ca.pem
ip netns exec $H "$BIN/hvsubmit" --head $HEAD -np 4 "$EX/hello" >"$TMP/submit.out" 2>"$TMP/submit.err" || fail "hvsubmit across namespaces failed"
[ "$(grep -c 'hello from rank' "$TMP/submit.out")" -eq 4 ] || fail "expected 4 hello lines"
ip netns exec $H "$BIN/hvctl" --head $HEAD --json nodes >"$TMP/nodes.json" || fail "hvctl nodes"
assert_grep "$TMP/nodes.json" "10.201.0.2" "node-a must report its own address"
assert_grep "$TMP/nodes.json" "10.201.0.3" "node-b must report its own address"
ip netns exec $H "$BIN/hvctl" --head $HEAD job 1 >"$TMP/job.out"
assert_grep "$TMP/job.out" "node-a"; assert_grep "$TMP/job.out" "node-b"
pass "head and agents in separate network namespaces, over TLS with client certificates"
