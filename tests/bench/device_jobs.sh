# The whole-job stages of tests/bench/device_run.sh (sourced by it: $B, $OUT, $RESULT_OUT,
# $summary, note, elapsed, has): e2e, job, lanes and host, each on the carried PostgreSQL
# (.devlibs/pg.tar.xz, `tests/bench/device_run.sh pack-pg` here).
#       e2e      deploy/demo.sh with RECLASS_BACKEND=cuda: the whole job (dev broker, worker,
#                PostgreSQL) on the GPU; needs .devlibs/pg.tar.xz (pack-pg here)
#       job      tests/bench/job_bench.sh on the 1M real tickets (.devlibs/e2e/real_texts.jsonl.xz)
#                and .devlibs/pg.tar.xz: the 1-layer hidden-64 model at --threads 2, 4, 8, 16;
#                bert-base fp16 and distilbert-base, each next to `reclass bench` on 200,000
#                of the same tickets; 4 workers of 4 threads on the tiny model, then 4 with one
#                SIGKILLed mid-job (JOB_RUNS: a comma list of scaling, bert, distil, workers,
#                kill, sinks: 16 threads with 8 result writers, modern: a modernbert-base
#                fp16 job and fp8: a bert-base fp8 job, each beside `reclass bench`; devices:
#                the bert-base job on GPU 0, then with --devices all; default
#                scaling, bert, distil, workers, kill).
#                The ceiling alone, against a baseline build (another checkout's
#                build-sm90/reclass copied to .devlibs/base/reclass before `pack`),
#                interleaved: JOB_RUNS=scaling tests/bench/device_run.sh run job
#       lanes    tests/bench/lanes_bench.sh (urgent tickets past a 300,000-ticket bulk
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
#       encoders tests/integration/run_encoders.sh on the CUDA backend: two encoders
#                sharing GPU 0 in one worker, 100,000 tickets, SIGKILL mid-job and a restart,
#                exact rows, each encoder's arena flat; ENCODERS_BIN (default $B/reclass; kafka_tool
#                is $B's) picks the build, e.g. .devlibs/base/reclass. Needs .devlibs/pg.tar.xz, the demo
#                model and tests/fixtures/golden_clinc150_test.jsonl (fix-golden carries both)
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
        # the bert-base job on GPU 0 alone, then on every GPU of the host (--devices
        # all: an encoder per GPU fed from the one accumulator), back to back
        if [[ $runs == *,devices,* ]]; then
            job_bench "$log" "bert-base fp16, 1 worker, --devices 0" /tmp/model-bert-base 1 \
                --precision fp16 --devices 0
            job_bench "$log" "bert-base fp16, 1 worker, --devices all" /tmp/model-bert-base 1 \
                --precision fp16 --devices all
        fi
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
if has encoders; then
    note "encoders: tests/integration/run_encoders.sh cuda ($(elapsed)s)"
    if pg_install; then
        (export LD_LIBRARY_PATH=/opt/reclass-pglib:$LD_LIBRARY_PATH PATH=/usr/lib/postgresql/15/bin:$PATH
         export RECLASS_KAFKA_TOOL=${RECLASS_KAFKA_TOOL:-$PWD/$B/tests/kafka_tool}
         timeout "${ENCODERS_TIMEOUT:-300}" bash tests/integration/run_encoders.sh "${ENCODERS_BIN:-$B/reclass}" cuda) \
            >"$OUT/encoders.log" 2>&1
        echo "run_encoders cuda exit $?" | tee -a "$summary"
        grep -E '^(SIGKILL|restart|gpu_memory|tickets whose|PASS|FAIL|SKIP)' "$OUT/encoders.log" | tee -a "$summary"
    else
        echo "no .devlibs/pg.tar.xz (tests/bench/device_run.sh pack-pg)" | tee -a "$summary"
    fi
fi
