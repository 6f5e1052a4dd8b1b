// This module only pins the upstream gojq command line (github.com/itchyny/gojq/cmd/gojq),
// which `make wasm` compiles unmodified to WASI (GOOS=wasip1) as gojq.wasm to show the argv ABI.
// It is its own module so that gojq's CLI dependencies stay out of the kernel's go.mod.
module github.com/agentkernel/agentkernel/wasm-tools/gojq

go 1.26.0

tool github.com/itchyny/gojq/cmd/gojq

require (
	github.com/itchyny/gojq v0.12.17 // indirect
	github.com/itchyny/timefmt-go v0.1.6 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mattn/go-runewidth v0.0.15 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/sys v0.20.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
