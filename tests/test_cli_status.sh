#!/usr/bin/env bash
# The exit code of every status class (common/status.h, mapped by common_status_exit; each
# code's mapping: tests/test_common_err.c): 0 done
# (a result, --help, version), 1 runtime failure, 2 usage error with a one-line message that
# says what to fix, for every command that classifies. 3 (`drift report` found drift) needs
# a database: tests/integration/run_drift.sh checks it.
#   test_cli_status.sh RECLASS_BIN
set -uo pipefail
bin=${1:?usage: test_cli_status.sh RECLASS_BIN}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/deploy/models/clinc150-bert-mini
pass=0
fail=0
# expect RC NEEDLE CMD...: CMD exits RC; with a NEEDLE, stderr is one line that contains it
expect() {
    local want=$1 needle=$2 rc=0 err
    shift 2
    err=$("$@" 2>&1 >/dev/null </dev/null) || rc=$?
    if [ "$rc" != "$want" ]; then
        fail=$((fail + 1)); echo "FAIL - '$*' exited $rc, want $want: $err"
    elif [ -n "$needle" ] && { [ "$(wc -l <<<"$err")" != 1 ] || ! grep -qF -- "$needle" <<<"$err"; }; then
        fail=$((fail + 1)); echo "FAIL - '$*': want one line with '$needle', got: $err"
    else
        pass=$((pass + 1)); echo "ok - exit $want: $*"
    fi
}

# 0: done
expect 0 "" "$bin" version
expect 0 "" "$bin" help
for cmd in run classify bench tokenize submit migrate dev-broker plan-memory report; do
    expect 0 "" "$bin" "$cmd" --help
done
expect 0 "" "$bin" help classify
expect 0 "" bash -c 'echo "what is my balance" | "$0" classify --model "$1" --threads 1' "$bin" "$model"

# 1: runtime failure (the results cannot be written)
if [ -w /dev/full ]; then
    expect 1 "writing stdout failed" bash -c \
        'echo "what is my balance" | "$0" classify --model "$1" --threads 1 >/dev/full' "$bin" "$model"
fi
expect 1 "" "$bin" run --db "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2" --model "$model"
# the sink's own status reaches main() untranslated: a database away (COMMON_RETRY) is a
# runtime failure once the command gives up
expect 1 "cannot connect to PostgreSQL" "$bin" jobs --db "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"

# 2: usage errors, the same for each command that classifies
expect 2 "" "$bin"
expect 2 "unknown command 'nope'" "$bin" nope
expect 2 "unknown option '--bogus'" "$bin" classify --bogus
expect 2 "the cpu backend runs fp32" "$bin" run --db x --model "$model" --backend cpu --precision fp16
expect 2 "the cpu backend runs fp32" "$bin" classify --model "$model" --backend cpu --precision fp16
expect 2 "the cpu backend runs fp32" "$bin" bench --model "$model" --workload tickets-mix --precision fp16
expect 2 "below the longest sequence" "$bin" run --db x --model "$model" --token-budget 100
expect 2 "below the longest sequence" "$bin" classify --model "$model" --token-budget 100
expect 2 "below the longest sequence" "$bin" bench --model "$model" --workload tickets-mix --token-budget 100
expect 2 "unknown backend 'tpu'" "$bin" classify --model "$model" --backend tpu
expect 2 "config.json" "$bin" classify --model /nonexistent
expect 2 "config.json" "$bin" plan-memory --model /nonexistent --token-budget 1024
# ... and a connection string that does not parse is the user's to fix
expect 2 "invalid database connection string" "$bin" jobs --db "host=127.0.0.1 port"
expect 2 "invalid database connection string" "$bin" drift report --db "host=127.0.0.1 port"
# a checkpoint saved the old way: the loader's usage error, with its detail and hint on the line
ckpt=$(mktemp -d)
cp "$model/config.json" "$model/vocab.txt" "$ckpt/" && : >"$ckpt/pytorch_model.bin"
expect 2 "missing (only pytorch_model.bin is there); save the model with safe_serialization=True" \
    "$bin" classify --model "$ckpt"

# The installed layout: data directories are found next to the executable, none is compiled in
inst=$(mktemp -d)
trap 'rm -rf "$ckpt" "$inst"' EXIT
mkdir -p "$inst/bin" && cp "$bin" "$inst/bin/reclass"
expect 2 "no schemas directory found" env -u RECLASS_SCHEMAS "$inst/bin/reclass" run --db x --model "$model"
mkdir -p "$inst/share/reclass" && cp -r "$root/consumers/schemas" "$inst/share/reclass/schemas"
expect 1 "" env -u RECLASS_SCHEMAS "$inst/bin/reclass" run \
    --db "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2" --model "$model"

# Every code of common/status.h has its exit checked: the mapping of each in test_common_err,
# and here (or in the test named) a command that returns it. A code added to the enum without
# a row here fails, so its exit is decided, and tested, where the others' are.
declare -A reached=(
    [COMMON_OK]="here: classify, exit 0"
    [COMMON_DONE]="here: every command's --help, exit 0"
    [COMMON_USAGE]="here: unknown options, bad settings, exit 2"
    [COMMON_FATAL]="here: classify into /dev/full, exit 1"
    [COMMON_RETRY]="here: jobs with PostgreSQL away, exit 1"
    [COMMON_FOUND]="it_run_drift: drift report with tenants in drift, exit 3"
    [COMMON_BUG]="test_cli_settings: a row's default out of its range fails --help (exit 1)"
    [COMMON_MISSING]="it_run_schema_registry: a schema id the registry lacks (a dead letter, no exit)"
    [COMMON_DATA]="test_sink: rows PostgreSQL refuses (inside the sink: split out, listed; no exit)"
)
codes=$(sed -n '/^typedef enum {/,/} common_status_t;/p' "$root/common/status.h" |
    grep -oE '^ *COMMON_[A-Z_]+' | tr -d ' ')
[ "$(wc -w <<<"$codes")" -ge 9 ] || { fail=$((fail + 1)); echo "FAIL - no codes read from status.h"; }
for c in $codes; do
    if [ -n "${reached[$c]:-}" ]; then
        pass=$((pass + 1)); echo "ok - $c: ${reached[$c]}"
    else
        fail=$((fail + 1)); echo "FAIL - $c (common/status.h) has no row here: decide its exit and test it"
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
