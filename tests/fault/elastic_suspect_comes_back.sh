#!/bin/sh
# A suspected node that comes back within its lease. node-b's agent reaches the head through a
# TCP relay; the relay drops its connection (the head sees node-b's session close: node-b is
# suspected) while node-b's worker is frozen (SIGSTOP). node-a's workers find the frozen peer
# stalled, roll back and re-join; the round forms without node-b's worker after the grace (not
# at the 20 s rendezvous timeout, nor the 10 s lease) and the job goes on. The relay comes back
# within the lease: node-b's agent re-attaches under its name (never dead), the head tells it
# again to stop the worker the job left behind (the first order could not reach it), and the
# job ends 0 with every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
LEASE_MS=10000
RDZV_S=20
start_elastic_head "suspect_grace_ms: 500"
RELAY_PORT=$(free_port)
/usr/bin/python3 - "$RELAY_PORT" "$HEAD" "$TMP/cut" >"$TMP/relay.out" 2>&1 <<'PY' &
import os, socket, sys, threading, time
port, head, cut = int(sys.argv[1]), sys.argv[2], sys.argv[3]
host, hport = head.rsplit(":", 1)
conns, lock = [], threading.Lock()
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def watch():  # while the cut file exists: every relayed connection is closed
    while True:
        if os.path.exists(cut):
            with lock:
                for s in conns:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                conns.clear()
        time.sleep(0.05)
threading.Thread(target=watch, daemon=True).start()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(16)
print("relaying", flush=True)
while True:
    c, _ = ls.accept()
    if os.path.exists(cut):
        c.close()
        continue
    u = socket.create_connection((host, int(hport)))
    with lock:
        conns.extend([c, u])
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
PY
PIDS="$PIDS $!"
wait_for 10 grep -q relaying "$TMP/relay.out" || fail "the relay did not start"
start_agent node-a 2
REAL_HEAD=$HEAD; HEAD=127.0.0.1:$RELAY_PORT
start_agent node-b 1
HEAD=$REAL_HEAD
submit back -np 3 --min-np 1 --max-np 3 --env HV_PEER_TIMEOUT_MS=2000 -- --epochs 3 \
    --step-delay-ms 20 --epoch-log "$TMP/back.epochs"
wait_epoch_logged back 0
wb=$(agent_workers node-b)
[ "$(echo $wb | wc -w)" -eq 1 ] || fail "expected node-b's worker, got: $wb"
kill -STOP $wb
touch "$TMP/cut"
wait_for 6 grep -q "generation 2: " "$TMP/back.err" || fail "no round formed without node-b's frozen worker within 6 s (the lease is 10 s)"
wait_for 10 grep -q "node node-b is suspected lost" "$TMP/head.err" || fail "node-b was not suspected when its session closed"
rm -f "$TMP/cut"
wait_for 9 grep -q "node node-b is heard again within its lease" "$TMP/head.err" || fail "node-b's agent did not come back within the lease"
wait_for 10 sh -c "! kill -0 $wb 2>/dev/null" || fail "node-b's left-out worker $wb was not stopped after its agent came back"
ran_exact back 3 120 "the job should end 0"
rounds 1 >"$TMP/rounds"; cat "$TMP/rounds"
/usr/bin/python3 - "$TMP/events-1.json" <<'PY' || fail "g2 should roll back to node-a's 2 workers within a few seconds, leaving node-b's out as suspected"
import json, sys
c = [e["data"] for e in json.load(open(sys.argv[1]))["events"] if e["kind"] == "round.close"][1]
print("g2:", c["size"], c["rollback"], c.get("suspected_left_out"), c["wait_ms"])
assert c["size"] == 2 and c["rollback"] and c.get("suspected_left_out") == 1 and c["wait_ms"] < 5000, c
PY
assert_no_grep "$TMP/head.err" "node node-b is dead"
"$BIN/hvctl" --head "$HEAD" nodes >"$TMP/nodes"; cat "$TMP/nodes"
awk '$1 == "node-b" && $3 == "alive"' "$TMP/nodes" | grep -q . || fail "node-b should still be alive under its name"
pass "a suspected node that comes back keeps its name; its left-out worker is stopped"
