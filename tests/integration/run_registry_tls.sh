#!/usr/bin/env bash
# The Schema Registry client over TLS: the stand-in registry behind stunnel with a throwaway
# CA's certificate for 127.0.0.1. `submit --schema-registry https://... --schema-registry-ca CA`
# registers and delivers the job; with another CA it stops before sending anything, exit 1,
# naming the certificate problem; credentials from a file work, and never show in a message.
#   run_registry_tls.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
command -v stunnel4 >/dev/null || fail "stunnel4 is not installed (apt-get install stunnel4)"
it_start_broker tickets
ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" -keyout "$TMP/$1.key" \
    -out "$TMP/$1.pem" 2>/dev/null; }
ca test-ca && ca other-ca
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$TMP/reg.key" \
    -out "$TMP/reg.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$TMP/san.ext"
openssl x509 -req -in "$TMP/reg.csr" -CA "$TMP/test-ca.pem" -CAkey "$TMP/test-ca.key" \
    -CAcreateserial -days 2 -extfile "$TMP/san.ext" -out "$TMP/reg.pem" 2>/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
plain=$(free_port)
tls=$(free_port)
python3 "$it_root/tests/tools/schema_registry.py" --port "$plain" --state "$TMP/registry.json" \
    --user-info ci:tls-secret >"$TMP/registry.log" 2>&1 &
svc_pids+=($!)
cat >"$TMP/stunnel.conf" <<CONF
foreground = yes
pid =
output = $TMP/stunnel.log
[registry]
accept = 127.0.0.1:$tls
connect = 127.0.0.1:$plain
cert = $TMP/reg.pem
key = $TMP/reg.key
CONF
stunnel4 "$TMP/stunnel.conf" 2>>"$TMP/stunnel.log" &
svc_pids+=($!)
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
