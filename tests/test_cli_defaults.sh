#!/usr/bin/env bash
# Every default of an option is written once, in its row of the option table (worker/cli/), and
# printed from there: (1) no help text in worker/cli/ spells a default value itself (the row's
# def column does; a default that is no single value reads "default: ..."); (2) every option
# of `reclass run` that has a default shows it in --help; (3) README's copy of `reclass run
# --help` is that output; (4) every command's --help exits 0: --help sets the rows' defaults
# first and a default that does not parse within its row's range fails it (exit 1), so this is
# every row's default parsing, and each "(default X)" --help prints is a value of its row;
# (5) no help text names a model family or geometry by hand: the lists are the registry's
# (gpu/families/registry.h), printed by --help.
# Usage: test_cli_defaults.sh RECLASS_BIN SOURCE_DIR
set -u
bin=$1
root=$2
fail=0
check() { # name expected actual
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; fail=1; fi
}

# (1) "(default 200)", "default 0 = ...", "(default %ld)": a value written in help text beside
# its row's (cli.c's printer of the row's default aside).
hits=$(grep -nE '"[^"]*(\(default [^:)"]|default [0-9%])' "$root"/worker/cli/*.c |
    grep -vF 'fprintf(f, "      %s (default %s)\n", o->help, o->def);')
check "no default value written in help text" "" "$hits"

# (5) a family or geometry named in a string of worker/cli/ (the registry's lists are printed)
hits=$(grep -nE '"[^"]*(bert-[a-z]|electra-|deberta|DistilBERT|RoBERTa|ModernBERT|ELECTRA)' \
    "$root"/worker/cli/*.c)
check "no family or geometry listed by hand in help text" "" "$hits"
for want in modernbert-base deberta-v3-base electra-small; do
    "$bin" bench --help | grep -qF -- "$want"; check "bench --help lists geometry $want" 0 $?
done
"$bin" classify --help | grep -qF -- "deberta-v2"; check "classify --help lists family deberta-v2" 0 $?

# (2) the rows' defaults reach --help: each listed with its value.
help=$("$bin" run --help); rc=$?
check "run --help: exit 0" 0 "$rc"
for want in "(default 127.0.0.1:9092)" "(default tickets)" "(default reclass)" "(default 200)" \
    "(default 120)" "(default 30)" "(default 8192)" "(default 50)" "(default 3)" \
    "(default 0.0.0.0)" "(default 60)" "(default 4096)" "(default 10)" "(default cpu)"; do
    echo "$help" | grep -qF -- "$want"; check "run --help shows $want" 0 $?
done
# every option that takes a value says what it is when not given: its row's default, a
# "default:" sentence, "(required)", or it is one of these, which are simply off when not given
none=" --stats-json --schema-registry --schema-registry-auth-file --schema-registry-ca --kafka "
none+="--tenant-weight "
missing=$(echo "$help" | awk -v none="$none" '
    /^  --/ { if (opt != "" && !ok) print opt
              opt = $1; valued = ($2 != "" && $2 !~ /^\$/)  # "--name ARG" vs "--name [$VAR]"
              ok = !valued || index(none, " " opt " ") > 0; next }
    /\(default [^:]|default: |\(required\)/ { ok = 1 }
    END { if (opt != "" && !ok) print opt }')
check "run --help: every valued option tells its default" "" "$missing"

# (4) every command: its rows' defaults parse (--help exits 0) and each shows its value
for cmd in run classify bench tokenize submit migrate dev-broker plan-memory report jobs \
    "drift baseline" "drift report"; do
    # shellcheck disable=SC2086 # "drift report" is a command and its subcommand
    out=$("$bin" $cmd --help 2>&1); rc=$?
    check "$cmd --help: exit 0 (its rows' defaults parse)" 0 "$rc"
    bad=$(echo "$out" | grep -E '\(default ' | grep -vE '\(default [^)]+\)$')
    check "$cmd --help: each default is one value at its line's end" "" "$bad"
done

# (3) README's copy
readme=$(sed -n '/^<!-- reclass run --help: begin -->$/,/^<!-- reclass run --help: end -->$/p' \
    "$root/README.md" | sed '1,2d;$d' | sed '$d')
if [ "$readme" != "$help" ]; then
    echo "FAIL README's copy of 'reclass run --help' differs; the difference (< README, > --help):"
    diff <(echo "$readme") <(echo "$help") | head -20
    echo "     regenerate it between the markers in README.md from: reclass run --help"
    fail=1
else
    echo "ok   README's copy of reclass run --help is current"
fi
exit $fail
