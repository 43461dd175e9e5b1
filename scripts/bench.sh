#!/usr/bin/env bash
# First throughput comparison: idserver GETID against redis-server INCR under
# the same redis-benchmark command, in the same run, on 127.0.0.1.
#
#   scripts/bench.sh [requests]      (default 1000000)
#
# Prints requests/s for each and the ratio idserver/redis. Both servers are
# started here on free ports and stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
for tool in redis-server redis-benchmark; do
	command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install redis-server redis-tools" >&2; exit 1; }
done

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "server on port $1 did not start" >&2; exit 1
}

go build -o "$tmp/idserver" .
ip=$(free_port); rp=$(free_port)
"$tmp/idserver" --port "$ip" --loglevel warning 2>"$tmp/idserver.log" & pids+=($!)
redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$tmp/redis.log" & pids+=($!)
wait_port "$ip"; wait_port "$rp"

# rps PORT ARGS... prints requests per second of one redis-benchmark run.
rps() {
	local port=$1; shift
	redis-benchmark -h 127.0.0.1 -p "$port" -n "$n" -q "$@" 2>/dev/null |
		tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i == "requests") print $(i-1) }' | tail -1
}

printf '%-22s %14s %14s %7s\n' "run (-n $n)" "idserver GETID" "redis INCR" "ratio"
for opts in "-c 50" "-c 50 -P 16"; do
	a=$(rps "$ip" $opts GETID)
	b=$(rps "$rp" $opts INCR k)
	printf '%-22s %14s %14s %7.2f\n' "$opts" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
done
