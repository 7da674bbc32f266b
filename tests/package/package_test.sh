#!/bin/sh
# The Debian packages as a user gets them: cpack builds libhv0, libhv-dev and hv from this build
# (dependencies computed by dpkg-shlibdeps), they are unpacked into a scratch root (dpkg -x: the
# machine's own dpkg database is left alone), the layout is checked (the library's soname, the
# headers, the CMake package, hv.pc, the daemons and units), and an out-of-tree program is built
# and run against the unpacked library twice: with CMake's find_package(hv CONFIG) and with
# pkg-config (and once more with libhv.a and pkg-config --static). The man pages are in the hv
# package and render with the programs' options.
# Usage: package_test.sh BUILD_DIR (ctest passes it; label package).
. "$HV_SRC_DIR/tests/lib.sh"
BUILD=${1:?usage: package_test.sh BUILD_DIR}
for t in cpack dpkg-deb dpkg-shlibdeps pkg-config cc readelf; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
hv_setup
VER=$(sed -nE 's/^set\(CPACK_PACKAGE_VERSION "([^"]*)"\)/\1/p' "$BUILD/CPackConfig.cmake")
[ -n "$VER" ] || fail "no package version in $BUILD/CPackConfig.cmake"

cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$TMP/pkgs" >"$TMP/cpack.out" 2>"$TMP/cpack.err" \
    || fail "cpack failed"
for p in libhv0 libhv-dev hv; do
    deb=$(ls "$TMP/pkgs/${p}_${VER}_"*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || fail "cpack made no package $p"
    dpkg-deb -f "$deb" Depends >"$TMP/$p.depends"
    dpkg -x "$deb" "$TMP/root" || fail "dpkg -x $deb failed"
done
# Dependencies: computed from the libraries each package links, and the component graph.
assert_grep "$TMP/libhv0.depends" 'libc6 (>=' "libhv0 should depend on libc6 (dpkg-shlibdeps)"
assert_grep "$TMP/libhv0.depends" 'libgrpc' "libhv0 should depend on gRPC's library package"
assert_grep "$TMP/libhv-dev.depends" "libhv0 (= $VER)" "libhv-dev should depend on libhv0 (= $VER)"
assert_grep "$TMP/hv.depends" 'libsqlite3' "hv should depend on sqlite's library package"

R=$TMP/root/usr
for f in bin/hvhead bin/hvagent bin/hvsubmit bin/hvctl include/hv/hv.h include/hv/elastic.h \
    lib/libhv.a lib/libhv.so lib/cmake/hv/hvConfig.cmake lib/cmake/hv/hvConfigVersion.cmake \
    lib/pkgconfig/hv.pc lib/systemd/system/hvhead.service lib/systemd/system/hvagent.service \
    share/doc/hv/examples/head.yaml share/doc/hv/operations.md; do
    [ -e "$R/$f" ] || fail "the packages do not install /usr/$f"
done
readelf -d "$R/lib/libhv.so.$VER" >"$TMP/dyn" 2>&1 || fail "no /usr/lib/libhv.so.$VER"
assert_grep "$TMP/dyn" "soname: \[libhv.so.${VER%%.*}\]" "libhv.so has no soname libhv.so.${VER%%.*}"
[ "$(readlink "$R/lib/libhv.so")" = "libhv.so.${VER%%.*}" ] || fail "libhv.so does not link to the soname"
"$R/bin/hvctl" --help >/dev/null 2>&1 || fail "the packaged hvctl does not run"
# Man pages: in the hv package (the programs' package), and they render with their options.
if grep -q '^HV_MAN_PAGES:BOOL=ON' "$BUILD/CMakeCache.txt"; then
    dpkg-deb -c "$(ls "$TMP/pkgs/hv_${VER}_"*.deb | head -n 1)" >"$TMP/hv.contents"
    for p in hvhead hvagent hvsubmit hvctl; do
        assert_grep "$TMP/hv.contents" "\./usr/share/man/man1/$p\.1\.gz\$" "the hv package has no man page $p(1)"
    done
    # Rendered as man shows it (man -l), else by groff (groff-base, which man-db needs).
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=100 man -l "$R/share/man/man1/hvagent.1.gz" >"$TMP/man.out" 2>"$TMP/man.err" ||
            fail "man -l hvagent.1.gz failed: $(cat "$TMP/man.err")"
    elif command -v groff >/dev/null 2>&1; then
        gzip -dc "$R/share/man/man1/hvagent.1.gz" | groff -man -Tascii >"$TMP/man.out" 2>"$TMP/man.err" ||
            fail "groff could not render hvagent.1.gz"
    fi
    if [ -e "$TMP/man.out" ]; then
        assert_grep "$TMP/man.out" '^HVAGENT(1)' "hvagent(1) has no title"
        assert_grep "$TMP/man.out" 'hvagent join HOST:PORT' "hvagent(1) has no synopsis"
        assert_grep "$TMP/man.out" '--drain-deadline S' "hvagent(1) does not show the option --drain-deadline"
        assert_grep "$TMP/man.out" '--run-as USER' "hvagent(1) does not show the option --run-as"
    else
        echo "note: neither man nor groff here: the man pages were not rendered"
    fi
    if command -v groff >/dev/null 2>&1; then
        gzip -dc "$R/share/man/man1/hvhead.1.gz" | groff -man -Tascii -ww 2>"$TMP/groff.err" >"$TMP/hvhead.man" ||
            fail "groff could not render hvhead.1.gz"
        [ ! -s "$TMP/groff.err" ] || fail "groff warns about hvhead.1: $(cat "$TMP/groff.err")"
        assert_grep "$TMP/hvhead.man" '--data-dir DIR' "hvhead(1) does not show 'hvhead start --help' (--data-dir)"
    fi
fi

# 1. CMake: find_package(hv CONFIG) in the scratch root.
cmake -S "$HV_SRC_DIR/tests/package" -B "$TMP/cm" -DCMAKE_PREFIX_PATH="$R" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/cm.out" 2>"$TMP/cm.err" || fail "find_package(hv) failed"
cmake --build "$TMP/cm" >>"$TMP/cm.out" 2>>"$TMP/cm.err" || fail "the CMake consumer did not build"
LD_LIBRARY_PATH=$R/lib "$TMP/cm/consumer" >"$TMP/run1.out" 2>&1 || fail "the CMake consumer failed"
assert_grep "$TMP/run1.out" "^libhv $VER (built against $VER)$"
assert_grep "$TMP/run1.out" '^rank 0 of 1: allreduce 1 2 3 4$'
LD_LIBRARY_PATH=$R/lib ldd "$TMP/cm/consumer" >"$TMP/ldd1" 2>&1
assert_grep "$TMP/ldd1" "libhv.so.${VER%%.*} => $R/lib/" "the CMake consumer did not load the packaged libhv"

# 2. pkg-config, the way a Makefile uses it.
export PKG_CONFIG_PATH=$R/lib/pkgconfig
[ "$(pkg-config --modversion hv)" = "$VER" ] || fail "pkg-config hv: wrong version"
# shellcheck disable=SC2046
cc -o "$TMP/consumer2" "$HV_SRC_DIR/tests/package/consumer.c" $(pkg-config --cflags --libs hv) \
    2>"$TMP/cc.err" || fail "the pkg-config consumer did not build"
LD_LIBRARY_PATH=$R/lib "$TMP/consumer2" >"$TMP/run2.out" 2>&1 || fail "the pkg-config consumer failed"
assert_grep "$TMP/run2.out" '^rank 0 of 1: allreduce 1 2 3 4$'
# 3. The static library, with what pkg-config --static says it needs.
# shellcheck disable=SC2046
cc -o "$TMP/consumer3" "$HV_SRC_DIR/tests/package/consumer.c" $(pkg-config --cflags hv) \
    "$R/lib/libhv.a" $(pkg-config --static --libs hv | sed 's/ -lhv / /') 2>"$TMP/cc3.err" \
    || fail "the consumer does not link libhv.a with pkg-config --static's libraries"
"$TMP/consumer3" >"$TMP/run3.out" 2>&1 || fail "the static consumer failed"
assert_grep "$TMP/run3.out" '^rank 0 of 1: allreduce 1 2 3 4$'
pass "libhv0, libhv-dev and hv $VER: layout, dependencies, find_package and pkg-config consumers"
