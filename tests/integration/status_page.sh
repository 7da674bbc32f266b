#!/bin/sh
# The status page (docs/status-page.md) in a real browser: a head serves it on its metrics
# listener (loopback: no login), an elastic job on A(2) and B(2) loses its rank-0 worker to
# SIGKILL, and headless Chromium (Debian's chromium) loads /job/1: the rendered DOM holds
# generation 2 with its reason as hvctl events has it (failure: rank 0 ... killed by signal
# SIGKILL, after the data plane's failure when the survivors noticed first), rolled back, and the
# killed worker's signal, and a screenshot
# is taken (HV_PAGE_SCREENSHOT=PATH copies it there; docs/status-page.png was made so). Before
# that, curl checks that the cluster page escapes a job named like markup and says why that
# pending job waits. Last, an actor created and called shows up on the cluster page ("/") in
# Chromium's DOM with its state and calls. Skipped (77) without chromium.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "SKIP: no chromium (deploy/install-deps.sh installs Debian's chromium)"; exit 77; }
MPORT=$(free_port)
PAGE="http://127.0.0.1:$MPORT"
elastic_cluster 2 "node-a node-b" "metrics:" "  listen: 127.0.0.1:$MPORT"

submit kill -np 4 --min-np 2 --max-np 4 -- --epochs 2 --kill-at 1:0:0 --step-delay-ms 20
wait_for 15 state_is 1 running || fail "job 1 did not start"
# A second job that cannot start while job 1 holds every slot, named like markup.
NAME='<b>"x"&y</b>'
"$BIN/hvsubmit" --head "$HEAD" --detach --name "$NAME" -np 4 "$TRAIN" $TRAIN_ARGS \
    >"$TMP/pending.out" 2>&1 || { cat "$TMP/pending.out" >&2; fail "cannot submit job 2"; }
wait_for 10 state_is 2 pending || fail "job 2 should wait for slots"
curl -s --max-time 5 "$PAGE/" >"$TMP/index.html" || fail "cannot fetch the cluster page"
assert_grep "$TMP/index.html" '&lt;b&gt;&quot;x&quot;&amp;y&lt;/b&gt;' "the job's name must be HTML-escaped"
assert_no_grep "$TMP/index.html" '<b>"x"' "a job's name must never reach the page as markup"
assert_grep "$TMP/index.html" 'waits for 4 free slots: 0 of 4 free now (2 nodes alive, 0 draining, 0 dead)' \
    "the page must say why the pending job waits"
assert_grep "$TMP/index.html" '<td>node-a</td><td class="s-alive">alive</td>' "the nodes must be listed"

# The kill opens generation 2; once it closed, the page shows it with its reason.
wait_for 30 sh -c "curl -s --max-time 5 '$PAGE/job/1' | grep -q 'data-generation=\"2\"'" \
    || fail "generation 2 never appeared on /job/1"
wait_for 15 sh -c "curl -s --max-time 5 '$PAGE/job/1' | grep 'data-generation=\"2\"' | grep -v -q 's-open'" \
    || fail "generation 2 never closed on /job/1"

chrome() {
    timeout $((20 * T_MULT)) "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$TMP/chromium" "$@" 2>>"$TMP/chromium.err"
}
chrome --dump-dom "$PAGE/job/1" >"$TMP/job1.dom" || { cat "$TMP/chromium.err" >&2; fail "chromium could not load /job/1"; }
# The DOM as the browser built it: the row of generation 2 and its reason cell.
# What the head stored for generation 2 (hvctl reads the same events): the page must show it.
rounds 1 >"$TMP/r1"
G2=$(sed -n 's/^2 [0-9]* rollback [^ ]* //p' "$TMP/r1")
[ -n "$G2" ] || { cat "$TMP/r1" >&2; fail "hvctl events shows no rolled-back generation 2"; }
/usr/bin/python3 - "$TMP/job1.dom" "$G2" <<'PY' || fail "the rendered DOM must show generation 2 and its reason ($G2)"
import sys
from html.parser import HTMLParser

class Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.cur, self.cell = {}, None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "round":
            self.cur = a["data-generation"]
            self.rows[self.cur] = []
        elif tag == "td" and self.cur is not None:
            self.cell = []
    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[self.cur].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr":
            self.cur = None
    def handle_data(self, d):
        if self.cell is not None:
            self.cell.append(d)

p = Rows()
p.feed(open(sys.argv[1]).read())
print("rounds:", p.rows, file=sys.stderr)
if not p.rows:
    print(open(sys.argv[1]).read()[:2000], file=sys.stderr)
g2 = p.rows.get("2")
assert g2 is not None, "no generation 2"
assert g2[0] == "2", g2
assert g2[2] == sys.argv[2] + " (rolled back)", (g2, sys.argv[2])
assert "fail" in g2[2], g2  # a failure (a worker's exit, or the data plane it broke)
assert g2[3] in ("2", "3"), g2  # the workers of the new generation
PY
grep -q '<td>signal 9</td>' "$TMP/job1.dom" || fail "the killed worker (signal 9) must be in the workers table"
chrome --screenshot="$TMP/job.png" --window-size=1200,900 --hide-scrollbars "$PAGE/job/1" \
    >/dev/null || fail "chromium could not take a screenshot"
[ -s "$TMP/job.png" ] || fail "no screenshot"
[ -n "${HV_PAGE_SCREENSHOT:-}" ] && cp "$TMP/job.png" "$HV_PAGE_SCREENSHOT"

# A job that does not exist is a 404 page, not an error of the head.
code=$(curl -s -o "$TMP/nojob.html" -w '%{http_code}' --max-time 5 "$PAGE/job/99")
[ "$code" = 404 ] || fail "/job/99 should be 404 (got $code)"
assert_grep "$TMP/nojob.html" "No job 99"

"$BIN/hvctl" --head "$HEAD" cancel 2 >/dev/null 2>&1 || fail "cannot cancel job 2"
wait_submit
[ "$SUB_RC" -eq 0 ] || fail "a SIGKILLed worker must not fail the job (rc $SUB_RC)"

# An actor on the cluster page: created, called twice (one call fails with a method error), and
# Chromium's DOM of "/" holds its row in the Actors section with its state and its calls.
"$BIN/hvctl" --head "$HEAD" actor create --class counter --name pagefig -- "$EX/actor_counter" \
    >"$TMP/actor.out" 2>&1 || fail "actor create failed"
actor_json() { "$BIN/hvctl" --head "$HEAD" actor pagefig --json 2>/dev/null; }
wait_for 20 sh -c "\"$BIN/hvctl\" --head '$HEAD' actor pagefig --json | grep -q '\"state\": *\"alive\"'" ||
    fail "actor pagefig is not alive: $(actor_json)"
"$EX/actor_call" @pagefig add 4 >>"$TMP/actor.out" 2>&1 || fail "the call to pagefig failed"
"$EX/actor_call" @pagefig fail >>"$TMP/actor.out" 2>&1 && fail "the method 'fail' succeeded"
wait_for 15 sh -c "\"$BIN/hvctl\" --head '$HEAD' actor pagefig --json | grep -q '\"calls_error\": *1'" ||
    fail "the actor's calls were not reported: $(actor_json)"
chrome --dump-dom "$PAGE/" >"$TMP/index.dom" || { cat "$TMP/chromium.err" >&2; fail "chromium could not load /"; }
/usr/bin/python3 - "$TMP/index.dom" <<'PY' || fail "the rendered cluster page must list actor pagefig, alive, with 2 calls (1 failed)"
import sys
from html.parser import HTMLParser

class Actors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.table, self.rows, self.cell = False, [], None
    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.table = dict(attrs).get("id") == "actors"
        elif self.table and tag == "tr":
            self.rows.append([])
        elif self.table and tag == "td":
            self.cell = []
    def handle_endtag(self, tag):
        if tag == "table":
            self.table = False
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None
    def handle_data(self, d):
        if self.cell is not None:
            self.cell.append(d)

p = Actors()
p.feed(open(sys.argv[1]).read())
print("actors:", p.rows, file=sys.stderr)
row = [r for r in p.rows if len(r) > 1 and r[1] == "default/pagefig"]
assert len(row) == 1, p.rows
r = row[0]
# id, namespace/name, class, state, node, restarts, moves, calls, failed, p99
assert r[2] == "counter" and r[3] == "alive" and r[4].startswith("node-"), r
assert r[7] == "2" and r[8] == "1" and r[9].endswith(" ms"), r
PY
"$BIN/hvctl" --head "$HEAD" kill-actor pagefig >/dev/null || fail "kill-actor failed"
pass "Chromium rendered /job/1 with generation 2 and its failure reason; the cluster page escapes names and lists the actor"
