# syntax=docker/dockerfile:1
#
# cycled container image: a static binary on distroless, running as a non-root user.
#
#   make docker   # or: docker build -t cycled:dev --build-arg VERSION=$(git describe --always --dirty) --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --rm -p 8080:8080 cycled:dev                                  # the demo
#   docker run --rm -p 8080:8080 -v $PWD/cycled.yaml:/etc/cycled/cycled.yaml:ro \
#       -e CYCLED_CONFIG=/etc/cycled/cycled.yaml -e CYCLED_HTTP_ADMIN_TOKEN=... cycled:dev
#
# The daemon listens on 0.0.0.0:8080 (CYCLED_HTTP_ADDR). Admin routes (POST /ticks,
# /modules, /config/reload, …) need an admin token on a non-loopback listener: without
# CYCLED_HTTP_ADMIN_TOKEN (or http.admin_token_file, e.g. a mounted secret) they answer
# 403, by design. Read routes, /healthz and /metrics need no token.
#
# Real-time priority for the tick (cycle.realtime_priority, README): the non-root user may
# use SCHED_FIFO up to its RLIMIT_RTPRIO, e.g.
#   docker run --ulimit rtprio=10 -e CYCLED_CYCLE_REALTIME_PRIORITY=10 ... cycled:dev
# Precise timing at high rates on a machine with few cores keeps its period better on one
# P (README, "Precise timing on a small machine"): docker run -e GOMAXPROCS=1 ...

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# The repository is a Go workspace (go.work) of several modules; the daemon's is cmd/cycled.
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod go mod download
ARG VERSION=dev
ARG COMMIT=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/cycled ./cmd/cycled \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cycled /usr/local/bin/cycled
# Runtime registrations (POST /modules) persist here; mount a volume to keep them.
COPY --from=build --chown=65532:65532 /out/state /var/lib/cycled
ENV CYCLED_HTTP_ADDR=0.0.0.0:8080 \
    CYCLED_STATE_DIR=/var/lib/cycled \
    CYCLED_LOG_FORMAT=json
USER 65532:65532
EXPOSE 8080
VOLUME ["/var/lib/cycled"]
# distroless has no curl: the binary checks itself (GET /healthz on CYCLED_HTTP_ADDR, a
# wildcard host meaning loopback). /healthz fails when ticks stop advancing.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/cycled", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/cycled"]
CMD ["run"]
