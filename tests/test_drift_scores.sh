#!/usr/bin/env bash
# The drift scores of migrations/004_drift.sql against numpy/scipy (tests/drift_scores_check.py)
# on synthetic windows with known shifts, in a throwaway PostgreSQL (started here, always
# stopped). Needs Debian's python3 with python3-numpy and python3-scipy: missing, it fails.
#   test_drift_scores.sh RECLASS_BIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?reclass binary}
py=/usr/bin/python3
"$py" -c 'import numpy, scipy' || { echo "FAIL: $py lacks numpy/scipy (apt-get install python3-numpy python3-scipy)"; exit 1; }
tmp=$(mktemp -d /tmp/reclass-drift-scores.XXXXXX)
cleanup() {
    bash "$here/lib/pg_tmp.sh" stop "$tmp/pg" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
url=$(bash "$here/lib/pg_tmp.sh" start "$tmp/pg") || { echo "could not start PostgreSQL"; exit 1; }
"$bin" migrate --db "$url" --migrations "$here/../migrations" >/dev/null || { echo "FAIL: migrate"; exit 1; }
"$py" "$here/drift_scores_check.py" "$url"
