# idserver in a container: a static binary on distroless, as uid 65532.
#
#   docker build -t idserver .
#   docker run -d --name idserver -v idserver-data:/data \
#     -p 6551:6551 -p 127.0.0.1:9121:9121 \
#     -e IDSERVER_SERVER_ID=0 -e IDSERVER_REQUIREPASS=change-me idserver
#
# The metrics port has no authentication: publish it on the host's
# loopback (or a private address) only. Inside the container it listens
# on every interface (IDSERVER_METRICS_ADDR below), or nothing outside
# the container could reach it.
#
# The server keeps Redis's protected-mode: with no password and a
# non-loopback bind it serves loopback clients only, and a client of a
# container never is one. So set IDSERVER_REQUIREPASS (or, on a private
# network and knowingly, IDSERVER_PROTECTED_MODE=no). Every server needs a
# server-id of its own (IDSERVER_SERVER_ID, 0..3 on the default layout).
# Counters (INCR) across several servers need etcd
# (IDSERVER_ETCD_ENDPOINTS, docs/cluster.md): without it each container
# keeps its own, and two of them hand out the same numbers.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no libc, which distroless/static lacks), without build paths or
# symbols. packaging_test.go runs this very line: keep it on one line.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/idserver .
# The state directory, owned by the nonroot user: an empty named volume
# mounted on /data starts as a copy of it, so the server can write there.
RUN mkdir -p /out/data && chown 65532:65532 /out/data && chmod 0700 /out/data

# No shell, no package manager: the binary is the only program, and it
# probes itself for the health check.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/idserver /idserver
COPY --from=build --chown=65532:65532 /out/data /data
# The durable reservation (idserver.state), the sequences (idserver.seq)
# and their lock live here: keep the volume across restarts and upgrades.
# A server with an empty /data starts its IDs max-lead-ms ahead of its
# clock (that repeats no ID only if the clock has not gone back further
# since its last run), but without etcd restarts every counter at 1: INCR
# repeats the numbers it handed out.
VOLUME /data
WORKDIR /data
ENV IDSERVER_DIR=/data IDSERVER_BIND=0.0.0.0 IDSERVER_METRICS_ADDR=0.0.0.0:9121
EXPOSE 6551 9121
USER 65532:65532
# --check-ready reads the same configuration as the server (this ENV, any
# -e IDSERVER_*) and asks its /readyz on metrics-addr over loopback.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s CMD ["/idserver", "--check-ready"]
# SIGTERM (docker stop) stops accepting, finishes the replies, writes the
# reservation and exits 0 within a few seconds, inside docker stop's 10 s.
ENTRYPOINT ["/idserver"]
