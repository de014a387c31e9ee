GO ?= go
PKGS := ./...

.PHONY: test bench bench-tick bench-floor lint run build docker soak bench-compare fmt

## test: vet and run every test with the race detector (what CI runs), the comparison
## harness's own module (bench/: its statistics, the peers' semantics, its verdicts) included.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -timeout 5m ./cycle  # summary records are reused only without the race detector
	cd bench && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...

REPS ?= 5

## bench: run the Go benchmarks of every package (allocations reported), then the
## engine-versus-baseline comparison: REPS interleaved runs, medians and per-run ratios.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory bench-tick

## bench-tick: the tick engine against the goroutine-per-module baseline (BENCHMARKS.md table).
bench-tick:
	@for i in $$(seq $(REPS)); do $(GO) test -run '^$$' -bench 'BenchmarkTick$$|BenchmarkBaseline' -benchmem -count=1 ./cycle; done | $(GO) run ./cmd/benchratio

## bench-floor: the engine's tick against a bare loop doing the per-module work its
## semantics require with its own components, and that loop without each component in
## turn (bench/floor; BENCHMARKS.md, "What remains"). One P, REPS runs one after another
## (each runs every case once, so that the cases alternate): the components' cost alone.
bench-floor:
	cd bench && $(GO) test -c -o out/floor.test ./floor/
	@for i in $$(seq $(REPS)); do bench/out/floor.test -test.run '^$$' -test.bench . -test.benchmem -test.cpu 1; done

COMPARE_REPS ?= 3

## bench-compare: cycled side by side with (A) plain Go, (B) failsafe-go and (C) a Python
## asyncio sketch: tick cost, deadline adherence, period keeping, memory, HTTP under load.
## One run of about 9 minutes on 2 cores; rewrites the generated tables of BENCHMARKS.md
## (raw results in bench/out/results.json). bench/ is its own module (peer libraries stay
## out of the product's go.mod).
bench-compare:
	$(GO) build -o bench/out/cycled ./cmd/cycled
	cd bench && $(GO) build -o out/compare ./cmd/compare
	cd bench && ./out/compare -reps $(COMPARE_REPS) -daemon out/cycled -out ../BENCHMARKS.md -json out/results.json

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
## and RSS must stay bounded (cmd/soak documents the rules). SOAK=10m make soak.
SOAK ?= 60s
soak:
	$(GO) run ./cmd/soak -duration $(SOAK)

## run: run the daemon on its embedded demo configuration.
run:
	$(GO) run ./cmd/cycled

## build: build the daemon binary into bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/cycled ./cmd/cycled

## docker: build the container image.
docker:
	docker build -t cycled:dev .
