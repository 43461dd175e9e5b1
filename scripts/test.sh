#!/usr/bin/env bash
# Runs idserver's whole test suite: formatting, vet, every Go test as a
# newcomer runs it (no race detector: timing-bound tests show up here),
# twice but the end-to-end tests once, then once under the race detector,
# then each fuzz target briefly.
# The end-to-end tests drive the server with the real redis-cli and
# redis-benchmark, replies and the glob matcher are checked against
# redis-server's, the client matrix (clients/) runs the Go clients,
# redis-py (Debian's, and PyPI's with its asyncio client), valkey-py, redis-rs, the Node clients (the versions people pin), Jedis, Lettuce, Spring Data Redis and Redisson, hiredis, redis-rb, phpredis, Predis and Perl's Redis, the
# cluster tests run etcd (e2e's Redis Cluster test also runs redis-py's
# RedisCluster, from python3-redis 4.3.4, and ioredis's, node-redis's and
# Valkey GLIDE's cluster clients, from the lock file, as drivers:
# e2e/clusterdriver_test.go), and -race needs cgo and a C compiler, so Debian's
# redis-tools, redis-server, python3-redis, nodejs, a JDK and Maven, libhiredis-dev,
# ruby-redis, php-cli, php-redis, php-predis, libredis-perl, etcd-server,
# iproute2, gcc and prometheus (promtool) are installed first when missing, the Node clients
# from clients/node/package-lock.json, the Python ones from
# clients/python/requirements.txt into a virtualenv, and clients/rust is
# built from its Cargo.lock. Every server a test starts listens
# on 127.0.0.1 and is stopped by the test itself.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v redis-server >/dev/null || need+=(redis-server)
command -v script >/dev/null || need+=(bsdutils)
command -v gcc >/dev/null || need+=(gcc)
command -v ip >/dev/null || need+=(iproute2) # protected-mode tests: a second loopback address; partition tests: namespaces
command -v etcd >/dev/null || need+=(etcd-server) # cluster mode tests: a real etcd
/usr/bin/python3 -c 'import redis' 2>/dev/null || need+=(python3-redis)
case "$(command -v python3)" in # clients/python/.venv: Debian's python3 makes one only with python3-venv
"") need+=(python3 python3-venv) ;;
/usr/bin/python3) dpkg -s python3-venv >/dev/null 2>&1 || need+=(python3-venv) ;;
esac
command -v node >/dev/null && command -v npm >/dev/null || need+=(nodejs npm)
command -v javac >/dev/null && command -v mvn >/dev/null || need+=(default-jdk-headless maven) # clients/java: Jedis, Lettuce, Spring Data Redis, Redisson
# The clients of other languages (clients/c, ruby, php, perl), Debian's own.
echo '#include <hiredis/hiredis.h>' | gcc -E -x c - >/dev/null 2>&1 || need+=(libhiredis-dev) # hiredis: TestHiredis compiles against it
ruby -e 'require "redis"' 2>/dev/null || need+=(ruby-redis) # redis-rb (brings ruby)
command -v php >/dev/null || need+=(php-cli) # the php command: php-redis and php-predis do not ask for it
php -r 'exit(extension_loaded("redis") ? 0 : 1);' 2>/dev/null || need+=(php-redis) # phpredis, the extension
php -r 'require "Predis/autoload.php";' >/dev/null 2>&1 || need+=(php-predis) # Predis (php-nrk-predis is its transitional name)
perl -MRedis -e 1 2>/dev/null || need+=(libredis-perl) # Perl's Redis.pm
# promtool: lints /metrics, runs the alerting rules' tests and parses the
# dashboard's queries (e2e/monitoring_test.go). Without its recommends:
# the exporters and the web console are not needed.
norec=()
command -v promtool >/dev/null || norec+=(prometheus)
if [ ${#need[@]} -gt 0 ] || [ ${#norec[@]} -gt 0 ]; then
	echo "installing ${need[*]} ${norec[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
	[ ${#norec[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${norec[@]}" >/dev/null
fi
# ioredis 6 and node-redis 6 need Node.js 20 or later.
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
	echo "Node.js $(node --version) is too old for the Node clients (ioredis 6, node-redis 6 need 20+): install Node.js 20, e.g. from nodesource" >&2
	exit 1
fi
npm ci --prefix clients/node --no-audit --no-fund --loglevel=error >/dev/null
# The Java clients' jar (clients/java/README.md): Maven Central into
# clients/java/.m2 (its .mvn/maven.config; git-ignored) the first time
# (about 11 s, 75 MB), about 3 s after; no test fetches anything. Quiet
# unless it fails.
if ! out=$(cd clients/java && mvn -q -B package 2>&1); then
	echo "$out" >&2
	echo "building clients/java (mvn -q -B package) failed" >&2
	exit 1
fi
# PyPI's redis-py and valkey-py, exactly as clients/python/requirements.txt
# pins them (with their hashes), in a virtualenv of the project's made by
# the python3 first on PATH (3.11 to 3.13: kubernetes-validate's rpds-py has wheels for those), made again if its interpreter
# is gone: about 15-30 s the first time (downloads), a second or two after.
venv=clients/python/.venv
if ! "$venv/bin/python" -c '' 2>/dev/null; then
	rm -rf "$venv"
	python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --require-hashes --only-binary :all: -r clients/python/requirements.txt
# kubernetes-validate, which checks deploy/kubernetes against Kubernetes's
# schemas offline, pinned alike, into the same virtualenv.
"$venv/bin/pip" install -q --disable-pip-version-check --require-hashes --only-binary :all: -r deploy/kubernetes/validate-requirements.txt
# redis-rs from crates.io, as clients/rust/Cargo.lock pins it, built into
# clients/rust/target: about 30 s the first time (downloads too), nothing after.
# rustup installs into ~/.cargo/bin, which a shell without its profile
# (CI's, say) does not have on PATH.
command -v cargo >/dev/null || [ ! -x "$HOME/.cargo/bin/cargo" ] || PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null; then
	echo "cargo is missing: clients/rust (redis-rs 1.8) needs Rust 1.88 or later, e.g. from rustup" >&2
	exit 1
fi
cargo build -q --locked --manifest-path clients/rust/Cargo.toml

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
# The client matrix (clients/) is a module of its own, so that the
# server's go.mod holds only what the server needs: ./... of the root
# does not reach it, and each step below runs it explicitly.
go vet ./...
(cd clients && go vet ./...)
# Every package twice, but e2e once (its tests run servers and wait out
# leases and restarts: about 9 min a run here, 15 beside two CPU hogs;
# twice, the suite passed CI's 30 minutes); the timeouts are hang guards.
go test -count=2 -timeout 20m "$@" $(go list ./... | grep -v '/e2e$')
(cd clients && go test -count=2 -timeout 20m "$@" ./...)
go test -count=1 -timeout 30m "$@" ./e2e
go test -race -count=1 -timeout 30m "$@" ./...
(cd clients && go test -race -count=1 -timeout 30m "$@" ./...)

# Every fuzz target, briefly (FUZZTIME each, 50000 inputs by default,
# seconds each here): the seed corpora already ran as plain tests above;
# this explores a little further. A count, not a duration: with a
# duration, Go 1.26's fuzz coordinator can fail a target with "context
# deadline exceeded" as time runs out (golang/go#75804, fixed in 1.27).
for mod in . clients; do
	for pkg in $(cd "$mod" && go list ./...); do
		for target in $(cd "$mod" && go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
			(cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME:-50000x}" "$pkg")
		done
	done
done
