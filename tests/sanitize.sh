#!/usr/bin/env bash
# The unit and integration tests again, built with AddressSanitizer + UndefinedBehaviorSanitizer
# (CPU backend, own build directory): a memory error, undefined behaviour or a leak in our
# code fails the test that hit it, including inside the `reclass` processes the shell-driven
# integration tests start. Leaks inside third-party libraries are listed, with the reason, in
# tests/lsan.supp.
#   tests/sanitize.sh [extra ctest args]      RECLASS_ASAN_BUILD_DIR (default build-asan),
#                                             RECLASS_TEST_JOBS (ctest -j, tests/lib/build.sh)
#   tests/sanitize.sh build                   builds only (tests/run.sh, while its tests run)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECLASS_ASAN_BUILD_DIR:-$root/build-asan}
# shellcheck source=tests/lib/build.sh
source "$root/tests/lib/build.sh"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRECLASS_CUDA=OFF \
      -DRECLASS_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
[ "${1:-}" = build ] && exit 0

# The runtimes' default options are compiled in (tests/sanitizer_options.c). Reports also go
# to files: a shell-driven test may ignore the exit status of a reclass it stops or kills, and
# its report must not be lost with it.
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="log_path=$logs/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$logs/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
cd "$build"
rc=0
# lint_deploy checks deploy/ files and runs none of our C code.
ctest --output-on-failure --timeout 900 -j"$(reclass_test_jobs)" -L 'unit|integration' \
    -E '^lint_deploy$' "$@" || rc=$?
reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
    echo "tests/sanitize.sh: sanitizer reports ($logs):" >&2
    for f in $reports; do
        echo "== $f" >&2
        head -60 "$f" >&2
    done
    rc=1
fi
exit "$rc"
