#!/usr/bin/env bash
# Throughput comparison: idserver GETID against redis-server INCR under the
# same redis-benchmark command, in the same run, on 127.0.0.1.
#
#   scripts/bench.sh [requests]          (default 1000000)
#   BASELINE=<git rev> scripts/bench.sh  also measures idserver built at rev
#
# Prints requests/s for each, the ratio idserver/redis, and how many fsyncs
# per second idserver's reservation did during its runs (two per write: the
# file and its directory). Every server is started here on a free port and
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
for tool in redis-server redis-benchmark redis-cli; do
	command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install redis-server redis-tools" >&2; exit 1; }
done

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "${BASELINE:-}" ] && git worktree remove --force "$tmp/base" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "server on port $1 did not start" >&2; exit 1
}
info() { redis-cli -p "$1" info "$2" | tr -d '\r' | awk -F: -v k="$3" '$1 == k { print $2 }'; }

go build -o "$tmp/idserver" .
ip=$(free_port); rp=$(free_port)
mkdir "$tmp/state"
"$tmp/idserver" --port "$ip" --dir "$tmp/state" --loglevel warning 2>"$tmp/idserver.log" & pids+=($!)
redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$tmp/redis.log" & pids+=($!)
wait_port "$ip"; wait_port "$rp"
bp=""
if [ -n "${BASELINE:-}" ]; then
	git worktree add -q --detach "$tmp/base" "$BASELINE"
	(cd "$tmp/base" && go build -o "$tmp/idserver-base" .)
	bp=$(free_port)
	(cd "$tmp" && exec "$tmp/idserver-base" --port "$bp" --loglevel warning 2>"$tmp/base.log") & pids+=($!)
	wait_port "$bp"
fi

# rps PORT ARGS... prints requests per second of one redis-benchmark run.
rps() {
	local port=$1; shift
	redis-benchmark -h 127.0.0.1 -p "$port" -n "$n" -q "$@" 2>/dev/null |
		tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i == "requests") print $(i-1) }' | tail -1
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

header="run (-n $n)"
printf '%-14s %14s' "$header" "idserver GETID"
[ -n "$bp" ] && printf ' %14s' "base GETID"
printf ' %12s %7s' "redis INCR" "ratio"
[ -n "$bp" ] && printf ' %10s' "base ratio"
printf ' %10s\n' "fsyncs/s"
for opts in "-c 50" "-c 50 -P 16"; do
	saves0=$(info "$ip" persistence reservation_saves); t0=$(date +%s.%N)
	a=$(rps "$ip" $opts GETID)
	saves1=$(info "$ip" persistence reservation_saves); t1=$(date +%s.%N)
	[ -n "$bp" ] && base=$(rps "$bp" $opts GETID)
	r=$(rps "$rp" $opts INCR k)
	printf '%-14s %14s' "$opts" "$a"
	[ -n "$bp" ] && printf ' %14s' "$base"
	printf ' %12s %7s' "$r" "$(ratio "$a" "$r")"
	[ -n "$bp" ] && printf ' %10s' "$(ratio "$base" "$r")"
	printf ' %10s\n' "$(awk -v s="$((saves1 - saves0))" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", 2 * s / (b - a) }')"
done
