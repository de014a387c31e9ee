GO ?= go
PKGS := ./...

.PHONY: test bench lint run build docker soak bench-compare fmt

## test: vet and run every test with the race detector (what CI runs).
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## bench: run the Go benchmarks of every package (allocations reported).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=$${COUNT:-1} -timeout 30m $(PKGS)

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
