package sdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentkernel/agentkernel/plugins/subprocess"
	"github.com/agentkernel/agentkernel/sdk/sdktest"
)

// readmeBlock returns the code block of README.md that follows the marker
// "<!-- readme-test: name -->".
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- readme-test: " + regexp.QuoteMeta(name) + " -->\n```[a-z]*\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("README.md has no block marked %q", name)
	}
	return string(m[1])
}

// pluginGoMod is the README plugin's go.mod as a test can build it offline:
// the main module's go.mod with the module renamed, agentkernel required and
// replaced by the local tree. Keeping the main module's whole require block
// (indirect requirements included) pins every module to the version the main
// module resolved, so the build loads no go.mod the main module's build did
// not; what `go mod tidy` would write for a real plugin is a subset of it.
func pluginGoMod(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	mod := string(b)
	re := regexp.MustCompile(`(?m)^module\s+\S+\s*$`)
	if !re.MatchString(mod) {
		return "", fmt.Errorf("%s/go.mod has no module line", root)
	}
	return re.ReplaceAllString(mod, "module example.com/hello-plugin") +
		"\nrequire github.com/agentkernel/agentkernel v0.0.0\n\nreplace github.com/agentkernel/agentkernel => " + root + "\n", nil
}

// TestReadme builds the README's plugin the way the README says (a module
// of its own that requires agentkernel through a replace directive; the
// repository's go.sum stands in for `go mod tidy`, which would need the
// network), then loads it with the README's kernel.yaml entry.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod, err := pluginGoMod(root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": readmeBlock(t, "main.go")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The module's requirements are the main module's, resolved: building
	// it needs exactly the modules building this test needed, so it never
	// reaches for one the module cache happens to lack (and the proxy is off
	// to prove it: no test touches the network).
	t.Setenv("GOFLAGS", "-mod=readonly")
	t.Setenv("GOPROXY", "off")
	bin := filepath.Join(dir, "hello-plugin")
	if err := sdktest.BuildTo(bin, dir); err != nil {
		t.Fatal(err)
	}
	hash, err := sdktest.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}

	var conf struct {
		Tools struct {
			Plugins []subprocess.PluginConfig `yaml:"plugins"`
		} `yaml:"tools"`
	}
	if err := yaml.Unmarshal([]byte(readmeBlock(t, "kernel.yaml")), &conf); err != nil {
		t.Fatalf("README kernel.yaml: %v", err)
	}
	if len(conf.Tools.Plugins) != 1 {
		t.Fatalf("README kernel.yaml: %+v", conf)
	}
	cfg := conf.Tools.Plugins[0]
	if err := cfg.Validate(); err != nil {
		t.Fatalf("README kernel.yaml: %v", err)
	}
	cfg.Path, cfg.SHA256 = bin, hash // step 4: your path, your hash

	h := subprocess.NewHost(subprocess.HostConfig{})
	defer h.Close()
	rep, err := h.Verify(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tools) != 2 || rep.Tools[0].Name != "hello.greet" || rep.Tools[1].Name != "hello.count_words" {
		t.Fatalf("tools = %+v", rep.Tools)
	}
	p := sdktest.Exec(t, cfg)
	if res, err := p.Call(context.Background(), "greet", `{"name":"Ada"}`); err != nil || res.Content != "Hello, Ada!" {
		t.Errorf("greet = %q, %v", res.Content, err)
	}
	if res, err := p.Call(context.Background(), "count_words", `{"text":"a b c"}`); err != nil || res.Content != `{"words":3,"lines":0}` {
		t.Errorf("count_words = %q, %v", res.Content, err)
	}
}
