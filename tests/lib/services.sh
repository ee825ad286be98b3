# Throwaway services for deploy/demo.sh and the integration tests (sourced, not run): a
# PostgreSQL under DIR/pg (pg_tmp.sh, migrated) and the built-in dev Kafka broker. The caller
# calls svc_stop DIR from its EXIT trap.
# shellcheck shell=bash
svc_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
svc_pids=() # processes to stop; callers add their own (the worker) too

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

# svc_start_broker RECLASS DIR PARTITIONS TOPIC: the dev broker in the background (its output in
# DIR/broker.out and DIR/broker.log); sets SVC_BROKERS. Returns 1 when it prints no address
# within 30 s.
svc_start_broker() {
    "$1" dev-broker --partitions "$3" --topic "$4" >"$2/broker.out" 2>"$2/broker.log" &
    svc_pids+=($!)
    local _
    for _ in $(seq 300); do
        SVC_BROKERS=$(head -n1 "$2/broker.out" 2>/dev/null || true)
        [ -n "$SVC_BROKERS" ] && return 0
        sleep 0.1
    done
    return 1
}
