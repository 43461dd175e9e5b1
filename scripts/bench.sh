#!/usr/bin/env bash
# Benchmark harness: idserver against redis-server on the same machine, in
# the same run, under the same redis-benchmark commands, interleaved A/B.
#
#   scripts/bench.sh [rounds]             (default 3; about 60 s a round, 10 s more at the end)
#   BASELINE=<git rev> scripts/bench.sh   adds idserver built at rev as a third column set
#
# Rows (idserver vs redis):
#   GETID vs INCR k                 at -c 50, -c 50 -P 16, -c 200
#   MGETID 100 vs INCRBY k 100      how people reserve 100 IDs from a counter
#   MGETID 100 vs LRANGE ids 0 99   a reply of the same shape: 100 bulks of 18 digits
#   GETID vs INCR k, appendfsync always   the durable way people use INCR for IDs
#   GETID vs INCR k over TLS        at -c 50 and -c 50 -P 16 (both servers with
#                                   tls-auth-clients yes: a client certificate)
#   INCR k (sequences) vs INCR k    one key, at -c 50 and -c 50 -P 16
#   INCR key:__rand_int__ -r 100000 100,000 random keys, likewise, made before
#                                   the rounds (a key's first INCR waits for its
#                                   first write: a line after the table says
#                                   what making them cost, and the rounds
#                                   measure them warm)
#   INCR k vs INCR k, appendfsync always, -c 1   the durable way, one client:
#                                   Redis cannot share an fsync among clients
#   PUBLICID n, PRIVATEID s vs GETID   one number each, at -c 50 and -c 50
#                                   -P 16, without a key and against a
#                                   second idserver with public-id-key:
#                                   the redis columns of these rows are
#                                   GETID on the same idserver, in the
#                                   same run
#   Redis Cluster: GETID, INCR k and INCR key:__rand_int__ -r 100000 at
#                                   -c 50 -P 16 against a node with
#                                   cluster-enabled yes over a real etcd
#                                   (Debian's etcd-server), owning every
#                                   slot, vs redis-server with
#                                   cluster-enabled yes owning every slot:
#                                   what checking each key's slot costs
#   cluster vs one server: INCR k and INCR key:__rand_int__ -r 100000 at
#                                   -c 50 -P 16, the same cluster node
#                                   against a single idserver (its
#                                   "redis" columns): what sequences over
#                                   etcd cost; etcd's writes per second
#                                   under each cluster row are printed
#                                   after the table
# Last, etcd's writes per second under INCR over 1,000 and over 1,000,000
# keys in use, on a cluster node of its own (the keys made first): they
# must not grow with the keys.
# MGETID rows use a second idserver with id-range 2 shard-range 19
# random-range 0 (the default layout caps a server at 512 IDs per ms).
# Last, once: GETID -P 16 against a default-layout idserver with
# max-lead-ms 500, long enough to hold it at the lead bound, showing the
# rate it sustains there (512 IDs per ms) and that it waits, not refuses.
# Prints requests/s, p50 and p99 (ms) and the server's CPU time per request
# (us, user + system, from /proc) as medians over the rounds, and the
# median of the per-round ratios idserver/redis of requests/s and of CPU
# per request. redis-benchmark takes a core of its own, so on a 2-core
# machine requests/s is often the client's limit; CPU per request is what
# the server itself costs. Every server is started here on 127.0.0.1 and
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}

need=()
for tool in redis-server redis-benchmark redis-cli openssl etcd; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
	sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-tools openssl etcd-server >/dev/null
fi

tmp=$(mktemp -d)
pids=()
declare -A pid_of # port -> server pid, for its CPU time
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
	echo "server on port $1 did not start; its logs end:" >&2
	tail -n 5 "$tmp"/*.log >&2
	exit 1
}
info_cmd() { redis-cli -p "$1" "${@:2:$#-2}" | tr -d '\r' | awk -F: -v k="${!#}" '$1 == k { print $2 }'; } # port cmd... field
info() { info_cmd "$1" info "$2" "$3"; }

# A CA, and a server and a client certificate it signed, for the TLS rows.
certs() {
	local d=$tmp/tls
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 1 -subj /CN=bench-ca 2>/dev/null
	for who in server client; do
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/$who.key" -out "$d/$who.csr" -subj "/CN=$who" 2>/dev/null
		openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -out "$d/$who.crt" -days 1 \
			-extfile <(echo "subjectAltName=IP:127.0.0.1") 2>/dev/null
	done
}
certs
tls_server=(--tls-cert-file "$tmp/tls/server.crt" --tls-key-file "$tmp/tls/server.key" --tls-ca-cert-file "$tmp/tls/ca.crt")
tls_client="--tls --cacert $tmp/tls/ca.crt --cert $tmp/tls/client.crt --key $tmp/tls/client.key"

go build -o "$tmp/idserver" .
start_idserver() { # port dir args...
	local port=$1 dir=$2; shift 2
	mkdir -p "$dir"
	"$tmp/idserver" --port "$port" --dir "$dir" --loglevel warning "$@" 2>>"$tmp/idserver.log" & pids+=($!)
	pid_of[$port]=$!
}
ip=$(free_port); wp=$(free_port); rp=$(free_port); ap=$(free_port); lp=$(free_port); itp=$(free_port); rtp=$(free_port); kp=$(free_port)
start_idserver "$ip" "$tmp/default" --tls-port "$itp" "${tls_server[@]}"
pid_of[$itp]=${pid_of[$ip]}
start_idserver "$lp" "$tmp/limit" --max-lead-ms 500
start_idserver "$kp" "$tmp/keyed" --public-id-key "$(openssl rand -hex 16)"
start_idserver "$wp" "$tmp/wide" --id-range 2 --shard-range 19 --random-range 0 --mgetid-max 100000
redis-server --port "$rp" --tls-port "$rtp" "${tls_server[@]}" --bind 127.0.0.1 --save "" --appendonly no >"$tmp/redis.log" & pids+=($!)
pid_of[$rp]=$!
pid_of[$rtp]=$!
redis-server --port "$ap" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --dir "$tmp" >"$tmp/aof.log" & pids+=($!)
pid_of[$ap]=$!
# Redis Cluster: an idserver over etcd and a redis-server, each a node
# owning every slot.
ep=$(free_port); epp=$(free_port); cp=$(free_port); cwp=""
# redis-server's cluster bus listens 10000 above its port, so its port
# must be 55535 or less (one run in several drew a higher one, and the
# node did not start).
rcp=$(free_port); while [ "$rcp" -gt 55535 ]; do rcp=$(free_port); done
etcd --name bench --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
	--listen-peer-urls "http://127.0.0.1:$epp" --initial-advertise-peer-urls "http://127.0.0.1:$epp" \
	--initial-cluster "bench=http://127.0.0.1:$epp" >"$tmp/etcd.log" 2>&1 & pids+=($!)
start_idserver "$cp" "$tmp/cluster" --cluster-enabled yes --etcd-endpoints "127.0.0.1:$ep"
# etcd's revision: one more at every write.
etcd_rev() { curl -s -X POST "http://127.0.0.1:$ep/v3/kv/range" -d '{"key":"AA=="}' | grep -o '"revision":"[0-9]*"' | head -1 | tr -dc 0-9; }
redis-server --port "$rcp" --bind 127.0.0.1 --save "" --appendonly no --cluster-enabled yes \
	--cluster-config-file "$tmp/nodes.conf" >"$tmp/redis-cluster.log" & pids+=($!)
pid_of[$rcp]=$!
for p in "$ip" "$wp" "$rp" "$ap" "$lp" "$kp" "$cp" "$rcp"; do wait_port "$p"; done
redis-cli -p "$rcp" cluster addslotsrange 0 16383 >/dev/null
for p in "$cp" "$rcp"; do
	for _ in $(seq 300); do [ "$(info_cmd "$p" cluster info cluster_slots_ok)" = 16384 ] && break; sleep 0.1; done
	[ "$(info_cmd "$p" cluster info cluster_slots_ok)" = 16384 ] || { echo "the cluster node on port $p does not own every slot" >&2; exit 1; }
done
# 100 numbers of 18 digits, the shape of an MGETID 100 reply.
redis-cli -p "$rp" rpush ids $(seq 787082868470841634 787082868470841733) >/dev/null
bp=""; bwp=""
if [ -n "${BASELINE:-}" ]; then
	git worktree add -q --detach "$tmp/base" "$BASELINE"
	(cd "$tmp/base" && go build -o "$tmp/idserver-base" .)
	bp=$(free_port); bwp=$(free_port)
	(cd "$tmp" && exec "$tmp/idserver-base" --port "$bp" --loglevel warning 2>>"$tmp/base.log") & pids+=($!)
	pid_of[$bp]=$!
	mkdir -p "$tmp/basewide"
	(cd "$tmp/basewide" && exec "$tmp/idserver-base" --port "$bwp" --loglevel warning \
		--id-range 2 --shard-range 19 --random-range 0 --mgetid-max 100000 2>>"$tmp/base.log") & pids+=($!)
	pid_of[$bwp]=$!
	wait_port "$bp"; wait_port "$bwp"
fi

# The public strings of one ID-sized number, for the PRIVATEID rows.
pub_n=787082868470841634
pub=$(redis-cli -p "$ip" publicid "$pub_n"); kpub=$(redis-cli -p "$kp" publicid "$pub_n")

# Rows: name | idserver port var | idserver command | redis port var | redis command | options | requests
rows=(
	"GETID vs INCR, -c 50|ip|GETID|rp|INCR k|-c 50|200000"
	"GETID vs INCR, -c 50 -P 16|ip|GETID|rp|INCR k|-c 50 -P 16|1000000"
	"GETID vs INCR, -c 200|ip|GETID|rp|INCR k|-c 200|200000"
	"MGETID 100 vs INCRBY k 100|wp|MGETID 100|rp|INCRBY k 100|-c 50|100000"
	"MGETID 100 vs LRANGE 100|wp|MGETID 100|rp|LRANGE ids 0 99|-c 50|100000"
	"GETID vs INCR appendfsync always|ip|GETID|ap|INCR k|-c 50|50000"
	"GETID vs INCR, TLS -c 50|itp|GETID|rtp|INCR k|-c 50 $tls_client|200000"
	"GETID vs INCR, TLS -c 50 -P 16|itp|GETID|rtp|INCR k|-c 50 -P 16 $tls_client|1000000"
	"INCR one key, -c 50|ip|INCR k|rp|INCR k|-c 50|200000"
	"INCR one key, -c 50 -P 16|ip|INCR k|rp|INCR k|-c 50 -P 16|1000000"
	"INCR 100k keys, -c 50|ip|INCR key:__rand_int__|rp|INCR key:__rand_int__|-c 50 -r 100000|200000"
	"INCR 100k keys, -c 50 -P 16|ip|INCR key:__rand_int__|rp|INCR key:__rand_int__|-c 50 -P 16 -r 100000|1000000"
	"INCR vs appendfsync always, -c 1|ip|INCR k|ap|INCR k|-c 1|5000"
	"PUBLICID vs GETID, -c 50|ip|PUBLICID $pub_n|ip|GETID|-c 50|200000"
	"PUBLICID vs GETID, -c 50 -P 16|ip|PUBLICID $pub_n|ip|GETID|-c 50 -P 16|1000000"
	"PRIVATEID vs GETID, -c 50|ip|PRIVATEID $pub|ip|GETID|-c 50|200000"
	"PRIVATEID vs GETID, -c 50 -P 16|ip|PRIVATEID $pub|ip|GETID|-c 50 -P 16|1000000"
	"keyed PUBLICID vs GETID, -c 50|kp|PUBLICID $pub_n|kp|GETID|-c 50|200000"
	"keyed PUBLICID vs GETID, -P 16|kp|PUBLICID $pub_n|kp|GETID|-c 50 -P 16|1000000"
	"keyed PRIVATEID vs GETID, -c 50|kp|PRIVATEID $kpub|kp|GETID|-c 50|200000"
	"keyed PRIVATEID vs GETID, -P 16|kp|PRIVATEID $kpub|kp|GETID|-c 50 -P 16|1000000"
	"Redis Cluster: GETID vs INCR, -P 16|cp|GETID|rcp|INCR k|-c 50 -P 16|1000000"
	"Redis Cluster: INCR one key, -P 16|cp|INCR k|rcp|INCR k|-c 50 -P 16|1000000"
	"Redis Cluster: INCR 100k keys, -P 16|cp|INCR key:__rand_int__|rcp|INCR key:__rand_int__|-c 50 -P 16 -r 100000|300000"
	"cluster vs one server: INCR one key|cp|INCR k|ip|INCR k|-c 50 -P 16|1000000"
	"cluster vs one server: INCR 100k keys|cp|INCR key:__rand_int__|ip|INCR key:__rand_int__|-c 50 -P 16 -r 100000|1000000"
)

# cpu_ticks PID prints the process's user + system CPU time in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# bench PORT N OPTS CMD... prints "rps p50 p99 cpu_us_per_request
# etcd_writes_per_second" of one redis-benchmark run (etcd's for a
# cluster node, 0 for the others).
bench() {
	local port=$1 n=$2 opts=$3; shift 3
	local pid=${pid_of[$port]} before after rev0=0 rev1=0 t0 t1
	[ "$port" = "$cp" ] || [ "$port" = "$cwp" ] && rev0=$(etcd_rev)
	t0=$(date +%s%N)
	before=$(cpu_ticks "$pid")
	redis-benchmark -h 127.0.0.1 -p "$port" -n "$n" $opts --csv "$@" 2>/dev/null |
		awk -F'","' 'NR == 2 { printf "%s %s %s", $2, $5, $7 }'
	after=$(cpu_ticks "$pid")
	t1=$(date +%s%N)
	[ "$rev0" = 0 ] || rev1=$(etcd_rev)
	awk -v t=$((after - before)) -v hz="$hz" -v n="$n" -v w=$((rev1 - rev0)) -v d=$((t1 - t0)) \
		'BEGIN { printf " %.2f %.1f\n", t * 1e6 / hz / n, w * 1e9 / d }'
}

# Make the 100,000 random keys once, before the rounds (400,000 requests
# reach 98% of them): else the first round alone pays for making them,
# and the median of three is the worse of the other two.
new_keys() { bench "$1" 400000 "-c 50 -r 100000" INCR key:__rand_int__; }
read -r new_id_rps _ _ new_id_cpu <<<"$(new_keys "$ip")"
read -r new_r_rps _ _ new_r_cpu <<<"$(new_keys "$rp")"
read -r new_c_rps _ _ new_c_cpu new_c_etcd <<<"$(new_keys "$cp")"
new_keys "$rcp" >/dev/null

results="$tmp/results"
: >"$results"
for round in $(seq "$rounds"); do
	for i in "${!rows[@]}"; do
		IFS='|' read -r name iv icmd rv rcmd opts n <<<"${rows[$i]}"
		# Alternate who goes first, so neither side always runs warm.
		order="id redis"; [ $(((round + i) % 2)) -eq 0 ] && order="redis id"
		for side in $order; do
			if [ "$side" = id ]; then
				echo "$i id $(bench "${!iv}" "$n" "$opts" $icmd)" >>"$results"
				if [ -n "$bp" ] && [ "$iv" != itp ] && [ "$iv" != cp ] && [ "$iv" != kp ] && [[ $icmd != INCR* && $icmd != P*ID* ]]; then # the baseline may predate TLS, sequences, Redis Cluster and public IDs
					basev=bp; [ "$iv" = wp ] && basev=bwp
					echo "$i base $(bench "${!basev}" "$n" "$opts" $icmd)" >>"$results"
				fi
			else
				echo "$i redis $(bench "${!rv}" "$n" "$opts" $rcmd)" >>"$results"
			fi
		done
	done
	echo "round $round of $rounds done" >&2
done

# One table: medians over the rounds, and the median per-round ratio.
names=$(printf '%s\n' "${rows[@]}" | cut -d'|' -f1)
awk -v names="$names" -v base="${bp:+1}" '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{ k = $1 SUBSEP $2; c[k]++; rps[k, c[k]] = $3; p50[k, c[k]] = $4; p99[k, c[k]] = $5; cpu[k, c[k]] = $6; etcd[k, c[k]] = $7 }
END {
	split(names, name, "\n")
	printf "%-34s %11s %6s %6s %6s %11s %6s %6s %6s %6s %6s", "row", "idserver/s", "p50", "p99", "us/req", "redis/s", "p50", "p99", "us/req", "ratio", "cpu"
	if (base) printf " %11s %6s %6s %6s", "base/s", "us/req", "ratio", "cpu"
	printf "\n"
	for (r = 0; r < length(name); r++) {
		out = ""
		for (s = 1; s <= 3; s++) {
			side = s == 1 ? "id" : s == 2 ? "redis" : "base"
			if (side == "base" && !base) continue
			k = r SUBSEP side; n = c[k]
			for (i = 1; i <= n; i++) { x[i] = rps[k, i]; y[i] = p50[k, i]; z[i] = p99[k, i]; w[i] = cpu[k, i] }
			m[side] = median(x, n); q50[side] = median(y, n); q99[side] = median(z, n); us[side] = median(w, n)
			for (i = 1; i <= n; i++) {
				ratio[side, i] = rps[r SUBSEP side, i] / rps[r SUBSEP "redis", i]
				rc = cpu[r SUBSEP "redis", i]
				cratio[side, i] = rc > 0 ? cpu[r SUBSEP side, i] / rc : 0
			}
		}
		for (i = 1; i <= c[r SUBSEP "id"]; i++) { x[i] = ratio["id", i]; y[i] = cratio["id", i] }
		rid = median(x, c[r SUBSEP "id"]); cid = median(y, c[r SUBSEP "id"])
		printf "%-34s %11.0f %6.3f %6.3f %6.2f %11.0f %6.3f %6.3f %6.2f %6.2f %6.2f", name[r+1], m["id"], q50["id"], q99["id"], us["id"], m["redis"], q50["redis"], q99["redis"], us["redis"], rid, cid
		if (base && c[r SUBSEP "base"] > 0) {
			for (i = 1; i <= c[r SUBSEP "base"]; i++) { x[i] = ratio["base", i]; y[i] = cratio["base", i] }
			printf " %11.0f %6.2f %6.2f %6.2f", m["base"], us["base"], median(x, c[r SUBSEP "base"]), median(y, c[r SUBSEP "base"])
		}
		printf "\n"
		if (etcd[r SUBSEP "id", 1] > 0) {
			for (i = 1; i <= c[r SUBSEP "id"]; i++) x[i] = etcd[r SUBSEP "id", i]
			wline = wline sprintf("  %s: %.1f etcd writes/s\n", name[r+1], median(x, c[r SUBSEP "id"]))
		}
	}
	if (wline != "") printf "\netcd writes per second under the cluster node'"'"'s rows (median):\n%s", wline
}' "$results"

echo
echo "default layout (512 IDs/ms): lead_ms $(info "$ip" idgen lead_ms), max_lead_seen_ms $(info "$ip" idgen max_lead_seen_ms) (max-lead-ms 5000), lead_refusals $(info "$ip" idgen lead_refusals), ids_issued $(info "$ip" idgen ids_issued)"
echo "making 100,000 keys (INCR key:__rand_int__ -r 100000 -c 50, 400000 requests, before the rounds): idserver $new_id_rps/s, $new_id_cpu us/req; redis $new_r_rps/s, $new_r_cpu us/req;" \
	"cluster node $new_c_rps/s ($(awk -v a="$new_c_rps" -v b="$new_id_rps" 'BEGIN { printf "%.2f", a / b }') of one server), $new_c_cpu us/req, $new_c_etcd etcd writes/s"
echo "reservation writes: default $(info "$ip" persistence reservation_saves), wide $(info "$wp" persistence reservation_saves) (2 fsyncs each)"

# At the physical limit: 5M GETIDs, about 10 s at 512 per ms.
n=5000000
start=$(date +%s%N)
read -r rps p50 p99 cpu <<<"$(bench "$lp" "$n" "-c 50 -P 16" GETID)"
secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
echo "at the limit (default layout, max-lead-ms 500, GETID -c 50 -P 16, $n requests in ${secs}s): $rps requests/s," \
	"p50 $p50 p99 $p99 ms; max_lead_seen_ms $(info "$lp" idgen max_lead_seen_ms), lead_waits $(info "$lp" idgen lead_waits)," \
	"lead_refusals $(info "$lp" idgen lead_refusals), error replies $(info "$lp" stats total_error_replies)"

# etcd's writes per second at 1,000 and at 1,000,000 keys in use, on a
# cluster node of its own prefix: each key set made first, then INCRed
# at random for the measure.
cwp=$(free_port)
start_idserver "$cwp" "$tmp/cluster-writes" --cluster-enabled yes --etcd-endpoints "127.0.0.1:$ep" --etcd-prefix /bench-writes/ --seq-max-keys 1100000
wait_port "$cwp"
for _ in $(seq 300); do [ "$(info_cmd "$cwp" cluster info cluster_slots_ok)" = 16384 ] && break; sleep 0.1; done
for keys in 1000 1000000; do
	bench "$cwp" $((keys * 3 + 100000)) "-c 50 -P 16 -r $keys" INCR "w$keys:__rand_int__" >/dev/null
	read -r rps _ _ _ wps <<<"$(bench "$cwp" 2000000 "-c 50 -P 16 -r $keys" INCR "w$keys:__rand_int__")"
	echo "etcd writes with $keys keys in use (INCR -c 50 -P 16 -r $keys, 2000000 requests): $wps/s at $rps requests/s"
done
