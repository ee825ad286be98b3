#!/usr/bin/env bash
# reclass run's command line: --help documents every flag with its RECLASS_* variable; user
# errors exit 2 with a one-line message that says what to fix; a flag beats its variable.
#   run_cli.sh RECLASS_BIN
set -euo pipefail
bin=${1:?reclass executable}
root=$(cd "$(dirname "$0")/../.." && pwd)
model=$root/deploy/models/clinc150-bert-mini
fail() { echo "FAIL: $*" >&2; exit 1; }

help=$("$bin" run --help) || fail "--help exited non-zero"
for v in BROKERS TOPIC GROUP DB MODEL BACKEND PRECISION TOKEN_BUDGET MAX_WAIT_MS IDLE_EXIT \
         DLQ_TOPIC THREADS; do
    flag=--$(echo "$v" | tr 'A-Z_' 'a-z-')
    grep -q -- "$flag " <<<"$help" || fail "--help does not list $flag"
    grep -q "\$RECLASS_$v" <<<"$help" || fail "--help does not name RECLASS_$v"
done

# expect_usage_error "message part" args... : exit 2, one line on stderr containing the part
expect_usage_error() {
    local want=$1 rc=0 err
    shift
    err=$(env -u RECLASS_DB -u RECLASS_MODEL "$@" 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2 ($err)"
    [ "$(wc -l <<<"$err")" = 1 ] || fail "'$*': want one line, got: $err"
    grep -q -- "$want" <<<"$err" || fail "'$*': message '$err' lacks '$want'"
}
expect_usage_error "give --db" "$bin" run --model "$model"
expect_usage_error "give --model" "$bin" run --db postgresql://x/y
expect_usage_error "unknown option '--bogus'" "$bin" run --bogus
expect_usage_error "--token-budget: 'abc'" "$bin" run --db x --model "$model" --token-budget abc
expect_usage_error "RECLASS_TOKEN_BUDGET: 'abc'" env RECLASS_TOKEN_BUDGET=abc "$bin" run
expect_usage_error "use cpu or cuda" "$bin" run --db x --model "$model" --backend tpu
expect_usage_error "below the longest sequence" "$bin" run --db x --model "$model" --token-budget 100
expect_usage_error "config.json" "$bin" run --db x --model /nonexistent
expect_usage_error "must differ from --topic" "$bin" run --db x --model "$model" --dlq-topic tickets
expect_usage_error "--kafka needs KEY=VALUE" "$bin" run --db x --model "$model" --kafka nonsense
# lanes and tenants' weights
expect_usage_error "priority 'x' is not an integer" "$bin" run --db x --model "$model" --topic a:x,b:1
expect_usage_error "an empty topic name" "$bin" run --db x --model "$model" --topic a:0,:1
expect_usage_error "must differ from --topic (b)" "$bin" run --db x --model "$model" --topic a:0,b:1 --dlq-topic b
expect_usage_error "give TENANT=WEIGHT" env RECLASS_TENANT_WEIGHTS=acme "$bin" run --db x --model "$model"
expect_usage_error "weight must be an integer in 1..1000" "$bin" run --db x --model "$model" --tenant-weight a=2,b=0
expect_usage_error "--lane 'fast': use urgent or bulk" "$bin" submit --lane fast --job-id j --tenant t /dev/null
# a flag beats its variable: the bad variable is overridden, so the flag's error shows
expect_usage_error "--backend 'gpu'" env RECLASS_BACKEND=tpu "$bin" run --db x --model "$model" --backend gpu
# an unreachable database is a runtime failure (exit 1), not a usage error
rc=0
"$bin" run --db "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2" --model "$model" \
    >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "unreachable database: exit $rc, want 1"

# reclass --version: one "key: value" line per item; the build's librdkafka and commit
ver=$("$bin" --version) || fail "--version exited non-zero"
[ "$("$bin" version)" = "$ver" ] || fail "'reclass version' differs from --version"
for key in reclass commit librdkafka cuda; do
    grep -q "^$key: ." <<<"$ver" || fail "--version lacks '$key:': $ver"
done
grep -Eq '^commit: ([0-9a-f]{40}(-dirty)?|unknown)$' <<<"$ver" || fail "--version commit: $ver"
if git -C "$root" rev-parse -q --verify HEAD >/dev/null 2>&1; then # a checkout: a real commit
    commit=$(sed -n 's/^commit: \([0-9a-f]\{40\}\).*/\1/p' <<<"$ver")
    [ -n "$commit" ] && git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null \
        || fail "--version names no commit of this checkout: $ver"
fi
# the vendored librdkafka is exactly the release in third_party/
grep -Eq '^librdkafka: (2\.15\.0 \(vendored\)|[0-9.]+ \(system\))$' <<<"$ver" \
    || fail "--version librdkafka: $ver"
# reclass submit refuses identifiers the worker could never store (invalid UTF-8, NUL, over
# 256 bytes) before it connects to anything: exit 2, naming the flag or the line and field
sub=$(mktemp -d /tmp/reclass-cli.XXXXXX)
trap 'rm -rf "$sub"' EXIT
printf 'id,text\nok1,fine\n' >"$sub/ok.csv"
expect_usage_error "--tenant: field tenant: invalid UTF-8 at byte 2 (0xc3 0x28)" \
    "$bin" submit --brokers 127.0.0.1:1 --job-id j --tenant "$(printf 'ac\xc3\x28me')" "$sub/ok.csv"
expect_usage_error "--job-id: field job_id: invalid UTF-8 at byte 0 (0xff)" \
    "$bin" submit --brokers 127.0.0.1:1 --job-id "$(printf '\xff')" --tenant t "$sub/ok.csv"
printf 'id,text\nok1,fine\nx\xed\xa0\x80,surrogate id\n' >"$sub/bad.csv"
expect_usage_error "bad.csv: line 3: field ticket_id: invalid UTF-8 at byte 1" \
    "$bin" submit --brokers 127.0.0.1:1 --job-id j --tenant t --id-column id "$sub/bad.csv"
{ printf 'id,text\n'; printf '%0300d,long id\n' 1; } >"$sub/long.csv"
expect_usage_error "long.csv: line 2: field ticket_id is 300 bytes (limit 256)" \
    "$bin" submit --brokers 127.0.0.1:1 --job-id j --tenant t --id-column id "$sub/long.csv"
# a text over the codec's 4 MiB cap is refused in the counting pass, before anything is sent
python3 -c 'import json; print(json.dumps({"id": "a", "text": "ok"})); print(json.dumps({"id": "b", "text": "x" * (4608 * 1024)}))' >"$sub/big.jsonl"
expect_usage_error "big.jsonl: line 2: field text is 4718592 bytes (limit 4194304)" \
    "$bin" submit --brokers 127.0.0.1:1 --job-id j --tenant t "$sub/big.jsonl"
# a vocab.txt with more tokens than config.json's vocab_size is refused at load (exit 2), not at
# the first ticket that uses one of the extra ids
mkdir "$sub/model"
for f in "$model"/*; do ln -s "$f" "$sub/model/"; done
rm "$sub/model/vocab.txt"
{ cat "$model/vocab.txt"; printf 'extra%d\n' 1 2 3; } >"$sub/model/vocab.txt"
expect_usage_error "vocab.txt has 30525 tokens, config.json's vocab_size is 30522" \
    "$bin" classify --model "$sub/model"
echo PASS
