package langtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleScriptedRun runs examples/plugins/kernel.yaml and
// examples/plugins/script.yaml with the kernel binary, as its comment
// says, against a local server instead of 127.0.0.1:8080: the scripted
// model downloads the sales report with the TypeScript plugin and queries
// it with the Python one.
func TestExampleScriptedRun(t *testing.T) {
	t.Parallel()
	kernelBin := artifact(t, "bin/kernel")
	artifact(t, "bin/plugins/http_get/agentkernel.lock")
	needPython(t)
	srv, _ := exampleServer(t)
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The same file, moved: its relative paths now point into the
	// repository, and the address is the test server's.
	conf := strings.NewReplacer(
		"127.0.0.1:8080", addr,
		"connect: [8080]", "connect: ["+addr[strings.LastIndex(addr, ":")+1:]+"]",
		"path: ../../bin/", "path: "+root+"/bin/",
		"path: python/", "path: "+root+"/examples/plugins/python/",
		"interpreter: {path: /usr/bin/node}", "interpreter: {path: "+node(t)+"}",
	).Replace(readFile(t, filepath.Join(root, "examples/plugins/kernel.yaml")))
	if !strings.Contains(conf, addr) || !strings.Contains(conf, root+"/bin/plugins/http_get/plugin.js") {
		t.Fatalf("examples/plugins/kernel.yaml changed shape; update this test:\n%s", conf)
	}
	script := strings.ReplaceAll(readFile(t, filepath.Join(root, "examples/plugins/script.yaml")), "127.0.0.1:8080", addr)
	for name, text := range map[string]string{"kernel.yaml": conf, "script.yaml": script} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(kernelBin, "run", "--config", filepath.Join(dir, "kernel.yaml"), "--script", filepath.Join(dir, "script.yaml"), "Which region sold most?")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir+"/config", "XDG_DATA_HOME="+dir+"/share", "XDG_CACHE_HOME="+dir+"/cache", "XDG_STATE_HOME="+dir+"/state")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kernel run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"✓ http.http_download", "… 200 OK", "✓ csv.csv_query", "… loaded report.csv: 6 rows", "completed"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the run's progress lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "The north region sold the most: 24 units.") {
		t.Errorf("the answer: %s", stdout.String())
	}
	if got := readFile(t, filepath.Join(data, "report.csv")); got != readFile(t, filepath.Join(root, "examples/plugins/data/sales.csv")) {
		t.Errorf("report.csv = %q", got)
	}
}
