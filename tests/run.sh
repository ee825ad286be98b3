#!/usr/bin/env bash
# The one test command (README, CI): installs what is missing, builds, runs every CTest test.
# GPU tests report "skipped" on machines without a GPU. Integration tests start their own
# throwaway PostgreSQL and embedded Kafka (librdkafka mock cluster) and stop them.
#   tests/run.sh [extra ctest args, e.g. -L unit]      RECLASS_QUICK=1: skip the stages below
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECLASS_BUILD_DIR:-$root/build}

# The packages of the one list, tests/packages.txt, that are missing (apt-get, pip).
# shellcheck source=tests/lib/packages.sh
source "$root/tests/lib/packages.sh"
pkg_install demo test || { echo "tests/run.sh: FAIL: the packages could not be installed (above)"; exit 1; }

# shellcheck source=tests/lib/build.sh
source "$root/tests/lib/build.sh"
echo "tests/run.sh: building in $build (output in $build/build.log)" >&2
reclass_build "$build/build.log" "$root" "$build" -DCMAKE_BUILD_TYPE=Release -DRECLASS_WERROR=ON \
    || { echo "tests/run.sh: FAIL: the build failed (above)"; exit 1; }

# The tests; then the unit and integration tests again, built with ASan + UBSan
# (tests/sanitize.sh), and every fuzz target, deterministic: its seeds and regressions, then
# a fixed number of inputs from a fixed seed (tests/fuzz/run.sh). RECLASS_QUICK=1 runs the
# tests alone. ctest runs several tests at once (RECLASS_TEST_JOBS, default twice the cores:
# tests/lib/build.sh). Every stage runs even when an earlier one failed; the exit status is
# non-zero when any did, and the last line sums them up.
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
# The sanitizer and fuzz builds start with the tests, at the lowest priority: most tests wait,
# and the builds take the idle cores. A failed build here fails again, shown, in its stage.
prebuild=
if [ "${RECLASS_QUICK:-0}" != 1 ]; then
    { nice -n 19 "$root/tests/sanitize.sh" build && nice -n 19 "$root/tests/fuzz/run.sh" build; } \
        >"$build/prebuild.log" 2>&1 &
    prebuild=$!
fi
sanitizers() {
    wait "$prebuild" || true
    "$root/tests/sanitize.sh"
}
stage tests ctest --test-dir "$build" --output-on-failure --timeout 900 -j"$(reclass_test_jobs)" "$@"
if [ "${RECLASS_QUICK:-0}" = 1 ]; then
    summary+=("sanitizers and fuzzing skipped (RECLASS_QUICK=1)")
else
    stage sanitizers sanitizers
    stage fuzzing "$root/tests/fuzz/run.sh" ci
fi
line=$(printf '%s, ' "${summary[@]}")
echo "tests/run.sh: $([ "$failed" = 0 ] && echo PASS || echo FAIL): ${line%, }"
exit "$failed"
