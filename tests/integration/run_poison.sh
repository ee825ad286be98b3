#!/usr/bin/env bash
# (d) A table of poison records between two good jobs: every one lands in the dead-letter topic
# with headers naming its error and its source, every good ticket is stored, the worker stays
# up and exits 0 on SIGTERM. The table covers random bytes, an unknown schema id, truncated
# and mistyped Avro, negative and huge lengths, job_total 0 and negative, empty and 10 KB
# identifiers, invalid UTF-8 and NUL bytes in each identifier, enqueued_at past PostgreSQL's
# timestamptz range (9.3e15 ms, INT64_MAX) and negative, a record over 1 MB that does not
# decode and a text over the codec's 4 MiB cap. Each record's Kafka key names its case, and the
# dead letter keeps the key, so each error can be checked against its case. Then another
# tenant's tickets for a stored job: refused by `submit --db`, dead-lettered by the worker.
#   run_poison.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
N1=1000
N2=500
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in1.jsonl" "$N1" a
it_make_input "$TMP/in2.jsonl" "$N2" b
mkdir "$TMP/poison"
# cases.txt: one line per case, "key partition expected-error-substring" (partition -1 = any)
python3 - "$TMP/poison" <<'PY'
import os, random, struct, sys
out = sys.argv[1]
rnd = random.Random(7)
def zz(n):  # Avro zigzag varint
    n = (n << 1) ^ (n >> 63)
    b = bytearray()
    while True:
        if n & ~0x7F:
            b.append((n & 0x7F) | 0x80); n >>= 7
        else:
            b.append(n); return bytes(b)
def s(x):
    x = x if isinstance(x, bytes) else x.encode()
    return zz(len(x)) + x
def ticket(job=b"job-x", tenant=b"acme", tid=b"p", text=b"where is my card", total=1,
           enqueued=1700000000000):
    # ticket v2: job_id, tenant, ticket_id, text, job_total, enqueued_at, priority (null)
    return s(job) + s(tenant) + s(tid) + s(text) + zz(total) + zz(enqueued) + zz(0)
hdr = lambda sid=2: b"\x00" + struct.pack(">I", sid)
cases = []  # (key, partition, value, expected substring of reclass.error)
for i in range(5):
    cases.append(("random%d" % i, -1, bytes(rnd.randrange(1, 256) for _ in range(rnd.randrange(1, 200))), ""))
cases.append(("unknown-schema", -1, hdr(99) + ticket(), "unknown schema id 99"))
full = hdr() + ticket(text=b"a text long enough to be cut short")
cases.append(("truncated", -1, full[:12], ""))
cases.append(("header-only", -1, hdr(), ""))
cases.append(("trailing", -1, full + b"\x07", "trailing"))
# wrong types: a JSON object where Avro is expected, and job_total written as a string
cases.append(("json-not-avro", -1, b'{"job_id": "j", "tenant": "t"}', ""))
cases.append(("total-as-string", -1, hdr() + s("j") + s("t") + s("1") + s("x") + s("12") + zz(0) + zz(0), ""))
cases.append(("negative-length", -1, hdr() + s("j") + zz(-3), "length -3"))
cases.append(("huge-length", -1, hdr() + s("j") + zz(1 << 40), "past the end"))
cases.append(("job-total-0", -1, hdr() + ticket(total=0), "job_total"))
cases.append(("job-total-neg", -1, hdr() + ticket(total=-5), "job_total"))
cases.append(("empty-job-id", -1, hdr() + ticket(job=b""), "job_id is empty"))
cases.append(("empty-tenant", -1, hdr() + ticket(tenant=b""), "tenant is empty"))
cases.append(("empty-ticket-id", -1, hdr() + ticket(tid=b""), "ticket_id is empty"))
cases.append(("10k-job-id", -1, hdr() + ticket(job=b"j" * 10240), "job_id is 10240 bytes"))
cases.append(("10k-tenant", -1, hdr() + ticket(tenant=b"t" * 10240), "tenant is 10240 bytes"))
cases.append(("10k-ticket-id", -1, hdr() + ticket(tid=b"i" * 10240), "ticket_id is 10240 bytes"))
cases.append(("utf8-job-id", -1, hdr() + ticket(job=b"\xff"), "job_id: invalid UTF-8"))
cases.append(("utf8-tenant", -1, hdr() + ticket(tenant=b"ac\xc3\x28me"), "tenant: invalid UTF-8"))
cases.append(("utf8-ticket-id", -1, hdr() + ticket(tid=b"t\xed\xa0\x80"), "ticket_id: invalid UTF-8"))
cases.append(("nul-job-id", -1, hdr() + ticket(job=b"j\x00b"), "job_id contains a NUL"))
cases.append(("nul-tenant", -1, hdr() + ticket(tenant=b"a\x00b"), "tenant contains a NUL"))
cases.append(("nul-ticket-id", -1, hdr() + ticket(tid=b"t\x00"), "ticket_id contains a NUL"))
# well-formed, but enqueued_at outside what PostgreSQL's timestamptz holds (it once made the
# COPY fail, the worker exit and every restart fail again) or negative
cases.append(("enqueued-9.3e15", -1, hdr() + ticket(enqueued=9300000000000000), "enqueued_at"))
cases.append(("enqueued-int64-max", -1, hdr() + ticket(enqueued=(1 << 63) - 1), "enqueued_at"))
cases.append(("enqueued-negative", -1, hdr() + ticket(enqueued=-1), "enqueued_at"))
# over librdkafka's default message.max.bytes (1 MB): the dead-letter producer must take it
cases.append(("big-garbage", 0, hdr() + bytes(rnd.randrange(256) for _ in range(1200 * 1024)), ""))
cases.append(("big-text", 3, hdr() + ticket(text=b"lorem ipsum " * (4608 * 1024 // 12)), "text is"))
with open(os.path.join(out, "cases.txt"), "w") as f:
    for i, (key, part, value, want) in enumerate(cases):
        name = os.path.join(out, "%s.bin" % key)
        with open(name, "wb") as v:
            v.write(value)
        f.write("%s %d %s\n" % (key, part, want))
PY
ncases=$(wc -l <"$TMP/poison/cases.txt")

# poison KEY PARTITION FILE: one record with key KEY and the file's bytes as its value
poison() {
    local part=()
    [ "$2" -ge 0 ] && part=(-p "$2")
    "$KAFKA_TOOL" produce -b "$BROKERS" -t tickets -k "$1" "${part[@]}" \
        -X message.max.bytes=10000000 "$3" 2>>"$TMP/produce.log" || fail "produce $1"
}

it_submit tickets job-d1 "$TMP/in1.jsonl"
while read -r key part _; do
    poison "$key" "$part" "$TMP/poison/$key.bin"
done <"$TMP/poison/cases.txt"
it_submit tickets job-d2 "$TMP/in2.jsonl"

it_run_worker "$TMP/w.log" --topic tickets --group g
it_wait_rows job-d1 "$N1" 120
it_wait_rows job-d2 "$N2" 120
# every dead letter in the topic before the stop (the stop would wait for them anyway)
dlq_count() {
    "$KAFKA_TOOL" consume -b "$BROKERS" -t tickets.dlq -X fetch.max.bytes=20000000 \
        -X receive.message.max.bytes=21000000 -f '%o\n' 2>/dev/null | wc -l
}
deadline=$((SECONDS + 60))
until [ "$(dlq_count)" -ge "$ncases" ] || [ "$SECONDS" -ge "$deadline" ]; do
    kill -0 "$WORKER_PID" 2>/dev/null || break
    sleep 0.5
done
kill -0 "$WORKER_PID" 2>/dev/null || fail "worker died"

# (e) Another tenant's tickets for job-d1 (50 of its ticket ids, job_total 50): `submit --db`
# refuses the job id before sending anything; sent anyway (no --db), each one is dead-lettered
# by the worker, and job-d1 keeps its rows, its tenant and done == total (it once read
# "done 1000, total 50" with 50 rows overwritten). A job id of one's own passes the check.
head -50 "$TMP/in1.jsonl" >"$TMP/intruder.jsonl"
head -5 "$TMP/in2.jsonl" >"$TMP/own.jsonl"
submit_as() { # TENANT JOB FILE [--db URL]
    "$RECLASS" submit --brokers "$BROKERS" --topic tickets --tenant "$1" --job-id "$2" \
        --no-progress "${@:4}" "$3" >>"$TMP/tenant.log" 2>&1
}
rc=0
submit_as intruder job-d1 "$TMP/intruder.jsonl" --db "$DB" || rc=$?
[ "$rc" = 2 ] || fail "submit --db with another tenant's job id: exit $rc, want 2"
grep -q "job id job-d1 belongs to another tenant" "$TMP/tenant.log" ||
    fail "submit --db says: $(cat "$TMP/tenant.log")"
submit_as acme job-d3 "$TMP/own.jsonl" --db "$DB" || fail "submit --db of a new job id"
submit_as intruder job-d1 "$TMP/intruder.jsonl" || fail "submit without --db"
n_intruder=50
ncases_all=$((ncases + n_intruder))
it_wait_rows job-d3 5 60
deadline=$((SECONDS + 60))
until [ "$(dlq_count)" -ge "$ncases_all" ] || [ "$SECONDS" -ge "$deadline" ]; do
    kill -0 "$WORKER_PID" 2>/dev/null || break
    sleep 0.5
done
kill -0 "$WORKER_PID" 2>/dev/null || fail "worker died"
kill -TERM "$WORKER_PID"
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "worker exited with $rc after SIGTERM"
it_check_job job-d1 "$N1"
it_check_job job-d2 "$N2"
it_check_job job-d3 5
[ "$(psql_q "SELECT count(*) FROM ticket_results WHERE job_id = 'job-d1' AND tenant = 'acme'")" = "$N1" ] ||
    fail "job-d1 has rows of another tenant"
[ "$(psql_q "SELECT tenant FROM jobs WHERE job_id = 'job-d1'")" = acme ] || fail "job-d1 changed owner"
"$KAFKA_TOOL" consume -b "$BROKERS" -t tickets.dlq -X fetch.max.bytes=20000000 \
    -X receive.message.max.bytes=21000000 \
    -f '%k|%S|%h\n' >"$TMP/dlq.txt" 2>"$TMP/consume.log" || fail "consume tickets.dlq"
n=$(grep -c 'reclass.error=' "$TMP/dlq.txt" || true)
echo "dead letters: $n of $ncases cases + $n_intruder of another tenant"
[ "$n" = "$ncases_all" ] || fail "want $ncases_all dead letters, got $n"
n=$(grep -c '^a0000[0-4][0-9]|.*reclass.error=job job-d1 belongs to another tenant' "$TMP/dlq.txt" || true)
[ "$n" = "$n_intruder" ] || fail "want $n_intruder dead letters naming the owner rule, got $n"
while read -r key _ want; do
    line=$(grep "^$key|" "$TMP/dlq.txt") || fail "case $key: no dead letter"
    size=$(stat -c %s "$TMP/poison/$key.bin")
    [ "$(cut -d'|' -f2 <<<"$line")" = "$size" ] || fail "case $key: dead letter is not the whole record ($line)"
    [ -z "$want" ] || grep -qF "$want" <<<"$line" || fail "case $key: error lacks '$want': $line"
    echo "  $key: $(grep -o 'reclass.error=[^,]*' <<<"$line")"
done <"$TMP/poison/cases.txt"
# each names its source: distinct (partition, offset) pairs of topic tickets
src=$(grep -o 'reclass.source.topic=tickets,reclass.source.partition=[0-9]*,reclass.source.offset=[0-9]*' \
    "$TMP/dlq.txt" | sort -u | wc -l)
[ "$src" = "$ncases_all" ] || fail "want $ncases_all distinct sources in the headers, got $src"
grep -q "\"dead_letters\":$ncases_all," "$TMP/w.log.out" ||
    fail "worker statistics do not count $ncases_all dead letters"
echo PASS
