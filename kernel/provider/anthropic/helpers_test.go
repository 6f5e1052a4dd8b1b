package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// hangLimit bounds a Stream call in these tests: longer means it hangs. A
// guard, not a performance assertion.
const hangLimit = 30 * time.Second

type collector struct{ deltas []kernel.Delta }

func (c *collector) emit(d kernel.Delta) { c.deltas = append(c.deltas, d) }

func (c *collector) text(kind kernel.DeltaKind) string {
	var sb strings.Builder
	for _, d := range c.deltas {
		if d.Kind == kind {
			sb.WriteString(d.Text)
		}
	}
	return sb.String()
}

func stream(t *testing.T, p *Provider, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	t.Helper()
	type out struct {
		resp kernel.Response
		err  error
	}
	done := make(chan out, 1)
	go func() {
		resp, err := p.Stream(context.Background(), req, emit)
		done <- out{resp, err}
	}()
	select {
	case o := <-done:
		return o.resp, o.err
	case <-time.After(hangLimit):
		t.Fatalf("Stream did not return within %s: it hangs", hangLimit)
		return kernel.Response{}, nil
	}
}

func providerError(t *testing.T, err error) *kernel.ProviderError {
	t.Helper()
	if err == nil {
		t.Fatal("Stream succeeded, want an error")
	}
	var pe *kernel.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *kernel.ProviderError", err, err)
	}
	if pe.Provider != Name {
		t.Errorf("Provider = %q, want %q", pe.Provider, Name)
	}
	return pe
}

// checkGolden compares got (JSON, indented for reading) with testdata/name.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("indent %s: %v", name, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (run go test -update after checking the change)\n--- got\n%s\n--- want\n%s", path, buf.Bytes(), want)
	}
	// The file is indented for reading; compacted, it is the exact bytes.
	var exact bytes.Buffer
	if err := json.Compact(&exact, want); err != nil || !bytes.Equal(exact.Bytes(), got) {
		t.Errorf("the request's bytes are not the golden file's, compacted (%v)", err)
	}
}

var weather = kernel.ToolSpec{Name: "get_weather", Description: "Current weather for a city.", Tier: kernel.TierReadOnly,
	Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)}

var fsTools = []kernel.ToolSpec{
	{Name: "fs.read_file", Description: "Read a file in the workspace.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "fs.list_dir", Description: "List a directory.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)},
}

// localProvider is a Provider for a loopback test server, with no key.
func localProvider(t testing.TB, baseURL string, cfg Config) *Provider {
	t.Helper()
	cfg.BaseURL = baseURL
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "AGENTKERNEL_TEST_UNSET_KEY"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
