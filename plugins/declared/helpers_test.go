package declared_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/internal/egress/egresstest"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/plugins/declared"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/tool"
)

// TestMain lets the test binary act as the sandbox's launcher: command
// tools re-execute it.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

// recorded is one request a test server got.
type recorded struct {
	Method, Host, RawPath, Path, RawQuery string
	Query                                 map[string][]string
	Header                                http.Header
	Body                                  string
}

// api is a local server standing for every host a test's resolver names.
type api struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newAPI(t *testing.T, hand http.HandlerFunc) *api {
	t.Helper()
	a := &api{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, recorded{Method: r.Method, Host: r.Host, RawPath: r.URL.EscapedPath(), Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(b)})
		a.mu.Unlock()
		if hand != nil {
			hand(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *api) last(t *testing.T) recorded {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		t.Fatal("the server got no request")
	}
	return a.reqs[len(a.reqs)-1]
}

func (a *api) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// env is a test's environment for ${env:...}.
type env map[string]string

func (e env) get(n string) (string, bool) { v, ok := e[n]; return v, ok }

// options leads every host in names to a's server through the fake
// network, each name resolving to a public documentation address.
func options(a *api, e env, names ...string) declared.Options {
	r := &egresstest.Resolver{}
	for i, n := range names {
		r.Set(n, []string{"203.0.113." + string(rune('1'+i))})
	}
	o := declared.Options{File: "kernel.yaml", Getenv: e.get, Resolver: r, Workspace: os.TempDir(),
		CommandGrant: func(extra sandbox.Grant, envNames []string) (sandbox.Grant, []string) {
			g := builtin.CommandGrant(os.TempDir(), builtin.Config{CommandSandbox: extra, CommandEnv: envNames})
			return g, g.Env
		}}
	if a != nil {
		o.Network = &egresstest.Network{Target: strings.TrimPrefix(a.URL, "http://")}
	}
	return o
}

// build decodes src (a kernel.yaml fragment with tools.http, tools.command
// or tools.inline) and builds its tools.
func build(t testing.TB, src string, o declared.Options) (*declared.Set, error) {
	t.Helper()
	var doc struct {
		Tools struct {
			HTTP    yaml.Node `yaml:"http"`
			Command yaml.Node `yaml:"command"`
			Inline  yaml.Node `yaml:"inline"`
		} `yaml:"tools"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	c, err := declared.Decode("kernel.yaml", &doc.Tools.HTTP, &doc.Tools.Command, &doc.Tools.Inline)
	if err != nil {
		return nil, err
	}
	s, err := declared.Build(c, o)
	if err == nil {
		t.Cleanup(s.Close)
	}
	return s, err
}

func mustBuild(t testing.TB, src string, o declared.Options) map[string]kernel.Tool {
	t.Helper()
	s, err := build(t, src, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kernel.Tool{}
	for _, ts := range s.Tools {
		for _, tl := range ts {
			out[tl.Spec().Name] = tl
		}
	}
	return out
}

// call calls tl with args validated against its schema, as the kernel does.
func call(t *testing.T, tl kernel.Tool, args any) (tool.Result, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(tl); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Validate(tl.Spec().Name, raw); err != nil {
		t.Fatalf("the arguments do not validate: %v", err)
	}
	return tl.Call(context.Background(), raw)
}
