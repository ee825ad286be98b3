#!/usr/bin/env bash
# reclass report on a finished job, rendered in headless Chromium (Debian's chromium; absent,
# the check fails): no console message, nothing fetched from outside the file, every chart a
# well-formed SVG, the sections there. A page with a script error must fail the same check
# (the check's own control). SCREENSHOT, when given, gets a PNG of the page (800 px wide).
#   report_check.sh RECLASS_BIN DB_URL JOB WORK_DIR [SCREENSHOT.png]
set -uo pipefail
bin=${1:?reclass} db=${2:?db} job=${3:?job} dir=${4:?work dir} shot=${5:-}
chrome=$(command -v chromium || command -v chromium-browser) \
    || { echo "FAIL: chromium not found (apt-get install chromium)"; exit 1; }
# render FILE: the DOM after load on stdout, Chromium's log (console included) in FILE.log
render() {
    timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$dir/chrome-profile" --enable-logging=stderr --v=0 \
        --dump-dom "file://$1" 2>"$1.log"
}
# check FILE: 0 when the page is clean
check() {
    local f=$1 dom rc=0
    dom=$(render "$f") || { echo "chromium failed on $f"; return 1; }
    if grep -a 'CONSOLE' "$f.log"; then echo "console messages from $f"; rc=1; fi
    if grep -aEo '(src|href)="[^"]*"|url\([^)]*\)|<script[^>]*src|@import' "$f" | grep -aEv '="#' \
        | grep -aq .; then
        echo "$f loads something from outside itself:"
        grep -aEo '(src|href)="[^"]*"|url\([^)]*\)' "$f" | head -3
        rc=1
    fi
    for s in "Label distribution" "Confidence histogram" "Least confident tickets" "Drift" \
        "Throughput" "Device memory"; do
        grep -q "<h2>$s" <<<"$dom" || { echo "$f: section '$s' missing after rendering"; rc=1; }
    done
    /usr/bin/python3 - "$f" <<'PY' || rc=1
import re, sys, xml.etree.ElementTree as ET
html = open(sys.argv[1], encoding="utf-8").read()
svgs = re.findall(r"<svg.*?</svg>", html, re.S)
if len(svgs) < 4:
    sys.exit("%s: %d charts, want at least 4" % (sys.argv[1], len(svgs)))
for s in svgs:
    ET.fromstring(s)  # raises on a malformed chart
print("%d well-formed SVG charts" % len(svgs))
PY
    return $rc
}
"$bin" report --db "$db" --job "$job" --out "$dir/report.html" || { echo "FAIL: reclass report exited $?"; exit 1; }
echo "report: $(wc -c <"$dir/report.html") bytes"
check "$dir/report.html" || { echo "FAIL: the report does not render cleanly"; exit 1; }
# the control: the same page with a script error and an outside image must fail
sed 's|</body>|<script>undefinedFunction();</script><img src="https://example.invalid/x.png"></body>|' \
    "$dir/report.html" >"$dir/bad.html"
if check "$dir/bad.html" >"$dir/bad.out" 2>&1; then
    echo "FAIL: the check passed a page with a script error"; exit 1
fi
grep -q "CONSOLE" "$dir/bad.out" || { echo "FAIL: the control's console error went unseen"; cat "$dir/bad.out"; exit 1; }
if [ -n "$shot" ]; then
    timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir="$dir/chrome-profile" --force-device-scale-factor=0.8 \
        --window-size=1000,2980 --screenshot="$shot" \
        "file://$dir/report.html" >/dev/null 2>&1 || { echo "FAIL: screenshot"; exit 1; }
    echo "screenshot: $shot"
fi
echo "report_check: ok"
