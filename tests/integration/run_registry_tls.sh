#!/usr/bin/env bash
# The Schema Registry client over TLS: the stand-in registry behind stunnel with a throwaway
# CA's certificate for 127.0.0.1. `submit --schema-registry https://... --schema-registry-ca CA`
# registers and delivers the job; with another CA it stops before sending anything, exit 1,
# naming the certificate problem; credentials from a file work, and never show in a message.
#   run_registry_tls.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_broker tickets
it_tls_ca test-ca && it_tls_ca other-ca
it_tls_cert test-ca "$TMP/reg.pem" "$TMP/reg.key"
plain=$(svc_free_port)
tls=$(svc_free_port)
python3 "$it_root/tests/tools/schema_registry.py" --port "$plain" --state "$TMP/registry.json" \
    --user-info ci:tls-secret >"$TMP/registry.log" 2>&1 &
svc_pids+=($!)
it_stunnel registry "$tls" "$plain" "$TMP/reg.pem" "$TMP/reg.key"
for _ in $(seq 50); do
    curl -sf --cacert "$TMP/test-ca.pem" -u ci:tls-secret "https://127.0.0.1:$tls/subjects" >/dev/null 2>&1 && break
    sleep 0.1
done
printf 'basic ci:tls-secret\n' >"$TMP/auth"
it_make_input "$TMP/a.jsonl" 50 a
submit() {
    "$RECLASS" submit --brokers "$BROKERS" --topic tickets --job-id "$1" --tenant acme \
        --schema-registry "https://127.0.0.1:$tls" --schema-registry-ca "$TMP/$2.pem" \
        --schema-registry-auth-file "$TMP/auth" --no-progress "$TMP/a.jsonl"
}
submit job-tls test-ca >"$TMP/ok.log" 2>&1 || fail "submit over TLS: $(cat "$TMP/ok.log")"
grep -q "schema id 100001 under subject tickets-value" "$TMP/ok.log" || fail "no registration: $(cat "$TMP/ok.log")"
grep -q "submitted 50 tickets" "$TMP/ok.log" || fail "job not delivered: $(cat "$TMP/ok.log")"
rc=0
submit job-wrong other-ca >"$TMP/wrong.log" 2>&1 || rc=$?
cat "$TMP/wrong.log"
[ "$rc" = 1 ] || fail "wrong CA: exit $rc, want 1"
grep -q -i "certificate\|SSL" "$TMP/wrong.log" || fail "wrong CA: the message does not name the TLS failure"
grep -q "nothing was sent" "$TMP/wrong.log" || fail "wrong CA: must stop before sending"
grep -q "tls-secret" "$TMP/ok.log" "$TMP/wrong.log" && fail "the registry password appears in a message"
echo PASS
