#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and the demo: initdb into a temp dir, listen on a
# free loopback port (tests/lib/free_port.py; another one when a parallel test took it first),
# trust auth. Runs as the 'postgres' OS user when invoked as root
# (initdb refuses root). The server trades durability for speed (fsync, synchronous_commit and
# full_page_writes off); PG_TMP_OPTS, postgres options appended after those (the last of a
# setting wins), runs it as a user would instead (tests/bench/host_scale.sh does).
#   pg_tmp.sh start DIR   -> prints a libpq URL on stdout (postgresql://postgres@127.0.0.1:PORT/reclass)
#   pg_tmp.sh stop DIR    -> stops it (fast shutdown); DIR is left for the caller to remove
#   pg_tmp.sh restart DIR -> stops and starts it on the same port (connection-loss tests)
set -euo pipefail
cmd=${1:?start|stop|restart}
dir=${2:?data dir}
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$bindir/initdb" ] || { echo "pg_tmp: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
as_pg() {
    # from / : the caller's directory (e.g. a clone under /root) may be closed to postgres
    if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# pg_start PORT: the server on PORT; its log in DIR/server.log
pg_start() {
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $1 -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off ${PG_TMP_OPTS:-}" start >/dev/null 2>&1
}
case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        # the postgres user must reach DIR through its parents (mktemp -d makes them 0700)
        p=$(dirname "$(readlink -f "$dir")")
        while [ "$p" != / ]; do chmod a+x "$p"; p=$(dirname "$p"); done
        chown postgres "$dir"
    fi
    chmod 700 "$dir"
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    for try in 1 2 3; do
        port=$(python3 "$here/free_port.py")
        rm -f "$dir/server.log"
        pg_start "$port" && break
        grep -q 'could not bind' "$dir/server.log" && [ "$try" != 3 ] || { cat "$dir/server.log" >&2; exit 1; }
    done
    echo "$port" >"$dir/port"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir/port"; fi
    as_pg "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAc "CREATE DATABASE reclass" >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/reclass"
    ;;
stop)
    [ -d "$dir/data" ] && as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
restart)
    port=$(cat "$dir/port")
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    pg_start "$port" || { cat "$dir/server.log" >&2; exit 1; }
    ;;
*) echo "pg_tmp: unknown command $cmd" >&2; exit 2 ;;
esac
