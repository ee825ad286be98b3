#!/usr/bin/env bash
# The one test command (README, CI): installs what is missing, builds, runs every CTest test.
# GPU tests report "skipped" on machines without a GPU. Integration tests start their own
# throwaway PostgreSQL and embedded Kafka (librdkafka mock cluster) and stop them.
#   tests/run.sh [extra ctest args, e.g. -L unit]      RECLASS_QUICK=1: skip the stages below
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECLASS_BUILD_DIR:-$root/build}

# librdkafka is built from third_party/ (it needs patch and the OpenSSL, zlib, zstd headers).
pkgs=(build-essential cmake pkg-config git python3 patch libssl-dev zlib1g-dev libzstd-dev
      libavro-dev libpq-dev libopenblas-dev libjansson-dev libutf8proc-dev
      libcmocka-dev libcurl4-openssl-dev python3-pip postgresql postgresql-client
      python3-numpy python3-scipy chromium # drift score reference, report rendering test
      clang libclang-rt-14-dev clang-format # clang + its runtimes: the fuzz stage (libFuzzer)
      prometheus) # promtool and a real server: the alert rules and the scrape test
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: installing ${missing[*]}" >&2
    sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian postgresql package starts a cluster on 5432 we don't use; the tests run their own.
# confluent-kafka's own AvroSerializer and Schema Registry client produce the records of the
# Schema Registry test (tests/integration/run_schema_registry.sh).
if ! python3 -c 'import confluent_kafka.schema_registry.avro, fastavro' 2>/dev/null; then
    pip_args=(-q --disable-pip-version-check "confluent-kafka[avro,schemaregistry]>=2.6" fastavro)
    python3 -m pip install "${pip_args[@]}" 2>/dev/null ||
        python3 -m pip install --break-system-packages "${pip_args[@]}" ||
        echo "tests/run.sh: confluent-kafka could not be installed: the Schema Registry test skips" >&2
fi

# shellcheck source=tests/lib/build.sh
source "$root/tests/lib/build.sh"
echo "tests/run.sh: building in $build (output in $build/build.log)" >&2
reclass_build "$build/build.log" "$root" "$build" -DCMAKE_BUILD_TYPE=Release -DRECLASS_WERROR=ON \
    || { echo "tests/run.sh: FAIL: the build failed (above)"; exit 1; }

# The tests; then the unit and integration tests again, built with ASan + UBSan
# (tests/sanitize.sh), and every fuzz target for RECLASS_FUZZ_SECONDS (default 30) each
# (tests/fuzz/run.sh). RECLASS_QUICK=1 runs the tests alone. Every stage runs even when an earlier one failed;
# the exit status is non-zero when any did, and the last line sums them up.
failed=0 summary=()
stage() {
    local name=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    if [ "$rc" = 0 ]; then
        summary+=("$name ok ($((SECONDS - t0))s)")
    else
        summary+=("$name FAILED (exit $rc, $((SECONDS - t0))s)")
        failed=1
    fi
}
stage tests ctest --test-dir "$build" --output-on-failure --timeout 900 "$@"
if [ "${RECLASS_QUICK:-0}" = 1 ]; then
    summary+=("sanitizers and fuzzing skipped (RECLASS_QUICK=1)")
else
    stage sanitizers "$root/tests/sanitize.sh"
    stage fuzzing "$root/tests/fuzz/run.sh" "${RECLASS_FUZZ_SECONDS:-30}"
fi
line=$(printf '%s, ' "${summary[@]}")
echo "tests/run.sh: $([ "$failed" = 0 ] && echo PASS || echo FAIL): ${line%, }"
exit "$failed"
