#!/usr/bin/env bash
# Every ticket of a job ends as a result row or as a dead letter counted against its job
# (migrations/008_job_failures.sql). A 100-ticket job: 96 good tickets, 3 dead-lettered for
# three reasons (trailing bytes, enqueued_at out of range, job_total 0) and, once the job's
# total is fixed, 1 saying job_total 2147483647. Then: `jobs` reads done 96, failed 4,
# "complete with failures", the total stays 100, the reasons are in job_failures with their
# records, the dead letters carry the job id and tenant as headers, `reclass jobs` and `jobs
# show` print it; a second group re-reading the whole topic (a crash or rebalance re-reads the
# same way) changes no count.
#   run_job_failures.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_pg
it_watch_completions
it_start_broker tickets
mkdir "$TMP/rec"
python3 - "$GOLDEN" "$TMP/rec" <<'PY'
import json, os, struct, sys
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
out = sys.argv[2]
def zz(n):  # Avro zigzag varint
    n = (n << 1) ^ (n >> 63)
    b = bytearray()
    while True:
        if n & ~0x7F:
            b.append((n & 0x7F) | 0x80); n >>= 7
        else:
            b.append(n); return bytes(b)
def s(x):
    x = x.encode()
    return zz(len(x)) + x
def ticket(tid, text, total=100, enqueued=1700000000000):
    # ticket v2 (schema id 2): job_id, tenant, ticket_id, text, job_total, enqueued_at, priority
    return b"\x00" + struct.pack(">I", 2) + s("job-f") + s("acme") + s(tid) + s(text) + \
        zz(total) + zz(enqueued) + zz(0)
for i in range(100):
    v = ticket("t%03d" % i, texts[i % len(texts)])
    if i == 96: v += b"\x07"                                              # trailing bytes
    if i == 97: v = ticket("t097", texts[0], enqueued=9300000000000000)  # enqueued_at
    if i == 98: v = ticket("t098", texts[0], total=0)                     # job_total 0
    if i == 99: v = ticket("t099", texts[0], total=2147483647)            # another total
    open(os.path.join(out, "t%03d.bin" % i), "wb").write(v)
PY
produce() { "$KAFKA_TOOL" produce -b "$BROKERS" -t tickets "$@" 2>>"$TMP/produce.log" || fail "produce"; }
first=("$TMP"/rec/t0[0-8][0-9].bin "$TMP"/rec/t09[0-8].bin) # all but t099
produce "${first[@]}"

it_run_worker "$TMP/w.log" --topic tickets --group g
it_wait_rows job-f 96 120
# the total is fixed by now: the ticket saying another one comes last
[ "$(psql_q "SELECT total FROM jobs WHERE job_id = 'job-f'")" = 100 ] || fail "total not 100"
produce "$TMP/rec/t099.bin"
deadline=$((SECONDS + 60))
until [ "$(psql_q "SELECT state FROM jobs WHERE job_id = 'job-f'")" = "complete with failures" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "job-f: $(psql_q "SELECT done, failed, total, state FROM jobs WHERE job_id = 'job-f'")"
    kill -0 "$WORKER_PID" 2>/dev/null || fail "worker died"
    sleep 0.5
done
kill -TERM "$WORKER_PID"
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "worker exited with $rc after SIGTERM"

check_counts() { # the view after $1
    local got
    got=$(psql_q "SELECT done, failed, total, state, completed_at IS NOT NULL FROM jobs WHERE job_id = 'job-f'")
    echo "jobs after $1: $got"
    [ "$got" = "96|4|100|complete with failures|t" ] || fail "after $1: want 96|4|100|complete with failures|t, got $got"
    [ "$(psql_q "SELECT count(*) FROM ticket_results WHERE job_id = 'job-f'")" = 96 ] || fail "rows after $1"
    [ "$(psql_q "SELECT count(*) FROM job_failures WHERE job_id = 'job-f'")" = 4 ] || fail "failures after $1"
    [ "$(psql_q "SELECT count(*) FROM it_completions WHERE job_id = 'job-f'")" = 1 ] || fail "completed_at stamped more than once"
}
check_counts "the job"
psql_q "SELECT ticket_id, topic, \"partition\", \"offset\", reason FROM job_failures WHERE job_id = 'job-f' ORDER BY ticket_id" | tee "$TMP/reasons.txt"
grep -q '^t096|tickets|[0-3]|[0-9]*|.*trailing bytes' "$TMP/reasons.txt" || fail "t096: reason"
grep -q '^t097|tickets|[0-3]|[0-9]*|.*enqueued_at' "$TMP/reasons.txt" || fail "t097: reason"
grep -q '^t098|tickets|[0-3]|[0-9]*|.*job_total' "$TMP/reasons.txt" || fail "t098: reason"
grep -q '^t099|tickets|[0-3]|[0-9]*|.*job job-f has the total 100 .*job_total 2147483647' "$TMP/reasons.txt" ||
    fail "t099: reason"
"$KAFKA_TOOL" consume -b "$BROKERS" -t tickets.dlq -f '%h\n' >"$TMP/dlq.txt" 2>>"$TMP/produce.log" ||
    fail "consume tickets.dlq"
[ "$(grep -c 'reclass.job_id=job-f,reclass.tenant=acme' "$TMP/dlq.txt")" = 4 ] ||
    fail "want 4 dead letters with job id and tenant headers: $(cat "$TMP/dlq.txt")"

"$RECLASS" jobs --db "$DB" >"$TMP/list.txt" || fail "reclass jobs exited $?"
cat "$TMP/list.txt"
grep -q "^job-f  *acme  *96/100 .* complete with failures  *4 " "$TMP/list.txt" || fail "reclass jobs"
"$RECLASS" jobs show job-f --db "$DB" >"$TMP/show.txt" || fail "reclass jobs show exited $?"
cat "$TMP/show.txt"
grep -q "^progress: *96/100 (complete with failures)" "$TMP/show.txt" || fail "show: progress"
grep -q "^failed: *4 " "$TMP/show.txt" || fail "show: failed"
grep -q "^  tickets/[0-3]/[0-9]* t099: job job-f has the total 100" "$TMP/show.txt" || fail "show: reasons"
"$RECLASS" jobs show job-f --db "$DB" --json | python3 -c '
import json, sys
o = json.loads(sys.stdin.read())
assert o["done"] == 96 and o["failed"] == 4 and o["state"] == "complete with failures", o
assert sorted(f["ticket_id"] for f in o["failures"]) == ["t096", "t097", "t098", "t099"], o
' || fail "show --json"

# everything read again by a new group: results upserted, failures recorded once
it_run_worker "$TMP/w2.log" --topic tickets --group g2 --idle-exit 3
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "second worker exited with $rc"
grep -q '"tickets":96,"dead_letters":4,' "$TMP/w2.log.out" || fail "second worker: $(tail -1 "$TMP/w2.log.out")"
check_counts "a second read of every record"
echo PASS
