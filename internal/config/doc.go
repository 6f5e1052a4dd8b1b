// Package config holds what every configuration reader of the kernel
// shares: the Duration type of YAML and JSON files, the name rules and
// sha256 pins, the strict YAML decoder and the errors that point at a
// file, line, column and field, and the path fields of kernel.yaml.
//
// Limits are stated once, in the JSON Schemas under schemas/: the name
// rules are read from the patterns there (names.go) and the path fields
// from their "x-path" annotation (paths.go). The package does not import
// a JSON Schema library, so a tool plugin can link it cheaply; schema
// validation itself is done by the caller (see Locate). Why: RATIONALE.md,
// "One config engine (internal/config, internal/backoff)".
package config
