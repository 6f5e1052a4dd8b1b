package openai

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

// hangLimit bounds any single Stream call in these tests: a call that takes
// longer has hung. It is a guard, not a performance assertion.
const hangLimit = 30 * time.Second

// result is what one Stream call produced, as the golden files record it.
type result struct {
	Deltas   []goldenDelta   `json:"deltas"`
	Response kernel.Response `json:"response"`
}

type goldenDelta struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// collector gathers the deltas emit receives.
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

func (c *collector) golden() []goldenDelta {
	out := make([]goldenDelta, len(c.deltas))
	for i, d := range c.deltas {
		k := "text"
		if d.Kind == kernel.DeltaReasoning {
			k = "reasoning"
		}
		out[i] = goldenDelta{Kind: k, Text: d.Text}
	}
	return out
}

// stream runs p.Stream under the hang guard.
func stream(t *testing.T, ctx context.Context, p *Provider, req kernel.Request, emit func(kernel.Delta)) (kernel.Response, error) {
	t.Helper()
	type out struct {
		resp kernel.Response
		err  error
	}
	done := make(chan out, 1)
	go func() {
		resp, err := p.Stream(ctx, req, emit)
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

// providerError asserts that err is a *kernel.ProviderError and returns it.
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

// checkGolden compares got (marshalled as indented JSON) with
// testdata/name, or rewrites the file under -update.
func checkGolden(t *testing.T, name string, got any) {
	t.Helper()
	var b []byte
	switch v := got.(type) {
	case []byte: // already JSON: indent it
		var buf bytes.Buffer
		if err := json.Indent(&buf, v, "", "  "); err != nil {
			t.Fatalf("indent %s: %v", name, err)
		}
		b = buf.Bytes()
	default:
		var err error
		if b, err = json.MarshalIndent(v, "", "  "); err != nil {
			t.Fatal(err)
		}
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the golden file (run go test -update after checking the change)\n--- got\n%s\n--- want\n%s", path, b, want)
	}
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// offered are the tools most tests offer; the recorded streams call them by
// their wire names.
var offered = []kernel.ToolSpec{
	{Name: "get_weather", Description: "Current weather for a city.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)},
	{Name: "fs.read_file", Description: "Read a file in the workspace.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "fs.list_dir", Description: "List a directory.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)},
	{Name: "web.search", Description: "Search the web.", Tier: kernel.TierReadOnly,
		Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","maximum":9007199254740993}}}`)},
}

func userRequest(text string, tools []kernel.ToolSpec) kernel.Request {
	return kernel.Request{
		Model: "gpt-4o-mini",
		Messages: []kernel.Message{
			{Role: kernel.RoleSystem, Content: "You are a helpful assistant."},
			{Role: kernel.RoleUser, Content: text},
		},
		Tools: tools,
	}
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
