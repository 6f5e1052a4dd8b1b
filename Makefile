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
	$(GO) build -trimpath -o $(BIN)/plugins/git ./examples/plugins/git
	cd $(BIN)/plugins && sha256sum git > git.sha256 && cat git.sha256

## proto: regenerate the plugin protocol's Go code (needs protoc; make test does not)
proto:
	@command -v protoc >/dev/null 2>&1 || { apt-get update && apt-get install -y protobuf-compiler; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
	gobin=$$($(GO) env GOBIN); [ -n "$$gobin" ] || gobin=$$($(GO) env GOPATH)/bin; \
	cd plugins/sdk/pluginpb && PATH="$$gobin:$$PATH" protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto

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
