#!/usr/bin/env bash
# reclass drift / report command lines without a database: usage errors exit 2 saying what to
# fix, --help exits 0, an unreachable server exits 1.
#   run_drift_cli.sh RECLASS_BIN
set -uo pipefail
bin=${1:?reclass binary}
unset RECLASS_DB
fails=0
# expect RC NEEDLE ARGS...: exit status RC and NEEDLE in the output
expect() {
    local want=$1 needle=$2 out rc
    shift 2
    out=$("$bin" "$@" 2>&1); rc=$?
    if [ "$rc" = "$want" ] && grep -qF -- "$needle" <<<"$out"; then
        echo "ok   reclass $* -> $rc"
    else
        echo "FAIL reclass $*: exit $rc (want $want), output: $out"
        fails=$((fails + 1))
    fi
}
dead="postgresql://postgres@127.0.0.1:1/x?connect_timeout=2"
expect 2 "baseline|report" drift
expect 2 "baseline|report" drift frobnicate
expect 0 "--from TS" drift --help
expect 0 "--job J" drift baseline --help
expect 0 "Exit status 3" drift report --help
expect 0 "--out FILE" report --help
expect 0 "reclass report --db URL --job J" help report
expect 2 "--tenant T is required" drift baseline --db "$dead" --model m --job j
expect 2 "--model M is required" drift baseline --db "$dead" --tenant t --job j
expect 2 "not both" drift baseline --db "$dead" --tenant t --model m --job j --from 2026-01-01
expect 2 "pass --from TS --to TS" drift baseline --db "$dead" --tenant t --model m --from 2026-01-01
expect 2 "no database" drift report
expect 2 "use window, hour or day" drift report --db "$dead" --bucket week
expect 2 "--limit" drift report --db "$dead" --limit 0
expect 2 "--job J is required" report --db "$dead"
expect 2 "unknown option" report --db "$dead" --job j --colour
expect 2 "invalid database connection string" report --db "host=127.0.0.1 port" --job j
expect 1 "cannot connect to PostgreSQL" drift report --db "$dead"
expect 1 "cannot connect to PostgreSQL" report --db "$dead" --job j
echo "run_drift_cli: $fails failed"
[ "$fails" = 0 ]
