#!/usr/bin/env bash
# The settings the guarantees rest on are reclass's, and what goes wrong says so: a --kafka key
# that would break at-least-once or the group is refused, exit 2, with the reason (run and
# submit), and a --db password never reaches a message. (TLS and SASL failures:
# run_kafka_tls.sh.) run and submit refuse a reader schema without a field every ticket
# needs.
#   run_kafka_guard.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_pg
it_start_broker tickets
it_make_input "$TMP/in.jsonl" 5
for kv in group.id=other enable.auto.commit=false enable.auto.offset.store=true \
    auto.offset.reset=latest isolation.level=read_uncommitted \
    partition.assignment.strategy=range; do
    rc=0
    "$RECLASS" run --brokers "$BROKERS" --db "$DB" --model "$MODEL" --idle-exit 2 --kafka "$kv" \
        >/dev/null 2>"$TMP/guard.log" || rc=$?
    [ "$rc" = 2 ] || fail "run --kafka $kv exited $rc, want 2"
    grep -q "reclass sets this itself" "$TMP/guard.log" || fail "run --kafka $kv: $(cat "$TMP/guard.log")"
done
rc=0
"$RECLASS" submit --brokers "$BROKERS" --job-id j --tenant t --kafka acks=1 "$TMP/in.jsonl" \
    >/dev/null 2>"$TMP/guard.log" || rc=$?
[ "$rc" = 2 ] || fail "submit --kafka acks=1 exited $rc, want 2"
grep -q "acks: reclass sets this itself" "$TMP/guard.log" || fail "submit: $(cat "$TMP/guard.log")"
echo "reserved keys refused: $(head -n 1 "$TMP/guard.log")"

# a malformed --db URL: refused without its password
# a reader schema without a field every ticket needs: run refuses to start, as submit does
mkdir "$TMP/schemas"
cp "$it_root"/consumers/schemas/ticket-v*.avsc "$TMP/schemas/"
python3 - "$TMP/schemas" <<'PY'
import glob, json, re, sys
d = sys.argv[1]
newest = max(glob.glob(d + "/ticket-v*.avsc"), key=lambda p: int(re.findall(r"v(\d+)", p)[-1]))
s = json.load(open(newest))
s["fields"] = [f for f in s["fields"] if f["name"] != "tenant"]
n = int(re.findall(r"v(\d+)", newest)[-1]) + 1
json.dump(s, open("%s/ticket-v%d.avsc" % (d, n), "w"))
PY
for cmd in run submit; do
    rc=0
    if [ "$cmd" = run ]; then
        "$RECLASS" run --brokers "$BROKERS" --db "$DB" --model "$MODEL" --schemas "$TMP/schemas" \
            --idle-exit 2 >/dev/null 2>"$TMP/schema.log" || rc=$?
    else
        "$RECLASS" submit --brokers "$BROKERS" --job-id j --tenant t --schemas "$TMP/schemas" \
            "$TMP/in.jsonl" >/dev/null 2>"$TMP/schema.log" || rc=$?
    fi
    echo "$cmd, a reader schema without tenant: exit $rc: $(grep -m1 tenant "$TMP/schema.log")"
    [ "$rc" != 0 ] || fail "$cmd started on a reader schema without tenant"
    grep -q "lacks field tenant" "$TMP/schema.log" || fail "$cmd: $(cat "$TMP/schema.log")"
done

bad_db='postgresql://u:s3cr3t@[::1/db' # libpq quotes all of it
for cmd in migrate run; do
    args=(--db "$bad_db")
    [ "$cmd" = run ] && args+=(--model "$MODEL" --backend cpu --brokers "$BROKERS")
    rc=0
    "$RECLASS" "$cmd" "${args[@]}" >"$TMP/db.out" 2>"$TMP/db.log" || rc=$?
    [ "$rc" != 0 ] || fail "$cmd with a malformed --db exited 0"
    ! grep -q "s3cr3t" "$TMP/db.log" "$TMP/db.out" || fail "$cmd echoed the password: $(cat "$TMP/db.log")"
    grep -q 'u:\*\*\*@' "$TMP/db.log" || fail "$cmd: no redacted URL in: $(cat "$TMP/db.log")"
    echo "$cmd --db malformed: exit $rc: $(grep -m1 'u:\*\*\*@' "$TMP/db.log")"
done
echo PASS
