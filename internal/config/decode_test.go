package config_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/config"
)

type entry struct {
	At      config.Pos
	Name    string          `yaml:"name"`
	Timeout config.Duration `yaml:"timeout"`
	Wait    time.Duration   `yaml:"wait"`
	Tags    []string        `yaml:"tags"`
	Limits  map[string]int  `yaml:"limits"`
}

func decode(t *testing.T, src string) (entry, []*config.Error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	var e entry
	d := &config.Decoder{File: "x.yaml"}
	d.Decode(doc.Content[0], reflect.ValueOf(&e).Elem(), "")
	return e, d.Errors
}

func TestDecoder(t *testing.T) {
	e, errs := decode(t, "base: &b {wait: 2s}\n")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `x.yaml:1:1: unknown field "base" (valid fields: limits, name, tags, timeout, wait)`) {
		t.Fatalf("unknown field: %v", errs)
	}
	e, errs = decode(t, "name: a\ntimeout: 1m30s\nwait: 2s\ntags: [x, y]\nlimits: {a: 1}\n")
	if len(errs) != 0 || e.Name != "a" || e.Timeout.D() != 90*time.Second || e.Wait != 2*time.Second || len(e.Tags) != 2 || e.Limits["a"] != 1 || e.At != (config.Pos{Line: 1, Col: 1}) {
		t.Fatalf("good entry: %+v %v", e, errs)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"wrong type", "tags: x\n", `x.yaml:1:7: tags: expected a list, got the scalar "x"`},
		{"bad duration", "name: a\ntimeout: soon\n", `x.yaml:2:10: timeout: expected a duration such as "90s" or "10m", got the scalar "soon"`},
		{"duplicate field", "name: a\nname: b\n", `x.yaml:2:1: field "name" appears twice`},
		{"duplicate key", "limits: {a: 1, a: 2}\n", `limits: key "a" appears twice`},
		{"empty item", "tags: [x, ~]\n", "item 1 of the list is empty"},
		{"not an integer", "limits: {a: many}\n", `limits.a: expected an integer, got the scalar "many"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := decode(t, tc.src)
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("got %v, want %q", errs, tc.want)
			}
		})
	}
	// Every problem of the document is reported, not only the first.
	if _, errs := decode(t, "tags: x\nlimits: y\nnope: 1\n"); len(errs) != 3 {
		t.Errorf("three problems, got %d: %v", len(errs), errs)
	}
	// Aliases that expand exponentially stop at MaxNodes.
	type tree []tree
	var b strings.Builder
	b.WriteString("a0: &a0 [[], [], [], [], [], [], [], [], [], []]\n")
	for i := 1; i < 8; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Join([]string{p, p, p, p, p, p}, ", "))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	var v map[string]tree
	d := &config.Decoder{File: "bomb.yaml"}
	d.Decode(doc.Content[0], reflect.ValueOf(&v).Elem(), "")
	found := false
	for _, e := range d.Errors {
		found = found || strings.Contains(e.Err.Error(), "expands to more than")
	}
	if !found {
		t.Errorf("alias bomb not stopped: %v", d.Errors)
	}
}

func TestLocate(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("model:\n  provdier: x\ntools:\n  plugins:\n    - name: Bad\n"), &doc); err != nil {
		t.Fatal(err)
	}
	err := config.Locate("k.yaml", "config.schema.json", &doc, []config.Problem{
		{Location: "/model", Message: "additionalProperties 'provdier' not allowed"},
		{Location: "/tools/plugins/0/name", Message: "does not match pattern"},
	})
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%T %v", err, err)
	}
	for _, want := range []string{
		"k.yaml:2:3: model.provdier: unknown field (check the spelling; see schemas/config.schema.json)",
		"k.yaml:5:7: tools.plugins[0].name: does not match pattern",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if config.Locate("k.yaml", "s", &doc, nil) != nil {
		t.Error("no problems, an error")
	}
}

func TestDuration(t *testing.T) {
	var v struct {
		T config.Duration `yaml:"t"`
	}
	for _, tc := range []struct{ src, want string }{
		{"t: 30", `line 1: want a duration string such as "30s", got the scalar "30"`},
		{"t: soon", `line 1: invalid duration "soon": not a duration such as "30s" or "1m30s"`},
	} {
		if err := yaml.Unmarshal([]byte(tc.src), &v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.src, err)
		}
	}
	if err := yaml.Unmarshal([]byte("t: ' 1m30s '"), &v); err != nil || v.T.D() != 90*time.Second {
		t.Errorf("spaces around: %v %v", v.T, err)
	}
	b, err := yaml.Marshal(v)
	if err != nil || strings.TrimSpace(string(b)) != "t: 1m30s" {
		t.Errorf("marshal: %q %v", b, err)
	}
}
