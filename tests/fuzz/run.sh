#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, CPU only) in their own build directory
# and runs them. Fails when a target finds a crash, a leak, a timeout or a broken check,
# saving the input and saying where to keep it.
#   tests/fuzz/run.sh                  CI (tests/run.sh): deterministic. Each target replays its
#                                      seeds and regressions, then runs its fixed number of inputs
#                                      (runs, below) from a fixed seed, from a fresh corpus: the
#                                      same commit gives the same verdict on any machine.
#   tests/fuzz/run.sh build           builds the targets only (tests/run.sh, while its tests run)
#   tests/fuzz/run.sh explore [SECS]   exploration: a random seed (libFuzzer prints it), SECS
#                                      (default 600) per target, the corpus it grows kept in the
#                                      build directory between runs (the repo's corpus stays small).
# RECLASS_FUZZ_BUILD_DIR (default build-fuzz), RECLASS_FUZZ_TARGETS (space-separated subset),
# RECLASS_FUZZ_JOBS (targets run at once, default: number of cores, at most 4),
# RECLASS_FUZZ_SEED (CI's seed, default 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-ci}
case $mode in
ci | build) secs= ;;
explore) secs=${2:-600} ;;
*) echo "usage: tests/fuzz/run.sh [ci | build | explore [SECONDS]]" >&2; exit 2 ;;
esac
build=${RECLASS_FUZZ_BUILD_DIR:-$root/build-fuzz}
read -r -a targets <<<"${RECLASS_FUZZ_TARGETS:-codec submit_csv submit_jsonl tokenizer tokenizer_json model_config safetensors}"
ncpu=$(nproc)
jobs=${RECLASS_FUZZ_JOBS:-$((ncpu < 4 ? ncpu : 4))}
# Longest input per target: a bit above the largest real input of its kind (tickets are
# short, the demo model's config.json and safetensors header are ~8 KB); longer inputs only
# slow the search down.
declare -A max_len=([codec]=4096 [submit_csv]=8192 [submit_jsonl]=8192 [tokenizer]=2048 [tokenizer_json]=4096
                    [model_config]=16384 [safetensors]=16384)
# CI's inputs per target after the replay: about 20 s of CPU each (on 2 cores the stage takes
# about 75 s). A count, not a time, so that a slower or busier machine runs the same inputs,
# only for longer.
declare -A runs=([codec]=3000000 [submit_csv]=80000 [submit_jsonl]=100000
                 [tokenizer]=200000 [tokenizer_json]=80000
                 [model_config]=250000 [safetensors]=600000)

command -v clang >/dev/null || { echo "tests/fuzz/run.sh: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release \
      -DRECLASS_CUDA=OFF -DRECLASS_FUZZ=ON >/dev/null
cmake --build "$build" -j"$ncpu" --target "${targets[@]/#/fuzz_}"
[ "$mode" = build ] && exit 0

work=$build/fuzz-work
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp # the submit targets write their input to a file
# (sanitizer options: compiled in, tests/sanitizer_options.c)

# CI runs each target without address randomization where the machine allows it: with it, the
# compared pointers that libFuzzer records steer its mutations, and two runs of the same seed
# part ways after a few thousand inputs (seen on model_config). No periodic corpus reload
# either: it is timed.
fixed=()
if [ "$mode" = ci ] && setarch "$(uname -m)" -R true 2>/dev/null; then
    fixed=(setarch "$(uname -m)" -R)
fi

run_one() {
    local t=$1 dir=$work/$1 rc=0 dict=() how=() grown
    mkdir -p "$dir/corpus" "$dir/artifacts"
    rm -f "$dir/artifacts/"*
    [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
    if [ "$mode" = ci ]; then
        # a fresh corpus: what earlier runs grew would change which inputs this one tries
        rm -rf "$dir/ci-corpus"
        mkdir -p "$dir/ci-corpus"
        how=(-seed="${RECLASS_FUZZ_SEED:-1}" -runs="${runs[$t]}" -reload=0)
        grown=$dir/ci-corpus
    else
        how=(-max_total_time="$secs")
        grown=$dir/corpus
    fi
    "${fixed[@]}" "$build/tests/fuzz_$t" "${how[@]}" -max_len="${max_len[$t]}" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "${dict[@]}" \
        "$grown" "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t" \
        >"$dir/log" 2>&1 || rc=$?
    echo "$rc" >"$dir/rc"
}

if [ "$mode" = ci ]; then
    echo "tests/fuzz/run.sh: ${#targets[@]} targets, a fixed number of inputs each from seed ${RECLASS_FUZZ_SEED:-1}, $jobs at a time"
else
    echo "tests/fuzz/run.sh: exploring ${#targets[@]} targets, ${secs}s each from a random seed, $jobs at a time"
fi
for t in "${targets[@]}"; do
    [ -n "${max_len[$t]:-}" ] || { echo "tests/fuzz/run.sh: unknown target $t" >&2; exit 1; }
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_one "$t" &
done
wait

failed=0
printf '%-14s %10s %8s %6s %7s %6s %6s  %s\n' target execs exec/s cov ft corpus time result
for t in "${targets[@]}"; do
    dir=$work/$t
    rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
    took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1s/p' "$dir/log" | tail -1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$dir/log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
    result=ok
    if [ "$rc" != 0 ]; then
        result="FAILED (exit $rc)"
        failed=1
    fi
    printf '%-14s %10s %8s %6s %7s %6s %6s  %s\n' "$t" "${execs:--}" "${rate:--}" "${cov:--}" \
        "${ft:--}" "${corp:--}" "${took:--}" "$result"
done
for t in "${targets[@]}"; do
    dir=$work/$t
    [ "$(cat "$dir/rc" 2>/dev/null || echo 1)" = 0 ] && continue
    echo
    echo "== fuzz_$t failed; the end of its log ($dir/log):"
    grep -E 'ERROR|SUMMARY|fuzz check failed|^    #[0-9]' "$dir/log" | head -40 || tail -40 "$dir/log"
    for a in "$dir/artifacts/"*; do
        [ -e "$a" ] || continue
        echo "   input saved: $a"
        echo "   reproduce:   $build/tests/fuzz_$t $a"
        [ "$mode" = ci ] || echo "   (the seed of this run: $(sed -n 's/.*Seed: \([0-9]*\).*/\1/p' "$dir/log" | head -n 1))"
        echo "   once fixed, keep it: cp $a $root/tests/fuzz/regressions/$t/  (replayed by ctest -R fuzz_$t)"
    done
done
exit "$failed"
