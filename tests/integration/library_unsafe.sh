#!/bin/sh
# HV_LIBRARY that someone else could replace is refused (issue 24, low: "loads a world-writable
# library without a word"; docs/security.md "Secrets on the machines"). Copies of libhv.so: in a
# directory writable by every user (0777, no sticky bit), with mode 0666 itself, owned by
# another user (nobody, when this runs as root), and through a link that leads into the 0777
# directory: `import hv` refuses each with an ImportError naming HV_LIBRARY, the path in the way
# and why (writable by every user, owned by nobody). The same library in this user's 0755
# directory and in a sticky 1777 one (/tmp's kind) loads. Through the binaries: a job of
# `hvsubmit --env HV_LIBRARY=...` whose script imports hv ends with exit 78 and the worker's one
# line "hv: node node-a: refusing HV_LIBRARY=..." reaches hvsubmit; pointed at the safe copy the
# same job prints libhv's version. Before the fix every unsafe copy was loaded without a word.
. "$HV_SRC_DIR/tests/lib.sh"
PY=/usr/bin/python3
LIB=$BIN/../lib/libhv.so
[ -f "$LIB" ] || { echo "SKIP: $LIB was not built"; exit 77; }
hv_setup
chmod 755 "$TMP"
L=$TMP/libs
mkdir -m 755 "$L" "$L/safe" && mkdir -m 777 "$L/open" && mkdir -m 1777 "$L/sticky"
chmod 777 "$L/open" && chmod 1777 "$L/sticky" # whatever the umask
for d in safe open sticky; do cp "$LIB" "$L/$d/libhv.so" && chmod 755 "$L/$d/libhv.so"; done
cp "$LIB" "$L/safe/mode666.so" && chmod 666 "$L/safe/mode666.so"
ln -s ../open/libhv.so "$L/safe/link.so"

# import_hv NAME PATH: `import hv` with HV_LIBRARY=PATH outside any agent, into $TMP/NAME.out.
import_hv() {
    (unset HV_NODE_NAME HV_JOB_ID
        HV_LIBRARY=$2 PYTHONPATH="$HV_SRC_DIR/worker_lib/python" \
            $PY -c 'import hv; print("loaded", hv.library_path, hv.version())') >"$TMP/$1.out" 2>&1
}
refused() { # NAME PATH WHY
    import_hv "$1" "$2" && fail "HV_LIBRARY=$2 was loaded: $(cat "$TMP/$1.out")"
    assert_grep "$TMP/$1.out" "ImportError: hv: refusing HV_LIBRARY=$2" "the refusal must name HV_LIBRARY=$2"
    assert_grep "$TMP/$1.out" "$3" "the refusal of $2 must say '$3'"
}
refused open "$L/open/libhv.so" "the directory $L/open is writable by every user (mode 0777)"
refused mode666 "$L/safe/mode666.so" "the library $L/safe/mode666.so is writable by every user (mode 0666)"
refused link "$L/safe/link.so" "(which leads to $L/open/libhv.so): the directory $L/open is writable by every user"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    cp "$LIB" "$L/safe/theirs.so" && chown nobody "$L/safe/theirs.so"
    refused theirs "$L/safe/theirs.so" "the library $L/safe/theirs.so is owned by user nobody"
fi
import_hv safe "$L/safe/libhv.so" || fail "HV_LIBRARY in a private directory: $(cat "$TMP/safe.out")"
assert_grep "$TMP/safe.out" "^loaded $L/safe/libhv.so [0-9]"
import_hv sticky "$L/sticky/libhv.so" || fail "HV_LIBRARY in a sticky directory: $(cat "$TMP/sticky.out")"
assert_grep "$TMP/sticky.out" "^loaded $L/sticky/libhv.so [0-9]"

# Through the binaries: the worker says it on its node, the job ends with 78.
start_head
start_agent node-a 1
printf 'import hv\nprint("libhv", hv.version(), "from", hv.library_path)\n' >"$TMP/imp.py"
"$BIN/hvsubmit" -np 1 --env "HV_LIBRARY=$L/open/libhv.so" --env "PYTHONPATH=$HV_SRC_DIR/worker_lib/python" \
    -- $PY "$TMP/imp.py" >"$TMP/job-open.out" 2>"$TMP/job-open.err"
ec=$?
[ $ec -eq 78 ] || fail "a job with an unsafe HV_LIBRARY: hvsubmit exit $ec, want 78"
assert_grep "$TMP/job-open.err" "^\[0\]<stderr>:hv: node node-a: refusing HV_LIBRARY=$L/open/libhv.so: the directory $L/open is writable by every user" \
    "the worker's refusal must reach hvsubmit"
"$BIN/hvsubmit" -np 1 --env "HV_LIBRARY=$L/safe/libhv.so" --env "PYTHONPATH=$HV_SRC_DIR/worker_lib/python" \
    -- $PY "$TMP/imp.py" >"$TMP/job-safe.out" 2>"$TMP/job-safe.err" || fail "a job with a safe HV_LIBRARY: exit $?"
assert_grep "$TMP/job-safe.out" "libhv [0-9.]* from $L/safe/libhv.so"
pass "HV_LIBRARY others could replace is refused (0777 directory, 0666 file, another user's, a link into one), in a job too; a private or sticky directory's loads"
