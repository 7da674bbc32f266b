#!/bin/sh
# TLS through the real binaries, with certificates made by the openssl command: a head with
# tls: (and require_client_cert) serves agents that verify it with --ca and present a client
# certificate; hvsubmit --ca runs a 2-worker libhv job whose rendezvous (worker -> head) goes
# over TLS with the CA path the agent handed down; hvctl verifies through HV_CA_FILE. Refused, with
# a message in the user's terms and a non-zero exit: a plain-text client, a client trusting
# another CA, a CA file that does not exist, an agent without a client certificate, a head with a
# key that does not match its certificate, and a head that would serve plain text beyond loopback
# without allow_insecure. Skipped (77) without openssl.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
command -v openssl >/dev/null 2>&1 || { echo "SKIP: no openssl command"; exit 77; }
C=$TMP/pki
sh "$HV_SRC_DIR/tests/make_certs.sh" "$C" || fail "cannot make certificates"

# gRPC's own log lines ("E1124 12:00:00.000 ssl_transport_security.cc:...") must not reach users.
no_internals() { # FILE
    assert_no_grep "$1" "ssl_transport_security" "library internals in $1"
    assert_no_grep "$1" "SSL_ERROR" "library internals in $1"
    assert_no_grep "$1" "OPENSSL_internal" "library internals in $1"
}

# ---- refusals at start ----------------------------------------------------------------------
printf 'listen: 0.0.0.0:0\ndata_dir: %s/d1\ntoken: t\n' "$TMP" >"$TMP/open.yaml"
"$BIN/hvhead" start --config "$TMP/open.yaml" >"$TMP/open.out" 2>"$TMP/open.err"; ec=$?
[ $ec -eq 2 ] || fail "plain text on 0.0.0.0 without allow_insecure: exit $ec, want 2"
assert_grep "$TMP/open.err" "open.yaml:1:9: key 'listen': value '0.0.0.0:0' is not a loopback address"
assert_grep "$TMP/open.err" "allow_insecure: true"
printf 'listen: 127.0.0.1:0\ndata_dir: %s/d1\ntoken: t\n' "$TMP" >"$TMP/lo.yaml"
"$BIN/hvhead" start --config "$TMP/lo.yaml" --listen 0.0.0.0:0 >"$TMP/open2.out" 2>"$TMP/open2.err"; ec=$?
[ $ec -eq 2 ] || fail "--listen 0.0.0.0 without tls: exit $ec, want 2"
assert_grep "$TMP/open2.err" "--listen 0.0.0.0:0: not a loopback address"
# Allowed on purpose: it starts, and says what it costs.
printf 'listen: 0.0.0.0:0\ndata_dir: %s/d2\ntoken: t\nallow_insecure: true\n' "$TMP" >"$TMP/ins.yaml"
"$BIN/hvhead" start --config "$TMP/ins.yaml" >"$TMP/ins.out" 2>"$TMP/ins.err" &
ipid=$!; PIDS="$PIDS $ipid"
wait_for 10 grep -q 'listening on' "$TMP/ins.out" || fail "allow_insecure head did not start"
assert_grep "$TMP/ins.err" "HV-HEAD-INSECURE" "an allowed plain-text head must warn"
kill "$ipid"; wait "$ipid" 2>/dev/null
# A key that belongs to another certificate: refused with the file, line and key.
printf 'listen: 127.0.0.1:0\ndata_dir: %s/d3\ntoken: t\ntls:\n  cert: %s/server.pem\n  key: %s/other.key\n' \
    "$TMP" "$C" "$C" >"$TMP/mismatch.yaml"
"$BIN/hvhead" start --config "$TMP/mismatch.yaml" >"$TMP/mm.out" 2>"$TMP/mm.err"; ec=$?
[ $ec -eq 2 ] || fail "mismatched key: exit $ec, want 2"
assert_grep "$TMP/mm.err" "mismatch.yaml:6:8: key 'tls.key': the private key '$C/other.key' does not match the certificate"
no_internals "$TMP/mm.err"
printf 'listen: 127.0.0.1:0\ndata_dir: %s/d3\ntoken: t\ntls:\n  cert: %s/nope.pem\n  key: %s/server.key\n' \
    "$TMP" "$C" "$C" >"$TMP/nofile.yaml"
"$BIN/hvhead" start --config "$TMP/nofile.yaml" >"$TMP/nf.out" 2>"$TMP/nf.err"; ec=$?
[ $ec -eq 2 ] || fail "missing certificate: exit $ec, want 2"
assert_grep "$TMP/nf.err" "nofile.yaml:5:9: key 'tls.cert': certificate '$C/nope.pem': cannot open: No such file or directory"

# ---- a TLS head with mTLS for agents ---------------------------------------------------------
start_head "tls:" "  cert: $C/server.pem" "  key: $C/server.key" "  ca: $C/ca.pem" \
    "  require_client_cert: true"
assert_grep "$TMP/head.err" "HV-HEAD-TLS"
# An agent without a client certificate is refused at once, and says why.
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name nocert --ca "$C/ca.pem" \
    --work-dir "$TMP/agent-nocert" --connect-timeout 10 >"$TMP/nocert.out" 2>"$TMP/nocert.err"; ec=$?
[ $ec -ne 0 ] || fail "an agent without a client certificate joined"
assert_grep "$TMP/nocert.err" "requires a client certificate" "the agent must say why it was refused"
assert_grep "$TMP/nocert.err" "--cert"
# An agent that trusts another CA gives up (bounded by --connect-timeout) and says why.
"$BIN/hvagent" join "$HEAD" --token "$TOKEN" --name wrongca --ca "$C/other-ca.pem" \
    --cert "$C/client.pem" --key "$C/client.key" --work-dir "$TMP/agent-wrongca" \
    --connect-timeout 2 >"$TMP/wrongca.out" 2>"$TMP/wrongca.err"; ec=$?
[ $ec -ne 0 ] || fail "an agent trusting another CA joined"
assert_grep "$TMP/wrongca.err" "not signed by the CA in"
no_internals "$TMP/wrongca.err"

start_agent a 1 --ca "$C/ca.pem" --cert "$C/client.pem" --key "$C/client.key"
start_agent b 1 --ca "$C/ca.pem" --cert "$C/client.pem" --key "$C/client.key"

# A 2-worker libhv job: hv_init's rendezvous goes worker -> head over TLS (HV_CA_FILE).
"$BIN/hvsubmit" --head "$HEAD" --ca "$C/ca.pem" -np 2 "$EX/hello" >"$TMP/submit.out" 2>"$TMP/submit.err" \
    || fail "hvsubmit --ca: exit $?"
[ "$(grep -c 'hello from rank' "$TMP/submit.out")" -eq 2 ] || fail "expected 2 hello lines"
assert_grep "$TMP/submit.out" "hello from rank 0 of 2"
assert_grep "$TMP/submit.out" "hello from rank 1 of 2"
HV_CA_FILE="$C/ca.pem" "$BIN/hvctl" --head "$HEAD" --json nodes >"$TMP/nodes.json" || fail "hvctl with HV_CA_FILE"
assert_grep "$TMP/nodes.json" '"a"'
assert_grep "$TMP/nodes.json" '"b"'
HV_CA_FILE="$C/ca.pem" "$BIN/hvctl" --head "$HEAD" job 1 >"$TMP/job.out" || fail "hvctl job 1"
assert_grep "$TMP/job.out" "succeeded"

# Clients that cannot verify the head: non-zero, and a message a user can act on.
"$BIN/hvsubmit" --head "$HEAD" -np 1 "$EX/hello" >"$TMP/plain.out" 2>"$TMP/plain.err"; ec=$?
[ $ec -eq 69 ] || fail "a plain-text hvsubmit against a TLS head: exit $ec, want 69 (docs/tls.md)"
assert_grep "$TMP/plain.err" "cannot reach the head at $HEAD"
assert_grep "$TMP/plain.err" "if it uses TLS, give --ca FILE"
no_internals "$TMP/plain.err"
"$BIN/hvctl" --head "$HEAD" --ca "$C/other-ca.pem" nodes >"$TMP/other.out" 2>"$TMP/other.err"; ec=$?
[ $ec -eq 69 ] || fail "hvctl trusting another CA: exit $ec, want 69 (docs/tls.md)"
assert_grep "$TMP/other.err" "the head's certificate is not signed by the CA in '$C/other-ca.pem'"
no_internals "$TMP/other.err"
"$BIN/hvctl" --head "$HEAD" --ca "$C/missing.pem" nodes >"$TMP/miss.out" 2>"$TMP/miss.err"; ec=$?
[ $ec -eq 64 ] || fail "hvctl --ca with a missing file: exit $ec, want 64 (usage)"
assert_grep "$TMP/miss.err" "hvctl: --ca: CA file '$C/missing.pem': cannot open: No such file or directory"
# The head is not harmed by any of it.
HV_CA_FILE="$C/ca.pem" "$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" || fail "the head stopped serving"
pass "TLS: verified head, mTLS agents, libhv rendezvous over TLS, clear refusals"
