#!/usr/bin/env bash
# Installs every Debian 12 package that hv's build, tests and demo need.
# (dataset-fashion-mnist: the data of examples/elastic_train, ~30 MiB, in /usr/share/datasets;
# openssl: the command the TLS tests make their certificates with; python3-torch: the tests of
# the Python package, worker_lib/python.)
# Idempotent: packages already present are left alone, so running it twice is harmless.
# Usage: deploy/install-deps.sh [--bench]   (--bench adds OpenMPI for the benchmark peer)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
      libuv1-dev libsqlite3-dev sqlite3 libyaml-dev iproute2 procps python3
      clang-format git zlib1g-dev dataset-fashion-mnist openssl
      clang libclang-rt-dev  # clang + libFuzzer runtime: tests/fuzz
      python3-grpcio       # an independent hostile client: tests/integration/hostile_client.sh
      dpkg-dev             # dpkg-shlibdeps: cpack's Debian packages (tests/package)
      python3-yaml systemd # the static checks of deploy/k8s and the units (tests/deploy)
      prometheus curl      # a real Prometheus scrapes the head: tests/integration/metrics_*.sh
      chromium             # headless, loads the status page: tests/integration/status_page.sh
      python3-torch)       # PyTorch 1.13 (CPU, Gloo; ~630 MB): hv.torch's tests and benchmarks
if [ "${1:-}" = "--bench" ] || [ "${HV_BENCH_DEPS:-0}" = 1 ]; then
    pkgs+=(openmpi-bin libopenmpi-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#pkgs[@]} packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
