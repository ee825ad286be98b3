#!/usr/bin/env bash
# Kafka over TLS: Tansu behind stunnel (a real TLS endpoint, the only listener Tansu
# advertises), a throwaway CA signing its certificate for 127.0.0.1. submit with
# ssl.ca.location=CA delivers the job and run classifies it; with another CA, both stop at once,
# exit 1, saying the TLS handshake failed (not after the join timeout, not about reachability).
#   run_kafka_tls.sh RECLASS_BIN    (Tansu: exit 77, skipped, when it cannot be had)
source "$(dirname "$0")/lib.sh" "$1"
command -v stunnel4 >/dev/null || fail "stunnel4 is not installed (apt-get install stunnel4)"
rc=0
tansu=$(svc_tansu_fetch "${RECLASS_TANSU_DIR:-$(dirname "$RECLASS")/tansu}") || rc=$?
[ "$rc" = 0 ] || { echo "SKIP: Tansu cannot be had" >&2; exit 77; }
it_start_pg

# the CA, the broker's certificate (SAN 127.0.0.1), and a CA that did not sign it
it_tls_ca test-ca && it_tls_ca other-ca
it_tls_cert test-ca "$TMP/broker.pem" "$TMP/broker.key"

plain=$(svc_free_port)
tls=$(svc_free_port)
"$tansu" broker --listener-url "tcp://127.0.0.1:$plain" \
    --advertised-listener-url "tcp://127.0.0.1:$tls" --storage-engine memory://tansu/ \
    >"$TMP/tansu.out" 2>"$TMP/tansu.log" &
svc_pids+=($!)
it_stunnel kafka "$tls" "$plain" "$TMP/broker.pem" "$TMP/broker.key"
BROKERS=127.0.0.1:$tls
good=(--kafka security.protocol=ssl --kafka "ssl.ca.location=$TMP/test-ca.pem")
wrong=(--kafka security.protocol=ssl --kafka "ssl.ca.location=$TMP/other-ca.pem")
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$plain") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$tls") 2>/dev/null && break
    sleep 0.1
done
for t in tickets tickets.dlq; do
    "$KAFKA_TOOL" create-topic -b "$BROKERS" -t "$t" -p 2 -X security.protocol=ssl \
        -X "ssl.ca.location=$TMP/test-ca.pem" 2>>"$TMP/tansu.log" || fail "create topic $t over TLS"
done
it_make_input "$TMP/in.jsonl" 40

t0=$SECONDS
rc=0
"$RECLASS" submit --brokers "$BROKERS" --job-id wrongca --tenant acme --no-progress "${wrong[@]}" \
    "$TMP/in.jsonl" >/dev/null 2>"$TMP/submit_wrong.log" || rc=$?
echo "submit, wrong CA: exit $rc in $((SECONDS - t0)) s: $(grep -m1 'reclass submit' "$TMP/submit_wrong.log")"
[ "$rc" = 1 ] || fail "submit with the wrong CA exited $rc, want 1"
grep -q "TLS with the broker failed" "$TMP/submit_wrong.log" || fail "submit: no TLS failure named"
[ $((SECONDS - t0)) -le 10 ] || fail "submit took $((SECONDS - t0)) s to report it"

t0=$SECONDS
rc=0
timeout 120 "$RECLASS" run --brokers "$BROKERS" --db "$DB" --model "$MODEL" --backend cpu \
    "${wrong[@]}" >/dev/null 2>"$TMP/run_wrong.log" || rc=$?
echo "run, wrong CA: exit $rc in $((SECONDS - t0)) s: $(grep -m1 'TLS' "$TMP/run_wrong.log")"
[ "$rc" = 1 ] || fail "run with the wrong CA exited $rc, want 1"
grep -q "TLS with the broker failed" "$TMP/run_wrong.log" || fail "run: no TLS failure named"
[ $((SECONDS - t0)) -le 20 ] || fail "run took $((SECONDS - t0)) s to report it"

"$RECLASS" submit --brokers "$BROKERS" --job-id tls --tenant acme --no-progress "${good[@]}" \
    "$TMP/in.jsonl" >>"$TMP/submit.log" 2>&1 || fail "submit over TLS"
it_run_worker "$TMP/worker.log" --idle-exit 5 "${good[@]}"
wait "$WORKER_PID" || fail "run over TLS exited $?"
it_check_job tls 40
echo PASS
