#!/bin/sh
# hvagent --cache-max-mb bounds the node's artifact cache (<work-dir>/cache) without breaking a
# job: an agent with a 1 MiB cache runs four jobs in turn (/bin/sh, shipped, running a script
# shipped with --file): three scripts of about 600 KiB that differ, then the first one again,
# each with the same small data file. Every job succeeds; after each the cache holds at most
# 1 MiB; the least recently used script is the one evicted (the agent logs
# HV-AGENT-CACHE-EVICT), while /bin/sh and the data file, which every job uses, stay and are
# fetched once; the first script, evicted, is fetched again for the fourth job. A fifth job whose
# own files exceed the bound (two of the scripts) still runs: what it was handed stays pinned
# until placed (the cache is over its bound meanwhile, and one WARN says so), then the cache
# shrinks back within the bound. Bad bounds are refused with the flag and the value named.
. "$HV_SRC_DIR/tests/lib.sh"
hv_setup

for bad in -1 1G 99999999999999999999999; do
    "$BIN/hvagent" join 127.0.0.1:1 --cache-max-mb "$bad" >"$TMP/bad.out" 2>"$TMP/bad.err"; ec=$?
    [ $ec -eq 64 ] || fail "hvagent join --cache-max-mb $bad: exit $ec, want 64 (a usage error)"
    assert_grep "$TMP/bad.err" "--cache-max-mb \"$bad\": want a number of MiB" \
        "hvagent --cache-max-mb $bad: no clear error"
done

BOUND=1048576
# A script of about 600 KiB that prints its name and the data file's size, with random text
# after its exit, so that each script is a different artifact.
mk_prog() {
    {
        # shellcheck disable=SC2016 # expanded by the worker's shell
        printf '#!/bin/sh\necho "%s ran with $(wc -c <shared.dat) shared bytes"\nexit 0\n' "$1"
        head -c 450000 /dev/urandom | base64 -w 100 | sed 's/^/# /'
    } >"$TMP/$1"
    chmod 755 "$TMP/$1"
}
for p in p1 p2 p3; do mk_prog $p; done
head -c 20000 /dev/urandom >"$TMP/shared.dat"
sha() { sha256sum "$1" | cut -d' ' -f1; }

start_head
start_agent node-a 1 --cache-max-mb 1 --log-level info
CACHE=$TMP/agent-node-a/cache
LOG=$TMP/agent-node-a.err
cache_bytes() {
    find "$CACHE" -maxdepth 1 -type f -name '[0-9a-f]*' -printf '%s\n' | awk '{s += $1} END {print s + 0}'
}
fetches() { cat "$TMP"/agent-node-a.out "$LOG" | grep -c "HV-AGENT-FETCHED.*fetched $1"; }

n=0
for p in p1 p2 p3 p1; do
    n=$((n + 1))
    "$BIN/hvsubmit" -np 1 --file "$TMP/shared.dat" --file "$TMP/$p" /bin/sh "$p" \
        >"$TMP/job$n.out" 2>"$TMP/job$n.err" \
        || fail "job $n ($p) failed: $(tail -3 "$TMP/job$n.err")"
    assert_grep "$TMP/job$n.out" "<stdout>:$p ran with 20000 shared bytes" "job $n ($p) printed nothing"
    b=$(cache_bytes)
    [ "$b" -le "$BOUND" ] || fail "after job $n the cache holds $b bytes, over the bound of $BOUND: $(ls -l "$CACHE")"
    echo "after job $n ($p): cache $b bytes"
done
cat "$TMP"/agent-node-a.out "$LOG" >"$TMP/agent.log"
for p in p1 p2; do
    assert_grep "$TMP/agent.log" "HV-AGENT-CACHE-EVICT.*evicted $(sha "$TMP/$p" | cut -c1-12)" \
        "$p was not evicted for the bound"
done
[ "$(fetches "$(sha "$TMP/p1")")" -eq 2 ] || fail "p1 was fetched $(fetches "$(sha "$TMP/p1")") times, want 2 (evicted, then fetched again)"
for f in "$TMP/shared.dat" /bin/sh; do
    [ "$(fetches "$(sha "$f")")" -eq 1 ] \
        || fail "$f, which every job uses, was fetched $(fetches "$(sha "$f")") times, want 1 (never the least recently used)"
    [ -e "$CACHE/$(sha "$f")" ] || fail "$f, which every job uses, left the cache"
done
[ -e "$CACHE/$(sha "$TMP/p1")" ] || fail "the script just run left the cache"
assert_no_grep "$TMP/agent.log" "HV-AGENT-CACHE-OVER" "over the bound before any job needed it"

# Job 5 ships two 600 KiB scripts: more than the bound by itself.
"$BIN/hvsubmit" -np 1 --file "$TMP/shared.dat" --file "$TMP/p2" --file "$TMP/p3" /bin/sh p2 \
    >"$TMP/job5.out" 2>"$TMP/job5.err" || fail "job 5 (files over the bound) failed: $(tail -3 "$TMP/job5.err")"
assert_grep "$TMP/job5.out" "<stdout>:p2 ran with 20000 shared bytes" "job 5 printed nothing"
b=$(cache_bytes)
[ "$b" -le "$BOUND" ] || fail "after job 5 the cache holds $b bytes, over the bound of $BOUND"
echo "after job 5 (p2 and p3): cache $b bytes"
cat "$TMP"/agent-node-a.out "$LOG" >"$TMP/agent.log"
[ "$(grep -c HV-AGENT-CACHE-OVER "$TMP/agent.log")" -eq 1 ] \
    || fail "want one HV-AGENT-CACHE-OVER warning while job 5's files were pinned, got $(grep -c HV-AGENT-CACHE-OVER "$TMP/agent.log")"
assert_no_grep "$TMP/agent.log" "HV-AGENT-CACHE-PIN" "a release without a pin"
pass "the agent's cache stays within --cache-max-mb 1, evicting the least recently used; every job ran"
