#!/usr/bin/env bash
# reclass submit never reports success for tickets the broker already deleted: a partition that
# keeps less than the job (here the dev broker's --partition-mb 1, as a real broker's retention
# would) makes submit exit 1 naming the partition and how many it lost; with room it exits 0.
#   run_submit_retention.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
python3 - "$TMP/big.jsonl" <<'PY'
import json, random, sys
rnd = random.Random(3)
words = "card payment refund transfer account balance declined pending fee dispute".split()
with open(sys.argv[1], "w") as f:
    for i in range(300):  # ~3 MB of text that compresses poorly enough
        text = " ".join(rnd.choice(words) + str(rnd.randrange(10**6)) for _ in range(900))
        f.write(json.dumps({"id": "r%04d" % i, "text": text}) + "\n")
PY
# start_broker MB: the dev broker with one-partition topic "tickets" keeping MB MiB
start_broker() {
    "$RECLASS" dev-broker --partitions 1 --topic tickets --partition-mb "$1" \
        >"$TMP/broker$1.out" 2>"$TMP/broker$1.log" &
    svc_pids+=($!)
    BROKERS=
    for _ in $(seq 300); do
        BROKERS=$(head -n1 "$TMP/broker$1.out" 2>/dev/null || true)
        [ -n "$BROKERS" ] && return 0
        sleep 0.1
    done
    fail "dev-broker printed no address"
}
start_broker 1
rc=0
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id j1 --tenant t --no-progress \
    "$TMP/big.jsonl" >"$TMP/s1.out" 2>"$TMP/s1.log" || rc=$?
echo "1 MiB partition: exit $rc: $(grep -v '^%' "$TMP/s1.log" | tail -n 1)"
[ "$rc" = 1 ] || fail "submit into a partition too small for the job exited $rc, want 1"
grep -q "partition 0 no longer holds" "$TMP/s1.log" || fail "no message naming the lost records"
[ ! -s "$TMP/s1.out" ] || fail "submit printed success: $(cat "$TMP/s1.out")"
start_broker 64
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id j2 --tenant t --no-progress \
    "$TMP/big.jsonl" >"$TMP/s2.out" 2>"$TMP/s2.log" || fail "submit with room failed: $(tail -n 2 "$TMP/s2.log")"
grep -q "submitted 300 tickets" "$TMP/s2.out" || fail "no success line"
echo PASS
