#!/bin/sh
# ctest's hv.container_images (label container): deploy/container/build.sh on this build, only
# when asked (HV_CONTAINER_TEST=1: minutes of debootstrap and podman builds), else skipped (77).
# build.sh itself skips (77) without podman. PODMAN and HV_CTR_* pass through (docs/operations.md).
# Usage: container_test.sh BUILD_DIR
BUILD=${1:?usage: container_test.sh BUILD_DIR}
if [ "${HV_CONTAINER_TEST:-0}" != 1 ]; then
    echo "SKIP: set HV_CONTAINER_TEST=1 to build the container images (minutes: debootstrap, podman build)"
    exit 77
fi
exec sh "$HV_SRC_DIR/deploy/container/build.sh" --build-dir "$BUILD" --out "$BUILD/container"
