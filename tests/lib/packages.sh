#!/usr/bin/env bash
# Sourced by tests/run.sh and deploy/demo.sh: installs what is missing of the one package list,
# tests/packages.txt (Debian packages with apt-get, pip:SPEC rows with python3 -m pip).
#   pkg_install KIND...     e.g. pkg_install demo test
# Returns non-zero when apt-get fails; a pip row that cannot be installed is reported and
# skipped (the tests that need it say so).
pkg_install() {
    local list root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    list=$root/tests/packages.txt
    local apt=() pip=() mods=() missing=() p
    local -A seen=()
    while read -r pkg kind what; do
        case $pkg in '' | '#'*) continue ;; esac
        [[ " $* " == *" $kind "* ]] || continue
        if [[ $pkg == pip:* ]]; then
            pip+=("${pkg#pip:}")
            mods+=("$(grep -o 'py:[A-Za-z0-9_.]*' <<<"${what%%#*}" | head -n 1)")
        elif [ -z "${seen[$pkg]:-}" ]; then
            seen[$pkg]=1
            apt+=("$pkg")
        fi
    done <"$list"
    # "installed" only: a package removed but not purged (status "deinstall ok config-files")
    # still answers `dpkg -s`, and its commands are gone.
    for p in "${apt[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=
        if [ "$(id -u)" != 0 ]; then
            command -v sudo >/dev/null || { echo "packages: need root or sudo to install ${missing[*]}" >&2; return 1; }
            sudo=sudo
        fi
        echo "packages: installing ${missing[*]}" >&2
        $sudo apt-get update -qq || return
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || return
    fi
    local i args
    for i in "${!pip[@]}"; do
        python3 -c "import ${mods[$i]#py:}" 2>/dev/null && continue
        args=(-q --disable-pip-version-check "${pip[$i]}")
        python3 -m pip install "${args[@]}" 2>/dev/null ||
            python3 -m pip install --break-system-packages "${args[@]}" ||
            echo "packages: ${pip[$i]} could not be installed (pip): the tests that need it skip" >&2
    done
    return 0
}
