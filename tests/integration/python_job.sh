#!/bin/sh
# A Python program submitted as `hvsubmit -- /usr/bin/python3 script.py` (issue 14, section 3):
# the node's interpreter runs the shipped script with the hv package importable, on 2 agents;
# ranks' lines and their allreduce sum come back; a script's exit status is hvsubmit's; an
# elastic job ends with its summary line; --workdir ships a helper module and a subpackage that
# the script imports (and leaves out what .hvignore names); a node without the program, or without torch, fails
# with a line naming the node and the missing piece; a Python interpreter that no node has is
# refused before anything is placed; a script given without its interpreter is refused with the
# hint. /usr/bin/python3 is the interpreter (Debian's python3-torch).
. "$HV_SRC_DIR/tests/lib.sh"
python_env # PY_ENV: the sanitizer runtimes preloaded under the sanitizers
JOB=$HV_SRC_DIR/tests/python/allreduce_job.py
hv_setup
start_head
start_agents 1 node-a node-b

# 1. two ranks, one allreduce
"$BIN/hvsubmit" -np 2 $PY_ENV -- $PY "$JOB" >"$TMP/ok.out" 2>"$TMP/ok.err" || fail "python job: exit $?"
assert_grep "$TMP/ok.out" "^\[0\]<stdout>:rank 0 size 2 sum 3$" "rank 0's line"
assert_grep "$TMP/ok.out" "^\[1\]<stdout>:rank 1 size 2 sum 3$" "rank 1's line"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs.out" || fail "hvctl jobs"
assert_grep "$TMP/jobs.out" "allreduce_job.py" "the job is named after the script"

# 2. the script's exit status is hvsubmit's, as for a binary
"$BIN/hvsubmit" -np 2 $PY_ENV -- $PY "$JOB" --exit 3 >"$TMP/x3.out" 2>"$TMP/x3.err"; ec=$?
[ $ec -eq 3 ] || fail "script exiting 3: hvsubmit exit $ec, want 3"

# 3. elastic flags: the job ends with the elastic summary line
"$BIN/hvsubmit" -np 2 --min-np 1 --max-np 2 $PY_ENV -- $PY "$JOB" >"$TMP/el.out" 2>"$TMP/el.err" \
    || fail "elastic python job: exit $?"
assert_grep "$TMP/el.out" "^\[1\]<stdout>:rank 1 size 2 sum 3$"
assert_grep "$TMP/el.err" "generation" "the elastic summary line"

# 4. --workdir ships the helper module and a package's subdirectories at their paths; .hvignore
# (by name and by path below DIR), dotfiles and caches stay behind; a link to a directory is
# not followed
mkdir -p "$TMP/wd/pkg/sub" "$TMP/wd/pkg/__pycache__" "$TMP/wd/data"
# (__pycache__ is what python writes beside an imported module, unless PYTHONDONTWRITEBYTECODE)
printf 'import os\n\n\ndef greeting():\n    return "hello " + ",".join(sorted(set(os.listdir(".")) - {"__pycache__"}))\n' \
    >"$TMP/wd/job_helper.py"
: >"$TMP/wd/pkg/__init__.py"
: >"$TMP/wd/pkg/sub/__init__.py"
printf 'import os\n\n\ndef where():\n    return ",".join(sorted(os.path.join(d, f) for d, _, fs in os.walk("pkg") for f in fs if "__pycache__" not in d))\n' \
    >"$TMP/wd/pkg/sub/mod.py"
echo data >"$TMP/wd/keep.txt"
echo big >"$TMP/wd/skip.bin"
echo big >"$TMP/wd/pkg/sub/w.bin"
echo notes >"$TMP/wd/pkg/sub/notes.txt"
echo cache >"$TMP/wd/pkg/__pycache__/mod.cpython-311.pyc"
echo big >"$TMP/wd/data/big.txt"
echo x >"$TMP/wd/.secret"
ln -s pkg "$TMP/wd/lnk"
printf '# data we do not ship\n*.bin\ndata/\npkg/sub/notes.txt\n' >"$TMP/wd/.hvignore"
"$BIN/hvsubmit" -np 2 --workdir "$TMP/wd" $PY_ENV -- $PY "$JOB" --helper --subpkg >"$TMP/wd.out" 2>"$TMP/wd.err" \
    || fail "--workdir job: exit $?"
for r in 0 1; do
    assert_grep "$TMP/wd.out" "^\[$r\]<stdout>:rank $r helper hello allreduce_job.py,job_helper.py,keep.txt,pkg$" \
        "rank $r: the workdir's files (and only those)"
    assert_grep "$TMP/wd.out" "^\[$r\]<stdout>:rank $r subpkg pkg/__init__.py,pkg/sub/__init__.py,pkg/sub/mod.py$" \
        "rank $r: the subpackage imported, its files at their paths (and only those)"
done
assert_grep "$TMP/wd.err" "1 link to a directory not followed (lnk)"

# 5. a program this machine has on its PATH and the nodes do not
mkdir "$TMP/localbin" && printf '#!/bin/sh\nexit 0\n' >"$TMP/localbin/hvinterp" && chmod +x "$TMP/localbin/hvinterp"
PATH="$TMP/localbin:$PATH" "$BIN/hvsubmit" -np 1 $PY_ENV -- hvinterp "$JOB" >"$TMP/nocmd.out" 2>"$TMP/nocmd.err"; ec=$?
[ $ec -ne 0 ] || fail "a missing interpreter: exit 0"
grep -Eq "node node-[ab] has no 'hvinterp' on PATH" "$TMP/nocmd.err" \
    || fail "a missing interpreter: no line naming the node and the program"
# ... and a name found nowhere is a missing file here, before anything is submitted
"$BIN/hvsubmit" -np 1 -- hv-no-such-interpreter "$JOB" >"$TMP/typo.out" 2>"$TMP/typo.err"; ec=$?
[ $ec -eq 66 ] || fail "a program found nowhere: exit $ec, want 66"

# ... and a Python interpreter that no node has (each reports its own in the label hv.python):
# refused before anything is uploaded or placed, naming every node and what it has
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs1.out"
"$BIN/hvsubmit" -np 1 $PY_ENV -- python3.99 "$JOB" >"$TMP/nopy.out" 2>"$TMP/nopy.err"; ec=$?
[ $ec -eq 65 ] || fail "an interpreter no node has: exit $ec, want 65"
grep -Eq "^hvsubmit: no node has 'python3.99' on its PATH \(node-[ab]: [^;]*python3[^;]*; node-[ab]: .*\): install it there" \
    "$TMP/nopy.err" || fail "an interpreter no node has: no line naming the nodes and what they have"
"$BIN/hvctl" --head "$HEAD" jobs >"$TMP/jobs2.out"
cmp -s "$TMP/jobs1.out" "$TMP/jobs2.out" || fail "an interpreter no node has: a job was submitted"

# 6. a node without torch (python3 -S: no site-packages): one line, exit 78, no stack trace
"$BIN/hvsubmit" -np 1 $PY_ENV -- $PY -S "$JOB" >"$TMP/notorch.out" 2>"$TMP/notorch.err"; ec=$?
[ $ec -eq 78 ] || fail "a node without torch: exit $ec, want 78"
grep -Eq "^\[0\]<stderr>:hv: node node-[ab] cannot import torch" "$TMP/notorch.err" \
    || fail "a node without torch: no line naming the node and torch"
assert_no_grep "$TMP/notorch.err" "Traceback"

# 7. a script without its interpreter: refused before anything is uploaded, with the hint
"$BIN/hvsubmit" -np 2 "$JOB" >"$TMP/noint.out" 2>"$TMP/noint.err"; ec=$?
[ $ec -eq 65 ] || fail "a script as the program: exit $ec, want 65"
assert_grep "$TMP/noint.err" "to run a script, give its interpreter: hvsubmit -np N -- python3 "
pass "python jobs: ranks, exit status, elastic, --workdir, missing interpreter and torch, hint"
