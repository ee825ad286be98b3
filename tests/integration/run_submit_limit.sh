#!/usr/bin/env bash
# reclass submit sends a job whole or not at all: a ticket text between 1,000,000 bytes and the
# text cap goes through (the producer's message.max.bytes covers the cap), and a topic whose
# max.message.bytes (DescribeConfigs) is smaller than a record makes submit refuse the file
# with that record's line, exit 2, before anything is sent (IT_BROKER=tansu: the dev broker
# does not answer DescribeConfigs, and submit says it falls back to the producer's limit).
#   run_submit_limit.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_broker tickets
python3 - "$TMP/job.jsonl" <<'PY'
import json, random, sys
rnd = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(21):
        n = {10: 1_500_000, 15: 4 * 1024 * 1024}.get(i, 40)  # lines 11 and 16: big, at the cap
        text = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))
        f.write(json.dumps({"id": "b%02d" % i, "text": text}) + "\n")
PY
records() { # records in topic $1
    "$KAFKA_TOOL" watermarks -b "$BROKERS" -t "$1" | awk '{n += $3 - $2} END {print n + 0}'
}
rc=0
"$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id big --tenant t --no-progress \
    "$TMP/job.jsonl" >"$TMP/s1.out" 2>"$TMP/s1.log" || rc=$?
echo "texts of 1.5 MB and 4 MiB: exit $rc: $(tail -n 1 "$TMP/s1.log")"
[ "$rc" = 0 ] || fail "submit of records under the text cap exited $rc: $(cat "$TMP/s1.log")"
grep -q "submitted 21 tickets" "$TMP/s1.out" || fail "no success line"
[ "$(records tickets)" = 21 ] || fail "topic holds $(records tickets) records, want 21"
if [ "${IT_BROKER:-dev}" = dev ]; then
    grep -q "does not report max.message.bytes" "$TMP/s1.log" ||
        fail "submit did not say it fell back to the producer's limit"
    echo PASS
    exit 0
fi
"$KAFKA_TOOL" create-topic -b "$BROKERS" -t small -p 2 -H max.message.bytes=1000000 ||
    fail "create topic small"
rc=0
"$RECLASS" submit --brokers "$BROKERS" --topic small --job-id big --tenant t --no-progress \
    "$TMP/job.jsonl" >"$TMP/s2.out" 2>"$TMP/s2.log" || rc=$?
echo "topic max.message.bytes=1000000: exit $rc: $(tail -n 1 "$TMP/s2.log")"
[ "$rc" = 2 ] || fail "submit into a topic with smaller records exited $rc, want 2"
grep -q "line 11: .*max.message.bytes" "$TMP/s2.log" || fail "the refusal does not name line 11"
[ "$(records small)" = 0 ] || fail "topic small holds $(records small) records, want none sent"
echo PASS
