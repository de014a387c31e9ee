GO ?= go
# The repository is a workspace (go.work) of several modules: the root module is the library
# and the daemon's light packages; cmd/cycled (the binary), the SQLite recorder, HA on etcd,
# the NATS export and tools/ are modules of their own, so that a program that embeds the
# engine never requires their dependencies. PKGS names every module's packages except the
# three test modules with targets of their own (tools/bench, deploy/check, daemon/ha/clustertest).
PKGS := ./... ./cmd/cycled/... ./daemon/ha/... ./daemon/natsexport/... ./daemon/recorder/sqlite/... \
	./tools/... ./examples/nats-consumer/...

.PHONY: tidy test test-deps test-rules test-python test-check test-ha bench-ha bench bench-tick bench-floor lint run build install docker soak operator-test bench-compare fmt bench-dashboard

# Version and commit stamped into the binary (cycled version, the cycled_build_info metric).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

## test: vet and run every test with the race detector (what CI runs), the comparison
## harness's own module (tools/bench/: its statistics, the peers' semantics, its verdicts) included.
## It first installs the system packages the tests need when they are missing (test-deps).
test: test-deps
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -timeout 5m ./cycle  # summary records are reused only without the race detector
	cd tools/bench && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-check
	$(MAKE) --no-print-directory test-ha

## test-deps: install what the tests need beyond Go when it is missing, saying what it
## installs: pytest, Chromium, promtool (scripts/test-deps; TEST_DEPS=true skips it).
TEST_DEPS ?= scripts/test-deps
test-deps:
	@$(TEST_DEPS)

## test-rules: the alert rules' unit tests (deploy/prometheus/cycled-alerts.test.yaml) with
## Prometheus's promtool: a healthy daemon, a stuck one and a down one.
PROMTOOL ?= promtool
test-rules:
	@command -v $(PROMTOOL) >/dev/null 2>&1 || { echo "test-rules: no promtool (scripts/test-deps installs it: apt-get install prometheus)"; exit 1; }
	cd deploy/prometheus && $(PROMTOOL) test rules cycled-alerts.test.yaml

## test-check: the alert rules' unit tests (test-rules), then deploy/check, its own module: a real daemon's answers against
## api/openapi.yaml (libopenapi-validator), and the metrics that deploy/'s dashboard and
## alert rules use against its /metrics (rules parsed by Prometheus's parser).
test-check: test-rules
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

## test-ha: daemon/ha/clustertest, its own module (the embedded etcd and NATS servers stay out of
## the library's go.mod): groups of three real daemons killed (-9), frozen (SIGSTOP), cut
## off from etcd and with NATS restarted; every exported summary through daemon/ha/histcheck.
test-ha:
	cd daemon/ha/clustertest && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

## bench-ha: failover time over HA_KILLS kill -9 of the active (median, max; ticks lost),
## and the export's throughput and its cost in start lag at 100 Hz (BENCHMARKS.md, "Active/standby and export").
HA_KILLS ?= 20
bench-ha:
	cd daemon/ha/clustertest && HA_BENCH=1 HA_KILLS=$(HA_KILLS) $(GO) test -count=1 -timeout 30m -run '^TestBench' -v ./...

# PYTHON is an interpreter with pytest: the first of python3 and /usr/bin/python3 that
# has it (Debian: apt-get install python3-pytest). Override with PYTHON=...
PYTHON ?= $(shell for p in python3 /usr/bin/python3; do $$p -m pytest --version >/dev/null 2>&1 && { echo $$p; break; }; done)

## test-python: the Python SDK's tests (clients/python) against the real daemon, built here;
## with mypy in that interpreter (Debian: python3-mypy) they also type-check the SDK.
test-python:
	@if [ -z "$(PYTHON)" ]; then echo "test-python: no python3 with pytest (apt-get install python3-pytest, or PYTHON=...)"; exit 1; fi
	$(GO) build -o clients/python/.cycled-test-bin ./cmd/cycled
	cd clients/python && CYCLED_BIN=$(CURDIR)/clients/python/.cycled-test-bin $(PYTHON) -m pytest -q -p no:cacheprovider tests

REPS ?= 5

## bench: run the Go benchmarks of every package (allocations reported), then the
## engine-versus-baseline comparison: REPS interleaved runs, medians and per-run ratios.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory bench-tick

## bench-tick: the tick engine against the goroutine-per-module baseline (BENCHMARKS.md table).
bench-tick:
	@for i in $$(seq $(REPS)); do $(GO) test -run '^$$' -bench 'BenchmarkTick$$|BenchmarkBaseline' -benchmem -count=1 ./cycle; done | $(GO) run ./tools/benchratio

## bench-floor: the engine's tick against a bare loop doing the per-module work its
## semantics require with its own components, and that loop without each component in
## turn (tools/bench/floor; BENCHMARKS.md, "Targets"). One P, REPS runs one after another
## (each runs every case once, so that the cases alternate): the components' cost alone.
bench-floor:
	cd tools/bench && $(GO) test -c -o out/floor.test ./floor/
	@for i in $$(seq $(REPS)); do tools/bench/out/floor.test -test.run '^$$' -test.bench . -test.benchmem -test.cpu 1; done

COMPARE_REPS ?= 3

## bench-compare: cycled side by side with (A) plain Go, (B) failsafe-go and (C) a Python
## asyncio sketch: tick cost, deadline adherence, period keeping, memory, HTTP under load.
## One run of about 9 minutes on 2 cores; rewrites the generated tables of BENCHMARKS.md
## (raw results in tools/bench/out/results.json). tools/bench/ is its own module (peer libraries stay
## out of the product's go.mod).
bench-compare:
	$(GO) build -o tools/bench/out/cycled ./cmd/cycled
	cd tools/bench && $(GO) build -o out/compare ./cmd/compare
	cd tools/bench && ./out/compare -reps $(COMPARE_REPS) -daemon out/cycled -out ../../BENCHMARKS.md -json out/results.json

## tidy: go mod tidy in every module of the workspace (.ci/tidy says how).
tidy:
	bash .ci/tidy

## lint: gofmt check, go vet and staticcheck (honnef.co/go/tools, pinned here and fetched
## by go run from the module proxy: a tool, not a dependency of the module).
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## soak: the real daemon at 100 Hz under random faults, reloads, registrations and
## clients for $(SOAK); every tick summary goes through the invariant checker, goroutines
## and RSS must stay bounded (tools/soak documents the rules). SOAK=10m make soak. Then the
## operator test (operator-test) for SOAK_OPERATOR (default: as long).
SOAK ?= 60s
SOAK_OPERATOR ?= $(SOAK)
soak:
	$(GO) run ./tools/soak -duration $(SOAK)
	$(MAKE) --no-print-directory operator-test OPERATOR=$(SOAK_OPERATOR)

## operator-test: play operator against the real binary for $(OPERATOR): seeded random
## reloads (valid, invalid, empty, extreme), file edits, safety removals, registrations,
## resets, faults, restarts, kill -9 and a state_dir that fills up; every summary checked
## (docs/operations.md). A failure prints the seed: OPERATOR_SEED=N replays it.
OPERATOR ?= 60s
operator-test:
	OPERATOR=$(OPERATOR) $(GO) test -count=1 -timeout 30m -run '^TestOperatorModel$$' -v ./cmd/cycled

## run: run the daemon on its embedded demo configuration.
run:
	$(GO) run ./cmd/cycled

## build: build the daemon binary into bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/cycled ./cmd/cycled

## install: install cycled into $(go env GOBIN), else $(go env GOPATH)/bin (put it on PATH).
install:
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags "$(LDFLAGS)" ./cmd/cycled
	@d=$$($(GO) env GOBIN); echo "installed $${d:-$$($(GO) env GOPATH)/bin}/cycled"

## docker: build the container image.
docker:
	docker build -t cycled:dev --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) .

## bench-dashboard: the daemon's tick start lag at 100 Hz with 0 and 8 dashboards open in
## headless Chromium (BENCHMARKS.md, "Dashboard"); DASHBOARD_BENCH_REPS alternated rounds,
## DASHBOARD_BENCH_CASES what they open, DASHBOARD_BENCH_CYCLE the daemon's timing mode
## (BENCHMARKS.md, "Dashboard").
bench-dashboard:
	DASHBOARD_BENCH=1 $(GO) test -count=1 -timeout 30m -run '^TestDashboardStartLag$$' -v ./cmd/cycled
