#!/bin/sh
# A damaged state.db is refused with a message naming the file; the file is left byte for byte
# as it was (never "repaired" into an empty cluster), and the head exits non-zero.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup
mkdir -p "$TMP/data"
head -c 65536 /dev/urandom >"$TMP/data/state.db"
cp "$TMP/data/state.db" "$TMP/orig.db"
write_config "$TMP/head.yaml"
timeout 20 "$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/h.out" 2>"$TMP/h.err"
ec=$?
[ $ec -ne 0 ] || fail "hvhead started on a garbage state.db"
assert_grep "$TMP/h.err" "state.db" "the error must name the file"
cmp -s "$TMP/data/state.db" "$TMP/orig.db" || fail "the damaged file was modified"
# a good database damaged in the middle is refused too
rm -f "$TMP/data/"*
start_head
start_agent node-a 1
"$BIN/hvsubmit" -np 1 "$EX/hello" >/dev/null 2>&1 || fail "job failed"
kill -TERM "$HEAD_PID"; wait "$HEAD_PID" 2>/dev/null
# The damage covers a whole page in use (the jobs table's root, header included): a page in the
# middle of the file may be a free one, and the free space of a page in use is never read, so
# neither would be found (the file grew with the schema and this test hung on a head that had
# started).
off=$(/usr/bin/python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", ("jobs",)).fetchone()[0]
size = db.execute("PRAGMA page_size").fetchone()[0]
print((root - 1) * size, size)' "$TMP/data/state.db") || fail "cannot find the jobs table's page"
set -- $off
dd if=/dev/urandom of="$TMP/data/state.db" bs=1 seek="$1" count="$2" conv=notrunc 2>/dev/null
cp "$TMP/data/state.db" "$TMP/orig2.db"
timeout 20 "$BIN/hvhead" start --config "$TMP/head.yaml" >"$TMP/h2.out" 2>"$TMP/h2.err"
ec=$?
[ $ec -ne 124 ] || fail "hvhead started on a damaged state.db (it was still running after 20 s)"
[ $ec -ne 0 ] || fail "hvhead started on a damaged state.db"
assert_grep "$TMP/h2.err" "state.db"
cmp -s "$TMP/data/state.db" "$TMP/orig2.db" || fail "the damaged file was modified"
pass "damaged state refused, file untouched"
