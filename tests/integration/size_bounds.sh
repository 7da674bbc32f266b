#!/bin/sh
# Size bounds through the binaries: hvsubmit with more --env entries than the head takes gets a
# clear error naming the field and the bound, and exit 65; nodes that joined with labels at the
# bound list with all their labels; and rows stored with huge strings before the bounds existed
# (two jobs named with 5 MiB strings, two nodes with 64 labels of 60 KB: together past the 8 MiB
# message limit) do not break `hvctl jobs`, `hvctl nodes` or `hvctl status` after a restart. The
# lists come a page at a time (count and bytes) and hvctl follows the pages: 121 jobs all show.
. "$HV_SRC_DIR/tests/lib.sh"
/usr/bin/python3 -c "import grpc, sqlite3" 2>/dev/null || { echo "SKIP: python3-grpcio is not installed"; exit 77; }
hv_setup
PORT=$(free_port)
# The raw client's nodes join without a Session stream (no heartbeats): a lease of 60 s keeps them
# alive (their slots are what the 121 submits need) however slowly a loaded machine submits.
LEASE_MS=60000 HV_LISTEN=127.0.0.1:$PORT write_config "$TMP/head.yaml"
start_head

# (a) 5000 --env entries: refused before anything runs, naming the field and the bound.
# shellcheck disable=SC2046 # one word per option and per K=v
set -- $(seq 0 4999 | sed 's/^/-e K/; s/$/=v/')
"$BIN/hvsubmit" --detach -np 1 "$@" /bin/true >"$TMP/env.out" 2>"$TMP/env.err"
rc=$?
[ $rc -eq 65 ] || fail "hvsubmit with 5000 --env entries exited $rc, not 65 (data error)"
assert_grep "$TMP/env.err" "spec.env: 5000 entries, at most 4096"

# (b, c) A raw client (python3-grpcio): 121 small jobs of one uploaded program, and three nodes
# whose 64 labels are each at the bound (63-byte keys, 256-byte values).
cat >"$TMP/raw.py" <<'EOF'
import hashlib, sys, grpc
target, token_file, join_token, what = sys.argv[1:5]
tok = open(token_file).read().strip()
ch = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
ident = lambda b: b
def varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out
def fld(n, d):
    d = d.encode() if isinstance(d, str) else d
    return varint(n << 3 | 2) + varint(len(d)) + d
def vfld(n, v):
    return varint(n << 3) + varint(v)
def call(meth, payload, auth=True, svc="Jobs"):
    md = [("authorization", "Bearer " + tok)] if auth else None
    return ch.unary_unary("/hvpb.v1.%s/%s" % (svc, meth), ident, ident)(payload, metadata=md, timeout=10)
def fields(buf):
    """(number, value) of each field of a message: bytes for length-delimited, int for varints."""
    i, out = 0, []
    while i < len(buf):
        key, sh = 0, 0
        while True:
            b = buf[i]; i += 1; key |= (b & 0x7F) << sh; sh += 7
            if b < 0x80: break
        v, sh = 0, 0
        if key & 7 == 0:
            while True:
                b = buf[i]; i += 1; v |= (b & 0x7F) << sh; sh += 7
                if b < 0x80: break
        else:
            n, sh = 0, 0
            while True:
                b = buf[i]; i += 1; n |= (b & 0x7F) << sh; sh += 7
                if b < 0x80: break
            v = buf[i:i + n]; i += n
        out.append((key >> 3, v))
    return out
def walk(meth, size_field, size):
    """Every item of a paged list, by id, following next_page_token; and the number of pages."""
    ids, token, pages = [], b"", 0
    while True:
        req = vfld(size_field, size) + (fld(2, token) if token else b"")
        rep = fields(call(meth, req))
        pages += 1
        ids += [dict(fields(v)).get(1) for n, v in rep if n == 1]
        token = dict((n, v) for n, v in rep if n != 1).get(2 if meth == "ListJobs" else 3, b"")
        if not token or pages > 1000:
            return ids, pages
if what == "jobs":
    data = open("/bin/true", "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    for off in range(0, len(data), 1 << 20):
        part = data[off:off + (1 << 20)]
        call("Upload", fld(1, digest) + vfld(2, len(data)) + vfld(3, off) + fld(4, part) +
             vfld(5, 1 if off + len(part) == len(data) else 0))
    for i in range(121):
        spec = fld(1, "small-%d" % i) + fld(2, fld(1, "true") + fld(2, digest) + vfld(3, len(data))) + vfld(6, 1)
        call("Submit", fld(1, spec))
elif what == "nodes":
    for n in ("lab-1", "lab-2", "lab-3"):
        labels = b"".join(fld(5, fld(1, ("k%02d" % i) + "k" * 60) + fld(2, "v" * 256)) for i in range(64))
        call("Join", fld(1, join_token) + fld(2, fld(1, n) + vfld(3, 1) + labels) + vfld(3, 5), auth=False, svc="Cluster")
elif what == "walk":
    jobs, jp = walk("ListJobs", 1, 50)
    nodes, np_ = walk("ListNodes", 1, 1)
    print("jobs %d distinct %d pages %d" % (len(jobs), len(set(jobs)), jp))
    print("nodes %d distinct %d pages %d" % (len(nodes), len(set(nodes)), np_))
EOF
PY=/usr/bin/python3
$PY "$TMP/raw.py" "$HEAD" "$HV_TOKEN_FILE" "$TOKEN" nodes >"$TMP/nodes.out" 2>&1 || fail "joins with labels at the bound were refused: $(tail -n 3 "$TMP/nodes.out")"
$PY "$TMP/raw.py" "$HEAD" "$HV_TOKEN_FILE" "$TOKEN" jobs >"$TMP/jobs.out" 2>&1 || fail "raw submits failed: $(tail -n 3 "$TMP/jobs.out")"
"$BIN/hvctl" --json nodes >"$TMP/n.json" || fail "hvctl nodes failed"
$PY -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if sorted(len(n['labels']) for n in d['nodes']) == [64, 64, 64] else 1)" "$TMP/n.json" \
    || fail "hvctl nodes does not show the three nodes with 64 labels each"

# Rows as a head without the bounds stored them: two jobs with 5 MiB names, two nodes with 64
# labels of 60 KB (written into the stopped head's database).
kill -KILL "$HEAD_PID"
wait "$HEAD_PID" 2>/dev/null
$PY - "$TMP/data/state.db" <<'EOF' || fail "cannot write the old rows"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE jobs SET name = ? WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 2)", ("N" * (5 << 20),))
big = ",".join("k%d=%s" % (i, "v" * 60000) for i in range(64))
db.execute("UPDATE nodes SET labels = ? WHERE name IN ('lab-1', 'lab-2')", (big,))
db.commit()
EOF
start_head
"$BIN/hvctl" jobs --limit 500 >"$TMP/list.out" 2>"$TMP/list.err" || fail "hvctl jobs failed after the restart: $(cat "$TMP/list.err")"
[ "$(grep -c ' small-' "$TMP/list.out")" -eq 119 ] || fail "hvctl jobs shows $(grep -c ' small-' "$TMP/list.out") of the 119 jobs with small names"
[ "$(grep -c ' NNNNNNNN*\.\.\. ' "$TMP/list.out")" -eq 2 ] || fail "hvctl jobs does not show the two old jobs with their names cut"
[ "$(wc -c <"$TMP/list.out")" -lt 200000 ] || fail "hvctl jobs printed $(wc -c <"$TMP/list.out") bytes"
"$BIN/hvctl" nodes >"$TMP/nlist.out" 2>"$TMP/nlist.err" || fail "hvctl nodes failed after the restart: $(cat "$TMP/nlist.err")"
[ "$(grep -c '^lab-' "$TMP/nlist.out")" -eq 3 ] || fail "hvctl nodes does not show the three nodes"
"$BIN/hvctl" status >"$TMP/status.out" 2>"$TMP/status.err" || fail "hvctl status failed after the restart: $(cat "$TMP/status.err")"
# Pages by count: 50 jobs and 1 node a page, every item once.
$PY "$TMP/raw.py" "$HEAD" "$HV_TOKEN_FILE" "$TOKEN" walk >"$TMP/walk.out" 2>&1 || fail "paging failed: $(tail -n 3 "$TMP/walk.out")"
assert_grep "$TMP/walk.out" "jobs 121 distinct 121 pages 3"
assert_grep "$TMP/walk.out" "nodes 3 distinct 3 pages 3"
pass "5000 --env refused (exit 65); labels at the bound listed; old huge rows list after a restart; 121 jobs in pages"
