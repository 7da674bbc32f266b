#!/bin/sh
# Jobs' files stay private on a node shared by two agents that run workers as two users
# (--run-as): job A's worker reads its own 0600 --file, job B's worker (another user) can read
# neither that file in A's job directory nor its copy in A's agent cache; a shipped setuid-root
# copy of id runs with the run-as user's euid; the cache and job directories have no group or
# other bits; job directories and every setuid copy are gone once the job ends; a partial
# download left by a killed agent is removed when the agent starts.
# Needs root and useradd (skipped with 77 otherwise); the users are created and removed here.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup_users hvp
UID_A=$(id -u "$UA")

# A partial download of an agent that was killed (its pid is gone) sits in node-a's cache.
mkdir -p "$TMP/agent-node-a/cache"
sh -c 'exit 0' & dead=$!; wait $dead
STALE="$TMP/agent-node-a/cache/.$(printf '%064d' 0).tmp.$dead"
echo partial >"$STALE"

echo "secret-$$" >"$TMP/secret.txt"
chmod 600 "$TMP/secret.txt"
cp /usr/bin/id "$TMP/idcopy"
chmod 4755 "$TMP/idcopy"
SHA=$(sha256sum "$TMP/secret.txt" | cut -d' ' -f1)
cat >"$TMP/a.sh" <<'EOS'
echo "own=$(cat secret.txt 2>&1)"
echo "euid=$(./idcopy -u)"
echo "modes=$(stat -c %a . secret.txt idcopy | tr '\n' ' ')owner=$(stat -c %U secret.txt)"
echo "dir=$(pwd)"
i=0; while [ ! -e "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
EOS
cat >"$TMP/b.sh" <<'EOS'
if cat "$1/secret.txt" >/dev/null 2>&1; then echo "jobfile=readable"; else echo "jobfile=denied"; fi
if cat "$2" >/dev/null 2>&1; then echo "cached=readable"; else echo "cached=denied"; fi
if ls "$(dirname "$1")" >/dev/null 2>&1; then echo "jobs=listable"; else echo "jobs=denied"; fi
EOS

start_head
start_agent node-a 1 --run-as "$UA"
[ -e "$STALE" ] && fail "the partial download of a killed agent is still in the cache"
"$BIN/hvsubmit" -np 1 --file "$TMP/a.sh" --file "$TMP/secret.txt" --file "$TMP/idcopy" /bin/sh a.sh "$TMP/go" \
    >"$TMP/a.out" 2>"$TMP/a.err" &
SUB_A=$!
started_a() { grep -q "<stdout>:dir=" "$TMP/a.out" || ! kill -0 $SUB_A; }
wait_for 15 started_a && grep -q "<stdout>:dir=" "$TMP/a.out" || fail "job A did not start"
DIR_A=$(sed -n 's/.*<stdout>:dir=//p' "$TMP/a.out")

# node-a is full: job B lands on node-b, whose workers run as the other user.
start_agent node-b 1 --run-as "$UB"
"$BIN/hvsubmit" -np 1 --file "$TMP/b.sh" /bin/sh b.sh "$DIR_A" "$TMP/agent-node-a/cache/$SHA" \
    >"$TMP/b.out" 2>"$TMP/b.err" || fail "job B failed: $(tail -3 "$TMP/b.err")"
assert_grep "$TMP/b.out" "<stdout>:jobfile=denied" "job B's worker read job A's 0600 file"
assert_grep "$TMP/b.out" "<stdout>:cached=denied" "job B's worker read job A's file in the cache"
assert_grep "$TMP/b.out" "<stdout>:jobs=denied" "job B's worker listed job A's job directory"

# What job A's worker saw of its own files.
assert_grep "$TMP/a.out" "<stdout>:own=secret-$$" "job A's worker could not read its own 0600 file"
assert_grep "$TMP/a.out" "<stdout>:euid=$UID_A$" "a shipped setuid-root copy of id ran as root"
assert_grep "$TMP/a.out" "<stdout>:modes=700 600 700 owner=$UA$" \
    "job A's directory and files are not private to its user"
for c in "$TMP"/agent-node-*/cache; do
    [ "$(stat -c %a "$c")" = 700 ] || fail "cache $c is $(stat -c %a "$c"), not 700"
    [ -z "$(find "$c" -perm /077)" ] || fail "cache files with group or other bits: $(find "$c" -perm /077)"
done

touch "$TMP/go"
wait $SUB_A || fail "job A failed: $(tail -3 "$TMP/a.err")"
gone() { [ -z "$(find "$TMP"/agent-node-*/jobs -mindepth 1 -maxdepth 1 2>/dev/null)" ]; }
wait_for 10 gone || fail "job directories stay after the jobs: $(find "$TMP"/agent-node-*/jobs)"
SUID=$(find "$TMP"/agent-node-* -type f -perm /6000)
[ -z "$SUID" ] || fail "set-id files stay on the node: $SUID"
pass "jobs' files are private to their run-as user, without set-id bits, and removed after the job"
