//go:build tools

// Package deps pins the project's direct dependencies while the packages
// that use them are being written. It is removed once every dependency has
// a real importer.
package deps

import (
	_ "github.com/creack/pty"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/dop251/goja"
	_ "github.com/expr-lang/expr"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/go-plugin"
	_ "github.com/itchyny/gojq"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v5"
	_ "github.com/tetratelabs/wazero"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
)
