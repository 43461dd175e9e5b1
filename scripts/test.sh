#!/usr/bin/env bash
# Runs idserver's whole test suite: formatting, vet, and every Go test under
# the race detector. The end-to-end tests drive the server with the real
# redis-cli and redis-benchmark, so Debian's redis-tools is installed first
# when missing. Every server a test starts listens on 127.0.0.1 and is
# stopped by the test itself.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for tool in redis-cli redis-benchmark script; do
	command -v "$tool" >/dev/null || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "installing redis-tools for: ${need[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-tools bsdutils >/dev/null
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...
go test -race -count=1 -timeout 12m "$@" ./...
