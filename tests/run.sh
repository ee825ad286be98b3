#!/usr/bin/env bash
# The one test command (README, CI): installs what is missing, builds, runs every CTest test.
# GPU tests report "skipped" on machines without a GPU. Integration tests start their own
# throwaway PostgreSQL and embedded Kafka (librdkafka mock cluster) and stop them.
#   tests/run.sh [extra ctest args, e.g. -L unit]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECLASS_BUILD_DIR:-$root/build}

# librdkafka is built from third_party/ (it needs patch and the OpenSSL, zlib, zstd headers).
pkgs=(build-essential cmake pkg-config git python3 patch libssl-dev zlib1g-dev libzstd-dev
      libavro-dev libpq-dev libopenblas-dev libjansson-dev libutf8proc-dev libmicrohttpd-dev
      libcmocka-dev python3-pip postgresql postgresql-client)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing ${missing[*]}" >&2
    sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian postgresql package starts a cluster on 5432 we don't use; the tests run their own.

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure --timeout 900 "$@"
