package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/kernel"
)

func TestNewConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string // error substring; "" means success
	}{
		{"all tools", Config{Root: dir}, ""},
		{"missing root", Config{}, "root is required"},
		{"root does not exist", Config{Root: filepath.Join(dir, "nope")}, "no such file or directory"},
		{"root is a file", Config{Root: file}, "is not a directory"},
		{"unknown tool", Config{Root: dir, Enable: []string{"read_file", "rm_rf"}}, `enable[1]: unknown tool "rm_rf" (valid: read_file, list_dir, search, write_file, edit_file, run_command)`},
		{"negative cap", Config{Root: dir, MaxReadBytes: -1}, "max_read_bytes must not be negative"},
		{"negative timeout", Config{Root: dir, CommandTimeout: -time.Second}, "command_timeout must not be negative"},
		{"tiny timeout", Config{Root: dir, CommandTimeout: time.Millisecond}, "below the minimum of 1s"},
		{"bad env name", Config{Root: dir, CommandEnv: []string{"PATH", "A=B"}}, `command_env[1]: "A=B" is not an environment variable name`},
		{"empty env name", Config{Root: dir, CommandEnv: []string{""}}, "command_env[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tools, closer, err := New(tc.cfg)
			if tc.want != "" {
				wantErr(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			var names []string
			for _, tl := range tools {
				names = append(names, tl.Spec().Name)
			}
			if !slices.Equal(names, Names()) {
				t.Fatalf("tools %v, want %v", names, Names())
			}
		})
	}
}

func TestEnableSubset(t *testing.T) {
	tools, closer, err := New(Config{Root: t.TempDir(), Enable: []string{"search", "read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Spec().Name)
	}
	if want := []string{"read_file", "search"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (in Names order)", names, want)
	}
}

func TestClosedWorkspace(t *testing.T) {
	dir := t.TempDir()
	mkfiles(t, dir, map[string]string{"a.txt": "a\n"})
	tools, closer, err := New(Config{Root: dir, Enable: []string{"read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	closer.Close()
	_, err = tools[0].Call(t.Context(), json.RawMessage(`{"path":"a.txt"}`))
	wantErr(t, err, "the workspace is closed")
}

// TestSpecs pins what the model reads: names, descriptions, schemas,
// tiers, tags. It also checks the conventions every spec must follow.
func TestSpecs(t *testing.T) {
	e := newEnv(t, Config{CommandTimeout: 90 * time.Second})
	var all []kernel.ToolSpec
	for _, n := range Names() {
		s := e.tools[n].Spec()
		all = append(all, s)
		t.Run(n, func(t *testing.T) {
			if s.Source != "builtin" {
				t.Errorf("source %q", s.Source)
			}
			var schema map[string]any
			if err := json.Unmarshal(s.Schema, &schema); err != nil {
				t.Fatal(err)
			}
			if schema["type"] != "object" || schema["additionalProperties"] != false {
				t.Errorf("schema must be an object with additionalProperties false: %v", schema)
			}
			for prop, v := range schema["properties"].(map[string]any) {
				if d, _ := v.(map[string]any)["description"].(string); d == "" {
					t.Errorf("property %s has no description", prop)
				}
			}
			wantTier := map[string]kernel.Tier{
				"read_file": kernel.TierReadOnly, "list_dir": kernel.TierReadOnly, "search": kernel.TierReadOnly,
				"write_file": kernel.TierSideEffecting, "edit_file": kernel.TierSideEffecting,
				"run_command": kernel.TierPrivileged,
			}[n]
			if s.Tier != wantTier {
				t.Errorf("tier %s, want %s", s.Tier, wantTier)
			}
			if len(s.Tags) == 0 || s.Description == "" {
				t.Errorf("tags %v, description %q", s.Tags, s.Description)
			}
		})
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		t.Fatal(err)
	}
	golden(t, "specs.golden.json", b.String())
}

// TestRegistryValidation registers every tool in a kernel.Registry (so
// every schema must compile) and checks that bad arguments are rejected
// with messages naming the failing path, and good ones pass.
func TestRegistryValidation(t *testing.T) {
	e := newEnv(t, Config{CommandTimeout: time.Minute})
	reg := kernel.NewRegistry()
	for _, n := range Names() {
		if err := reg.Register(e.tools[n]); err != nil {
			t.Fatalf("register %s: %v", n, err)
		}
	}
	tests := []struct {
		tool, args string
		want       string // "" means valid
	}{
		{"read_file", `{"path":"a.go"}`, ""},
		{"read_file", `{"path":"a.go","offset":10,"limit":5}`, ""},
		{"read_file", `{}`, "missing properties: 'path'"},
		{"read_file", `{"path":""}`, "/path: length must be >= 1"},
		{"read_file", `{"path":"a","offset":0}`, "/offset: must be >= 1"},
		{"read_file", `{"path":"a","limit":100000}`, "/limit: must be <= 10000"},
		{"read_file", `{"path":"a","offset":"3"}`, "/offset: expected integer, got string"},
		{"read_file", `{"path":"a","lines":3}`, "additionalProperties 'lines' not allowed"},
		{"list_dir", `{}`, ""},
		{"list_dir", `{"path":"src","depth":3}`, ""},
		{"list_dir", `{"depth":9}`, "/depth: must be <= 5"},
		{"list_dir", `{"depth":0}`, "/depth: must be >= 1"},
		{"search", `{"pattern":"x","regex":true,"glob":"*.go","path":"src","ignore_case":true}`, ""},
		{"search", `{"pattern":""}`, "/pattern: length must be >= 1"},
		{"search", `{"path":"."}`, "missing properties: 'pattern'"},
		{"search", `{"pattern":"x","glob":"src/*.go"}`, "/glob: does not match pattern"},
		{"search", `{"pattern":"x","regex":"yes"}`, "/regex: expected boolean, got string"},
		{"write_file", `{"path":"a","content":""}`, ""},
		{"write_file", `{"path":"a"}`, "missing properties: 'content'"},
		{"write_file", `{"path":"a","content":7}`, "/content: expected string, got number"},
		{"edit_file", `{"path":"a","old":"x","new":""}`, ""},
		{"edit_file", `{"path":"a","old":"x"}`, "missing properties: 'new'"},
		{"edit_file", `{"path":"a","old":"","new":"y"}`, "/old: length must be >= 1"},
		{"run_command", `{"argv":["go","test","./..."],"timeout_seconds":60}`, ""},
		{"run_command", `{"argv":[]}`, "/argv: minimum 1 items required"},
		{"run_command", `{"argv":[""]}`, "/argv/0: length must be >= 1"},
		{"run_command", `{"argv":"ls -la"}`, "/argv: expected array, got string"},
		{"run_command", `{"argv":["ls",3]}`, "/argv/1: expected string, got number"},
		{"run_command", `{"argv":["ls"],"timeout_seconds":61}`, "/timeout_seconds: must be <= 60"},
		{"run_command", `{"argv":["ls"],"timeout_seconds":0}`, "/timeout_seconds: must be >= 1"},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			_, err := reg.Validate(tc.tool, json.RawMessage(tc.args))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid args rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, kernel.ErrInvalidArgs) {
				t.Fatalf("error %v does not wrap ErrInvalidArgs", err)
			}
			wantErr(t, err, tc.want)
		})
	}
}

// TestDirectCallValidation checks the tools' own argument checks, for
// callers that skip the registry.
func TestDirectCallValidation(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		tool, args, want string
	}{
		{"read_file", `{"path":"a","bogus":1}`, `unknown field "bogus"`},
		{"read_file", `[1]`, "invalid arguments"},
		{"read_file", `{}`, "/path: is required"},
		{"read_file", `{"path":"a","offset":-2}`, "/offset: must be >= 1"},
		{"list_dir", `{"depth":6}`, "/depth: must be between 1 and 5"},
		{"search", `{"pattern":"(","regex":true}`, "/pattern: invalid regular expression"},
		{"search", `{"pattern":"x","glob":"[x"}`, "/glob: \"[x\" is not a valid pattern"},
		{"write_file", `{"path":"a"}`, "/content: is required"},
		{"write_file", `{"path":".","content":"x"}`, "names the workspace root"},
		{"edit_file", `{"path":"a","old":"x","new":"x"}`, "/new: is identical to old"},
		{"edit_file", `{"path":"a","old":"x"}`, "/new: is required"},
		{"run_command", `{"argv":[]}`, "/argv: is required"},
		{"run_command", `{"argv":["echo","a\u0000b"]}`, "/argv/1: contains a NUL byte"},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			_, err := e.call(t, tc.tool, tc.args)
			wantErr(t, err, tc.want)
			if !errors.Is(err, kernel.ErrInvalidArgs) && !strings.Contains(tc.want, "workspace root") {
				t.Errorf("error %v does not wrap ErrInvalidArgs", err)
			}
		})
	}
}

func TestLiteralSearchIsNotARegexp(t *testing.T) {
	e := newEnv(t, Config{})
	mkfiles(t, e.root, map[string]string{"a.txt": "call f(x\n"})
	out := e.mustCall(t, "search", `{"pattern":"f("}`)
	if !strings.Contains(out, "     1: call f(x") {
		t.Fatalf("literal \"f(\" not found: %q", out)
	}
}

// TestConcurrentUse hammers one set of tools from many goroutines; run it
// with -race.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t, Config{})
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("d%d/f%d.txt", i%4, i)] = strings.Repeat(fmt.Sprintf("line %d needle\n", i), 50)
	}
	mkfiles(t, e.root, files)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				var err error
				switch (g + i) % 5 {
				case 0:
					_, err = e.call(t, "read_file", map[string]any{"path": fmt.Sprintf("d%d/f%d.txt", i%4, i), "limit": 10})
				case 1:
					_, err = e.call(t, "search", map[string]any{"pattern": "needle"})
				case 2:
					_, err = e.call(t, "list_dir", map[string]any{"depth": 2})
				case 3:
					_, err = e.call(t, "write_file", map[string]any{"path": fmt.Sprintf("out/g%d.txt", g), "content": fmt.Sprintf("g%d i%d\n", g, i)})
				case 4:
					p := fmt.Sprintf("edit/g%d.txt", g)
					if _, err = e.call(t, "write_file", map[string]any{"path": p, "content": "value 0\n"}); err == nil {
						_, err = e.call(t, "edit_file", map[string]any{"path": p, "old": "value 0", "new": fmt.Sprintf("value %d", i+1)})
					}
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestConfigYAML pins the YAML field names the CLI's kernel.yaml uses.
func TestConfigYAML(t *testing.T) {
	src := `
root: ./work
enable: [read_file, run_command]
max_read_bytes: 1000
max_output_bytes: 2000
max_file_bytes: 3000
command_timeout: 90s
command_env: [PATH, GOPATH]
`
	var got Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Root: "./work", Enable: []string{"read_file", "run_command"},
		MaxReadBytes: 1000, MaxOutputBytes: 2000, MaxFileBytes: 3000,
		CommandTimeout: 90 * time.Second, CommandEnv: []string{"PATH", "GOPATH"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestEnableEmptyMeansNone: "enable: []" builds no tool at all; only an
// omitted list means all six.
func TestEnableEmptyMeansNone(t *testing.T) {
	tools, closer, err := New(Config{Root: t.TempDir(), Enable: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if len(tools) != 0 {
		t.Fatalf("enable: [] built %d tools", len(tools))
	}
	all, closer2, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer closer2.Close()
	if len(all) != len(Names()) {
		t.Fatalf("omitted enable built %d tools, want %d", len(all), len(Names()))
	}
}
