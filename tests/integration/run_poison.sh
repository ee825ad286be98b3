#!/usr/bin/env bash
# (d) 100 poison records (garbage bytes, an unknown schema id, an empty job_id, job_total 0,
# truncated Avro) mixed between two good jobs: all 100 land in the dead-letter topic with
# headers naming the error and the source, every good ticket is stored, the worker keeps going.
#   run_poison.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
command -v kcat >/dev/null || fail "kcat not installed (apt-get install kcat)"
N1=1000
N2=500
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in1.jsonl" "$N1" a
it_make_input "$TMP/in2.jsonl" "$N2" b
mkdir "$TMP/poison"
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
    x = x.encode(); return zz(len(x)) + x
def ticket(job, total, tid="p", text="where is my card"):
    # ticket v2: job_id, tenant, ticket_id, text, job_total, enqueued_at, priority(null)
    return s(job) + s("acme") + s(tid) + s(text) + zz(total) + zz(1700000000000) + zz(0)
hdr = lambda sid: b"\x00" + struct.pack(">I", sid)
recs = []
for i in range(25):
    recs.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200))))
for i in range(25):
    recs.append(hdr(99) + ticket("job-x", 1, "u%d" % i))
for i in range(25):
    recs.append(hdr(2) + ticket("", 1, "e%d" % i))
for i in range(12):
    recs.append(hdr(2) + ticket("job-x", 0, "z%d" % i))
for i in range(13):
    full = hdr(2) + ticket("job-x", 1, "c%d" % i, "a text long enough to be cut short")
    recs.append(full[: 5 + rnd.randrange(1, 20)])
assert len(recs) == 100
for i, r in enumerate(recs):
    with open(os.path.join(out, "p%03d.bin" % i), "wb") as f:
        f.write(r)
PY
it_submit tickets job-d1 "$TMP/in1.jsonl"
kcat -P -b "$BROKERS" -t tickets "$TMP"/poison/*.bin 2>"$TMP/kcat.log" || fail "kcat produce"
it_submit tickets job-d2 "$TMP/in2.jsonl"

it_run_worker "$TMP/w.log" --topic tickets --group g --idle-exit 5
rc=0
wait "$WORKER_PID" || rc=$?
[ "$rc" = 0 ] || fail "worker exited with $rc"
it_check_job job-d1 "$N1"
it_check_job job-d2 "$N2"
kcat -C -b "$BROKERS" -t tickets.dlq -e -q \
    -f '%h|%p\n' >"$TMP/dlq.txt" 2>"$TMP/kcat-c.log" || fail "kcat consume"
n=$(grep -c 'reclass.error=' "$TMP/dlq.txt" || true)
echo "dead letters: $n"
head -n 3 "$TMP/dlq.txt"
[ "$n" = 100 ] || fail "want 100 dead letters, got $n"
# each names its source: 100 distinct (partition, offset) pairs of topic tickets
src=$(grep -o 'reclass.source.topic=tickets,reclass.source.partition=[0-9]*,reclass.source.offset=[0-9]*' \
    "$TMP/dlq.txt" | sort -u | wc -l)
[ "$src" = 100 ] || fail "want 100 distinct sources in the headers, got $src"
grep -q '"dead_letters":100,' "$TMP/w.log.out" || fail "worker statistics do not count 100 dead letters"
echo PASS
