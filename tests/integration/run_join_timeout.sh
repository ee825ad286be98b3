#!/usr/bin/env bash
# A worker that never gets a partition assignment must not report success: with an unreachable
# broker and --idle-exit it exits non-zero after --join-timeout, saying why; --join-timeout
# shorter than twice the group's session timeout (a killed member's partitions are handed on
# only after its session expires) is refused as a usage error.
#   run_join_timeout.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_pg
t0=$SECONDS
rc=0
"$RECLASS" run --brokers 127.0.0.1:1 --db "$DB" --model "$MODEL" --backend cpu \
    --kafka session.timeout.ms=6000 --idle-exit 2 --join-timeout 12 \
    >"$TMP/w.out" 2>"$TMP/w.log" || rc=$?
took=$((SECONDS - t0))
echo "unreachable broker: exit $rc after $took s"
[ "$rc" = 1 ] || fail "want exit 1 without an assignment, got $rc"
[ "$took" -ge 12 ] && [ "$took" -lt 40 ] || fail "gave up after $took s, want ~12 s"
grep -q "no partition assignment from group reclass within 12 s" "$TMP/w.log" \
    || fail "no message saying why: $(tail -n 3 "$TMP/w.log")"
grep -q "idle for" "$TMP/w.log" && fail "claims success without an assignment"
rc=0
err=$("$RECLASS" run --db "$DB" --model "$MODEL" --join-timeout 60 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] || fail "join timeout under twice the session timeout: exit $rc, want 2"
grep -q "session.timeout.ms" <<<"$err" || fail "message does not name the session timeout: $err"
echo PASS
