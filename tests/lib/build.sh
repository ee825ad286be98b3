#!/usr/bin/env bash
# Sourced by deploy/demo.sh and tests/run.sh: configure and build with the compiler's output
# in a log file, showing one line that follows the build's progress.
#   reclass_build LOG SOURCE BUILD_DIR [cmake -D... args] [-- build args]
# Returns cmake's status; on failure the log's last 30 lines go to stderr.
# reclass_test_jobs: how many tests ctest runs at once (tests/run.sh, tests/sanitize.sh).
reclass_build() {
    local log=$1 src=$2 dir=$3 rc=0
    shift 3
    local conf=() bld=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do conf+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    bld=("$@")
    mkdir -p "$(dirname "$log")"
    {
        cmake -S "$src" -B "$dir" "${conf[@]}" && cmake --build "$dir" -j"$(nproc)" "${bld[@]}"
    } >"$log" 2>&1 &
    local pid=$! tty=0 pct
    [ -t 2 ] && tty=1
    while kill -0 "$pid" 2>/dev/null; do
        pct=$(grep -o '^\[ *[0-9]*%\]' "$log" 2>/dev/null | tail -n 1 | tr -d '[] ')
        [ "$tty" = 1 ] && printf '\r  building: %-5s (log: %s)' "${pct:-...}" "$log" >&2
        sleep 1
    done
    wait "$pid" || rc=$?
    [ "$tty" = 1 ] && printf '\r\033[K' >&2
    if [ "$rc" != 0 ]; then
        tail -n 30 "$log" >&2
        echo "build failed (exit $rc): the whole output is in $log" >&2
    fi
    return "$rc"
}

# RECLASS_TEST_JOBS, default twice the cores: most integration tests wait (PostgreSQL, a
# broker, the worker's timers); the CPU-heavy and the timed ones hold more slots or the whole
# machine through their CTest properties (PROCESSORS, RUN_SERIAL: tests/*.cmake).
reclass_test_jobs() {
    echo "${RECLASS_TEST_JOBS:-$((2 * $(nproc)))}"
}
