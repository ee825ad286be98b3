#!/usr/bin/env bash
# `reclass tokenize` end to end: plain and JSONL input, truncation, and the user errors.
# usage: test_cli_tokenize.sh RECLASS_BIN MODEL_DIR
set -u
bin=$1 model=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, want, got
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1"; echo "  want: $2"; echo "  got:  $3"; fails=$((fails + 1))
    fi
}

# Expected ids come from Hugging Face (tests/fixtures and tokenizers 0.23.3).
want_plain='[101,2129,2052,2017,2360,4875,1999,3059,102]
[101,7592,2088,102]
[101,102]
[101,1045,2572,2145,3403,2006,2026,4003,1029,102]'
got=$(printf 'how would you say fly in italian\r\nHéllo Wörld\n\nI am still waiting on my card?' |
      "$bin" tokenize --model "$model"); rc=$?
check "plain: ids" "$want_plain" "$got"
check "plain: exit 0" 0 "$rc"

got=$(printf '{"text": "how would you say fly in italian", "label": "translate"}\n\n{"text":"H\\u00e9llo W\\u00f6rld"}\n{"text":""}\n{"id": 1, "text": "I am still waiting on my card?"}\n' |
      "$bin" tokenize --model "$model" --jsonl); rc=$?
check "jsonl: ids" "$want_plain" "$got"
check "jsonl: exit 0" 0 "$rc"

got=$(echo "I have been waiting over a week for my new card, is it still coming or should I cancel it?" |
      "$bin" tokenize --model "$model" --max-len 8)
check "max-len 8" "[101,1045,2031,2042,3403,2058,1037,102]" "$got"

# Many lines: output count equals input count and stays in order.
seq 1 5000 | sed 's/^/ticket number /' > "$tmp/many.txt"
got=$("$bin" tokenize --model "$model" < "$tmp/many.txt" | wc -l)
check "5000 lines in, 5000 out" 5000 "$got"
got=$("$bin" tokenize --model "$model" < "$tmp/many.txt" | sed -n 4321p)
want=$(echo "ticket number 4321" | "$bin" tokenize --model "$model")
check "line 4321 in order" "$want" "$got"

# Bad JSONL line: message names the line, exit 2.
printf '{"text":"a"}\n{"text":"b"}\n{"txt":"c"}\n' | "$bin" tokenize --model "$model" --jsonl \
    > "$tmp/out" 2> "$tmp/err"; rc=$?
check "bad jsonl: exit 2" 2 "$rc"
grep -q "line 3" "$tmp/err"; check "bad jsonl: message names line 3 ($(cat "$tmp/err"))" 0 $?

# Missing model dir: one-line message naming vocab.txt, exit 2.
"$bin" tokenize --model "$tmp/no-such-model" < /dev/null > "$tmp/out" 2> "$tmp/err"; rc=$?
check "missing model: exit 2" 2 "$rc"
grep -q "no-such-model/vocab.txt" "$tmp/err"; check "missing model: names the file ($(cat "$tmp/err"))" 0 $?
check "missing model: one line" 1 "$(wc -l < "$tmp/err")"

# Usage errors exit 2; --help exits 0 and documents the options.
"$bin" tokenize < /dev/null > /dev/null 2>&1; check "no --model: exit 2" 2 $?
"$bin" tokenize --model "$model" --max-len 1 < /dev/null > /dev/null 2>&1; check "--max-len 1: exit 2" 2 $?
"$bin" tokenize --model "$model" --max-len x < /dev/null > /dev/null 2>&1; check "--max-len x: exit 2" 2 $?
"$bin" tokenize --model "$model" --bogus < /dev/null > /dev/null 2>&1; check "unknown option: exit 2" 2 $?
"$bin" tokenize --model "$model" stray < /dev/null > /dev/null 2>&1; check "stray argument: exit 2" 2 $?
"$bin" tokenize --model < /dev/null > /dev/null 2>&1; check "--model without value: exit 2" 2 $?
got=$(echo "I have been waiting over a week for my new card" | "$bin" tokenize --model="$model" --max-len=4)
check "--opt=value form" "[101,1045,2031,102]" "$got"
help=$("$bin" tokenize --help); rc=$?
check "--help: exit 0" 0 "$rc"
for opt in --model --jsonl --max-len; do
    echo "$help" | grep -q -- "$opt"; check "--help mentions $opt" 0 $?
done

# do_lower_case false in tokenizer_config.json keeps case (cased vocab lookup).
mkdir -p "$tmp/cased"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\nHello\nhello\n' > "$tmp/cased/vocab.txt"
echo '{"do_lower_case": false}' > "$tmp/cased/tokenizer_config.json"
check "cased model" "[2,4,5,1,3]" "$(echo 'Hello hello HELLO' | "$bin" tokenize --model "$tmp/cased")"
# The other settings, with the ids tokenizers 0.23.3 (BertWordPieceTokenizer) gives.
printf 'h\303\251llo\n' >> "$tmp/cased/vocab.txt"
echo '{"do_lower_case": true, "strip_accents": false}' > "$tmp/cased/tokenizer_config.json"
check "lower case, accents kept" "[2,6,6,3]" "$(echo 'Héllo héllo' | "$bin" tokenize --model "$tmp/cased")"
echo '{"do_lower_case": false, "strip_accents": true}' > "$tmp/cased/tokenizer_config.json"
check "cased, accents stripped" "[2,4,5,3]" "$(echo 'Héllo héllo' | "$bin" tokenize --model "$tmp/cased")"
echo '{"tokenize_chinese_chars": false}' > "$tmp/cased/tokenizer_config.json"
check "no CJK spacing" "[2,1,3]" "$(echo 'hello世界' | "$bin" tokenize --model "$tmp/cased")"
echo '{}' > "$tmp/cased/tokenizer_config.json"
check "CJK spacing by default" "[2,5,1,1,3]" "$(echo 'hello世界' | "$bin" tokenize --model "$tmp/cased")"
echo '{"strip_accents": "yes"}' > "$tmp/cased/tokenizer_config.json"
echo x | "$bin" tokenize --model "$tmp/cased" > /dev/null 2> "$tmp/err"; rc=$?
check "strip_accents of the wrong type: exit 2" 2 "$rc"
grep -q "strip_accents" "$tmp/err"; check "... and the message names it" 0 $?
echo '{"do_lower_case": true, "strip_accents": null, "tokenize_chinese_chars": true}' > "$tmp/cased/tokenizer_config.json"
check "explicit defaults accepted" "[2,5,5,5,3]" "$(echo 'Hello hello HELLO' | "$bin" tokenize --model "$tmp/cased")"
echo '{"do_lower_case": tru' > "$tmp/cased/tokenizer_config.json"
echo x | "$bin" tokenize --model "$tmp/cased" > /dev/null 2>&1; check "broken tokenizer_config.json: exit 2" 2 $?
rm "$tmp/cased/tokenizer_config.json"
check "no config: lower-cased" "[2,5,5,5,3]" "$(echo 'Hello hello HELLO' | "$bin" tokenize --model "$tmp/cased")"

# A directory with tokenizer.json uses it (ids from tokenizers 0.23.3,
# tests/fixtures/tokenizers/golden); a feature it lacks is refused naming it, exit 2.
toks=$(dirname "$0")/fixtures/tokenizers
check "tokenizer.json: XLM-R Unigram" "[0,15,3,2407,2407,3756,3726,2841,2]" \
    "$(printf 'Ελλάδα' | "$bin" tokenize --model "$toks/xlmr-unigram")"
check "tokenizer.json: RoBERTa BPE, max-len 5" "[0,45,1137,539,2]" \
    "$(echo "I'd like to know what bitcoin means" | "$bin" tokenize --model "$toks/roberta-bpe" --max-len 5)"
mkdir -p "$tmp/badjson"
echo '{"normalizer":{"type":"Frobnicate"},"model":{"type":"BPE","vocab":{},"merges":[]}}' \
    > "$tmp/badjson/tokenizer.json"
echo x | "$bin" tokenize --model "$tmp/badjson" > /dev/null 2> "$tmp/err"; rc=$?
check "unsupported tokenizer.json: exit 2" 2 "$rc"
grep -q 'normalizer "Frobnicate" is not supported' "$tmp/err"
check "... and the message names it ($(cat "$tmp/err"))" 0 $?

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
