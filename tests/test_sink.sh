#!/usr/bin/env bash
# Runs the sink's integration test (a C program) against a throwaway PostgreSQL that this
# script starts and always stops, pass or fail.
#   test_sink.sh TEST_BINARY
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?test binary}
tmp=$(mktemp -d /tmp/reclass-sink.XXXXXX)
cleanup() {
    bash "$here/lib/pg_tmp.sh" stop "$tmp/pg" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
url=$(bash "$here/lib/pg_tmp.sh" start "$tmp/pg")
RECLASS_TEST_DB=$url RECLASS_TEST_PGDIR=$tmp/pg RECLASS_TEST_PGTMP=$here/lib/pg_tmp.sh "$bin"
