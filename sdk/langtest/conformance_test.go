package langtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sandbox"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// TestConformance runs the conformance suite against the conformance
// plugin of each SDK: the same checks, the same probes, three languages.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, lang := range languages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			cfg := conformancePlugin(t, lang)
			marks := t.TempDir()
			cfg.Sandbox.FS = append(cfg.Sandbox.FS, sandbox.FSRule{Path: marks, Mode: "rw"})
			block := filepath.Join(marks, "block")
			crash := "boom-" + lang
			sdktest.Conformance{
				Plugin:   cfg,
				Echo:     sdktest.Probe{Tool: "echo", Args: `{"text":"hello"}`},
				EchoWant: "hello",
				Fail:     sdktest.Probe{Tool: "fail", Args: `{"code":"quota_exceeded","message":"over quota"}`},
				FailCode: "quota_exceeded",
				Progress: sdktest.Probe{Tool: "progress", Args: `{"count":3}`},
				Block:    sdktest.Probe{Tool: "block", Args: fmt.Sprintf(`{"path":%q}`, block)},
				Stopped: func(t *testing.T) {
					// The handler saw its call end, and why.
					waitFile(t, block, "stopped: cancelled")
					_ = os.Remove(block)
				},
				Large:     sdktest.Probe{Tool: "big", Args: `{"bytes":2000000}`},
				Effect:    sdktest.Probe{Tool: "mark", Args: fmt.Sprintf(`{"path":%q}`, filepath.Join(marks, "effect"))},
				Crash:     sdktest.Probe{Tool: "crash", Args: fmt.Sprintf(`{"text":%q}`, crash)},
				CrashText: crash,
				Ignore:    sdktest.Probe{Tool: "ignore", Args: `{}`},
				Hooks:     true,
				HookMarks: marks,
			}.Run(t)
		})
	}
}

// waitFile waits until the file p has the content want.
func waitFile(t *testing.T, p, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q, %v; want %q", p, b, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// examplePlugins reads the example plugins' entries from
// examples/plugins/kernel.yaml, with their paths resolved as the kernel
// resolves them (relative to the file).
func examplePlugins(t testing.TB) map[string]subprocess.PluginConfig {
	t.Helper()
	var conf struct {
		Tools struct {
			Plugins []subprocess.PluginConfig `yaml:"plugins"`
		} `yaml:"tools"`
	}
	base := filepath.Join(root, "examples/plugins")
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(base, "kernel.yaml"))), &conf); err != nil {
		t.Fatal(err)
	}
	out := map[string]subprocess.PluginConfig{}
	for _, pc := range conf.Tools.Plugins {
		// The tests replace dir, args and the sandbox grant, which name
		// the data directory; `kernel run` loads the file as it is
		// (TestExampleScriptedRun).
		pc.Path = filepath.Join(base, pc.Path)
		out[pc.Name] = pc
	}
	return out
}

// exampleServer serves the example's data, a slow answer and a large one.
// slowClosed gets a value each time a client of /slow hangs up.
func exampleServer(t *testing.T) (srv *httptest.Server, slowClosed chan struct{}) {
	t.Helper()
	slowClosed = make(chan struct{}, 16)
	sales := readFile(t, filepath.Join(root, "examples/plugins/data/sales.csv"))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sales.csv":
			w.Header().Set("Content-Type", "text/csv")
			fmt.Fprint(w, sales)
		case "/hello":
			fmt.Fprint(w, "hello")
		case "/big":
			fmt.Fprint(w, strings.Repeat("y", 3<<20))
		case "/slow":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			slowClosed <- struct{}{}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, slowClosed
}

// TestExamplesConformance runs the conformance suite against the example
// plugins, as examples/plugins/kernel.yaml configures them (their pins
// included), on a local server and a copy of the data directory.
func TestExamplesConformance(t *testing.T) {
	t.Parallel()
	examples := examplePlugins(t)
	t.Run("typescript/http_get", func(t *testing.T) {
		artifact(t, "bin/plugins/http_get/agentkernel.lock")
		srv, slowClosed := exampleServer(t)
		host := strings.TrimPrefix(srv.URL, "http://")
		downloads := t.TempDir()
		cfg := examples["http"]
		cfg.Interpreter.Path = node(t)
		cfg.Dir = ""
		cfg.Args = []string{"--allow", host, "--dir", downloads}
		cfg.Sandbox = sandbox.Grant{Net: &sandbox.Net{Connect: []uint16{listenPort(t, srv)}},
			FS: []sandbox.FSRule{{Path: downloads, Mode: "rw"}}}
		sdktest.Conformance{
			Plugin:   cfg,
			Echo:     sdktest.Probe{Tool: "http_get", Args: fmt.Sprintf(`{"url":%q}`, srv.URL+"/hello")},
			EchoWant: "hello",
			// Its host, under another name: not on the allowlist.
			Fail:     sdktest.Probe{Tool: "http_get", Args: fmt.Sprintf(`{"url":%q}`, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/hello")},
			FailCode: "permission_denied",
			Progress: sdktest.Probe{Tool: "http_get", Args: fmt.Sprintf(`{"url":%q}`, srv.URL+"/sales.csv")},
			Block:    sdktest.Probe{Tool: "http_get", Args: fmt.Sprintf(`{"url":%q}`, srv.URL+"/slow")},
			Stopped: func(t *testing.T) {
				select { // the server saw the plugin hang up
				case <-slowClosed:
				case <-time.After(20 * time.Second):
					t.Fatal("the cancelled request is still open")
				}
			},
			Large:  sdktest.Probe{Tool: "http_get", Args: fmt.Sprintf(`{"url":%q,"max_bytes":4000000}`, srv.URL+"/big")},
			Effect: sdktest.Probe{Tool: "http_download", Args: fmt.Sprintf(`{"url":%q,"path":"sub/hello.txt"}`, srv.URL+"/hello")},
		}.Run(t)
	})
	t.Run("python/csv_query", func(t *testing.T) {
		needPython(t)
		data := t.TempDir()
		sales := filepath.Join(data, "sales.csv")
		if err := os.WriteFile(sales, []byte(readFile(t, filepath.Join(root, "examples/plugins/data/sales.csv"))), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour) // written before the round the suite starts
		if err := os.Chtimes(sales, old, old); err != nil {
			t.Fatal(err)
		}
		cfg := examples["csv"]
		cfg.Dir = ""
		cfg.Args = []string{"--data", data}
		cfg.Sandbox = sandbox.Grant{FS: []sandbox.FSRule{{Path: data, Mode: "rw"}}}
		sdktest.Conformance{
			Plugin:   cfg,
			Echo:     sdktest.Probe{Tool: "csv_query", Args: `{"sql":"SELECT count(*) AS n FROM sales"}`},
			EchoWant: "n\n6\n",
			Fail:     sdktest.Probe{Tool: "csv_query", Args: `{"sql":"SELECT 1","files":["nope.csv"]}`},
			FailCode: "not_found",
			Progress: sdktest.Probe{Tool: "csv_query", Args: `{"sql":"SELECT 1"}`},
			Block:    sdktest.Probe{Tool: "csv_query", Args: `{"sql":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c","files":["sales.csv"]}`},
			Large:    sdktest.Probe{Tool: "csv_query", Args: `{"sql":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) SELECT printf('%08d', x) FROM c","max_rows":300000}`},
			Effect:   sdktest.Probe{Tool: "csv_append", Args: `{"file":"sales.csv","row":{"date":"2026-01-09","region":"west","units":1,"price":2.5}}`},
		}.Run(t)
	})
}

// listenPort is the TCP port srv listens on.
func listenPort(t testing.TB, srv *httptest.Server) uint16 {
	t.Helper()
	var port uint16
	if _, err := fmt.Sscanf(srv.URL[strings.LastIndex(srv.URL, ":")+1:], "%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestExamplePins: examples/plugins/kernel.yaml pins the example plugins
// as built (http_get) and as committed (csv_query, whose lock must be
// current).
func TestExamplePins(t *testing.T) {
	examples := examplePlugins(t)
	for name, dir := range map[string]string{"http": "bin/plugins/http_get", "csv": "examples/plugins/python/csv_query"} {
		lock := artifact(t, filepath.Join(dir, subprocess.LockFile))
		sum, err := sdktest.FileSHA256(lock)
		if err != nil {
			t.Fatal(err)
		}
		if pin := examples[name].SHA256; pin != sum {
			t.Errorf("examples/plugins/kernel.yaml pins plugin %s as %s, but its lock %s has the sha256 %s: after checking the change, update the pin", name, pin, lock, sum)
		}
		now, err := subprocess.LockSHA256(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if now != sum {
			t.Errorf("%s is stale: its files changed since it was written; run `bin/kernel plugins lock %s` and update the pin of plugin %s in examples/plugins/kernel.yaml", lock, dir, name)
		}
	}
}
