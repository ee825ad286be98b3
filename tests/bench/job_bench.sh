#!/usr/bin/env bash
# One whole job at the pipeline's pace: a throwaway PostgreSQL and dev broker (as deploy/demo.sh
# starts them), a JSONL of tickets submitted as one job, K `reclass run` workers on it until it
# is done. Prints the job's tickets/s, each worker's, the per-stage table (wall and CPU seconds
# summed over the workers, from their stats JSON), host RSS of each worker over time, and
# checks the job is exact (rows = done = total = tickets, completed_at set) and that every
# worker exited 0 (a SIGKILLed one excepted). The CPU the PostgreSQL server, the broker and the
# whole host spent while the workers ran tells which of them a job waited on.
#   tests/bench/job_bench.sh INPUT.jsonl MODEL_DIR [WORKERS] [-- reclass run flags...]
# Environment: RECLASS_BUILD_DIR (default build), RECLASS_BACKEND (cpu), JOB_PARTITIONS
# (default 4 per worker, at least 4), JOB_RSS_EVERY (seconds between samples, 0.5),
# JOB_KILL_AFTER=S (SIGKILL worker 1 S seconds in and start a replacement: the job must still be
# exact), KEEP=1 (keep the logs; their folder is printed). Needs psql and the PostgreSQL server
# binaries.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || {
    sed -n '2,10p' "$0" >&2
    exit 2
}
input=$1 model=$2
shift 2
workers=1
if [ $# -gt 0 ] && [ "$1" != -- ]; then
    workers=$1
    shift
fi
[ "${1:-}" = -- ] && shift
build=${RECLASS_BUILD_DIR:-$root/build}
reclass=$build/reclass
backend=${RECLASS_BACKEND:-cpu}
parts=${JOB_PARTITIONS:-$((workers * 4 > 4 ? workers * 4 : 4))}
every=${JOB_RSS_EVERY:-0.5}

tmp=$(mktemp -d /tmp/reclass-job.XXXXXX)
# shellcheck source=tests/lib/services.sh
source "$root/tests/lib/services.sh"
cleanup() {
    local rc=$?
    set +e
    svc_stop "$tmp"
    [ "$rc" = 0 ] || svc_tails "$tmp" 20
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

svc_start_pg "$reclass" "$tmp" || { echo "job_bench: PostgreSQL or the migrations failed" >&2; exit 1; }
svc_start_broker "$reclass" "$tmp" "$parts" tickets || { echo "job_bench: no broker" >&2; exit 1; }
broker_pid=${svc_pids[-1]}
n=$(wc -l <"$input")
"$reclass" submit --brokers "$SVC_BROKERS" --topic tickets --job-id bench --tenant bench \
    --no-progress "$input" 2>"$tmp/submit.log"

pids=()
start_worker() { # start_worker NAME IDLE_EXIT_S
    "$reclass" run --brokers "$SVC_BROKERS" --topic tickets --group bench --db "$SVC_DB" \
        --model "$model" --backend "$backend" --idle-exit "$2" --stats-json "$tmp/stats-$1.json" \
        "${flags[@]}" >"$tmp/run-$1.out" 2>"$tmp/run-$1.log" &
    pids+=($!)
    svc_pids+=($!)
}
flags=("$@")
# CPU clock ticks so far: of the PostgreSQL server (the postmaster, the children it reaped and
# those still running), of the broker, and of the whole host (busy, then all)
pg_ticks() {
    local pm c t
    pm=$(head -n1 "$tmp/pg/data/postmaster.pid" 2>/dev/null) || { echo 0; return; }
    t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat" 2>/dev/null || echo 0)
    for c in $(pgrep -P "$pm"); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
proc_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2>/dev/null || echo 0; }
host_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8; exit}' /proc/stat; }
pg0=$(pg_ticks) br0=$(proc_ticks "$broker_pid") host0=$(host_ticks)
for w in $(seq "$workers"); do start_worker "$w" 3; done
kill_after=${JOB_KILL_AFTER:-}
# host RSS of each worker over time: seconds since start, then KiB per worker
t0=$(date +%s.%N)
while :; do
    alive=0 line="" i=0
    for p in "${pids[@]}"; do
        i=$((i + 1))
        rss=$(ps -o rss= -p "$p" 2>/dev/null | tr -d ' ' || true)
        [ -n "$rss" ] && alive=1
        line="$line ${rss:-0}"
        # user + system clock ticks so far (the last sample falls in the idle-exit wait)
        awk '{print $14 + $15}' "/proc/$p/stat" >"$tmp/cpu-$i.tmp" 2>/dev/null &&
            mv "$tmp/cpu-$i.tmp" "$tmp/cpu-$i.txt"
    done
    [ "$alive" = 1 ] || break
    if [ -n "$kill_after" ] && awk -v a="$(date +%s.%N)" -v b="$t0" -v k="$kill_after" \
        'BEGIN { exit !(a - b >= k) }'; then
        kill -KILL "${pids[0]}" 2>/dev/null || true
        echo "job_bench: worker 1 SIGKILLed $kill_after s in; worker r replaces it" >&2
        kill_after=""
        # it outwaits the dead member's session (librdkafka's session.timeout.ms, 45 s by
        # default), after which the group hands its partitions on: the others may all have
        # left by then
        start_worker r 60
    fi
    echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')$line" >>"$tmp/rss.txt"
    sleep "$every"
done
# every worker exits 0 (README, "Exit codes"), whatever the group does as the others leave;
# the SIGKILLed one excepted
killed=${JOB_KILL_AFTER:+${pids[0]}}
bad_exit=0
for p in "${pids[@]}"; do
    rc=0
    wait "$p" || rc=$?
    [ "$p" = "$killed" ] && continue
    echo "job_bench: worker pid $p exited $rc" >&2
    [ "$rc" = 0 ] || bad_exit=1
done

pg1=$(pg_ticks) br1=$(proc_ticks "$broker_pid") host1=$(host_ticks)
read -r hb0 ha0 <<<"$host0"
read -r hb1 ha1 <<<"$host1"
# (server ticks, broker ticks, host busy / all ticks) over the workers' lifetime, idle exits included
side="$((pg1 - pg0)) $((br1 - br0)) $((hb1 - hb0)) $((ha1 - ha0))"

q() { psql "$SVC_DB" -qtAX -v ON_ERROR_STOP=1 -c "$1"; }
read -r rows done_ total complete < <(q "SELECT (SELECT count(*) FROM ticket_results WHERE job_id = 'bench'),
    done, total, completed_at IS NOT NULL FROM jobs WHERE job_id = 'bench'" | tr '|' ' ')
# each encoder's arena over the job, per device (flat: one size), from its gpu_memory samples
q "SELECT coalesce(device::text, 'host'), encoder, count(*), count(DISTINCT arena_bytes),
    max(arena_bytes) FROM gpu_memory GROUP BY 1, 2 ORDER BY 1, 2" |
    while IFS='|' read -r dev enc nsamp sizes arena; do
        echo "gpu_memory: device $dev, encoder $enc: $nsamp samples, $sizes arena size(s), $arena B"
    done
python3 - "$tmp" "$workers" "$n" "$rows" "$done_" "$total" "$complete" "$(getconf CLK_TCK)" "$side" "$(nproc)" <<'PY'
import glob, json, os, sys
tmp, workers, n, rows, done, total, complete, hz, side, ncpu = sys.argv[1:11]
stats = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(tmp, "stats-*.json")))]
if not stats:
    sys.exit("job_bench: no worker wrote its statistics")
span = max(s["seconds"] for s in stats)
print(f"job: {n} tickets, {workers} worker(s), backend {stats[0]['backend']}, "
      f"threads {stats[0].get('threads')}: {int(n) / span:,.0f} tickets/s "
      f"({span:.2f} s, the longest worker's first record to last commit)")
for i, s in enumerate(stats, 1):
    print(f"  worker {i}: {s['tickets']} tickets, {s['tickets_per_s']:,.0f} tickets/s, "
          f"encoder {s['encoder_seconds']:.2f} s, device {s.get('device_seconds', -1):.2f} s, "
          f"{s['batches']} batches, {s['pauses']} pauses, {s['holds']} holds")
cpu = sum(int(open(f).read()) for f in glob.glob(os.path.join(tmp, "cpu-*.txt"))) / int(hz)
print(f"worker CPU (user + system, all workers): {cpu:.2f} s, {1e6 * cpu / int(n):.2f} us per ticket")
pg, br, hbusy, hall = (int(x) for x in side.split())
print(f"server CPU while the workers ran: PostgreSQL {pg / int(hz):.2f} s, broker {br / int(hz):.2f} s; "
      f"host busy {100 * hbusy / max(hall, 1):.0f}% of {ncpu} cores")
print("stage        wall s    CPU s   (each summed over the threads that ran it, all workers)")
for st in stats[0].get("stages", {}):
    w = sum(s["stages"][st]["wall_s"] for s in stats)
    c = sum(s["stages"][st]["cpu_s"] for s in stats)
    print(f"  {st:<10} {w:8.2f} {c:8.2f}")
# the hand-offs between the threads: batches through each, their mean wait in it, and the waits
# of the side putting in for room (full) and of the side taking out for work (empty)
qs = stats[0].get("queues", {})
if qs:
    print("queue        batches  mean wait ms   full   full s   empty  empty s   (all workers)")
    for name in qs:
        g = lambda k: sum(s["queues"][name][k] for s in stats)
        print(f"  {name:<10} {g('batches'):9d} {1e3 * g('wait_s') / max(g('batches'), 1):12.2f} "
              f"{g('full'):6d} {g('full_s'):8.2f} {g('empty'):7d} {g('empty_s'):8.2f}")
    tx = sum(s.get("transactions", 0) for s in stats)
    print(f"  result transactions {tx}, {int(n) / max(tx, 1):,.0f} rows each")
samples = [l.split() for l in open(os.path.join(tmp, "rss.txt"))] if os.path.exists(
    os.path.join(tmp, "rss.txt")) else []
width = max((len(l) for l in samples), default=0)
samples = [l + ["0"] * (width - len(l)) for l in samples]  # a replacement worker came later
if samples:
    step = max(1, len(samples) // 10)
    print("host RSS (MiB per worker) over time:")
    for l in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        print(f"  {float(l[0]):6.1f} s  " + "  ".join(f"{int(k) / 1024:7.1f}" for k in l[1:]))
    peak = [max(int(l[i]) for l in samples) / 1024 for i in range(1, len(samples[0]))]
    print("  peak: " + "  ".join(f"{p:.1f}" for p in peak))
ok = rows == n and done == n and total == n and complete == "t"
print(f"exact: rows {rows}, done {done}, total {total}, complete {complete}: "
      + ("ok" if ok else "WRONG"))
sys.exit(0 if ok else 1)
PY
[ "$bad_exit" = 0 ] || { echo "job_bench: a worker exited non-zero (see above)" >&2; exit 1; }
