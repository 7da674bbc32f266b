#!/bin/sh
# Fair share through the real binaries (issue 26 §2): a head with two namespaces x and y of equal
# weight and no quota, on 4 slots. Job X (namespace x, elastic 1..4) takes the whole cluster; job
# Y (namespace y, elastic 1..4, wanting the whole cluster too) is admitted with its floor, then
# the policy moves workers between the namespaces by their weighted dominant share: within one
# resize interval after both run they hold 2 slots each (rounds of 2, no rollback), and `hvctl
# --json queue` shows both namespaces at the same share, `hvctl status` (and --json) each at 2
# slots and 50%. Both end 0 with every epoch exact.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
hv_setup
INTERVAL_MS=2000
start_elastic_head "fleet:" "  resize_interval_ms: $INTERVAL_MS" "  namespaces:" \
    "    - {name: x, weight: 1}" "    - {name: y, weight: 1}"
start_agent node-a 2
start_agent node-b 2
submit x --namespace x -np 4 --min-np 1 --max-np 4 -- --epochs 6 --step-delay-ms 25
X_PID=$SUB_PID
wait_epoch x 0
wait_for 30 round_size_is 1 4 || fail "job X did not run on 4 workers"
submit y --namespace y -np 4 --min-np 1 --max-np 4 -- --epochs 3 --step-delay-ms 25
Y_PID=$SUB_PID
wait_for 30 state_is 2 running || fail "job Y did not start"
# Both at 2: the queue's targets and the namespaces' use.
wait_for 20 sh -c "'$BIN/hvctl' --head '$HEAD' --json queue | /usr/bin/python3 -c '
import json, sys
q = json.load(sys.stdin)
ns = {n[\"name\"]: n for n in q[\"namespaces\"]}
assert ns[\"x\"][\"used\"][\"slots\"] == 2 and ns[\"y\"][\"used\"][\"slots\"] == 2
assert ns[\"x\"][\"share_pm\"] == ns[\"y\"][\"share_pm\"] == 500
assert all(j[\"target\"] == 2 for j in q[\"jobs\"])
'" || { "$BIN/hvctl" --head "$HEAD" queue; fail "x and y should converge to 2 slots each"; }
"$BIN/hvctl" --head "$HEAD" queue
# hvctl status sums it up per namespace, with the policy's own figures: x and y 1 job and 2 slots
# each at 50%, and "default" (no job) at none.
status_halves() {
    "$BIN/hvctl" --head "$HEAD" --json status >"$TMP/status.json" && /usr/bin/python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["fleet"]
ns = {n["name"]: n for n in f["namespaces"]}
assert sorted(ns) == ["default", "x", "y"], ns
for n in "xy":
    assert ns[n]["jobs"] == 1 and ns[n]["workers"] == 2 and ns[n]["waiting"] == 0, ns
    assert ns[n]["slots"]["used"] == 2 and ns[n]["slots"]["quota"] == 0, ns
    assert ns[n]["share_pm"] == 500 and ns[n]["share"] == 0.5, ns
assert ns["default"]["jobs"] == 0 and ns["default"]["slots"]["used"] == 0, ns
assert f["running"] == 2 and f["workers"] == 4, f
' "$TMP/status.json" &&
        "$BIN/hvctl" --head "$HEAD" status >"$TMP/status.txt" &&
        grep -q '^  namespace x: 1 job, 2 workers, 0 waiting; 2 slots used (no quota), share 50.0%$' "$TMP/status.txt"
}
wait_for 20 status_halves \
    || { cat "$TMP/status.json" >&2; fail "hvctl status --json should show x and y at 2 workers and 2 slots each"; }
cat "$TMP/status.txt"
for n in x y; do
    assert_grep "$TMP/status.txt" "^  namespace $n: 1 job, 2 workers, 0 waiting; 2 slots used (no quota), share 50.0%$"
done
SUB_PID=$Y_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/y.err" >&2; fail "job Y should succeed, hvsubmit exited $SUB_RC"; }
SUB_PID=$X_PID; wait_submit 120
[ "$SUB_RC" -eq 0 ] || { cat "$TMP/x.err" >&2; fail "job X should succeed, hvsubmit exited $SUB_RC"; }
check_exact x 6
check_exact y 3
events 1
events 2
/usr/bin/python3 - "$TMP/events-1.json" "$TMP/events-2.json" "$INTERVAL_MS" "$T_MULT" <<'PY' \
    || fail "x and y should hold 2 slots each within one resize interval after both run"
import json, sys
ex = json.load(open(sys.argv[1]))["events"]
ey = json.load(open(sys.argv[2]))["events"]
interval, mult = int(sys.argv[3]), int(sys.argv[4])
def closes(evs, job):
    return [(e["time_ms"], job, e["data"]["size"], e["data"]["rollback"]) for e in evs
            if e["kind"] == "round.close"]
rs = sorted(closes(ex, "x") + closes(ey, "y"))
assert not any(r[3] for r in rs), rs
y_first = min(t for t, j, _, _ in rs if j == "y")
size, both = {}, None
for t, j, s, _ in rs:
    size[j] = s
    if t >= y_first and size.get("x") == 2 and size.get("y") == 2:
        both = t
        break
assert both is not None, rs
print("both at 2 slots %d ms after job Y's first round (resize interval %d ms)" % (both - y_first, interval))
# One interval: X's hold after its shrink for Y's admission, then the commit that moves a worker.
assert both - y_first <= (interval + 1000) * mult, (both - y_first, rs)
sh = [e["data"] for e in ex if e["kind"] == "fleet.shrink"]
assert any(d["reason"] == "shrunk_share" and d["cause"] == 2 for d in sh) or \
       any(d["to"] == 2 and d["cause"] == 2 for d in sh), sh
PY
pass "two namespaces of equal weight converged to half the cluster each, both exact"
