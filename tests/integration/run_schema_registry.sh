#!/usr/bin/env bash
# A Kafka shop's producers: records framed with a Schema Registry's ids (the stand-in of
# tests/tools/schema_registry.py, behind basic auth, ids from 100001).
#  - job-py: produced by confluent-kafka's own AvroSerializer (auto-registering the current
#    schema under tickets-value) -> stored;
#  - job-sub: `reclass submit --schema-registry` (registers, frames with the id it got back);
#  - job-out: written with the *older* schema (ticket-v1, registered as its own id) while the
#    registry is down: the worker holds them (nothing stored, nothing dead-lettered), then
#    stores them once the registry is back;
#  - one record with an id the registry never issued -> exactly one dead letter, with the
#    reason; everything else exact. IT_BROKER=tansu runs it on Tansu.
#   run_schema_registry.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
python3 -c 'import confluent_kafka.schema_registry.avro, fastavro' 2>/dev/null ||
    { echo "SKIP: confluent-kafka[avro,schemaregistry] not installed" >&2; exit 77; }
NP=700 NS=500 NO=400
it_start_pg
it_start_broker tickets
RPORT=$(svc_free_port)
REG=http://127.0.0.1:$RPORT
USERINFO=ci:registry-secret
start_registry() {
    python3 "$it_root/tests/tools/schema_registry.py" --port "$RPORT" --state "$TMP/registry.json" \
        --user-info "$USERINFO" >>"$TMP/registry.log" 2>&1 &
    REG_PID=$!
    svc_pids+=("$REG_PID")
    for _ in $(seq 50); do
        curl -sf -u "$USERINFO" "$REG/subjects" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "the stand-in registry did not start"
}
start_registry
export RECLASS_SCHEMA_REGISTRY_USER_INFO=$USERINFO
SCHEMAS=$it_root/consumers/schemas

# produce.py JOB N MODE: MODE serializer = confluent-kafka's AvroSerializer (current schema);
# MODE v1-raw:ID = fastavro with ticket-v1.avsc, framed with ID (no registry needed).
cat >"$TMP/produce.py" <<'PY'
import io, json, struct, sys, time
from confluent_kafka import Producer
from confluent_kafka.serialization import MessageField, SerializationContext
brokers, reg, userinfo, schemas, golden, job, n, mode = sys.argv[1:9]
n = int(n)
texts = [json.loads(l)["text"] for l in open(golden) if l.strip()]
p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 20})
rec = lambda i: {"job_id": job, "tenant": "acme", "ticket_id": "%s-%05d" % (job, i),
                 "text": texts[i % len(texts)], "job_total": n,
                 "enqueued_at": int(time.time() * 1000)}
if mode == "serializer":
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    src = SchemaRegistryClient({"url": reg, "basic.auth.user.info": userinfo})
    ser = AvroSerializer(src, open(schemas + "/ticket-v2.avsc").read())
    ctx = SerializationContext("tickets", MessageField.VALUE)
    for i in range(n):
        r = rec(i); r["priority"] = None
        p.produce("tickets", key=r["ticket_id"], value=ser(r, ctx))
else:
    import fastavro
    sid = int(mode.split(":")[1])
    sch = fastavro.parse_schema(json.load(open(schemas + "/ticket-v1.avsc")))
    for i in range(n):
        b = io.BytesIO(); fastavro.schemaless_writer(b, sch, rec(i))
        p.produce("tickets", key=rec(i)["ticket_id"], value=b"\0" + struct.pack(">I", sid) + b.getvalue())
p.flush(30)
PY
produce() { python3 "$TMP/produce.py" "$BROKERS" "$REG" "$USERINFO" "$SCHEMAS" "$GOLDEN" "$@" || fail "produce $1"; }

produce job-py $NP serializer
it_make_input "$TMP/s.jsonl" $NS s
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id job-sub --tenant acme \
    --schema-registry "$REG" --no-progress "$TMP/s.jsonl" >>"$TMP/submit.log" 2>&1 ||
    fail "submit --schema-registry: $(cat "$TMP/submit.log")"
grep -q "schema id 100001 under subject tickets-value" "$TMP/submit.log" ||
    fail "submit did not reuse the serializer's id: $(cat "$TMP/submit.log")"
# the older schema gets its own id (registered while the registry is up)
V1=$(python3 -c 'import json,sys; print(json.dumps({"schema": open(sys.argv[1]).read()}))' "$SCHEMAS/ticket-v1.avsc" |
    curl -sf -u "$USERINFO" -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
        --data @- "$REG/subjects/tickets-value/versions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "registry ids: current 100001, ticket-v1 $V1"
[ "$V1" = 100002 ] || fail "ticket-v1 registered as $V1"
produce job-bad 1 v1-raw:999999 # an id the registry never issued

it_run_worker "$TMP/worker.log" --topic tickets --group g --schema-registry "$REG"
it_wait_rows job-py $NP 120
it_wait_rows job-sub $NS 120
# registry outage mid-job: records of a schema id the worker has not seen yet
kill "$REG_PID"; wait "$REG_PID" 2>/dev/null || true
produce job-out $NO v1-raw:$V1
sleep 6
[ "$(it_rows job-out)" = 0 ] || fail "job-out rows stored while the registry was down"
kill -0 "$WORKER_PID" || fail "worker died during the registry outage"
grep -q "nothing is dead-lettered" "$TMP/worker.log" || fail "the worker did not say it holds records"
start_registry
it_wait_rows job-out $NO 120
dlq() {
    "$KAFKA_TOOL" consume -b "$BROKERS" -t tickets.dlq -f '%k|%h\n' 2>/dev/null || true
}
deadline=$((SECONDS + 30))
until [ "$(dlq | grep -c .)" -ge 1 ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.5; done
kill -TERM "$WORKER_PID"
wait "$WORKER_PID" || fail "worker exited with $? after SIGTERM"
it_check_job job-py $NP
it_check_job job-sub $NS
it_check_job job-out $NO
dlq >"$TMP/dlq.txt"
cat "$TMP/dlq.txt"
[ "$(grep -c . "$TMP/dlq.txt")" = 1 ] || fail "want exactly one dead letter, got $(grep -c . "$TMP/dlq.txt")"
grep -q "job-bad-00000|.*unknown schema id 999999 (the schema registry does not know it)" "$TMP/dlq.txt" ||
    fail "dead letter reason"
grep -q "registry-secret" "$TMP/worker.log" && fail "the registry password appears in the worker's log"
echo PASS
