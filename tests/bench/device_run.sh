#!/usr/bin/env bash
# The one script for the CUDA backend on a lent GPU machine (see gpu/NOTES-cuda.md).
#
# Here (build machine, nvcc, no GPU):
#   cmake -S . -B build-sm90 -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build-sm90 -j2
#   tests/bench/device_run.sh pack        # -> .devlibs/bundle.tar.xz (binaries + .so deps)
#   tests/bench/device_run.sh pack-fixtures  # -> .devlibs/fix.tar.xz (the goldens' models)
# The tracked tree (~100 MB, the fixture models most of it) is over the device call's 64 MiB:
# for the golden stages, leave tests/fixtures, deploy/models and the librdkafka tarball out of
# the index for the call (`git rm -r -q --cached` them and list them in .git/info/exclude;
# `git reset -q` after), carry .devlibs/fix.tar.xz, and start the command with
# `tar -xJf .devlibs/fix.tar.xz &&`. The job stages need only deploy/models/*/vocab.txt,
# tokenizer_config.json and config.json back in the index (`git add -f`).
# On the device, from the repo root (carry .devlibs):
#   tests/bench/device_run.sh run STAGES  # STAGES: comma list of
#       smoke    GPU visible, libraries resolve
#       ctest    ctest -R test_gpu -V (plan, kernel parity, golden, memory 100,000 batches)
#       quick    kernels + golden + a 20,000-batch memory test (no 100k run)
#       attn     attention kernels: parity (test_gpu_kernels wgmma), golden, the microbench
#       sanitize compute-sanitizer memcheck + racecheck on the kernel test, golden under
#                GOLDEN_TOOLS (default memcheck)
#       classify reclass classify --backend cuda vs --backend cpu on the CLINC150 test set
#       bench    gpu_bench fp16 (16384, 32768, 65536) + bf16 (16384, 32768), attention
#                microbench, writes the workload for the torch peer
#       gemm     the kernel parity test, then each projection alone with its epilogue,
#                cuBLASLt tuned, X cold in L2 (gpu_bench --gemm-bench)
#       clocks   gpu_bench fp16 and bf16 at 65536 with nvidia-smi sampling SM clock, power and
#                clock event reasons every 50 ms (is the pass power-limited?); bench and torch
#                are sampled the same way
#       pace     gpu_bench fp16 at 65536 as is, then with the GPU idle PACE_US (10000) after
#                each batch: the profiled GPU time with and without the power cap binding
#       energy   gpu_bench --energy ENERGY_S (1) for fp16 and bf16: idle watts, then joules per
#                unit of work of each projection under each of cuBLASLt's first 8 algorithms,
#                of attention and LayerNorm, each alone; then the 65536 pass's joules
#       variants gpu_bench at 16384 fp16: the default, then each of VARIANTS (environment
#                settings, one per run; none by default: the backend reads no environment)
#       rbench   reclass bench --backend cuda (the worker's own bench command)
#       families reclass bench --backend cuda on the bert-base, roberta-base and distilbert-base
#                geometries (fp16, 16384 and 65536), interleaved, then torch.compile on each
#                family's peer (torch_gpu_peer.py --geometry) on the same workload
#       newpeers the PyTorch side of ModernBERT and DeBERTa-v3 alone: torch_gpu_peer.py
#                --geometry modernbert-base
#                (sdpa eager, torch.compile, HF's unpadded flash-attention path where flash-attn
#                is installed) and deberta-v3-base (eager, compile), fp16, 16384 and 65536,
#                on the tickets-mix workload; then test_gpu_golden, whose gate (flips on thin
#                fp32 margins only) covers every family
#       graph    the encoder graph on CUDA (every family and precision) in one call
#                (GRAPH_BUDGET_S, 570 s by default, inside the call's 600; each step's timeout
#                cut to what is left): test_graph_ops (every op variant x precision on cpu and
#                cuda against tests/lib's references, fp16 and bf16 rows for BERT's ops),
#                test_gpu_kernels,
#                test_gpu_golden (all 7 families, fp16 and bf16), reclass bench bert-base fp16 /
#                bf16 / fp8 at 16384 on tickets-mix beside a baseline binary interleaved (put
#                another commit's build at .devlibs/base/reclass before `pack`: in a
#                checkout of that commit, `cmake -S . -B build-sm90 -DCMAKE_CUDA_ARCHITECTURES=90
#                && cmake --build build-sm90 --target reclass`, then `mkdir -p .devlibs/base && cp
#                <that checkout>/build-sm90/reclass .devlibs/base/`), then test_gpu_memory over
#                GRAPH_MEM_BATCHES (100000) random batches after every token count 1..2048 for
#                bert-base, modernbert-base and deberta-v3-base. GRAPH_PARTS (ops, kernels,
#                golden, bench, memory) runs a subset, e.g. the memory runs in a second call.
#       modern   ModernBERT-base and DeBERTa-v3-base against PyTorch in one call of
#                MODERN_BUDGET_S (540): test_graph_ops, test_gpu_kernels, their goldens,
#                reclass bench --profile-ops (modernbert-base, bert-base), then the speed rows
#                beside torch_gpu_peer.py eager / compile / varlen (tests/bench/device_modern.sh)
#       torch    tests/bench/torch_gpu_peer.py eager + torch.compile on the same workload
#       bound    tests/bench/bound.py on this call's bench and torch lines: how fast attention
#                would have to run for 1.6x the best PyTorch variant (needs bench, torch)
#       fp8      FP8 in one call: FP8_PARTS, FP8_BUDGET_S (tests/bench/device_fp8.sh)
#       e2e, job, lanes, host, encoders  whole jobs on the carried PostgreSQL (tests/bench/device_jobs.sh)
#       cpubf16  the CPU backend at bf16 on the host's CPU (no GPU used): lscpu and its bf16
#                flags, test_cpu_bf16 (parity and batch invariance of each bf16 kernel the CPU
#                has: AMX, AVX512-BF16, AVX2), cpu_bf16_bench (BERT GEMM shapes: fp32, each
#                bf16 kernel, oneDNN), agreement with Hugging Face fp32 (CLINC150, CFPB), then
#                CPUBF16_ROUNDS (5) interleaved rounds of reclass classify fp32 / bf16 against
#                PyTorch bf16 eager and torch.compile bf16 (cpu_bf16_peers.py); JSON lines in
#                $OUT/cpubf16.jsonl; about 5-6 minutes (its steps time out after 10 in all)
# Logs and JSON lines go to $OUT (or ./device-out) so they come back.
# Paths are relative to the repository root, found from this script's location.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
mode=${1:-}
B=build-sm90
case "$mode" in
pack)
    rm -rf .devlibs/lib .devlibs/bundle.tar.xz && mkdir -p .devlibs/lib
    # The build's CTest files (and the binaries' compiled-in defaults) hold this checkout's
    # absolute path: recorded so that `run` can make it lead to the device's checkout.
    pwd -P >.devlibs/build-root
    ldd $B/reclass $B/tests/test_gpu_kernels $B/tests/test_cpu_bf16 $B/tests/cpu_bf16_bench $B/tests/test_graph_ops \
        $B/tests/fp8_sensitivity | awk '/=>/ {print $3}' | sort -u |
        grep -v -E 'libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|ld-linux|libgcc_s|libstdc\+\+|libcublas|libcudart' |
        while read -r lib; do cp -L "$lib" .devlibs/lib/; done
    # the long CFPB narratives for the cpubf16 stage (../shared does not travel)
    mkdir -p .devlibs/cfpb && cp ../shared/data/cfpb_complaints/complaints_sample.csv .devlibs/cfpb/
    base=()
    [ -x .devlibs/base/reclass ] && base=(.devlibs/base/reclass) # the job stage's baseline
    tar -cf - .devlibs/lib .devlibs/build-root .devlibs/cfpb "${base[@]}" $B/reclass $B/tests/test_gpu_* \
        $B/tests/gpu_bench $B/tests/kafka_tool $B/tests/test_cpu_bf16 $B/tests/cpu_bf16_bench $B/tests/test_graph_ops $B/tests/fp8_sensitivity \
        $B/CTestTestfile.cmake $B/tests/CTestTestfile.cmake | xz -T2 -6 >.devlibs/bundle.tar.xz
    rm -rf .devlibs/lib .devlibs/cfpb
    ls -la .devlibs
    exit 0
    ;;
pack-fixtures) # the fixture models and goldens test_gpu_golden reads, without what it does not
    mkdir -p .devlibs
    tar --exclude=golden_long.jsonl --exclude=golden_cls_pooling.jsonl --exclude=README.md \
        --exclude=training_summary.json -cf - tests/fixtures/models \
        tests/fixtures/golden_clinc150_test.jsonl tests/fixtures/golden_cfpb_long.jsonl deploy/models |
        xz -T2 -9 >.devlibs/fix.tar.xz
    ls -la .devlibs/fix.tar.xz
    exit 0
    ;;
pack-pg) # PostgreSQL 15 server + client from this machine, for the e2e stage (device has none)
    # fs/ mirrors the files' places under / on the device; pglib/ holds their libraries
    rm -rf /tmp/pgpack && mkdir -p /tmp/pgpack/pglib /tmp/pgpack/fs/usr/lib/postgresql/15/bin \
        /tmp/pgpack/fs/usr/lib/postgresql/15/lib /tmp/pgpack/fs/usr/share/postgresql
    P=/usr/lib/postgresql/15
    cp -L $P/bin/initdb $P/bin/pg_ctl $P/bin/postgres $P/bin/psql /tmp/pgpack/fs$P/bin/
    find $P/lib -maxdepth 1 -name '*.so' ! -name 'llvmjit*' -exec cp -L {} /tmp/pgpack/fs$P/lib/ \;
    cp -rL /usr/share/postgresql/15 /tmp/pgpack/fs/usr/share/postgresql/
    for b in initdb pg_ctl postgres psql; do ldd $P/bin/$b; done | awk '/=>/ {print $3}' | sort -u |
        grep -v -E 'libc\.so|libm\.so|ld-linux|libgcc_s|libstdc\+\+|libpthread|libdl\.so|librt\.so|libresolv' |
        while read -r lib; do cp -L "$lib" /tmp/pgpack/pglib/; done
    mkdir -p .devlibs && tar -C /tmp/pgpack -cf - fs pglib | xz -T2 -6 >.devlibs/pg.tar.xz
    rm -rf /tmp/pgpack
    ls -la .devlibs
    exit 0
    ;;
run) ;;
*)
    echo "usage: $0 pack | pack-fixtures | pack-pg | run STAGES" >&2
    exit 2
    ;;
esac

stages=",${2:-smoke,quick,classify,bench,torch},"
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
# At most 8 files come back from $OUT: logs go to $LOGS and return as one tarball.
RESULT_OUT=$OUT
LOGS=/tmp/devlogs
rm -rf "$LOGS" && mkdir -p "$LOGS"
OUT=$LOGS
xz -dc .devlibs/bundle.tar.xz | tar -xf -
# CTest files hold the build machine's absolute path of its checkout (recorded by pack): make
# that path lead here when the checkouts' paths differ.
build_root=$(cat .devlibs/build-root 2>/dev/null)
if [ -z "$build_root" ]; then
    echo "== no .devlibs/build-root (bundle from an older pack): ctest may not find the build" >&2
elif [ "$(pwd -P)" != "$(readlink -f "$build_root" 2>/dev/null)" ]; then
    if [ -e "$build_root" ] && [ ! -L "$build_root" ]; then
        echo "== $build_root exists here and is not this checkout: ctest may run other files" >&2
    else
        mkdir -p "$(dirname "$build_root")" && ln -sfn "$PWD" "$build_root"
    fi
fi
export LD_LIBRARY_PATH=$PWD/.devlibs/lib:${LD_LIBRARY_PATH:-}
summary=$OUT/summary.txt
: >"$summary"
note() { echo "== $*" | tee -a "$summary"; }
has() { [[ $stages == *",$1,"* ]]; }
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
# clocks_start NAME / clocks_stop NAME: nvidia-smi samples SM clock, power and the active clock
# event reasons every 50 ms into $OUT/clocks-NAME.csv; clocks_stop summarises the busy samples
# (> 200 W) into the summary.
clocks_start() {
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,enforced.power.limit,temperature.gpu,clocks_event_reasons.active \
        --format=csv,noheader -lms 50 >"$OUT/clocks-$1.csv" 2>&1 &
    smi_pid=$!
}
clocks_stop() {
    kill "$smi_pid" 2>/dev/null
    wait "$smi_pid" 2>/dev/null
    python3 - "$OUT/clocks-$1.csv" "$1" <<'PY' | tee -a "$summary"
import sys, collections
def num(x):
    try:
        return float(x.split()[0])
    except (ValueError, IndexError):
        return None
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 6]
busy = [r for r in rows if (num(r[3]) or 0) > 200 and num(r[1]) is not None]
if not busy:
    print(f"clocks {sys.argv[2]}: {len(rows)} samples, none busy")
else:
    sm = sorted(num(r[1]) for r in busy)
    pw = sorted(num(r[3]) for r in busy)
    why = collections.Counter(r[6] for r in busy)
    print(f"clocks {sys.argv[2]}: {len(rows)} samples, {len(busy)} busy (> 200 W): SM MHz median "
          f"{sm[len(sm)//2]:.0f} (min {sm[0]:.0f}, max {sm[-1]:.0f}); power W median "
          f"{pw[len(pw)//2]:.0f} (max {pw[-1]:.0f}) of {rows[0][4]}; reasons {dict(why.most_common(3))} "
          "(0x4: software power cap)")
PY
}

if has smoke || true; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee -a "$summary"
    missing=$(ldd $B/reclass | grep "not found")
    [ -n "$missing" ] && note "MISSING LIBS: $missing"
fi
if has ctest; then
    note "ctest -R test_gpu ($(elapsed)s)"
    (cd $B && ctest -R test_gpu -V 2>&1) | tee "$OUT/ctest.log" | grep -E "^[0-9]+: (PASSED|FAILED|FAIL|ok   (fp16|bf16) budget|weights|[0-9]+ batches|over-budget)|tests passed|Test +#" | tee -a "$summary"
fi
if has quick; then
    for t in test_gpu_plan test_gpu_kernels test_gpu_golden; do
        note "$t ($(elapsed)s)"
        $B/tests/$t >"$OUT/$t.log" 2>&1
        rc=$?
        echo "exit $rc" >>"$OUT/$t.log"
        if [ $rc = 139 ]; then # a crash before any output: retry with BLAS pinned
            tail -3 "$OUT/$t.log" | tee -a "$summary"
            OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=4 $B/tests/$t >"$OUT/$t.retry.log" 2>&1
            echo "retry exit $?" >>"$OUT/$t.retry.log"
            cp "$OUT/$t.retry.log" "$OUT/$t.log.2"
        fi
        grep -h -E "FAIL|PASSED|FAILED|SKIP|exit|agreement|bert-base fp16|core" "$OUT/$t.log" "$OUT/$t.log.2" 2>/dev/null | tail -14 | tee -a "$summary"
    done
    note "test_gpu_memory 20000 ($(elapsed)s)"
    $B/tests/test_gpu_memory 20000 2>&1 | tee "$OUT/test_gpu_memory.log" | tail -8 | tee -a "$summary"
fi
if has attn; then # the attention kernels: parity alone, golden, microbench
    note "test_gpu_kernels wgmma ($(elapsed)s)"
    $B/tests/test_gpu_kernels wgmma 2>&1 | tee "$OUT/attn-kernels.log" | grep -E "FAIL|PASSED" | tail -8 | tee -a "$summary"
    note "test_gpu_golden ($(elapsed)s)"
    $B/tests/test_gpu_golden 2>&1 | tee "$OUT/attn-golden.log" |
        grep -E "FAIL|PASSED|agreement" | tail -6 | tee -a "$summary"
    $B/tests/gpu_bench --budgets 0 --att-bench 1 2>&1 | tee "$OUT/attn-bench.log" | grep attention | tee -a "$summary"
fi
if has sanitize; then
    for tool in memcheck racecheck; do
        note "compute-sanitizer $tool ($(elapsed)s)"
        # racecheck also reports hazards inside cuBLAS's own split-K kernels (nvjet_*): the
        # summary lists which kernels reported; ours must not be among them. (Excluding nvjet
        # with --kernel-name-exclude crashed the sanitizer here, 2026-11-29.)
        timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_kernels quick \
            >"$OUT/sanitize-$tool.log" 2>&1
        echo "exit $?" | tee -a "$OUT/sanitize-$tool.log" | tee -a "$summary"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|PASSED" "$OUT/sanitize-$tool.log" | tail -3 | tee -a "$summary"
        grep -oE "(Read|Write) access at [A-Za-z0-9_]+" "$OUT/sanitize-$tool.log" | sort | uniq -c | tee -a "$summary"
    done
    for tool in ${GOLDEN_TOOLS:-memcheck}; do
        note "compute-sanitizer $tool golden (whole backend) ($(elapsed)s)"
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_golden \
            >"$OUT/sanitize-golden-$tool.log" 2>&1
        echo "exit $?" | tee -a "$summary"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|PASSED" "$OUT/sanitize-golden-$tool.log" | tail -3 | tee -a "$summary"
        grep -oE "(Read|Write) access at [A-Za-z0-9_]+" "$OUT/sanitize-golden-$tool.log" | sort | uniq -c | tee -a "$summary"
    done
fi
if has classify; then
    note "classify cuda vs cpu ($(elapsed)s)"
    M=deploy/models/clinc150-bert-mini
    F=tests/fixtures/golden_clinc150_test.jsonl
    $B/reclass classify --model $M --jsonl --backend cpu <$F >/tmp/cls_cpu.jsonl 2>"$OUT/cls_cpu.err"
    echo "cpu exit $?" | tee -a "$summary"
    for p in fp16 bf16; do
        $B/reclass classify --model $M --jsonl --backend cuda --precision $p <$F >/tmp/cls_$p.jsonl 2>"$OUT/cls_$p.err"
        echo "cuda $p exit $?" | tee -a "$summary"
        python3 - "$p" <<'PY' | tee -a "$summary"
import json, sys
p = sys.argv[1]
a = [json.loads(l).get("label") for l in open("/tmp/cls_cpu.jsonl")]
b = [json.loads(l).get("label") for l in open(f"/tmp/cls_{p}.jsonl")]
g = [json.loads(l)["pred"] for l in open("tests/fixtures/golden_clinc150_test.jsonl")]
n = min(len(a), len(b))
same = sum(x == y and x is not None for x, y in zip(a, b))
gold = sum(x == y for x, y in zip(b, g))
print(f"classify {p}: cuda vs cpu labels {same}/{n} = {100*same/max(n,1):.3f}%; cuda vs golden pred {gold}/{len(g)}; cpu lines {len(a)}, cuda lines {len(b)}")
PY
    done
fi
if has bench; then
    note "gpu_bench ($(elapsed)s)"
    clocks_start gpu_bench
    $B/tests/gpu_bench --precision fp16 --budgets ${BENCH_BUDGETS:-16384,32768,65536} --repeat 3 --att-bench 1 \
        --workload-out /tmp/tickets_mix.jsonl 2>&1 | tee "$OUT/bench-fp16.log" | grep -v '^{' | tee -a "$summary"
    [ -n "${BENCH_BF16-1}" ] && $B/tests/gpu_bench --precision bf16 --budgets 16384,32768 --repeat 3 \
        2>&1 | tee "$OUT/bench-bf16.log" | grep -v -E '^\{|workload' | tee -a "$summary"
    clocks_stop gpu_bench
    grep -h '^{' "$OUT"/bench-*.log >"$OUT/bench.jsonl"
fi
if has gemm; then
    note "test_gpu_kernels ($(elapsed)s)"
    timeout 300 $B/tests/test_gpu_kernels >"$OUT/test_gpu_kernels.log" 2>&1
    echo "exit $?" >>"$OUT/test_gpu_kernels.log"
    grep -E "FAIL|PASSED|FAILED|exit|linear" "$OUT/test_gpu_kernels.log" | tail -40 | tee -a "$summary"
    note "gemm bench ($(elapsed)s)"
    for p in fp16 ${GEMM_BF16:+bf16}; do
        timeout 300 $B/tests/gpu_bench --precision $p --budgets 0 --gemm-bench 1 2>&1 |
            tee "$OUT/gemm-bench-$p.log" | grep -E "gemm|Error|error" | tee -a "$summary"
    done
fi
# One 65536 pass per precision and per idle time after each batch, sampled: clocks = fp16 and
# bf16 back to back (is the pass power-limited?); pace = fp16 back to back and with the GPU
# idle PACE_US after each batch (what does the cap cost?).
if has clocks || has pace; then
    precs="fp16 bf16" paces=0
    has pace && precs=fp16 paces="0 ${PACE_US:-10000}"
    for p in $precs; do
        for us in $paces; do
            note "clocks: gpu_bench $p 65536, ${us} us idle after each batch ($(elapsed)s)"
            clocks_start "$p-pace-$us"
            $B/tests/gpu_bench --precision $p --budgets 65536 --repeat 3 --pace-us $us 2>&1 |
                tee "$OUT/clocks-$p-pace-$us.log" | grep -v -E '^\{|workload|cuBLAS' | tee -a "$summary"
            clocks_stop "$p-pace-$us"
        done
    done
fi
if has energy; then
    for p in fp16 bf16; do
        note "energy probe $p ($(elapsed)s)"
        $B/tests/gpu_bench --precision $p --budgets 65536 --repeat 3 --energy ${ENERGY_S:-1} 2>&1 |
            tee "$OUT/energy-$p.log" | grep -v -E '^\{|workload|cuBLAS' | tee -a "$summary"
    done
fi
if has variants; then # at 16384, fp16: the default, then one knob changed per run (VARIANTS)
    for v in DEFAULT ${VARIANTS:-}; do
        note "variant $v ($(elapsed)s)"
        env ${v/DEFAULT/RECLASS_DEFAULT=1} $B/tests/gpu_bench --precision fp16 --budgets ${VARIANT_BUDGET:-16384} --repeat 3 2>&1 |
            tee "$OUT/bench-variant-$v.log" | grep -v -E '^\{|cuBLAS|workload' | tee -a "$summary"
    done
fi
if has rbench; then
    note "reclass bench ($(elapsed)s)"
    for tb in 16384 32768 65536; do
        $B/reclass bench --geometry bert-base --labels 140 --backend cuda --workload tickets-mix \
            --token-budget $tb --precision fp16 --repeat 3 2>&1 | tail -6 | tee -a "$OUT/rbench.log" | tee -a "$summary"
    done
    # what bench reads through the backend table (get_props, gemm_ceiling, energy_start/stop)
    grep -q '"precision": "fp16"' "$OUT/rbench.log" || note "RBENCH FAIL: precision not fp16"
    grep -q '"gemm_ceiling_tflops": [0-9]' "$OUT/rbench.log" || note "RBENCH FAIL: no GEMM ceiling"
    grep -q '"joules_per_pass": [0-9]' "$OUT/rbench.log" || note "RBENCH: no energy (NVML missing?)"
    grep -q '"peak_device_bytes": [0-9]' "$OUT/rbench.log" || note "RBENCH FAIL: no device memory"
fi
if has families; then # per-layer speed of each family against BERT's, and its PyTorch ratio
    for tb in 16384 65536; do
        for g in bert-base roberta-base distilbert-base; do
            note "reclass bench $g $tb ($(elapsed)s)"
            $B/reclass bench --geometry $g --labels 140 --backend cuda --workload tickets-mix \
                --token-budget $tb --precision fp16 --repeat 3 2>&1 | tail -1 |
                tee -a "$OUT/families.log" | tee -a "$summary"
        done
    done
    [ -f /tmp/tickets_mix.jsonl ] || $B/tests/gpu_bench --budgets 16384 --repeat 1 --workload-out /tmp/tickets_mix.jsonl >/dev/null
    for g in bert-base roberta-base distilbert-base; do
        note "torch compile $g ($(elapsed)s)"
        PYTHONUNBUFFERED=1 timeout ${TORCH_COMPILE_TIMEOUT:-300} python3 tests/bench/torch_gpu_peer.py \
            /tmp/tickets_mix.jsonl --geometry $g --variants compile --budgets 16384,65536 --repeat 3 2>&1 |
            tee -a "$OUT/families-torch.log" | grep -E '^\{|skip|Error' | tee -a "$summary"
    done
fi
if has newpeers; then
    [ -f /tmp/tickets_mix.jsonl ] || $B/tests/gpu_bench --budgets 16384 --repeat 1 --workload-out /tmp/tickets_mix.jsonl >/dev/null
    for g in modernbert-base:eager,compile,unpadded deberta-v3-base:eager,compile; do
        note "torch ${g%%:*} ($(elapsed)s)"
        PYTHONUNBUFFERED=1 timeout ${TORCH_COMPILE_TIMEOUT:-300} python3 tests/bench/torch_gpu_peer.py \
            /tmp/tickets_mix.jsonl --geometry "${g%%:*}" --variants "${g#*:}" --budgets 16384,65536 --repeat 3 2>&1 |
            tee -a "$OUT/newpeers-torch.log" | grep -E '^\{|skip|Error' | tee -a "$summary"
    done
    note "golden gate ($(elapsed)s)"
    $B/tests/test_gpu_golden 2>&1 | tee "$OUT/newpeers-golden.log" | grep -E 'FAIL|PASSED|FAILED' | tee -a "$summary"
fi
# The graph, fp8 and modern stages cut each step's timeout to what is left of budget_s (the
# modern stage's MODERN_BUDGET_S), GRAPH_BUDGET_S or FP8_BUDGET_S (570) seconds since the start, so a stage ends inside one 10-minute device call;
# a step with under 10 s left is skipped.
cap() {
    local left=$((${budget_s:-${GRAPH_BUDGET_S:-${FP8_BUDGET_S:-570}}} - $(elapsed)))
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
step() { # step SECONDS LOG CMD...: runs CMD under the capped timeout, its exit in LOG
    local t log=$2
    t=$(cap "$1")
    shift 2
    if [ "$t" -lt 10 ]; then
        echo "skipped: out of time" | tee -a "$summary"
        return
    fi
    timeout "$t" "$@" >"$log" 2>&1
    echo "exit $? (limit ${t}s)" | tee -a "$log" | tee -a "$summary"
}
if has graph; then
    parts=",${GRAPH_PARTS:-ops,kernels,golden,bench,memory},"
    part() { [[ $parts == *",$1,"* ]]; }
    if part ops; then
        note "graph: test_graph_ops, op x precision x backend ($(elapsed)s)"
        step 60 "$OUT/graph-ops.log" $B/tests/test_graph_ops
        grep -E " cuda +|rows run|FAIL" "$OUT/graph-ops.log" | tail -60 | tee -a "$summary"
    fi
    if part kernels; then
        note "graph: test_gpu_kernels ($(elapsed)s)"
        step 150 "$OUT/graph-kernels.log" $B/tests/test_gpu_kernels
        grep -E "^FAIL|PASSED|FAILED|rope|window|c2p|geglu|mean pool|rel scores" "$OUT/graph-kernels.log" |
            tail -40 | tee -a "$summary"
    fi
    if part golden; then # all 7 families, fp16 and bf16, through the backend as the worker gets it
        note "graph: test_gpu_golden ($(elapsed)s)"
        step 120 "$OUT/graph-golden.log" $B/tests/test_gpu_golden
        grep -E "^(ok|FAIL)|PASSED|FAILED|gpu_golden" "$OUT/graph-golden.log" | tail -40 | tee -a "$summary"
    fi
    if part bench; then
        # bert-base fp16 / bf16 / fp8 on tickets-mix at 16384, this build beside the baseline
        # (.devlibs/base/reclass: another commit's build, which `pack` carries when it is
        # there), interleaved per precision so clocks and heat hit
        # both alike; GRAPH_BENCH_ROUNDS (1) rounds, the second in the other order.
        bins=("$B/reclass")
        [ -x .devlibs/base/reclass ] && bins+=(.devlibs/base/reclass) ||
            note "graph: no .devlibs/base/reclass: no baseline rows"
        for round in $(seq 1 "${GRAPH_BENCH_ROUNDS:-1}"); do
            order=("${bins[@]}")
            [ $((round % 2)) -eq 0 ] && [ ${#bins[@]} -eq 2 ] && order=("${bins[1]}" "${bins[0]}")
            for p in fp16 bf16 fp8; do
                for bin in "${order[@]}"; do
                    who=$([ "$bin" = "$B/reclass" ] && echo graph || echo base)
                    note "graph: bench bert-base $p $who round $round ($(elapsed)s)"
                    step 45 "$OUT/graph-bench-$p-$who-$round.log" "$bin" bench --geometry bert-base \
                        --labels 140 --backend cuda --workload tickets-mix --token-budget 16384 \
                        --precision "$p" --repeat 3
                    # the result line, above step's "exit" line
                    echo "$who $p round $round: $(tail -2 "$OUT/graph-bench-$p-$who-$round.log" 2>/dev/null | head -1)" |
                        tee -a "$OUT/graph-bench.log" | tee -a "$summary"
                done
            done
        done
    fi
    if part memory; then # every token count 1..2048, then GRAPH_MEM_BATCHES random batches
        for g in bert-base modernbert-base deberta-v3-base; do
            note "graph: test_gpu_memory ${GRAPH_MEM_BATCHES:-100000} $g ($(elapsed)s)"
            step 200 "$OUT/graph-memory-$g.log" $B/tests/test_gpu_memory ${GRAPH_MEM_BATCHES:-100000} $g
            grep -E "FAIL|PASSED|weights|batches|sweep" "$OUT/graph-memory-$g.log" | tail -6 | tee -a "$summary"
        done
    fi
fi
if has modern; then
    . tests/bench/device_modern.sh
fi
if has torch; then
    [ -f /tmp/tickets_mix.jsonl ] || $B/tests/gpu_bench --budgets 16384 --repeat 1 --workload-out /tmp/tickets_mix.jsonl >/dev/null
    note "torch eager ($(elapsed)s)"
    clocks_start torch-eager
    PYTHONUNBUFFERED=1 timeout 240 python3 tests/bench/torch_gpu_peer.py /tmp/tickets_mix.jsonl \
        --variants eager --budgets ${TORCH_BUDGETS:-16384,32768,65536} --repeat 3 2>&1 | tee "$OUT/torch-eager.log" | grep -E '^\{|torch|Error' | tee -a "$summary"
    clocks_stop torch-eager
    note "torch compile ($(elapsed)s)"
    clocks_start torch-compile
    PYTHONUNBUFFERED=1 timeout ${TORCH_COMPILE_TIMEOUT:-300} python3 tests/bench/torch_gpu_peer.py /tmp/tickets_mix.jsonl \
        --variants compile --budgets ${TORCH_COMPILE_BUDGETS:-16384,32768,65536} --repeat 3 2>&1 | tee "$OUT/torch-compile.log" | grep -E '^\{|skip|Error' | tee -a "$summary"
    clocks_stop torch-compile
fi
if has fp8; then
    . tests/bench/device_fp8.sh
fi
if has bound; then
    note "bound ($(elapsed)s)"
    python3 tests/bench/bound.py "$OUT/bench.jsonl" "$OUT"/torch-*.log 2>&1 | tee "$OUT/bound.log" | tee -a "$summary"
fi
. tests/bench/device_jobs.sh
if has cpubf16; then # the CPU backend's bf16 kernels and peers on this host's CPU
    J=$RESULT_OUT/cpubf16.jsonl
    CFPB=.devlibs/cfpb/complaints_sample.csv
    note "cpubf16: the CPU ($(elapsed)s)"
    lscpu >"$OUT/lscpu.txt" 2>&1
    grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|L1d|L2|L3)" "$OUT/lscpu.txt" | tee -a "$summary"
    echo "bf16 flags: $(grep -m1 -o -w -E 'amx_[a-z0-9]+|avx512_bf16|avx512f|avx512_vnni|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')" | tee -a "$summary"
    python3 -c 'import json, sys; print(json.dumps({"bench": "cpubf16_lscpu", "lscpu": open(sys.argv[1]).read()}))' "$OUT/lscpu.txt" >>"$J"
    $B/reclass plan-memory --geometry bert-base --token-budget 4096 | grep "cpu backend" | tee -a "$summary"
    note "cpubf16: kernel parity, test_cpu_bf16 ($(elapsed)s)"
    timeout 60 $B/tests/test_cpu_bf16 >"$OUT/cpubf16-kernels.log" 2>&1
    echo "exit $?" | tee -a "$OUT/cpubf16-kernels.log" | tee -a "$summary"
    grep -E "kernel|invariance|PASSED|FAILED|FAIL" "$OUT/cpubf16-kernels.log" | tee -a "$summary"
    note "cpubf16: GEMM microbench, one thread ($(elapsed)s)"
    OMP_NUM_THREADS=1 timeout 60 $B/tests/cpu_bf16_bench 512 0.3 2>"$OUT/cpubf16-gemm.err" | tee "$OUT/cpubf16-gemm.log" >>"$J"
    cat "$OUT/cpubf16-gemm.err" | tee -a "$summary"
    python3 - "$OUT/cpubf16-gemm.log" <<'PY' | tee -a "$summary"
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if "gflops" in o:
        print(f"  {o['shape']:14s} m {o['m']}: {o['engine']:48s} {o['gflops']:8.1f} GFLOP/s")
PY
    note "cpubf16: agreement with Hugging Face fp32 ($(elapsed)s)"
    for p in bf16 fp32; do
        timeout 60 python3 tests/bf16_agreement.py $B/reclass --precision $p --threads "$(nproc)" \
            --cfpb "$CFPB" --json-out "$J" 2>&1 | grep -E "^(ok|FAIL)|rror" | tee -a "$summary"
    done
    note "cpubf16: ${CPUBF16_ROUNDS:-5} interleaved rounds against PyTorch bf16 ($(elapsed)s)"
    PYTHONUNBUFFERED=1 timeout ${CPUBF16_PEERS_TIMEOUT:-360} python3 tests/bench/cpu_bf16_peers.py \
        --reclass $B/reclass --threads "$(nproc)" --rounds "${CPUBF16_ROUNDS:-5}" --cfpb "$CFPB" \
        --engines "${CPUBF16_ENGINES:-reclass-fp32,reclass-bf16,torch-bf16,compile-bf16}" \
        --compile-timeout 100 --json-out "$J" >"$OUT/cpubf16-peers.log" 2>&1
    echo "peers exit $?" | tee -a "$summary"
    grep -v -E '^\{"bench": "cpu_bf16_peers", "round"' "$OUT/cpubf16-peers.log" | tail -24 | tee -a "$summary"
fi
note "done in $(elapsed)s"
cp "$summary" "$RESULT_OUT/summary.txt"
[ -f "$LOGS/bench.jsonl" ] && cp "$LOGS/bench.jsonl" "$RESULT_OUT/"
tar -czf "$RESULT_OUT/logs.tar.gz" -C /tmp devlogs
