#!/usr/bin/env bash
# PostgreSQL with sslmode=verify-full: a throwaway server with a certificate for 127.0.0.1
# signed by a throwaway CA. reclass migrate and run connect over TLS with sslrootcert=CA (the
# worker stores a job, pg_stat_ssl shows its connection encrypted); with another CA, migrate
# refuses at once, exit 1, saying the certificate could not be verified.
#   run_pg_tls.sh RECLASS_BIN
source "$(dirname "$0")/lib.sh" "$1"
it_start_pg
pgdata=$TMP/pg/data
it_tls_ca pg-ca && it_tls_ca other-ca
it_tls_cert pg-ca "$pgdata/server.crt" "$pgdata/server.key"
chmod 600 "$pgdata/server.key"
[ "$(id -u)" = 0 ] && chown postgres "$pgdata/server.key" "$pgdata/server.crt"
psql_q "ALTER SYSTEM SET ssl = on" >/dev/null
psql_q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
tls_db="$DB?sslmode=verify-full&sslrootcert=$TMP/pg-ca.pem"
wrong_db="$DB?sslmode=verify-full&sslrootcert=$TMP/other-ca.pem"

"$RECLASS" migrate --db "$tls_db" >"$TMP/migrate_tls.log" 2>&1 || fail "migrate over verify-full: $(cat "$TMP/migrate_tls.log")"
t0=$SECONDS
rc=0
"$RECLASS" migrate --db "$wrong_db" >"$TMP/migrate_wrong.log" 2>&1 || rc=$?
echo "migrate, wrong CA: exit $rc in $((SECONDS - t0)) s: $(head -n 1 "$TMP/migrate_wrong.log")"
[ "$rc" = 1 ] || fail "migrate with the wrong CA exited $rc, want 1"
grep -qi "certificate verify failed" "$TMP/migrate_wrong.log" || fail "migrate: no certificate failure named"

it_start_broker tickets
it_make_input "$TMP/in.jsonl" 30
it_submit tickets pgtls "$TMP/in.jsonl"
"$RECLASS" run --brokers "$BROKERS" --db "$tls_db" --model "$MODEL" --backend cpu --idle-exit 4 \
    --http-port 0 >"$TMP/worker.out" 2>"$TMP/worker.log" &
WORKER_PID=$!
svc_pids+=("$WORKER_PID")
it_wait_rows pgtls 30 60
encrypted=$(psql_q "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                    WHERE a.application_name = 'reclass' AND s.ssl")
echo "reclass connections over TLS: $encrypted"
[ "$encrypted" -ge 1 ] || fail "no reclass connection uses TLS"
wait "$WORKER_PID" || fail "run over verify-full exited $?"
it_check_job pgtls 30
echo PASS
