package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/agentkernel/agentkernel/internal/schema"
	"github.com/agentkernel/agentkernel/kernel"
)

// ManifestFile is the manifest's file name, beside the module.
const ManifestFile = "tool.json"

// The ABIs: how the host passes a call to a module and reads the result.
const (
	ABIJSON    = "json"
	ABIReactor = "reactor"
	ABIArgv    = "argv"
)

// ErrManifest marks a tool.json the module's author must fix.
var ErrManifest = errors.New("invalid tool manifest")

// manifest is a decoded, checked tool.json.
type manifest struct {
	Schema       string         `json:"$schema"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	SHA256       string         `json:"sha256"`
	ABI          string         `json:"abi"`
	Tools        []manifestTool `json:"tools"`
	Capabilities requested      `json:"capabilities"`
}

type manifestTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tier        kernel.Tier     `json:"tier"`
	Tags        []string        `json:"tags"`
	Argv        *argvSpec       `json:"argv"`

	// argv templates, parsed
	args  []*template.Template
	stdin *template.Template
}

type argvSpec struct {
	Args  []string `json:"args"`
	Stdin *string  `json:"stdin"`
}

// requested is the manifest's capabilities block.
type requested struct {
	FS             []mountRequest `json:"fs"`
	Env            []string       `json:"env"`
	Clock          bool           `json:"clock"`
	Random         bool           `json:"random"`
	MemoryMB       int            `json:"memory_mb"`
	Timeout        string         `json:"timeout"`
	MaxOutputBytes int            `json:"max_output_bytes"`

	timeout time.Duration
}

type mountRequest struct {
	Guest       string `json:"guest"`
	Mode        string `json:"mode"`
	Description string `json:"description"`
}

// manifestSchema is the compiled tool-manifest.schema.json.
type manifestSchema struct{ s *schema.Schema }

const manifestSchemaFile = "tool-manifest.schema.json"

func compileManifestSchema() (*manifestSchema, error) {
	s, err := schema.Embedded(manifestSchemaFile)
	if err != nil {
		return nil, err
	}
	return &manifestSchema{s: s}, nil
}

// parseManifest decodes and checks a tool.json. file names it in errors.
func (ms *manifestSchema) parseManifest(file string, data []byte) (*manifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", file, ErrManifest, fmt.Sprintf(format, args...))
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, bad("%s", jsonSyntaxError(data, err))
	}
	if err := ms.s.Validate(doc); err != nil {
		return nil, bad("%s", describeSchemaError(err))
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, bad("%v", err)
	}
	if m.ABI == "" {
		m.ABI = ABIJSON
	}
	m.SHA256 = strings.ToLower(m.SHA256)

	names := map[string]bool{}
	for i := range m.Tools {
		t := &m.Tools[i]
		field := fmt.Sprintf("tools[%d]", i)
		if names[t.Name] {
			return nil, bad("%s.name: tool %q is declared twice", field, t.Name)
		}
		names[t.Name] = true
		if len(t.Schema) > 0 {
			if _, err := kernel.CompileSchema(t.Name, t.Schema); err != nil {
				return nil, bad("%s.schema: %v", field, err)
			}
		}
		if t.Argv != nil {
			if err := t.parseArgv(); err != nil {
				return nil, bad("%s.argv.%v", field, err)
			}
		}
	}

	c := &m.Capabilities
	guests := map[string]bool{}
	for i, fs := range c.FS {
		field := fmt.Sprintf("capabilities.fs[%d]", i)
		if err := checkGuestPath(fs.Guest); err != nil {
			return nil, bad("%s.guest: %v", field, err)
		}
		if guests[fs.Guest] {
			return nil, bad("%s.guest: %s is requested twice", field, fs.Guest)
		}
		guests[fs.Guest] = true
		if c.FS[i].Mode == "" {
			c.FS[i].Mode = "ro"
		}
	}
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return nil, bad("capabilities.timeout: %q is not a positive duration such as 5s", c.Timeout)
		}
		c.timeout = d
	}
	return &m, nil
}

// argvFuncs are the functions argv templates may use.
var argvFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

func (t *manifestTool) parseArgv() error {
	for i, a := range t.Argv.Args {
		tpl, err := template.New(fmt.Sprintf("args[%d]", i)).Funcs(argvFuncs).Option("missingkey=zero").Parse(a)
		if err != nil {
			return fmt.Errorf("args[%d]: %v", i, err)
		}
		t.args = append(t.args, tpl)
	}
	if t.Argv.Stdin != nil {
		tpl, err := template.New("stdin").Funcs(argvFuncs).Option("missingkey=zero").Parse(*t.Argv.Stdin)
		if err != nil {
			return fmt.Errorf("stdin: %v", err)
		}
		t.stdin = tpl
	}
	return nil
}

// jsonSyntaxError names the line and column of a JSON syntax error.
func jsonSyntaxError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64 = -1
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range data[:min(int(off), len(data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// describeSchemaError flattens a validation error into "path: message"
// parts, the leaves only.
func describeSchemaError(err error) string {
	probs := schema.Problems(err)
	if probs == nil {
		return err.Error()
	}
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = pointerToField(p.Location) + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// pointerToField turns a JSON pointer (/tools/0/tier) into a field path
// (tools[0].tier).
func pointerToField(p string) string {
	if p == "/" {
		return "(top level)"
	}
	var b strings.Builder
	for _, elem := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		elem = strings.ReplaceAll(strings.ReplaceAll(elem, "~1", "/"), "~0", "~")
		if elem != "" && strings.Trim(elem, "0123456789") == "" {
			b.WriteString("[" + elem + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(elem)
	}
	return b.String()
}

// manifestPath is tool.json beside the module.
func manifestPath(modulePath string) string {
	return filepath.Join(filepath.Dir(modulePath), ManifestFile)
}
