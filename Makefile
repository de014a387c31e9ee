GO ?= go
PKGS := ./...

.PHONY: test bench bench-tick lint run build docker soak bench-compare fmt

## test: vet and run every test with the race detector (what CI runs).
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

REPS ?= 5

## bench: run the Go benchmarks of every package (allocations reported), then the
## engine-versus-baseline comparison: REPS interleaved runs, medians and per-run ratios.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory bench-tick

## bench-tick: the tick engine against the goroutine-per-module baseline (BENCHMARKS.md table).
bench-tick:
	@for i in $$(seq $(REPS)); do $(GO) test -run '^$$' -bench 'BenchmarkTick$$|BenchmarkBaseline' -benchmem -count=1 ./cycle; done | $(GO) run ./internal/benchratio

## lint: gofmt check and go vet.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## run: run the daemon on its embedded demo configuration.
run:
	$(GO) run ./cmd/cycled

## build: build the daemon binary into bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/cycled ./cmd/cycled

## docker: build the container image.
docker:
	docker build -t cycled:dev .
