#!/usr/bin/env bash
# Every tracked C, header and CUDA file is formatted as .clang-format says (clang-format 14,
# Debian 12's). Fix with: git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "clang-format not installed (apt-get install clang-format)"; exit 1; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: nothing to list"; exit 77; }
out=$(git ls-files -z '*.c' '*.h' '*.cu' '*.cuh' | xargs -0 clang-format --dry-run 2>&1 | grep 'warning:' || true)
if [ -n "$out" ]; then
    echo "$out" | head -n 40
    echo "FAIL: $(grep -c 'warning:' <<<"$out") places not clang-formatted (see above)"
    exit 1
fi
echo "PASS: $(git ls-files '*.c' '*.h' '*.cu' '*.cuh' | wc -l) files formatted"
