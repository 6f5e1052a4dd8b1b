package declared

import (
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/tool"
)

// Config is the declared tools of a configuration: kernel.yaml's
// tools.http, tools.command and tools.inline lists.
type Config struct {
	HTTP    []HTTPConfig
	Command []CommandConfig
	Inline  []InlineConfig
}

// Len is the number of tools declared.
func (c Config) Len() int { return len(c.HTTP) + len(c.Command) + len(c.Inline) }

// HTTPConfig is one tools.http entry: a tool that makes one HTTP request.
type HTTPConfig struct {
	At          config.Pos
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Tier defaults from the method: GET, HEAD and OPTIONS read_only, the
	// others side_effecting.
	Tier tool.Tier `yaml:"tier"`
	// Args is the JSON Schema of the arguments (an object schema).
	Args any `yaml:"args"`
	// Timeout bounds one call (default DefaultHTTPTimeout).
	Timeout config.Duration `yaml:"timeout"`
	Method  string          `yaml:"method"`
	// URL is the URL template: {name} in the path or the query, each value
	// escaped for its place; ${env:NAME} in the query.
	URL string `yaml:"url"`
	// Headers are header templates: {name}, ${env:NAME}.
	Headers map[string]string `yaml:"headers"`
	// Body is the JSON body's template: any YAML value whose strings are
	// templates ("{name}" alone is the argument's JSON value). Without it a
	// POST, PUT or PATCH sends the arguments the URL and the headers do not
	// use, as a JSON object.
	Body     any            `yaml:"body"`
	Egress   EgressConfig   `yaml:"egress"`
	Response ResponseConfig `yaml:"response"`
	// OpenAPI names the document the entry was imported from: the tool's
	// source is then "openapi:<OpenAPI>".
	OpenAPI string `yaml:"openapi"`
}

// EgressConfig is where an HTTP tool may connect (internal/egress).
type EgressConfig struct {
	// Hosts are the hosts (and ports) the tool may connect to, redirects
	// included. Omitted: the URL's host alone. An empty list is an error.
	Hosts []string `yaml:"hosts"`
	// Networks are CIDR prefixes of internal ranges (loopback, private,
	// link-local) the tool may reach: nothing internal is reached without.
	Networks []string `yaml:"networks"`
	// InsecureSkipTLSVerify turns TLS certificate verification off; the
	// kernel says so at every start.
	InsecureSkipTLSVerify bool `yaml:"insecure_skip_tls_verify"`
	// CAFile is a PEM file of the authorities to verify the server with,
	// instead of the system's.
	CAFile string `yaml:"ca_file"`
	// MaxRedirects caps the redirects followed (0: 5; -1: none).
	MaxRedirects int `yaml:"max_redirects"`
}

// ResponseConfig says what the model gets of an answer.
type ResponseConfig struct {
	// JQ extracts the answer from a JSON body (gojq): each result is one
	// line of JSON.
	JQ string `yaml:"jq"`
	// MaxBytes is the most read of a body (default DefaultMaxResponseBytes);
	// a longer answer is an error, not a cut JSON document.
	MaxBytes int `yaml:"max_bytes"`
	// MaxOutputBytes caps what the model reads (default
	// DefaultMaxOutputBytes), after jq; longer text is cut with a marker.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// ContentTypes are the media types accepted ("application/json",
	// "text/*"); default DefaultContentTypes.
	ContentTypes []string `yaml:"content_types"`
}

// CommandConfig is one tools.command entry: a program run with an argv
// template, confined like run_command.
type CommandConfig struct {
	At          config.Pos
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Tier        tool.Tier       `yaml:"tier"` // default privileged, as run_command
	Args        any             `yaml:"args"`
	Timeout     config.Duration `yaml:"timeout"`
	// Argv is the program and its arguments: argv[0] written out, the
	// others templates, each one argv entry ("{files}" alone expands a list
	// to one entry per item).
	Argv []string `yaml:"argv"`
	// Dir is the working directory (default the workspace).
	Dir string `yaml:"dir"`
	// Env names the variables the program gets, with the kernel's values
	// (default PATH, HOME, LANG).
	Env []string `yaml:"env"`
	// Sandbox adds to the default grant (the workspace read-write but its
	// .git, the system's directories read-only, no network).
	Sandbox        sandbox.Grant `yaml:"sandbox"`
	MaxOutputBytes int           `yaml:"max_output_bytes"`
}

// InlineConfig is one tools.inline entry: a fixed or templated answer.
type InlineConfig struct {
	At          config.Pos
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Tier        tool.Tier `yaml:"tier"` // default read_only
	Args        any       `yaml:"args"`
	// Text is the answer, a template; or JSON, a value template rendered as
	// JSON. One of the two.
	Text string `yaml:"text"`
	JSON any    `yaml:"json"`
}

// Decode decodes the three lists (nil nodes are empty) strictly: an
// unknown field or a wrong type is an error with its line.
func Decode(file string, http, command, inline *yaml.Node) (Config, error) {
	var c Config
	d := &config.Decoder{File: file, Custom: decodeGrant}
	for _, s := range []struct {
		n     *yaml.Node
		v     any
		where string
	}{{http, &c.HTTP, "tools.http"}, {command, &c.Command, "tools.command"}, {inline, &c.Inline, "tools.inline"}} {
		if s.n == nil || s.n.Kind == 0 || config.IsNull(s.n) {
			continue
		}
		d.Decode(s.n, reflect.ValueOf(s.v).Elem(), s.where)
	}
	if len(d.Errors) > 0 {
		return c, d.Errors[0]
	}
	return c, nil
}

// decodeGrant decodes a sandbox.Grant with its own YAML rules (net: none).
func decodeGrant(d *config.Decoder, n *yaml.Node, v reflect.Value, where string) bool {
	if v.Type() != reflect.TypeFor[sandbox.Grant]() {
		return false
	}
	var g sandbox.Grant
	if err := n.Decode(&g); err != nil {
		d.Errorf(n, where, "%v", err)
		return true
	}
	v.Set(reflect.ValueOf(g))
	return true
}

// entryError is a *config.Error about field of a declared tool.
func entryError(file, kind, name string, at config.Pos, field string, err error) *config.Error {
	return &config.Error{File: file, Line: at.Line, Column: at.Col, Kind: kind + " tool", Name: name, Field: field, Err: err}
}
