#!/usr/bin/env bash
# Failover figures on the defaults (etcd-lease-ttl 5 s, the serving
# horizon 2 s), in one run, on 127.0.0.1, RUNS times (3 by default):
#  - three Redis Cluster nodes over a local etcd, one killed with kill -9:
#    the longest gap between two replies of one of its keys to a go-redis
#    cluster client INCRing it without a pause (asserted under 8 s: the
#    TTL, the horizon and a second);
#  - the three stopped gracefully at once and started again at once: how
#    long after the last start every key is served (asserted under 6 s);
#  - the leader of a 3-member etcd killed: how long until a write
#    succeeds again (the election a lease must outlive).
# Each run takes about 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count="${RUNS:-3}" -run '^(TestFailoverKill9OnDefaults|TestFullRestartOnDefaults)$' -v ./e2e | grep -E 'unanswered for|every key served|^(---|FAIL|ok)'
go test -count="${RUNS:-3}" -run '^TestLeaseSurvivesElection$' -v ./etcdsession | grep -E 'writes succeed|^(---|FAIL|ok)'
