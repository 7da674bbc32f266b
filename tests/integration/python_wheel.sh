#!/bin/sh
# The hv wheel (issue 27, section 4): built from the build tree offline
# (worker_lib/python/build_wheel.sh: pip wheel --no-build-isolation --no-index), installed with
# the virtual environment's pip, --no-index, into a fresh `python3 -m venv --system-site-packages`
# (torch from Debian's python3-torch); `import hv.torch` there loads the package and libhv from
# the venv's site-packages; a 2-rank job submitted with the venv's python runs on 2 agents whose
# binaries have no build-tree package beside them (so the agent puts nothing on PYTHONPATH), and
# each rank reports hv and libhv from the venv. Skipped (77) without torch or in a sanitizer build
# (an instrumented libhv in a wheel needs the sanitizer runtime preloaded).
. "$HV_SRC_DIR/tests/lib.sh"
PY=/usr/bin/python3
skip_without_torch
if ldd "$BIN/../lib/libhv.so" 2>/dev/null | grep -q 'lib\(a\|ub\)san'; then
    echo "SKIP: sanitizer build (its libhv.so needs the sanitizer runtime preloaded)"
    exit 77
fi
hv_setup
sh "$HV_SRC_DIR/worker_lib/python/build_wheel.sh" "$BIN/.." "$TMP/dist" >"$TMP/wheel.out" 2>&1 \
    || { cat "$TMP/wheel.out" >&2; fail "building the wheel"; }
WHEEL=$(ls "$TMP"/dist/hv-*-py3-none-*.whl) || fail "no wheel in $TMP/dist"
unzip -l "$WHEEL" | grep -q ' hv/libhv.so$' || fail "the wheel does not carry hv/libhv.so"
unzip -l "$WHEEL" | grep -q ' hv/torch/elastic/sampler.py$' || fail "the wheel lacks hv.torch.elastic"
$PY -m venv --system-site-packages "$TMP/venv" || fail "python3 -m venv"
"$TMP/venv/bin/pip" install --no-index --no-deps --disable-pip-version-check -q "$WHEEL" \
    >"$TMP/pip.out" 2>&1 || { cat "$TMP/pip.out" >&2; fail "pip install --no-index of the wheel"; }
SITE=$("$TMP/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
(cd / && env -u PYTHONPATH -u HV_LIBRARY "$TMP/venv/bin/python" -c \
    'import hv.torch as hvd, hv; hvd.init(); print(hv.__file__, hv.library_path, hvd.size(), hvd.rank())') \
    >"$TMP/import.out" 2>&1 || { cat "$TMP/import.out" >&2; fail "import hv.torch from the venv"; }
assert_grep "$TMP/import.out" "^$SITE/hv/__init__.py $SITE/hv/libhv.so 1 0$" \
    "hv and libhv must come from the venv's site-packages"
# Agents whose binary has no build-tree package beside it: workers import the installed hv.
mkdir -p "$TMP/wbin"
for b in hvhead hvagent hvsubmit hvctl; do cp "$BIN/$b" "$TMP/wbin/"; done
BIN=$TMP/wbin
start_head
start_agent node-a 1
start_agent node-b 1
"$BIN/hvsubmit" -np 2 -- "$TMP/venv/bin/python" "$HV_SRC_DIR/tests/python/allreduce_job.py" --where \
    >"$TMP/job.out" 2>"$TMP/job.err" || fail "the job with the venv's python: exit $?"
for r in 0 1; do
    assert_grep "$TMP/job.out" "^\[$r\]<stdout>:rank $r size 2 sum 3$"
    assert_grep "$TMP/job.out" "^\[$r\]<stdout>:rank $r hv $SITE/hv lib $SITE/hv/libhv.so$" \
        "rank $r must run the wheel's hv and libhv"
done
pass "the wheel: built offline, installed into a fresh venv with --no-index, a 2-rank job runs on it"
