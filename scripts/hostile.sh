#!/usr/bin/env bash
# Figures for clients that misbehave, in one run, on 127.0.0.1:
#  - against the binary on its defaults, for 4 s each: 4 clients
#    pipelining MGETID 10000 without reading, 20 MULTI floods never read,
#    10 unfinished 64 MiB commands, 2 clients of CONFIG GETs of 1022
#    bracket sets: peak RSS, the worst PING on another connection
#    (e2e/memory_test.go) and what redis-cli --latency saw meanwhile on
#    one more (its max is how the project judges latency under attack:
#    under 250 ms on a quiet machine), RUNS times (5 by default); then
#    the same against a Redis Cluster node over etcd (HOSTILE_ETCD=1);
#  - 7 clients flooding CLUSTER GETKEYSINSLOT 6392 100000000 over
#    100,000 keys of 500 bytes (e2e/slotflood_test.go): the same
#    figures (PING under 0.5 s on a quiet machine);
#  - 200 pipelined CONFIG GETs of the backtracking glob ('*?' x 24 + '*n')
#    and 3 of 64 KiB: the server's CPU, and a PING meanwhile (glob_test.go);
#  - what one glob pattern costs against every configuration key.
# The tests behind the first two also assert bounds; this prints figures.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTILE_CLI_LATENCY=1 go test -count="${RUNS:-5}" -run '^TestHostileClientsMemory$' -v ./e2e | grep -E 'peak RSS|redis-cli --latency|^(---|FAIL|ok)'
HOSTILE_ETCD=1 HOSTILE_CLI_LATENCY=1 go test -count="${RUNS:-5}" -run '^TestHostileClientsMemory$' -v ./e2e | grep -E 'peak RSS|redis-cli --latency|^(---|FAIL|ok)'
HOSTILE_CLI_LATENCY=1 go test -count="${RUNS:-5}" -run '^TestGetKeysInSlotFlood$' -v ./e2e | grep -E 'peak RSS|redis-cli --latency|^(---|FAIL|ok)'
go test -count=1 -run '^TestConfigGetHostilePatterns$' -v ./respserver | grep -E 'globs|^(---|FAIL|ok)'
go test -run '^$' -bench '^BenchmarkConfigGetGlob$' ./respserver | grep -E '^Benchmark'
