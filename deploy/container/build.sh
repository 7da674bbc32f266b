#!/bin/sh
# shellcheck disable=SC2086 # $PODMAN and $RUN_OPTS are word lists on purpose (options).
# Builds the hv container images (hv-head, hv-agent) with podman from the Debian packages of a
# build directory, and checks them (docs/operations.md "Containers"):
#   1. the base: debian:12-slim if podman has it or can pull it; otherwise (no registry
#      reachable) one made here: debootstrap --variant=minbase bookworm from the Debian mirror apt
#      already uses (read from /etc/apt/sources.list*), imported as $HV_CTR_BASE_LOCAL;
#   2. the packages: cpack -G DEB from BUILD_DIR into OUT_DIR;
#   3. the images: podman build of Containerfile.head and Containerfile.agent, FROM the base
#      (build arg BASE);
#   4. the checks: hvhead/hvagent --version in each image, the user each runs as (not root), and
#      a head container with a data volume that an agent container joins on the host network,
#      listed by the host's hvctl (skipped with --no-run).
# Usage: deploy/container/build.sh [--build-dir DIR] [--out DIR] [--no-run] [--no-pull] [--base-only]
#   --base-only: step 1 alone (make or pull the base image, then stop).
#   Needs root (or a podman set up for the user), podman, and for the local base debootstrap.
#   PODMAN (default "podman") may carry global options, e.g. "podman --storage-driver vfs".
#   HV_CTR_RUN_OPTS: options for every `podman run` of the check (e.g. --ulimit ... where the
#   runtime may not raise limits). HV_CTR_PORT (default 17400): the head's port during the check.
# Exit: 0 built and checked; 77 podman (or debootstrap, when it is needed) is missing; 1 failed.
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRC/build
OUT=$SRC/build/container
RUN_CHECK=1
PULL=1
BASE_ONLY=0
while [ $# -gt 0 ]; do
    case $1 in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-run) RUN_CHECK=0; shift ;;
    --no-pull) PULL=0; shift ;;
    --base-only) BASE_ONLY=1; shift ;;
    -h | --help) sed -n '3,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
    esac
done
PODMAN=${PODMAN:-podman}
BASE_PUBLIC=docker.io/library/debian:12-slim
BASE_LOCAL=${HV_CTR_BASE_LOCAL:-localhost/hv-debian:12-minbase}
PORT=${HV_CTR_PORT:-17400}
RUN_OPTS=${HV_CTR_RUN_OPTS:-}
command -v "${PODMAN%% *}" >/dev/null 2>&1 || { echo "SKIP: podman not installed"; exit 77; }
[ "$BASE_ONLY" = 1 ] || [ -f "$BUILD/CPackConfig.cmake" ] || { echo "build.sh: no $BUILD/CPackConfig.cmake (build first)" >&2; exit 1; }
VER=$(sed -nE 's/^set\(CPACK_PACKAGE_VERSION "([^"]*)"\)/\1/p' "$BUILD/CPackConfig.cmake" 2>/dev/null || true)
IMG_HEAD=localhost/hv-head:$VER
IMG_AGENT=localhost/hv-agent:$VER
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
say() { echo "build.sh: [$(($(date +%s) - T0)) s] $*"; }
die() { echo "build.sh: $*" >&2; exit 1; }
# The base's root while debootstrap makes it. A failed or interrupted debootstrap can leave /proc
# or /sys (or a bind of /dev) mounted in it: those are unmounted, and rm never crosses into
# another file system.
ROOT=$OUT/rootfs
unmount_root() {
    awk -v r="$ROOT/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r m; do umount "$m" || umount -l "$m"; done
}
# Everything the check starts is removed on the way out, whatever happens.
CTRS=""
cleanup() {
    unmount_root
    for c in $CTRS; do $PODMAN rm -f -t 2 "$c" >/dev/null 2>&1 || true; done
    [ -z "$CTRS" ] || $PODMAN volume rm -f hv-check-data >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

# The Debian mirror apt uses for bookworm itself (not -updates or -security): deb822 stanzas
# (URIs:/Suites:) or one-line "deb [opts] URI bookworm main".
debian_mirror() {
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'function flush() { if (ok && uri != "") { print uri; found = 1; exit } ok = 0; uri = "" }
             /^[ \t]*$/ { flush(); next }
             /^URIs:/ { uri = $2 }
             /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") ok = 1 }
             END { if (!found) flush() }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -nE 's/^deb[ \t]+(\[[^]]*\][ \t]+)?([^ \t]+)[ \t]+bookworm[ \t].*/\2/p'
}

# ---- 1. the base image --------------------------------------------------------------------------
BASE=""
if $PODMAN image exists "$BASE_PUBLIC"; then
    BASE=$BASE_PUBLIC
elif [ "$PULL" = 1 ] && timeout 60 $PODMAN pull -q "$BASE_PUBLIC" >/dev/null 2>&1; then
    BASE=$BASE_PUBLIC
elif $PODMAN image exists "$BASE_LOCAL"; then
    BASE=$BASE_LOCAL
    say "base: $BASE_PUBLIC not available; using $BASE_LOCAL made earlier"
else
    command -v debootstrap >/dev/null 2>&1 || { echo "SKIP: no $BASE_PUBLIC and no debootstrap to make a base"; exit 77; }
    MIRROR=$(debian_mirror | head -n 1)
    [ -n "$MIRROR" ] || die "no bookworm mirror in /etc/apt/sources.list*"
    say "base: $BASE_PUBLIC not available; debootstrap --variant=minbase bookworm from $MIRROR"
    unmount_root
    rm -rf --one-file-system "$ROOT"
    debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 ||
        { unmount_root; die "debootstrap failed (see $OUT/debootstrap.log)"; }
    unmount_root
    # Slim like debian:12-slim: dpkg leaves out docs (but the copyrights), man pages, info and
    # translations of what is installed later, and what debootstrap installed goes now; no
    # downloaded .debs, no apt lists, no apt caches.
    cat >"$ROOT/etc/dpkg/dpkg.cfg.d/hv-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
    find "$ROOT/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
    rm -rf "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*
    find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    rm -rf "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*.log
    tar -C "$ROOT" --numeric-owner -c . |
        $PODMAN import -q --change 'CMD ["/bin/bash"]' - "$BASE_LOCAL" >/dev/null || die "podman import failed"
    rm -rf --one-file-system "$ROOT"
    BASE=$BASE_LOCAL
fi
say "base image: $BASE"
[ "$BASE_ONLY" = 0 ] || exit 0

# ---- 2. the packages -----------------------------------------------------------------------------
# The build context holds the packages alone (podman copies all of it into each build).
rm -rf "$OUT/ctx" "$OUT/cpack"
mkdir -p "$OUT/ctx"
cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$OUT/cpack" >"$OUT/cpack.log" 2>&1 ||
    die "cpack failed (see $OUT/cpack.log)"
cp "$OUT"/cpack/*.deb "$OUT/ctx/"
say "packages: $(cd "$OUT/ctx" && echo ./*.deb)"

# ---- 3. the images (apt-get in the build resolves the packages' dependencies from the
#         base's mirror, so the build uses the host's network) --------------------------------
for role in head agent; do
    $PODMAN build --isolation chroot --network host --build-arg "BASE=$BASE" \
        -f "$SRC/deploy/container/Containerfile.$role" -t "localhost/hv-$role:$VER" "$OUT/ctx" \
        >"$OUT/build-$role.log" 2>&1 || die "podman build of hv-$role failed (see $OUT/build-$role.log)"
    say "image localhost/hv-$role:$VER: $($PODMAN image inspect -f '{{.Size}}' "localhost/hv-$role:$VER") bytes"
done
$PODMAN images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'hv-(head|agent|debian)' || true

# ---- 4. the checks -------------------------------------------------------------------------------
for role in head agent; do
    img=localhost/hv-$role:$VER
    user=$($PODMAN image inspect -f '{{.Config.User}}' "$img")
    case $user in "" | 0 | 0:* | root | root:*) die "$img runs as root ($user)" ;; esac
    say "$img: USER $user"
done
[ "$RUN_CHECK" = 1 ] || { say "built (checks that run containers skipped: --no-run)"; exit 0; }
v=$($PODMAN run $RUN_OPTS --rm --network none "$IMG_HEAD" --version) || die "hvhead --version failed in hv-head"
[ "$v" = "hvhead $VER" ] || die "hv-head: hvhead --version said '$v'"
say "hv-head: $v"
v=$($PODMAN run $RUN_OPTS --rm --network none "$IMG_AGENT" --version) || die "hvagent --version failed in hv-agent"
[ "$v" = "hvagent $VER" ] || die "hv-agent: hvagent --version said '$v'"
say "hv-agent: $v"
id_head=$($PODMAN run $RUN_OPTS --rm --network none --entrypoint id "$IMG_HEAD")
id_agent=$($PODMAN run $RUN_OPTS --rm --network none --entrypoint id "$IMG_AGENT")
say "hv-head runs as: $id_head"
say "hv-agent runs as: $id_agent"
case "$id_head $id_agent" in *"uid=0("*) die "a container runs as root" ;; esac

# A head with a data volume and an agent joining it, both on the host network (loopback).
# The join token: one copy for each container's user (999 hv, 1000 hvjobs), 0600 as on a host.
CFG=$OUT/check-head.yaml
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$OUT/check-token.head"
cp "$OUT/check-token.head" "$OUT/check-token.agent"
{ chown 999:999 "$OUT/check-token.head" && chown 1000:1000 "$OUT/check-token.agent"; } ||
    die "cannot give the token files to uids 999 and 1000 (run as root)"
chmod 0600 "$OUT/check-token.head" "$OUT/check-token.agent"
printf 'cluster_name: ctrcheck\nlisten: 127.0.0.1:%s\ndata_dir: /var/lib/hv\ntoken_file: /etc/hv/token\n' \
    "$PORT" >"$CFG"
$PODMAN volume rm -f hv-check-data >/dev/null 2>&1 || true
CTRS="hv-check-head hv-check-agent"
$PODMAN rm -f hv-check-head hv-check-agent >/dev/null 2>&1 || true
$PODMAN run $RUN_OPTS -d --name hv-check-head --network host -v hv-check-data:/var/lib/hv \
    -v "$CFG:/etc/hv/head.yaml:ro" -v "$OUT/check-token.head:/etc/hv/token:ro" "$IMG_HEAD" >/dev/null ||
    die "the head container did not start"
i=0
until $PODMAN exec hv-check-head test -s /var/lib/hv/client.token 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 60 ] || { $PODMAN logs hv-check-head >&2; die "the head container wrote no client token in 30 s"; }
    sleep 0.5
done
(umask 077 && $PODMAN exec hv-check-head cat /var/lib/hv/client.token >"$OUT/check-client.token")
$PODMAN run $RUN_OPTS -d --name hv-check-agent --network host -v "$OUT/check-token.agent:/etc/hv/token:ro" \
    "$IMG_AGENT" join "127.0.0.1:$PORT" --token-file /etc/hv/token --name ctr-agent-1 \
    --slots 2 --work-dir /var/lib/hvagent >/dev/null || die "the agent container did not start"
HVCTL=${HVCTL:-$BUILD/bin/hvctl}
i=0
until "$HVCTL" --head "127.0.0.1:$PORT" --token-file "$OUT/check-client.token" nodes >"$OUT/check-nodes.out" 2>&1 &&
    grep -q 'ctr-agent-1.*alive' "$OUT/check-nodes.out"; do
    i=$((i + 1))
    [ $i -lt 60 ] || { cat "$OUT/check-nodes.out" >&2; $PODMAN logs hv-check-agent >&2; die "the agent container did not join in 30 s"; }
    sleep 0.5
done
say "hvctl nodes (from the host):"
cat "$OUT/check-nodes.out"
$PODMAN stop -t 10 hv-check-agent hv-check-head >/dev/null
say "the data volume after the stop: $($PODMAN run $RUN_OPTS --rm --network none -v hv-check-data:/var/lib/hv \
    --entrypoint ls "$IMG_HEAD" /var/lib/hv | tr '\n' ' ')"
say "done: $IMG_HEAD and $IMG_AGENT built and checked"
