# Shared by the pipeline's integration tests (sourced, not run): a throwaway PostgreSQL, a
# Kafka broker, CLINC150 input and checks. Everything started here is stopped by the EXIT trap.
# The broker is the dev broker, or Tansu with IT_BROKER=tansu (the test then exits 77, skipped,
# when Tansu cannot be had). IT_MODEL=DIR runs the job on another checkpoint than the demo
# model (e.g. a family's fixture in tests/fixtures/models/).
#   source lib.sh RECLASS_BIN
# shellcheck shell=bash
set -euo pipefail
it_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
it_root=$(cd "$it_here/../.." && pwd)
RECLASS=${1:?path of the reclass executable}
MODEL=${IT_MODEL:-$it_root/deploy/models/clinc150-bert-mini}
GOLDEN=$it_root/tests/fixtures/golden_clinc150_test.jsonl
# the source tree's schemas and migrations, wherever the build directory is (the binary looks
# next to itself otherwise)
export RECLASS_SCHEMAS=${RECLASS_SCHEMAS:-$it_root/consumers/schemas}
export RECLASS_MIGRATIONS=${RECLASS_MIGRATIONS:-$it_root/migrations}
TMP=$(mktemp -d /tmp/reclass-it.XXXXXX)
# shellcheck source=tests/lib/services.sh
source "$it_root/tests/lib/services.sh"
# produces raw records and reads topics (tests/tools/kafka_tool.c): usage in its --help
KAFKA_TOOL=$(svc_kafka_tool "$RECLASS")

it_cleanup() {
    local rc=$?
    set +e # a closed stderr (| head) must not cut the clean-up short
    svc_stop "$TMP"
    [ "$rc" != 0 ] && [ "$rc" != 77 ] && svc_tails "$TMP" 30
    rm -rf "$TMP"
    exit "$rc"
}
trap it_cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# Starts PostgreSQL and applies the migrations; sets DB.
it_start_pg() {
    svc_start_pg "$RECLASS" "$TMP" || fail "PostgreSQL or migrate"
    DB=$SVC_DB
}

# Starts the broker ($IT_BROKER: dev or tansu) with topic $1 and any further topics given
# (4 partitions each); sets BROKERS.
it_start_broker() {
    local rc=0
    svc_start_broker "$RECLASS" "$TMP" 4 "$@" || rc=$?
    if [ "$rc" = 77 ]; then
        echo "SKIP: Tansu cannot be had (see above)" >&2
        exit 77
    fi
    [ "$rc" = 0 ] || fail "the ${IT_BROKER:-dev} broker did not start"
    BROKERS=$SVC_BROKERS
    echo "broker: ${IT_BROKER:-dev} at $BROKERS"
}

# it_make_input FILE N [ID_PREFIX]: N CLINC150 texts (cycled) as submit JSONL.
it_make_input() {
    python3 - "$GOLDEN" "$1" "$2" "${3:-t}" <<'PY'
import json, sys
src, dst, n, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
texts = [json.loads(l)["text"] for l in open(src, encoding="utf-8") if l.strip()]
with open(dst, "w", encoding="utf-8") as f:
    for i in range(n):
        f.write(json.dumps({"id": "%s%06d" % (prefix, i), "text": texts[i % len(texts)]}) + "\n")
PY
}

# it_submit TOPIC JOB FILE
it_submit() {
    "$RECLASS" submit --brokers "$BROKERS" --topic "$1" --job-id "$2" --tenant acme \
        --no-progress "$3" >>"$TMP/submit.log" 2>&1 || fail "submit $2"
}

psql_q() {
    psql "$DB" -qtAX -v ON_ERROR_STOP=1 -c "$1"
}

# Rows of a job so far (0 while the database is unreachable).
it_rows() {
    psql_q "SELECT count(*) FROM ticket_results WHERE job_id = '$1'" 2>/dev/null || echo 0
}

# it_wait_rows JOB MIN TIMEOUT_S: waits until the job has at least MIN rows.
it_wait_rows() {
    local deadline=$((SECONDS + $3))
    while [ "$SECONDS" -lt "$deadline" ]; do
        [ "$(it_rows "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    fail "job $1 did not reach $2 rows in $3 s (has $(it_rows "$1"))"
}

# it_watch_completions: from now on every change of a job's completed_at is logged in
# it_completions (a test table): it_check_job then wants exactly one per job.
it_watch_completions() {
    psql_q "CREATE TABLE it_completions (job_id text, completed_at timestamptz);
        CREATE FUNCTION it_log_completion() RETURNS trigger LANGUAGE plpgsql AS \$\$
        BEGIN
            IF NEW.completed_at IS DISTINCT FROM OLD.completed_at THEN
                INSERT INTO it_completions VALUES (NEW.job_id, NEW.completed_at);
            END IF;
            RETURN NEW;
        END \$\$;
        CREATE TRIGGER it_log_completion AFTER UPDATE ON job_info
            FOR EACH ROW EXECUTE FUNCTION it_log_completion()" >/dev/null
}

# it_check_job JOB N: exactly N distinct rows, done == total == N, completed_at set.
it_check_job() {
    local rows distinct done total completed
    rows=$(psql_q "SELECT count(*) FROM ticket_results WHERE job_id = '$1'")
    distinct=$(psql_q "SELECT count(DISTINCT ticket_id) FROM ticket_results WHERE job_id = '$1'")
    done=$(psql_q "SELECT done FROM jobs WHERE job_id = '$1'")
    total=$(psql_q "SELECT total FROM jobs WHERE job_id = '$1'")
    completed=$(psql_q "SELECT completed_at IS NOT NULL FROM jobs WHERE job_id = '$1'")
    echo "job $1: rows=$rows distinct=$distinct done=$done total=$total completed=$completed"
    [ "$rows" = "$2" ] || fail "job $1 has $rows rows, want $2"
    [ "$distinct" = "$2" ] || fail "job $1 has $distinct distinct tickets, want $2"
    [ "$done" = "$2" ] || fail "job $1 done=$done, want $2"
    [ "$total" = "$2" ] || fail "job $1 total=$total, want $2"
    [ "$completed" = t ] || fail "job $1 has no completed_at"
    if [ "$(psql_q "SELECT to_regclass('it_completions') IS NOT NULL")" = t ]; then
        local stamps
        stamps=$(psql_q "SELECT count(*) FROM it_completions WHERE job_id = '$1'")
        [ "$stamps" = 1 ] || fail "job $1: completed_at changed $stamps times, not once"
    fi
}

# it_run_worker LOG ARGS...: runs the worker in the background (pid in WORKER_PID); with
# IT_WORKER_CPUS=LIST (taskset -c), on those CPUs alone (a benchmark keeps the broker and
# PostgreSQL off them).
it_run_worker() {
    local log=$1 pin=()
    shift
    [ -n "${IT_WORKER_CPUS:-}" ] && pin=(taskset -c "$IT_WORKER_CPUS")
    "${pin[@]}" "$RECLASS" run --brokers "$BROKERS" --db "$DB" --model "$MODEL" --backend cpu \
        --kafka session.timeout.ms=6000 --kafka heartbeat.interval.ms=500 \
        "$@" >"$log.out" 2>"$log" &
    WORKER_PID=$!
    svc_pids+=("$WORKER_PID")
}

# it_tls_ca NAME: a throwaway CA, $TMP/NAME.pem and $TMP/NAME.key.
it_tls_ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" -keyout "$TMP/$1.key" \
        -out "$TMP/$1.pem" 2>/dev/null || fail "openssl: CA $1"
}

# it_tls_cert CA CERT KEY: a certificate for 127.0.0.1 (CN and SAN), signed by CA, into the
# files CERT and KEY.
it_tls_cert() {
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$3" -out "$TMP/$1.csr" \
        2>/dev/null || fail "openssl: request for $2"
    printf 'subjectAltName=IP:127.0.0.1\n' >"$TMP/san.ext"
    openssl x509 -req -in "$TMP/$1.csr" -CA "$TMP/$1.pem" -CAkey "$TMP/$1.key" -CAcreateserial \
        -days 2 -extfile "$TMP/san.ext" -out "$2" 2>/dev/null || fail "openssl: sign $2"
}

# it_stunnel NAME ACCEPT_PORT CONNECT_PORT CERT KEY: TLS on 127.0.0.1:ACCEPT_PORT in front of
# the plaintext 127.0.0.1:CONNECT_PORT (stunnel4 from Debian), stopped with the test.
it_stunnel() {
    command -v stunnel4 >/dev/null || fail "stunnel4 is not installed (apt-get install stunnel4)"
    cat >"$TMP/stunnel-$1.conf" <<CONF
foreground = yes
pid =
output = $TMP/stunnel-$1.log
[$1]
accept = 127.0.0.1:$2
connect = 127.0.0.1:$3
cert = $4
key = $5
CONF
    stunnel4 "$TMP/stunnel-$1.conf" 2>>"$TMP/stunnel-$1.log" &
    svc_pids+=($!)
}
