#!/bin/sh
# build_wheel.sh BUILD_DIR OUT_DIR: builds the hv wheel from a build tree, offline: stages
# worker_lib/python/hv (no caches) with BUILD_DIR/lib/libhv.so copied inside the package
# (hv/libhv.so, where hv._lib looks first), setup.py and pyproject.toml, then runs
# `python3 -m pip wheel --no-build-isolation --no-index --no-deps` with the system's setuptools
# and wheel (Debian 12: python3-pip, python3-setuptools, python3-wheel). The wheel lands in
# OUT_DIR as hv-VERSION-py3-none-PLATFORM.whl, VERSION being the build's (CMake's project
# version). PYTHON (default /usr/bin/python3) is the interpreter that builds it. Used by the
# CMake target hv_wheel and tests/integration/python_wheel.sh; see docs/python.md, "Install".
set -eu
[ $# -eq 2 ] || { echo "usage: build_wheel.sh BUILD_DIR OUT_DIR" >&2; exit 64; }
build=$(cd "$1" && pwd)
out=$2
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
lib=$build/lib/libhv.so
[ -f "$lib" ] || { echo "build_wheel.sh: no $lib (build libhv first: cmake --build $build)" >&2; exit 66; }
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$version" ] || { echo "build_wheel.sh: no project version in $build/CMakeCache.txt" >&2; exit 65; }
stage=$(mktemp -d "${TMPDIR:-/tmp}/hv-wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp -R "$here/hv" "$stage/hv"
find "$stage/hv" -name __pycache__ -prune -exec rm -rf {} + 
find "$stage/hv" -name '*.pyc' -exec rm -f {} +
rm -f "$stage/hv/libhv.so"
cp -L "$lib" "$stage/hv/libhv.so"
cp "$here/setup.py" "$here/pyproject.toml" "$stage/"
mkdir -p "$out"
HV_WHEEL_VERSION=$version "$PYTHON" -m pip wheel --no-build-isolation --no-index --no-deps \
    --disable-pip-version-check -q -w "$out" "$stage"
ls "$out"/hv-"$version"-py3-none-*.whl
