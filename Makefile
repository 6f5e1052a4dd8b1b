# agentkernel — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
KERNEL  := $(BIN)/kernel

.PHONY: all build test demo demo-mcp bench lint wasm plugins proto clean

all: build

## build: the kernel CLI in bin/kernel
build:
	$(GO) build -o $(KERNEL) ./cmd/kernel

## wasm: WASM tools in wasm-tools/ and the WASM test fixtures (GOOS=wasip1)
wasm:
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -o wasm-tools/jq/jq.wasm ./wasm-tools/jq
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=c-shared -o wasm-tools/js/js.wasm ./wasm-tools/js
	@# gojq's own command line, unmodified, from the module proxy (version pinned in wasm-tools/gojq/go.mod)
	cd wasm-tools/gojq && GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -o gojq.wasm github.com/itchyny/gojq/cmd/gojq
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -o plugins/wasm/testdata/attack/attack.wasm ./plugins/wasm/testdata/attack
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=c-shared -o plugins/wasm/testdata/reactor/reactor.wasm ./plugins/wasm/testdata/attack
	@# compile the tools into the kernel's cache ($$XDG_CACHE_HOME/agentkernel/wasm) so the kernel starts fast,
	@# and everything again for the tests: a test binary has no build information, so its wazero says "dev"
	$(GO) run ./plugins/wasm/internal/precompile -q wasm-tools/jq/jq.wasm wasm-tools/js/js.wasm wasm-tools/gojq/gojq.wasm
	$(GO) run -ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=dev ./plugins/wasm/internal/precompile -q \
	  wasm-tools/jq/jq.wasm wasm-tools/js/js.wasm wasm-tools/gojq/gojq.wasm \
	  plugins/wasm/testdata/attack/attack.wasm plugins/wasm/testdata/reactor/reactor.wasm

## plugins: plugin binaries used by the demo and the tests
plugins:
	$(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/plugins/git ./examples/plugins/git
	cd $(BIN)/plugins && sha256sum git > git.sha256

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
test: build wasm plugins
	AGENTKERNEL_REQUIRE_ARTIFACTS=1 $(GO) test -race -count=1 ./...

## demo: the main job, offline, with the scripted model and the embedded defaults
demo: build wasm plugins
	@bash examples/demo/run.sh

## demo-mcp: an MCP server's tools under policy, offline (a Go SDK server from this repo)
demo-mcp: build
	$(GO) build -o $(BIN)/mcp/mcp-testserver ./internal/mcptest/server
	@bash examples/mcp/run.sh

## bench: benchmarks and soak runs (slow)
bench: wasm plugins
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...
	@# The crash soak: 500 SIGKILLs at random points of real runs.
	$(GO) test -count=1 -run 'TestCrash$$' -long ./kernel/store/badger

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
