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
#       newpeers the PyTorch side of ModernBERT and DeBERTa-v3 (issue 26; the CUDA backend refuses
#                both until its kernels land): torch_gpu_peer.py --geometry modernbert-base
#                (sdpa eager, torch.compile, HF's unpadded flash-attention path where flash-attn
#                is installed) and deberta-v3-base (eager, compile), fp16, 16384 and 65536,
#                on the tickets-mix workload; then test_gpu_golden, whose gate (flips on thin
#                fp32 margins only) now covers the five families
#       graph    issue 32, the encoder graph on CUDA (every family and precision) in one call
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
#       fp8      FP8 (issue 32) in one call (FP8_BUDGET_S, 570 by default; steps capped as
#                the graph stage's): FP8_PARTS, a comma list, default kernels,ops,speed:
#                kernels  test_gpu_fp8: weight, activation and LayerNorm codes and scales bit
#                         for bit against the CPU reference (gpu/model/fp8.h), the FP8 GEMMs
#                         (tuned warm-up, cached) against the fp32 product of the same codes, a
#                         12-layer model against the CPU fp8 reference, the demo checkpoint's
#                         goldens at fp8 (CLINC150 >= 99.5%, long CFPB >= 99.0%); then
#                         `test_gpu_fp8 bench` (FP8 vs fp16 GEMMs at bert-base shapes)
#                ops      test_graph_ops (its cuda fp8 rows: every linear epilogue, norm then
#                         linear, the fused LayerNorm)
#                speed    reclass bench --geometry bert-base fp16 and fp8 (tickets-mix, 16384
#                         and 65536, FP8_ROUNDS (1) interleaved), then torch_gpu_peer.py compile
#                         bf16 on the same workload
#                plans    test_gpu_fp8 plans: bert-base per set of FP8 points beside fp16
#                agree    a BERT-base-geometry CLINC150 classifier trained here
#                         (fp8_agreement.py, FP8_EPOCHS 3; needs FP8_DATA, default .devdata,
#                         holding clinc150/ and cfpb_complaints/ of the shared data folder: here
#                         `mkdir -p .devdata && cp -r ../shared/data/clinc150
#                         ../shared/data/cfpb_complaints .devdata/`, in .git/info/exclude,
#                         carried); agreement with HF fp32 of reclass cuda fp16 / fp8 and the
#                         CPU fp8 reference on CLINC150 test and long CFPB narratives
#                sens     tests/bench/fp8_sensitivity (the C reference, the host's cores) on
#                         that classifier per plan of FP8_SENS_PLANS ("plan inner:ff1
#                         inner:ao+ff2"; plan syntax in the tool), against its HF fp32 goldens
#                recipes  fp8_recipes.py's simulation of FP8_RECIPES on that classifier
#                The kernels part reads the demo goldens: carry .devlibs/fix.tar.xz
#                (pack-fixtures) and start with `tar -xJf .devlibs/fix.tar.xz &&`.
#       e2e      deploy/demo.sh with RECLASS_BACKEND=cuda: the whole job (dev broker, worker,
#                PostgreSQL) on the GPU; needs .devlibs/pg.tar.xz (pack-pg here)
#       job      tests/bench/job_bench.sh on the 1M real tickets (.devlibs/e2e/real_texts.jsonl.xz)
#                and .devlibs/pg.tar.xz: the 1-layer hidden-64 model at --threads 2, 4, 8, 16;
#                bert-base fp16 and distilbert-base, each next to `reclass bench` on 200,000
#                of the same tickets; 4 workers of 4 threads on the tiny model, then 4 with one
#                SIGKILLed mid-job (JOB_RUNS: a comma list of scaling, bert, distil, workers,
#                kill, sinks: 16 threads with 8 result writers, modern: a modernbert-base
#                fp16 job and fp8: a bert-base fp8 job, each beside `reclass bench`; default
#                scaling, bert, distil, workers, kill).
#                The ceiling alone, against a baseline build (another checkout's
#                build-sm90/reclass copied to .devlibs/base/reclass before `pack`),
#                interleaved: JOB_RUNS=scaling tests/bench/device_run.sh run job
#       lanes    tests/bench/lanes_bench.sh (issue 35: urgent tickets past a 300,000-ticket bulk
#                backlog), CPU backend, the worker pinned to CPUs 0,1 and the dev broker and
#                PostgreSQL (.devlibs/pg.tar.xz) to the others; LANES_TIMEOUT (480) s at most.
#                Needs the demo model (deploy/models/clinc150-bert-mini) and
#                tests/fixtures/golden_clinc150_test.jsonl in the index (`git add -f` it after
#                taking tests/fixtures out), carry .devlibs (bundle.tar.xz, pg.tar.xz)
#       host     tests/bench/host_scale.sh run: the host side's scaling, CPU backend only (the
#                ceiling at 2, 4, 8, 16 threads, 1 worker against 4, the dev broker against
#                Tansu, a PostgreSQL run as a user would against the tests' one); needs
#                .devlibs/host.tar.xz (`tests/bench/host_scale.sh pack` here) and
#                .devlibs/pg.tar.xz (pack-pg), nothing else of the bundle; HOST_RUNS picks runs
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
        $B/tests/gpu_bench $B/tests/test_cpu_bf16 $B/tests/cpu_bf16_bench $B/tests/test_graph_ops $B/tests/fp8_sensitivity \
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
        if [ $rc = 139 ]; then # once seen: a crash before any output; retry with BLAS pinned
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
# The graph and fp8 stages cut each step's timeout to what is left of GRAPH_BUDGET_S or
# FP8_BUDGET_S (570) seconds since the start, so a stage ends inside one 10-minute device call;
# a step with under 10 s left is skipped.
cap() {
    local left=$((${GRAPH_BUDGET_S:-${FP8_BUDGET_S:-570}} - $(elapsed)))
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
    # FP8_PARTS picks parts; the default (kernels,ops,speed) is one call of about 7 minutes.
    fp8_parts=",${FP8_PARTS:-kernels,ops,speed},"
    fpart() { [[ $fp8_parts == *",$1,"* ]]; }
    D=/tmp/fp8run
    if fpart kernels; then
        note "fp8: test_gpu_fp8 ($(elapsed)s)"
        step 150 "$OUT/fp8-kernels.log" $B/tests/test_gpu_fp8
        grep -E "^(ok|FAIL)|fp8 (clinc|cfpb)|electra|PASSED|FAILED" "$OUT/fp8-kernels.log" | tee -a "$summary"
        step 60 "$OUT/fp8-gemm-bench.log" $B/tests/test_gpu_fp8 bench
        grep -E "TFLOP|FAIL" "$OUT/fp8-gemm-bench.log" | tee -a "$summary"
    fi
    if fpart ops; then
        note "fp8: test_graph_ops ($(elapsed)s)"
        step 60 "$OUT/fp8-ops.log" $B/tests/test_graph_ops
        grep -E "fp8|rows run|FAIL" "$OUT/fp8-ops.log" | grep -E " cuda |rows run|FAIL" | tail -30 | tee -a "$summary"
    fi
    if fpart plans; then
        note "fp8: test_gpu_fp8 plans ($(elapsed)s)"
        step 200 "$OUT/fp8-plans.log" $B/tests/test_gpu_fp8 plans
        grep -E "^plan|FAIL" "$OUT/fp8-plans.log" | tee -a "$summary"
    fi
    if fpart speed; then
        # reclass bench bert-base fp16 and fp8 interleaved (FP8_ROUNDS, 1; a second round runs in
        # the other order), then torch.compile bf16 on the same tickets-mix workload
        [ -f /tmp/tickets_mix.jsonl ] || $B/tests/gpu_bench --budgets 16384 --repeat 1 --workload-out /tmp/tickets_mix.jsonl >/dev/null
        for round in $(seq 1 "${FP8_ROUNDS:-1}"); do
            precs="fp16 fp8"
            [ $((round % 2)) -eq 0 ] && precs="fp8 fp16"
            for tb in 16384 65536; do
                for p in $precs; do
                    note "fp8: bench bert-base $p $tb round $round ($(elapsed)s)"
                    step 60 "$OUT/fp8-bench-$p-$tb-$round.log" $B/reclass bench --geometry bert-base \
                        --labels 140 --backend cuda --workload tickets-mix --token-budget $tb \
                        --precision $p --repeat 3
                    echo "reclass $p $tb round $round: $(tail -2 "$OUT/fp8-bench-$p-$tb-$round.log" | head -1)" |
                        tee -a "$OUT/fp8-speed.log" | tee -a "$summary"
                done
            done
        done
        grep -m1 "fp8 plan" "$OUT"/fp8-bench-fp8-*.log | tee -a "$summary"
        note "fp8: torch.compile bf16 ($(elapsed)s)"
        PYTHONUNBUFFERED=1 step ${TORCH_COMPILE_TIMEOUT:-300} "$OUT/fp8-torch.log" python3 tests/bench/torch_gpu_peer.py \
            /tmp/tickets_mix.jsonl --dtype bf16 --variants compile --budgets 16384,65536 --repeat 3
        grep -E '^\{|skip|Error' "$OUT/fp8-torch.log" | tee -a "$OUT/fp8-speed.log" | tee -a "$summary"
    fi
    if { fpart agree || fpart recipes || fpart sens; } && [ ! -f $D/model/config.json ]; then
        note "fp8: train BERT-base CLINC150 classifier ($(elapsed)s)"
        PYTHONUNBUFFERED=1 step 300 "$OUT/fp8-train.log" python3 tests/bench/fp8_agreement.py train $D \
            --data "${FP8_DATA:-.devdata}" --epochs ${FP8_EPOCHS:-3}
        grep -v -E 'Warning|warn' "$OUT/fp8-train.log" | tail -12 | tee -a "$summary"
    fi
    if fpart agree; then # the C reference on this classifier runs on the host's cores
        outs=()
        for s in clinc_test cfpb_long; do
            for p in fp16 fp8; do
                $B/reclass classify --model $D/model --jsonl --backend cuda --precision $p --token-budget 16384 \
                    <$D/$s.jsonl >$D/cuda-$p-$s.out 2>>"$OUT/fp8-classify.err"
                outs+=("reclass cuda $p=$D/cuda-$p-$s.out")
            done
            step 240 "$OUT/fp8-cpu-$s.log" sh -c "$B/reclass classify --model $D/model --jsonl --backend cpu \
                --precision fp8 <$D/$s.jsonl >$D/cpu-fp8-$s.out"
            outs+=("reclass cpu fp8 (reference)=$D/cpu-fp8-$s.out")
        done
        note "fp8 agreement with HF fp32 ($(elapsed)s)"
        python3 tests/bench/fp8_agreement.py compare $D "${outs[@]}" 2>&1 | tee "$OUT/fp8-agreement.log" | tee -a "$summary"
        grep -m1 "fp8 plan" "$OUT/fp8-classify.err" | tee -a "$summary"
    fi
    if fpart sens; then # the C reference per plan on this classifier, on the host's cores
        for plan in ${FP8_SENS_PLANS:-plan inner:ff1 inner:ao+ff2}; do
            note "fp8: C reference, plan $plan ($(elapsed)s)"
            step 200 "$OUT/fp8-sens-${plan//[:\/+]/_}.log" $B/tests/fp8_sensitivity --model $D/model \
                --fixtures $D --threads "$(nproc)" "$plan"
            grep -E "%|error" "$OUT/fp8-sens-${plan//[:\/+]/_}.log" | tee -a "$summary"
        done
    fi
    if fpart recipes; then
        note "fp8 recipes on this classifier, torch simulation ($(elapsed)s)"
        PYTHONUNBUFFERED=1 step 420 "$OUT/fp8-recipes.log" python3 tests/bench/fp8_recipes.py --model $D/model \
            --device cuda --data "${FP8_DATA:-.devdata}" --cfpb 600 --recipes ${FP8_RECIPES:-4,10,11,12,13,14}
        grep -v -E 'Warning|warn' "$OUT/fp8-recipes.log" | tee -a "$summary"
    fi
fi
if has bound; then
    note "bound ($(elapsed)s)"
    python3 tests/bench/bound.py "$OUT/bench.jsonl" "$OUT"/torch-*.log 2>&1 | tee "$OUT/bound.log" | tee -a "$summary"
fi
# One demo.sh job on the CUDA backend with the carried PostgreSQL: demo_job LOG [VAR=VALUE...]
# (later settings win); output appended to LOG; the job's run.log and stats.json are left in
# $DEMO_DIR (KEEP=1).
demo_job() {
    local log=$1
    shift
    rm -rf /tmp/reclass-demo.*
    (export LD_LIBRARY_PATH=/opt/reclass-pglib:$LD_LIBRARY_PATH PATH=/usr/lib/postgresql/15/bin:$PATH
     env RECLASS_DEMO_PREBUILT=1 RECLASS_BUILD_DIR=$PWD/$B RECLASS_BACKEND=cuda KEEP=1 "$@" \
         timeout "${DEMO_TIMEOUT:-300}" bash deploy/demo.sh) >>"$log" 2>&1
    local rc=$?
    DEMO_DIR=$(ls -d /tmp/reclass-demo.* 2>/dev/null | head -1)
    return $rc
}
# The carried PostgreSQL (pack-pg) installed where the packed paths point; 1 when not carried.
pg_install() {
    [ -f .devlibs/pg.tar.xz ] || return 1
    [ -d /opt/reclass-pglib ] && return 0
    rm -rf /tmp/pgx && mkdir -p /tmp/pgx && xz -dc .devlibs/pg.tar.xz | tar -C /tmp/pgx -xf -
    cp -a /tmp/pgx/fs/. / && mkdir -p /opt/reclass-pglib && cp -a /tmp/pgx/pglib/. /opt/reclass-pglib/
    id postgres >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin postgres
}
if has e2e; then
    note "e2e: demo job on the CUDA backend ($(elapsed)s)"
    if pg_install; then
        demo_job "$OUT/e2e.log"
        echo "demo exit $?" | tee -a "$summary"
        grep -v -E '^\s*$' "$OUT/e2e.log" | tail -22 | tee -a "$summary"
        [ -n "$DEMO_DIR" ] && cp "$DEMO_DIR"/run.log "$DEMO_DIR"/stats.json "$OUT/" 2>/dev/null
        # A production-sized encoder on real texts: a random bert-base checkpoint (transformers
        # here), the CLINC150 + BANKING77 + CFPB texts from tests/bench/e2e_texts.py (carried
        # as .devlibs/e2e/real_texts.jsonl.xz), the worker's default budget (16384 on cuda;
        # E2E_BUDGET sets another).
        if [ -f .devlibs/e2e/real_texts.jsonl.xz ] && xz -dc .devlibs/e2e/real_texts.jsonl.xz >/tmp/real_texts.jsonl &&
            python3 tests/bench/make_random_checkpoint.py /tmp/bert-base-random >"$OUT/e2e-bert-base.log" 2>&1; then
            # E2E_VARIANTS: words, each "base" (the defaults) or VAR=VALUE[,VAR=VALUE...]
            # settings for demo.sh and the worker
            budget=()
            [ -n "${E2E_BUDGET:-}" ] && budget=(RECLASS_TOKEN_BUDGET="$E2E_BUDGET")
            for v in ${E2E_VARIANTS:-base}; do
                echo "== variant $v" >>"$OUT/e2e-bert-base.log"
                vars=()
                [ "$v" = base ] || IFS=, read -r -a vars <<<"$v"
                DEMO_TIMEOUT=120 demo_job "$OUT/e2e-bert-base.log" RECLASS_DEMO_INPUT=/tmp/real_texts.jsonl \
                    RECLASS_DEMO_MODEL=/tmp/bert-base-random RECLASS_DEMO_PARTITIONS=8 \
                    "${budget[@]}" RECLASS_LOG_EVERY=20 "${vars[@]}"
                echo "bert-base job [$v] exit $?" | tee -a "$summary"
                grep -E '^throughput' "$OUT/e2e-bert-base.log" | tail -1 | tee -a "$summary"
                [ -n "$DEMO_DIR" ] && cp "$DEMO_DIR"/run.log "$OUT/run-bert-base-${v//[^A-Za-z0-9_.-]/_}.log" &&
                    cp "$DEMO_DIR"/stats.json "$OUT/stats-bert-base-${v//[^A-Za-z0-9_.-]/_}.json" &&
                    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("worker stats:", {k: d.get(k) for k in ("tickets", "batches", "pauses", "holds", "encoder_seconds", "wall_seconds", "tickets_per_s")})' \
                        "$DEMO_DIR"/stats.json | tee -a "$summary"
            done
        fi
    else
        echo "no .devlibs/pg.tar.xz (tests/bench/device_run.sh pack-pg)" | tee -a "$summary"
    fi
fi
# job_bench LOG NAME MODEL WORKERS [reclass run flags...]: one tests/bench/job_bench.sh run on
# the 1M tickets, CUDA backend, its summary (job line, stage table, RSS) into the summary
job_bench() {
    local log=$1 name=$2 model=$3 workers=$4
    shift 4
    echo "== $name" >>"$log"
    (export LD_LIBRARY_PATH=/opt/reclass-pglib:$LD_LIBRARY_PATH PATH=/usr/lib/postgresql/15/bin:$PATH
     RECLASS_BUILD_DIR=${JOB_BUILD:-$PWD/$B} RECLASS_BACKEND=cuda timeout "${JOB_TIMEOUT:-240}" \
         bash tests/bench/job_bench.sh "${JOB_INPUT:-/tmp/real_texts.jsonl}" "$model" "$workers" -- "$@") >>"$log" 2>&1
    echo "$name: exit $?" | tee -a "$summary"
    awk -v n="== $name" '$0 == n {on = 1; next} /^== / {on = 0} on && !/^(reclass run|%[0-9]|submitted)/' \
        "$log" | tee -a "$summary"
}
if has job; then
    note "job: the whole job at the pipeline's pace ($(elapsed)s)"
    runs=",${JOB_RUNS:-scaling,bert,distil,workers,kill},"
    if pg_install && [ -f .devlibs/e2e/real_texts.jsonl.xz ] &&
        xz -dc .devlibs/e2e/real_texts.jsonl.xz >/tmp/real_texts.jsonl; then
        head -n 200000 /tmp/real_texts.jsonl >/tmp/real_texts_200k.jsonl
        log=$OUT/job.log
        for g in tiny-h64 bert-base distilbert-base; do
            [ -d /tmp/model-$g ] || python3 tests/bench/make_random_checkpoint.py /tmp/model-$g \
                --geometry $g >>"$log" 2>&1
        done
        if [[ $runs == *,scaling,* ]]; then
            # the pipeline's ceiling; with a baseline binary in .devlibs/base/reclass (`pack`
            # takes it along), each thread count runs it first, then this build, back to back
            for t in 2 4 8 16; do
                [ -x .devlibs/base/reclass ] && JOB_BUILD=$PWD/.devlibs/base job_bench "$log" \
                    "baseline: tiny-h64, 1 worker, --threads $t" /tmp/model-tiny-h64 1 --threads $t
                job_bench "$log" "tiny-h64, 1 worker, --threads $t" /tmp/model-tiny-h64 1 --threads $t
            done
        fi
        # is the result writers' PostgreSQL side next? twice the default writers at 16 threads
        [[ $runs == *,sinks,* ]] && job_bench "$log" "tiny-h64, 1 worker, --threads 16, 8 writers" \
            /tmp/model-tiny-h64 1 --threads 16 --sink-connections 8
        for g in bert-base distilbert-base; do
            k=bert
            [ $g = distilbert-base ] && k=distil
            [[ $runs == *,$k,* ]] || continue
            job_bench "$log" "$g fp16, 1 worker" /tmp/model-$g 1 --precision fp16
            note "reclass bench $g fp16, 200,000 of the same tickets, budget 16384"
            $B/reclass bench --model /tmp/model-$g --backend cuda --precision fp16 \
                --workload /tmp/real_texts_200k.jsonl --token-budget 16384 --repeat 3 2>&1 |
                tail -1 | tee -a "$log" | tee -a "$summary"
        done
        # the graph's families and precisions through `run`: a ModernBERT-base job (fp16) and a
        # bert-base job in fp8 on 200,000 tickets, each next to `reclass bench` on the same ones
        for gp in modernbert-base:fp16:modern bert-base:fp8:fp8; do
            IFS=: read -r g p k <<<"$gp"
            [[ $runs == *,$k,* ]] || continue
            [ -d /tmp/model-$g ] || python3 tests/bench/make_random_checkpoint.py /tmp/model-$g \
                --geometry $g >>"$log" 2>&1
            JOB_INPUT=/tmp/real_texts_200k.jsonl job_bench "$log" "$g $p, 1 worker, 200,000 tickets" \
                /tmp/model-$g 1 --precision $p
            note "reclass bench $g $p, 200,000 of the same tickets, budget 16384"
            $B/reclass bench --model /tmp/model-$g --backend cuda --precision $p \
                --workload /tmp/real_texts_200k.jsonl --token-budget 16384 --repeat 3 2>&1 |
                tail -1 | tee -a "$log" | tee -a "$summary"
        done
        # four workers of 4 threads share the 16 cores (compare: 1 worker, --threads 4 and 16)
        [[ $runs == *,workers,* ]] && job_bench "$log" "tiny-h64, 4 workers of 4 threads" \
            /tmp/model-tiny-h64 4 --threads 4
        # a short session, so the group hands the killed worker's partitions on in seconds
        [[ $runs == *,kill,* ]] && JOB_KILL_AFTER=${JOB_KILL_AFTER:-3} job_bench "$log" \
            "tiny-h64, 4 workers of 4 threads, one SIGKILLed" /tmp/model-tiny-h64 4 --threads 4 \
            --kafka session.timeout.ms=6000
    else
        echo "job: needs .devlibs/pg.tar.xz and .devlibs/e2e/real_texts.jsonl.xz" | tee -a "$summary"
    fi
fi
if has lanes; then
    note "lanes: urgent tickets past a bulk backlog, the worker on CPUs 0,1 ($(elapsed)s)"
    if pg_install; then
        (export LD_LIBRARY_PATH=/opt/reclass-pglib:$LD_LIBRARY_PATH PATH=/usr/lib/postgresql/15/bin:$PATH
         IT_WORKER_CPUS=0,1 timeout "${LANES_TIMEOUT:-480}" taskset -c "2-$(($(nproc) - 1))" \
             bash tests/bench/lanes_bench.sh "$PWD/$B/reclass") >"$OUT/lanes.log" 2>&1
        echo "lanes exit $?" | tee -a "$summary"
        { grep -q '^urgent lane, idle' "$OUT/lanes.log" && sed -n '/^urgent lane, idle/,$p' "$OUT/lanes.log" ||
            tail -n 30 "$OUT/lanes.log"; } | tee -a "$summary"
    else
        echo "lanes: needs .devlibs/pg.tar.xz (pack-pg)" | tee -a "$summary"
    fi
fi
if has host; then # the host side's scaling on this host's cores, no GPU used
    note "host: tests/bench/host_scale.sh ($(elapsed)s)"
    if pg_install; then
        (export LD_LIBRARY_PATH=/opt/reclass-pglib:$LD_LIBRARY_PATH PATH=/usr/lib/postgresql/15/bin:$PATH
         OUT=$OUT bash tests/bench/host_scale.sh run) >"$OUT/host.log" 2>&1
        echo "host_scale exit $?" | tee -a "$summary"
        cat "$OUT/host_scale.md" "$OUT/host_scale_stages.txt" 2>/dev/null | tee -a "$summary"
        cp "$OUT/host_scale.md" "$RESULT_OUT/" 2>/dev/null
    else
        echo "no .devlibs/pg.tar.xz (tests/bench/device_run.sh pack-pg)" | tee -a "$summary"
    fi
fi
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
